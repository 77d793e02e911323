"""The grading suite's modules are imported as Python imports any module, before pytest's
collection (graders.plugin.suite_imports): they opt out of assertion rewriting, so pytest's
hook would only parse and compile them again at every run. A student's own tests are
rewritten as ever. The grading runs in subprocesses: this process has the suite imported.
"""

from __future__ import annotations

import ast
import importlib
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import CORPUS

from graders.plugin.hooks import SUITE_DIR
from graders.plugin.suite_imports import DONT_REWRITE, import_suite_module

#: A conftest that says, once collection is over, which loader imported each suite module.
REPORTER = """
import sys

def pytest_collection_finish(session):
    for name in ("test_cases", "test_invariants"):
        module = sys.modules["graders.suite." + name]
        print("suite loader:", name, type(module.__spec__.loader).__name__)
"""


def test_every_suite_module_opts_out_of_assertion_rewriting() -> None:
    modules = sorted(SUITE_DIR.glob("test_*.py"))
    assert modules
    for path in modules:
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        assert DONT_REWRITE in docstring, path.name


def test_a_grading_imports_the_suite_plainly_and_rewrites_the_students_own_tests(
        pytester: pytest.Pytester) -> None:
    shutil.copy(CORPUS / "correct" / "serving.py", pytester.path / "serving.py")
    pytester.makeconftest(REPORTER)
    pytester.makepyfile(test_mine="""
        def test_sum():
            assert 1 + 1 == 3
    """)
    result = pytester.runpytest_subprocess("--student", "serving.py",
                                           "-k", "test_serve or test_sum")
    result.stdout.fnmatch_lines_random(["suite loader: test_cases SourceFileLoader",
                                        "suite loader: test_invariants SourceFileLoader"])
    result.stdout.fnmatch_lines(["*assert (1 + 1) == 3*"])  # pytest's own message
    result.assert_outcomes(passed=1, failed=1, deselected=47)


PACKAGE = "suite_imports_probe_pkg"


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / PACKAGE
    folder.mkdir()
    (folder / "__init__.py").write_text("", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module(PACKAGE)
    yield folder
    for name in [n for n in sys.modules if n.startswith(PACKAGE)]:
        del sys.modules[name]


def write_module(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.py"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_module_that_opts_out_is_imported_and_bound_to_its_package(package: Path) -> None:
    path = write_module(package, "test_marked", f'"""{DONT_REWRITE}"""\nVALUE = 1\n')
    import_suite_module(path, f"{PACKAGE}.test_marked")
    module = sys.modules[f"{PACKAGE}.test_marked"]
    assert module.VALUE == 1
    assert module.__file__ == str(path)
    assert sys.modules[PACKAGE].test_marked is module


def test_a_module_that_does_not_opt_out_is_left_to_pytest(package: Path) -> None:
    path = write_module(package, "test_plain", '"""Rewrite me."""\nVALUE = 1\n')
    import_suite_module(path, f"{PACKAGE}.test_plain")
    assert f"{PACKAGE}.test_plain" not in sys.modules


def test_a_module_that_fails_to_import_is_left_to_pytest_to_report(package: Path) -> None:
    path = write_module(package, "test_broken", f'"""{DONT_REWRITE}"""\nraise ValueError\n')
    import_suite_module(path, f"{PACKAGE}.test_broken")  # no error here
    assert f"{PACKAGE}.test_broken" not in sys.modules


def test_a_module_imported_already_is_kept(package: Path) -> None:
    path = write_module(package, "test_kept", f'"""{DONT_REWRITE}"""\nVALUE = 1\n')
    kept = importlib.import_module(f"{PACKAGE}.test_kept")
    path.write_text(f'"""{DONT_REWRITE}"""\nVALUE = 2\n', encoding="utf-8")
    import_suite_module(path, f"{PACKAGE}.test_kept")
    assert sys.modules[f"{PACKAGE}.test_kept"] is kept
    assert kept.VALUE == 1
