"""How the runner reaches a worker process: the interface of :mod:`graders.sandbox.hardened`
and :mod:`graders.sandbox.portable`, which carry the protocol's bytes and never wait past
the time they are given."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

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
