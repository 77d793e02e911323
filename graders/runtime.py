"""The worker's runtime folder: the worker script and pint with its dependencies, nothing else.

The worker runs with ``-I -S``, so it sees the standard library and this folder
only: neither the grader, nor ``reference/``, nor the rest of site-packages.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import shutil
from pathlib import Path

WORKER_SCRIPT = Path(__file__).with_name("worker_main.py")
#: The distributions the worker may import, with their install-time dependencies.
WORKER_DISTRIBUTIONS = ("pint",)
_IGNORED = shutil.ignore_patterns("testsuite", "tests", "*.dist-info")


def _requirement_name(requirement: str) -> str | None:
    """The distribution a requirement names, or ``None`` when it only applies to an extra."""
    if "extra" in requirement.partition(";")[2]:
        return None
    match = re.match(r"[A-Za-z0-9._-]+", requirement.strip())
    return match.group(0) if match else None


def _distribution_closure(roots: tuple[str, ...]) -> list[importlib.metadata.Distribution]:
    """The installed distributions ``roots`` need, found through their metadata."""
    seen: dict[str, importlib.metadata.Distribution] = {}
    pending = list(roots)
    while pending:
        name = pending.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        seen[key] = dist
        for requirement in dist.requires or ():
            dependency = _requirement_name(requirement)
            if dependency:
                pending.append(dependency)
    return list(seen.values())


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


def prepare_runtime(destination: Path) -> Path:
    """Copy the worker script and pint's installed closure into ``destination``."""
    destination.mkdir(parents=True, exist_ok=True)
    shutil.copy2(WORKER_SCRIPT, destination / WORKER_SCRIPT.name)
    for dist in _distribution_closure(WORKER_DISTRIBUTIONS):
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
