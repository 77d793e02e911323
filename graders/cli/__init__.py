"""The ``graders`` command line: grade a submission or a class, and manage tracks.

Exit codes: 0 when the work completed (whatever the score), 70 when the grader itself
failed (``grade`` still writes fallback results), 2 for a usage or configuration error,
reported as one line without a traceback, 3 when ``grade --fail-under`` finds the
score below the bar, and 128 + the signal's number when a grading or a regrade is
interrupted (130 for Ctrl-C, 143 for SIGTERM; run a regrade again to resume).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from graders.cli.paths import absolute_paths, path_destinations
from graders.errors import GraderError
from graders.plugin.settings import (
    MAX_SECONDS,
    OPTIONS,
    flag_value,
    grade_changing_options,
    grade_flag,
    points_total,
    ranged_int,
    seconds,
)
from graders.versions import version_report

USAGE_ERROR = 2
#: The exit code of a command stopped by Ctrl-C (128 + SIGINT).
INTERRUPTED_EXIT = 130
DESCRIPTION = "The graders command line: grade a submission or a class, and manage tracks."


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")

    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        """Each value as argparse reads it, but an empty one is refused: ``--out ''`` is a
        slip (an unset shell variable), never "not given" and never the current folder."""
        if arg_string == "" and action.nargs not in (0, argparse.PARSER, argparse.REMAINDER):
            raise argparse.ArgumentError(action, "is empty: give it a value")
        return super()._get_value(action, arg_string)


class _VersionAction(argparse.Action):
    """``--version``: print :func:`version_report` as it is, one version a line, and exit 0
    (argparse's own version action refills the text to the terminal's width)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> NoReturn:
        sys.stdout.write(version_report() + "\n")
        parser.exit(0)


def build_parser() -> argparse.ArgumentParser:
    """The full ``graders`` argument parser."""
    full = _present("graders.regrade.command")
    parser = _Parser(prog="graders", description=DESCRIPTION if full else
                     "The graders command line: grade a submission (this copy of the grader "
                     "has no instructor commands).")
    parser.add_argument("--version", action=_VersionAction,
                        help="print the grader's version and those of pytest, Hypothesis, "
                             "pint and Python, then exit")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    grade = commands.add_parser("grade", help="grade one submission and write its results")
    grade.add_argument("submission", help="a serving.py, or a folder holding one")
    for option in OPTIONS:  # every grading option of the plugin, under its short name
        if option.name != "student":
            grade.add_argument(grade_flag(option), dest=option.name, metavar=option.metavar,
                               help=f"{option.help} (pytest: {option.flag})")
    grade.add_argument("--json-report", metavar="FILE", help="also write a pytest-json-report")
    grade.add_argument("--junit-xml", metavar="FILE", help="also write JUnit XML (pytest's)")
    grade.add_argument("--github-output", action="store_true",
                       help="append result=<base64 runner results> to $GITHUB_OUTPUT, for "
                            "GitHub Classroom's grading reporter, and print a notice that "
                            "its score is a preview, not the final grade")
    grade.add_argument("--fail-under", metavar="POINTS",
                       help="exit with code 3 when the score is below POINTS (for CI)")
    grade.add_argument("-q", "--quiet", action="store_true",
                       help="print only the score table and the counts (no progress, no "
                            "per-test feedback, no 'written to' lines)")

    if _present("graders.export.build"):  # the student bundle has grade only
        _add_export(commands)
    if _present("graders.regrade.command"):
        _add_regrade(commands)
    if _present("graders.cli.tracks"):
        _add_tracks(commands)
    if _present("graders.cli.reality"):
        _add_reality(commands)
    return parser


def _present(module: str) -> bool:
    """Whether ``module`` is part of this copy of the grader (not found elsewhere, e.g.
    through another checkout's editable install)."""
    import importlib.util
    from pathlib import Path

    import graders

    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:  # its sub-package is not in this copy
        return False
    return spec is not None and spec.origin is not None and any(
        Path(spec.origin).resolve().is_relative_to(Path(folder).resolve())
        for folder in graders.__path__)


def _add_export(commands: argparse._SubParsersAction[_Parser]) -> None:
    export = commands.add_parser("export", help="build the Gradescope zip or the student bundle")
    export_commands = export.add_subparsers(dest="export_command", required=True,
                                            parser_class=_Parser)
    gradescope = export_commands.add_parser(
        "gradescope", help="the Gradescope autograder zip (setup.sh and run_autograder)")
    gradescope.add_argument("target", metavar="OUT.zip", help="the zip file to write")
    add_grade_changing(gradescope, "the zip grades with it; give the student bundle and "
                                   "every regrade the same")
    gradescope.add_argument("--tracks", metavar="DIR",
                            help="folder of track TOML files the zip grades on (default: the "
                                 "checkout's tracks/); give every regrade the same")
    gradescope.add_argument("--secret-file", metavar="PATH",
                            help="the course secret that seeds the unseen inputs (default: "
                                 "OUT.zip.secret, made with a new random secret if missing)")
    student = export_commands.add_parser(
        "student", help="the repository students clone: no reference, no hidden tests")
    student.add_argument("target", metavar="OUT_DIR", help="a new or empty folder")
    add_grade_changing(student, "the Gradescope export's: the bundle grades its visible "
                                "tests out of their share of the points")
    student.add_argument("--tracks", metavar="DIR",
                         help="folder of track TOML files the bundle ships (default: the "
                              "checkout's tracks/); the Gradescope export's")


def add_grade_changing(parser: argparse.ArgumentParser, why: str) -> None:
    """The grade-changing options (:data:`graders.plugin.settings.GRADE_CHANGING`) on a
    command other than ``grade``, as ``grade`` names them; each is validated where used."""
    for option in grade_changing_options():
        parser.add_argument(grade_flag(option), dest=option.name, metavar=option.metavar,
                            help=f"{option.help} ({why})")



def _add_regrade(commands: argparse._SubParsersAction[_Parser]) -> None:
    from graders.sandbox.privileges import MAX_POOL_USERS

    regrade = commands.add_parser(
        "regrade", help="grade a whole class in parallel, resumably, and report on it")
    regrade.add_argument("submissions", metavar="SUBMISSIONS_DIR",
                         help="a Gradescope export (folders and submission_metadata.yml) "
                              "or the folder holding only it (as it unzips), or a folder of "
                              "submission folders or of *.py files")
    regrade.add_argument("--out", required=True, metavar="DIR",
                         help="where results, grades.csv and the class report go")
    regrade.add_argument("--jobs", type=ranged_int(1, MAX_POOL_USERS),
                         default=min(os.cpu_count() or 1, MAX_POOL_USERS), metavar="N",
                         help=f"submissions graded at once, 1 to {MAX_POOL_USERS} (one sandbox "
                              "user each; at most 8 where workers run without namespaces, "
                              "one per seat; default: the number of CPUs)")
    regrade.add_argument("--timeout", type=seconds, metavar="SECONDS",
                         help="wall time one submission may take before it is stopped, up to "
                              f"{MAX_SECONDS:g} (default: the worker's worst case plus 120 s)")
    regrade.add_argument("--force", action="store_true",
                         help="regrade every submission, even those already graded")
    regrade.add_argument("--tracks", metavar="DIR", help="folder of track TOML files")
    add_grade_changing(regrade, "passed to every grading; give the Gradescope export's to "
                                "reproduce its grades")
    regrade.add_argument("--secret-file", metavar="PATH",
                         help="the course secret of the Gradescope zip (OUT.zip.secret), so "
                              "that the regrade draws the unseen inputs Gradescope drew")
    regrade.add_argument("--allow-unconfined", action="store_true",
                         help="grade even where the student's code cannot be confined (no "
                              "user namespaces): it could then read and write your files, "
                              "rewrite classmates' results and reach the network")
    regrade.add_argument("--no-histogram", action="store_true",
                         help="skip histogram.png (needs matplotlib, the 'report' extra)")
    regrade.add_argument("--pages", action="store_true",
                         help="also write each student's HTML feedback page "
                              "(submissions/<id>/feedback.html; about 170 kB and 7 %% "
                              "more grading time each)")
    regrade.add_argument("--names", action="store_true",
                         help="show submission names and links to their pages on the class "
                              "page and in report.json (default: counts and anonymous labels)")
    regrade.add_argument("--mistakes", metavar="FILE",
                         help="a TOML catalogue of your course's known mistakes, tried before "
                              "the grader's own (format: docs/instructor-guide.md)")
    regrade.add_argument("--compare", metavar="DIR",
                         help="compare with the run in DIR (an earlier --out), not with the "
                              "previous run in OUT: changes.csv and the class page's "
                              "\"What changed\" say who moves, from what to what, and why")
    regrade.add_argument("--new-settings", action="store_true",
                         help="replace the grades in OUT even though this run's settings "
                              "(tracks, points, secret, grader) differ from those of the run "
                              "that made them (without it, such a regrade stops and says "
                              "what differs)")
    regrade.add_argument("--due", metavar="TIME",
                         help="the due date, e.g. '2024-03-01 23:59 -08:00', for the late "
                              "columns of grades.csv when the metadata has none")
    regrade.add_argument("--gradebook", action="append", choices=("canvas", "moodle", "csv"),
                         metavar="canvas|moodle|csv",
                         help="also write an LMS gradebook import file: "
                              "gradebook-canvas.csv (Canvas: Grades, Import), "
                              "gradebook-moodle.csv (Moodle: Grades, Import, CSV file) or "
                              "gradebook.csv (every student of the roster); repeatable")
    regrade.add_argument("--roster", metavar="FILE",
                         help="the class's roster CSV (GitHub Classroom's, Gradescope's or "
                              "Canvas's gradebook export), to name the students behind "
                              "repository or file names in grades.csv and the gradebook")
    regrade.add_argument("--gradebook-column", metavar="NAME", default="Serving lab",
                         help="the gradebook's assignment column, e.g. 'Serving lab (4521)' "
                              "for Canvas's assignment 4521 (default: 'Serving lab')")



def _add_tracks(commands: argparse._SubParsersAction[_Parser]) -> None:
    tracks = commands.add_parser("tracks", help="check, show and create track files")
    track_commands = tracks.add_subparsers(dest="tracks_command", required=True,
                                           parser_class=_Parser)
    new = track_commands.add_parser("new", help="write a track file from MLSysIM refs")
    new.add_argument("--id", dest="track_id", help="track id, e.g. jetson_orin (required)")
    new.add_argument("--hardware", help="MLSysIM hardware ref (required; see --list)")
    new.add_argument("--model", help="MLSysIM model ref (required; see --list)")
    new.add_argument("--list", action="store_true", dest="list_refs",
                     help="print the MLSysIM hardware and model refs accepted, then exit")
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


def _add_reality(commands: argparse._SubParsersAction[_Parser]) -> None:
    reality = commands.add_parser(
        "reality", help="the exact or simulated tails beside the formulas' (never graded)")
    reality_commands = reality.add_subparsers(dest="reality_command", required=True,
                                              parser_class=_Parser)
    build = reality_commands.add_parser(
        "build", help="simulate every track's reality curves into the grader's cache (once; "
                      "a grading only reads them)")
    build.add_argument("--tracks", metavar="DIR", help="folder of track TOML files")
    table = reality_commands.add_parser(
        "table", help="print where the formulas hold, as the instructor guide's Markdown table")
    table.add_argument("--tracks", metavar="DIR", help="folder of track TOML files")


def console_main() -> int:
    """The ``graders`` command: :func:`main`, in a process that ends right after it (a
    grading then collects no garbage: :func:`graders.cli.grade.collect_no_garbage`).
    A long-lived caller (the regrade's grading process) calls :func:`main` instead.
    Ctrl-C before a command has its own handling (while its modules import) is one line
    and exit 130, never a traceback."""
    try:
        return main(one_shot=True)
    except KeyboardInterrupt:
        sys.stderr.write("graders: interrupted\n")
        return INTERRUPTED_EXIT


def main(argv: Sequence[str] | None = None, *, one_shot: bool = False) -> int:
    """Run the command line and return its exit code; ``one_shot``: the process ends after
    it (a grading then collects no garbage, see :func:`graders.cli.grade.run_grade`)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args = absolute_paths(args, path_destinations(parser))
        if args.command == "grade":
            from graders.cli.grade import run_grade

            return run_grade(args, one_shot=one_shot)
        if args.command == "export":
            return _run_export(args)
        if args.command == "regrade":
            from graders.regrade.command import run_regrade

            return run_regrade(args)
        if args.command == "reality":
            from graders.cli import reality

            return reality.run_build(args) if args.reality_command == "build" \
                else reality.run_table(args)
        from graders.cli import tracks as tracks_cli

        handlers = {"new": tracks_cli.run_new, "show": tracks_cli.run_show,
                    "check": tracks_cli.run_check}
        return handlers[args.tracks_command](args)
    except GraderError as error:
        print(f"graders: error: {error}", file=sys.stderr)
        return USAGE_ERROR
    except ModuleNotFoundError as error:
        if error.name not in INSTRUCTOR_MODULES:
            raise
        print(f"graders: error: '{args.command}' needs the instructor's checkout of the grader "
              f"(module {error.name} is not in this copy, e.g. a student bundle)",
              file=sys.stderr)
        return USAGE_ERROR


#: Modules the student bundle leaves out; commands that need them say so in one line.
INSTRUCTOR_MODULES = ("reference", "graders.export", "graders.export.build",
                      "graders.trackfiles.generate", "graders.regrade")


def _run_export(args: argparse.Namespace) -> int:
    import importlib
    from pathlib import Path

    from graders.results.files import check_writable_folder
    from graders.results.overlaps import export_inputs, refuse_overlaps

    export = importlib.import_module("graders.export.build")

    target = Path(args.target)
    settings = {option.name: flag_value(grade_flag(option), getattr(args, option.name),
                                        option.parse)
                for option in grade_changing_options() if getattr(args, option.name) is not None}
    max_score = settings.get("max_score", points_total("100"))
    points = float(settings.get("exact_p99_points", 0.0))
    flag = "OUT.zip" if args.export_command == "gradescope" else "OUT_DIR"
    files, folders = export_inputs(export.project_root())
    tracks = Path(args.tracks).resolve() if args.tracks else None
    if tracks is not None:
        folders["--tracks"] = tracks
    refuse_overlaps({flag: target}, files, folders)
    check_writable_folder(target.parent, flag, shown=target)
    if args.export_command == "gradescope":
        secret_file = Path(args.secret_file).resolve() if args.secret_file else None
        names, secret_file, made = export.export_gradescope(
            target, max_score=max_score, exact_p99_points=points, secret_file=secret_file,
            tracks=tracks)
        print(f"wrote {target} ({len(names)} files): upload it as the autograder of a "
              "Gradescope programming assignment")
        print(f"{'made a new' if made else 'used the'} course secret {secret_file}: keep it "
              "private, and pass it to 'graders regrade --secret-file'")
        return 0
    names = export.export_student(target, max_score=max_score, exact_p99_points=points,
                                  tracks=tracks)
    print(f"wrote the student bundle to {target} ({len(names)} files); push it as the "
          "starter repository students clone")
    return 0
