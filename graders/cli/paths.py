"""Path arguments as people type them: made absolute once, at the command line.

Every path argument of every command is joined to the working folder the user typed it
in, before anything is checked or handed to another process (a regrade's grading
processes run in folders of their own). Nothing else changes: no ``..`` is folded and
no link is followed here, so the checks that follow see the path the user meant, and
a symbolic link, a space or a non-ASCII name goes through untouched.

A path argument is one whose metavar is in :data:`PATH_METAVARS` (or, for a positional
without one, whose name is in :data:`PATH_NAMES`): an option added with one of them is
covered with no change here.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

#: The metavars of path arguments, in every command's parser.
PATH_METAVARS = ("PATH", "DIR", "FILE", "SUBMISSIONS_DIR", "OUT.zip", "OUT_DIR")
#: Path arguments shown by their name (``graders grade submission``).
PATH_NAMES = ("submission",)


def path_destinations(parser: argparse.ArgumentParser) -> set[str]:
    """The ``dest`` of every path argument of ``parser`` and its subcommands."""
    found: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for subparser in action.choices.values():
                found |= path_destinations(subparser)
        elif action.metavar in PATH_METAVARS or (action.metavar is None
                                                  and action.dest in PATH_NAMES):
            found.add(action.dest)
    return found


def absolute(value: str) -> str:
    """``value`` joined to the working folder (unchanged when it is absolute already)."""
    return value if os.path.isabs(value) else str(Path.cwd() / value)


def absolute_paths(args: argparse.Namespace, destinations: set[str]) -> argparse.Namespace:
    """``args`` with every path argument (by ``dest``) absolute."""
    updated = argparse.Namespace(**vars(args))
    for name in destinations:
        value = getattr(updated, name, None)
        if isinstance(value, str) and value:
            setattr(updated, name, absolute(value))
    return updated
