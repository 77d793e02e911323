"""The diagnosis's experiments never change a score (graders/plugin/experiments.py): a
probe that hangs costs the grading no strike and no point, and a fault of the diagnosis
itself leaves the score and the single-case hints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import CORPUS

CORRECT = CORPUS / "correct" / "serving.py"
RETURN = "    return ServeResult(total, n_requests / (total / 1000), passes)"
#: serve's total doubled: every visible case of serve fails, so its diagnosis runs
DOUBLED = "    total = 2 * total\n" + RETURN
#: the same, and a hang at one probe's inputs only: the last visible case of serve
#: ("n=100 B=16 overhead=100.0 marginal=10.0") with overhead_ms moved to 1
HANGS = ("    while n_requests == 100 and overhead_ms == 1.0 and marginal_ms == 10.0:\n"
         "        pass\n" + DOUBLED)


def _write(pytester: pytest.Pytester, folder: str, new: str) -> Path:
    source = CORRECT.read_text(encoding="utf-8")
    assert RETURN in source
    path = pytester.mkdir(folder) / "serving.py"
    path.write_text(source.replace(RETURN, new), encoding="utf-8")
    return path


def _grade(pytester: pytest.Pytester, student: Path, *extra: str) -> dict[str, Any]:
    results = student.parent / "results.json"
    pytester.runpytest("--student", str(student), "--grader-results", str(results), *extra)
    document: dict[str, Any] = json.loads(results.read_text(encoding="utf-8"))
    return document


def _scores(document: dict[str, Any]) -> dict[str, float]:
    return {test["extra_data"]["nodeid"]: test["score"] for test in document["tests"]}


def test_a_probe_that_hangs_costs_no_point_and_no_strike(pytester: pytest.Pytester) -> None:
    plain = _grade(pytester, _write(pytester, "plain", DOUBLED))
    hanging = _grade(pytester, _write(pytester, "hanging", HANGS))
    assert plain["score"] < 100
    assert _scores(hanging) == _scores(plain)
    assert hanging["score"] == plain["score"]
    serve = next(t for t in hanging["tests"]
                 if t["extra_data"]["nodeid"].endswith("test_cases.py::test_serve"))
    assert "hint:" in serve["output"]
    assert "not called again" not in json.dumps(hanging)


def test_a_fault_of_the_diagnosis_changes_no_score(pytester: pytest.Pytester) -> None:
    student = _write(pytester, "plain", DOUBLED)
    expected = _scores(_grade(pytester, student))
    # a plugin of this run breaks the diagnosis where the grading calls it
    pytester.makepyfile(break_diagnosis=FAULT)
    pytester.syspathinsert()
    results = student.parent / "faulty.json"
    run = pytester.runpytest_subprocess("-p", "break_diagnosis", "--student", str(student),
                                        "--grader-results", str(results))
    document = json.loads(results.read_text(encoding="utf-8"))
    assert _scores(document) == expected
    said = "\n".join([*run.outlines, *run.errlines])
    assert "the diagnosis of serve failed (RuntimeError: a fault of the diagnosis)" in said
    serve = next(t for t in document["tests"]
                 if t["extra_data"]["nodeid"].endswith("test_cases.py::test_serve"))
    assert "total_ms: expected" in serve["output"]
    assert "2× too large" not in serve["output"]  # the single-case hints, not the finding


FAULT = """
def pytest_configure(config):
    import graders.plugin.session as session

    def broken(*args, **kwargs):
        raise RuntimeError("a fault of the diagnosis")

    session.diagnose_function = broken
"""
