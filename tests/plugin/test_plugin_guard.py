"""The plugin's guard: whatever fails at the end of a grading run (plain ``pytest
--student``, as students run it), the workers are stopped, the results path gets a
grader-failure record (no score) and the reserved space is not left behind."""

from __future__ import annotations

import json
import shutil

import pytest
from helpers import CORPUS

from graders.errors import GRADER_FAILED_EXIT
from graders.results.reports import grader_failure, interrupted_by_signal

FAST = ["-k", "test_serve or test_transformer_state_gb"]
#: Failures planted by the run's own conftest.py (in a subprocess: nothing leaks into this
#: one), each where the grader once crashed or could.
PLANTS = {
    "recursion_error_in_the_last_calls": ("graders.plugin.session",
                                          "GradingSession.finish_visible", "RecursionError"),
    "memory_error_writing_results": ("graders.plugin.session",
                                     "GradingSession.results_document", "MemoryError"),
}


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_failure_at_the_end_leaves_a_failure_record_and_nothing_else(
        pytester: pytest.Pytester, plant: str) -> None:
    module, attribute, error = PLANTS[plant]
    owner, method = attribute.split(".")
    pytester.makeconftest(f"""
        import {module} as planted

        def fail(*args, **kwargs):
            raise {error}("planted")

        planted.{owner}.{method} = fail
    """)
    shutil.copy(CORPUS / "correct" / "serving.py", pytester.path / "serving.py")
    out = pytester.path / "out"
    out.mkdir(mode=0o700)
    result = pytester.runpytest_subprocess("--student", "serving.py", "--grader-results",
                                           str(out / "results.json"), *FAST)
    assert result.ret == GRADER_FAILED_EXIT
    record = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert grader_failure(record) == f"{error}: planted"
    assert "score" not in record
    assert sorted(p.name for p in out.iterdir()) == ["results.json"]  # no reservation left
    result.stdout.no_fnmatch_line("*Traceback*")


def test_results_written_then_a_failure_still_leaves_one_verdict(
        pytester: pytest.Pytester) -> None:
    """A failure after the results were written (the Classroom file, here) makes the run a
    grader failure, and the results path says so too: one verdict."""
    pytester.makeconftest("""
        import graders.plugin.session as planted

        def fail(*args, **kwargs):
            raise OSError("planted")

        planted.GradingSession.write_classroom = fail
    """)
    shutil.copy(CORPUS / "correct" / "serving.py", pytester.path / "serving.py")
    out = pytester.path / "out"
    out.mkdir(mode=0o700)
    result = pytester.runpytest_subprocess("--student", "serving.py", "--grader-results",
                                           str(out / "results.json"), "--grader-classroom",
                                           str(out / "classroom.json"), *FAST)
    assert result.ret == GRADER_FAILED_EXIT
    record = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert grader_failure(record) == "OSError: planted"


def test_an_interrupt_whose_report_fails_still_leaves_the_interruption_record(
        pytester: pytest.Pytester) -> None:
    """pytest's terminal report of a Ctrl-C can itself raise (a traceback entry without a
    line number): the run was still interrupted, and the results say so, with no score."""
    pytester.makeconftest("""
        import pytest

        @pytest.hookimpl(trylast=True)
        def pytest_keyboard_interrupt(excinfo):
            raise TypeError("unsupported operand type(s) for -: 'NoneType' and 'int'")

        def pytest_collection_finish(session):
            raise KeyboardInterrupt
    """)
    shutil.copy(CORPUS / "correct" / "serving.py", pytester.path / "serving.py")
    out = pytester.path / "out"
    out.mkdir(mode=0o700)
    pytester.runpytest_subprocess("--student", "serving.py", "--grader-results",
                                  str(out / "results.json"), *FAST)
    record = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert "score" not in record
    assert interrupted_by_signal(record) == "SIGINT", record
    assert sorted(p.name for p in out.iterdir()) == ["results.json"]
