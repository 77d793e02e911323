"""Output, reply size and time, graded with the CLI the way a user grades a submission.

Four cases of ``tests/adversarial`` (see its README) are graded once each by ``python -m
graders grade FOLDER --results FILE`` from a neutral working folder, two at a time, with
``helpers.grade_case``:

- ``print_per_request`` and ``flood_output_gigabytes`` are honest code that prints (one
  line per request; ~1 MB per call by print and raw writes to fds 1 and 2): printing
  never costs a point, so they score exactly 100.0;
- ``huge_string_fields`` answers ~1 MB plain strings in every result field: the texts are
  cut in the worker, so results.json stays under 1 MiB;
- ``slow_calls`` is honest code that sleeps 0.25 s in every call: the total time budget
  ends its grading within ``Limits.worst_case_s`` (plus the grader's own start-up and
  reports); the tests it completed keep their points and the others fail with "time
  budget exhausted". It takes the whole default budget (150 s), so this module takes
  about three minutes on 2 cores.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from helpers import ADVERSARIAL, MAX_RESULTS_BYTES, GradedCase, grade_case, reject_constant

from graders.sandbox.runner import Limits

pytestmark = pytest.mark.slow

LIMITS = Limits()
PRINTING = ("print_per_request", "flood_output_gigabytes")
HUGE = "huge_string_fields"
SLOW = "slow_calls"
CASES = (SLOW, *PRINTING, HUGE)  # the slow one first: it overlaps the three others
#: Seconds a grading may take beyond the runner's worst case: starting pytest, loading
#: tracks, the grader's own work between calls, and writing the reports.
GRADER_OVERHEAD_S = 30.0
#: The length of the strings huge_string_fields answers (a JSON-looking line and 1 MiB).
HUGE_LENGTH = len('{"score": 100.0, "status": "passed"}\n') + 1024**2
BUDGET_MESSAGE = "time budget exhausted: "


@pytest.fixture(scope="module")
def graded() -> Iterator[dict[str, GradedCase]]:
    """Each case graded once, two at a time, in a folder the sandbox user can traverse."""
    base = Path(tempfile.mkdtemp(prefix="adversarial-runner-", dir="/tmp"))
    base.chmod(0o755)
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            runs = list(pool.map(lambda name: grade_case(name, ADVERSARIAL / name, base), CASES))
        yield {run.name: run for run in runs}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def results(run: GradedCase) -> dict[str, Any]:
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stderr[-2000:]}"
    assert "INTERNALERROR" not in run.stdout + run.stderr
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    assert run.text, "no results.json"
    document: dict[str, Any] = json.loads(run.text, parse_constant=reject_constant)
    assert document["extra_data"]["schema_version"] == 1
    for test in document["tests"]:
        assert 0 <= test["score"] <= test["max_score"], test["name"]
    return document


def lost(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [test for test in document["tests"] if test["score"] < test["max_score"]]


@pytest.mark.parametrize("name", CASES)
def test_the_case_is_graded_to_completion_with_valid_results_and_no_survivor(
        graded: dict[str, GradedCase], name: str) -> None:
    results(graded[name])
    assert len(graded[name].text.encode()) < MAX_RESULTS_BYTES
    assert graded[name].survivors == ()
    assert graded[name].left_behind == ()


@pytest.mark.parametrize("name", PRINTING)
def test_printing_never_costs_a_point(graded: dict[str, GradedCase], name: str) -> None:
    document = results(graded[name])
    assert document["score"] == 100.0, [test["output"][:300] for test in lost(document)]


@pytest.mark.parametrize("name", PRINTING)
def test_printing_costs_no_hang_budget_and_little_time(
        graded: dict[str, GradedCase], name: str) -> None:
    # a flood of ~1.6 GB is drained as it comes: the grading is nowhere near a hang
    assert graded[name].elapsed_s < LIMITS.hang_worst_case_s


def test_huge_string_fields_are_cut_and_results_json_stays_small(
        graded: dict[str, GradedCase]) -> None:
    run = graded[HUGE]
    document = results(run)
    assert len(run.text.encode()) < MAX_RESULTS_BYTES
    assert document["score"] == 0.0  # every field is a string, never the number expected
    # cut with a visible marker: the worker's ("[truncated, N chars]"), or the grader's
    # own when it shortens a value in feedback ("[cut: N more characters]")
    assert f"[truncated, {HUGE_LENGTH} chars]" in run.text or "[cut: " in run.text


def test_slow_calls_end_within_the_worst_case_and_keep_the_points_they_earned(
        graded: dict[str, GradedCase]) -> None:
    run = graded[SLOW]
    document = results(run)
    assert run.elapsed_s < LIMITS.worst_case_s + GRADER_OVERHEAD_S
    earned = [test for test in document["tests"] if test["score"] > 0]
    assert earned, "the tests that ran before the budget ended must keep their points"
    assert lost(document), "0.25 s per call cannot fit the whole grading in the budget"
    for test in lost(document):
        if test["visibility"] == "visible":
            assert BUDGET_MESSAGE in test["output"], test["output"][:500]
    assert 0.0 < document["score"] < 100.0
