"""The portable runner bounds a worker's memory and leaves no process behind.

On a system without the POSIX-only modules and /proc (played here by
``tests/posix_blocked``: no rlimits in the worker, no /proc sweep), a worker once grew to
2.9 GB and 91 processes it started in sessions of their own outlived the grading. The tree
watch (POSIX) and the Job Object (Windows) bound both. The watch runs here for real; the Job
Object only against a recording stand-in for the Windows API: what it does on Windows is
proven only by a run there.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, blocked_environment

from graders.sandbox import portable as containment
from graders.sandbox.cleanup import kill_marked
from graders.sandbox.portable import (
    JOB_OBJECT_LIMIT_ACTIVE_PROCESS,
    JOB_OBJECT_LIMIT_JOB_MEMORY,
    JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    JOB_PROCESSES,
    ExtendedLimits,
    JobObject,
    ProcessRow,
    TreeWatch,
    contain,
    process_table,
    tree,
)

#: Grows by 50 MB every 20 ms, or starts processes that move to sessions of their own.
GREEDY = textwrap.dedent("""
    import os, time

    def grow(mb):
        chunks = []
        for _ in range(mb // 50):
            chunks.append(bytearray(50 * 1024 * 1024))
            time.sleep(0.02)
        return len(chunks)

    def escape(n, pidfile):
        pids = []
        for _ in range(n):
            pid = os.fork()
            if pid == 0:
                os.setsid()
                time.sleep(120)
                os._exit(0)
            pids.append(pid)
        with open(pidfile, "w") as stream:
            stream.write(" ".join(map(str, pids)))
        return len(pids)

    def ok():
        return 1
""")


def alive(pid: int) -> bool:
    status = Path(f"/proc/{pid}/stat")
    try:
        return ") Z " not in status.read_text()
    except OSError:
        return False


# --- the process table and the tree ------------------------------------------------------------


def row(pid: int, ppid: int, pgid: int, rss: int = 0) -> ProcessRow:
    return ProcessRow(pid, ppid, pgid, rss, f"start-{pid}")


def test_a_tree_is_the_worker_its_descendants_and_its_process_group() -> None:
    rows = [row(1, 0, 1), row(10, 1, 10),  # the worker, head of its group
            row(11, 10, 11), row(12, 11, 12),  # a child in a session of its own, its child
            row(13, 1, 10),  # orphaned, still in the worker's group
            row(20, 1, 20), row(21, 20, 20)]  # someone else
    table = {r.pid: r for r in rows}
    assert tree(10, table) == {10, 11, 12, 13}
    assert tree(99, table) == set()


def test_the_process_table_is_read_from_ps_with_this_process_in_it() -> None:
    table = process_table()
    assert table is not None
    me = table[os.getpid()]
    assert (me.ppid, me.pgid) == (os.getppid(), os.getpgid(0))
    assert me.rss_bytes > 10 * 1024**2
    assert me.started


def test_a_watch_kills_a_tree_past_its_memory_bound_and_says_why() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             start_new_session=True)
    try:
        watch = TreeWatch(child.pid, memory_bytes=1024, interval_s=60)  # looks only when told
        watch.look()
        assert child.wait(timeout=10) < 0
        assert "more than 0 MiB of memory" in watch.reason
        watch.close()
    finally:
        child.kill()


def test_a_watch_looks_ten_times_as_often_once_the_tree_holds_half_its_bound() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             start_new_session=True)
    try:
        rows: dict[int, int] = {}

        def table() -> dict[int, ProcessRow]:
            return {child.pid: ProcessRow(pid=child.pid, ppid=os.getpid(), pgid=child.pid,
                                          rss_bytes=rows[child.pid], started="t0")}

        watch = TreeWatch(child.pid, memory_bytes=1000, table=table, interval_s=60)
        assert watch.next_interval_s() == 60
        for resident, interval in [(499, 60), (500, 6), (999, 6), (10, 60)]:
            rows[child.pid] = resident
            watch.look()
            assert watch.next_interval_s() == interval, resident
        assert child.poll() is None
        assert watch.reason == ""
        watch.close()
    finally:
        child.kill()
        child.wait()


def test_a_watch_kills_at_close_a_process_that_left_the_tree(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    script = ("import os, subprocess, sys, time\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import os, time; os.setsid(); "
              "time.sleep(60)'])\n"
              f"open({str(pidfile)!r}, 'w').write(str(child.pid))\n"
              "time.sleep(60)\n")
    worker = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    watch = TreeWatch(worker.pid, memory_bytes=2**40, interval_s=0.1)
    try:
        deadline = time.monotonic() + 20
        while not pidfile.exists() or not pidfile.read_text():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        escaped = int(pidfile.read_text())
        time.sleep(0.5)  # seen by the watch
        worker.kill()  # its child, in a session of its own, is now an orphan
        worker.wait()
        watch.close()
        deadline = time.monotonic() + 5
        while alive(escaped) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(escaped)
    finally:
        worker.kill()


# --- the portable runner, on a system without the POSIX-only modules ---------------------------


def run_blocked(code: str) -> Any:
    completed = subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                               env=blocked_environment(), capture_output=True, text=True,
                               timeout=300, check=False, cwd=REPO)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.splitlines()[-1])


def test_the_portable_runner_bounds_a_workers_memory(tmp_path: Path) -> None:
    (tmp_path / "serving.py").write_text(GREEDY, encoding="utf-8")
    status, message, elapsed, after, portable, rlimits = run_blocked(f"""
        import json, time
        from pathlib import Path
        from graders.sandbox.runner import Limits, StudentRunner
        limits = Limits(call_timeout_s=60.0, address_space_bytes=600 * 1024**2)
        with StudentRunner(Path({str(tmp_path / "serving.py")!r}).read_bytes(),
                           limits=limits) as runner:
            started = time.monotonic()
            outcome = runner.call("grow", (4000,))
            elapsed = time.monotonic() - started
            after = runner.call("ok").value
            print(json.dumps([outcome.status, outcome.message, elapsed, after,
                              runner.portable, runner.protections.rlimits]))
    """)
    assert (portable, rlimits) == (True, False)  # no rlimit bounds it: the watch does
    assert status == "crashed"
    assert message == "the worker was stopped: its processes used more than 600 MiB of memory"
    assert elapsed < 30  # 4 GB would take 1.6 s more than 600 MB, and never 60 s
    assert after == 1  # a fresh worker serves the next call


def test_no_process_of_the_portable_runners_worker_survives_it(tmp_path: Path) -> None:
    """The tree watch alone, as on macOS: on Linux the portable worker's syscall filter
    refuses new processes (tests/sandbox/test_portable_processes.py) and Landlock keeps it
    in its box, so both are switched off here (macOS has neither), and the processes start
    (the grader is root: RLIMIT_NPROC does not bind)."""
    (tmp_path / "serving.py").write_text(GREEDY, encoding="utf-8")
    pidfile = tmp_path / "pids"
    started = run_blocked(f"""
        import json
        from pathlib import Path
        from graders.sandbox import landlock, syscall_filter
        from graders.sandbox.runner import Limits, StudentRunner
        syscall_filter.unavailable = lambda: "switched off: the tree watch alone"
        landlock.unavailable = lambda: "switched off: the tree watch alone"
        with StudentRunner(Path({str(tmp_path / "serving.py")!r}).read_bytes(),
                           limits=Limits(call_timeout_s=30.0)) as runner:
            print(json.dumps(runner.call("escape", (20, {str(pidfile)!r})).value))
    """)
    assert started == 20
    pids = [int(pid) for pid in pidfile.read_text().split()]
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = [pid for pid in pids if alive(pid)]
    for pid in survivors:
        os.kill(pid, 9)
    assert survivors == []


# --- the Job Object, against a stand-in for the Windows API ------------------------------------


class FakeKernel32:
    """Records the calls a JobObject makes; ``failing`` names one that returns 0."""

    def __init__(self, failing: str = "") -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.limits: ExtendedLimits | None = None
        self.failing = failing

    def _record(self, name: str, *args: Any) -> int:
        self.calls.append((name, args))
        return 0 if name == self.failing else {"CreateJobObjectW": 0x70,
                                                "OpenProcess": 0x80}.get(name, 1)

    def CreateJobObjectW(self, *args: Any) -> int:  # noqa: N802 - the Windows API's names
        return self._record("CreateJobObjectW", *args)

    def SetInformationJobObject(self, job: int, kind: int, info: Any,  # noqa: N802
                                size: int) -> int:
        self.limits = ExtendedLimits.from_buffer_copy(
            ctypes.string_at(ctypes.addressof(info._obj), size))
        return self._record("SetInformationJobObject", job, kind, size)

    def OpenProcess(self, *args: Any) -> int:  # noqa: N802
        return self._record("OpenProcess", *args)

    def AssignProcessToJobObject(self, *args: Any) -> int:  # noqa: N802
        return self._record("AssignProcessToJobObject", *args)

    def TerminateJobObject(self, *args: Any) -> int:  # noqa: N802
        return self._record("TerminateJobObject", *args)

    def CloseHandle(self, *args: Any) -> int:  # noqa: N802
        return self._record("CloseHandle", *args)

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


def test_a_job_object_caps_the_jobs_memory_and_processes_and_kills_them_on_close() -> None:
    kernel32 = FakeKernel32()
    job = JobObject(4242, 600 * 1024**2, kernel32=kernel32)
    assert kernel32.names() == ["CreateJobObjectW", "SetInformationJobObject", "OpenProcess",
                                "AssignProcessToJobObject", "CloseHandle"]
    assert kernel32.calls[2][1][2] == 4242  # the worker, opened by its pid
    assert kernel32.calls[3][1] == (0x70, 0x80)  # assigned to the job
    assert kernel32.calls[4][1] == (0x80,)  # the process handle closed, the job kept
    limits = kernel32.limits
    assert limits is not None
    flags = limits.BasicLimitInformation.LimitFlags
    for flag in (JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, JOB_OBJECT_LIMIT_JOB_MEMORY,
                 JOB_OBJECT_LIMIT_ACTIVE_PROCESS):
        assert flags & flag
    assert limits.JobMemoryLimit == 600 * 1024**2
    assert limits.BasicLimitInformation.ActiveProcessLimit == JOB_PROCESSES
    job.close()
    job.close()  # once only
    assert kernel32.names()[5:] == ["TerminateJobObject", "CloseHandle"]
    assert kernel32.calls[5][1][0] == kernel32.calls[6][1][0] == 0x70


def test_the_extended_limits_have_the_windows_layout_on_64_bits() -> None:
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        pytest.skip("the documented sizes are those of 64-bit Windows")
    assert ctypes.sizeof(ExtendedLimits) == 144  # sizeof(JOBOBJECT_EXTENDED_LIMIT_INFORMATION)


@pytest.mark.parametrize("failing", ["SetInformationJobObject", "OpenProcess",
                                     "AssignProcessToJobObject"])
def test_a_job_object_that_cannot_hold_the_worker_is_closed_and_said(failing: str) -> None:
    kernel32 = FakeKernel32(failing)
    with pytest.raises(OSError, match=failing):
        JobObject(4242, 1024, kernel32=kernel32)
    assert kernel32.names()[-2:] == ["TerminateJobObject", "CloseHandle"]


def test_on_windows_the_worker_is_contained_by_a_job_object(
        monkeypatch: pytest.MonkeyPatch) -> None:
    kernel32 = FakeKernel32()
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(containment, "_kernel32", lambda: kernel32)
    worker = subprocess.Popen([sys.executable, "-c", "pass"])
    found = contain(worker, 1024)
    worker.wait()
    assert isinstance(found, JobObject)
    assert "AssignProcessToJobObject" in kernel32.names()
    found.close()


# --- nothing outlives its grader ------------------------------------------------------------

#: A call that never ends: only a signal ends its worker.
SPINNER = textwrap.dedent("""
    import time

    def spin():
        while True:
            time.sleep(0.01)
""")
#: A grader that starts a worker on SPINNER (bubblewrap switched off when argv[2] says so),
#: prints the worker's root, and calls spin until it is killed.
SPINNING_GRADER = textwrap.dedent("""
    import sys
    from pathlib import Path
    import graders.sandbox.confinement as confinement
    from graders.sandbox.runner import Limits, StudentRunner
    if sys.argv[2] == "no bubblewrap":
        confinement.bubblewrap_support = lambda uid, gid, drop: "switched off by the test"
    runner = StudentRunner(Path(sys.argv[1]).read_bytes(), limits=Limits(call_timeout_s=600.0))
    print(runner.root, flush=True)
    runner.call("spin")
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal")
@pytest.mark.parametrize("mode", ["as configured", "no bubblewrap"])
def test_a_worker_dies_with_its_grader_whoever_kills_the_grader(tmp_path: Path,
                                                                mode: str) -> None:
    """SIGKILL leaves the grader no chance to stop its worker: the worker, in a call that
    would never end, must still be gone at once (its parent-death signal, which the
    syscall filter keeps it from clearing)."""
    tmp_path.chmod(0o755)
    (tmp_path / "serving.py").write_text(SPINNER, encoding="utf-8")
    root = ""
    grader = subprocess.Popen(
        [sys.executable, "-c", SPINNING_GRADER, str(tmp_path / "serving.py"), mode],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")})
    try:
        assert grader.stdout is not None
        root = grader.stdout.readline().strip()
        assert root, grader.communicate()[1][-3000:]
        deadline = time.monotonic() + 60
        while not marked(root) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marked(root), "the worker never started"
        time.sleep(1)  # in its call by now
        grader.kill()
        grader.wait(timeout=30)
        deadline = time.monotonic() + 5
        while marked(root) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert kill_marked(root) == []
    finally:
        grader.kill()
        grader.wait(timeout=30)
        if root:
            kill_marked(root)


def marked(root: str) -> list[int]:
    """The live processes whose folder, command line or environment names ``root``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            texts = [os.readlink(entry / "cwd").encode(), (entry / "cmdline").read_bytes(),
                     (entry / "environ").read_bytes()]
        except OSError:
            continue
        if any(root.encode() in text for text in texts) and alive(int(entry.name)):
            found.append(int(entry.name))
    return found
