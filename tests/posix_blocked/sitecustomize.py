"""Plays a system without the POSIX-only modules and without /proc (as Windows lacks them).

Put this folder on PYTHONPATH of a grader process: it makes ``pwd``, ``grp``, ``fcntl`` and
``resource`` unimportable, points :data:`graders.sandbox.platforms.PROC` at a folder that
does not exist, and starts every student worker with the same blocker (the worker runs
with ``-S``, so it would not load this file itself).
"""

import subprocess

BLOCKED = ("pwd", "grp", "fcntl", "resource")

BLOCKER = f"""
import importlib.abc, sys
class _Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in {BLOCKED!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
for _name in {BLOCKED!r}:
    sys.modules.pop(_name, None)
sys.meta_path.insert(0, _Blocked())
"""

exec(BLOCKER)  # noqa: S102 - this process, then every worker (below)

_popen_init = subprocess.Popen.__init__


def _blocked_worker(self, args, *rest, **options):  # type: ignore[no-untyped-def]
    """Start a worker (``... worker_main.py``) with the blocker run before its script."""
    if isinstance(args, list) and args and str(args[-1]).endswith("worker_main.py"):
        script = str(args[-1])
        prelude = BLOCKER + f"\nimport runpy\nrunpy.run_path({script!r}, run_name='__main__')\n"
        args = [*args[:-1], "-c", prelude]
    _popen_init(self, args, *rest, **options)


subprocess.Popen.__init__ = _blocked_worker  # type: ignore[method-assign]

import graders.sandbox.platforms  # noqa: E402 - after the blocker, as a student's system

graders.sandbox.platforms.PROC = graders.sandbox.platforms.PROC.with_name("no-such-proc")
