"""Values and environments, graded with the CLI in every confined mode of
``linux_modes.MODES`` (root's four, the ordinary user's two): huge answers, and a
submission that looks at where it runs.

- ``huge_integer_fields`` answers every field with a 4,299-digit int (the grader once
  failed every test with OverflowError, wrote a 3.33 MB results.json and a 10 MB page, and
  a regrade of a class holding it never wrote its class report); ``huge_string_fields``
  answers ~1 MB texts. Each gives a results.json of at most 1 MiB and a page under
  :data:`MAX_PAGE_BYTES`, graded alone and in a class, whose class page is written.
- ``report_environment`` prints its HOME, TMPDIR, working folder, uid, gid and hostname,
  and answers wrong in the functions a digest of them picks: it once scored 92.0 in
  ``graders grade`` and 100.0 in ``graders regrade``. It must see the same and score the
  same in two gradings and in a regrade: in bubblewrap its namespaces give every worker
  the same view; under Landlock (namespaces refused) its seat does (the same box and, as
  root, the same user: ``graders.sandbox.seats``). Before seats it scored 72.0, 12.0 and
  46.6 there (root, no bubblewrap).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from helpers import MAX_RESULTS_BYTES
from linux_modes import (
    CONFINED,
    MODES,
    Graded,
    Instructor,
    Run,
    assert_reported,
    grade,
    instructor,
    label,
    mode_unavailable,
    plant_switches,
    regrade,
)

pytestmark = pytest.mark.slow

#: The documented bound on a student's feedback page (docs/security.md).
MAX_PAGE_BYTES = 2 * 1024**2
HUGE = ("huge_integer_fields", "huge_string_fields")
ENVIRONMENT = "report_environment"
PAGE = "feedback.html"


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    """A folder the sandbox users can traverse, with one sitecustomize folder per switch."""
    folder = Path(tempfile.mkdtemp(prefix="adversarial-values-", dir="/tmp"))
    folder.chmod(0o755)
    plant_switches(folder)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module", params=CONFINED)
def mode(request: pytest.FixtureRequest) -> str:
    """Each confined mode in turn (skipped, with the reason, where it cannot be made)."""
    name: str = request.param
    reason = mode_unavailable(name)
    if reason is not None:
        pytest.skip(reason)
    return name


@pytest.fixture(scope="module")
def user(base: Path, mode: str) -> Instructor | None:
    """The instructor account, with a grader copy it can read, where ``mode`` is its."""
    return instructor(base / f"install-{label(mode)}") \
        if MODES[mode].ordinary else None


@pytest.fixture(scope="module")
def graded(base: Path, mode: str, user: Instructor | None) -> dict[str, Graded]:
    """Each huge case graded once with its page; the environment's case twice (two at a
    time)."""
    with ThreadPoolExecutor(2) as pool:
        runs = {name: pool.submit(grade, base, name, mode, user=user, page=PAGE)
                for name in HUGE}
        for tag in ("", "-again"):
            runs[ENVIRONMENT + tag] = pool.submit(grade, base, ENVIRONMENT, mode, user=user,
                                                  tag=tag)
        return {name: run.result() for name, run in runs.items()}


@pytest.fixture(scope="module")
def regraded(base: Path, mode: str, user: Instructor | None) -> tuple[Path, Run]:
    """A class of the three cases, regraded with pages, two at a time."""
    return regrade(base, (*HUGE, ENVIRONMENT), mode, user=user)


def results(run: Graded, mode: str) -> dict[str, Any]:
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    assert_reported(run.results, mode)
    return run.results


@pytest.mark.parametrize("name", HUGE)
def test_huge_answers_give_a_small_results_json_and_page(
        graded: dict[str, Graded], name: str, mode: str) -> None:
    document = results(graded[name], mode)
    assert len(graded[name].text.encode()) <= MAX_RESULTS_BYTES
    assert document["score"] == 0.0
    assert "OverflowError" not in graded[name].text  # never the grader's own failure
    assert (graded[name].out / PAGE).stat().st_size < MAX_PAGE_BYTES


def test_a_huge_int_is_shown_as_a_short_text(graded: dict[str, Graded]) -> None:
    assert "got 'a 4,299-digit integer'" in graded["huge_integer_fields"].text


@pytest.mark.parametrize("name", HUGE)
def test_a_class_holding_huge_answers_gets_its_class_report(
        regraded: tuple[Path, Run], name: str, mode: str) -> None:
    out, run = regraded
    assert run.returncode == 0, run.stderr[-3000:]
    for report in ("class.html", "report.json", "report.md", "grades.csv"):
        assert (out / report).is_file(), report
    submission = out / "submissions" / name
    assert (submission / "results.json").stat().st_size <= MAX_RESULTS_BYTES
    document = json.loads((submission / "results.json").read_text(encoding="utf-8"))
    assert document["score"] == 0.0
    assert_reported(document, mode)
    assert (submission / PAGE).stat().st_size < MAX_PAGE_BYTES
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["graded"] == 3


def environment(document: dict[str, Any]) -> str:
    """What report_environment printed at import (in results.json's output)."""
    found = re.search(r"environment: (\(.*?\))", document["output"])
    assert found is not None, document["output"][-2000:]
    return found.group(1)


def test_a_submission_that_looks_at_its_environment_scores_the_same_everywhere(
        graded: dict[str, Graded], regraded: tuple[Path, Run], mode: str) -> None:
    first = results(graded[ENVIRONMENT], mode)
    again = results(graded[f"{ENVIRONMENT}-again"], mode)
    out, run = regraded
    assert run.returncode == 0, run.stderr[-3000:]
    regrade = json.loads((out / "submissions" / ENVIRONMENT / "results.json").read_text(
        encoding="utf-8"))
    assert environment(first) == environment(again) == environment(regrade)
    assert first["score"] == again["score"] == regrade["score"]
    assert [t["score"] for t in first["tests"]] == [t["score"] for t in regrade["tests"]]

