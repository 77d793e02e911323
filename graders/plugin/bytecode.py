"""The grader's own bytecode, written after a grading where Python may not write it.

An editable install (the student bundle's ``pip install -e .``) leaves ``graders/``
uncompiled, and where ``PYTHONDONTWRITEBYTECODE`` is set (as on many machines and CI
images) Python then compiles every grader module again at every run: about 50 ms of a
grading. So, after a grading, the modules of this package that it imported and whose
bytecode is missing or older than their source get it, as ``tasks.py`` compiles the
course's install; the next run reads it. Only ``__pycache__`` folders of the grader's
own package are written (the student bundle's ``.gitignore`` ignores them), never
beside ``serving.py``, each file with its source's permissions (as Python writes its
own: a source only its owner may read gives bytecode only its owner may read); where
the package cannot be written, nothing is.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

PACKAGE = __name__.partition(".")[0]


def stale_bytecode(package: str = PACKAGE) -> list[tuple[Path, Path]]:
    """(source, bytecode file) of each imported module of ``package`` whose bytecode is
    missing or older than its source."""
    stale = []
    for name, module in list(sys.modules.items()):
        if name != package and not name.startswith(f"{package}."):
            continue
        spec = getattr(module, "__spec__", None)
        if spec is None or not spec.has_location or not spec.cached \
                or not str(spec.origin).endswith(".py"):
            continue
        source, cached = Path(spec.origin), Path(spec.cached)
        try:
            source_time = source.stat().st_mtime
        except OSError:
            continue
        try:
            if cached.stat().st_mtime >= source_time:
                continue
        except OSError:
            pass
        stale.append((source, cached))
    return sorted(stale)


def write_bytecode(package: str = PACKAGE) -> None:
    """Compile :func:`stale_bytecode`'s modules where Python does not (only while
    ``sys.dont_write_bytecode``), up to the first folder it cannot write."""
    if not sys.dont_write_bytecode:  # Python wrote them as it imported them
        return
    stale = stale_bytecode(package)
    if not stale:
        return
    import py_compile

    for source, cached in stale:
        folder = cached.parent if cached.parent.is_dir() else source.parent
        if not os.access(folder, os.W_OK):
            break
        try:
            py_compile.compile(str(source), cfile=str(cached), doraise=True,
                               invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
        except (OSError, py_compile.PyCompileError):
            break
