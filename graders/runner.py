"""Runs student calls in a separate, limited interpreter and returns plain data.

One worker process serves many calls, one JSON line each. A call that raises fails
alone; a crash, a hang past the deadline or a garbage reply kills the worker's
whole process group, and a fresh worker serves the next call. A function that
hangs twice is not called again, and all hangs together share one time budget,
so a submission that hangs everywhere is graded within a stated bound.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Literal, TypeAlias

from graders.encoding import encode_argument
from graders.runtime import WORKER_SCRIPT, cached_runtime
from graders.sandbox import TOKEN_VARIABLE, SandboxUser, WorkerPython, sweep, worker_python
from graders.submission import SUBMISSION_NAME

Status: TypeAlias = Literal["ok", "raised", "timeout", "crashed", "garbage", "unimportable",
                            "abandoned"]


@dataclass(frozen=True)
class Limits:
    """Deadlines and resource limits of the student worker."""

    call_timeout_s: float = 3.0
    import_timeout_s: float = 10.0
    #: Wall time that timed-out calls, and the worker restarts after them, may spend
    #: together before every call is refused.
    hang_budget_s: float = 30.0
    #: Timeouts of one function after which it is not called again.
    timeouts_per_function: int = 2
    #: Crashes of one function after which it is not called again.
    crashes_per_function: int = 20
    cpu_s: int = 60
    address_space_bytes: int = 2 * 1024**3
    processes: int = 0
    file_size_bytes: int = 4 * 1024**2
    open_files: int = 64
    max_reply_bytes: int = 1024**2

    @property
    def worst_case_s(self) -> float:
        """The most wall time a submission that hangs everywhere can cost.

        The first import, the hang budget, and the one call and one restart that may
        start just before the budget runs out.
        """
        return 2 * self.import_timeout_s + self.hang_budget_s + self.call_timeout_s

    def worker_limits(self) -> dict[str, int]:
        """The rlimits the worker applies to itself before importing the submission."""
        return {
            "cpu_s": self.cpu_s,
            "address_space_bytes": self.address_space_bytes,
            "processes": self.processes,
            "file_size_bytes": self.file_size_bytes,
            "open_files": self.open_files,
            "core_bytes": 0,
        }


@dataclass(frozen=True)
class CallOutcome:
    """What one student call produced: plain data, or why there is none."""

    status: Status
    value: Any = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class _WorkerGone(Exception):
    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status: Status = status
        self.message = message


@dataclass
class _Worker:
    process: subprocess.Popen[bytes]
    buffer: bytearray = field(default_factory=bytearray)
    ready: bool = False


class Reason(Enum):
    """Why the runner refuses a call without running it."""

    TIMEOUTS = "it exceeded the per-call deadline"
    CRASHES = "it crashed the worker too often"


class StudentRunner:
    """A student's ``serving.py`` behind a process boundary; use as a context manager."""

    def __init__(self, submission: bytes, *, limits: Limits | None = None,
                 root: Path | None = None, sandbox: SandboxUser | None = None) -> None:
        self.limits = limits or Limits()
        self.sandbox = sandbox
        self._owns_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix="serving-grader-")) if root is None else root
        self._runtime = cached_runtime(self.root)
        self._python = worker_python() if sandbox else WorkerPython(Path(sys.executable))
        self._token = secrets.token_hex(16)
        self._box = self.root / "box"
        self._box.mkdir(mode=0o700, exist_ok=True)
        (self._box / SUBMISSION_NAME).write_bytes(submission)
        if sandbox is not None:  # the sandbox user may enter the root, and own only the box
            self.root.chmod(0o711)
            for path in (self._box, self._box / SUBMISSION_NAME):
                os.chown(path, sandbox.uid, sandbox.gid)
        self._log_path = self.root / "worker.log"
        self._worker: _Worker | None = None
        self._next_id = 0
        self._import_error: str | None = None
        self._timeouts: Counter[str] = Counter()
        self._crashes: Counter[str] = Counter()
        self._hang_spent_s = 0.0
        self._pint_ready = False
        self._started = False
        self.calls = 0

    def __enter__(self) -> StudentRunner:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def token(self) -> str:
        """The marker every worker process carries in its environment (for the sweep)."""
        return self._token

    @property
    def import_error(self) -> str | None:
        """Why the submission cannot be imported, once a start has failed."""
        return self._import_error

    def close(self) -> None:
        """Stop the worker and remove the private folder."""
        self._stop()
        if self._owns_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def call(self, function: str, args: Sequence[Any] = (),
             kwargs: Mapping[str, Any] | None = None,
             fields: Sequence[str] | None = None) -> CallOutcome:
        """Call ``function`` in the worker and return its result as plain data."""
        refusal = self._refusal(function)
        if refusal is not None:
            return refusal
        self.calls += 1
        try:
            worker = self._ensure_worker()
            needs_pint = _has_quantity(args) or _has_quantity(kwargs or {})
            if needs_pint and not self._pint_ready:
                self._request(worker, {"op": "pint"}, self.limits.import_timeout_s, function)
                self._pint_ready = True
            request = {
                "op": "call",
                "fn": function,
                "args": [encode_argument(arg) for arg in args],
                "kwargs": {key: encode_argument(value) for key, value in (kwargs or {}).items()},
                "fields": list(fields) if fields is not None else None,
            }
            reply = self._request(worker, request, self.limits.call_timeout_s, function)
        except _WorkerGone as gone:
            return CallOutcome(gone.status, message=gone.message)
        if reply.get("ok") is True:
            return CallOutcome("ok", value=reply.get("value"))
        return CallOutcome("raised", message=str(reply.get("error", "unknown error"))[:2000])

    def _refusal(self, function: str) -> CallOutcome | None:
        if self._import_error is not None:
            return CallOutcome("unimportable", message=self._import_error)
        if self._timeouts[function] >= self.limits.timeouts_per_function:
            return CallOutcome("abandoned", message=f"{function}() is not called again: "
                               f"{Reason.TIMEOUTS.value} {self._timeouts[function]} times")
        if self._crashes[function] >= self.limits.crashes_per_function:
            return CallOutcome("abandoned", message=f"{function}() is not called again: "
                               f"{Reason.CRASHES.value} {self._crashes[function]} times")
        if self._hang_spent_s >= self.limits.hang_budget_s:
            return CallOutcome("abandoned", message="not called: the submission used up the "
                               f"{self.limits.hang_budget_s:g} s budget for hanging calls "
                               "and worker restarts")
        return None

    def start(self) -> None:
        """Start the worker now, without waiting: it imports the submission (and pint)
        while the grader collects its tests. The first call waits for it to be ready."""
        if self._worker is None and self._import_error is None:
            self._spawn(preload_pint=True)

    def _ensure_worker(self) -> _Worker:
        restart = self._worker is None and self._started
        worker = self._worker or self._spawn(preload_pint=False)
        if worker.ready:
            return worker
        started = time.monotonic()
        try:
            reply = self._read_reply(worker, self.limits.import_timeout_s, None, ident=None)
        except _WorkerGone as gone:
            self._import_error = _import_message(gone)
            raise _WorkerGone("unimportable", self._import_error) from None
        if reply.get("ready") is not True:
            self._import_error = f"serving.py could not be imported: {reply.get('error')}"
            self._stop()
            raise _WorkerGone("unimportable", self._import_error)
        worker.ready = True
        self._pint_ready = bool(reply.get("pint"))
        if restart:  # restarts only happen after a kill: they cost hanging time too
            self._hang_spent_s += time.monotonic() - started
        return worker

    def _spawn(self, *, preload_pint: bool) -> _Worker:
        drop: dict[str, Any] = {}
        if self.sandbox is not None:
            drop = {"user": self.sandbox.uid, "group": self.sandbox.gid, "extra_groups": [],
                    "umask": 0o077}
        with open(self._log_path, "ab") as log:
            process = subprocess.Popen(
                [str(self._python.executable), "-I", "-S", "-B",
                 str(self._runtime / WORKER_SCRIPT.name)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=self._box,
                env=self._environment(),
                start_new_session=True,
                close_fds=True,
                **drop,
            )
        worker = _Worker(process)
        self._worker = worker
        self._started = True
        self._pint_ready = False
        init = {
            "op": "init",
            "submission": str(self._box / SUBMISSION_NAME),
            "path": [str(self._runtime)],
            "limits": self.limits.worker_limits(),
            "preload_pint": preload_pint,
        }
        with contextlib.suppress(OSError):  # a worker that died at once is reported on reading
            self._send(worker, init)
        return worker

    def _environment(self) -> dict[str, str]:
        return {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": str(self._box),
            "TMPDIR": str(self._box),
            "PYTHONHASHSEED": "0",
            TOKEN_VARIABLE: self._token,
            **self._python.environment,
        }

    def _send(self, worker: _Worker, request: dict[str, Any]) -> None:
        assert worker.process.stdin is not None
        line = json.dumps(request, allow_nan=True, separators=(",", ":")) + "\n"
        worker.process.stdin.write(line.encode())
        worker.process.stdin.flush()

    def _request(self, worker: _Worker, request: dict[str, Any], timeout_s: float,
                 function: str | None) -> dict[str, Any]:
        self._next_id += 1
        ident = self._next_id
        try:
            self._send(worker, {**request, "id": ident})
        except OSError:
            self._stop()
            if function is not None:
                self._crashes[function] += 1
            raise _WorkerGone("crashed", "the worker process died") from None
        return self._read_reply(worker, timeout_s, function, ident)

    def _read_reply(self, worker: _Worker, timeout_s: float, function: str | None,
                    ident: int | None) -> dict[str, Any]:
        started = time.monotonic()
        while True:
            try:
                raw = self._read_line(worker, started, timeout_s)
            except _WorkerGone as gone:
                self._stop()
                if function is not None:
                    if gone.status == "timeout":
                        self._timeouts[function] += 1
                        self._hang_spent_s += time.monotonic() - started
                    elif gone.status == "crashed":
                        self._crashes[function] += 1
                raise
            try:
                reply = json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                self._stop()
                raise _WorkerGone("garbage", "the worker sent a reply that is not JSON") from None
            if not isinstance(reply, dict):
                break
            if ident is not None and _earlier(reply.get("id"), ident):
                continue  # a late or forged reply to an earlier request: skip it
            if reply.get("id") == ident:
                return reply
            break
        self._stop()
        raise _WorkerGone("garbage", "the worker sent a reply to another request")

    def _read_line(self, worker: _Worker, started: float, timeout_s: float) -> bytes:
        deadline = started + timeout_s
        stdout = worker.process.stdout
        assert stdout is not None
        fd = stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in worker.buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _WorkerGone("timeout", f"timed out after {timeout_s:g} s")
                if not selector.select(remaining):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise _WorkerGone("crashed", self._death_message(worker))
                worker.buffer.extend(chunk)
                if len(worker.buffer) > self.limits.max_reply_bytes:
                    raise _WorkerGone("garbage", "the reply exceeded "
                                      f"{self.limits.max_reply_bytes} bytes")
        line, _, rest = bytes(worker.buffer).partition(b"\n")
        worker.buffer[:] = rest
        return line

    def _death_message(self, worker: _Worker) -> str:
        try:
            code = worker.process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return "the worker closed its output"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"the worker was killed by {name}"
        return f"the worker exited with code {code} (sys.exit or os._exit in serving.py?)"

    def _stop(self) -> None:
        worker, self._worker = self._worker, None
        if worker is None:
            return
        process = worker.process
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        try:
            process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            process.kill()
        sweep(self._token)  # anything the worker left, in any process group


def _earlier(reply_id: Any, ident: int) -> bool:
    """Whether ``reply_id`` names a request before ``ident``."""
    return isinstance(reply_id, int) and not isinstance(reply_id, bool) and reply_id < ident


def _import_message(gone: _WorkerGone) -> str:
    if gone.status == "timeout":
        return "serving.py could not be imported: importing it took longer than the deadline"
    return f"serving.py could not be imported: {gone.message}"


def _has_quantity(value: Any) -> bool:
    if hasattr(value, "m_as"):
        return True
    if isinstance(value, Mapping):
        return any(_has_quantity(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_has_quantity(item) for item in value)
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return any(_has_quantity(item) for item in vars(value).values())
    return False
