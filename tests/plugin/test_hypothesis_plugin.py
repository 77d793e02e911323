"""A student's ``pytest`` does not pay for Hypothesis unless its tests use it.

Hypothesis's pytest plugin imports Hypothesis at the end of every run, used or not (about
1 s, more where bytecode cannot be cached); a grading that never imported it unregisters
the plugin before then. Run in subprocesses: this test process has Hypothesis imported.
"""

from __future__ import annotations

import shutil

import pytest
from helpers import CORPUS

#: A conftest that says, at the very end of the run, whether Hypothesis was imported.
REPORTER = """
import sys

def pytest_unconfigure(config):
    print("hypothesis imported:", "hypothesis" in sys.modules)
"""


@pytest.fixture(autouse=True)
def submission(pytester: pytest.Pytester) -> None:
    shutil.copy(CORPUS / "correct" / "serving.py", pytester.path / "serving.py")
    pytester.makeconftest(REPORTER)


def test_a_grading_that_never_uses_hypothesis_never_imports_it(
        pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--student", "serving.py", "-k", "test_serve")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*partial run*", "hypothesis imported: False"])


def test_a_run_whose_tests_use_hypothesis_keeps_its_plugin(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mine="""
        from hypothesis import given, strategies as st

        @given(st.integers())
        def test_integers(number):
            assert isinstance(number, int)
    """)
    result = pytester.runpytest_subprocess("--student", "serving.py",
                                           "--hypothesis-show-statistics",
                                           "-k", "test_serve or test_integers")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*Hypothesis Statistics*", "*test_integers*",
                                 "hypothesis imported: True"])
