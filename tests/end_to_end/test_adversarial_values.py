"""Values and environments, graded with the CLI: huge answers, and a submission that looks
at where it runs.

- ``huge_integer_fields`` answers every field with a 4,299-digit int (the grader once
  failed every test with OverflowError, wrote a 3.33 MB results.json and a 10 MB page, and
  a regrade of a class holding it never wrote its class report); ``huge_string_fields``
  answers ~1 MB texts. Each gives a results.json of at most 1 MiB and a page under
  :data:`MAX_PAGE_BYTES`, graded alone and in a class, whose class page is written.
- ``report_environment`` answers wrong in the functions that a digest of its HOME, TMPDIR,
  working folder, uid, gid and hostname picks: it once scored 92.0 in ``graders grade``
  and 100.0 in ``graders regrade``. In bubblewrap the worker's environment is the same in
  every grading path, so it scores the same in two gradings and in a regrade; without
  bubblewrap the paths and the uid differ (docs/security.md says so) and the test skips.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import ADVERSARIAL, MAX_RESULTS_BYTES, GradedCase, grade_case

pytestmark = pytest.mark.slow

#: The documented bound on a student's feedback page (docs/security.md).
MAX_PAGE_BYTES = 2 * 1024**2
HUGE = ("huge_integer_fields", "huge_string_fields")
ENVIRONMENT = "report_environment"
PAGE = "feedback.html"


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    """A folder the sandbox user can traverse (pytest's tmp_path is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="adversarial-values-", dir="/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def graded(base: Path) -> dict[str, GradedCase]:
    """Each case graded once with its page; the environment's case twice."""
    runs = {name: grade_case(name, ADVERSARIAL / name, base, options=("--html", PAGE))
            for name in HUGE}
    for name in (ENVIRONMENT, f"{ENVIRONMENT} (again)"):
        runs[name] = grade_case(name, ADVERSARIAL / ENVIRONMENT, base)
    return runs


@pytest.fixture(scope="module")
def regraded(base: Path) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A class of the three cases, regraded with pages, two at a time."""
    home = base / "regrade"
    (home / "class").mkdir(parents=True)
    for name in (*HUGE, ENVIRONMENT):
        (home / "class" / name).mkdir()
        shutil.copy(ADVERSARIAL / name / "serving.py", home / "class" / name / "serving.py")
    run = subprocess.run(
        [sys.executable, "-m", "graders", "regrade", str(home / "class"), "--out",
         str(home / "out"), "--jobs", "2", "--pages", "--no-histogram"],
        capture_output=True, text=True, timeout=1800, check=False)
    return home / "out", run


def results(run: GradedCase) -> dict[str, object]:
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    document: dict[str, object] = json.loads(run.text)
    return document


@pytest.mark.parametrize("name", HUGE)
def test_huge_answers_give_a_small_results_json_and_page(
        graded: dict[str, GradedCase], name: str) -> None:
    document = results(graded[name])
    assert len(graded[name].text.encode()) <= MAX_RESULTS_BYTES
    assert document["score"] == 0.0
    assert "OverflowError" not in graded[name].text  # never the grader's own failure
    page = graded[name].home / "out" / PAGE
    assert page.stat().st_size < MAX_PAGE_BYTES


def test_a_huge_int_is_shown_as_a_short_text(graded: dict[str, GradedCase]) -> None:
    assert "got 'a 4,299-digit integer'" in graded["huge_integer_fields"].text


@pytest.mark.parametrize("name", HUGE)
def test_a_class_holding_huge_answers_gets_its_class_report(
        regraded: tuple[Path, subprocess.CompletedProcess[str]], name: str) -> None:
    out, run = regraded
    assert run.returncode == 0, run.stderr[-3000:]
    for report in ("class.html", "report.json", "report.md", "grades.csv"):
        assert (out / report).is_file(), report
    submission = out / "submissions" / name
    assert (submission / "results.json").stat().st_size <= MAX_RESULTS_BYTES
    assert (submission / PAGE).stat().st_size < MAX_PAGE_BYTES
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["graded"] == 3


def test_a_submission_that_looks_at_its_environment_scores_the_same_everywhere(
        graded: dict[str, GradedCase],
        regraded: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    first = results(graded[ENVIRONMENT])
    protections = first["extra_data"]["protections"]  # type: ignore[index]
    if protections["tool"] != "bubblewrap":
        pytest.skip("without bubblewrap the worker's paths and uid differ by grading path "
                    f"(docs/security.md); here: {protections['tool']}")
    again = results(graded[f"{ENVIRONMENT} (again)"])
    out, run = regraded
    assert run.returncode == 0, run.stderr[-3000:]
    regrade = json.loads((out / "submissions" / ENVIRONMENT / "results.json").read_text(
        encoding="utf-8"))
    assert first["score"] == again["score"] == regrade["score"]
    assert [t["score"] for t in first["tests"]] == \
        [t["score"] for t in regrade["tests"]]  # type: ignore[attr-defined]
