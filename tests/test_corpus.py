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
(see the comments in EXPECTED and tests/corpus/README.md).
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
from typing import Any, NamedTuple

import pytest
from conftest import selected_cases

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
CORPUS = Path(__file__).with_name("corpus")
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
GRADESCOPE_VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")


class Expected(NamedTuple):
    """What grading one buggy submission must give."""

    score: float
    #: Contract functions whose tests the bug may reach (the buggy one, then its callers).
    reaches: frozenset[str]
    #: Node ids of exactly the tests that score below their max_score.
    loses: frozenset[str]


def expected(score: float, reaches: set[str], loses: set[str]) -> Expected:
    return Expected(score, frozenset(reaches), frozenset(loses))


EXPECTED: dict[str, Expected] = {
    # --- queueing_latency ----------------------------------------------------------------
    # v = (1 + cv) / 2: equal to (1 + cv**2) / 2 at cv = 0 and cv = 1 only. cloud_fleet runs
    # at cv = 1, so it fails just its "service cv 0.5" and "cv 2.0" cases (11/13). The
    # others (cv 0.8, 0.6, 1.2) keep only the cv 0.0 case and the two unstable loads (3/13).
    # Knock-on: batching_tax calls the student's queueing_latency with the track's cv:
    # iphone and robotaxi lose points; oura_ring's load is so light that P(wait) < 1%, so
    # its p99 is the bare service time whatever v is; cloud_fleet has cv = 1.
    # Large fleets run at cv = 1: no loss there.
    "variability_linear_cv": expected(88.17094, {"queueing_latency", "batching_tax"}, {
        "graders/suite/test_cases.py::test_queueing_latency[cloud_fleet]",
        "graders/suite/test_cases.py::test_queueing_latency[iphone]",
        "graders/suite/test_cases.py::test_queueing_latency[oura_ring]",
        "graders/suite/test_cases.py::test_queueing_latency[robotaxi]",
        "graders/suite/test_cases.py::test_batching_tax[iphone]",
        "graders/suite/test_cases.py::test_batching_tax[robotaxi]",
    }),
    # p99 = tail(0.95): wrong wherever P(wait) > 1%, so also on large fleets near
    # saturation. Knock-on: batching_tax reads the student's p99 (iphone and robotaxi; the
    # batched loads of cloud_fleet and oura_ring keep P(wait) < 1%). p50 <= p95 <= p99
    # still holds (p95 == p99), so no invariant loses points.
    "p99_at_q095": expected(85.25812, {"queueing_latency", "batching_tax"}, {
        "graders/suite/test_cases.py::test_queueing_latency[cloud_fleet]",
        "graders/suite/test_cases.py::test_queueing_latency[iphone]",
        "graders/suite/test_cases.py::test_queueing_latency[oura_ring]",
        "graders/suite/test_cases.py::test_queueing_latency[robotaxi]",
        "graders/suite/test_hidden_cases.py::test_queueing_latency_large_fleet",
        "graders/suite/test_cases.py::test_batching_tax[iphone]",
        "graders/suite/test_cases.py::test_batching_tax[robotaxi]",
    }),
    # slo_ok = mean <= slo: only slo_ok is wrong, and only where mean <= slo < p99.
    # No knock-on: batching_tax computes its own slo_ok from total_p99.
    "slo_ok_uses_mean": expected(96.733333, {"queueing_latency"}, {
        "graders/suite/test_cases.py::test_queueing_latency[cloud_fleet]",
        "graders/suite/test_cases.py::test_queueing_latency[iphone]",
        "graders/suite/test_cases.py::test_queueing_latency[oura_ring]",
        "graders/suite/test_cases.py::test_queueing_latency[robotaxi]",
        "graders/suite/test_hidden_cases.py::test_queueing_latency_large_fleet",
    }),
    # utilization > 1 instead of >= 1: only the "load 100% of capacity" case of each track
    # (12/13), and the invariant test_unstable_exactly_at_full_utilization, which draws a
    # load of exactly 100 % on service times that divide 1000 ms.
    "unstable_only_above_one": expected(98.076923, {"queueing_latency"}, {
        "graders/suite/test_invariants.py::test_unstable_exactly_at_full_utilization",
        "graders/suite/test_cases.py::test_queueing_latency[cloud_fleet]",
        "graders/suite/test_cases.py::test_queueing_latency[iphone]",
        "graders/suite/test_cases.py::test_queueing_latency[oura_ring]",
        "graders/suite/test_cases.py::test_queueing_latency[robotaxi]",
    }),
    # --- serving_track_profile -----------------------------------------------------------
    # Capacity in GiB: every case of every track (0/3 each). The unit invariant still
    # passes: GiB is wrong the same way whatever unit the capacity comes in.
    # cache_capacity is graded on the reference's profile, so it is not reached.
    "gib_for_gb": expected(92.0, {"serving_track_profile"}, {
        "graders/suite/test_cases.py::test_serving_track_profile[cloud_fleet]",
        "graders/suite/test_cases.py::test_serving_track_profile[iphone]",
        "graders/suite/test_cases.py::test_serving_track_profile[oura_ring]",
        "graders/suite/test_cases.py::test_serving_track_profile[robotaxi]",
    }),
    # battery_wh 0.0 instead of None: only the two tracks without a battery.
    "battery_zero_not_none": expected(96.0, {"serving_track_profile"}, {
        "graders/suite/test_cases.py::test_serving_track_profile[cloud_fleet]",
        "graders/suite/test_cases.py::test_serving_track_profile[robotaxi]",
    }),
    # --- batching_tax --------------------------------------------------------------------
    # Formation delay (B - 1) / lambda: right only at B = 1. cloud_fleet and iphone default
    # to B > 1 (1/9 pass: "batch 1"); oura_ring and robotaxi default to B = 1 (2/9).
    "formation_delay_no_half": expected(91.666667, {"batching_tax"}, {
        "graders/suite/test_cases.py::test_batching_tax[cloud_fleet]",
        "graders/suite/test_cases.py::test_batching_tax[iphone]",
        "graders/suite/test_cases.py::test_batching_tax[oura_ring]",
        "graders/suite/test_cases.py::test_batching_tax[robotaxi]",
    }),
    # log instead of log2: ln(1) == log2(1) == 0, so the same B = 1 pattern as above.
    "batching_natural_log": expected(91.666667, {"batching_tax"}, {
        "graders/suite/test_cases.py::test_batching_tax[cloud_fleet]",
        "graders/suite/test_cases.py::test_batching_tax[iphone]",
        "graders/suite/test_cases.py::test_batching_tax[oura_ring]",
        "graders/suite/test_cases.py::test_batching_tax[robotaxi]",
    }),
    # --- cold_start_latency --------------------------------------------------------------
    # protected_fraction always 0: the 5 "warm pool k of n" cases with k > 0, plus the
    # defaults where the track has a warm pool (all but iphone): 13/19, iphone 14/19.
    # "A larger warm pool never raises the exposed latency" holds (it is constant), but its
    # strict condition fails: a warm pool of every replica must lower the exposed latency
    # (1 point more).
    "warm_pool_ignored": expected(96.578947, {"cold_start_latency"}, {
        "graders/suite/test_cases.py::test_cold_start_latency[cloud_fleet]",
        "graders/suite/test_cases.py::test_cold_start_latency[iphone]",
        "graders/suite/test_cases.py::test_cold_start_latency[oura_ring]",
        "graders/suite/test_cases.py::test_cold_start_latency[robotaxi]",
        "graders/suite/test_invariants.py::test_warm_pool_never_raises_exposed_latency",
    }),
    # max(storage, link): cloud_fleet (7 vs 64 GB/s) and robotaxi (1 vs 3.75 GB/s) fail
    # every case; iphone and oura_ring have storage == link == memory bandwidth, so only
    # the 4 overrides that split them fail (15/19).
    "cold_start_max_bandwidth": expected(95.157895, {"cold_start_latency"}, {
        "graders/suite/test_cases.py::test_cold_start_latency[cloud_fleet]",
        "graders/suite/test_cases.py::test_cold_start_latency[iphone]",
        "graders/suite/test_cases.py::test_cold_start_latency[oura_ring]",
        "graders/suite/test_cases.py::test_cold_start_latency[robotaxi]",
    }),
    # --- cache_capacity ------------------------------------------------------------------
    # MB / 1000: every case of the three tracks whose state comes from state_mb_per_request;
    # cloud_fleet's state comes from transformer_state_gb and is not reached.
    "mb_over_1000": expected(94.0, {"cache_capacity"}, {
        "graders/suite/test_cases.py::test_cache_capacity[iphone]",
        "graders/suite/test_cases.py::test_cache_capacity[oura_ring]",
        "graders/suite/test_cases.py::test_cache_capacity[robotaxi]",
    }),
    # ceil instead of floor: right only when available / state is a whole number. On
    # cloud_fleet that is "0 tokens" (state 0) and "1 devices" (nothing available): 2/16.
    # oom stays consistent with max_concurrent, so the invariants pass.
    "cache_ceil": expected(92.25, {"cache_capacity"}, {
        "graders/suite/test_cases.py::test_cache_capacity[cloud_fleet]",
        "graders/suite/test_cases.py::test_cache_capacity[iphone]",
        "graders/suite/test_cases.py::test_cache_capacity[oura_ring]",
        "graders/suite/test_cases.py::test_cache_capacity[robotaxi]",
    }),
    # --- transformer_state_gb ------------------------------------------------------------
    # No factor 2: only cloud_fleet's Llama-2-70B has layers and hidden_dim, and every one
    # of its states is wrong. The other models give None, which is right but trivial
    # (computing nothing gives it too), so those cases count only once a real state is
    # right: the three other tracks' transformer_state_gb tests earn nothing (1 point
    # each). Knock-on: cache_capacity calls the student's transformer_state_gb; on
    # cloud_fleet only "0 tokens" (state 0) survives (1/16).
    "kv_state_no_factor_2": expected(94.125, {"transformer_state_gb", "cache_capacity"}, {
        "graders/suite/test_cases.py::test_transformer_state_gb[cloud_fleet]",
        "graders/suite/test_cases.py::test_transformer_state_gb[iphone]",
        "graders/suite/test_cases.py::test_transformer_state_gb[oura_ring]",
        "graders/suite/test_cases.py::test_transformer_state_gb[robotaxi]",
        "graders/suite/test_cases.py::test_cache_capacity[cloud_fleet]",
    }),
    # --- serve ---------------------------------------------------------------------------
    # passes = n // B: right only when B divides n (13/36 cases), and n < B divides by a
    # zero total (ZeroDivisionError), which also fails both serve invariants that try it.
    # Batched throughput still beats 2x unbatched for n >= 32, so that invariant passes.
    "passes_floor": expected(92.888889, {"serve"}, {
        "graders/suite/test_cases.py::test_serve",
        "graders/suite/test_invariants.py::test_passes_round_up",
        "graders/suite/test_invariants.py::test_throughput_never_falls_with_batch_size",
    }),
    # --- erlang_c ------------------------------------------------------------------------
    # The textbook formula: exact on small fleets, but a**c overflows (OverflowError) from
    # c = 170 on, so every large-fleet case fails. Knock-on: queueing_latency calls the
    # student's erlang_c, so its large-fleet test fails too. The invariants use at most
    # 128 replicas, where the formula is still finite.
    "erlang_c_textbook": expected(95.0, {"erlang_c", "queueing_latency"}, {
        "graders/suite/test_hidden_cases.py::test_erlang_c_large_fleet",
        "graders/suite/test_hidden_cases.py::test_queueing_latency_large_fleet",
    }),
    # (inf, 0.0) for overload: "overloaded" and "exactly saturated" fail (27/29). No
    # knock-on: queueing_latency returns early when utilization >= 1, before erlang_c.
    "erlang_c_overload_zero": expected(99.448276, {"erlang_c"}, {
        "graders/suite/test_cases.py::test_erlang_c",
    }),
    # --- quantity_to_float ---------------------------------------------------------------
    # 0.0 instead of the default for a plain value float() rejects: "a non-numeric string"
    # and "a list" (19/21). No knock-on: serving_track_profile only passes it None (the
    # default branch) or quantities that convert.
    "quantity_zero_on_failure": expected(99.619048, {"quantity_to_float"}, {
        "graders/suite/test_cases.py::test_quantity_to_float",
    }),
}


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


def reject_constant(name: str) -> float:
    raise ValueError(f"results.json holds {name}, which is not valid JSON")


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
