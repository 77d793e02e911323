"""Every blind implementation kept in ``tests/blind/`` (written from the student kit
alone) gets exactly the maximum from the official grader, hidden tests and unseen inputs
included: what the template says is all a student needs."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import TESTS, graders, load

BLIND = sorted((TESTS / "blind").glob("*/serving.py"))


def test_the_blind_hold_outs_are_there() -> None:
    assert BLIND, "tests/blind/ holds no serving.py"


@pytest.mark.parametrize("submission", BLIND, ids=[path.parent.name for path in BLIND])
def test_a_blind_implementation_gets_exactly_the_maximum(submission: Path,
                                                          tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    run = graders("grade", submission, "--results", results, "-q")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    document = load(results)
    assert document["score"] == document["extra_data"]["max_score"] == 100.0
    assert {test["status"] for test in document["tests"]} == {"passed"}
    hidden = [test for test in document["tests"] if test["visibility"] != "visible"]
    assert hidden  # the official grade: the hidden tests ran too
