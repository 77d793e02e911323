"""``graders reality build|table``: precompute the reality curves; print where the formulas
hold (the instructor guide's table)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from graders.reality.store import built_reality, cached_file
from graders.reality.table import table_lines
from graders.trackfiles.tracks import Track, default_tracks_dir, display_path, load_tracks


def _tracks(args: argparse.Namespace) -> tuple[Track, ...]:
    return load_tracks(Path(args.tracks) if args.tracks else default_tracks_dir())


def run_build(args: argparse.Namespace) -> int:
    """Simulate every track's curves into the trusted cache folder (unless there)."""
    tracks = _tracks(args)
    found = built_reality(tracks)
    kept = cached_file(tracks)
    if kept is None:
        print("graders: error: the grader's cache folder is not usable, so the reality "
              "curves were computed but not kept; check that it is a folder you own that "
              "no one else may write", file=sys.stderr)
        return 1
    print(f"reality curves ready for {len(found)} of {len(tracks)} tracks "
          f"({', '.join(found)}) in {display_path(kept.parent)}")
    return 0


def run_table(args: argparse.Namespace) -> int:
    """Print the Markdown table of where the formulas hold (building the curves first)."""
    found = built_reality(_tracks(args))
    print("\n".join(table_lines(found)))
    return 0
