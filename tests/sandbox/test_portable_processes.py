"""The portable runner on Linux: nothing the worker starts outlives it, and no SysV IPC.

Forced on Linux (as the portability tests force it: a system without /proc), the portable
runner once left every process that double-forked before its tree watch's first look
running after the grading (6 of them in a grading), and 6 GiB of SysV shared memory on the
host. Its worker now installs the syscall filter there too, with a second filter that
refuses new processes (graders.sandbox.syscall_filter.process_program): a fork fails with
EAGAIN, as RLIMIT_NPROC makes it fail for an ordinary user, root included.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from graders.sandbox import platforms as platform_support
from graders.sandbox import syscall_filter
from graders.sandbox.runner import CallOutcome, Limits, StudentRunner

QUICK = Limits(call_timeout_s=5.0, import_timeout_s=20.0)

pytestmark = pytest.mark.skipif(syscall_filter.unavailable() is not None,
                                reason="the syscall filter needs Linux on x86_64 or aarch64")


def escaping(marker: str) -> bytes:
    """A submission that double-forks at import (the grandchild in a session of its own,
    its command line holding ``marker``) and tries SysV shared memory."""
    return textwrap.dedent(f"""
        import ctypes, errno, os, sys

        def escape():
            try:
                pid = os.fork()
            except OSError as error:
                return errno.errorcode[error.errno]
            if pid == 0:
                try:
                    if os.fork() == 0:
                        os.setsid()
                        # -S: Landlock keeps site's folders from it, and site's failure
                        # would end the interpreter at its start
                        os.execv(sys.executable, [sys.executable, "-S", "-c",
                                                  "import time; time.sleep(120)", {marker!r}])
                finally:
                    os._exit(0)
            os.waitpid(pid, 0)
            return "forked"

        ESCAPED = escape()

        def escaped():
            return ESCAPED

        def shared_memory():
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.shmget(0, 1 << 20, 0o1000 | 0o600) < 0:
                return errno.errorcode.get(ctypes.get_errno(), "?")
            return "created"
    """).encode()


@pytest.fixture
def portable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The portable path in this process: a system without /proc."""
    monkeypatch.setattr(platform_support, "PROC", tmp_path / "no-proc")


@pytest.fixture
def marker() -> Iterator[str]:
    token = f"escaped-{secrets.token_hex(8)}"
    yield token
    for pid in carrying(token):  # survivors of a failed test, or of the unfiltered one
        os.kill(pid, 9)


def carrying(marker: str) -> list[int]:
    """The pids whose command line holds ``marker`` (read in the real /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def value(outcome: CallOutcome) -> object:
    assert outcome.status == "ok", outcome
    return outcome.value


def test_on_linux_the_portable_worker_is_filtered_and_starts_no_process(
        portable: None, marker: str) -> None:
    with StudentRunner(escaping(marker), limits=QUICK) as runner:
        assert runner.portable
        assert runner.protections.syscall_filter is True
        assert value(runner.call("escaped")) == "EAGAIN"
        assert value(runner.call("shared_memory")) == "EPERM"
    assert carrying(marker) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="RLIMIT_NPROC refuses an ordinary user's fork")
def test_without_the_process_filter_a_double_fork_outlives_the_portable_grading(
        portable: None, marker: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the filter prevents: root is not bound by RLIMIT_NPROC, and the grandchild
    leaves the tree before the watch's first look."""
    monkeypatch.setattr(syscall_filter, "unavailable", lambda: "switched off by the test")
    with StudentRunner(escaping(marker), limits=QUICK) as runner:
        assert value(runner.call("escaped")) == "forked"
    assert carrying(marker) != []


def test_the_process_filter_refuses_forks_and_lets_threads_run() -> None:
    code = textwrap.dedent("""
        import errno, os, threading
        from graders.sandbox import syscall_filter
        syscall_filter.install(no_processes=True)
        try:
            os.fork()
        except OSError as error:
            print(errno.errorcode[error.errno])
        ran = []
        thread = threading.Thread(target=lambda: ran.append(1))
        thread.start()
        thread.join()
        print("thread" if ran else "no thread")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["EAGAIN", "thread"]
