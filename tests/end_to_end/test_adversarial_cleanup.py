"""Clean-up and sandbox users, through the CLI: hostile submissions that dig folders deeper
than any recursion or path limit, look for other gradings' files and kill their workers, or
leave files and SysV IPC objects in the shared folders.

Each case is graded with ``python -m graders grade FOLDER --results FILE`` from a neutral
working folder, with a TMPDIR of its own, in two modes: as the grader runs here (in
namespaces of its own where the kernel allows them), and with the namespaces switched off
(a ``sitecustomize`` on PYTHONPATH makes ``bubblewrap_support`` and Landlock's
``unavailable`` say no, as a kernel without them would): then only the grader's own
clean-up stands between the submission and the machine; a regrade is then told to take
that risk (``--allow-unconfined``). In both, every case must score exactly 100.0 with
valid results, and leave nothing: no file, folder, process or IPC object of its sandbox
user, nothing in its TMPDIR.

A class regrade of the deep folders with two correct classmates, and two concurrent
gradings of the reader/killer and a correct submission, check that one grading's leftovers
or attacks never cost another anything.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from helpers import ADVERSARIAL, CORPUS, REPO, processes_marked

import graders.sandbox.confinement
import graders.sandbox.landlock
from graders.results.reports import read_valid_results
from graders.sandbox.cleanup import SHARED_WRITABLE, sweep_user
from graders.sandbox.privileges import SandboxUser, claim_sandbox_user
from graders.sandbox.runner import Limits, StudentRunner

pytestmark = pytest.mark.slow

CORRECT = CORPUS / "correct"
AS_ROOT = os.geteuid() == 0
CASES = ("deep_directory_tree", "read_other_grading", "leave_shared_files")
MODES = ("as-is", "without-namespaces")
LIMITS = Limits()
#: A grading that takes longer than this is stuck (a generous bound, not a measurement).
GRADING_TIMEOUT_S = LIMITS.worst_case_s + 600
NO_NAMESPACES = """\
import graders.sandbox.confinement as confinement
import graders.sandbox.landlock as landlock

confinement.bubblewrap_support = lambda uid, gid, drop: "bubblewrap switched off by the test"
landlock.unavailable = lambda: "Landlock switched off by the test"
"""
needs_root = pytest.mark.skipif(not AS_ROOT, reason="sandbox users exist only under root")


@dataclass(frozen=True)
class Graded:
    """One CLI grading and what it left."""

    returncode: int
    stderr: str
    results: dict[str, Any] | None
    #: Entries and processes named after this grading, and IPC objects of its submission
    #: (see :func:`leftovers`).
    leftovers: tuple[str, ...]
    #: What is left in the grading's TMPDIR.
    temp_left: tuple[str, ...]


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    """A folder the sandbox users can traverse (pytest's tmp_path is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="adversarial-cleanup-", dir="/tmp"))
    folder.chmod(0o755)
    site = folder / "site-without-namespaces"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NO_NAMESPACES, encoding="utf-8")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def environment(base: Path, temp: Path, mode: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env["TMPDIR"] = str(temp)
    if mode == "without-namespaces":
        env["PYTHONPATH"] = os.pathsep.join(
            [str(base / "site-without-namespaces"), str(REPO),
             *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))])
    return env


def home_for(base: Path, label: str) -> tuple[Path, Path, Path, Path]:
    """The case's folder with its submission (root's alone), results and TMPDIR folders."""
    home = base / label
    submission, out, temp = home / "submission", home / "out", home / "tmp"
    for folder in (home, out, temp):
        folder.mkdir(mode=0o755)
        folder.chmod(0o755)
    return home, submission, out, temp


def grade(base: Path, source: Path, label: str, mode: str) -> Graded:
    home, submission, out, temp = home_for(base, label)
    submission.mkdir(mode=0o700)
    shutil.copy(source / "serving.py", submission / "serving.py")
    results = out / "results.json"
    completed = subprocess.run(
        [sys.executable, "-m", "graders", "grade", str(submission), "--results", str(results),
         "-q"], cwd=out, env=environment(base, temp, mode), capture_output=True, text=True,
        timeout=GRADING_TIMEOUT_S, check=False)
    return Graded(completed.returncode, completed.stderr, read_valid_results(results),
                  tuple(leftovers(home.name)), tuple(os.listdir(temp)))


#: The SysV IPC objects leave_shared_files makes, by their unusual sizes: (file under
#: /proc/sysvipc, column, value).
IPC_MARKS = (("shm", "size", 28_795), ("sem", "nsems", 7), ("msg", "cbytes", 1_237))


def leftovers(marker: str) -> list[str]:
    """What a grading left: entries named after it (``marker``, the name of its folder, is
    in every name its submission gives) in the shared folders, and processes that carry it
    in their working folder or environment.

    (Not by uid: once the grading has given its sandbox user back, another grading on this
    machine may be using it.)"""
    found = []
    for folder in SHARED_WRITABLE:
        with contextlib.suppress(OSError):
            found += [str(entry) for entry in folder.iterdir() if marker in entry.name]
    found += [f"process {process}" for process in processes_marked(marker, command_line=False)]
    return found


def ipc_leftovers() -> list[str]:
    """SysV IPC objects like leave_shared_files's, known by their unusual sizes. They carry
    no name, so they are looked for once no grading runs any more: while one runs, the
    objects its submission holds are alive (and are removed when it ends)."""
    found = []
    for kind, column, size in IPC_MARKS:
        lines = Path(f"/proc/sysvipc/{kind}").read_text(encoding="ascii").splitlines()
        index = lines[0].split().index(column)
        found += [f"SysV {kind}: {line}" for line in lines[1:]
                  if int(line.split()[index]) == size]
    return found


def assert_clean_hundred(run: Graded) -> None:
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    assert run.results is not None, f"no valid results.json:\n{run.stderr[-3000:]}"
    assert run.results["score"] == 100.0, run.results["output"]
    assert run.leftovers == ()
    assert run.temp_left == ()


@pytest.fixture(scope="module")
def graded(base: Path) -> dict[tuple[str, str], Graded]:
    """Every case graded once in each mode, two at a time."""
    jobs = [(name, mode) for mode in MODES for name in CASES]
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(lambda job: grade(base, ADVERSARIAL / job[0],
                                               f"{job[0]}-{job[1]}", job[1]), jobs))
    left_in_ipc = tuple(ipc_leftovers())  # every grading has ended: what is left stays
    return {job: replace(run, leftovers=run.leftovers + left_in_ipc)
            if job[0] == "leave_shared_files" else run
            for job, run in zip(jobs, runs, strict=True)}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", CASES)
def test_a_hostile_grading_scores_full_marks_and_leaves_nothing_behind(
        graded: dict[tuple[str, str], Graded], name: str, mode: str) -> None:
    run = graded[name, mode]
    assert_clean_hundred(run)
    protections = (run.results or {}).get("extra_data", {}).get("protections")
    if mode == "without-namespaces" and isinstance(protections, dict):
        assert protections.get("ipc_isolation") is False  # the mode did switch them off


def test_the_new_cases_state_their_attack_in_their_first_line() -> None:
    for name in CASES:
        first = (ADVERSARIAL / name / "serving.py").read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith('"""Attack: ')
        assert first.endswith('."""')


# --- a class regrade: the deep folders cost the classmates nothing -----------------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_regrade_with_deep_folders_in_its_slots_grades_every_classmate(
        base: Path, mode: str) -> None:
    home, _, out, temp = home_for(base, f"regrade-{mode}")
    klass = home / "class"
    klass.mkdir(mode=0o700)
    for ident, source in (("deep", ADVERSARIAL / "deep_directory_tree"),
                          ("ada", CORRECT), ("grace", CORRECT)):
        (klass / ident).mkdir()
        shutil.copy(source / "serving.py", klass / ident / "serving.py")
    # without namespaces a regrade grades a class only when told to take that risk
    consent = ["--allow-unconfined"] if mode == "without-namespaces" else []
    completed = subprocess.run(
        [sys.executable, "-m", "graders", "regrade", str(klass), "--out", str(out),
         "--jobs", "2", "--no-histogram", *consent], cwd=home,
        env=environment(base, temp, mode),
        capture_output=True, text=True, timeout=3 * GRADING_TIMEOUT_S, check=False)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "Traceback" not in completed.stderr, completed.stderr[-3000:]
    rows = {row["submission"]: row for row in csv.DictReader(io.StringIO(
        (out / "grades.csv").read_text(encoding="utf-8")))}
    assert {ident: (row["status"], float(row["score"])) for ident, row in rows.items()} == {
        "ada": ("graded", 100.0), "grace": ("graded", 100.0), "deep": ("graded", 100.0)}
    for ident in rows:
        assert read_valid_results(out / "submissions" / ident / "results.json") is not None
    assert os.listdir(temp) == []  # the slots' folders are gone
    assert not [p for p in out.iterdir() if p.name.startswith(".regrade-jobs-")]
    assert leftovers(home.name) == []
    assert ipc_leftovers() == []  # the regrade has ended: nothing of any grading is left


# --- two gradings at the same time: the attacker gains nothing -------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_concurrent_attacker_neither_reads_nor_kills_another_grading(
        base: Path, mode: str) -> None:
    with ThreadPoolExecutor(max_workers=2) as pool:
        attacker, honest = pool.map(
            lambda job: grade(base, job[0], f"{job[1]}-{mode}", mode),
            [(ADVERSARIAL / "read_other_grading", "concurrent-attacker"),
             (CORRECT, "concurrent-correct")])
    assert_clean_hundred(honest)  # its worker was never killed
    assert_clean_hundred(attacker)  # it read nothing of the other (it fails serve if it does)


ATTACKER = (ADVERSARIAL / "read_other_grading" / "serving.py").read_bytes()
HONEST = (CORRECT / "serving.py").read_bytes()
SERVE_ARGS = (10, 4)


@needs_root
@pytest.mark.parametrize("shared", [True, False], ids=["one-user", "a-user-each"])
def test_the_attack_has_teeth_only_when_two_gradings_share_a_user(
        shared: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runners at once, without namespaces: sharing a uid, the attacker reads the other
    grading's staged serving.py and kills its worker; with a user each, it can do neither."""
    monkeypatch.setattr(graders.sandbox.confinement, "bubblewrap_support",
                        lambda uid, gid, drop: "bubblewrap switched off by the test")
    monkeypatch.setattr(graders.sandbox.landlock, "unavailable",
                        lambda: "Landlock switched off by the test")
    claims = [claim_sandbox_user(), claim_sandbox_user()]
    # "one user": both run as the first claimed user (held by this test, so no one else's
    # worker is in reach), as two gradings did before each got a user of its own
    one = SandboxUser(claims[0].name, claims[0].uid, claims[0].gid)
    users = [one, one] if shared else claims
    limits = Limits(import_timeout_s=30.0)
    try:
        with StudentRunner(HONEST, limits=limits, sandbox=users[0]) as honest, \
                StudentRunner(ATTACKER, limits=limits, sandbox=users[1]) as attacker:
            assert honest.call("serve", SERVE_ARGS).ok  # the honest worker is running
            attacked = attacker.call("serve", SERVE_ARGS)  # imports: searches, then kills
            after = honest.call("serve", SERVE_ARGS)
    finally:
        for user in claims:
            sweep_user(user.uid)
            user.release()
    if shared:
        assert attacked.status == "raised"
        assert "read another grading's files" in attacked.message
        assert after.status == "crashed", after
    else:
        assert attacked.ok, attacked
        assert after.ok, after


def test_results_are_strict_json(graded: dict[tuple[str, str], Graded]) -> None:
    for run in graded.values():
        assert run.results is not None
        json.dumps(run.results, allow_nan=False)
