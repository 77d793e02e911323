"""Runs student calls in a separate, limited interpreter and returns plain data.

One worker process serves many calls, one JSON line each. A call that raises fails
alone; a crash, a hang past the deadline or a garbage reply kills the worker's
whole process group, and a fresh worker serves the next call. A function that
hangs twice is not called again, and all hangs together share one time budget,
so a submission that hangs everywhere is graded within a stated bound.

Totals are bounded too: all calls, imports and restarts of one runner share a total
time budget (past it every call is refused), each reply line is read through a bounded
buffer, and whatever the submission writes to stdout or stderr goes into a pipe that the
runner drains into a bounded :class:`OutputSink` (the first part kept for feedback, the
rest counted and dropped), so that output never fails a call or changes a score.

No reply can break the protocol: a line that is not JSON, for whatever reason, or that
nests deeper than :data:`MAX_REPLY_DEPTH`, is a bad reply for its call (:func:`parse_reply`).
Every read and write has a deadline: requests are never written in a way that waits (a
non-blocking pipe whose backlog is written while a reply is awaited, under its deadline;
a writer thread on the portable path), and every wait is cut into slices of at most
:data:`MAX_WAIT_S`, so that any deadline, however long, can be waited for.

Where the hardened path is unavailable (Windows, macOS, or a system without the POSIX-only
modules or /proc: see :mod:`graders.sandbox.platforms`), the same runner takes its portable
path: the worker's stdout and stderr are plain pipes read by two threads (the replies into
a bounded queue, the output into the same bounded sink), and a deadline kills the worker's
process tree (its process group, or ``taskkill /T /F`` on Windows). The protocol, the
deadlines, the reply and output bounds and the time budget are the same.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import queue
import re
import secrets
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Literal, TypeAlias

from graders.sandbox import platforms as platform_support
from graders.sandbox.bubblewrap import BOX, submission_descriptor
from graders.sandbox.cleanup import kill_session, remove_tree, report_problems, sweep_user
from graders.sandbox.confinement import (
    LAUNCHER_FAILED,
    Protections,
    bubblewrap_command,
    landlock_paths,
    launcher_command,
    protections_for,
    start_options,
)
from graders.sandbox.containment import Containment, contain
from graders.sandbox.interrupts import deferred_signals
from graders.sandbox.limits import MAX_WAIT_S
from graders.sandbox.limits import Limits as Limits  # part of the runner's interface
from graders.sandbox.privileges import (
    TOKEN_VARIABLE,
    SandboxError,
    SandboxUser,
    WorkerPython,
    grading_parent,
    sweep,
    worker_python,
)
from graders.sandbox.runtime import (
    WORKER_SCRIPT,
    cached_runtime,
    grader_definitions,
    worker_definitions,
)
from graders.sandbox.submission import SUBMISSION_NAME, import_error_message
from graders.sandbox.wire import bounded, encode_argument, has_quantity

Status: TypeAlias = Literal["ok", "raised", "timeout", "crashed", "garbage", "unimportable",
                            "abandoned"]


@dataclass(frozen=True)
class CallOutcome:
    """What one student call produced: plain data, or why there is none."""

    status: Status
    value: Any = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class CallRequest:
    """One student call to make: the function, its arguments and its result's fields."""

    function: str
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] | None = None
    fields: Sequence[str] | None = None
    #: ``args`` and ``kwargs`` already encoded (:func:`graders.sandbox.wire.encode_argument`
    #: of each), when the caller has them: they are sent as they are.
    encoded: tuple[list[Any], dict[str, Any]] | None = None


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
    #: The read end of this worker's output pipe (its fds 1 and 2), non-blocking; None
    #: once every writer has closed it.
    output: int | None = None
    #: /dev/null, where output past the kept part is spliced without being read.
    discard: int | None = None
    #: The portable path's reply chunks, read from stdout by a thread (b"" at its end);
    #: bounded, so that a worker that writes without end blocks instead of filling memory.
    replies: queue.Queue[bytes] | None = None
    #: The portable path's thread that drains stdout and stderr into the sink.
    readers: list[threading.Thread] = field(default_factory=list)
    #: Waits for the reply pipe and the output pipe (made on the first wait, closed with
    #: the worker): one for the worker's life, not one per call.
    selector: selectors.BaseSelector | None = None
    #: Request bytes not written yet: the request pipe is non-blocking, and what it cannot
    #: take now is written while a reply is awaited, within that reply's deadline.
    unsent: bytearray = field(default_factory=bytearray)
    #: The portable path's requests, written by a thread (None: stop and close the pipe),
    #: so that a worker that stops reading never blocks the grader in a write.
    requests: queue.Queue[bytes | None] | None = None
    #: The portable path's bound on the worker's memory and processes (a Job Object, or a
    #: watch of its process tree), where the system offers one.
    containment: Containment | None = None


class Reason(Enum):
    """Why the runner refuses a call without running it."""

    TIMEOUTS = "it exceeded the per-call deadline"
    CRASHES = "it crashed the worker too often"
    GARBAGE = "it made the worker send unreadable replies"


#: Bytes read from a worker's reply pipe at a time: a reply buffer never holds more than
#: ``Limits.max_reply_bytes`` plus one chunk.
REPLY_CHUNK_BYTES = 64 * 1024
#: :meth:`StudentRunner.call_many` keeps at most this many request bytes unanswered, well
#: under a pipe's 64 KiB, so that writing a request never waits for the worker.
PIPELINE_BYTES = 32 * 1024
#: Bytes read from a worker's output pipe at a time, and the pipe's size where the
#: system allows it (fewer, larger reads keep a flood of output cheap).
OUTPUT_CHUNK_BYTES = 1024**2
#: The most output one drain between calls reads, so that a worker that keeps writing
#: cannot hold the grader in a drain.
IDLE_DRAIN_BYTES = 4 * OUTPUT_CHUNK_BYTES
#: Seconds the portable path waits, after a worker is killed, for its output thread to
#: take in what the worker wrote before it died.
OUTPUT_JOIN_S = 1.0
#: The deepest nesting of lists and objects a reply may hold. An honest reply is a few
#: levels deep (the worker cuts values at depth 3); a deeper one is a bad reply, never
#: data the grader walks through recursively.
MAX_REPLY_DEPTH = 16


class OutputSink:
    """A submission's stdout and stderr: the first ``keep_bytes`` kept, the rest counted."""

    def __init__(self, keep_bytes: int) -> None:
        self.keep_bytes = keep_bytes
        self.total_bytes = 0
        self._kept = bytearray()
        #: The portable path feeds the sink from a thread.
        self._lock = threading.Lock()
        #: Called with each kept chunk as it arrives (live output under ``pytest -s``).
        self.echo: Callable[[bytes], None] | None = None

    @property
    def full(self) -> bool:
        return len(self._kept) >= self.keep_bytes

    def feed(self, chunk: bytes) -> None:
        """Take one chunk: keep what fits, count all of it."""
        with self._lock:
            room = self.keep_bytes - len(self._kept)
            if room > 0:
                self._kept += chunk[:room]
            self.total_bytes += len(chunk)
            echo = self.echo
        if echo is not None and room > 0:
            echo(chunk[:room])

    def count(self, size: int) -> None:
        """Count ``size`` bytes that were dropped unread."""
        with self._lock:
            self.total_bytes += size

    def summary(self, since: OutputMark | None = None) -> OutputSummary:
        """What was printed, or only what was printed after ``since``."""
        start = since or OutputMark(0, 0)
        with self._lock:
            kept = bytes(self._kept[start.kept_bytes:])
            return OutputSummary(kept.decode("utf-8", errors="replace"),
                                 self.total_bytes - start.total_bytes, len(kept),
                                 self.keep_bytes - start.kept_bytes)

    def mark(self) -> OutputMark:
        """Where the output stands now, for :meth:`summary` to start from."""
        with self._lock:
            return OutputMark(self.total_bytes, len(self._kept))


@dataclass(frozen=True)
class OutputMark:
    """A point in a submission's output: the bytes written, and kept, before it."""

    total_bytes: int
    kept_bytes: int


@dataclass(frozen=True)
class OutputSummary:
    """What the submission printed (stdout and stderr together, in the order written)."""

    #: The first bytes of it, decoded as UTF-8 with undecodable bytes replaced.
    text: str
    #: Every byte it wrote to fds 1 and 2, kept or not.
    total_bytes: int
    kept_bytes: int
    keep_bytes: int

    @property
    def truncated(self) -> bool:
        return self.total_bytes > self.kept_bytes

    def sentence(self) -> str:
        """E.g. "your code printed 2.3 GB; the first 64 KiB are kept"."""
        return output_sentence(self.total_bytes, self.keep_bytes)


def output_sentence(total_bytes: int, keep_bytes: int) -> str:
    """How much a submission printed and how much of it is kept, in human units."""
    printed = f"your code printed {decimal_size(total_bytes)}"
    if total_bytes <= keep_bytes:
        return printed
    return f"{printed}; the first {binary_size(keep_bytes)} are kept"


def decimal_size(size: int) -> str:
    """``size`` bytes in SI units, to 3 significant digits: 2300000000 -> "2.3 GB"."""
    if size < 1000:
        return f"{size} B" if size != 1 else "1 byte"
    value = float(size)
    for unit in ("kB", "MB", "GB", "TB", "PB"):
        value /= 1000
        text = f"{value:.3g}"
        if "e" not in text and float(text) < 1000:
            return f"{text} {unit}"
    return f"{value:.0f} PB"


def binary_size(size: int) -> str:
    """``size`` bytes in binary units: 65536 -> "64 KiB", 1536 -> "1.5 KiB"."""
    if size < 1024:
        return f"{size} B" if size != 1 else "1 byte"
    value = float(size)
    unit = "B"
    for name in ("KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value /= 1024
        unit = name
    return f"{value:.0f} {unit}" if value >= 100 else f"{value:.3g} {unit}"


@dataclass
class TimeBudget:
    """Wall time the student's code may cost one grading, shared by all its runners (the
    visible tests' and the hidden tests' workers): calls, imports and restarts in all,
    and, as a part of it, the time of hanging calls and the restarts after them."""

    total_s: float
    hang_s: float
    spent_s: float = 0.0
    hang_spent_s: float = 0.0

    @classmethod
    def of(cls, limits: Limits) -> TimeBudget:
        """A fresh budget of ``limits.total_budget_s`` and ``limits.hang_budget_s``."""
        return cls(total_s=limits.total_budget_s, hang_s=limits.hang_budget_s)

    @property
    def exhausted(self) -> bool:
        return self.spent_s >= self.total_s

    @property
    def hangs_exhausted(self) -> bool:
        return self.hang_spent_s >= self.hang_s


class StudentRunner:
    """A student's ``serving.py`` behind a process boundary; use as a context manager.

    ``budget`` is the grading's time budget, to share it with another runner of the same
    grading; by default the runner has one of its own, from ``limits``.
    """

    def __init__(self, submission: bytes, *, limits: Limits | None = None,
                 root: Path | None = None, sandbox: SandboxUser | None = None,
                 budget: TimeBudget | None = None) -> None:
        try:
            with deferred_signals():  # a folder made is a folder owned, or removed
                self._set_up(submission, limits, root, sandbox, budget)
        except BaseException:
            self._abandon_set_up()
            raise

    def _abandon_set_up(self) -> None:
        """Remove what a set-up that failed (or was interrupted) had made."""
        made = self.__dict__.get("root") if self.__dict__.get("_owns_root") else \
            self.__dict__.get("_box")
        if made is not None:
            report_problems(remove_tree(made))

    def _set_up(self, submission: bytes, limits: Limits | None, root: Path | None,
                sandbox: SandboxUser | None, budget: TimeBudget | None) -> None:
        self.limits = limits or Limits()
        self.budget = budget if budget is not None else TimeBudget.of(self.limits)
        self.sandbox = sandbox
        self._owns_root = root is None
        self.root = root or Path(tempfile.mkdtemp(prefix="serving-grader-",
                                                  dir=grading_parent(sandbox)))
        self._runtime = cached_runtime(self.root)
        self._definitions = worker_definitions(self._runtime, self.root)
        self._grader_definitions: Path | None = None
        self._python = worker_python() if sandbox else WorkerPython(Path(sys.executable))
        self._protections = protections_for(sandbox)
        #: Pipes read by threads, and the process tree killed, instead of the FIFO, the
        #: selector and the /proc sweep (see the module's docstring).
        self.portable = self._protections.runner == "portable"
        self._token = secrets.token_hex(16)
        self._box = self.root / "box"
        self._box.mkdir(mode=0o700, exist_ok=True)
        (self._box / SUBMISSION_NAME).write_bytes(submission)
        self._submission = submission  # what a confined worker gets, whatever the box holds
        if sandbox is not None:  # the sandbox user may enter the root, and own only the box
            self.root.chmod(0o711)
            for path in (self._box, self._box / SUBMISSION_NAME):
                os.chown(path, sandbox.uid, sandbox.gid)
        #: The worker's stderr, as :meth:`_spawn` opens it: a FIFO that :meth:`_launch`
        #: makes for each worker and removes once the worker holds it (see there).
        self._log_path = self.root / "worker.output"
        self._output = OutputSink(self.limits.output_keep_bytes)
        self._worker: _Worker | None = None
        self._next_id = 0
        self._import_error: str | None = None
        #: Why the worker could not install its syscall filter: a grader failure, raised
        #: again by every later call (no student code runs without the filter).
        self._filter_error: str | None = None
        self._timeouts: Counter[str] = Counter()
        self._crashes: Counter[str] = Counter()
        self._garbage: Counter[str] = Counter()
        self._pint_ready = False
        self._started = False
        self._imported = False
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
    def grader_definitions(self) -> Path:
        """pint's parsed definitions for the grader's own registry (see graders.units)."""
        if self._grader_definitions is None:
            self._grader_definitions = grader_definitions(self.root)
        return self._grader_definitions

    @property
    def imported(self) -> bool:
        """Whether a worker has imported the submission (and no start failed since)."""
        return self._imported and self._import_error is None

    @property
    def import_error(self) -> str | None:
        """Why the submission cannot be imported, once a start has failed."""
        return self._import_error

    @property
    def protections(self) -> Protections:
        """Which protections the worker runs under (privilege drop, no network, bounded
        temporary space, private IPC), with a line that says so."""
        return self._protections

    @property
    def time_spent_s(self) -> float:
        """Wall time the student's code has cost the grading so far (calls, imports and
        restarts, of every runner sharing this one's budget)."""
        return self.budget.spent_s

    def output_summary(self, since: OutputMark | None = None) -> OutputSummary:
        """What the submission has printed so far (or since ``since``): the kept text and
        the total byte count.

        Reads what the worker's output pipe holds now, without waiting: the worker flushes
        its stdout and stderr before each reply, so a finished call's output is included.
        """
        self._drain(self._worker, IDLE_DRAIN_BYTES)
        return self._output.summary(since)

    def output_mark(self) -> OutputMark:
        """Where the submission's output stands now (read up to here first)."""
        self._drain(self._worker, IDLE_DRAIN_BYTES)
        return self._output.mark()

    def echo_output(self, echo: Callable[[bytes], None] | None) -> None:
        """Pass every kept chunk of the submission's output to ``echo`` as it is read (None:
        stop), e.g. to show it live under ``pytest -s``."""
        self._output.echo = echo

    def close(self) -> None:
        """Stop the worker and remove what this run made or its worker left: the private
        folder (or the box, in a root it was given), a runtime or interpreter copy made for
        this run alone, and, when this grading holds its sandbox user alone, every process,
        shared-folder entry and SysV IPC object of that user. Never raises: results are
        written after it. What cannot be removed is reported on stderr."""
        with deferred_signals():  # stopped half way, it would leave processes and folders
            self._close()

    def _close(self) -> None:
        problems: list[str] = []
        try:
            self._stop()
        except Exception as error:  # a clean-up must not cost the grading its results
            problems.append(f"stopping the worker: {type(error).__name__}: {error}")
        if self.sandbox is not None and self.sandbox.exclusive:
            problems += sweep_user(self.sandbox.uid)
        private = [self.root if self._owns_root else self._box]
        for built in (self._runtime, self._definitions, self._grader_definitions):
            if built is not None and (built.parent == self.root or built.name.startswith(".")):
                private.append(built)  # built for this run alone (see cached_folder)
        if self._python.private is not None:
            private.append(self._python.private)
        for path in private:
            problems += remove_tree(path)
        report_problems(problems)

    def call(self, function: str, args: Sequence[Any] = (),
             kwargs: Mapping[str, Any] | None = None,
             fields: Sequence[str] | None = None) -> CallOutcome:
        """Call ``function`` in the worker and return its result as plain data.

        Its wall time, with the import or restart it may need, is charged to the total
        time budget; once the budget is spent, calls are refused without running.
        """
        refusal = self._refusal(function)
        if refusal is not None:
            return refusal
        self.calls += 1
        started = time.monotonic()
        try:
            return self._call(function, args, kwargs, fields)
        finally:
            self.budget.spent_s += time.monotonic() - started

    def call_many(self, calls: Sequence[CallRequest]) -> Generator[CallOutcome, None, None]:
        """The outcomes of ``calls``, in order, exactly as :meth:`call` would give them
        one after another (the worker sees the same calls in the same order), for any
        submission that leaves the protocol's pipes alone. One that reads the requests
        written ahead from them can see the coming inputs (of visible cases only: hidden
        ones are asked one at a time, in a worker of their own) and make calls fail;
        each failure is a timeout, crash or bad reply as in :meth:`call`, within the
        same deadlines and budget.

        Requests are written ahead of the replies (at most :data:`PIPELINE_BYTES`
        unanswered), so the worker computes the next calls while the caller handles an
        outcome. Each call's timeout runs from when its reply is awaited, and only the
        waiting is charged to the budget. After a call that fails (timeout, crash, a bad
        reply), or once one is refused, the rest are made one by one by :meth:`call`.
        """
        pending: collections.deque[tuple[int, int, int]] = collections.deque()
        in_flight = 0  # request bytes written and not answered
        unsent = 0  # the first call not written yet
        pipelining = True
        try:
            for position, request in enumerate(calls):
                # refilled once half the window is answered: fewer, larger writes
                refill = not pending or in_flight <= PIPELINE_BYTES // 2
                while refill and pipelining and unsent < len(calls) and (
                        not pending or in_flight < PIPELINE_BYTES):
                    if self._refusal(calls[unsent].function) is not None:
                        break  # refused calls are refused by call(), in their turn
                    written = self._pipelined_send(calls[unsent], idle=not pending)
                    if written == "wait":
                        break
                    if written is None:
                        pipelining = False
                        break
                    pending.append((*written, unsent))
                    in_flight += written[1]
                    unsent += 1
                if refill and self._worker is not None:
                    self._flush_queued(self._worker)
                if pending and pending[0][2] == position:
                    ident, size, _ = pending.popleft()
                    in_flight -= size
                    outcome = self._pipelined_outcome(request, ident)
                    if not outcome.ok and outcome.status != "raised":
                        pipelining = False  # the worker was stopped: its queue is gone
                        pending.clear()
                    yield outcome
                else:  # not written (refused, or the worker is gone): as call() does
                    pipelining = False
                    yield self.call(request.function, request.args, request.kwargs,
                                    request.fields)
        finally:
            self._drop_pipeline(pending, calls)

    def _pipelined_send(self, request: CallRequest, *, idle: bool
                        ) -> tuple[int, int] | Literal["wait"] | None:
        """Write ``request``; (id, bytes), "wait" when it needs the pint import first and
        the worker is busy, or None when the worker cannot be reached (the call is then
        made by :meth:`call`). Time spent here is charged to the budget, as in call()."""
        started = time.monotonic()
        try:
            worker = self._ensure_worker()
            encoded = self._encoded(request)
            if not self._pint_ready and has_quantity([encoded["args"], encoded["kwargs"]]):
                if not idle:
                    return "wait"  # the import's reply must not overtake pending ones
                self._request(worker, {"op": "pint"}, self.limits.import_timeout_s,
                              request.function)
                self._pint_ready = True
            self._next_id += 1
            line = self._line({**encoded, "id": self._next_id})
            self._write(worker, line, flush=False)  # call_many writes its batch at once
        except (_WorkerGone, OSError):
            return None
        finally:
            self.budget.spent_s += time.monotonic() - started
        self.calls += 1
        return self._next_id, len(line)

    def _pipelined_outcome(self, request: CallRequest, ident: int) -> CallOutcome:
        """The outcome of a request :meth:`_pipelined_send` wrote, as :meth:`call` gives it."""
        refusal = self._refusal(request.function)
        if refusal is not None:  # spent while earlier replies were awaited: not counted
            self._stop()
            return refusal
        started = time.monotonic()
        try:
            worker = self._worker
            if worker is None:
                raise _WorkerGone("crashed", "the worker process died")
            reply = self._read_reply(worker, self.limits.call_timeout_s, request.function,
                                     ident)
        except _WorkerGone as gone:
            return CallOutcome(gone.status, message=gone.message)
        finally:
            self.budget.spent_s += time.monotonic() - started
        return self._outcome(request.function, reply)

    def _drop_pipeline(self, pending: collections.deque[tuple[int, int, int]],
                       calls: Sequence[CallRequest]) -> None:
        """Read and discard the replies of requests written but not consumed (the caller
        stopped early), so the next call finds the worker idle."""
        for ident, _, position in pending:
            worker = self._worker
            if worker is None:
                return
            started = time.monotonic()
            try:
                self._read_reply(worker, self.limits.call_timeout_s, calls[position].function,
                                 ident)
            except _WorkerGone:
                return
            finally:
                self.budget.spent_s += time.monotonic() - started

    def _encoded(self, request: CallRequest) -> dict[str, Any]:
        args, kwargs = request.encoded if request.encoded is not None else (
            [encode_argument(arg) for arg in request.args],
            {key: encode_argument(value) for key, value in (request.kwargs or {}).items()})
        return {
            "op": "call",
            "fn": request.function,
            "args": args,
            "kwargs": kwargs,
            "fields": list(request.fields) if request.fields is not None else None,
        }

    def _call(self, function: str, args: Sequence[Any], kwargs: Mapping[str, Any] | None,
              fields: Sequence[str] | None) -> CallOutcome:
        try:
            worker = self._ensure_worker()
            request = self._encoded(CallRequest(function, args, kwargs, fields))
            if not self._pint_ready and has_quantity([request["args"], request["kwargs"]]):
                self._request(worker, {"op": "pint"}, self.limits.import_timeout_s, function)
                self._pint_ready = True
            reply = self._request(worker, request, self.limits.call_timeout_s, function)
        except _WorkerGone as gone:
            return CallOutcome(gone.status, message=gone.message)
        return self._outcome(function, reply)

    def _outcome(self, function: str, reply: dict[str, Any]) -> CallOutcome:
        if reply.get("ok") is True:  # bounded here: whatever the worker sent
            return CallOutcome("ok", value=bounded(reply.get("value")))
        if reply.get("oversize") is True:  # the worker stopped building a reply too long
            self._stop()
            self._garbage[function] += 1
            return CallOutcome("garbage", message=self._oversize_message())
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
        if self._garbage[function] >= self.limits.crashes_per_function:
            return CallOutcome("abandoned", message=f"{function}() is not called again: "
                               f"{Reason.GARBAGE.value} {self._garbage[function]} times")
        if self.budget.hangs_exhausted:
            return CallOutcome("abandoned", message="not called: the submission used up the "
                               f"{self.budget.hang_s:g} s budget for hanging calls "
                               "and worker restarts")
        if self.budget.exhausted:
            return CallOutcome("abandoned", message=budget_message(self.budget.total_s))
        return None

    def start(self, *, preload_pint: bool = True) -> None:
        """Start the worker now, without waiting: it imports the submission (and pint,
        when ``preload_pint``) while the grader goes on. The first call waits for it to be
        ready."""
        if self._worker is None and self._import_error is None:
            started = time.monotonic()
            try:
                self._launch(preload_pint=preload_pint)
            finally:
                self.budget.spent_s += time.monotonic() - started

    def _launch(self, *, preload_pint: bool) -> _Worker:
        """:meth:`_spawn` a worker whose fds 1 and 2 are a pipe this runner drains.

        The pipe is a FIFO at ``self._log_path``, the file :meth:`_spawn` opens as the
        worker's stderr (the worker makes its fd 1 a copy of fd 2). Its read end is
        opened first (non-blocking, so that the open does not wait for a writer and the
        writer's open does not either); once the worker holds the write end, the name is
        removed, so nothing else can open the pipe. A pipe has no size limit to fail a
        write: the runner reads it while it waits for a reply, keeps the first part and
        drops the rest.
        """
        if self.portable:
            return self._spawn(preload_pint=preload_pint)
        fifo = self._log_path
        fifo.unlink(missing_ok=True)
        os.mkfifo(fifo, 0o600)
        try:
            output = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            fcntl = platform_support.optional_module("fcntl")
            with contextlib.suppress(OSError, AttributeError):  # a larger pipe: fewer reads
                fcntl.fcntl(output, fcntl.F_SETPIPE_SZ, OUTPUT_CHUNK_BYTES)  # type: ignore[union-attr]
            try:
                worker = self._spawn(preload_pint=preload_pint)
            except BaseException:
                os.close(output)
                raise
        finally:
            fifo.unlink(missing_ok=True)
        worker.output = output
        with contextlib.suppress(OSError):
            worker.discard = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        return worker

    def _ensure_worker(self) -> _Worker:
        if self._filter_error is not None:
            raise SandboxError(self._filter_error)
        restart = self._worker is None and self._started
        worker = self._worker or self._launch(preload_pint=False)
        if worker.ready:
            return worker
        started = time.monotonic()
        try:
            if self._protections.syscall_filter or self._protections.landlock:
                self._confirm_filter(worker)
            # the filter's line and the import share the import deadline
            left_s = max(self.limits.import_timeout_s - (time.monotonic() - started), 0.0)
            reply = self._read_reply(worker, left_s, None, ident=None)
        except _WorkerGone as gone:
            self._import_error = _import_message(gone)
            raise _WorkerGone("unimportable", self._import_error) from None
        if reply.get("ready") is not True:
            self._import_error = import_error_message(
                f"serving.py could not be imported: {str(reply.get('error'))[:2000]}")
            self._stop()
            raise _WorkerGone("unimportable", self._import_error)
        worker.ready = True
        self._imported = True
        self._pint_ready = bool(reply.get("pint"))
        if restart:  # restarts only happen after a kill: they cost hanging time too
            self.budget.hang_spent_s += time.monotonic() - started
        return worker

    def _confirm_filter(self, worker: _Worker) -> None:
        """Read the worker's first line, written before any student code runs: whether it
        installed its syscall filter. Where it could not, no student code runs at all:
        the grading fails as the grader's failure (SandboxError), not the submission's."""
        reply = self._read_reply(worker, self.limits.import_timeout_s, None, ident=None)
        if (reply.get("syscall_filter"), reply.get("landlock", 0)) == \
                (self._protections.syscall_filter, self._protections.landlock):
            return
        self._stop()
        failed = reply.get("failed") if reply.get("failed") == "Landlock" else "syscall filter"
        self._filter_error = (f"the worker could not install its {failed}, so no "
                              f"student code was run: {str(reply.get('error'))[:500]}")
        raise SandboxError(self._filter_error)

    def _spawn(self, *, preload_pint: bool) -> _Worker:
        # -s -P instead of -I: the environment is the runner's own (nothing of the grader's
        # leaks in), and the worker must honour its PYTHONHASHSEED so that string hashing,
        # and so a submission's set order, is the same in every grading
        command = [str(self._python.executable), "-s", "-P", "-S", "-B",
                   str(self._runtime / WORKER_SCRIPT.name)]
        environment = self._environment()
        drop: dict[str, Any] = {}
        submission_fd: int | None = None
        if self._protections.tool == "bubblewrap":  # see graders.sandbox.bubblewrap
            submission_fd = submission_descriptor(self._submission)
            command = bubblewrap_command(self._python, worker=command,
                                         folders=(self._runtime, self._definitions),
                                         submission_fd=submission_fd)
            drop = start_options(self.sandbox, submission_fd)
        elif self.sandbox is not None and self._protections.namespaces:
            # A launcher, as root, enters namespaces of its own, drops to the sandbox user
            # and execs the worker (same pid and process group, same stdin/stdout/stderr).
            command = launcher_command(self.sandbox, box=self._box, worker=command,
                                       python=self._python,
                                       folders=(self._runtime, self._definitions))
            environment = self._environment(launcher=True)
        elif self.sandbox is not None:
            drop = {"user": self.sandbox.uid, "group": self.sandbox.gid, "extra_groups": [],
                    "umask": 0o077}
        if self.portable:
            process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                cwd=self._box, env=environment, close_fds=True,
                **platform_support.new_group_options(),  # type: ignore[call-overload]
            )
            worker = self._read_in_threads(process)
            # before the worker reads its first request: nothing of the student's runs yet
            worker.containment = contain(process, self.limits.address_space_bytes)
            worker.requests = self._write_in_thread(process)
        else:
            with open(self._log_path, "ab") as log:
                process = subprocess.Popen(
                    command,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    cwd=self._box,
                    env=environment,
                    start_new_session=True,
                    close_fds=True,
                    **drop,
                )
            worker = _Worker(process)
            assert process.stdin is not None
            os.set_blocking(process.stdin.fileno(), False)  # see _write
        if submission_fd is not None:
            os.close(submission_fd)
        self._worker = worker
        self._started = True
        self._pint_ready = False
        init = {
            "op": "init",
            "submission": str(self._worker_box / SUBMISSION_NAME),
            "path": [str(self._runtime)],
            "definitions": str(self._definitions),
            "limits": self.limits.worker_limits(),
            "preload_pint": preload_pint,
            "syscall_filter": self._protections.syscall_filter,
            # the portable path has no /proc sweep: nothing may leave the worker's tree
            "no_processes": self.portable,
        }
        if self._protections.landlock:
            init["landlock"] = landlock_paths(self._python, (self._runtime, self._definitions),
                                              self._box)
        with contextlib.suppress(OSError):  # a worker that died at once is reported on reading
            self._send(worker, init)
        return worker

    @staticmethod
    def _write_in_thread(process: subprocess.Popen[bytes]) -> queue.Queue[bytes | None]:
        """The portable path's request pipe: written by a daemon thread from a queue, so
        that a worker that stops reading blocks that thread, never the grader (whose reply
        deadline then kills the worker, which ends the write). The thread closes the pipe
        when it takes None."""
        requests: queue.Queue[bytes | None] = queue.Queue()
        stream = process.stdin
        assert stream is not None

        def write_requests() -> None:
            with contextlib.suppress(Exception):
                while (line := requests.get()) is not None:
                    stream.write(line)
                    stream.flush()
            with contextlib.suppress(Exception):
                stream.close()

        threading.Thread(target=write_requests, daemon=True,
                         name="serving-grader-requests").start()
        return requests

    def _read_in_threads(self, process: subprocess.Popen[bytes]) -> _Worker:
        """The portable path's worker: its replies read into a bounded queue and its output
        into the sink, each by a daemon thread that ends when the pipe does."""
        replies: queue.Queue[bytes] = queue.Queue(
            maxsize=self.limits.max_reply_bytes // REPLY_CHUNK_BYTES + 2)
        assert process.stdout is not None
        assert process.stderr is not None
        sink = self._output

        def read_replies(stream: Any) -> None:
            with contextlib.suppress(Exception):
                while chunk := stream.read1(REPLY_CHUNK_BYTES):
                    replies.put(chunk)
            with contextlib.suppress(Exception):
                stream.close()
            replies.put(b"")

        def read_output(stream: Any) -> None:
            with contextlib.suppress(Exception):
                while chunk := stream.read1(OUTPUT_CHUNK_BYTES):
                    sink.feed(chunk)  # kept up to its bound, the rest only counted
            with contextlib.suppress(Exception):
                stream.close()

        readers = [threading.Thread(target=read_replies, args=(process.stdout,), daemon=True,
                                    name="serving-grader-replies"),
                   threading.Thread(target=read_output, args=(process.stderr,), daemon=True,
                                    name="serving-grader-output")]
        for reader in readers:
            reader.start()
        return _Worker(process, replies=replies, readers=readers)

    def _environment(self, *, launcher: bool = False) -> dict[str, str]:
        """The worker's environment; for the launcher, without what the interpreter copy
        needs (LD_LIBRARY_PATH), which the launcher adds for the worker alone."""
        if sys.platform == "win32":  # Python needs SYSTEMROOT there; TEMP is its TMPDIR
            return {
                "SYSTEMROOT": os.environ.get("SYSTEMROOT", r"C:\Windows"),
                "PATH": os.environ.get("SYSTEMROOT", r"C:\Windows") + r"\System32",
                "USERPROFILE": str(self._box),
                "TEMP": str(self._box),
                "TMP": str(self._box),
                "PYTHONHASHSEED": "0",
                "PYTHONUTF8": "1",
                TOKEN_VARIABLE: self._token,
            }
        return {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": str(self._worker_box),
            "TMPDIR": str(self._worker_box),
            "PYTHONHASHSEED": "0",
            TOKEN_VARIABLE: self._token,
            **({} if launcher else self._python.environment),
        }

    @property
    def _worker_box(self) -> Path:
        """The box as the worker sees it: in bubblewrap the same path in every grading."""
        return Path(BOX) if self._protections.tool == "bubblewrap" else self._box

    def _send(self, worker: _Worker, request: dict[str, Any]) -> None:
        self._write(worker, self._line(request))

    @staticmethod
    def _line(request: dict[str, Any]) -> bytes:
        return (json.dumps(request, allow_nan=True, separators=(",", ":")) + "\n").encode()

    @staticmethod
    def _write(worker: _Worker, line: bytes, *, flush: bool = True) -> None:
        """Queue ``line`` for the worker, never waiting: the portable path's writer thread
        writes it; on the hardened path, what the non-blocking pipe does not take now
        (or all of it, unless ``flush``) is written by :meth:`_flush_queued` or while a
        reply is awaited (:meth:`_wait_for_line`), under its deadline. Raises OSError
        once the worker has closed its end."""
        if worker.requests is not None:
            worker.requests.put(line)
            return
        worker.unsent += line
        if flush:
            _flush_requests(worker)

    @staticmethod
    def _flush_queued(worker: _Worker) -> None:
        """Write what the pipe takes now of the requests queued; a closed pipe is left for
        the reply to tell (the worker is gone)."""
        if worker.requests is None:
            with contextlib.suppress(OSError):
                _flush_requests(worker)

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
        try:
            return self._next_reply(worker, started, timeout_s, ident)
        except _WorkerGone as gone:
            self._stop()
            if function is not None:
                if gone.status == "timeout":
                    self._timeouts[function] += 1
                    self.budget.hang_spent_s += time.monotonic() - started
                elif gone.status == "crashed":
                    self._crashes[function] += 1
                elif gone.status == "garbage":
                    self._garbage[function] += 1
            raise

    def _next_reply(self, worker: _Worker, started: float, timeout_s: float,
                    ident: int | None) -> dict[str, Any]:
        while True:
            reply = parse_reply(self._read_line(worker, started, timeout_s))
            if not isinstance(reply, dict):
                break
            if ident is not None and _earlier(reply.get("id"), ident):
                continue  # a late or forged reply to an earlier request: skip it
            if reply.get("id") == ident:
                return reply
            break
        raise _WorkerGone("garbage", "the worker sent a reply to another request")

    def _read_line(self, worker: _Worker, started: float, timeout_s: float) -> bytes:
        """The next reply line, read through a buffer that never holds more than
        ``max_reply_bytes`` plus one chunk; the worker's output is drained meanwhile, so
        that a worker blocked on a full output pipe always gets to reply."""
        limit = self.limits.max_reply_bytes
        buffer = worker.buffer
        end = buffer.find(b"\n")
        if end < 0:
            end = self._wait_for_line(worker, started + timeout_s, timeout_s)
        if end > limit:
            raise _WorkerGone("garbage", self._oversize_message())
        line = bytes(buffer[:end])
        del buffer[:end + 1]
        return line

    def _wait_for_line(self, worker: _Worker, deadline: float, timeout_s: float) -> int:
        if worker.replies is not None:
            return self._wait_in_queue(worker, worker.replies, deadline, timeout_s)
        buffer = worker.buffer
        stdout = worker.process.stdout
        assert stdout is not None
        fd = stdout.fileno()
        selector = worker.selector
        if selector is None:
            selector = worker.selector = selectors.DefaultSelector()
            selector.register(fd, selectors.EVENT_READ, "reply")
            if worker.output is not None:
                selector.register(worker.output, selectors.EVENT_READ, "output")
        while True:
            remaining = self._time_left(buffer, deadline, timeout_s)
            _watch_requests(worker, selector)
            for key, _ in selector.select(min(remaining, MAX_WAIT_S)):
                if key.data == "request":
                    with contextlib.suppress(OSError):  # a closed pipe: the reply says why
                        _flush_requests(worker)
                    continue
                if key.data == "output":
                    if self._drain_once(worker) < 0:  # every writer closed it
                        selector.unregister(key.fd)
                        self._close_output(worker)
                    continue
                end = self._take_chunk(worker, os.read(fd, REPLY_CHUNK_BYTES))
                if end >= 0:
                    return end

    def _wait_in_queue(self, worker: _Worker, replies: queue.Queue[bytes], deadline: float,
                       timeout_s: float) -> int:
        """:meth:`_wait_for_line` on the portable path: reply chunks from the queue."""
        while True:
            remaining = self._time_left(worker.buffer, deadline, timeout_s)
            try:
                chunk = replies.get(timeout=min(remaining, MAX_WAIT_S))
            except queue.Empty:
                continue
            end = self._take_chunk(worker, chunk)
            if end >= 0:
                return end

    def _time_left(self, buffer: bytearray, deadline: float, timeout_s: float) -> float:
        """Seconds left to wait for a reply line; the reply fails once its buffer holds
        more than a reply may, or the deadline has passed."""
        if len(buffer) > self.limits.max_reply_bytes:
            raise _WorkerGone("garbage", self._oversize_message())
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _WorkerGone("timeout", f"timed out after {timeout_s:g} s")
        return remaining

    def _take_chunk(self, worker: _Worker, chunk: bytes) -> int:
        """Add a chunk of reply bytes to the worker's buffer; the end of the first line
        in it, or -1. An empty chunk is the end of the pipe: the worker is gone."""
        if not chunk:
            raise _WorkerGone("crashed", self._death_message(worker))
        scanned = len(worker.buffer)
        worker.buffer += chunk
        return worker.buffer.find(b"\n", scanned)

    def _oversize_message(self) -> str:
        return f"the reply exceeded {self.limits.max_reply_bytes} bytes"

    def _drain_once(self, worker: _Worker) -> int:
        """Read one chunk of the worker's output into the sink, without waiting.

        Returns the bytes read, 0 if the pipe is empty now, -1 once every writer has
        closed it (the worker closed fds 1 and 2, or died).
        """
        if worker.output is None:
            return -1
        if self._output.full and worker.discard is not None:
            # what is no longer kept is only counted: splice it away unread
            try:
                size = os.splice(worker.output, worker.discard, OUTPUT_CHUNK_BYTES)
            except BlockingIOError:
                return 0
            except OSError:  # no splice here: read it instead
                os.close(worker.discard)
                worker.discard = None
            else:
                self._output.count(size)
                return size if size else -1
        try:
            chunk = os.read(worker.output, OUTPUT_CHUNK_BYTES)
        except BlockingIOError:
            return 0
        except OSError:
            return -1
        if not chunk:
            return -1
        self._output.feed(chunk)
        return len(chunk)

    def _drain(self, worker: _Worker | None, limit: int) -> None:
        """Read what the worker's output pipe holds now, up to ``limit`` bytes."""
        read = 0
        while worker is not None and read < limit:
            size = self._drain_once(worker)
            if size < 0:
                self._close_output(worker)
            if size <= 0:
                return
            read += size

    @staticmethod
    def _close_output(worker: _Worker) -> None:
        if worker.selector is not None and worker.output is not None:
            with contextlib.suppress(KeyError, ValueError):
                worker.selector.unregister(worker.output)
        output, worker.output = worker.output, None
        discard, worker.discard = worker.discard, None
        for fd in (output, discard):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _death_message(self, worker: _Worker) -> str:
        if worker.containment is not None and worker.containment.reason:
            return f"the worker was stopped: {worker.containment.reason}"
        try:
            code = worker.process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return "the worker closed its output"
        if code > 128 and self._protections.tool == "bubblewrap":
            code = 128 - code  # bwrap reports a worker killed by signal N as 128 + N
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"the worker was killed by {name}"
        if code == LAUNCHER_FAILED and self._protections.namespaces:
            return (f"the worker exited with code {code}: the sandbox could not be set up "
                    "(or serving.py called os._exit with that code)")
        return f"the worker exited with code {code} (sys.exit or os._exit in serving.py?)"

    def _stop(self) -> None:
        worker, self._worker = self._worker, None
        if worker is None:
            return
        process = worker.process
        if worker.replies is not None:  # the portable path: its threads own stdout, stderr
            self._stop_portably(worker)
            return
        kill_session(process)
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        sweep(self._token)  # anything the worker left, in any process group
        self._drain(worker, IDLE_DRAIN_BYTES)  # what it wrote before it died is counted
        self._close_output(worker)
        if worker.selector is not None:
            worker.selector.close()
            worker.selector = None

    @staticmethod
    def _stop_portably(worker: _Worker) -> None:
        """Kill the worker's process tree, then give its output thread a moment to take in
        what the worker wrote before it died (a process it started in a session of its
        own may keep the pipe open: the thread is a daemon, and is left to it)."""
        process = worker.process
        if worker.containment is not None:  # first: it finds the worker's tree through it
            worker.containment.close()
        platform_support.kill_tree(process)
        if worker.requests is not None:  # its thread closes the pipe, once a write ends
            worker.requests.put(None)
        try:
            process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            process.kill()
        for reader in worker.readers[1:]:
            reader.join(OUTPUT_JOIN_S)


def _flush_requests(worker: _Worker) -> None:
    """Write as much of the worker's unsent requests as its pipe takes now."""
    assert worker.process.stdin is not None
    fd = worker.process.stdin.fileno()
    unsent = worker.unsent
    while unsent:
        try:
            written = os.write(fd, unsent)
        except BlockingIOError:
            return
        except OSError:
            unsent.clear()  # the worker closed its end: nothing it could still read
            raise
        del unsent[:written]


def _watch_requests(worker: _Worker, selector: selectors.BaseSelector) -> None:
    """Have ``selector`` wait for room in the request pipe exactly while requests wait."""
    assert worker.process.stdin is not None
    fd = worker.process.stdin.fileno()
    try:
        selector.get_key(fd)
        watched = True
    except KeyError:
        watched = False
    if worker.unsent and not watched:
        selector.register(fd, selectors.EVENT_WRITE, "request")
    elif watched and not worker.unsent:
        selector.unregister(fd)


def parse_reply(raw: bytes) -> Any:
    """One reply line as JSON data; :class:`_WorkerGone` ("garbage") for any line that is
    not JSON of at most :data:`MAX_REPLY_DEPTH` levels, whatever makes it unreadable (bad
    bytes, bad syntax, a nesting deep enough to exhaust the parser's recursion, memory)."""
    if _nesting_exceeds(raw, MAX_REPLY_DEPTH):
        raise _WorkerGone("garbage", f"the worker sent a reply nested deeper than "
                          f"{MAX_REPLY_DEPTH} levels")
    try:
        return json.loads(raw)
    except Exception:  # noqa: BLE001 - no reply may break the grader: this call fails alone
        raise _WorkerGone("garbage", "the worker sent a reply that is not JSON") from None


def _nesting_exceeds(raw: bytes, limit: int) -> bool:
    """Whether the brackets of ``raw``, outside its strings, nest deeper than ``limit``
    (or do not pair up, which no JSON does), checked at C speed before the parser, which
    recurses once per level: innermost pairs are removed, once per level."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    brackets = _JSON_STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    for _ in range(limit):
        if not brackets:
            return False
        brackets = brackets.replace(b"[]", b"").replace(b"{}", b"")
    return bool(brackets)


#: A JSON string, escapes included (what the bracket count leaves out).
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
#: Every byte but the four brackets (deleted before their nesting is measured).
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"[]{}")


def budget_message(budget_s: float) -> str:
    """Why a call is refused once the total time budget is spent."""
    return (f"time budget exhausted: the submission's calls, imports and worker restarts "
            f"have used the {budget_s:g} s that one grading allows them; this call was not run")


def _earlier(reply_id: Any, ident: int) -> bool:
    """Whether ``reply_id`` names a request before ``ident``."""
    return isinstance(reply_id, int) and not isinstance(reply_id, bool) and reply_id < ident


def _import_message(gone: _WorkerGone) -> str:
    if gone.status == "timeout":
        return "serving.py could not be imported: importing it took longer than the deadline"
    return f"serving.py could not be imported: {gone.message}"
