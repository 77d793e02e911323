"""``python -m graders`` and the ``graders`` console script: what runs first.

``graders grade`` holds SIGTERM and SIGINT (:func:`graders.sandbox.interrupts.held_signals`)
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


def console_main() -> int:
    """Run the ``graders`` command line in a process that ends after it."""
    holding = len(sys.argv) > 1 and sys.argv[1] == "grade"
    if holding:
        import gc

        gc.disable()  # from the start: see graders.cli.grade.collect_no_garbage
        from graders.sandbox.interrupts import held_signals

        held: contextlib.AbstractContextManager[None] = held_signals()
    else:
        held = contextlib.nullcontext()
    with held:
        from graders.cli import console_main as command_line

        return command_line()


if __name__ == "__main__":
    raise SystemExit(console_main())
