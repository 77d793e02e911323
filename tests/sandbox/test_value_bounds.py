"""Whatever a submission returns, the grader keeps bounded plain data (graders.sandbox.wire).

A submission once answered every field with a 4,299-digit int: the grader's own code failed
with OverflowError in every test, results.json grew to 3.33 MB and the class report of a
whole regrade was never written. The worker's cuts are not enough: it runs the student's
code, which can undo them, so the grader bounds every reply's value where it enters.
"""

from __future__ import annotations

import json
import math
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.sandbox import worker_main
from graders.sandbox.runner import CallOutcome, StudentRunner
from graders.sandbox.wire import (
    MARKER_ROOM,
    MAX_ITEMS,
    MAX_TEXT,
    bounded,
    bounded_text,
    huge_integer_text,
)

#: The most characters one bounded text holds: the kept part and the marker.
MAX_BOUNDED_TEXT = MAX_TEXT + MARKER_ROOM


def test_the_grader_keeps_what_the_worker_cuts_and_no_more() -> None:
    assert worker_main.MAX_TEXT == MAX_TEXT
    assert worker_main.MAX_SEQUENCE == MAX_ITEMS
    cut_by_worker = worker_main.bounded_text("x" * 10**6)
    assert bounded_text(cut_by_worker) == cut_by_worker


def test_an_int_too_large_for_a_float_becomes_a_short_text() -> None:
    assert bounded(10**4298 + 7) == "a 4,299-digit integer"
    assert bounded(-(10**400)) == "a negative 401-digit integer"
    assert huge_integer_text(2**1024) == "a 309-digit integer"


def test_an_int_a_float_can_hold_is_kept_as_it_is() -> None:
    largest = int(sys.float_info.max)
    assert bounded(largest) == largest
    assert bounded(-largest) == -largest
    assert bounded(7) == 7
    assert bounded(True) is True


def test_a_long_text_is_cut_with_the_workers_marker() -> None:
    assert bounded("y" * 60_000) == "y" * MAX_TEXT + "\u2026 [truncated, 60000 chars]"
    assert bounded("y" * MAX_BOUNDED_TEXT) == "y" * MAX_BOUNDED_TEXT


def test_lists_objects_and_their_keys_are_cut() -> None:
    value = bounded({"k" * 5000: list(range(5000)), **{str(i): i for i in range(5000)}})
    assert len(value) == MAX_ITEMS
    key = next(iter(value))
    assert key == bounded_text("k" * 5000)
    assert value[key] == list(range(MAX_ITEMS))


JSON_SCALARS = (st.none() | st.booleans() | st.floats(allow_nan=True)
                | st.integers(min_value=-(10**4299) + 1, max_value=10**4299 - 1)
                | st.text(max_size=2000))
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=700), inner,
                                                                max_size=5),
    max_leaves=20)


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _leaves(item)
    else:
        yield value


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(JSON_VALUES)
def test_any_reply_value_is_bounded_plain_data_every_number_a_float_can_hold(
        value: Any) -> None:
    kept = bounded(json.loads(json.dumps(value)))
    for leaf in _leaves(kept):
        if isinstance(leaf, int) and not isinstance(leaf, bool):
            assert math.isfinite(float(leaf))
        if isinstance(leaf, str):
            assert len(leaf) <= MAX_BOUNDED_TEXT
    assert json.dumps(bounded(kept)) == json.dumps(kept)  # what is kept is not cut again


# --- in a worker: the grader bounds what a submission sends, its cuts undone or not ----

UNDOING = textwrap.dedent("""
    import sys

    def huge():
        return 10**4298 + 7

    def fields():
        return {"total_ms": -(10**4000), "passes": 3}

    def uncut():
        worker = sys.modules["__main__"]  # the worker's own module: its cuts undone
        worker.MAX_TEXT = 10**9
        return "z" * 60_000
""").encode()


@pytest.fixture(scope="module")
def runner() -> Iterator[StudentRunner]:
    with StudentRunner(UNDOING) as shared:
        yield shared


def ok_value(outcome: CallOutcome) -> Any:
    assert outcome.status == "ok", outcome
    return outcome.value


def test_a_huge_int_reaches_the_grader_as_a_short_text(runner: StudentRunner) -> None:
    assert ok_value(runner.call("huge")) == "a 4,299-digit integer"
    assert ok_value(runner.call("fields", fields=["total_ms", "passes"])) == {
        "total_ms": "a negative 4,001-digit integer", "passes": 3}


def test_a_text_the_submission_kept_the_worker_from_cutting_is_cut_by_the_grader(
        runner: StudentRunner) -> None:
    assert ok_value(runner.call("uncut")) == "z" * MAX_TEXT + "\u2026 [truncated, 60000 chars]"
