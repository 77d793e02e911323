"""A falsified invariant shows the lab's answer beside the student's, and why.

When the function's own visible cases fail too, the failure follows from them and says so
(no hint of its own: the cases' hints name the cause); when they all pass, the example
gets the single-case diagnosis the visible cases get.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers import CORPUS

from graders.expected.reference import to_plain
from graders.grading.cases import RESULT_FIELDS
from graders.grading.checks import Answer, Explanation, Student
from graders.sandbox.calls import CallOutcome, CallRequest
from graders.suite import test_invariants as suite

CORRECT = CORPUS / "correct" / "serving.py"
CEIL = "passes = math.ceil(n_requests / batch_size)"
#: serve right on every visible case (none has n of 3000 or more), wrong above.
FLOOR_ABOVE_3000 = f"{CEIL} if n_requests < 3000 else n_requests // batch_size"
#: serve wrong on its visible cases too.
FLOOR = "passes = n_requests // batch_size"


class ExplainedStudent(Student):
    """The reference with ``passes`` floored above 3000 requests; keeps what it is asked
    to explain."""

    def __init__(self, explain: Callable[[Sequence[Answer]], Explanation]) -> None:
        super().__init__(runner=None, test_name="test_passes_round_up",  # type: ignore[arg-type]
                         explain=explain)

    def _call_many(self, requests: list[CallRequest]) -> Generator[CallOutcome, None, None]:
        import reference

        for request in requests:
            value = to_plain(getattr(reference, request.function)(
                *request.args, **(request.kwargs or {})), RESULT_FIELDS[request.function])
            if request.function == "serve" and request.args[0] >= 3000:
                value["passes"] = request.args[0] // request.args[1]
            yield CallOutcome("ok", value=value)


def test_a_falsified_example_is_explained_by_its_own_answers_only() -> None:
    explained: list[list[tuple[Any, ...]]] = []

    def explain(answers: Sequence[Answer]) -> Explanation:
        explained.append([answer.args for answer in answers])
        return Explanation("; the suffix", ("the lab's line",))

    with pytest.raises(AssertionError) as failure:
        suite.test_passes_round_up(student=ExplainedStudent(explain), invariant_examples=25)
    message = str(failure.value)
    first, explanation = message.split("\n")
    assert "falsifying example: n=" in first
    assert first.endswith("); the suffix")
    assert explanation == "  the lab's line"
    # one example's calls, and they are the falsifying one's: its n is at least 3000
    (asked,) = explained
    assert len(asked) == 1
    assert asked[0][0] >= 3000
    assert f"serve({asked[0][0]}, {asked[0][1]})" in first


def test_an_example_that_holds_is_never_explained() -> None:
    def explain(answers: Sequence[Answer]) -> Explanation:
        raise AssertionError("explained an example that holds")

    student = ExplainedStudent(explain)
    student._call_many = lambda requests: (  # type: ignore[method-assign]
        CallOutcome("ok", value=to_plain(__import__("reference").serve(*r.args), ("total_ms",
                    "throughput_rps", "passes"))) for r in requests)
    suite.test_passes_round_up(student=student, invariant_examples=25)


@pytest.fixture
def submission(pytester: pytest.Pytester) -> Callable[[str], Path]:
    def write(new: str) -> Path:
        source = CORRECT.read_text(encoding="utf-8")
        assert CEIL in source
        path = pytester.path / "serving.py"
        path.write_text(source.replace(CEIL, new), encoding="utf-8")
        return path

    return write


def invariant_output(pytester: pytest.Pytester, student: Path) -> str:
    results = pytester.path / "results.json"
    pytester.runpytest("--student", str(student), "--grader-results", str(results),
                       "-k", "test_serve or passes_round_up")
    (test,) = [t for t in json.loads(results.read_text(encoding="utf-8"))["tests"]
               if t["name"] == "serve makes ceil(n / B) passes"]
    assert test["score"] == 0
    return str(test["output"])


def test_an_invariant_that_fails_alone_shows_the_lab_answer_and_the_hint(
        pytester: pytest.Pytester, submission: Callable[[str], Path]) -> None:
    output = invariant_output(pytester, submission(FLOOR_ABOVE_3000))
    lines = output.splitlines()
    assert lines[1].startswith("  serve(")
    assert lines[1].endswith(", beside the lab's answer:")
    n, batch = (int(x) for x in lines[1].split("(")[1].split(")")[0].split(", "))
    assert n >= 3000  # the only examples this submission gets wrong
    assert n % batch
    assert lines[2] == f"    passes: expected {-(-n // batch)}, got {n // batch} - wrong value"
    assert lines[3].startswith("      hint: a partly filled last pass is still a pass")
    assert "follows from passes" in lines[4]
    assert "follows from passes" in lines[5]
    assert "failing cases" not in output


def test_an_invariant_whose_function_fails_its_cases_follows_from_them(
        pytester: pytest.Pytester, submission: Callable[[str], Path]) -> None:
    output = invariant_output(pytester, submission(FLOOR))
    # one line: the falsifying example, and the root it follows from (the cases' own hints
    # name the cause)
    (line,) = output.splitlines()
    assert line.startswith("AssertionError: serve(")
    assert "(falsifying example: n=" in line
    assert line.endswith("; this follows from serve's failing cases: fix those first")


def test_a_correct_submission_has_no_invariant_notes(pytester: pytest.Pytester) -> None:
    shutil.copy(CORRECT, pytester.path / "serving.py")
    results = pytester.path / "results.json"
    pytester.runpytest("--student", "serving.py", "--grader-results", str(results))
    document = json.loads(results.read_text(encoding="utf-8"))
    assert document["score"] == 100.0
    assert not [t for t in document["tests"] if "beside the lab" in t["output"]]
