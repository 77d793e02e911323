"""Whatever fails inside the grader, ``graders grade`` writes its grader-failure record (no
score, the reason) at --results and leaves nothing behind; whatever interrupts it (SIGTERM,
SIGINT), it stops its workers, removes its folders and says so in that record, with no score.

Failures are planted in a real ``graders grade`` run by a ``sitecustomize.py`` put first on
its PYTHONPATH (the worker runs with ``-S``: nothing is planted in the submission's code);
signals are sent to a real grading while its worker runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import ADVERSARIAL, CORPUS, GRADERS_SCRIPT, REPO, kill_marked, reject_constant
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graders.cli.grade import GRADER_FAILED, INTERRUPTED_SIGINT, INTERRUPTED_SIGTERM
from graders.plugin.session import CLOSED_LINE
from graders.results.reports import grader_failure, interrupted_by_signal

#: A grading that hangs in every serve call: long enough to be interrupted mid-way.
HANGING = ADVERSARIAL / "hang_in_serve"
#: Seconds to wait for a grading's worker to start before the signal is sent.
START_WAIT_S = 60.0


@pytest.fixture
def home() -> Iterator[Path]:
    """A folder with ``out/`` (the results, private) and ``tmp/`` (the grading's TMPDIR, which
    the sandbox user must be able to traverse under root)."""
    base = Path(tempfile.mkdtemp(prefix="grade-guard-", dir="/tmp"))
    base.chmod(0o755)
    (base / "out").mkdir(mode=0o700)
    (base / "tmp").mkdir()
    (base / "tmp").chmod(0o755)
    try:
        yield base
    finally:
        kill_marked(f"{base}/")
        shutil.rmtree(base, ignore_errors=True)


def environment(home: Path, planted: str | None = None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PYTEST_", "COV_"))}
    env["TMPDIR"] = str(home / "tmp")
    if planted is not None:
        plants = home / "plants"
        plants.mkdir()
        (plants / "sitecustomize.py").write_text(textwrap.dedent(planted), encoding="utf-8")
        env["PYTHONPATH"] = os.pathsep.join([str(plants), str(REPO)])
    return env


def grade(home: Path, submission: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "graders", "grade", str(submission), "--results",
         str(home / "out" / "results.json")],
        cwd=home / "out", env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def left_behind(home: Path) -> list[str]:
    """What a grading left: anything in its TMPDIR, anything but results.json in out/."""
    return sorted([*(f"tmp/{p.name}" for p in (home / "tmp").iterdir()),
                   *(f"out/{p.name}" for p in (home / "out").iterdir()
                     if p.name not in ("results.json", ".hypothesis"))])


def no_score(home: Path) -> dict[str, Any]:
    """The grader-failure record at out/results.json: no score, no tests, a reason."""
    path = home / "out" / "results.json"
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"),
                                          parse_constant=reject_constant)
    assert grader_failure(document), document
    assert "score" not in document
    assert "tests" not in document
    return document


# --- the grader fails --------------------------------------------------------------------------

PLANTS = {
    # the crash: a RecursionError in the last visible calls, at the session's end
    "recursion_error_at_finish": """
        import graders.plugin.session as session
        def finish_visible(self):
            raise RecursionError("maximum recursion depth exceeded")
        session.GradingSession.finish_visible = finish_visible
    """,
    "memory_error_in_collection": """
        import graders.plugin.hooks as hooks
        def add_suite(*args, **kwargs):
            raise MemoryError
        hooks._add_suite = add_suite
    """,
    "worker_cannot_start": """
        import graders.sandbox.runner as runner
        def start(self):
            raise OSError(24, "Too many open files")
        runner.StudentRunner.start = start
    """,
    "failure_after_pytest": """
        import graders.cli.grade as grade
        def install(*args, **kwargs):
            raise RuntimeError("installing the outputs failed")
        grade._install_outputs = install
    """,
}


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_grader_failure_anywhere_still_writes_valid_results_and_leaves_nothing(
        home: Path, plant: str) -> None:
    process = grade(home, CORPUS / "correct", environment(home, PLANTS[plant]))
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == GRADER_FAILED, stdout[-2000:] + stderr[-2000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    document = no_score(home)
    assert interrupted_by_signal(document) is None
    assert "the grader failed" in stderr
    assert left_behind(home) == []
    assert kill_marked(f"{home}/") == []


# --- the disk is full ---------------------------------------------------------------------------

#: Where a full disk is met: the worker's box (pytest's configuration, the issue's case) and
#: the scratch folder of graders grade (before pytest starts), each raising ENOSPC as the
#: kernel does.
DISK_FULL_PLANTS = {
    "in_the_workers_box": """
        import errno, os, tempfile
        import graders.sandbox.runner as runner
        def set_up(self, *args, **kwargs):
            name = os.path.join(tempfile.gettempdir(), "serving-grader-x", "box", "serving.py")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), name)
        runner.StudentRunner._set_up = set_up
    """,
    "in_the_scratch_folder": """
        import errno, os, tempfile
        import graders.cli.grade as grade
        def arguments(args, workdir, submission):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(workdir / "pytest.ini"))
        grade.pytest_arguments = arguments
    """,
}


def assert_full_disk_said_once(home: Path, process: subprocess.Popen[str]) -> None:
    """A grader failure (exit 70) said in one line that names the full folder, as the
    results' reason does; no INTERNALERROR, no traceback."""
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == GRADER_FAILED, stdout[-2000:] + stderr[-2000:]
    assert "INTERNALERROR" not in stdout + stderr
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    folder = str(home / "tmp")
    assert lines[0].startswith("graders: error: the grader failed: the disk is full: no space "
                               f"left in {folder} (the temp folder, TMPDIR)"), lines[0]
    assert "pytest exit code" not in lines[0]
    reason = grader_failure(no_score(home))
    assert reason is not None
    assert reason.startswith(f"the disk is full: no space left in {folder}")
    assert "set TMPDIR to a folder with room" in reason
    assert reason in lines[0]


@pytest.mark.parametrize("plant", sorted(DISK_FULL_PLANTS))
def test_a_full_disk_is_a_grader_failure_said_in_one_line_that_names_the_folder(
        home: Path, plant: str) -> None:
    process = grade(home, CORPUS / "correct", environment(home, DISK_FULL_PLANTS[plant]))
    assert_full_disk_said_once(home, process)


@contextlib.contextmanager
def full_tmpfs(folder: Path, free_kib: int) -> Iterator[None]:
    """A 64 KiB tmpfs mounted on ``folder`` with ``free_kib`` left (root only); skips the
    test where it cannot be mounted."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a small tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=755", "tmpfs",
                              str(folder)], capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        with (folder / "filler").open("wb") as filler:
            filler.write(b"\0" * ((64 - free_kib) * 1024))
        yield
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.mark.parametrize("free_kib", [8, 12])
def test_a_real_full_temp_folder_is_said_in_one_line(home: Path, free_kib: int) -> None:
    with full_tmpfs(home / "tmp", free_kib):
        process = grade(home, CORPUS / "correct", environment(home))
        assert_full_disk_said_once(home, process)


# --- a root grading closes the grader's folders ---------------------------------------------

#: The grader's folders, as stand-ins open to everyone (the real checkout stays as it is).
STAND_IN_FOLDERS = """
    import os
    from pathlib import Path
    import graders.plugin.session as session
    base = Path(os.environ["TMPDIR"]).parent / "checkout"
    folders = [base / "reference", base / "graders", base]
    for folder in folders:
        if not folder.exists():  # made open to everyone, once
            folder.mkdir(parents=True)
            folder.chmod(0o755)
    session.protected_folders = lambda: folders
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root grading closes folders")
def test_a_root_grading_says_in_one_line_a_student_can_ignore_that_it_closed_folders(
        home: Path) -> None:
    process = grade(home, CORPUS / "correct", environment(home, STAND_IN_FOLDERS))
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stdout[-2000:] + stderr[-2000:]
    notes = [line for line in stderr.splitlines() if line.startswith("graders: note: closed")]
    assert len(notes) == 1, stderr
    # one line a student can ignore: no folder list, no staff command (pytest -v has those)
    assert notes[0] == f"graders: note: {CLOSED_LINE}"
    assert "chgrp" not in stdout + stderr
    checkout = home / "checkout"
    for folder in (checkout / "reference", checkout / "graders", checkout):
        assert str(folder) not in stderr
        assert stat.S_IMODE(folder.stat().st_mode) == 0o750
    planted = environment(home)
    planted["PYTHONPATH"] = os.pathsep.join([str(home / "plants"), str(REPO)])
    again = grade(home, CORPUS / "correct", planted)
    _, stderr = again.communicate(timeout=300)
    assert "graders: note: closed" not in stderr  # said when it closes them, not every time


# --- the grading is interrupted ----------------------------------------------------------------


def wait_for_worker(home: Path, process: subprocess.Popen[str]) -> None:
    """Wait until the grading's worker folder exists (its worker then starts), and a moment."""
    deadline = time.monotonic() + START_WAIT_S
    while not any((home / "tmp").glob("serving-grader-*")):
        assert process.poll() is None, "the grading ended before its worker started"
        assert time.monotonic() < deadline, "no worker started"
        time.sleep(0.05)
    time.sleep(1.0)


@pytest.mark.parametrize(("number", "code"), [(signal.SIGTERM, INTERRUPTED_SIGTERM),
                                               (signal.SIGINT, INTERRUPTED_SIGINT)],
                         ids=["SIGTERM", "SIGINT"])
def test_an_interrupted_grading_stops_its_workers_removes_its_folders_and_says_so(
        home: Path, number: int, code: int) -> None:
    process = grade(home, HANGING, environment(home))
    wait_for_worker(home, process)
    process.send_signal(number)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == code, stdout[-2000:] + stderr[-2000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    name = signal.Signals(number).name
    assert f"interrupted by {name}" in stderr
    document = no_score(home)
    assert interrupted_by_signal(document) == name
    assert f"interrupted by {name}" in document["output"]
    assert left_behind(home) == []
    assert kill_marked(f"{home}/") == []


#: pytest's terminal report of the interrupt fails, as it does when the signal lands in code
#: whose traceback has no line number (a dataclass's generated ``__init__``, on Python 3.11).
BROKEN_INTERRUPT_REPORT = """
    import _pytest.terminal as terminal
    def report(self, excinfo):
        raise TypeError("unsupported operand type(s) for -: 'NoneType' and 'int'")
    terminal.TerminalReporter.pytest_keyboard_interrupt = report
"""


@pytest.mark.parametrize(("number", "code"), [(signal.SIGTERM, INTERRUPTED_SIGTERM),
                                               (signal.SIGINT, INTERRUPTED_SIGINT)],
                         ids=["SIGTERM", "SIGINT"])
def test_a_signal_whose_report_in_pytest_fails_is_still_an_interruption(
        home: Path, number: int, code: int) -> None:
    process = grade(home, HANGING, environment(home, BROKEN_INTERRUPT_REPORT))
    wait_for_worker(home, process)
    process.send_signal(number)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == code, stdout[-2000:] + stderr[-2000:]
    name = signal.Signals(number).name
    assert stderr.splitlines()[-1:] == [f"graders: the grading was interrupted by {name}: "
                                        "no score"], stderr
    assert "the grader failed" not in stderr
    assert interrupted_by_signal(no_score(home)) == name
    assert left_behind(home) == []
    assert kill_marked(f"{home}/") == []


#: The results an earlier grading left: never what an interrupted one leaves.
EARLIER_RESULTS = {"score": 42.0, "execution_time": 1.0, "output": "an earlier grading",
                   "tests": []}


def catches_sigterm(pid: int) -> bool:
    """Whether the process has a handler for SIGTERM (its /proc status's SigCgt mask):
    the grader's own code has started."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    return False


#: A plant that signals the grading process itself when it first imports a module: the
#: moments before the grading's own clean-up exists (its imports, pytest's, the checks).
SIGNAL_ON_IMPORT = """
    import os, signal, sys
    class SignalOnImport:
        def find_spec(self, name, path=None, target=None):
            if name == {module!r}:
                sys.meta_path.remove(self)
                os.kill(os.getpid(), {number})
            return None
    sys.meta_path.insert(0, SignalOnImport())
"""


@pytest.mark.parametrize("module", ["graders.cli", "pytest", "graders.plugin.settings",
                                    "graders.cli.grade", "graders.sandbox.submission",
                                    "graders.trackfiles.tracks"])
@pytest.mark.parametrize(("number", "code"), [(signal.SIGTERM, INTERRUPTED_SIGTERM),
                                               (signal.SIGINT, INTERRUPTED_SIGINT)],
                         ids=["SIGTERM", "SIGINT"])
def test_a_signal_before_grading_starts_interrupts_it_in_one_line(
        home: Path, module: str, number: int, code: int) -> None:
    results = home / "out" / "results.json"
    results.write_text(json.dumps(EARLIER_RESULTS), encoding="utf-8")
    env = environment(home, SIGNAL_ON_IMPORT.format(module=module, number=int(number)))
    process = subprocess.Popen(
        [str(GRADERS_SCRIPT), "grade", str(CORPUS / "correct"), "--results", str(results)],
        cwd=home / "out", env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = process.communicate(timeout=120)
    name = signal.Signals(number).name
    assert process.returncode == code, stdout[-2000:] + stderr[-2000:]
    assert stderr.splitlines() == [f"graders: the grading was interrupted by {name}: no score"]
    assert interrupted_by_signal(no_score(home)) == name  # never the earlier results
    assert left_behind(home) == []


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="needs /proc")
@pytest.mark.parametrize("launcher", ["script", "module"])
@settings(max_examples=12, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(delay=st.floats(0.0, 0.4), number=st.sampled_from([signal.SIGTERM, signal.SIGINT]))
def test_a_signal_in_the_first_moments_interrupts_and_never_leaves_earlier_results(
        launcher: str, delay: float, number: int) -> None:
    # from the moment the grader's first module runs (its handler is installed then),
    # through imports, checks and the start of pytest
    base = Path(tempfile.mkdtemp(prefix="grade-early-", dir="/tmp"))
    try:
        base.chmod(0o755)
        (base / "out").mkdir(mode=0o700)
        results = base / "out" / "results.json"
        results.write_text(json.dumps(EARLIER_RESULTS), encoding="utf-8")
        env = {key: value for key, value in os.environ.items()
               if not key.startswith(("PYTEST_", "COV_"))}
        command = [str(GRADERS_SCRIPT)] if launcher == "script" else \
            [sys.executable, "-m", "graders"]
        process = subprocess.Popen(
            [*command, "grade", str(CORPUS / "correct"), "--results", str(results)],
            cwd=base / "out", env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        deadline = time.monotonic() + START_WAIT_S
        while not catches_sigterm(process.pid):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.001)
        time.sleep(delay)
        process.send_signal(number)
        stdout, stderr = process.communicate(timeout=120)
        name = signal.Signals(number).name
        assert process.returncode == 128 + number, stdout[-2000:] + stderr[-2000:]
        assert "Traceback" not in stderr
        assert stderr.splitlines()[-1:] == [f"graders: the grading was interrupted by {name}: "
                                            "no score"], stderr
        if results.exists():  # absent, or the interrupted record: never the earlier one
            document = json.loads(results.read_text(encoding="utf-8"))
            assert interrupted_by_signal(document) == name, document
    finally:
        kill_marked(f"{base}/")
        shutil.rmtree(base, ignore_errors=True)


def test_a_slots_grading_process_interrupted_cleans_up_and_exits(home: Path) -> None:
    server = subprocess.Popen(
        [sys.executable, "-P", "-m", "graders.cli.grade_server"], cwd=home / "out",
        env=environment(home), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True)
    assert server.stdin is not None
    assert server.stdout is not None
    request = {"argv": [str(HANGING), "--results", str(home / "out" / "results.json")],
               "log": str(home / "grading.log")}
    server.stdin.write(json.dumps(request) + "\n")
    server.stdin.flush()
    try:
        wait_for_worker(home, server)  # type: ignore[arg-type]
        server.send_signal(signal.SIGTERM)
        reply = json.loads(server.stdout.readline())
        assert server.wait(timeout=60) == 0  # it stops after the interrupted grading
    finally:
        server.kill()
    assert reply == {"code": INTERRUPTED_SIGTERM}
    assert interrupted_by_signal(no_score(home)) == "SIGTERM"
    assert left_behind(home) == []
    assert kill_marked(f"{home}/") == []
