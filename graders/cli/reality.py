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
    """Compute the curves of every track whose file (or the method) changed since its last
    build into the trusted cache folder, one folder per track."""
    tracks = _tracks(args)
    before = [track.track_id for track in tracks if cached_file(track) is not None]
    found = built_reality(tracks)
    kept = [cached_file(track) for track in tracks]
    if any(path is None for path in kept):
        print("graders: error: the grader's cache folder is not usable, so the reality "
              "curves were computed but not kept; check that it is a folder you own that "
              "no one else may write", file=sys.stderr)
        return 1
    folder = display_path(next(path for path in kept if path is not None).parent.parent)
    built = [track_id for track_id in found if track_id not in before]
    print(f"reality curves ready for {len(found)} of {len(tracks)} tracks "
          f"({', '.join(found)}) in {folder}; built now: {', '.join(built) or 'none'}, "
          f"already built: {', '.join(before) or 'none'}")
    return 0


def run_table(args: argparse.Namespace) -> int:
    """Print the Markdown table of where the formulas hold (building the curves first)."""
    found = built_reality(_tracks(args))
    print("\n".join(table_lines(found)))
    return 0
