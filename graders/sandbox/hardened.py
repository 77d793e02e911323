"""The hardened transport: a worker in a session of its own, read through one selector.
Requests go into a non-blocking pipe, the output FIFO is drained while a reply is awaited
(past the kept part, spliced away unread), and a stop kills the session and sweeps /proc."""

from __future__ import annotations

import contextlib
import os
import selectors

from graders.sandbox import platforms as platform_support
from graders.sandbox.cleanup import kill_session
from graders.sandbox.limits import Limits
from graders.sandbox.output import OutputSink
from graders.sandbox.privileges import sweep
from graders.sandbox.worker_command import OUTPUT_CHUNK_BYTES, REPLY_CHUNK_BYTES, WorkerCommand

#: The most output one drain between calls reads: a worker cannot hold the grader there.
IDLE_DRAIN_BYTES = 4 * OUTPUT_CHUNK_BYTES


class HardenedTransport:
    """A worker in a session of its own, its output a FIFO read while it is awaited."""

    stop_reason: str | None = None  # it has no bound that stops the worker itself

    def __init__(self, command: WorkerCommand, sink: OutputSink, limits: Limits) -> None:
        self._sink, self._token = sink, command.token
        # The worker's fds 1 and 2 are a FIFO beside its box, its read end opened first
        # (non-blocking: neither open waits), its name removed once the worker holds it.
        fifo = command.cwd.with_name("worker.output")
        fifo.unlink(missing_ok=True)
        os.mkfifo(fifo, 0o600)
        try:
            output = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            fcntl = platform_support.optional_module("fcntl")
            with contextlib.suppress(OSError, AttributeError):  # a larger pipe: fewer reads
                fcntl.fcntl(output, fcntl.F_SETPIPE_SZ, OUTPUT_CHUNK_BYTES)  # type: ignore[union-attr]
            try:
                with open(fifo, "ab") as log:
                    self.process = command.popen(stderr=log, start_new_session=True,
                                                 **command.drop)
            except BaseException:
                os.close(output)
                raise
        finally:
            fifo.unlink(missing_ok=True)
        #: The read end of the output pipe; None once every writer has closed it.
        self._output: int | None = output
        #: /dev/null, where output past the kept part is spliced without being read.
        self._discard: int | None = None
        with contextlib.suppress(OSError):
            self._discard = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None
        assert stdout is not None
        self._requests, self._replies = stdin.fileno(), stdout.fileno()
        os.set_blocking(self._requests, False)
        #: Request bytes the pipe has not taken yet.
        self._unsent = bytearray()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._replies, selectors.EVENT_READ, "reply")
        self._selector.register(self._output, selectors.EVENT_READ, "output")

    def send(self, line: bytes, *, flush: bool = True) -> None:
        self._unsent += line
        if flush:
            self._write()

    def flush(self) -> None:
        with contextlib.suppress(OSError):
            self._write()

    def _write(self) -> None:
        """Write as much of the unsent requests as the pipe takes now."""
        unsent = self._unsent
        while unsent:
            try:
                written = os.write(self._requests, unsent)
            except BlockingIOError:
                return
            except OSError:
                unsent.clear()  # the worker closed its end: nothing it could still read
                raise
            del unsent[:written]

    def receive(self, wait_s: float) -> bytes | None:
        # the selector waits for room in the request pipe exactly while requests wait
        watched = self._requests in self._selector.get_map()
        if self._unsent and not watched:
            self._selector.register(self._requests, selectors.EVENT_WRITE, "request")
        elif watched and not self._unsent:
            self._selector.unregister(self._requests)
        for key, _ in self._selector.select(wait_s):
            if key.data == "request":
                self.flush()
            elif key.data == "output":
                if self._drain_once() < 0:  # every writer closed it
                    self._close_output()
            else:
                return os.read(self._replies, REPLY_CHUNK_BYTES)
        return None

    def _drain_once(self) -> int:
        """Read a chunk of output into the sink now: its size, 0 if none, -1 at the end."""
        if self._output is None:
            return -1
        if self._sink.full and self._discard is not None:
            # what is no longer kept is only counted: splice it away unread
            try:
                size = os.splice(self._output, self._discard, OUTPUT_CHUNK_BYTES)
            except BlockingIOError:
                return 0
            except OSError:  # no splice here: read it instead
                os.close(self._discard)
                self._discard = None
            else:
                self._sink.count(size)
                return size if size else -1
        try:
            chunk = os.read(self._output, OUTPUT_CHUNK_BYTES)
        except BlockingIOError:
            return 0
        except OSError:
            return -1
        if not chunk:
            return -1
        self._sink.feed(chunk)
        return len(chunk)

    def drain(self) -> None:
        read = 0
        while read < IDLE_DRAIN_BYTES:
            size = self._drain_once()
            if size < 0:
                self._close_output()
            if size <= 0:
                return
            read += size

    def _close_output(self) -> None:
        if self._output is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(self._output)
        for fd in (self._output, self._discard):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._output = self._discard = None

    def stop(self) -> None:
        kill_session(self.process)  # its pipes closed too
        sweep(self._token)  # anything the worker left, in any process group
        self.drain()  # what it wrote before it died is counted
        self._close_output()
        self._selector.close()
