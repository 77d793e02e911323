"""The page's test feedback is bounded in all (graders.feedback.budget): whole while it
fits, cut to a fair share with a marker otherwise.

Hostile answers (a 500-character text in every field of every case) once made a 2 MB
page, and 4,299-digit integers a 10 MB one.
"""

from __future__ import annotations

import html
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from graders.feedback.budget import (
    MAX_FEEDBACK_BYTES,
    MAX_FIRST_CASE_BYTES,
    feedback_budget,
    fitted,
    shares,
)
from graders.feedback.render import build_page, esc


def failed(number: int, output: str) -> dict[str, Any]:
    return {"name": f"test {number}", "score": 0.0, "max_score": 1.0, "status": "failed",
            "output": output, "tags": ["serve"], "visibility": "visible"}


def document(outputs: list[str]) -> dict[str, Any]:
    return {"score": 0.0, "execution_time": 1.0, "output": "Graded.",
            "stdout_visibility": "hidden", "extra_data": {"max_score": 100.0},
            "tests": [failed(number, output) for number, output in enumerate(outputs)]}


def size(text: str) -> int:
    return len(text.encode("utf-8"))


def test_feedback_that_fits_is_shown_whole() -> None:
    outputs = ["case 'a': expected 1, got 2 <b>"] * 3
    page = build_page(document(outputs), [])
    assert page.count(f"<pre>{esc(outputs[0])}</pre>") == 3
    assert "[cut: " not in page


def test_hostile_feedback_is_cut_to_the_bound_with_a_marker() -> None:
    # quotes: each character is six once escaped ("&#x27;")
    outputs = ["'" * 300_000] * 44
    page = build_page(document(outputs), [])
    assert size(page) < MAX_FEEDBACK_BYTES + MAX_FIRST_CASE_BYTES + 64 * 1024
    assert page.count("more characters]</pre>") == 45  # and the first case, at the top


def test_a_short_test_keeps_its_feedback_whole_beside_long_ones() -> None:
    short = "case 'defaults': expected 5632, got 'a 4,299-digit integer'"
    page = build_page(document(["x" * 2 * MAX_FEEDBACK_BYTES, short]), [])
    assert f"<pre>{esc(short)}</pre>" in page


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(st.lists(st.integers(min_value=0, max_value=10**7), max_size=60),
       st.integers(min_value=0, max_value=10**7))
def test_shares_never_exceed_the_budget_nor_what_a_test_needs(
        needs: list[int], budget: int) -> None:
    allotted = shares(dict(enumerate(needs)), budget)
    assert sum(allotted.values()) <= budget
    assert all(allotted[key] <= need for key, need in enumerate(needs))
    if sum(needs) <= budget:
        assert allotted == dict(enumerate(needs))


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(st.text(max_size=3000), st.integers(min_value=300, max_value=5000))
def test_a_cut_text_fits_its_share_and_unescapes_to_a_start_of_the_text(
        text: str, budget: int) -> None:
    shown = fitted(text, budget, esc)
    assert size(shown) <= budget or size(esc(text)) <= budget
    kept = html.unescape(shown).split("\n\u2026 [cut: ")[0]
    assert esc(text).startswith(esc(kept)) or text.startswith(kept)


def test_each_test_gets_its_own_escaped_feedback() -> None:
    shown = feedback_budget({0: "<a>", 3: "b & c"}, esc)
    assert shown == {0: "&lt;a&gt;", 3: "b &amp; c"}
