"""The corpus of single-bug submissions, graded with the CLI the way a user grades one.

Each folder of ``tests/corpus`` holds a ``serving.py``: ``correct`` is a full solution, and
every other folder is that solution with one realistic student bug. Every submission is
graded once per session (plus one re-grade for determinism), two at a time, by
``python -m graders grade SUBMISSION --results FILE``. Then, for each one:

- the total score is exact (to the 6 decimals of results.json);
- the tests that lose points are exactly the ones its bug reaches: tests of the buggy
  function, or of a function whose own code calls it in the student's module
  (batching_tax -> queueing_latency -> erlang_c; cache_capacity -> transformer_state_gb;
  serving_track_profile -> quantity_to_float);
- results.json is valid Gradescope output.

The expected values came from one grading run and were then checked by hand, case by case
(see the comments in ``CORPUS_EXPECTED`` in tests/helpers.py, which the regrade and
portability tests reuse, and tests/corpus/README.md).
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    CORPUS,
    CORPUS_EXPECTED,
    GRADESCOPE_VISIBILITIES,
    REPO,
    reject_constant,
    selected_cases,
)

pytestmark = pytest.mark.slow

#: What grading each buggy submission must give (helpers.py; the regrade and portability
#: tests use it too).
EXPECTED = CORPUS_EXPECTED
CORRECT = "correct"
TEMPLATE = "student_template"
TEMPLATE_PATH = REPO / "student_template" / "serving.py"
#: The buggy submission graded a second time to check that grading is deterministic.
REGRADED = "passes_floor"
#: Seconds one grading run may take before the test gives up on it.
GRADE_TIMEOUT_S = 900

CONTRACT_FUNCTIONS = (
    "serve", "erlang_c", "queueing_latency", "batching_tax", "transformer_state_gb",
    "cache_capacity", "cold_start_latency", "quantity_to_float", "serving_track_profile",
)


@dataclass(frozen=True)
class Graded:
    """One CLI run: its exit code, its output and its results.json (text and parsed)."""

    returncode: int
    stdout: str
    stderr: str
    text: str

    @property
    def results(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.text)
        return document


def corpus_names() -> list[str]:
    return sorted(p.name for p in CORPUS.iterdir() if (p / "serving.py").is_file())


def submission_path(name: str) -> Path:
    return TEMPLATE_PATH if name == TEMPLATE else CORPUS / name / "serving.py"


def grade(submission: Path, results: Path) -> Graded:
    """Grade ``submission`` as a user does, from a neutral folder and a clean environment."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    completed = subprocess.run(
        [sys.executable, "-m", "graders", "grade", str(submission), "--results", str(results)],
        cwd=results.parent, env=env, capture_output=True, text=True, timeout=GRADE_TIMEOUT_S,
        check=False)
    text = results.read_text(encoding="utf-8") if results.exists() else ""
    return Graded(completed.returncode, completed.stdout, completed.stderr, text)


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory,
           request: pytest.FixtureRequest) -> dict[str, Graded]:
    """Every selected submission graded once (and REGRADED twice), two at a time."""
    names = corpus_names() + ([TEMPLATE] if TEMPLATE_PATH.is_file() else [])
    jobs = {name: submission_path(name) for name in names}
    jobs[f"{REGRADED} (again)"] = submission_path(REGRADED)
    wanted = selected_cases(request, ("bug", "name"))
    if wanted is not None:  # -k NAME: grade only what the selected tests ask for
        jobs = {name: path for name, path in jobs.items() if name.split(" (")[0] in wanted}
    # The template fails every test, and shrinking its failures makes it the slowest: first.
    order = sorted(jobs, key=lambda name: name != TEMPLATE)
    folder = tmp_path_factory.mktemp("corpus-results")

    def run(index: int, name: str) -> tuple[str, Graded]:
        workdir = folder / f"{index:02d}"
        workdir.mkdir()
        return name, grade(jobs[name], workdir / "results.json")

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(run, range(len(order)), order))


def results_of(graded: dict[str, Graded], name: str) -> dict[str, Any]:
    if name == TEMPLATE and name not in graded:
        pytest.skip(f"{TEMPLATE_PATH.relative_to(REPO)} does not exist yet")
    run = graded[name]
    assert run.returncode == 0, f"grading {name} exited {run.returncode}:\n{run.stderr[-2000:]}"
    assert run.text, f"grading {name} wrote no results.json"
    return run.results


def below_max(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {test["extra_data"]["nodeid"]: test for test in results["tests"]
            if test["score"] < test["max_score"]}


# --- the corpus itself ---------------------------------------------------------------------


def test_every_corpus_folder_has_an_expected_outcome() -> None:
    buggy = set(corpus_names()) - {CORRECT}
    assert buggy == set(EXPECTED), "add or remove the folder's row in EXPECTED"
    assert len(buggy) >= 14


@pytest.mark.parametrize("bug", sorted(EXPECTED))
def test_a_buggy_submission_is_the_correct_one_with_a_new_docstring_and_one_edit(
        bug: str) -> None:
    correct = submission_path(CORRECT).read_text(encoding="utf-8").splitlines()
    buggy = submission_path(bug).read_text(encoding="utf-8").splitlines()
    hunks = [line for line in difflib.unified_diff(correct, buggy, n=0, lineterm="")
             if line.startswith("@@")]
    assert buggy[0].startswith('"""One bug: ')
    assert buggy[0].endswith('."""')
    assert len(hunks) == 2, f"expected the docstring and one edit, got hunks {hunks}"
    changed = [line for line in difflib.ndiff(correct, buggy) if line[:1] in "+-"]
    assert len(changed) <= 2 * 5, f"not a minimal edit: {changed}"


# --- scores ----------------------------------------------------------------------------------


def test_every_submission_is_graded_to_completion(graded: dict[str, Graded]) -> None:
    for name, run in graded.items():
        assert run.returncode == 0, f"{name}: exit {run.returncode}\n{run.stderr[-2000:]}"
        assert "INTERNALERROR" not in run.stdout + run.stderr, name
        assert run.text, f"{name}: no results.json"


@pytest.mark.parametrize("bug", sorted(EXPECTED))
def test_a_buggy_submission_gets_exactly_its_expected_score(
        graded: dict[str, Graded], bug: str) -> None:
    assert results_of(graded, bug)["score"] == EXPECTED[bug].score


@pytest.mark.parametrize("bug", sorted(EXPECTED))
def test_a_buggy_submission_loses_points_only_in_the_tests_its_bug_reaches(
        graded: dict[str, Graded], bug: str) -> None:
    lost = below_max(results_of(graded, bug))
    assert set(lost) == EXPECTED[bug].loses
    reached = {test["tags"][0] for test in lost.values()}
    assert reached <= EXPECTED[bug].reaches, f"points lost in {reached - EXPECTED[bug].reaches}"


def test_the_correct_solution_scores_100_with_every_test_passed(
        graded: dict[str, Graded]) -> None:
    results = results_of(graded, CORRECT)
    assert results["score"] == 100.0
    assert results["tests"]
    for test in results["tests"]:
        assert test["status"] == "passed", test["name"]
        assert test["score"] == test["max_score"], test["name"]


def test_the_student_template_scores_0_yet_lists_every_test(graded: dict[str, Graded]) -> None:
    template = results_of(graded, TEMPLATE)
    correct = results_of(graded, CORRECT)
    assert template["score"] == 0.0
    assert len(template["tests"]) == len(correct["tests"])
    assert [t["extra_data"]["nodeid"] for t in template["tests"]] == \
        [t["extra_data"]["nodeid"] for t in correct["tests"]]
    for test in template["tests"]:
        assert test["score"] == 0, test["name"]
        assert test["status"] == "failed", test["name"]


def test_grading_the_same_submission_twice_gives_the_same_results(
        graded: dict[str, Graded]) -> None:
    first = copy.deepcopy(results_of(graded, REGRADED))
    second = copy.deepcopy(results_of(graded, f"{REGRADED} (again)"))
    assert first["score"] < 100.0, "the determinism check needs a submission that loses points"
    del first["execution_time"], second["execution_time"]
    assert first == second


# --- results.json format ---------------------------------------------------------------------


@pytest.mark.parametrize("name", [CORRECT, *sorted(EXPECTED), TEMPLATE])
def test_every_results_json_is_valid_gradescope_output(
        graded: dict[str, Graded], name: str) -> None:
    results_of(graded, name)  # skips a missing template, checks the run completed
    document = json.loads(graded[name].text, parse_constant=reject_constant)
    assert isinstance(document["score"], float)
    assert isinstance(document["tests"], list)
    assert document["tests"]
    for test in document["tests"]:
        label = test.get("name", test)
        assert isinstance(test["name"], str), label
        assert test["name"]
        for key in ("score", "max_score"):
            assert isinstance(test[key], int | float), label
            assert not isinstance(test[key], bool), label
        assert 0 <= test["score"] <= test["max_score"], label
        assert test["status"] in ("passed", "failed"), label
        assert isinstance(test["tags"], list), label
        assert all(isinstance(tag, str) for tag in test["tags"]), label
        assert test["tags"][0] in CONTRACT_FUNCTIONS, label
        assert test["visibility"] in GRADESCOPE_VISIBILITIES, label
    total = sum(test["score"] for test in document["tests"])
    assert abs(total - document["score"]) <= 1e-3
