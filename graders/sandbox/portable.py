"""The portable transport, where the hardened one cannot run: plain pipes, each served by
a daemon thread (a worker that stops reading blocks that thread, never the grader); a stop
kills the worker's process tree."""

from __future__ import annotations

import contextlib
import queue
import subprocess
import threading
from collections.abc import Callable
from typing import Any

from graders.sandbox import platforms as platform_support
from graders.sandbox.containment import contain
from graders.sandbox.limits import Limits
from graders.sandbox.output import OutputSink
from graders.sandbox.transport import OUTPUT_CHUNK_BYTES, REPLY_CHUNK_BYTES, WorkerCommand

#: Seconds a stop waits for the output thread to take in what the killed worker wrote.
OUTPUT_JOIN_S = 1.0


class PortableTransport:
    """A worker at the head of a process tree, its pipes served by threads."""

    def __init__(self, command: WorkerCommand, sink: OutputSink, limits: Limits) -> None:
        self.process = command.popen(stderr=subprocess.PIPE,
                                     **platform_support.new_group_options())
        #: Reply chunks (b"" at the end); bounded, so that a worker that writes without end
        #: blocks its thread instead of filling memory.
        self._replies: queue.Queue[bytes] = queue.Queue(
            maxsize=limits.max_reply_bytes // REPLY_CHUNK_BYTES + 2)
        _thread("replies", _pump, self.process.stdout, REPLY_CHUNK_BYTES, self._replies.put,
                b"")
        self._output = _thread("output", _pump, self.process.stderr, OUTPUT_CHUNK_BYTES,
                               sink.feed, None)
        # before the worker reads its first request: nothing of the student's runs yet
        self._containment = contain(self.process, limits.address_space_bytes)
        #: Requests for the writer thread (None: stop and close the pipe).
        self._requests: queue.Queue[bytes | None] = queue.Queue()
        _thread("requests", self._write_requests)

    @property
    def stop_reason(self) -> str | None:
        return self._containment.reason if self._containment is not None else None

    def send(self, line: bytes, *, flush: bool = True) -> None:
        self._requests.put(line)

    def flush(self) -> None:
        """Nothing to do: the writer thread writes every request as it comes."""

    def _write_requests(self) -> None:
        stream = self.process.stdin
        assert stream is not None
        with contextlib.suppress(Exception):
            while (line := self._requests.get()) is not None:
                stream.write(line)
                stream.flush()
        with contextlib.suppress(Exception):
            stream.close()

    def receive(self, wait_s: float) -> bytes | None:
        try:
            return self._replies.get(timeout=wait_s)
        except queue.Empty:
            return None

    def drain(self) -> None:
        """Nothing to do: the output thread drains the output as it comes."""

    def stop(self) -> None:
        """Kill the worker's process tree, then give the output thread a moment to take in
        what it wrote (a process left in a session of its own may keep the pipe open)."""
        if self._containment is not None:  # first: it finds the worker's tree through it
            self._containment.close()
        platform_support.kill_tree(self.process)
        self._requests.put(None)  # its thread closes the pipe, once a write ends
        try:
            self.process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self._output.join(OUTPUT_JOIN_S)


def _pump(stream: Any, size: int, take: Callable[[bytes], object], end: bytes | None) -> None:
    """Pass ``stream``'s chunks to ``take`` until it ends, then close it and pass ``end``."""
    with contextlib.suppress(Exception):
        while chunk := stream.read1(size):
            take(chunk)
    with contextlib.suppress(Exception):
        stream.close()
    if end is not None:
        take(end)


def _thread(name: str, target: Callable[..., None], *args: object) -> threading.Thread:
    """A daemon thread of this transport, started."""
    thread = threading.Thread(target=target, args=args, daemon=True,
                              name=f"serving-grader-{name}")
    thread.start()
    return thread
