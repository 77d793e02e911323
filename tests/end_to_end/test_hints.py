"""One bug, one hint, and it names the bug (issue 31), graded as a user grades.

Every single-bug submission of ``tests/corpus`` and every mistake of the grader's
catalogue (a mutant of ``corpus/correct/serving.py`` made by one text edit here, or the
corpus folder that has it) is graded once with ``python -m graders grade``. Then:

- the failed tests of the buggy function hold exactly one distinct hint, which names the
  bug (specific words per bug);
- the failed tests of any other function hold no hint, and where they show cases, they
  send the student to the buggy function ("fix X first").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from catalogue_mutants import KNOCK_ON_ONLY, MUTANTS, submission_name, write_mutant
from helpers import CORPUS

from graders.grading.diagnosis import catalogue
from graders.regrade.report import function_of

pytestmark = pytest.mark.slow

#: The buggy function of each corpus submission, and words its one hint must hold.
CORPUS_HINTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "variability_linear_cv": ("queueing_latency", ("squares cv", "not (1 + cv)/2")),
    "p99_at_q095": ("queueing_latency", ("q = 0.99", "q = 0.95")),
    "slo_ok_uses_mean": ("queueing_latency", ("p99", "not the mean")),
    "unstable_only_above_one": ("queueing_latency", ("utilization < 1", "not <= 1")),
    "gib_for_gb": ("serving_track_profile", ('"GB"', '"GiB"')),
    "battery_zero_not_none": ("serving_track_profile", ("battery_wh None, not 0",)),
    "formation_delay_no_half": ("batching_tax", ("half", "/ 2 is missing")),
    "batching_natural_log": ("batching_tax", ("log2(B)", "not the natural log")),
    "warm_pool_ignored": ("cold_start_latency", ("warm pool", "not always 0")),
    "cold_start_max_bandwidth": ("cold_start_latency", ("slower link", "not the max")),
    "mb_over_1000": ("cache_capacity", ("1024, not 1000",)),
    "cache_ceil": ("cache_capacity", ("floor", "not up")),
    "kv_state_no_factor_2": ("transformer_state_gb", ("keys and values", "factor 2")),
    "passes_floor": ("serve", ("ceil(n / B)", "n // B")),
    "erlang_c_textbook": ("erlang_c", ("factorials", "Erlang B recursion")),
    "erlang_c_overload_zero": ("erlang_c", ("always waits", "1.0, not 0")),
    "quantity_zero_on_failure": ("quantity_to_float", ("default", "not 0.0")),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every corpus bug and every mutant graded once, two at a time: its results.json."""
    root = tmp_path_factory.mktemp("hints")
    jobs: dict[str, Path] = {name: CORPUS / name / "serving.py" for name in CORPUS_HINTS}
    for source in MUTANTS.values():
        name = submission_name(source)
        if name not in jobs:
            folder = root / name
            folder.mkdir()
            jobs[name] = write_mutant(folder, source)  # type: ignore[arg-type]
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}

    def run(name: str) -> tuple[str, dict[str, Any]]:
        out = root / f"{name}-results"
        out.mkdir(mode=0o700)
        results = out / "results.json"
        completed = subprocess.run(
            [sys.executable, "-m", "graders", "grade", str(jobs[name]), "--results",
             str(results)], cwd=out, env=env, capture_output=True, text=True, timeout=900,
            check=False)
        assert completed.returncode == 0, completed.stderr
        document: dict[str, Any] = json.loads(results.read_text(encoding="utf-8"))
        return name, document

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(run, sorted(jobs)))


def hints_by_function(results: dict[str, Any]) -> dict[str, set[str]]:
    """The distinct hints of each function's failed tests."""
    found: dict[str, set[str]] = {}
    for test in results["tests"]:
        if test["status"] == "passed":
            continue
        lines = [line.strip() for line in str(test["output"]).splitlines()]
        found.setdefault(function_of(test), set()).update(
            line.removeprefix("hint:").strip() for line in lines if line.startswith("hint:"))
    return found


def check_one_hint(results: dict[str, Any], function: str) -> str:
    """The one hint of ``function``'s failed tests; every other failed function has none
    and, where its cases show, says to fix ``function`` first."""
    found = hints_by_function(results)
    assert len(found.get(function, set())) == 1, found
    for other, hints in found.items():
        if other != function:
            assert not hints, (other, hints)
    for test in results["tests"]:
        output = str(test["output"])
        if test["status"] != "passed" and function_of(test) != function \
                and "\ncase " in output:
            assert f"fix {function} first" in output, output
    return next(iter(found[function]))


@pytest.mark.parametrize("bug", sorted(CORPUS_HINTS))
def test_each_corpus_bug_gets_one_hint_that_names_it(graded: dict[str, dict[str, Any]],
                                                     bug: str) -> None:
    function, words = CORPUS_HINTS[bug]
    hint = check_one_hint(graded[bug], function)
    for word in words:
        assert word in hint, (bug, hint)


def test_every_catalogued_mistake_has_a_submission_here() -> None:
    assert set(MUTANTS) == {mistake.id for mistake in catalogue()}


@pytest.mark.parametrize("mistake", sorted(catalogue(), key=lambda m: m.id),
                         ids=lambda m: m.id)
def test_each_catalogued_mistake_gets_its_own_hint_and_only_it(
        graded: dict[str, dict[str, Any]], mistake: Any) -> None:
    results = graded[submission_name(MUTANTS[mistake.id])]
    if mistake.id in KNOCK_ON_ONLY:
        root = KNOCK_ON_ONLY[mistake.id]
        check_one_hint(results, root)
        outputs = [str(t["output"]) for t in results["tests"]
                   if t["status"] != "passed" and function_of(t) == mistake.function]
        assert outputs
        assert all(f"fix {root} first" in output for output in outputs)
        return
    assert check_one_hint(results, mistake.function) == mistake.hint
