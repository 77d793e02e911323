"""results.json stays within 1 MiB whatever the tests' outputs hold (graders.results.fitting).

The grader's cuts bound characters; JSON writes an emoji as twelve bytes, so the final
document is measured and cut further when it is over the bound.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from graders.results.fitting import MAX_RESULTS_BYTES, OUTPUT_CUTS, encoded_size, fitted

MARKER_END = " more characters, to keep results.json under 1 MiB]"


def result_test(number: int, output: str) -> dict[str, Any]:
    return {"name": f"test {number}", "score": 0.5, "max_score": 2.0, "status": "failed",
            "output": output, "tags": ["serve"], "visibility": "visible",
            "extra_data": {"nodeid": f"suite::test_{number}",
                           "failed_cases": [{"case": str(i), "fields": {"x": [1.0, 2.0]}}
                                            for i in range(8)]}}


def document(outputs: list[str]) -> dict[str, Any]:
    return {"score": 0.5 * len(outputs), "output": "Graded.", "tests":
            [result_test(number, output) for number, output in enumerate(outputs)]}


def test_a_document_within_the_bound_is_written_as_it_is() -> None:
    small = document(["case 'a': expected 1, got 2"] * 48)
    assert fitted(small) is small


def test_emoji_in_every_output_are_cut_to_the_bound_and_the_scores_kept() -> None:
    huge = document(["\U0001F600" * 4000] * 60)  # 48 kB of JSON each
    assert encoded_size(huge) > MAX_RESULTS_BYTES
    kept = fitted(huge)
    assert encoded_size(kept) <= MAX_RESULTS_BYTES
    assert [t["score"] for t in kept["tests"]] == [t["score"] for t in huge["tests"]]
    assert kept["score"] == huge["score"]
    assert all("to keep results.json under 1 MiB]" in t["output"] for t in kept["tests"])
    # cut as little as it takes: the kept cases of the class report stay
    assert all(t["extra_data"]["failed_cases"] for t in kept["tests"])


@settings(max_examples=50, deadline=None, derandomize=True, database=None)
@given(st.lists(st.text(max_size=4000), max_size=60), st.integers(5_000, 400_000))
def test_any_outputs_fit_any_bound_the_rest_of_the_document_fits(
        outputs: list[str], limit: int) -> None:
    full = document(outputs)
    kept = fitted(full, limit)
    if encoded_size(kept) > limit:  # only once everything that can be cut has been
        assert all(len(t["output"]) <= OUTPUT_CUTS[-1] + len(MARKER_END) + 40
                   and "failed_cases" not in t["extra_data"] for t in kept["tests"])
    assert [t["score"] for t in kept["tests"]] == [t["score"] for t in full["tests"]]
    assert [t["name"] for t in kept["tests"]] == [t["name"] for t in full["tests"]]
