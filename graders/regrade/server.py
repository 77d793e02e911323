"""The long-lived grading process of a job slot, as the regrade sees it.

A slot grades submission after submission in one ``graders.cli.grade_server`` process
(the interpreter, the imports and pint's registry are paid once per slot, not once per
submission); every grading in it is the same ``graders grade`` as on the command line,
with fresh workers and the slot's sandbox user. The process is started on the slot's
first job, bounded per job by the regrade's timeout (past it, its process group is
killed and the next job starts a new one), and replaced every :data:`JOBS_PER_PROCESS`
jobs so that nothing it accumulates grows without bound.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from graders.sandbox.cleanup import kill_session
from graders.sandbox.limits import MAX_WAIT_S

#: Gradings one process runs before it is replaced by a fresh one.
JOBS_PER_PROCESS = 100
#: The command of the process (see graders.cli.grade_server).
SERVER_COMMAND = (sys.executable, "-P", "-m", "graders.cli.grade_server")


class GradingProcess:
    """One slot's grading process: :meth:`grade` runs one ``graders grade`` in it."""

    def __init__(self, *, cwd: Path, environment: dict[str, str], pass_fds: Sequence[int],
                 register: Callable[[subprocess.Popen[bytes]], None],
                 unregister: Callable[[subprocess.Popen[bytes]], None]) -> None:
        self._cwd = cwd
        self._environment = environment
        self._pass_fds = tuple(pass_fds)
        self._register = register
        self._unregister = unregister
        self._process: subprocess.Popen[bytes] | None = None
        self._buffer = b""
        self._jobs = 0

    @property
    def pid(self) -> int | None:
        """The process's pid while it runs (the slot's sweep spares it)."""
        return self._process.pid if self._process is not None else None

    def grade(self, argv: Sequence[str], log: Path, timeout_s: float
              ) -> tuple[int | None, bool]:
        """Run ``graders grade ARGV`` with its output in ``log``: (exit code, whether the
        timeout stopped it). The code is None when the timeout stopped it, and the
        process's own exit status when it died."""
        if self._process is None or self._process.poll() is not None \
                or self._jobs >= JOBS_PER_PROCESS:
            self.stop()
            self._start()
        process = self._process
        assert process is not None
        assert process.stdin is not None
        self._jobs += 1
        request = json.dumps({"argv": list(argv), "log": str(log)}) + "\n"
        try:
            process.stdin.write(request.encode())
            process.stdin.flush()
        except OSError:
            return self._died()
        line = self._reply(process, time.monotonic() + timeout_s)
        if line is None:  # the timeout
            self.stop()
            return None, True
        if not line:
            return self._died()
        try:
            code = json.loads(line)["code"]
        except (ValueError, KeyError, TypeError):
            self.stop()
            return 1, False
        return (code if isinstance(code, int) else 1), False

    def stop(self) -> None:
        """Kill the process and everything in its session. Never raises."""
        process, self._process = self._process, None
        self._buffer = b""
        self._jobs = 0
        if process is None:
            return
        kill_session(process)
        self._unregister(process)

    def _start(self) -> None:
        process = subprocess.Popen(
            SERVER_COMMAND, cwd=self._cwd, env=self._environment, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
            pass_fds=self._pass_fds)
        self._process = process
        self._register(process)

    def _reply(self, process: subprocess.Popen[bytes], deadline: float) -> bytes | None:
        """The next reply line; b"" at the end of the output; None past ``deadline``."""
        assert process.stdout is not None
        fd = process.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                # waits of at most MAX_WAIT_S: any --timeout, even past epoll's 2**31 ms
                if not selector.select(min(remaining, MAX_WAIT_S)):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    return b""
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _died(self) -> tuple[int | None, bool]:
        process = self._process
        code = None
        if process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = process.wait(timeout=5.0)
        self.stop()
        return (code if code is not None else 1), False
