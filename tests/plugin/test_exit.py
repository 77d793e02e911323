"""A grading's process exits without collecting the garbage of its frozen heap
(graders.plugin.exit); a run that grades nothing is left as pytest leaves it. Run in
subprocesses, since what is checked happens as the interpreter exits."""

from __future__ import annotations

import shutil

import pytest
from helpers import CORPUS

from graders.plugin.exit import freeze_heap_at_exit

#: A conftest whose exit handler, registered first, runs last: after the heap is frozen.
REPORTER = """
import atexit, gc

atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count() > 0))
"""


@pytest.fixture(autouse=True)
def reporter(pytester: pytest.Pytester) -> None:
    shutil.copy(CORPUS / "correct" / "serving.py", pytester.path / "serving.py")
    pytester.makeconftest(REPORTER)
    pytester.makepyfile(test_mine="def test_nothing():\n    pass\n")


def test_a_grading_freezes_its_heap_when_the_interpreter_exits(
        pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--student", "serving.py", "-k", "test_serve")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*partial run*", "frozen at exit: True"])


def test_a_run_that_grades_nothing_exits_as_pytest_does(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("test_mine.py")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["frozen at exit: False"])


def test_the_freeze_is_registered_once_however_many_gradings_a_process_runs(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(count_freezes=f"""
        import atexit, gc
        from graders.plugin.exit import {freeze_heap_at_exit.__name__}

        calls = []
        gc.freeze = lambda: calls.append(1)  # what each registration would run
        for _ in range(3):
            {freeze_heap_at_exit.__name__}()
        atexit._run_exitfuncs()
        print("freezes:", len(calls))
    """)
    result = pytester.runpython(pytester.path / "count_freezes.py")
    result.stdout.fnmatch_lines(["freezes: 1"])
