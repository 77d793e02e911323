"""SIGTERM and SIGINT during a grading: an interrupt that cleans up, never a half clean-up.

:func:`interruptible` turns the first into :class:`GradingInterrupted` (a KeyboardInterrupt:
pytest ends the run as for Ctrl-C) and ignores later ones; :func:`deferred_signals` holds it
back through a clean-up that must finish. Both work in the Python handler (main thread)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

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
    return Interruption().name(error)


class Interruption:
    """The signal that interrupted a block, once one has. (A plain class: ``graders grade``
    imports this module first thing, before dataclasses and what it imports.)"""

    def __init__(self, signal_number: int | None = None) -> None:
        self.signal_number = signal_number

    def number(self, error: BaseException) -> int:
        """The signal received, else ``error``'s (SIGINT for a plain KeyboardInterrupt)."""
        if self.signal_number is not None:
            return self.signal_number
        return error.signal_number if isinstance(error, GradingInterrupted) else signal.SIGINT

    def exit_code(self, error: BaseException) -> int:
        return 128 + self.number(error)

    def name(self, error: BaseException) -> str:
        return signal_name(self.number(error))


def handle(handler: Any) -> dict[int, Any]:
    """Install ``handler`` for :data:`INTERRUPTING`; the handlers it replaced."""
    previous = {number: signal.getsignal(number) for number in INTERRUPTING}
    for number in INTERRUPTING:
        signal.signal(number, handler)
    return previous


def restore(previous: dict[int, Any]) -> None:
    for number, before in previous.items():
        signal.signal(number, before if before is not None else signal.SIG_DFL)


def main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


class _Interrupt:
    """The handler :func:`interruptible` installs: it raises :class:`GradingInterrupted`
    on the first signal, or, within :func:`deferred_signals`, when the clean-up ends."""

    def __init__(self, received: Interruption) -> None:
        self.received = received
        self.deferring = 0
        self.previous_hook = sys.unraisablehook
        #: Whether its block still runs (a signal sent again after it would kill); the signal
        #: of an interrupt Python could not propagate (0: none), sent again every millisecond
        #: until raised; whether :meth:`unraisable` runs (a signal raised in it is lost).
        self.active, self.swallowed, self.in_hook = True, 0, False
        self.lock = threading.Lock()

    def __call__(self, number: int, frame: FrameType | None) -> None:
        if self.in_hook:  # raised in the hook it would be lost: it is sent again
            return
        self.swallowed = 0
        handle(signal.SIG_IGN)  # later signals are ignored: the clean-up must finish
        self.received.signal_number = number
        self.raise_pending()

    def raise_pending(self) -> None:
        if not self.deferring and self.received.signal_number is not None:
            raise GradingInterrupted(self.received.signal_number)

    def unraisable(self, unraisable: Any) -> None:
        """``sys.unraisablehook`` within the block: an interrupt raised where Python cannot
        propagate it (a weakref callback, a ``__del__``) is raised again, by the same
        signal, at the main thread's next chance; anything else goes to the previous hook."""
        error = unraisable.exc_value
        if not (isinstance(error, GradingInterrupted) and main_thread()):
            self.previous_hook(unraisable)
            return
        self.in_hook = True
        try:
            signal.signal(error.signal_number, self)
            sending, self.swallowed = bool(self.swallowed), error.signal_number
            if not sending:  # set first: the thread ends once it reads 0
                threading.Thread(target=self._again, args=(error.signal_number,),
                                 daemon=True, name="serving-grader-interrupt").start()
        finally:
            self.in_hook = False

    def _again(self, number: int) -> None:
        """Send ``number`` every millisecond while swallowed and the block runs (locked)."""
        while True:
            time.sleep(0.001)
            with self.lock:
                if not (self.active and self.swallowed):
                    return
                os.kill(os.getpid(), number)


@contextlib.contextmanager
def interruptible() -> Iterator[Interruption]:
    """Within: SIGTERM and SIGINT raise :class:`GradingInterrupted`, once (one a start-up
    handler held, in its ``held_signal``, on entry); later ones are ignored until the block
    ends, then the previous handlers are back. Yields the :class:`Interruption` recording
    the signal. Outside the main thread this only yields."""
    received = Interruption()
    if not main_thread():
        yield received
        return
    handler = _Interrupt(received)
    previous = handle(handler)
    sys.unraisablehook = handler.unraisable
    held = [number for before in previous.values()
            if (number := getattr(before, "held_signal", None)) is not None]
    try:
        if held:
            handler(held[0], None)  # raises it, and ignores any later signal
        yield received
        if handler.swallowed:  # not raised again before the block ended: now, then
            raise GradingInterrupted(handler.swallowed)
    finally:
        with handler.lock:
            handler.active = False
        sys.unraisablehook = handler.previous_hook
        restore(previous)


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """Within :func:`interruptible`, hold an interrupt back through a clean-up that must not
    stop half way, to the (outermost) block's end; elsewhere, nothing."""
    handler = signal.getsignal(INTERRUPTING[0]) if INTERRUPTING else None
    if not isinstance(handler, _Interrupt) or not main_thread():
        yield
        return
    handler.deferring += 1
    try:
        yield
    finally:
        handler.deferring -= 1
    handler.raise_pending()
