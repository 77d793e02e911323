"""Results integrity: results.json is validated, written only by the grader, and always there."""

from __future__ import annotations

import argparse
import json
import os
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from helpers import CORPUS

from graders.cli import build_parser
from graders.cli import grade as grade_cli
from graders.grading.scoring import TestScore
from graders.plugin.settings import OPTIONS, resolve
from graders.results.reports import (
    grader_failure,
    grader_failure_results,
    gradescope_problems,
    gradescope_results,
    read_valid_results,
    write_results,
)
from graders.sandbox.runner import StudentRunner

CORRECT = CORPUS / "correct"


def score(name: str, earned: int, maximum: int) -> TestScore:
    return TestScore(nodeid=f"suite::{name}", name=name, function="serve", track=None,
                     visibility="visible", max_score=Fraction(maximum),
                     earned=Fraction(earned), status="passed" if earned == maximum else "failed")


def valid_document() -> dict[str, Any]:
    return gradescope_results([score("a", 2, 2), score("b", 1, 3)], execution_time_s=1.0,
                              output="ok")


def strict_load(path: Path) -> Any:
    def reject(constant: str) -> None:
        raise ValueError(constant)

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=reject)


def test_a_document_built_by_the_grader_is_valid() -> None:
    assert gradescope_problems(valid_document()) == []


@pytest.mark.parametrize(("mutate", "problem"), [
    (lambda d: d.update(score=float("nan")), "score must be a finite number"),
    (lambda d: d.update(score=99.0), "score must lie in [0, the sum of max_score]"),
    (lambda d: d.update(score=-1.0), "score must lie in [0, the sum of max_score]"),
    (lambda d: d.update(tests="all"), "tests must be a list"),
    (lambda d: d.update(stdout_visibility="always"), "stdout_visibility must be"),
    (lambda d: d["tests"][0].update(status="ok"), "tests[0].status must be passed or failed"),
    (lambda d: d["tests"][1].update(score=5.0), "tests[1].score must lie in [0, max_score]"),
    (lambda d: d["tests"][0].update(visibility="secret"), "tests[0].visibility must be"),
    (lambda d: d["tests"][0].update(tags=[1]), "tests[0].tags must be a list of strings"),
    (lambda d: d["tests"][0].update(max_score=True), "tests[0].max_score must be a finite"),
    (lambda d: d["tests"][1].update(name=None), "tests[1].name must be a string"),
])
def test_every_break_of_the_gradescope_format_is_named(mutate: Any, problem: str) -> None:
    document = valid_document()
    mutate(document)
    assert any(found.startswith(problem) for found in gradescope_problems(document)), \
        gradescope_problems(document)


def assert_grader_failure(path: Path, reason: str) -> None:
    """``path`` holds a grader-failure record saying ``reason``: no score, no tests, and
    nothing a reader of results could take for a grade."""
    written = strict_load(path)
    assert grader_failure(written) is not None
    assert reason in str(grader_failure(written))
    assert "score" not in written
    assert "tests" not in written
    assert read_valid_results(path) is None
    assert "not your score" in written["output"]


def test_an_invalid_document_is_written_as_a_grader_failure_not_a_zero(tmp_path: Path) -> None:
    document = valid_document()
    document["score"] = 1e9
    write_results(tmp_path / "results.json", document)
    assert_grader_failure(tmp_path / "results.json", "invalid results")


def test_a_grader_failure_record_says_why_and_what_to_do() -> None:
    document = grader_failure_results("boom\nwith a newline")
    assert grader_failure(document) == "boom with a newline"
    assert document["extra_data"]["grader_error"] == "boom with a newline"
    assert "grade it again" in document["what_to_do"]
    assert grader_failure(valid_document()) is None


def grade_args(results: Path) -> argparse.Namespace:
    return build_parser().parse_args(["grade", str(CORRECT), "--results", str(results), "-q"])


def test_the_grading_environment_is_set_for_the_run_and_restored_after_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.setenv("HYPOTHESIS_STORAGE_DIRECTORY", "/elsewhere")
    seen: dict[str, str | None] = {}

    def fake_main(*args: Any, **kwargs: Any) -> pytest.ExitCode:
        for name in ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "HYPOTHESIS_STORAGE_DIRECTORY"):
            seen[name] = os.environ.get(name)
        return pytest.ExitCode.INTERNAL_ERROR

    monkeypatch.setattr(grade_cli.pytest, "main", fake_main)
    grade_cli.run_grade(grade_args(tmp_path / "results.json"))
    assert seen["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1"
    assert str(seen["HYPOTHESIS_STORAGE_DIRECTORY"]).endswith("/.hypothesis")
    assert "PYTEST_DISABLE_PLUGIN_AUTOLOAD" not in os.environ
    assert os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] == "/elsewhere"


def test_a_grader_crash_still_leaves_a_valid_results_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grade_cli.pytest, "main",
                        lambda *args, **kwargs: pytest.ExitCode.INTERNAL_ERROR)
    results = tmp_path / "results.json"
    assert grade_cli.run_grade(grade_args(results)) == grade_cli.GRADER_FAILED
    assert_grader_failure(results, "exit code 3")


def test_a_stale_results_file_is_never_taken_for_this_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results = tmp_path / "results.json"
    results.write_text(json.dumps(gradescope_results(
        [score("forged", 5, 5)], execution_time_s=0.0, output="forged")), encoding="utf-8")
    monkeypatch.setattr(grade_cli.pytest, "main", lambda *args, **kwargs: pytest.ExitCode.OK)
    assert grade_cli.run_grade(grade_args(results)) == grade_cli.GRADER_FAILED
    assert_grader_failure(results, "no valid results")


def test_a_failure_while_building_results_is_a_grader_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from graders.plugin import session as session_module

    def explode(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise RuntimeError("report builder broke")

    monkeypatch.setattr(session_module, "gradescope_results", explode)
    settings = resolve({option.name: (option.default, False) for option in OPTIONS},
                       invocation_dir=tmp_path, ini_dir=tmp_path)
    with StudentRunner(b"") as runner:
        grading = session_module.GradingSession(settings=settings, tracks=(), runner=runner)
        grading.scores["suite::a"] = score("a", 2, 2)
        grading.write_results(tmp_path / "results.json")
    assert_grader_failure(tmp_path / "results.json", "RuntimeError: report builder broke")
