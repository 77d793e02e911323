"""``python -m graders`` and the ``graders`` console script: what runs first.

``graders grade`` holds SIGTERM and SIGINT (:func:`held_signals`)
before it imports anything slow (the command line imports pytest, about 0.4 s): a signal
in those first moments then ends the grading as any interrupt does (its exit code, one
line, an interrupted record at --results, never an earlier run's results), instead of
killing the process with the earlier results left in place, or a KeyboardInterrupt
traceback. It also turns automatic garbage collection off before those imports, whose
collections are a grading's too (:func:`graders.cli.grade.collect_no_garbage`). Every
other command starts as before.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from types import FrameType


class _Held:
    """The handler :func:`held_signals` installs: it records the first signal, for
    :func:`graders.sandbox.interrupts.interruptible` to raise."""

    def __init__(self) -> None:
        self.held_signal: int | None = None

    def __call__(self, number: int, frame: FrameType | None) -> None:
        if self.held_signal is None:
            self.held_signal = number


@contextlib.contextmanager
def held_signals() -> Iterator[None]:
    """Within: SIGTERM and SIGINT are held, not acted on, until ``interruptible`` raises
    the first one held, where the grading can clean up; after it, the default handlers."""
    from graders.sandbox.interrupts import handle, main_thread, restore

    if not main_thread():
        yield
        return
    previous = handle(_Held())
    try:
        yield
    finally:
        restore(previous)


def console_main() -> int:
    """Run the ``graders`` command line in a process that ends after it."""
    holding = len(sys.argv) > 1 and sys.argv[1] == "grade"
    if holding:
        import gc

        gc.disable()  # from the start: see graders.cli.grade.collect_no_garbage
    with held_signals() if holding else contextlib.nullcontext():
        from graders.cli import console_main as command_line

        return command_line()


if __name__ == "__main__":
    raise SystemExit(console_main())
