"""What the test modules share; a test module never imports another test module.

``tests/`` is on ``sys.path`` whichever test runs (pytest's default "prepend" import mode
puts there the folder of ``tests/conftest.py``, which has no ``__init__.py``), so every
test folder imports these with ``from helpers import ...``. Fixtures live in
``conftest.py``.

- the repository's paths (``REPO``, ``TESTS`` and the data folders beside this file);
- the CLI as a user runs it: ``graders``, ``load``, ``assert_usage_error``;
- results documents: ``GRADESCOPE_VISIBILITIES``, ``reject_constant``, ``sample_score``;
- ``selected_cases``: which submissions a ``-k`` selection asks a corpus module to grade;
- processes a grading left: ``processes_marked``, ``kill_marked``;
- grading on the portable path: ``blocked_environment``, ``grade_submission``;
- one case of ``adversarial/`` graded as a user grades it: ``grade_case``, ``GradedCase``;
- ``CORPUS_EXPECTED``: what grading each single-bug submission of ``corpus/`` must give.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from graders.grading.scoring import TestScore
from graders.sandbox.cleanup import cache_folder
from graders.sandbox.runner import Limits
from graders.versions import GRADING_PACKAGES

# --- paths -----------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
#: The correct solution and the single-bug submissions (``corpus/README.md``).
CORPUS = TESTS / "corpus"
#: Hostile submissions (``adversarial/README.md``).
ADVERSARIAL = TESTS / "adversarial"
#: Submissions that fake their answers.
FAKES = TESTS / "fakes"
#: A ``sitecustomize.py`` that plays a system without the POSIX-only modules and /proc.
POSIX_BLOCKED = TESTS / "posix_blocked"
#: The console script ``graders`` installed beside this interpreter.
GRADERS_SCRIPT = Path(sys.executable).with_name("graders")
#: The grader can drop the worker's privileges only when it runs as root.
AS_ROOT = os.geteuid() == 0


# --- the CLI as a user runs it ---------------------------------------------------------------


def graders(*args: str | Path, script: bool = False, cwd: Path | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a fresh process: ``python -m graders`` or the console script.

    ``env`` adds to (or, with empty values, removes from) the inherited environment.
    """
    command = [str(GRADERS_SCRIPT)] if script else [sys.executable, "-m", "graders"]
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("PYTEST_", "COV_"))}
    for key, value in (env or {}).items():
        if value:
            environment[key] = value
        else:
            environment.pop(key, None)
    return subprocess.run([*command, *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=environment, timeout=300, check=False)


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def assert_usage_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("graders: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0]
    assert "Traceback" not in result.stderr + result.stdout


# --- results documents -----------------------------------------------------------------------

GRADESCOPE_VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")


def reject_constant(name: str) -> float:
    """A ``parse_constant`` for ``json.loads``: NaN and infinities are not valid JSON."""
    raise ValueError(f"results.json holds {name}, which is not valid JSON")


def sample_score(name: str = "serve matches", *, function: str = "serve",
                 track: str | None = None, max_score: Fraction = Fraction(10),
                 earned: Fraction = Fraction(0), status: Any = "not run",
                 visibility: Any = "visible") -> TestScore:
    """A graded test's score, by default serve's, worth 10 points and not run yet."""
    return TestScore(nodeid=f"suite::{name}", name=name, function=function, track=track,
                     visibility=visibility, max_score=max_score, earned=earned, status=status)


# --- selecting the cases of a corpus ---------------------------------------------------------


def selected_cases(request: pytest.FixtureRequest, params: tuple[str, ...]) -> set[str] | None:
    """The submissions the selected tests of the requesting module ask for (their
    parameter named one of ``params``), so that ``-k NAME`` grades only NAME; None when a
    selected test of the module needs the whole corpus (it has no such parameter)."""
    wanted: set[str] = set()
    for item in request.session.items:
        if getattr(item, "module", None) is not request.module \
                or "graded" not in getattr(item, "fixturenames", ()):
            continue
        callspec = getattr(item, "callspec", None)
        found = [callspec.params[p] for p in params if callspec and p in callspec.params]
        if not found:
            return None
        wanted.update(str(value) for value in found)
    return wanted


# --- processes a grading left ----------------------------------------------------------------

#: Seconds to wait for SIGKILLed processes to disappear from /proc.
KILL_GRACE_S = 2.0


def ordinary_user(name: str) -> Any:
    """The ordinary account ``name`` (a ``pwd`` entry), made with a home folder of mode 755
    (Debian's default) if missing. Needs root."""
    import pwd

    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--create-home", "--shell", "/usr/sbin/nologin", name],
                       check=True, capture_output=True)
    entry = pwd.getpwnam(name)
    Path(entry.pw_dir).chmod(0o755)
    return entry


def processes_of(uid: int) -> dict[int, str]:
    """The live processes whose real uid is ``uid``: pid and command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):
            if entry.name.isdigit() and int((entry / "status").read_text().split(
                    "\nUid:")[1].split()[0]) == uid:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
                found[int(entry.name)] = command[:200].decode("utf-8", "replace")
    return found


def processes_marked(marker: str, *, command_line: bool = True) -> list[str]:
    """Live processes (but this one) whose working folder or environment contains
    ``marker``, or whose command line does unless ``command_line`` is false, as
    "PID: COMMAND LINE" (the command line cut to 200 characters)."""
    needle = marker.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        command = b""
        with contextlib.suppress(OSError):
            command = (entry / "cmdline").read_bytes()
        texts = [command] if command_line else []
        with contextlib.suppress(OSError):
            texts.append((entry / "environ").read_bytes())
        with contextlib.suppress(OSError):
            texts.append(os.readlink(entry / "cwd").encode())
        if any(needle in text for text in texts):
            shown = command.replace(b"\0", b" ")[:200].decode("utf-8", "replace")
            found.append(f"{entry.name}: {shown}")
    return found


def kill_marked(marker: str) -> list[str]:
    """Wait up to KILL_GRACE_S for marked processes to go; SIGKILL and list any left."""
    deadline = time.monotonic() + KILL_GRACE_S
    survivors = processes_marked(marker)
    while survivors and time.monotonic() < deadline:
        time.sleep(0.1)
        survivors = processes_marked(marker)
    for survivor in survivors:
        with contextlib.suppress(OSError):
            os.kill(int(survivor.split(":", 1)[0]), signal.SIGKILL)
    return survivors


# --- grading on the portable path ------------------------------------------------------------


def blocked_environment() -> dict[str, str]:
    """This environment with POSIX_BLOCKED first on PYTHONPATH: no POSIX-only modules."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(POSIX_BLOCKED), str(REPO),
                                                      env.get("PYTHONPATH", "")]))
    return env


def grade_submission(submission: Path, results: Path, *, blocked: bool) -> dict[str, Any]:
    """Grade ``submission`` with the CLI, on the portable path if ``blocked``."""
    env = blocked_environment() if blocked else \
        {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    completed = subprocess.run(
        [sys.executable, "-m", "graders", "grade", str(submission), "--results", str(results)],
        cwd=results.parent, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    document: dict[str, Any] = json.loads(results.read_text(encoding="utf-8"))
    return document


# --- one case of adversarial/, graded as a user grades it ------------------------------------

#: Bundled files are stored with this suffix, so that this repository's own pytest run
#: never collects them; it is dropped when the case is copied for grading.
BUNDLED_SUFFIX = ".bundled"
#: A results.json larger than this did not truncate the submission's text.
MAX_RESULTS_BYTES = 1024**2


@dataclass(frozen=True)
class GradedCase:
    """One CLI run of one case, and what was found after it."""

    name: str
    home: Path
    returncode: int
    stdout: str
    stderr: str
    text: str
    elapsed_s: float
    #: Processes carrying the case's marker that were still alive KILL_GRACE_S after the
    #: CLI exited (pid and command line); they were then killed.
    survivors: tuple[str, ...]
    #: What the grading left in its working folder (the results folder).
    left_behind: tuple[str, ...]
    #: Marker files found (see grade_case's ``markers`` and bundled_markers).
    markers: tuple[str, ...]
    #: Files of the grader's cached runtime (in TMPDIR) that hold the word TAMPERED.
    tampered: tuple[str, ...] = ()

    @property
    def results(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.text)
        return document


def copy_case(source: Path, destination: Path) -> None:
    """Copy a case folder, giving the bundled files their real names."""
    shutil.copytree(source, destination)
    for path in sorted(destination.rglob(f"*{BUNDLED_SUFFIX}")):
        path.rename(path.with_name(path.name.removesuffix(BUNDLED_SUFFIX)))


def bundled_markers(submission: Path) -> list[Path]:
    """Markers the bundled files would write in /tmp (named after their own folder)."""
    found: list[Path] = []
    for folder in [submission, *(p for p in submission.rglob("*") if p.is_dir())]:
        flat = str(folder).strip("/").replace("/", "_")
        found += Path("/tmp").glob(f"{flat}_RAN_*")
    return found


def tampered_files(folder: Path) -> list[str]:
    return [str(path) for path in folder.rglob("*")
            if path.is_file() and not path.is_symlink() and b"TAMPERED" in path.read_bytes()]


def grade_case(name: str, source: Path, base: Path, seed: Path | None = None, *,
               inside: bool = False, markers: tuple[str, ...] = (),
               tampers_cache: bool = False, options: tuple[str, ...] = ()) -> GradedCase:
    """Grade the case folder ``source`` as a user does; look for survivors and leftovers.

    ``seed`` is the TMPDIR of an earlier grading: its caches (the worker runtime and, under
    the privilege drop, an interpreter copy the sandbox user can run, ~80 MB that take
    ~2.5 s to copy) are hard-linked into this grading's TMPDIR, as a second grading on the
    same machine would reuse them. Only under root, where they are read-only to the worker.
    ``inside`` grades ``.`` from the submission folder with the console script.
    ``markers`` are globs, relative to the case's folder, of files that exist only if a
    bundled file or payload ran; ``tampers_cache`` looks for TAMPERED in the grader's
    cached runtime after grading; ``options`` are given to ``graders grade`` (a file they
    name is written in the results folder, and not counted as left behind).
    """
    home = base / name.replace(" ", "_").replace("(", "").replace(")", "")
    submission, out, tmp = home / "submission", home / "out", home / "tmp"
    home.mkdir()
    copy_case(source, submission)
    out.mkdir()
    if seed is not None and AS_ROOT:
        shutil.copytree(seed, tmp, copy_function=os.link, symlinks=True)
    else:
        tmp.mkdir()
    for folder in (home, submission, out, tmp):  # the sandbox user must reach TMPDIR
        folder.chmod(0o755)
    results = out / "results.json"
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env["TMPDIR"] = str(tmp)
    command = [sys.executable, "-m", "graders", "grade", str(submission)]
    if inside:
        command = [str(GRADERS_SCRIPT), "grade", "."]
    started = time.monotonic()
    completed = subprocess.run(
        [*command, "--results", str(results), *options], cwd=submission if inside else out,
        env=env,
        capture_output=True, text=True, timeout=Limits().worst_case_s + 120, check=False)
    elapsed = time.monotonic() - started
    survivors = kill_marked(f"{home}/")
    text = results.read_text(encoding="utf-8") if results.exists() else ""
    # .hypothesis/ is the grader's own leftover in its working folder, whatever is graded.
    left = tuple(sorted(p.name for p in out.iterdir()
                        if p.name not in ("results.json", ".hypothesis", *options)))
    found = {str(p) for pattern in markers for p in home.glob(pattern)}
    found |= {str(p) for p in bundled_markers(submission)}
    tampered = [*tampered_files(tmp), *tampered_files(cache_folder() or tmp)] \
        if tampers_cache else []
    return GradedCase(name, home, completed.returncode, completed.stdout, completed.stderr,
                      text, elapsed, tuple(survivors), left, tuple(sorted(found)),
                      tuple(tampered))


# --- what grading each single-bug submission of corpus/ must give ----------------------------


class CorpusOutcome(NamedTuple):
    """What grading one buggy submission must give."""

    score: float
    #: Contract functions whose tests the bug may reach (the buggy one, then its callers).
    reaches: frozenset[str]
    #: Node ids of exactly the tests that score below their max_score.
    loses: frozenset[str]


def _outcome(score: float, reaches: set[str], loses: set[str]) -> CorpusOutcome:
    return CorpusOutcome(score, frozenset(reaches), frozenset(loses))


#: The expected values came from one grading run and were then checked by hand, case by
#: case (see the comments below and corpus/README.md). end_to_end/test_corpus.py checks
#: them; the regrade and portability tests reuse them.
CORPUS_EXPECTED: dict[str, CorpusOutcome] = {
    # --- queueing_latency ----------------------------------------------------------------
    # v = (1 + cv) / 2: equal to (1 + cv**2) / 2 at cv = 0 and cv = 1 only. cloud_fleet runs
    # at cv = 1, so it fails just its "service cv 0.5" and "cv 2.0" cases (11/13). The
    # others (cv 0.8, 0.6, 1.2) keep only the cv 0.0 case and the two unstable loads (3/13).
    # Knock-on: batching_tax calls the student's queueing_latency with the track's cv:
    # iphone and robotaxi lose points; oura_ring's load is so light that P(wait) < 1%, so
    # its p99 is the bare service time whatever v is; cloud_fleet has cv = 1.
    # Large fleets run at cv = 1: no loss there.
    "variability_linear_cv": _outcome(88.17094, {"queueing_latency", "batching_tax"}, {
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
    # still holds (p95 == p99), so no invariant loses points. The visible and the hidden
    # points are each rounded to the grid (so a visible test writes the same score in the
    # student bundle): 85.258119, one millionth under the rounded exact total.
    "p99_at_q095": _outcome(85.258119, {"queueing_latency", "batching_tax"}, {
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
    "slo_ok_uses_mean": _outcome(96.733333, {"queueing_latency"}, {
        "graders/suite/test_cases.py::test_queueing_latency[cloud_fleet]",
        "graders/suite/test_cases.py::test_queueing_latency[iphone]",
        "graders/suite/test_cases.py::test_queueing_latency[oura_ring]",
        "graders/suite/test_cases.py::test_queueing_latency[robotaxi]",
        "graders/suite/test_hidden_cases.py::test_queueing_latency_large_fleet",
    }),
    # utilization > 1 instead of >= 1: only the "load 100% of capacity" case of each track
    # (12/13), and the invariant test_unstable_exactly_at_full_utilization, which draws a
    # load of exactly 100 % on service times that divide 1000 ms.
    "unstable_only_above_one": _outcome(98.076923, {"queueing_latency"}, {
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
    "gib_for_gb": _outcome(92.0, {"serving_track_profile"}, {
        "graders/suite/test_cases.py::test_serving_track_profile[cloud_fleet]",
        "graders/suite/test_cases.py::test_serving_track_profile[iphone]",
        "graders/suite/test_cases.py::test_serving_track_profile[oura_ring]",
        "graders/suite/test_cases.py::test_serving_track_profile[robotaxi]",
    }),
    # battery_wh 0.0 instead of None: only the two tracks without a battery.
    "battery_zero_not_none": _outcome(96.0, {"serving_track_profile"}, {
        "graders/suite/test_cases.py::test_serving_track_profile[cloud_fleet]",
        "graders/suite/test_cases.py::test_serving_track_profile[robotaxi]",
    }),
    # --- batching_tax --------------------------------------------------------------------
    # Formation delay (B - 1) / lambda: right only at B = 1. cloud_fleet and iphone default
    # to B > 1 (1/9 pass: "batch 1"); oura_ring and robotaxi default to B = 1 (2/9).
    "formation_delay_no_half": _outcome(91.666667, {"batching_tax"}, {
        "graders/suite/test_cases.py::test_batching_tax[cloud_fleet]",
        "graders/suite/test_cases.py::test_batching_tax[iphone]",
        "graders/suite/test_cases.py::test_batching_tax[oura_ring]",
        "graders/suite/test_cases.py::test_batching_tax[robotaxi]",
    }),
    # log instead of log2: ln(1) == log2(1) == 0, so the same B = 1 pattern as above.
    "batching_natural_log": _outcome(91.666667, {"batching_tax"}, {
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
    "warm_pool_ignored": _outcome(96.578947, {"cold_start_latency"}, {
        "graders/suite/test_cases.py::test_cold_start_latency[cloud_fleet]",
        "graders/suite/test_cases.py::test_cold_start_latency[iphone]",
        "graders/suite/test_cases.py::test_cold_start_latency[oura_ring]",
        "graders/suite/test_cases.py::test_cold_start_latency[robotaxi]",
        "graders/suite/test_invariants.py::test_warm_pool_never_raises_exposed_latency",
    }),
    # max(storage, link): cloud_fleet (7 vs 64 GB/s) and robotaxi (1 vs 3.75 GB/s) fail
    # every case; iphone and oura_ring have storage == link == memory bandwidth, so only
    # the 4 overrides that split them fail (15/19).
    "cold_start_max_bandwidth": _outcome(95.157895, {"cold_start_latency"}, {
        "graders/suite/test_cases.py::test_cold_start_latency[cloud_fleet]",
        "graders/suite/test_cases.py::test_cold_start_latency[iphone]",
        "graders/suite/test_cases.py::test_cold_start_latency[oura_ring]",
        "graders/suite/test_cases.py::test_cold_start_latency[robotaxi]",
    }),
    # --- cache_capacity ------------------------------------------------------------------
    # MB / 1000: every case of the three tracks whose state comes from state_mb_per_request;
    # cloud_fleet's state comes from transformer_state_gb and is not reached.
    "mb_over_1000": _outcome(94.0, {"cache_capacity"}, {
        "graders/suite/test_cases.py::test_cache_capacity[iphone]",
        "graders/suite/test_cases.py::test_cache_capacity[oura_ring]",
        "graders/suite/test_cases.py::test_cache_capacity[robotaxi]",
    }),
    # ceil instead of floor: right only when available / state is a whole number. On
    # cloud_fleet that is "0 tokens" (state 0) and "1 devices" (nothing available): 2/16.
    # oom stays consistent with max_concurrent, so the invariants pass.
    "cache_ceil": _outcome(92.25, {"cache_capacity"}, {
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
    "kv_state_no_factor_2": _outcome(94.125, {"transformer_state_gb", "cache_capacity"}, {
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
    "passes_floor": _outcome(92.888889, {"serve"}, {
        "graders/suite/test_cases.py::test_serve",
        "graders/suite/test_invariants.py::test_passes_round_up",
        "graders/suite/test_invariants.py::test_throughput_never_falls_with_batch_size",
    }),
    # --- erlang_c ------------------------------------------------------------------------
    # The textbook formula: exact on small fleets, but a**c overflows (OverflowError) from
    # c = 170 on, so every large-fleet case fails. Knock-on: queueing_latency calls the
    # student's erlang_c, so its large-fleet test fails too. The invariants use at most
    # 128 replicas, where the formula is still finite.
    "erlang_c_textbook": _outcome(95.0, {"erlang_c", "queueing_latency"}, {
        "graders/suite/test_hidden_cases.py::test_erlang_c_large_fleet",
        "graders/suite/test_hidden_cases.py::test_queueing_latency_large_fleet",
    }),
    # (inf, 0.0) for overload: "overloaded" and "exactly saturated" fail (27/29). No
    # knock-on: queueing_latency returns early when utilization >= 1, before erlang_c.
    "erlang_c_overload_zero": _outcome(99.448276, {"erlang_c"}, {
        "graders/suite/test_cases.py::test_erlang_c",
    }),
    # --- quantity_to_float ---------------------------------------------------------------
    # 0.0 instead of the default for a plain value float() rejects: "a non-numeric string"
    # and "a list" (19/21). No knock-on: serving_track_profile only passes it None (the
    # default branch) or quantities that convert.
    "quantity_zero_on_failure": _outcome(99.619048, {"quantity_to_float"}, {
        "graders/suite/test_cases.py::test_quantity_to_float",
    }),
}


# --- the HTML pages in a real browser -------------------------------------------------------

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


@dataclass
class OfflinePage:
    """A page opened by :func:`offline_page`: what it reported as errors, and the URLs it
    requested."""

    page: Any
    problems: list[str]
    requests: list[str]


@contextlib.contextmanager
def offline_page(path: Path) -> Iterator[OfflinePage]:
    """``path`` loaded in headless Chromium, offline and with scripts off (or skip, as
    :func:`chromium`); the browser closes after the block."""
    executable = chromium()
    from playwright.sync_api import sync_playwright

    opened = OfflinePage(None, [], [])
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(offline=True, java_script_enabled=False)
            page = opened.page = context.new_page()
            page.on("console", lambda m: opened.problems.append(m.text)
                    if m.type == "error" else None)
            page.on("pageerror", lambda error: opened.problems.append(str(error)))
            page.on("request", lambda request: opened.requests.append(request.url))
            page.goto(path.as_uri(), wait_until="load")
            yield opened
        finally:
            browser.close()


def chromium() -> str:
    """The Chromium binary, or skip (``.ci/run`` installs Debian's chromium).

    With ``SERVING_GRADER_REQUIRE_BROWSER=1`` (set by ``.ci/run``) a missing browser
    fails the test instead: CI must run it.
    """
    required = os.environ.get("SERVING_GRADER_REQUIRE_BROWSER") == "1"
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        path, reason = None, "the browser test needs the playwright package (dev extra)"
    else:
        reason = "no chromium binary on PATH (apt-get install chromium; .ci/run does)"
    if path is None:
        if required:
            pytest.fail(f"SERVING_GRADER_REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    return path


# --- the grader as an ordinary user runs it --------------------------------------------------

#: The ordinary account the tests make (with root) to run the grader as an instructor
#: without root does.
INSTRUCTOR = "serving-grader-test-instructor"
#: The system's interpreter, which any user can run (the grader's own lies in /root).
SYSTEM_PYTHON = Path("/usr/bin/python3")
#: The distributions a regrade imports (the grading ones and PyYAML).
REGRADE_DISTRIBUTIONS = (*GRADING_PACKAGES, "pyyaml")


def ordinary_user_unavailable() -> str | None:
    """Why the grader cannot be run here as an ordinary user at all (None when it can);
    makes the user :data:`INSTRUCTOR` when missing."""
    if not AS_ROOT:
        return "making the ordinary user needs root (CI runs as root)"
    if not SYSTEM_PYTHON.is_file():
        return f"no {SYSTEM_PYTHON} for the ordinary user to run the grader with"
    ordinary_user(INSTRUCTOR)
    return None


def ordinary_regrade_unsupported() -> str | None:
    """Why the grader cannot be run here as an ordinary user confined by bubblewrap (None
    when it can); makes the user :data:`INSTRUCTOR` when missing."""
    from graders.sandbox.confinement import bubblewrap_support

    reason = ordinary_user_unavailable()
    if reason is not None:
        return reason
    entry = ordinary_user(INSTRUCTOR)
    return bubblewrap_support(entry.pw_uid, entry.pw_gid, True)


def world_readable_install(folder: Path) -> str:
    """The grader and its regrade dependencies, copied where any user can import them;
    returns the PYTHONPATH that finds them."""
    from graders.versions import distribution_closure

    site, project = folder / "site", folder / "project"
    for dist in distribution_closure(REGRADE_DISTRIBUTIONS):
        for file in dist.files or ():
            source = Path(str(dist.locate_file(file)))
            if source.is_file() and "__pycache__" not in file.parts:
                (site / file).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, site / file)
    for name in ("graders", "reference", "tracks"):
        shutil.copytree(REPO / name, project / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(REPO / "pyproject.toml", project / "pyproject.toml")
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return f"{site}:{project}"


# --- two bugs at once (issue 31: the terminal says each thing once) ---------------------

#: The whole terminal output of a two-bug grading, feedback and score table: a screen or two.
TWO_BUG_MAX_LINES = 60
#: Each bug as the corpus plants it: (the correct line, the buggy one).
BUGS = {
    "variability_linear_cv": ("v = max(0.1, (1 + service_cv**2) / 2)",
                              "v = max(0.1, (1 + service_cv) / 2)"),
    "mb_over_1000": ("state = profile.state_mb_per_request / 1024",
                     "state = profile.state_mb_per_request / 1000"),
    "passes_floor": ("passes = math.ceil(n_requests / batch_size)",
                     "passes = n_requests // batch_size"),
    "warm_pool_ignored": (
        "protected = min(1.0, max(0, warm_pool_replicas) / max(1, scale_out_replicas))",
        "protected = 0.0"),
}


def with_bugs(folder: Path, *bugs: str) -> Path:
    """The correct submission with ``bugs`` planted, each the one bug of its corpus folder."""
    source = (CORPUS / "correct" / "serving.py").read_text(encoding="utf-8")
    for bug in bugs:
        right, wrong = BUGS[bug]
        assert source.count(right) == 1, right
        assert wrong in (CORPUS / bug / "serving.py").read_text(encoding="utf-8"), bug
        source = source.replace(right, wrong)
    folder.mkdir()
    (folder / "serving.py").write_text(source, encoding="utf-8")
    return folder
