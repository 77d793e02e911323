"""``graders reality build|table``: precompute the reality curves; print where the formulas
hold (the instructor guide's table)."""

from __future__ import annotations

import argparse
from pathlib import Path

from graders.reality.store import built_reality
from graders.reality.table import table_lines
from graders.trackfiles.tracks import Track, default_tracks_dir, load_tracks


def _tracks(args: argparse.Namespace) -> tuple[Track, ...]:
    return load_tracks(Path(args.tracks) if args.tracks else default_tracks_dir())


def run_build(args: argparse.Namespace) -> int:
    """Simulate every track's curves into the trusted cache folder (unless there)."""
    tracks = _tracks(args)
    found = built_reality(tracks)
    print(f"reality curves ready for {len(found)} of {len(tracks)} tracks: "
          f"{', '.join(found)}")
    return 0


def run_table(args: argparse.Namespace) -> int:
    """Print the Markdown table of where the formulas hold (building the curves first)."""
    found = built_reality(_tracks(args))
    print("\n".join(table_lines(found)))
    return 0
