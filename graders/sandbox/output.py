"""A submission's stdout and stderr: the first part kept for feedback, the rest counted,
so that output never fails a call or changes a score."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass


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
    return _human(size, 1000, ("kB", "MB", "GB", "TB", "PB"))


def binary_size(size: int) -> str:
    """``size`` bytes in binary units: 65536 -> "64 KiB", 1536 -> "1.5 KiB"."""
    return _human(size, 1024, ("KiB", "MiB", "GiB", "TiB"))


def _human(size: int, base: int, units: tuple[str, ...]) -> str:
    """``size`` bytes in the first of ``units`` that shows it under ``base``, to 3 digits."""
    if size < base:
        return f"{size} B" if size != 1 else "1 byte"
    value = float(size)
    for unit in units:
        value /= base
        text = f"{value:.0f}" if value >= 100 else f"{value:.3g}"
        if "e" not in text and float(text) < base:
            return f"{text} {unit}"
    return f"{value:.0f} {units[-1]}"
