"""Runs student calls in a separate, limited interpreter and returns plain data: one worker
serves many calls, one JSON line each; a crash, a hang or a garbage reply kills it and a
fresh one serves the next (the bounds: docs/security.md, "How student code runs")."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from graders.sandbox.box_mount import mount_box, unmount_box
from graders.sandbox.box_watch import WATCHED, BoxWatch
from graders.sandbox.budget import Strikes, TimeBudget
from graders.sandbox.calls import CallOutcome as CallOutcome  # part of the runner's interface
from graders.sandbox.calls import CallRequest as CallRequest  # part of the runner's interface
from graders.sandbox.calls import WorkerGone, earlier, parse_reply, request_line
from graders.sandbox.cleanup import remove_tree, report_problems, sweep_user
from graders.sandbox.confinement import Protections, landlock_paths, protections_for
from graders.sandbox.hardened import HardenedTransport
from graders.sandbox.interrupts import deferred_signals
from graders.sandbox.limits import MAX_WAIT_S
from graders.sandbox.limits import Limits as Limits  # part of the runner's interface
from graders.sandbox.output import OutputMark as OutputMark  # part of the runner's interface
from graders.sandbox.output import OutputSink, OutputSummary
from graders.sandbox.portable import PortableTransport
from graders.sandbox.privileges import (
    SandboxError,
    SandboxUser,
    WorkerPython,
    grading_parent,
    worker_python,
)
from graders.sandbox.runtime import cached_runtime, grader_definitions, worker_definitions
from graders.sandbox.submission import SUBMISSION_NAME, import_error_message
from graders.sandbox.wire import bounded, has_quantity
from graders.sandbox.worker_command import Transport, WorkerCommand, WorkerSetup

#: Request bytes :meth:`StudentRunner.call_many` leaves unanswered: under a pipe's 64 KiB.
PIPELINE_BYTES = 32 * 1024


@dataclass
class _Worker:
    """One worker: its transport, reply bytes not yet taken as lines, whether it is ready."""

    transport: Transport
    buffer: bytearray = field(default_factory=bytearray)
    ready: bool = False


class StudentRunner:
    """A student's ``serving.py`` behind a process boundary; use as a context manager.
    ``budget`` shares a grading's time budget with another runner (default: its own)."""

    def __init__(self, submission: bytes, *, limits: Limits | None = None,
                 root: Path | None = None, sandbox: SandboxUser | None = None,
                 budget: TimeBudget | None = None, box: Path | None = None) -> None:
        try:
            with deferred_signals():  # a folder made is a folder owned, or removed
                self._set_up(submission, limits, root, sandbox, budget, box)
        except BaseException:
            self._abandon_set_up()
            raise

    def _abandon_set_up(self) -> None:
        """Remove what a set-up that failed (or was interrupted) had made."""
        made = [self.__dict__.get("root") if self.__dict__.get("_owns_root") else None,
                self.__dict__.get("_box")]
        if self.__dict__.get("_mounted"):
            report_problems(unmount_box(self._box))
        for path in filter(None, made):
            report_problems(remove_tree(path))

    def _set_up(self, submission: bytes, limits: Limits | None, root: Path | None,
                sandbox: SandboxUser | None, budget: TimeBudget | None,
                box: Path | None) -> None:
        self.limits = limits or Limits()
        self.budget = budget if budget is not None else TimeBudget.of(self.limits)
        self.sandbox = sandbox
        self._owns_root = root is None
        self.root = root or Path(tempfile.mkdtemp(prefix="serving-grader-",
                                                  dir=grading_parent(sandbox)))
        self._runtime = cached_runtime(self.root)
        self._definitions = worker_definitions(self._runtime, self.root)
        self._grader_definitions: Path | None = None
        python = worker_python() if sandbox else WorkerPython(Path(sys.executable))
        protections = protections_for(sandbox)
        #: The portable transport, where the hardened one cannot run.
        self.portable = protections.runner == "portable"
        self._transport: Callable[[WorkerCommand, OutputSink, Limits], Transport] = \
            PortableTransport if self.portable else HardenedTransport
        #: The worker's box: in the root, or a seat's (see graders.sandbox.seats).
        self._box = box or self.root / "box"
        if box is not None:  # a new folder, never an earlier worker's: Landlock's rule for
            report_problems(remove_tree(box))  # that one held its inode, not its path
        self._box.mkdir(mode=0o700, exist_ok=box is None)
        # on the grading's disk first: a full one is said here (the mount then covers it)
        (self._box / SUBMISSION_NAME).write_bytes(submission)
        #: Whether the box is a tmpfs this runner mounted (detached on closing).
        self._mounted = False
        if protections.box_mount and sandbox is not None:
            why_not = mount_box(self._box, sandbox.uid, sandbox.gid)
            self._mounted = why_not is None
            if why_not is not None:  # today's box: a host folder (or bwrap's tmpfs)
                protections = dataclasses.replace(
                    protections, box_mount=False, description=f"{protections.description}"
                    f" (not mounted: {why_not})")
        if protections.landlock and not self._mounted:  # a host folder: bounded by a watch
            protections = dataclasses.replace(
                protections, description=f"{protections.description}; {WATCHED}")
        # bubblewrap reads serving.py from a descriptor: a mounted box is its /tmp, kept empty
        copy = not (self._mounted and protections.tool == "bubblewrap")
        if copy and self._mounted:
            (self._box / SUBMISSION_NAME).write_bytes(submission)
        if sandbox is not None:  # the sandbox user may enter the root, and own only the box
            self.root.chmod(0o711)
            for path in (self._box, self._box / SUBMISSION_NAME)[:1 + copy]:
                os.chown(path, sandbox.uid, sandbox.gid)
        self._setup = WorkerSetup(python, self._runtime, self._definitions, self._box,
                                  submission, sandbox, protections, secrets.token_hex(16))
        self._output = OutputSink(self.limits.output_keep_bytes)
        self._worker: _Worker | None = None
        self._next_id = 0
        #: Why the submission cannot be imported, once a start has failed.
        self.import_error: str | None = None
        #: Why the worker could not confine itself: raised again by every later call.
        self._filter_error: str | None = None
        self._strikes = Strikes(self.limits)
        self._pint_ready = False
        self._started = False
        self._imported = False
        self.calls = 0
        #: What bounds the box in total where it is a plain host folder (Landlock's modes).
        self._watch = BoxWatch(self._box, SUBMISSION_NAME) \
            if protections.landlock and not self._mounted else None

    def __enter__(self) -> StudentRunner:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def token(self) -> str:
        """The marker every worker process carries in its environment (for the sweep)."""
        return self._setup.token

    @property
    def grader_definitions(self) -> Path:
        """pint's parsed definitions for the grader's own registry (see graders.units)."""
        if self._grader_definitions is None:
            self._grader_definitions = grader_definitions(self.root)
        return self._grader_definitions

    @property
    def imported(self) -> bool:
        """Whether a worker has imported the submission (and no start failed since)."""
        return self._imported and self.import_error is None

    @property
    def protections(self) -> Protections:
        """Which protections the worker runs under, with a line that says so."""
        return self._setup.protections

    @property
    def time_spent_s(self) -> float:
        """Wall time the student's code has cost the grading so far (the shared budget's)."""
        return self.budget.spent_s

    def output_summary(self, since: OutputMark | None = None) -> OutputSummary:
        """What the submission has printed so far (or since ``since``), without waiting."""
        self._drain()
        return self._output.summary(since)

    def output_mark(self) -> OutputMark:
        """Where the submission's output stands now (read up to here first)."""
        self._drain()
        return self._output.mark()

    def _drain(self) -> None:
        if self._worker is not None:
            self._worker.transport.drain()

    def echo_output(self, echo: Callable[[bytes], None] | None) -> None:
        """Pass each kept chunk of output to ``echo`` as it is read (None: stop)."""
        self._output.echo = echo

    def close(self) -> None:
        """Stop the worker, remove what this run made or its worker (or its sandbox user,
        held alone) left. Never raises; problems go to stderr."""
        with deferred_signals():  # stopped half way, it would leave processes and folders
            self._close()

    def _close(self) -> None:
        problems: list[str] = []
        try:
            self._stop()
        except Exception as error:  # a clean-up must not cost the grading its results
            problems.append(f"stopping the worker: {type(error).__name__}: {error}")
        watch, self._watch = self._watch, None  # closing again is safe
        if watch is not None:
            watch.close()
        if self._mounted:  # before the sweep, which would find the box the sandbox user's
            problems += unmount_box(self._box)
            self._mounted = False
        if self.sandbox is not None and self.sandbox.exclusive:
            problems += sweep_user(self.sandbox.uid)
        private = [*([self.root] if self._owns_root else []), self._box]
        for built in (self._runtime, self._definitions, self._grader_definitions):
            if built is not None and (built.parent == self.root or built.name.startswith(".")):
                private.append(built)  # built for this run alone (see cached_folder)
        if self._setup.python.private is not None:
            private.append(self._setup.python.private)
        for path in private:
            problems += remove_tree(path)
        report_problems(problems)

    def call(self, function: str, args: Sequence[Any] = (),
             kwargs: Mapping[str, Any] | None = None,
             fields: Sequence[str] | None = None) -> CallOutcome:
        """Call ``function`` in the worker: its result as plain data, its time charged."""
        if (refusal := self._refusal(function)) is not None:
            return refusal
        self.calls += 1
        with self.budget.charged():
            try:
                worker = self._ensure_worker()
                message = CallRequest(function, args, kwargs, fields).message()
                if self._needs_pint(message):
                    self._load_pint(worker, function)
                reply = self._request(worker, message, self.limits.call_timeout_s, function)
            except WorkerGone as gone:
                return CallOutcome(gone.status, message=gone.message)
            return self._outcome(function, reply)

    @contextlib.contextmanager
    def trial(self) -> Generator[None, None, None]:
        """Calls that count against no function: a diagnosis's experiments. Their timeouts
        and crashes leave each function's strikes and the hang budget as they were (the
        caller bounds what they cost: they are still charged to the total budget)."""
        strikes, hang = self._strikes.snapshot(), self.budget.hang_spent_s
        try:
            yield
        finally:
            self._strikes.restore(strikes)
            self.budget.hang_spent_s = hang

    def call_many(self, calls: Sequence[CallRequest]) -> Generator[CallOutcome, None, None]:
        """The outcomes of ``calls`` as :meth:`call` gives them, with requests written ahead
        (at most :data:`PIPELINE_BYTES` unanswered; a submission reading them sees coming
        visible inputs, within the same deadlines and budget). Each timeout runs from when
        its reply is awaited; after a failed or refused call the rest go by :meth:`call`."""
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
                    self._worker.transport.flush()
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
        finally:  # discard the replies a caller that stopped early left: the worker is idle
            with contextlib.suppress(WorkerGone):
                for ident, _, position in pending:
                    self._answer(calls[position].function, ident)

    def _pipelined_send(self, request: CallRequest, *, idle: bool
                        ) -> tuple[int, int] | Literal["wait"] | None:
        """Write ``request``: (id, bytes), "wait" when it needs pint first and the worker
        is busy, or None when the worker cannot be reached (then :meth:`call` makes it)."""
        with self.budget.charged():
            try:
                worker = self._ensure_worker()
                message = request.message()
                if self._needs_pint(message):
                    if not idle:
                        return "wait"  # the import's reply must not overtake pending ones
                    self._load_pint(worker, request.function)
                self._next_id += 1
                line = request_line({**message, "id": self._next_id})
                worker.transport.send(line, flush=False)  # call_many writes its batch at once
            except (WorkerGone, OSError):
                return None
        self.calls += 1
        return self._next_id, len(line)

    def _pipelined_outcome(self, request: CallRequest, ident: int) -> CallOutcome:
        """The outcome of a request :meth:`_pipelined_send` wrote, as :meth:`call` gives it."""
        if (refusal := self._refusal(request.function)) is not None:  # spent meanwhile: not counted
            self._stop()
            return refusal
        try:
            reply = self._answer(request.function, ident)
        except WorkerGone as gone:
            return CallOutcome(gone.status, message=gone.message)
        return self._outcome(request.function, reply)

    def _answer(self, function: str, ident: int) -> dict[str, Any]:
        """The reply to the pipelined request ``ident``, its wait charged to the budget."""
        with self.budget.charged():
            if self._worker is None:
                raise WorkerGone("crashed", "the worker process died")
            return self._read_reply(self._worker, self.limits.call_timeout_s, function, ident)

    def _needs_pint(self, message: dict[str, Any]) -> bool:
        """Whether a call needs pint imported in the worker first (it passes quantities)."""
        return not self._pint_ready and has_quantity([message["args"], message["kwargs"]])

    def _load_pint(self, worker: _Worker, function: str) -> None:
        self._request(worker, {"op": "pint"}, self.limits.import_timeout_s, function)
        self._pint_ready = True

    def _outcome(self, function: str, reply: dict[str, Any]) -> CallOutcome:
        if reply.get("ok") is True:  # bounded here: whatever the worker sent
            return CallOutcome("ok", value=bounded(reply.get("value")))
        if reply.get("oversize") is True:  # the worker stopped building a reply too long
            self._stop()
            self._strikes.count("garbage", function)
            return CallOutcome("garbage", message=self._oversize_message())
        return CallOutcome("raised", message=str(reply.get("error", "unknown error"))[:2000])

    def _refusal(self, function: str) -> CallOutcome | None:
        if self.import_error is not None:
            return CallOutcome("unimportable", message=self.import_error)
        why = self._strikes.refusal(function) or self.budget.refusal()
        return None if why is None else CallOutcome("abandoned", message=why)

    def start(self, *, preload_pint: bool = True) -> None:
        """Start the worker, which imports the submission (and pint), without waiting."""
        if self._worker is None and self.import_error is None:
            with self.budget.charged():
                self._launch(preload_pint=preload_pint)

    def _launch(self, *, preload_pint: bool) -> _Worker:
        """Start a worker and send it its ``init`` request (read once it is started)."""
        if self._started and self.protections.tool != "bubblewrap":  # bubblewrap gets it
            self._restore_submission()  # from a descriptor; here a worker can rewrite it
        with self._setup.command() as command:
            worker = _Worker(self._transport(command, self._output, self.limits))
        self._worker = worker
        if self._watch is not None and isinstance(worker.transport,
                                                  (HardenedTransport, PortableTransport)):
            self._watch.follow(worker.transport)
        self._started = True
        self._pint_ready = False
        init = {**self._worker_init, "preload_pint": preload_pint}
        with contextlib.suppress(OSError):  # a worker that died at once is reported on reading
            worker.transport.send(request_line(init))
        return worker

    def _restore_submission(self) -> None:
        """Write serving.py into the box again (an earlier worker may have changed it)."""
        path = self._box / SUBMISSION_NAME
        self._box.chmod(0o700)  # as made: a worker of the grader's own uid may have changed it
        report_problems(remove_tree(path))
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        with os.fdopen(os.open(path, flags, 0o600), "wb") as handle:
            handle.write(self._setup.submission)
            if self._setup.sandbox is not None:
                os.fchown(handle.fileno(), self._setup.sandbox.uid, self._setup.sandbox.gid)

    @functools.cached_property
    def _worker_init(self) -> dict[str, Any]:
        """The ``init`` request, the same for every worker of this runner."""
        init = {"op": "init", "submission": str(self._setup.worker_box / SUBMISSION_NAME),
                "path": [str(self._runtime)], "definitions": str(self._definitions),
                "limits": self.limits.worker_limits(),
                "syscall_filter": self._setup.protections.syscall_filter,
                # the portable path has no /proc sweep: nothing may leave the worker's tree
                "no_processes": self.portable}
        if self._setup.protections.landlock:
            init["landlock"] = landlock_paths(
                self._setup.python, (self._runtime, self._definitions), self._box)
        return init

    def _ensure_worker(self) -> _Worker:
        if self._filter_error is not None:
            raise SandboxError(self._filter_error)
        restart = self._worker is None and self._started
        worker = self._worker or self._launch(preload_pint=False)
        if worker.ready:
            return worker
        started = time.monotonic()
        try:
            if self._setup.protections.syscall_filter or self._setup.protections.landlock:
                self._confirm_filter(worker)
            # the filter's line and the import share the import deadline
            left_s = max(self.limits.import_timeout_s - (time.monotonic() - started), 0.0)
            reply = self._read_reply(worker, left_s, None, ident=None)
        except WorkerGone as gone:
            self.import_error = "serving.py could not be imported: " + (
                "importing it took longer than the deadline" if gone.status == "timeout"
                else gone.message)
            raise WorkerGone("unimportable", self.import_error) from None
        if reply.get("ready") is not True:
            self.import_error = import_error_message(
                f"serving.py could not be imported: {str(reply.get('error'))[:2000]}")
            self._stop()
            raise WorkerGone("unimportable", self.import_error)
        worker.ready = True
        self._imported = True
        self._pint_ready = bool(reply.get("pint"))
        if restart:  # restarts only happen after a kill: they cost hanging time too
            self.budget.hang_spent_s += time.monotonic() - started
        return worker

    def _confirm_filter(self, worker: _Worker) -> None:
        """Read the worker's first line: SandboxError where it could not confine itself."""
        reply = self._read_reply(worker, self.limits.import_timeout_s, None, ident=None)
        wanted = self._setup.protections
        if (reply.get("syscall_filter"), reply.get("landlock", 0)) == \
                (wanted.syscall_filter, wanted.landlock):
            return
        self._stop()
        failed = reply.get("failed") if reply.get("failed") == "Landlock" else "syscall filter"
        self._filter_error = (f"the worker could not install its {failed}, so no "
                              f"student code was run: {str(reply.get('error'))[:500]}")
        raise SandboxError(self._filter_error)

    def _request(self, worker: _Worker, request: dict[str, Any], timeout_s: float,
                 function: str | None) -> dict[str, Any]:
        self._next_id += 1
        ident = self._next_id
        try:
            worker.transport.send(request_line({**request, "id": ident}))
        except OSError:
            self._stop()
            self._strikes.count("crashed", function)
            raise WorkerGone("crashed", "the worker process died") from None
        return self._read_reply(worker, timeout_s, function, ident)

    def _read_reply(self, worker: _Worker, timeout_s: float, function: str | None,
                    ident: int | None) -> dict[str, Any]:
        started = time.monotonic()
        try:
            while True:
                reply = parse_reply(self._read_line(worker, started + timeout_s, timeout_s))
                if earlier(reply, ident):
                    continue  # a late or forged reply to an earlier request: skip it
                if not isinstance(reply, dict) or reply.get("id") != ident:
                    raise WorkerGone("garbage", "the worker sent a reply to another request")
                return reply
        except WorkerGone as gone:
            self._stop()
            self._strikes.count(gone.status, function)
            if function is not None and gone.status == "timeout":
                self.budget.hang_spent_s += time.monotonic() - started
            raise

    def _read_line(self, worker: _Worker, deadline: float, timeout_s: float) -> bytes:
        """The next reply line; it fails past ``max_reply_bytes`` or the deadline."""
        limit = self.limits.max_reply_bytes
        buffer = worker.buffer
        scanned = 0
        while (end := buffer.find(b"\n", scanned)) < 0:
            if len(buffer) > limit:
                raise WorkerGone("garbage", self._oversize_message())
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerGone("timeout", f"timed out after {timeout_s:g} s")
            scanned = len(buffer)
            chunk = worker.transport.receive(min(remaining, MAX_WAIT_S))
            if chunk == b"":  # the end of the pipe: the worker is gone
                raise WorkerGone("crashed", self._setup.death_message(worker.transport))
            if chunk:
                buffer += chunk
        if end > limit:
            raise WorkerGone("garbage", self._oversize_message())
        line = bytes(buffer[:end])
        del buffer[:end + 1]
        return line

    def _oversize_message(self) -> str:
        return f"the reply exceeded {self.limits.max_reply_bytes} bytes"

    def _stop(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            if self._watch is not None:
                self._watch.follow(None)
            worker.transport.stop()
            if self._watch is not None:  # no file outlives its worker
                self._watch.empty()

