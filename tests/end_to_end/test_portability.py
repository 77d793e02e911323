"""Students grade on Windows, macOS and Linux: the portable runner, and the bundle without
the POSIX-only modules.

Here (Linux) a system without them is played by ``tests/posix_blocked/sitecustomize.py``:
on PYTHONPATH it makes ``pwd``, ``grp``, ``fcntl`` and ``resource`` unimportable, in the
grader and in every worker, and points the code's ``/proc`` at a folder that does not
exist. In-process tests take the portable path by pointing ``/proc`` away alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    ADVERSARIAL,
    CORPUS,
    CORPUS_EXPECTED,
    REPO,
    blocked_environment,
    grade_submission,
    kill_marked,
)
from linux_modes import ShmemPeak, shmem_bytes

from graders.regrade.command import needs_linux
from graders.sandbox import landlock, syscall_filter
from graders.sandbox import platforms as platform_support
from graders.sandbox.confinement import protections_for
from graders.sandbox.runner import Limits, StudentRunner

BLOCKED = ("pwd", "grp", "fcntl", "resource")
QUICK = Limits(call_timeout_s=1.0, import_timeout_s=10.0)


def run_blocked(code: str) -> str:
    completed = subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                               env=blocked_environment(), capture_output=True, text=True,
                               timeout=300, check=False, cwd=REPO)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout


@pytest.fixture
def portable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The portable path in this process: a system without /proc."""
    monkeypatch.setattr(platform_support, "PROC", tmp_path / "no-proc")


# --- importing ---------------------------------------------------------------------------------


def test_every_module_of_the_bundle_imports_without_the_posix_only_modules() -> None:
    output = run_blocked("""
        import importlib, pkgutil, sys
        import graders
        names = [m.name for m in pkgutil.walk_packages(graders.__path__, "graders.")
                 if not m.name.endswith("__main__")]
        for name in names:
            importlib.import_module(name)
        print(len(names))
        print(sorted(set(sys.modules) & {"pwd", "grp", "fcntl", "resource"}))
    """)
    count, loaded = output.split("\n")[:2]
    assert int(count) > 30
    assert loaded == "[]"


def test_the_blocker_really_blocks_the_posix_only_modules() -> None:
    output = run_blocked("""
        import importlib
        for name in ("pwd", "grp", "fcntl", "resource"):
            try:
                importlib.import_module(name)
            except ImportError:
                print("blocked", name)
    """)
    assert output.split() == [word for name in BLOCKED for word in ("blocked", name)]


def test_the_worker_runs_without_resource_and_the_protections_say_portable(
        tmp_path: Path) -> None:
    submission = tmp_path / "serving.py"
    submission.write_text(textwrap.dedent("""
        def probe():
            try:
                import resource
            except ImportError:
                return "no resource"
            return "resource"
    """), encoding="utf-8")
    output = run_blocked(f"""
        import json
        from pathlib import Path
        from graders.sandbox.runner import StudentRunner
        with StudentRunner(Path({str(submission)!r}).read_bytes()) as runner:
            outcome = runner.call("probe")
            print(json.dumps([outcome.status, outcome.value, runner.portable,
                              runner.protections.as_dict()]))
    """)
    status, value, is_portable, protections = json.loads(output)
    assert (status, value, is_portable) == ("ok", "no resource", True)
    assert protections["runner"] == "portable"
    assert protections["rlimits"] is False
    assert protections["process_sweep"] is False
    assert protections["privilege_drop"] is False
    assert "portable runner" in protections["description"]


def test_the_hardened_path_is_chosen_on_this_linux_machine() -> None:
    assert platform_support.capabilities().hardened
    assert protections_for(None).runner == "hardened"


def test_without_proc_the_portable_path_is_chosen_and_says_why(portable: None) -> None:
    found = platform_support.capabilities()
    assert not found.hardened
    assert "no-proc" in found.why_portable()
    assert protections_for(None).runner == "portable"
    assert platform_support.running_as_root() is False


def test_regrade_says_in_one_line_that_it_needs_linux(portable: None) -> None:
    message = needs_linux("regrade")
    assert message is not None
    assert "\n" not in message
    assert message.startswith("graders regrade needs Linux")


# --- the portable runner -----------------------------------------------------------------------


def test_the_portable_runner_answers_calls_with_plain_data(portable: None) -> None:
    with StudentRunner(b"def add(a, b):\n    return a + b\n", limits=QUICK) as runner:
        assert runner.portable
        outcome = runner.call("add", (2, 3))
        assert (outcome.status, outcome.value) == ("ok", 5)
        failed = runner.call("add", (2, "x"))
        assert failed.status == "raised"
        assert "TypeError" in failed.message


@pytest.mark.parametrize("filtered", [True, False], ids=["filtered", "unfiltered"])
def test_a_hanging_call_is_killed_within_its_deadline_with_the_processes_it_started(
        portable: None, monkeypatch: pytest.MonkeyPatch, filtered: bool) -> None:
    """On Linux the portable worker's syscall filter refuses new processes (see
    tests/sandbox/test_portable_processes.py): then the call starts none, and its hang is
    still killed within its deadline; without the filter (macOS) the process it started
    is killed with it. The call prints what it started (Landlock keeps it from writing
    outside its box on Linux)."""
    if not filtered:  # as on macOS, which has no Landlock either
        monkeypatch.setattr(syscall_filter, "unavailable", lambda: "switched off by the test")
        monkeypatch.setattr(landlock, "unavailable", lambda: "switched off by the test")
    code = textwrap.dedent("""
        import subprocess, sys
        def hang():
            try:
                child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
            except BlockingIOError:
                print("started: EAGAIN", flush=True)
            else:
                print(f"started: {child.pid}", flush=True)
            while True:
                pass
        def ok():
            return 1
    """).encode()
    with StudentRunner(code, limits=QUICK) as runner:
        runner.call("ok")  # the worker is up: what follows times the call alone
        started = time.monotonic()
        outcome = runner.call("hang")
        elapsed = time.monotonic() - started
        assert outcome.status == "timeout"
        assert elapsed < QUICK.call_timeout_s + 2.0
        started_child = runner.output_summary().text.split("started: ", 1)[1].split()[0]
        if runner.protections.syscall_filter:
            assert started_child == "EAGAIN"
        else:  # as root: RLIMIT_NPROC does not bind it
            child = int(started_child)
            deadline = time.monotonic() + 5
            while _alive(child) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not _alive(child)
        assert runner.call("ok").value == 1  # a fresh worker serves the next call


def _alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):  # reap it if it is ours
        os.waitpid(pid, os.WNOHANG)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")  # the real /proc: a zombie is gone
    return not (status.exists() and ") Z " in status.read_text())


def test_the_portable_runner_bounds_output_and_never_fails_a_call_for_it(
        portable: None) -> None:
    code = b"import sys\ndef loud():\n    sys.stdout.write('x' * 3_000_000)\n    return 7\n"
    limits = Limits(call_timeout_s=5.0, output_keep_bytes=1000)
    with StudentRunner(code, limits=limits) as runner:
        assert runner.call("loud").value == 7
        deadline = time.monotonic() + 5
        while runner.output_summary().total_bytes < 3_000_000 and time.monotonic() < deadline:
            time.sleep(0.05)
        summary = runner.output_summary()
    assert summary.total_bytes == 3_000_000
    assert summary.kept_bytes == 1000
    assert summary.truncated


def test_the_portable_runner_refuses_an_oversized_reply(portable: None) -> None:
    code = b"def big():\n    return ['y' * 400] * 1000\ndef ok():\n    return 2\n"
    limits = Limits(call_timeout_s=5.0, max_reply_bytes=10_000)
    with StudentRunner(code, limits=limits) as runner:
        assert runner.call("big").status == "garbage"
        assert runner.call("ok").value == 2


def test_the_portable_runner_shares_the_total_time_budget(portable: None) -> None:
    code = b"import time\ndef slow():\n    time.sleep(0.4)\n    return 1\n"
    limits = Limits(call_timeout_s=5.0, total_budget_s=1.0)
    with StudentRunner(code, limits=limits) as runner:
        statuses = [runner.call("slow").status for _ in range(6)]
    assert statuses[0] == "ok"
    assert statuses[-1] == "abandoned"


# --- scores: the portable path against the hardened one ---------------------------------------


@pytest.mark.slow
def test_the_correct_submission_scores_exactly_100_without_the_posix_only_modules(
        tmp_path: Path) -> None:
    results = grade_submission(CORPUS / "correct" / "serving.py", tmp_path / "results.json",
                               blocked=True)
    assert results["score"] == 100
    assert results["extra_data"]["protections"]["runner"] == "portable"


@pytest.mark.slow
def test_a_single_bug_submission_scores_as_on_the_hardened_path(tmp_path: Path) -> None:
    submission = CORPUS / "p99_at_q095" / "serving.py"
    blocked = grade_submission(submission, tmp_path / "blocked.json", blocked=True)
    hardened = grade_submission(submission, tmp_path / "hardened.json", blocked=False)
    assert blocked["extra_data"]["protections"]["runner"] == "portable"
    assert hardened["extra_data"]["protections"]["runner"] == "hardened"
    assert blocked["score"] == hardened["score"] == CORPUS_EXPECTED["p99_at_q095"].score
    assert [(t["name"], t["score"]) for t in blocked["tests"]] == \
        [(t["name"], t["score"]) for t in hardened["tests"]]


class PeakResident:
    """The largest resident set (VmHWM) any worker whose environment holds ``marker`` reached,
    sampled from the real /proc by a thread while a grading runs."""

    def __init__(self, marker: str) -> None:
        self.marker = marker.encode()
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            for entry in Path("/proc").iterdir():
                with contextlib.suppress(OSError, ValueError):
                    if not entry.name.isdigit() or \
                            self.marker not in (entry / "environ").read_bytes():
                        continue
                    for line in (entry / "status").read_text().splitlines():
                        if line.startswith("VmHWM:"):
                            self.peak_bytes = max(self.peak_bytes,
                                                  int(line.split()[1]) * 1024)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak_bytes


@pytest.mark.slow
def test_a_worker_that_keeps_memory_and_escapes_its_session_is_bounded_and_leaves_nothing(
        tmp_path: Path) -> None:
    """The adversarial case portable_escape_and_grow, graded without the POSIX-only modules:
    it keeps 200 MB more at every serve call (each returns in time: no deadline stops it)
    and starts processes in sessions of their own. Once 91 of them survived the grading and
    a worker grew to 2.9 GB."""
    home = Path(tempfile.mkdtemp(prefix="portable-escape-", dir="/tmp"))
    try:
        (home / "tmp").mkdir()
        env = {**blocked_environment(), "TMPDIR": str(home / "tmp")}
        peak = PeakResident(f"{home}/")
        completed = subprocess.run(
            [sys.executable, "-m", "graders", "grade",
             str(ADVERSARIAL / "portable_escape_and_grow"), "--results",
             str(home / "results.json")],
            cwd=home, env=env, capture_output=True, text=True, timeout=600, check=False)
        peak_bytes = peak.stop()
        survivors = kill_marked(f"{home}/")
        assert completed.returncode == 0, completed.stderr[-3000:]
        results = json.loads((home / "results.json").read_text(encoding="utf-8"))
    finally:
        kill_marked(f"{home}/")
        shutil.rmtree(home, ignore_errors=True)
    assert results["extra_data"]["protections"]["runner"] == "portable"
    assert survivors == []
    limit = Limits().address_space_bytes
    assert 0 < peak_bytes < limit + 1024**3  # the watch's bound: 2 GiB and one interval
    lost = [t for t in results["tests"] if t["score"] < t["max_score"]]
    assert lost, "no call was stopped: the memory bound never acted"
    stopped = "used more than 2048 MiB of memory"
    assert any(stopped in t["output"] for t in lost)
    # serve keeps the memory, but the watch looks every half second, so its stop may land
    # in the call that runs next, of another function: every point lost outside serve is
    # a call the memory stop interrupted, and says so
    assert all(stopped in t["output"] for t in lost if t["tags"][0] != "serve"), \
        [(t["name"], t["output"][:300]) for t in lost]


SHM_CASE = "portable_shm_hoard"
#: Its files' names in /dev/shm (PREFIX in its serving.py).
SHM_PREFIX = "shm-hoard-"
GIB = 1024**3
#: Switches Landlock off in the portable runner's grader (the blocker's file runs first).
NO_LANDLOCK = textwrap.dedent(f"""
    exec(compile(open({str(REPO / "tests" / "posix_blocked" / "sitecustomize.py")!r}).read(),
                 "sitecustomize", "exec"))
    import graders.sandbox.landlock as landlock
    landlock.unavailable = lambda: "switched off by the test"
""")


def hoarded() -> list[Path]:
    return sorted(Path("/dev/shm").glob(f"{SHM_PREFIX}*"))


def grade_shm_hoard(home: Path, env: dict[str, str]) -> tuple[dict[str, Any], int, int]:
    """Grade the case with the CLI on the portable path; its results, the host's largest
    Shmem growth during the grading and its growth once the grading ended."""
    with ShmemPeak() as shmem:
        completed = subprocess.run(
            [sys.executable, "-m", "graders", "grade", str(ADVERSARIAL / SHM_CASE),
             "--results", str(home / "results.json")],
            cwd=home, env={**env, "TMPDIR": str(home / "tmp")}, capture_output=True,
            text=True, timeout=600, check=False)
    after = shmem_bytes()  # what outlived the grading
    assert kill_marked(f"{home}/") == []
    assert completed.returncode == 0, completed.stderr[-3000:]
    results = json.loads((home / "results.json").read_text(encoding="utf-8"))
    return results, shmem.growth, after - shmem.before


@pytest.fixture
def shm_home() -> Iterator[Path]:
    """A grading folder, and /dev/shm rid of the case's files afterwards."""
    assert hoarded() == [], "files of the case in /dev/shm before the test"
    home = Path(tempfile.mkdtemp(prefix="portable-shm-", dir="/tmp"))
    (home / "tmp").mkdir()
    try:
        yield home
    finally:
        for path in hoarded():
            path.unlink(missing_ok=True)
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.skipif(landlock.unavailable() is not None, reason=str(landlock.unavailable()))
def test_on_the_portable_runner_no_file_in_dev_shm_outlives_the_grading(
        shm_home: Path) -> None:
    """portable_shm_hoard writes 256 MiB files into /dev/shm (at import and at each serve
    call, up to 3 GiB): the host's memory, outside the worker's 2 GiB bound, left behind by
    a worker of the grader's own uid. On Linux the portable runner confines the worker with
    Landlock to its box: every file is refused, the host's shared memory does not grow by
    the files, and nothing is left in /dev/shm."""
    results, peak, left = grade_shm_hoard(shm_home, blocked_environment())
    protections = results["extra_data"]["protections"]
    assert protections["runner"] == "portable"
    assert protections["landlock"] == landlock.abi_version() > 0
    assert results["score"] == 100.0
    assert "shm attack: 0 MiB written; EACCES" in json.dumps(results)
    assert hoarded() == []
    assert peak < 1 * GIB
    assert left < 1 * GIB


@pytest.mark.slow
def test_without_landlock_the_portable_workers_files_outlive_it(shm_home: Path) -> None:
    """The attack's teeth: with Landlock switched off, the 3 GiB are written, past the
    worker's 2 GiB bound, and are still there once the grading has ended."""
    site = shm_home / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NO_LANDLOCK, encoding="utf-8")
    env = blocked_environment()
    env["PYTHONPATH"] = os.pathsep.join([str(site), env["PYTHONPATH"]])
    results, peak, left = grade_shm_hoard(shm_home, env)
    assert results["extra_data"]["protections"]["landlock"] == 0
    assert "shm attack: 3072 MiB written; ok" in json.dumps(results)
    assert len(hoarded()) >= 12  # a restarted worker writes its own
    assert peak >= 2.5 * GIB
    assert left >= 2.5 * GIB


# --- the student bundle's workflow -------------------------------------------------------------


def test_the_bundle_workflow_grades_on_linux_macos_and_windows_and_reports_once() -> None:
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load((REPO / "graders" / "export" / "templates" / "classroom.yml")
                              .read_text(encoding="utf-8"))
    jobs = workflow["jobs"]
    matrix = jobs["grade-on-every-system"]["strategy"]["matrix"]
    assert matrix["os"] == ["ubuntu-latest", "macos-latest", "windows-latest"]
    assert matrix["python-version"] == ["3.11"]
    reporters = [name for name, job in jobs.items()
                 if any("autograding-grading-reporter" in step.get("uses", "")
                        for step in job["steps"])]
    assert reporters == ["run-autograding-tests"]
    assert jobs["run-autograding-tests"]["runs-on"] == "ubuntu-latest"


def jobs_run_by(workflow: dict[str, Any], event: str, inputs: dict[str, bool]) -> list[str]:
    """The jobs of ``workflow`` an ``event`` runs (by a student, with these ``inputs``),
    with each ``if:`` read as the two conditions the workflow uses, joined by ``&&``."""
    known = {"github.actor != 'github-classroom[bot]'": True,
             "github.event_name == 'workflow_dispatch'": event == "workflow_dispatch",
             **{f"inputs.{name}": value for name, value in inputs.items()}}
    return [name for name, job in workflow["jobs"].items()
            if all(known[part.strip()] for part in job.get("if", "true").split("&&")
                   if part.strip() != "true")]


def test_a_push_grades_on_linux_alone_and_every_system_is_asked_for() -> None:
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load((REPO / "graders" / "export" / "templates" / "classroom.yml")
                              .read_text(encoding="utf-8"))
    assert set(workflow["on"]) == {"push", "workflow_dispatch", "repository_dispatch"}
    assert workflow["on"]["workflow_dispatch"]["inputs"]["every_system"]["default"] is False
    runners = {name: job["runs-on"] for name, job in workflow["jobs"].items()}
    assert jobs_run_by(workflow, "push", {}) == ["run-autograding-tests"]
    assert runners["run-autograding-tests"] == "ubuntu-latest"
    assert jobs_run_by(workflow, "workflow_dispatch", {"every_system": False}) == [
        "run-autograding-tests"]
    assert jobs_run_by(workflow, "workflow_dispatch", {"every_system": True}) == [
        "grade-on-every-system", "run-autograding-tests"]


def test_outputs_are_written_by_path_where_folders_have_no_posix_owners(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On Windows (no owners, modes or descriptor-relative calls) outputs are still written
    atomically, by path, and a reservation simply holds nothing."""
    from graders.results import files as output_files

    monkeypatch.setattr(output_files, "POSIX_FOLDERS", False)
    target = output_files.check_output_file(tmp_path / "new" / "results.json", "--results")
    reservation = output_files.Reservation(target, 1024)
    output_files.write_text_atomically(target, "{}\n", reservation=reservation)
    reservation.release()
    assert target.read_text(encoding="utf-8") == "{}\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["results.json"]
