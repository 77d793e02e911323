"""What a command reads, so that no output path can overwrite it.

An output is refused, before anything is written, when it names a file the command
reads (the submission, a golden file, Gradescope's metadata), another output, or a path
inside a folder the grader reads as a whole: the tracks folder and the grader's own code
(``graders/``, ``reference/``). Files are compared by what they are (device and inode,
links followed), not by how they are spelled.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import graders
from graders.results.files import OutputPathError


def grader_folders() -> dict[str, Path]:
    """The folders of the grader's own code: ``graders/`` and, when installed, the
    reference's, each by what it is."""
    folders = {f"the grader's code ({Path(folder).name}/)": Path(folder)
               for folder in graders.__path__}
    spec = importlib.util.find_spec("reference")
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        folders[f"the grader's code ({Path(folder).name}/)"] = Path(folder)
    return folders


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _inside(path: Path, folder: Path) -> bool:
    real, container = Path(os.path.realpath(path)), Path(os.path.realpath(folder))
    return real == container or real.is_relative_to(container)


def refuse_overlaps(outputs: Mapping[str, Path], files: Mapping[str, Path],
                    folders: Mapping[str, Path]) -> None:
    """Raise :class:`OutputPathError` when an output (by flag) is one of ``files`` or
    another output, or lies in one of ``folders`` (each by what it is, for the message)."""
    seen: dict[object, str] = {}
    for flag, path in outputs.items():
        for key in (_identity(path), os.path.realpath(path)):
            if key is None:
                continue
            if key in seen:
                raise OutputPathError(f"{flag} {str(path)!r} is also the path of {seen[key]}: "
                                      "give each output a path of its own")
            seen[key] = flag
        for what, file in files.items():
            same = _identity(file)
            if (same is not None and same == _identity(path)) \
                    or os.path.realpath(file) == os.path.realpath(path):
                raise OutputPathError(f"{flag} {str(path)!r} is {what}: an output never "
                                      "overwrites what the grader reads; choose another path")
        for what, folder in folders.items():
            if _inside(path, folder):
                raise OutputPathError(f"{flag} {str(path)!r} is in {what} "
                                      f"({str(folder)!r}): outputs never go where the grader "
                                      "reads its inputs; choose another folder")


def existing(paths: Iterable[tuple[str, Path | None]]) -> dict[str, Path]:
    """The named paths that are set, as a mapping for :func:`refuse_overlaps`."""
    return {what: path for what, path in paths if path is not None}


def export_inputs(root: Path) -> tuple[dict[str, Path], dict[str, Path]]:
    """The files and folders of the checkout at ``root`` that an export reads."""
    files = {f"the grader's {name}": root / name for name in ("pyproject.toml", "README.md")}
    folders = {f"the grader's {name}/": root / name
               for name in ("graders", "reference", "tracks", "student_template")}
    return files, folders
