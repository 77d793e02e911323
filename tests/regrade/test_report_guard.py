"""One submission's values never stop the class report: the report step is guarded like
the grading (the submission is left out, with a line saying why, and the class still gets
class.html, report.json and report.md).

A regrade once crashed for the whole class with OverflowError in the mistake clusters:
grades.csv was written, the class report never was.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from graders.regrade import command
from graders.regrade.report import GradedSubmission
from graders.regrade.roster import Submitter


def failed_test(got: Any) -> dict[str, Any]:
    """A failed serve test as results.json holds it, its wrong answer ``got``."""
    return {"name": "serve matches the reference", "score": 0.0, "max_score": 8.0,
            "status": "failed", "tags": ["serve"], "visibility": "visible",
            "output": "serve: 1 of 1 cases failed",
            "extra_data": {"nodeid": "suite::test_serve",
                           "failed_cases": [{"case": "lab", "inputs": {"arg0": 256},
                                             "fields": {"total_ms": [5632.0, got]}}]}}


def entry(ident: str, got: Any) -> GradedSubmission:
    return GradedSubmission(ident, (Submitter(ident.title()),), "graded", "",
                            {"score": 0.0, "tests": [failed_test(got)],
                             "extra_data": {"max_score": 8.0}})


def test_a_submission_whose_part_of_the_report_fails_is_left_out_and_the_class_report_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # whatever breaks the report for one submission (once an int too large for a float,
    # in the clusters) is met submission by submission: the others keep their report
    clustering = command.cluster

    def breaks_on_bob(entries: Sequence[GradedSubmission], catalogue: Any) -> Any:
        if any(entry.id == "bob" for entry in entries):
            raise OverflowError("int too large to convert to float")
        return clustering(entries, catalogue)

    monkeypatch.setattr(command, "cluster", breaks_on_bob)
    entries = [entry("ann", 2816.0), entry("bob", 2816.0), entry("cat", 2816.0)]
    written, failures = command.write_outputs(tmp_path, entries, histogram=False, names=True)
    assert {path.name for path in written} == {"grades.csv", "report.json", "class.html",
                                               "report.md"}
    [failure] = failures
    assert failure.startswith("the class report leaves out 'bob': OverflowError: ")
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    [found] = report["clusters"]
    assert found["submissions"] == 2
    assert "bob" not in (tmp_path / "class.html").read_text(encoding="utf-8")
    assert "bob" in (tmp_path / "grades.csv").read_text(encoding="utf-8")


def test_an_int_too_large_for_a_float_breaks_no_report(tmp_path: Path) -> None:
    # as a results.json from before the grader bounded values holds it (or one edited by
    # hand): the clusters read it without converting it
    entries = [entry("ann", 2816.0), entry("bob", 10**4298 + 7), entry("cat", 2816.0)]
    written, failures = command.write_outputs(tmp_path, entries, histogram=False, names=True)
    assert failures == []
    assert {path.name for path in written} == {"grades.csv", "report.json", "class.html",
                                               "report.md"}
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert sum(found["submissions"] for found in report["clusters"]) == 3


def test_a_class_whose_report_builds_loses_nobody(tmp_path: Path) -> None:
    entries = [entry("ann", 2816.0), entry("bob", "a 4,299-digit integer")]
    written, failures = command.write_outputs(tmp_path, entries, histogram=False, names=True)
    assert failures == []
    assert (tmp_path / "class.html").is_file()
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert len(report["clusters"]) == 2


def test_a_run_without_a_histogram_removes_the_earlier_runs(tmp_path: Path) -> None:
    entries = [entry("ann", 2816.0), entry("cat", 2816.0)]
    (tmp_path / "histogram.png").write_bytes(b"an earlier run's picture")
    written, failures = command.write_outputs(tmp_path, entries, histogram=False, names=True)
    assert failures == []
    assert not (tmp_path / "histogram.png").exists()
    assert "histogram.png" not in (tmp_path / "report.md").read_text(encoding="utf-8")
    assert tmp_path / "histogram.png" not in written
