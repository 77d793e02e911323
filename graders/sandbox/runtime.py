"""The worker's runtime folder: the worker script and pint with its dependencies, nothing else.

The worker runs with ``-I -S``, so it sees the standard library and this folder
only: neither the grader, nor ``reference/``, nor the rest of site-packages.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from graders.errors import GraderError
from graders.sandbox import platforms as platform_support
from graders.sandbox.cleanup import cache_folder, remove_tree
from graders.versions import distribution_closure

WORKER_SCRIPT = Path(__file__).with_name("worker_main.py")
#: The distributions the worker may import, with their install-time dependencies.
WORKER_DISTRIBUTIONS = ("pint",)
_IGNORED = shutil.ignore_patterns("testsuite", "tests", "*.dist-info")
COMPLETE_MARKER = ".complete"


def _top_level_modules(dist: importlib.metadata.Distribution) -> set[str]:
    names = set((dist.read_text("top_level.txt") or "").split())
    for file in dist.files or ():
        parts = Path(str(file)).parts
        if not parts or parts[0].endswith((".dist-info", ".egg-info")) or parts[0] == "..":
            continue
        if len(parts) == 1 and parts[0].endswith(".py"):
            names.add(parts[0][:-3])
        elif len(parts) > 1:
            names.add(parts[0])
    return {name for name in names if name.isidentifier()}


def _copy_bytecode(source: Path, destination: Path) -> None:
    """Copy a single-file module's cached bytecode, so the worker need not compile it."""
    cached = Path(importlib.util.cache_from_source(str(source)))
    if cached.is_file():
        (destination / "__pycache__").mkdir(exist_ok=True)
        shutil.copy2(cached, destination / "__pycache__" / cached.name)


def _runtime_key() -> str:
    """Changes when Python, the worker script or the packages beside pint change."""
    spec = importlib.util.find_spec("pint")
    if spec is None or spec.origin is None:
        raise GraderError("pint is not installed; install the grader with its dependencies")
    packages = Path(spec.origin).parent.parent
    digest = hashlib.sha256()
    digest.update(sys.version.encode())
    digest.update(WORKER_SCRIPT.read_bytes())
    digest.update(f"{packages}:{packages.stat().st_mtime_ns}".encode())
    return digest.hexdigest()[:20]


def _manifest(folder: Path) -> str:
    """One line per file below ``folder``: its relative path and SHA-256."""
    lines = []
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.name != COMPLETE_MARKER:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            lines.append(f"{path.relative_to(folder)} {digest}")
    return "\n".join(lines) + "\n"


def _is_trusted(folder: Path) -> bool:
    """A complete runtime folder owned by this user whose files are exactly as built.

    The contents are checked against the manifest written at build time, so a worker
    that ran as this user (without the privilege drop) cannot leave a tampered runtime
    for later gradings.
    """
    try:
        info = folder.lstat()
    except FileNotFoundError:
        return False
    if not (stat.S_ISDIR(info.st_mode) and platform_support.owned_by_me(info.st_uid)
            and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)):
        return False
    try:
        built = (folder / COMPLETE_MARKER).read_text(encoding="utf-8")
    except OSError:
        return False
    return built == _manifest(folder)


def cached_runtime(private_parent: Path) -> Path:
    """The runtime folder for this Python and these packages, built once and then reused.

    It lives in the temp folder, owned by this user and read-only to others; it is built
    in a private folder and renamed into place, so a half-built one is never used. When
    the shared folder has been tampered with (or belongs to someone else), a private one
    is built in ``private_parent`` instead, which its owner removes after the run.
    """
    shared = cache_folder() or private_parent  # one place whatever TMPDIR is (cleanup.py)
    uid = platform_support.effective_uid()
    folder = shared / f"serving-grader-runtime-{'' if uid is None else uid}-{_runtime_key()}"
    if _is_trusted(folder):
        return folder
    if os.path.lexists(folder):  # tampered or foreign: build a private one for this run
        folder = private_parent / "runtime"
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        prepare_runtime(staging)
        for path in [staging, *staging.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        (staging / COMPLETE_MARKER).write_text(_manifest(staging), encoding="utf-8")
    except BaseException:
        remove_tree(staging)
        raise
    return publish_folder(staging, folder, _is_trusted)


def publish_folder(staging: Path, folder: Path, trusted: Callable[[Path], bool]) -> Path:
    """Rename a complete ``staging`` folder to ``folder`` and return the one to use.

    If the rename fails, another grader won the race (use its folder when ``trusted``)
    or a foreign folder is in the way (use ``staging``, complete and ours, for this run).
    """
    try:
        os.rename(staging, folder)
    except OSError:
        if trusted(folder):
            remove_tree(staging)
            return folder
        return staging
    return folder


def prepare_runtime(destination: Path) -> Path:
    """Copy the worker script and pint's installed closure into ``destination``."""
    destination.mkdir(parents=True, exist_ok=True)
    shutil.copy2(WORKER_SCRIPT, destination / WORKER_SCRIPT.name)
    for dist in distribution_closure(WORKER_DISTRIBUTIONS):
        for module in sorted(_top_level_modules(dist)):
            spec = importlib.util.find_spec(module)
            if spec is None or spec.origin is None:
                continue
            origin = Path(spec.origin)
            if spec.submodule_search_locations:
                shutil.copytree(origin.parent, destination / module, ignore=_IGNORED,
                                dirs_exist_ok=True)
            elif origin.suffix == ".py":
                shutil.copy2(origin, destination / origin.name)
                _copy_bytecode(origin, destination)
    return destination
