"""The worker's runtime folder (the worker script, its syscall filter and Landlock rules,
pint with its dependencies), and pint's parsed definitions for worker and grader: each
built once and reused."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from graders.errors import GraderError
from graders.sandbox import platforms as platform_support
from graders.sandbox.cleanup import cache_folder as cache_folder  # reality.store's too
from graders.sandbox.cleanup import remove_tree
from graders.units import build_definitions_cache
from graders.versions import distribution_closure

WORKER_SCRIPT = Path(__file__).with_name("worker_main.py")
#: The worker's syscall filter and Landlock rules, imported from its runtime folder.
FILTER_MODULE = Path(__file__).with_name("syscall_filter.py")
LANDLOCK_MODULE = Path(__file__).with_name("landlock.py")
#: The distributions the worker may import, with their install-time dependencies.
WORKER_DISTRIBUTIONS = ("pint",)
_IGNORED = shutil.ignore_patterns("testsuite", "tests", "*.dist-info")
COMPLETE_MARKER = ".complete"


def _top_level_modules(dist: importlib.metadata.Distribution) -> set[str]:
    names = set((dist.read_text("top_level.txt") or "").split())
    for file in dist.files or ():
        parts = Path(str(file)).parts
        # a package's folder, or a module's file (not the metadata's, nor outside)
        top = parts[0] if len(parts) > 1 else parts[0][:-3] if str(file).endswith(".py") else ""
        if not top.endswith((".dist-info", ".egg-info")) and top != "..":
            names.add(top)
    return {name for name in names if name.isidentifier()}


def _copy_bytecode(source: Path, destination: Path) -> None:
    """Copy a single-file module's cached bytecode, so the worker need not compile it."""
    cached = Path(importlib.util.cache_from_source(str(source)))
    if cached.is_file():
        (destination / "__pycache__").mkdir(exist_ok=True)
        shutil.copy2(cached, destination / "__pycache__" / cached.name)


def _copy_metadata(dist: importlib.metadata.Distribution, destination: Path) -> None:
    """Copy a distribution's ``.dist-info`` files: pint reads its version from them, and
    the definitions cache is keyed by that version (so grader and worker share it)."""
    for file in dist.files or ():
        parts = Path(str(file)).parts
        if len(parts) == 2 and parts[0].endswith(".dist-info"):
            target = destination.joinpath(*parts)
            target.parent.mkdir(exist_ok=True)
            shutil.copy2(Path(str(dist.locate_file(file))), target)


def _pint_package() -> Path:
    """The folder of the pint package this process imports."""
    spec = importlib.util.find_spec("pint")
    if spec is None or spec.origin is None:
        raise GraderError("pint is not installed; install the grader with its dependencies")
    return Path(spec.origin).parent


def _manifest(folder: Path) -> str:
    """One line per file below ``folder``: its relative path and SHA-256."""
    lines = []
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.name != COMPLETE_MARKER:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            lines.append(f"{path.relative_to(folder)} {digest}")
    return "\n".join(lines) + "\n"


def is_trusted(folder: Path) -> bool:
    """A complete folder owned by this user whose files match its manifest: an
    unconfined worker cannot leave a tampered one for later gradings."""
    try:
        info = folder.lstat()
        return stat.S_ISDIR(info.st_mode) and platform_support.owned_by_me(info.st_uid) \
            and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) \
            and (folder / COMPLETE_MARKER).read_text(encoding="utf-8") == _manifest(folder)
    except OSError:
        return False


def cached_runtime(private_parent: Path) -> Path:
    """The runtime folder for this Python and these packages (:func:`cached_folder`), keyed
    by Python, the worker script, this recipe (this file) and the packages beside pint."""
    packages = _pint_package().parent
    digest = hashlib.sha256(sys.version.encode())
    for source in (WORKER_SCRIPT, FILTER_MODULE, LANDLOCK_MODULE, Path(__file__)):
        digest.update(source.read_bytes())
    digest.update(f"{packages}:{packages.stat().st_mtime_ns}".encode())
    return cached_folder("runtime", digest.hexdigest()[:20], prepare_runtime, private_parent)


def worker_definitions(runtime: Path, private_parent: Path) -> Path:
    """pint's parsed definitions for the pint copy in ``runtime`` (pint's cache keeps the
    definition files' paths), written by a Python that imports pint from there."""
    def build(staging: Path) -> None:
        code = ("import sys; sys.path[:0] = [sys.argv[1]]; import pint; "
                "pint.UnitRegistry(cache_folder=sys.argv[2])")
        subprocess.run([sys.executable, "-I", "-S", "-B", "-c", code, str(runtime),
                        str(staging)], check=True, capture_output=True, timeout=120)

    key = hashlib.sha256(f"{runtime}:{runtime.stat().st_mtime_ns}".encode()).hexdigest()[:20]
    return cached_folder("units", key, build, private_parent)


def grader_definitions(private_parent: Path) -> Path:
    """pint's parsed definitions as this process's pint reads them."""
    package = _pint_package()
    key = hashlib.sha256(f"{sys.version}:{package}:{package.stat().st_mtime_ns}".encode())
    return cached_folder("grader-units", key.hexdigest()[:20], build_definitions_cache,
                         private_parent)


def cached_folder(kind: str, key: str, build: Callable[[Path], object],
                  private_parent: Path) -> Path:
    """A folder ``build`` fills, built aside and renamed into the cache folder under ``kind``
    and ``key``, reused while trusted; else a private one in ``private_parent``, for this run."""
    shared = cache_folder() or private_parent  # one place whatever TMPDIR is (cleanup.py)
    folder = cached_path(shared, kind, key)
    if is_trusted(folder):
        return folder
    if os.path.lexists(folder):  # tampered or foreign: build a private one for this run
        folder = private_parent / kind
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        build(staging)
        open_to_others(staging)
        (staging / COMPLETE_MARKER).write_text(_manifest(staging), encoding="utf-8")
    except BaseException:
        remove_tree(staging)
        raise
    return publish_folder(staging, folder, is_trusted)


def cached_path(shared: Path, kind: str, key: str) -> Path:
    uid = platform_support.effective_uid()
    return shared / f"serving-grader-{kind}-{'' if uid is None else uid}-{key}"


def open_to_others(root: Path) -> None:
    """Make a folder tree readable (and its folders and programs runnable) by everyone."""
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() or path.stat().st_mode & stat.S_IXUSR else 0o644)


def publish_folder(staging: Path, folder: Path, trusted: Callable[[Path], bool]) -> Path:
    """Rename ``staging`` to ``folder``: the one to use (after a lost race the winner's
    when ``trusted``, else ``staging``)."""
    try:
        os.rename(staging, folder)
    except OSError:
        if trusted(folder):
            remove_tree(staging)
            return folder
        return staging
    return folder


def prepare_runtime(destination: Path) -> Path:
    """Copy the worker script, its two layers and pint's closure into ``destination``."""
    destination.mkdir(parents=True, exist_ok=True)
    shutil.copy2(WORKER_SCRIPT, destination / WORKER_SCRIPT.name)
    for layer in (FILTER_MODULE, LANDLOCK_MODULE):
        shutil.copy2(layer, destination / layer.name)
        _copy_bytecode(layer, destination)
    for dist in distribution_closure(WORKER_DISTRIBUTIONS):
        _copy_metadata(dist, destination)
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
