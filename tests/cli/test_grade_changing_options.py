"""The options that change a grade (issue 36): ``graders grade``, ``graders regrade`` and
both exports take every one of them, built from one list, so that a regrade reproduces
the Gradescope zip's grades (``--exact-p99-points`` was missing from the regrade)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import pytest
from helpers import CORPUS

from graders.cli import build_parser
from graders.plugin.settings import (
    GRADE_CHANGING,
    NOT_GRADE_CHANGING,
    OPTIONS,
    grade_flag,
    option_named,
)

#: Every command that grades or builds a grader, as words after ``graders``, with the
#: positional arguments it needs.
COMMANDS = {
    "grade": ["grade", "serving.py"],
    "regrade": ["regrade", "class", "--out", "out"],
    "export gradescope": ["export", "gradescope", "out.zip"],
    "export student": ["export", "student", "out"],
}
#: A value other than the default for each grade-changing option.
VALUES = {"max_score": "50", "exact_p99_points": "10"}


def graders(*argv: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    if cwd is not None:
        environment["TMPDIR"] = str(cwd / "tmp")
    return subprocess.run([sys.executable, "-m", "graders", *map(str, argv)], cwd=cwd,
                          env=environment, capture_output=True, text=True, timeout=900,
                          check=False)


def test_every_option_is_either_grade_changing_or_says_why_not() -> None:
    names = [option.name for option in OPTIONS]
    assert sorted(names) == sorted([*GRADE_CHANGING, *NOT_GRADE_CHANGING])
    assert not set(GRADE_CHANGING) & set(NOT_GRADE_CHANGING)
    assert "exact_p99_points" in GRADE_CHANGING
    assert set(VALUES) == set(GRADE_CHANGING)


@pytest.mark.parametrize("name", GRADE_CHANGING)
@pytest.mark.parametrize("command", COMMANDS)
def test_every_grade_changing_option_is_taken_by_every_command(command: str, name: str) -> None:
    flag = grade_flag(option_named(name))
    args = build_parser().parse_args([*COMMANDS[command], flag, VALUES[name]])
    assert getattr(args, name) == VALUES[name]


@pytest.mark.parametrize("name", GRADE_CHANGING)
def test_the_gradescope_zip_passes_every_grade_changing_option_to_the_grader(
        tmp_path: Path, name: str) -> None:
    flag = grade_flag(option_named(name))
    made = graders("export", "gradescope", tmp_path / "course.zip", flag, VALUES[name])
    assert made.returncode == 0, made.stderr
    with zipfile.ZipFile(tmp_path / "course.zip") as archive:
        script = archive.read("run_autograder").decode()
    assert f'{name.upper()}="{VALUES[name]}"' in script
    assert f'{flag} "${name.upper()}"' in script


def test_the_student_bundle_grades_out_of_the_visible_share_the_zip_gives_it() -> None:
    from graders.export.build import suite_tests, visible_share

    tests = suite_tests()
    assert visible_share(tests, Fraction(100)) == 95
    # 10 points of extension on top of the suite's 100 weights: every other test is worth
    # 100/110 of its weight, the visible ones 95 of them; the bundle cannot grade the
    # extension, so it grades its visible tests out of their share alone
    share = visible_share(tests, Fraction(100), exact_p99_points=10)
    assert abs(share - Fraction(9500, 110)) <= Fraction(1, 10**6)


@pytest.fixture
def home() -> Iterator[Path]:
    """A folder the sandbox users can traverse (pytest's tmp_path is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="grade-options-", dir="/tmp"))
    folder.chmod(0o755)
    (folder / "tmp").mkdir(mode=0o755)
    (folder / "tmp").chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
def test_a_regrade_with_exact_p99_points_scores_as_graders_grade_does(home: Path) -> None:
    shutil.copytree(CORPUS / "correct", home / "class" / "ann")
    regrade = graders("regrade", home / "class", "--out", home / "out", "--no-histogram",
                      "--exact-p99-points", "10", cwd=home)
    assert regrade.returncode == 0, regrade.stderr[-3000:]
    single = graders("grade", CORPUS / "correct", "--results", home / "single.json", "-q",
                     "--exact-p99-points", "10", cwd=home)
    assert single.returncode == 0, single.stderr[-3000:]
    documents = [json.loads(path.read_text(encoding="utf-8")) for path in
                 (home / "single.json", home / "out" / "submissions" / "ann" / "results.json")]
    for document in documents:
        document.pop("execution_time")
    assert documents[0]["score"] == documents[1]["score"]
    assert documents[0]["score"] < 100  # the extension counts: correct does not implement it
    assert documents[0]["tests"] == documents[1]["tests"]
    assert any(test.get("tags") and "exact_p99_ms" in test["tags"]
               for test in documents[1]["tests"])
