"""How a worker is started under its confinement (bubblewrap, or a plain drop to the
sandbox user), what its exit code says, and how the runner reaches it (:class:`Transport`,
the hardened and portable transports' interface)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from graders.sandbox.bubblewrap import BOX, submission_descriptor
from graders.sandbox.confinement import Protections, bubblewrap_command, start_options
from graders.sandbox.interrupts import signal_name
from graders.sandbox.privileges import TOKEN_VARIABLE, SandboxUser, WorkerPython
from graders.sandbox.runtime import WORKER_SCRIPT

#: Bytes read from a worker's reply pipe at a time: a reply buffer never holds more than
#: ``Limits.max_reply_bytes`` plus one chunk.
REPLY_CHUNK_BYTES = 64 * 1024
#: Bytes read from a worker's output pipe at a time, and the pipe's size where the
#: system allows it (fewer, larger reads keep a flood of output cheap).
OUTPUT_CHUNK_BYTES = 1024**2


@dataclass(frozen=True)
class WorkerCommand:
    """How to start one worker: command, box, environment, the token the sweep looks for,
    and Popen's options that drop its privileges (the hardened transport's)."""

    argv: list[str]
    cwd: Path
    env: dict[str, str]
    token: str
    drop: dict[str, Any]

    def popen(self, **options: Any) -> subprocess.Popen[bytes]:
        """The worker process, its stdin and stdout pipes to this grader."""
        return subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                cwd=self.cwd, env=self.env, close_fds=True, **options)


class Transport(Protocol):
    """One worker that ``Transport(command, sink, limits)`` started, its output to ``sink``."""

    process: subprocess.Popen[bytes]

    @property
    def stop_reason(self) -> str | None:
        """Why the transport stopped the worker itself (a memory bound), if it did."""

    def send(self, line: bytes, *, flush: bool = True) -> None:
        """Queue request bytes, never waiting: unless ``flush``, they are written later.
        OSError once the worker has closed its end."""

    def flush(self) -> None:
        """Write what the request pipe takes now; a closed pipe is left for the reply to tell."""

    def receive(self, wait_s: float) -> bytes | None:
        """Reply bytes within ``wait_s`` (None: none came; b"": the worker closed its end),
        draining the output meanwhile, so that a worker blocked on it always gets to reply."""

    def drain(self) -> None:
        """Read what the worker's output holds now into the sink, within a bound."""

    def stop(self) -> None:
        """Kill the worker and whatever it started; take in the output it left."""


@dataclass(frozen=True)
class WorkerSetup:
    """What every worker of one runner starts from, and under which protections."""

    python: WorkerPython
    runtime: Path
    definitions: Path
    box: Path
    #: What a confined worker gets as ``serving.py``, whatever the box holds.
    submission: bytes
    sandbox: SandboxUser | None
    protections: Protections
    #: The marker every worker process carries in its environment (for the sweep).
    token: str

    @contextlib.contextmanager
    def command(self) -> Iterator[WorkerCommand]:
        """How to start a worker; a descriptor the command passes down is closed after."""
        # -s -P instead of -I: the environment is the runner's own (nothing of the grader's
        # leaks in), and the worker must honour its PYTHONHASHSEED so that string hashing,
        # and so a submission's set order, is the same in every grading
        argv = [str(self.python.executable), "-s", "-P", "-S", "-B",
                str(self.runtime / WORKER_SCRIPT.name)]
        submission_fd: int | None = None
        if self.protections.tool == "bubblewrap":  # see graders.sandbox.bubblewrap
            submission_fd = submission_descriptor(self.submission)
            argv = bubblewrap_command(self.python, worker=argv,
                                      folders=(self.runtime, self.definitions),
                                      submission_fd=submission_fd,
                                      space=self.box if self.protections.box_mount else None)
        try:
            yield WorkerCommand(argv, self.box, self.environment(), self.token,
                                start_options(self.sandbox, submission_fd))
        finally:
            if submission_fd is not None:
                os.close(submission_fd)

    @property
    def worker_box(self) -> Path:
        """The box as the worker sees it: in bubblewrap the same path in every grading."""
        return Path(BOX) if self.protections.tool == "bubblewrap" else self.box

    def environment(self) -> dict[str, str]:
        """The worker's environment."""
        if sys.platform == "win32":  # Python needs SYSTEMROOT there; TEMP is its TMPDIR
            root = os.environ.get("SYSTEMROOT", r"C:\Windows")
            return {"SYSTEMROOT": root, "PATH": root + r"\System32",
                    "USERPROFILE": str(self.box), "TEMP": str(self.box), "TMP": str(self.box),
                    "PYTHONHASHSEED": "0", "PYTHONUTF8": "1", TOKEN_VARIABLE: self.token}
        return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(self.worker_box),
                "TMPDIR": str(self.worker_box), "PYTHONHASHSEED": "0", TOKEN_VARIABLE: self.token,
                **self.python.environment}

    def death_message(self, transport: Transport) -> str:
        """Why a worker that closed its reply pipe is gone, from its exit code."""
        if transport.stop_reason:
            return f"the worker was stopped: {transport.stop_reason}"
        try:
            code = transport.process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return "the worker closed its output"
        if code > 128 and self.protections.tool == "bubblewrap":
            code = 128 - code  # bwrap reports a worker killed by signal N as 128 + N
        if code < 0:
            return f"the worker was killed by {signal_name(-code)}"
        return f"the worker exited with code {code} (sys.exit or os._exit in serving.py?)"
