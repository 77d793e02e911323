"""The ``graders`` command line: grade a submission, and manage tracks.

Exit codes: 0 when the work completed (whatever the score), 2 for a usage or
configuration error, reported as one line without a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from graders.errors import GraderError

USAGE_ERROR = 2


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    """The full ``graders`` argument parser."""
    parser = _Parser(prog="graders", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    grade = commands.add_parser("grade", help="grade one submission and write its results")
    grade.add_argument("submission", help="a serving.py, or a folder holding one")
    grade.add_argument("--results", metavar="FILE", help="where to write results.json")
    grade.add_argument("--tracks", metavar="DIR", help="folder of track TOML files")
    grade.add_argument("--max-score", metavar="POINTS", help="total points of the suite")
    grade.add_argument("--json-report", metavar="FILE", help="also write a pytest-json-report")
    grade.add_argument("-q", "--quiet", action="store_true", help="print only the score table")

    tracks = commands.add_parser("tracks", help="list, check, show and create track files")
    track_commands = tracks.add_subparsers(dest="tracks_command", required=True,
                                           parser_class=_Parser)
    new = track_commands.add_parser("new", help="write a track file from MLSysIM refs")
    new.add_argument("--id", required=True, dest="track_id", help="track id, e.g. jetson_orin")
    new.add_argument("--hardware", required=True, help="MLSysIM hardware ref")
    new.add_argument("--model", required=True, help="MLSysIM model ref")
    new.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="settings",
                     help="a track field or lab default, e.g. label=Jetson or arrival_qps=40")
    new.add_argument("--tracks", metavar="DIR", help="folder to write into")
    new.add_argument("--force", action="store_true", help="overwrite an existing file")
    new.add_argument("--stdout", action="store_true", help="print the file instead of writing it")
    show = track_commands.add_parser("show", help="print profiles and outputs at defaults")
    show.add_argument("track_id", nargs="?", help="one track id (default: all)")
    show.add_argument("--tracks", metavar="DIR", help="folder of track TOML files")
    check = track_commands.add_parser("check", help="validate every track file")
    check.add_argument("--tracks", metavar="DIR", help="folder of track TOML files")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "grade":
            from graders.grade_cli import run_grade

            return run_grade(args)
        from graders import tracks_cli

        handlers = {"new": tracks_cli.run_new, "show": tracks_cli.run_show,
                    "check": tracks_cli.run_check}
        return handlers[args.tracks_command](args)
    except GraderError as error:
        print(f"graders: error: {error}", file=sys.stderr)
        return USAGE_ERROR
