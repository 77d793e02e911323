"""Path arguments as people type them: made absolute once, at the command line.

Every path argument of every command is joined to the working folder the user typed it
in, before anything is checked or handed to another process (a regrade's grading
processes run in folders of their own). Nothing else changes: no ``..`` is folded and
no link is followed here, so the checks that follow see the path the user meant, and
a symbolic link, a space or a non-ASCII name goes through untouched.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

#: The attributes that hold paths, by command (``None``: every subcommand of it).
PATH_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "grade": ("submission", "results", "tracks", "golden", "classroom",
              "submission_metadata", "html", "json_report", "junit_xml"),
    "regrade": ("submissions", "out", "tracks"),
    "export": ("target",),
    "tracks": ("tracks",),
}


def absolute(value: str) -> str:
    """``value`` joined to the working folder (unchanged when it is absolute already)."""
    return str(Path.cwd() / value) if not os.path.isabs(value) else value


def absolute_paths(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with every path argument of its command absolute."""
    updated = argparse.Namespace(**vars(args))
    for name in PATH_ARGUMENTS.get(args.command, ()):
        value = getattr(updated, name, None)
        if isinstance(value, str) and value:
            setattr(updated, name, absolute(value))
    return updated
