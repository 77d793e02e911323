"""A progress bar on stderr: redrawn in place on a terminal, a line now and then otherwise."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

_WIDTH = 24
#: Without a terminal, a line at every twentieth of the work, and at least this often.
_LINE_EVERY_S = 30.0


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes:02d}:{seconds:02d}"


#: A finished grading's status that still gave a score: 0 points, no grading.
REJECTED = "rejected"


class Progress:
    """Counts of a batch (done, up to date, rejected, not graded) with elapsed time and an
    ETA, in the words of the regrade's summary: ``rejected`` (no usable serving.py, 0
    points) and ``not graded`` (no score: the grader failed or ran out of time)."""

    def __init__(self, total: int, stream: TextIO, *, skipped: int = 0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.skipped = skipped
        self.done = skipped
        self.rejected = 0
        self.not_graded = 0
        self._stream = stream
        self._clock = clock
        self._started = clock()
        self._tty = stream.isatty()
        self._last_line = self._started
        self._last_step = -1

    def line(self) -> str:
        """The bar and its counts, e.g.
        ``[#####.....] 12/100, 1 rejected, 0 not graded, 00:42 elapsed, ETA 05:10``."""
        filled = _WIDTH * self.done // self.total if self.total else _WIDTH
        elapsed = self._clock() - self._started
        graded = self.done - self.skipped
        remaining = self.total - self.done
        eta = _clock(elapsed / graded * remaining) if graded and remaining else "--:--"
        parts = [f"[{'#' * filled}{'.' * (_WIDTH - filled)}] {self.done}/{self.total}"]
        if self.skipped:
            parts.append(f"{self.skipped} up to date")
        if self.rejected:
            parts.append(f"{self.rejected} rejected")
        parts += [f"{self.not_graded} not graded", f"{_clock(elapsed)} elapsed", f"ETA {eta}"]
        return ", ".join(parts)

    def advance(self, status: str | None) -> None:
        """One more submission finished, with its status (``graded``, ``rejected``, ...;
        None when the regrade could not tell: not graded)."""
        self.done += 1
        self.rejected += status == REJECTED
        self.not_graded += status not in ("graded", REJECTED)
        self.show()

    def show(self) -> None:
        """Redraw on a terminal; elsewhere, print a line at each step or after a pause."""
        if self._tty:
            self._stream.write(f"\r{self.line()}\x1b[K")
            self._stream.flush()
            return
        step = 20 * self.done // self.total if self.total else 20
        now = self._clock()
        if step != self._last_step or now - self._last_line >= _LINE_EVERY_S:
            self._last_step, self._last_line = step, now
            self._stream.write(self.line() + "\n")
            self._stream.flush()

    def close(self) -> None:
        if self._tty:
            self._stream.write(f"\r{self.line()}\x1b[K\n")
            self._stream.flush()
        elif self._last_step != 20:
            self._stream.write(self.line() + "\n")
            self._stream.flush()
