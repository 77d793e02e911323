"""A grading process's exit, without the garbage collection of its heap.

When the interpreter exits, it collects the garbage of the whole heap (pytest's, pint's,
the tracks'): about 30 to 50 ms of a student's plain ``pytest``, after the score is
printed. By then a grading has written its results and stopped its workers, so nothing
is left to finalize: the heap is frozen first (``gc.freeze``), and the collection skips
it. Only at the exit: a long-lived process that
runs many gradings (``pytest.main`` again and again) collects as usual until it ends.
"""

from __future__ import annotations

import atexit
import gc


def freeze_heap_at_exit() -> None:
    """Have the heap frozen when the interpreter exits (once, however often called)."""
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
