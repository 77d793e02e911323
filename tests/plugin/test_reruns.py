"""pytest's reruns (--lf, --ff, --sw) grade what they run, and say when that is not all.

A run that leaves graded tests out is a partial run, whichever plugin left them out; one
that runs every test (--ff only reorders them) is a whole run; and a run that --sw stops
at its first failure is stopped on purpose, not interrupted.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import CORPUS, REPO

SUITE = REPO / "graders" / "suite"
CEIL = "passes = math.ceil(n_requests / batch_size)"


def results(pytester: pytest.Pytester, *arguments: str) -> tuple[pytest.RunResult,
                                                                dict[str, Any]]:
    path = pytester.path / "results.json"
    path.unlink(missing_ok=True)
    run = pytester.runpytest_subprocess(*arguments, "--student", "serving.py",
                             "--grader-results", str(path))
    return run, json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(params=["named by --student", "collected from the suite's folder"])
def layout(request: pytest.FixtureRequest, pytester: pytest.Pytester) -> list[str]:
    """The plugin adds the suite, or the run collects it itself (as the bundle's does)."""
    source = (CORPUS / "correct" / "serving.py").read_text(encoding="utf-8")
    assert CEIL in source
    (pytester.path / "serving.py").write_text(
        source.replace(CEIL, "passes = n_requests // batch_size or 1"), encoding="utf-8")
    return [] if request.param == "named by --student" else [str(SUITE)]


def test_reruns_of_the_failures_are_partial_runs_and_failures_first_is_whole(
        pytester: pytest.Pytester, layout: list[str]) -> None:
    _, document = results(pytester, *layout)
    assert "partial_run" not in document["extra_data"]
    assert document["score"] < 100
    earned = {t["name"]: t["score"] for t in document["tests"]}
    for rerun in ("--lf", "--sw"):
        again, partial = results(pytester, *layout, rerun)
        assert again.ret == pytest.ExitCode.TESTS_FAILED, rerun  # stopped on purpose
        assert "interrupted" not in again.stdout.str() + again.stderr.str(), rerun
        assert "grader_failure" not in json.dumps(partial), rerun
        ran = [t for t in partial["tests"] if t["extra_data"]["outcome"] != "not run"]
        assert 0 < len(ran) < len(partial["tests"]) == len(document["tests"]), (
            rerun, again.stdout.str()[:3000])
        assert partial["extra_data"]["partial_run"].startswith(
            f"partial run: {len(ran)} of {len(document['tests'])} graded tests"), rerun
        # the tests that ran earn what they earned in the whole run; nothing is scaled
        assert all(t["score"] == earned[t["name"]] for t in ran), rerun
        assert [t["max_score"] for t in partial["tests"]] == \
            [t["max_score"] for t in document["tests"]], rerun
    # --ff reorders: every test runs, and the run is whole
    _, first = results(pytester, *layout, "--ff")
    assert "partial_run" not in first["extra_data"]
    assert first["score"] == document["score"]


def test_an_optimized_interpreter_is_refused_by_the_students_pytest_too(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    (pytester.path / "serving.py").write_text(
        (CORPUS / "correct" / "serving.py").read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setenv("PYTHONOPTIMIZE", "1")
    run = pytester.runpytest_subprocess("--student", "serving.py")
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    assert run.stderr.lines[-1].startswith("graders: error: Python runs with -O")


def test_xdist_is_refused_in_one_line() -> None:
    from graders.plugin import _refuse_what_changes_the_grade
    from graders.plugin.usage import usage_error

    class Config:
        def __init__(self, **options: Any) -> None:
            self.options = options

        def getoption(self, name: str, default: Any = None) -> Any:
            return self.options.get(name, default)

    _refuse_what_changes_the_grade(Config())  # type: ignore[arg-type]
    _refuse_what_changes_the_grade(Config(numprocesses=0, dist="no"))  # type: ignore[arg-type]
    for options in ({"numprocesses": 2}, {"numprocesses": "auto"}, {"dist": "load"}):
        with pytest.raises(type(usage_error(""))):
            _refuse_what_changes_the_grade(Config(**options))  # type: ignore[arg-type]

