"""SIGTERM and SIGINT during a grading: an interrupt that cleans up, never a half clean-up.

:func:`interruptible` turns the first SIGTERM or SIGINT into :class:`GradingInterrupted` (a
``KeyboardInterrupt``, so pytest ends the run as it does for Ctrl-C and its hooks still run)
and ignores any later one until the grading is over, so that stopping the workers and
removing their folders is never cut short. :func:`deferred_signals` holds both signals back
through a clean-up that must finish (a folder made and not yet owned by anything that
removes it, a tree half removed); they are delivered when it ends. Where signals cannot be
blocked (Windows), it does nothing.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType

#: The signals that interrupt a grading.
INTERRUPTING = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGINT")
                     if hasattr(signal, name))


class GradingInterrupted(KeyboardInterrupt):
    """The grading was stopped by a signal: workers stop, folders go, no score is given."""

    def __init__(self, signal_number: int) -> None:
        self.signal_number = signal_number
        self.signal_name = signal_name(signal_number)
        super().__init__(f"interrupted by {self.signal_name}")

    @property
    def exit_code(self) -> int:
        """The shell's convention for a process ended by the signal: 128 + its number."""
        return 128 + self.signal_number


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def interrupted_by(error: BaseException) -> str:
    """The signal's name for an interrupt (``SIGINT`` for a plain KeyboardInterrupt)."""
    return error.signal_name if isinstance(error, GradingInterrupted) else "SIGINT"


@dataclass
class Interruption:
    """The signal that interrupted a block, once one has."""

    signal_number: int | None = None

    def exit_code(self, error: BaseException) -> int:
        """128 + the signal's number: the one received, else ``error``'s (SIGINT for a
        plain KeyboardInterrupt)."""
        if self.signal_number is not None:
            return 128 + self.signal_number
        if isinstance(error, GradingInterrupted):
            return error.exit_code
        return 128 + signal.SIGINT

    def name(self, error: BaseException) -> str:
        return signal_name(self.signal_number) if self.signal_number is not None else \
            interrupted_by(error)


@contextlib.contextmanager
def interruptible() -> Iterator[Interruption]:
    """Within: SIGTERM and SIGINT raise :class:`GradingInterrupted`, once; after the first,
    both are ignored until the block ends. The previous handlers are restored after it.
    Yields the :class:`Interruption` that records the signal. Only the main thread can set
    handlers: elsewhere this only yields."""
    received = Interruption()
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous = {number: signal.getsignal(number) for number in INTERRUPTING}

    def interrupt(number: int, frame: FrameType | None) -> None:
        for each in INTERRUPTING:
            signal.signal(each, signal.SIG_IGN)
        received.signal_number = number
        raise GradingInterrupted(number)

    for number in INTERRUPTING:
        signal.signal(number, interrupt)
    try:
        yield received
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler if handler is not None else signal.SIG_DFL)


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold SIGTERM and SIGINT back within the block (a clean-up that must not stop half
    way); a signal that came meanwhile is handled when the block ends."""
    block = getattr(signal, "pthread_sigmask", None)
    if block is None or not INTERRUPTING:
        yield
        return
    previous = block(signal.SIG_BLOCK, INTERRUPTING)
    try:
        yield
    finally:
        block(signal.SIG_SETMASK, previous)
