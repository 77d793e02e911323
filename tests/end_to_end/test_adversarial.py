"""The adversarial corpus: hostile submissions, graded with the CLI the way a user grades one.

Each folder of ``tests/adversarial`` holds a ``serving.py`` that attacks the grader (and, for
the "bundled" cases, hostile files beside it, stored with a ``.bundled`` suffix so that this
repository's own pytest run never collects them; the suffix is dropped when the case is
copied for grading). Most are ``tests/corpus/correct/serving.py`` with an attack appended,
so that "a cheat never earns a point that honest code would not" is checked exactly: an
attack on ``serve`` must score what the correct solution scores with ``serve`` raising
NotImplementedError (BASELINE_WITHOUT_SERVE, itself graded here), no more.

Every case is graded once, two at a time, by ``python -m graders grade FOLDER --results
FILE``, from a neutral working folder, with ``TMPDIR`` pointing into a folder whose path
carries a per-case marker. The grader's worker, its box and every process the submission
starts inherit that path (in their cwd, command line or environment), so processes that
survive grading can be found in ``/proc``. Then, for each case:

- grading completed (exit code 0) and results.json is strict Gradescope JSON listing every
  test of the correct submission, with the expected score (exact, or a bound);
- points are lost only in the tests of the attacked function;
- the results file is the grader's own (never forged) and nothing else was left beside it;
- the wall time is bounded, and no process outlives grading by more than 2 s.

Some expectations depend on the privilege drop, which only exists when the grader runs as
root: those cases state both outcomes (see ``Outcome.without_root``).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    ADVERSARIAL,
    AS_ROOT,
    BUNDLED_SUFFIX,
    CORPUS,
    GRADERS_SCRIPT,
    GRADESCOPE_VISIBILITIES,
    MAX_RESULTS_BYTES,
    TESTS,
    GradedCase,
    grade_case,
    reject_constant,
    selected_cases,
)

from graders.sandbox.runner import Limits

pytestmark = pytest.mark.slow

CORRECT_SOURCE = CORPUS / "correct" / "serving.py"
LIMITS = Limits()

#: The correct solution with serve raising NotImplementedError loses exactly serve's 12
#: points (test_serve 8, batching_gains_more_than_twofold 2, passes_round_up 1,
#: throughput_never_falls_with_batch_size 1) and keeps the other 88.
BASELINE_WITHOUT_SERVE = 88.0
NOT_IMPLEMENTED_SERVE = '''

def serve(n_requests, batch_size, *, overhead_ms=20.0, marginal_ms=2.0):
    raise NotImplementedError
'''
#: Extra gradings: the correct solution (for the list of tests), the honest baseline, and a
#: second grading of the stateful submission (for determinism).
CORRECT = "(correct)"
WITHOUT_SERVE = "(correct without serve)"
CHANGING = "changing_answers"
CHANGING_AGAIN = "changing_answers (again)"
#: The shadow modules graded from inside their own folder (cwd = the submission), with the
#: console script. (``python -m graders`` from there would import the folder's own
#: ``graders/`` package: see docs/security.md.)
SHADOWS = "bundled_shadow_modules"
SHADOWS_INSIDE = "bundled_shadow_modules (graded from inside)"
ANY = None


@dataclass(frozen=True)
class Outcome:
    """What grading one hostile submission must give."""

    #: The exact score, or None when only ``at_most`` is stated.
    score: float | None
    #: Contract functions whose tests may lose points (None: any may).
    reaches: frozenset[str] | None = frozenset({"serve"})
    #: A bound, for attacks whose exact score is not worth pinning.
    at_most: float | None = None
    #: Text the top-level output of results.json must contain.
    message: str = ""
    #: The exact score when the grader is not root (no privilege drop), if it differs.
    without_root: float | None = None
    #: A hang: may take up to the runner's worst case rather than a few seconds.
    slow: bool = False
    #: Marker files that exist only if a bundled file or payload was executed (globs,
    #: relative to the case's folder).
    markers: tuple[str, ...] = field(default=())
    #: The attack writes TAMPERED into the grader's cached runtime (checked after grading).
    tampers_cache: bool = False

    def expected_score(self) -> float | None:
        if not AS_ROOT and self.without_root is not None:
            return self.without_root
        return self.score


def honest(score: float = BASELINE_WITHOUT_SERVE, **kwargs: Any) -> Outcome:
    """Exactly what honest code scores: by default, serve's 12 points lost and no more."""
    return Outcome(score, **kwargs)


def unimportable(message: str, **kwargs: Any) -> Outcome:
    """The import fails: 0 points, every test listed, and the reason in the output."""
    return Outcome(0.0, reaches=ANY, message=message, **kwargs)


def stolen() -> Outcome:
    """Reads the grader's files: refused under the privilege drop; without root, the worker
    runs as the grader's user, can read what it reads, and the theft scores 100."""
    return honest(without_root=100.0)


#: Markers the bundled files write beside themselves (RAN-<file>) and in /tmp (see
#: helpers.bundled_markers), and the files the .pth line and pickle payloads would touch.
BUNDLED_MARKERS = ("**/RAN-*", "out/pth-ran", "submission/pth-ran")
PAYLOAD_MARKERS = ("out/reduce-payload-ran", "out/getstate-ran", "submission/reduce-payload-ran")

EXPECTED: dict[str, Outcome] = {
    # --- comparison tricks: the worker reads values through their base types ------------
    "always_equal_result": honest(),
    "always_equal_fields": honest(),
    # The plain twin of the liars, ServeResult(0.0, 0.0, 0), is a constant: it earns no
    # invariant (a constant throughput "never falls", but it does not rise where batching
    # saves passes), and the lies add nothing to it.
    "float_subclass_lies": honest(),
    "class_spoofing": honest(),
    "nonfinite_answers": honest(),
    "numpy_scalars": unimportable("No module named 'numpy'"),
    # --- exits ----------------------------------------------------------------------------
    "sys_exit_at_import": unimportable("SystemExit: 0"),
    "os_exit_at_import": unimportable("the worker exited with code 0"),
    "keyboard_interrupt_at_import": unimportable("KeyboardInterrupt"),
    "base_exception_at_import": unimportable("Escape: escaping the import"),
    "sys_exit_in_serve": honest(),
    "os_exit_in_serve": honest(),
    "keyboard_interrupt_in_serve": honest(),
    "base_exception_in_serve": honest(),
    # --- outcome tricks -------------------------------------------------------------------
    "pytest_outcome_lookalikes": honest(),
    "import_pytest": unimportable("No module named 'pytest'"),
    # --- tampering inside the worker ------------------------------------------------------
    "monkeypatch_math_time": honest(),
    "monkeypatch_json_dumps": honest(),
    # Patching builtins.type also breaks pint's isinstance(x, type) in the worker: the
    # tampering costs points in other functions (58.142857 today) and never gains any.
    "monkeypatch_builtins": Outcome(None, reaches=ANY, at_most=BASELINE_WITHOUT_SERVE),
    # A forged line answers its own call; the real reply then desynchronises the next
    # call, which fails as garbage: never more than the baseline (exactly 88.0 today).
    "forged_protocol_lines": Outcome(None, reaches=ANY, at_most=BASELINE_WITHOUT_SERVE),
    # Every worker's first reply is the stale real ready line: every call fails as garbage,
    # and restarts are charged to the hang budget.
    "forged_ready_line": Outcome(0.0, reaches=ANY, slow=True),
    "stdout_tampering": honest(100.0, reaches=frozenset()),
    "close_protocol_fds": honest(),
    # 30,000 nested brackets in a reply line once crashed the grader (RecursionError, no
    # results): now a bad reply for that call, as any unreadable reply is.
    "nested_reply": honest(),
    # A request pipe shrunk to one page and a hang in a pipelined call once blocked the
    # grader in a write with no deadline: now the call times out and the rest is graded.
    # Whether a call is caught pipelined depends on timing: only cache_capacity may lose.
    "shrink_request_pipe": Outcome(None, reaches=frozenset({"cache_capacity"}),
                                   at_most=100.0, slow=True),
    # Under the privilege drop the cache is read-only to the worker. Without root the worker
    # has the grader's uid and can rewrite it (see test_the_cached_runtime_is_never_tampered).
    "tamper_runtime_cache": honest(tampers_cache=True),
    # --- stealing -------------------------------------------------------------------------
    "stack_peeking": honest(),
    "gc_scan": honest(),
    "steal_reference_absolute": stolen(),
    "steal_reference_relative": stolen(),
    "steal_correct_solution": stolen(),
    "steal_via_grader_proc": stolen(),
    # --- forging results.json -------------------------------------------------------------
    "forge_results_then_exit": unimportable("the worker exited with code 0"),
    "forge_results_atexit": honest(),
    "forge_results_thread": honest(),
    "forge_results_del": honest(),
    "forge_results_grandchild": honest(),
    # --- hangs ----------------------------------------------------------------------------
    "hang_in_serve": honest(slow=True),
    "hang_everywhere": Outcome(0.0, reaches=ANY, slow=True),
    "hang_at_import": unimportable("importing it took longer than the deadline", slow=True),
    "hang_in_c": honest(slow=True),
    "ignore_signals_and_loop": honest(slow=True),
    # --- resource exhaustion --------------------------------------------------------------
    "memory_bomb": honest(),
    "fork_bomb": honest(100.0, reaches=frozenset()),
    "recursion_overflow": honest(),
    "flood_output": honest(100.0, reaches=frozenset()),
    "raise_rlimits": honest(),
    # --- hostile objects ------------------------------------------------------------------
    "hostile_repr": honest(),
    "reduce_payload": honest(markers=PAYLOAD_MARKERS),
    "getattr_raises": honest(),
    # Right on odd calls, wrong on even ones: 18 of 36 serve cases (4 of 8 points), the
    # passes invariant (1 point) and the throughput invariant (1 point: it asks one input
    # twice and gets two answers) are lost; graded twice, it scores the same.
    "changing_answers": honest(94.0),
    "sleepy_properties": honest(slow=True),
    # --- bundled files: no effect at all --------------------------------------------------
    "bundled_pytest_files": honest(100.0, reaches=frozenset(), markers=BUNDLED_MARKERS),
    "bundled_site_hooks": honest(100.0, reaches=frozenset(), markers=BUNDLED_MARKERS),
    "bundled_shadow_modules": honest(100.0, reaches=frozenset(), markers=BUNDLED_MARKERS),
}


#: Cases graded by a module of their own (its path below tests/), which asserts their
#: outcome (exact score, nothing left behind, outputs untouched) with checks specific to
#: the attack; this module does not grade them a second time.
GRADED_ELSEWHERE = {
    "print_per_request": "end_to_end/test_adversarial_runner.py",
    "flood_output_gigabytes": "end_to_end/test_adversarial_runner.py",
    "huge_string_fields": "end_to_end/test_adversarial_runner.py",
    "huge_integer_fields": "end_to_end/test_adversarial_values.py",
    "report_environment": "end_to_end/test_adversarial_values.py",
    "slow_calls": "end_to_end/test_adversarial_runner.py",
    "fill_tmp_disk": "sandbox/test_confinement.py",
    "network_listen_connect": "sandbox/test_confinement.py",
    "sysv_ipc_leftovers": "sandbox/test_confinement.py",
    "hostile_text": "end_to_end/test_adversarial_outputs.py",
    "plant_output_symlinks": "end_to_end/test_adversarial_outputs.py",
    "deep_directory_tree": "end_to_end/test_adversarial_cleanup.py",
    "read_other_grading": "end_to_end/test_adversarial_cleanup.py",
    "search_disk_for_grader": "end_to_end/test_adversarial_confinement.py",
    "ordinary_user_regrade": "end_to_end/test_adversarial_confinement.py",
    "leave_shared_files": "end_to_end/test_adversarial_cleanup.py",
    "portable_escape_and_grow": "end_to_end/test_portability.py",
    "portable_shm_hoard": "end_to_end/test_portability.py",
    "keyring_steal_and_plant": "end_to_end/test_adversarial_syscalls.py",
    "sysv_shm_hoard": "end_to_end/test_adversarial_syscalls.py",
    "nested_namespaces": "end_to_end/test_adversarial_syscalls.py",
    "tcp_to_host_loopback": "end_to_end/test_adversarial_syscalls.py",
    "host_probe": "end_to_end/test_adversarial_syscalls.py",
    "reach_own_users_processes_and_files": "end_to_end/test_adversarial_syscalls.py",
    "tell_grading_from_regrade": "end_to_end/test_adversarial_syscalls.py",
    "fill_host_box": "end_to_end/test_adversarial_box.py",
}


def case_names() -> list[str]:
    """The cases this module grades (every folder but those graded elsewhere)."""
    return sorted(p.name for p in ADVERSARIAL.iterdir()
                  if (p / "serving.py").is_file() and p.name not in GRADED_ELSEWHERE)


def grade(name: str, source: Path, base: Path, seed: Path | None = None, *,
          inside: bool = False) -> GradedCase:
    """``grade_case``, with the markers and the cache check of the case's row in EXPECTED."""
    case = name.split(" (")[0]
    return grade_case(name, source, base, seed, inside=inside,
                      markers=EXPECTED[case].markers if case in EXPECTED else (),
                      tampers_cache=name in EXPECTED and EXPECTED[name].tampers_cache)


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    """A folder the sandbox user can traverse (pytest's tmp_path is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="adversarial-", dir="/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def graded(base: Path, request: pytest.FixtureRequest) -> dict[str, GradedCase]:
    """Every selected case graded once (and the extra gradings), two at a time, hangs
    first; the correct solution always (it lists the tests and seeds the caches)."""
    wanted = selected_cases(request, ("name",))
    derived = base / "derived"
    (derived / "without_serve").mkdir(parents=True)
    (derived / "without_serve" / "serving.py").write_text(
        CORRECT_SOURCE.read_text(encoding="utf-8") + NOT_IMPLEMENTED_SERVE, encoding="utf-8")
    jobs = {name: ADVERSARIAL / name for name in case_names()}
    jobs[CORRECT] = CORRECT_SOURCE.parent
    jobs[WITHOUT_SERVE] = derived / "without_serve"
    jobs[CHANGING_AGAIN] = ADVERSARIAL / CHANGING
    if GRADERS_SCRIPT.is_file():
        jobs[SHADOWS_INSIDE] = ADVERSARIAL / SHADOWS
    if wanted is not None:  # -k NAME: grade only what the selected tests ask for
        if CHANGING_AGAIN in wanted or CHANGING in wanted:
            wanted |= {CHANGING, CHANGING_AGAIN}
        jobs = {name: path for name, path in jobs.items() if name in wanted or name == CORRECT}
    for stale in ("/tmp/reduce-payload-ran", "/tmp/pth-ran"):
        Path(stale).unlink(missing_ok=True)
    first = grade(CORRECT, jobs.pop(CORRECT), base)  # its TMPDIR seeds the others' caches
    order = sorted(jobs, key=lambda name: not (name in EXPECTED and EXPECTED[name].slow))
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(lambda name: grade(name, jobs[name], base, first.home / "tmp",
                                                inside=name == SHADOWS_INSIDE), order))
    return {run.name: run for run in [first, *runs]}


def completed_results(graded: dict[str, GradedCase], name: str) -> dict[str, Any]:
    run = graded[name]
    assert run.returncode == 0, f"grading {name} exited {run.returncode}:\n{run.stderr[-2000:]}"
    assert run.text, f"grading {name} wrote no results.json"
    return run.results


def nodeids(results: dict[str, Any]) -> list[str]:
    return [test["extra_data"]["nodeid"] for test in results["tests"]]


CASES = sorted(EXPECTED)
EXACT = sorted(name for name, outcome in EXPECTED.items() if outcome.score is not None)
MESSAGES = sorted(name for name, outcome in EXPECTED.items() if outcome.message)
REACHING = sorted(name for name, outcome in EXPECTED.items() if outcome.reaches is not None)
MARKED = sorted(name for name, outcome in EXPECTED.items() if outcome.markers)


# --- the corpus itself -------------------------------------------------------------------


def test_every_adversarial_folder_has_an_expected_outcome() -> None:
    assert set(case_names()) == set(EXPECTED), "add or remove the folder's row in EXPECTED"
    assert len(EXPECTED) >= 32


def test_every_case_graded_elsewhere_is_graded_by_its_module() -> None:
    folders = {p.name for p in ADVERSARIAL.iterdir() if (p / "serving.py").is_file()}
    assert set(GRADED_ELSEWHERE) <= folders
    for name, module in GRADED_ELSEWHERE.items():
        assert f'"{name}"' in (TESTS / module).read_text(encoding="utf-8"), \
            f"{module} does not grade {name}"


#: The generators of copies of the golden file (graded by end_to_end/test_unseen_inputs.py):
#: scripts, not hostile files.
GENERATORS = ("lookup_table_generator.py", "twin_copy_generator.py")


def test_no_hostile_file_in_the_repository_can_be_collected_or_imported_by_accident() -> None:
    for path in ADVERSARIAL.rglob("*"):
        if path.is_file() and path.name not in ("serving.py", "README.md", *GENERATORS):
            assert path.name.endswith(BUNDLED_SUFFIX), f"{path} must end in {BUNDLED_SUFFIX}"


@pytest.mark.parametrize("name", CASES)
def test_a_hostile_submission_states_its_attack_in_its_first_line(name: str) -> None:
    first = (ADVERSARIAL / name / "serving.py").read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith('"""Attack: ')
    assert first.endswith('."""')


# --- grading completes, with valid results -----------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_a_hostile_submission_is_graded_to_completion(
        graded: dict[str, GradedCase], name: str) -> None:
    run = graded[name]
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stderr[-2000:]}"
    assert "INTERNALERROR" not in run.stdout + run.stderr
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    assert run.text, "no results.json"


@pytest.mark.parametrize("name", CASES)
def test_results_json_is_strict_gradescope_json_listing_every_test(
        graded: dict[str, GradedCase], name: str) -> None:
    completed_results(graded, name)
    document = json.loads(graded[name].text, parse_constant=reject_constant)
    correct = completed_results(graded, CORRECT)
    assert nodeids(document) == nodeids(correct)
    assert isinstance(document["score"], float)
    for test in document["tests"]:
        label = test.get("name", test)
        assert isinstance(test["name"], str), label
        for key in ("score", "max_score"):
            assert isinstance(test[key], int | float), label
            assert not isinstance(test[key], bool), label
        assert 0 <= test["score"] <= test["max_score"], label
        assert test["status"] in ("passed", "failed"), label
        assert test["visibility"] in GRADESCOPE_VISIBILITIES, label
        assert all(isinstance(tag, str) for tag in test["tags"]), label
    maximum = sum(test["max_score"] for test in document["tests"])
    assert 0 <= document["score"] <= maximum
    assert abs(sum(test["score"] for test in document["tests"]) - document["score"]) <= 1e-3
    assert len(graded[name].text.encode()) < MAX_RESULTS_BYTES


@pytest.mark.parametrize("name", CASES)
def test_the_results_file_is_the_graders_own_and_nothing_is_left_beside_it(
        graded: dict[str, GradedCase], name: str) -> None:
    results = completed_results(graded, name)
    assert "FORGED" not in graded[name].text
    assert results["extra_data"]["schema_version"] == 1
    assert graded[name].left_behind == ()


# --- scores ----------------------------------------------------------------------------------


def test_the_honest_baselines_score_what_the_table_assumes(graded: dict[str, GradedCase]) -> None:
    assert completed_results(graded, CORRECT)["score"] == 100.0
    without_serve = completed_results(graded, WITHOUT_SERVE)
    assert without_serve["score"] == BASELINE_WITHOUT_SERVE
    lost = {test["tags"][0] for test in without_serve["tests"]
            if test["score"] < test["max_score"]}
    assert lost == {"serve"}


@pytest.mark.parametrize("name", CASES)
def test_a_hostile_submission_earns_no_point_that_honest_code_would_not(
        graded: dict[str, GradedCase], name: str) -> None:
    outcome = EXPECTED[name]
    score = completed_results(graded, name)["score"]
    expected = outcome.expected_score()
    if expected is not None:
        assert score == expected
    if outcome.at_most is not None:
        assert score <= outcome.at_most


@pytest.mark.parametrize("name", REACHING)
def test_a_hostile_submission_loses_points_only_in_the_function_it_attacks(
        graded: dict[str, GradedCase], name: str) -> None:
    results = completed_results(graded, name)
    lost = {test["tags"][0] for test in results["tests"] if test["score"] < test["max_score"]}
    reaches = EXPECTED[name].reaches
    assert reaches is not None
    assert lost <= reaches, f"points lost in {sorted(lost - reaches)}"


@pytest.mark.parametrize("name", MESSAGES)
def test_an_unimportable_submission_says_why_and_lists_every_test_at_zero(
        graded: dict[str, GradedCase], name: str) -> None:
    results = completed_results(graded, name)
    assert EXPECTED[name].message in results["output"]
    assert results["score"] == 0.0
    assert all(test["score"] == 0 for test in results["tests"])


def test_a_submission_with_changing_answers_is_graded_deterministically(
        graded: dict[str, GradedCase]) -> None:
    first = completed_results(graded, CHANGING)
    second = completed_results(graded, CHANGING_AGAIN)
    assert first["score"] < 100.0
    del first["execution_time"], second["execution_time"]
    assert first == second


# --- time, processes and side effects ---------------------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_grading_a_hostile_submission_takes_bounded_time(
        graded: dict[str, GradedCase], name: str) -> None:
    elapsed = graded[name].elapsed_s
    assert elapsed < LIMITS.worst_case_s + 30
    if not EXPECTED[name].slow:  # an attack that is not a hang costs no hang budget
        assert elapsed < LIMITS.worst_case_s


@pytest.mark.parametrize("name", CASES)
def test_no_process_survives_grading(graded: dict[str, GradedCase], name: str) -> None:
    assert graded[name].survivors == ()


def test_shadow_modules_do_nothing_even_when_graded_from_inside_their_folder(
        graded: dict[str, GradedCase]) -> None:
    if SHADOWS_INSIDE not in graded:
        pytest.skip(f"no console script at {GRADERS_SCRIPT}")
    run = graded[SHADOWS_INSIDE]
    assert completed_results(graded, SHADOWS_INSIDE)["score"] == 100.0
    assert "FORGED" not in run.text
    assert run.markers == ()
    assert run.survivors == ()


@pytest.mark.parametrize("name", sorted(n for n, o in EXPECTED.items() if o.tampers_cache))
def test_the_cached_runtime_is_never_tampered_with(graded: dict[str, GradedCase],
                                                  name: str) -> None:
    if AS_ROOT:
        assert graded[name].tampered == ()
    else:  # documented weakness: the worker runs as the grader's user and owns the cache
        assert graded[name].tampered != ()


@pytest.mark.parametrize("name", MARKED)
def test_bundled_files_and_payloads_never_run(graded: dict[str, GradedCase], name: str) -> None:
    assert graded[name].markers == ()
    assert not Path("/tmp/reduce-payload-ran").exists()
    assert not Path("/tmp/pth-ran").exists()
