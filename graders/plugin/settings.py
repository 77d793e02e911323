"""The grader's settings: one table of options, resolved CLI first, then ini, then defaults."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from graders.grading.compare import DEFAULT_ABS_TOL, DEFAULT_REL_TOL, Tolerance
from graders.grading.scoring import exact_points
from graders.sandbox.limits import DEFAULT_SANDBOX_USER, Limits


def _finite(text: str, *, zero_allowed: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_allowed):
        rule = ">= 0" if zero_allowed else "> 0"
        raise argparse.ArgumentTypeError(f"must be a finite number {rule}, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0."""
    return _finite(text, zero_allowed=False)


def non_negative_float(text: str) -> float:
    """An argparse type: a finite number >= 0."""
    return _finite(text, zero_allowed=True)


def points_total(text: str) -> Fraction:
    """An argparse type: a total of points, exact (see
    :func:`graders.grading.scoring.exact_points`)."""
    try:
        return exact_points(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return value


def flag_value(flag: str, text: str, parse: Callable[[str], Any]) -> Any:
    """``parse(text)`` for a command-line flag; a SettingsError naming the flag if it fails."""
    from graders.errors import SettingsError

    try:
        return parse(text)
    except argparse.ArgumentTypeError as error:
        raise SettingsError(f"{flag} {error}") from None


@dataclass(frozen=True)
class Option:
    """One setting: its flag, ini key, parser, default and the help both share."""

    name: str
    flag: str
    parse: Callable[[str], Any]
    default: Any
    help: str
    metavar: str

    @property
    def ini(self) -> str:
        return f"grader_{self.name}"


def grade_flag(option: Option) -> str:
    """The ``graders grade`` flag of a plugin option: its name, e.g. --timeout for
    --grader-timeout (one table serves both)."""
    return "--" + option.name.replace("_", "-")


OPTIONS: tuple[Option, ...] = (
    Option("student", "--student", str, None,
           "the submission to grade: a serving.py or a folder holding one", "PATH"),
    Option("results", "--grader-results", str, None,
           "write a Gradescope results.json to this path", "PATH"),
    Option("tracks", "--grader-tracks", str, None,
           "folder of track TOML files (default: the tracks/ folder of the grader)", "DIR"),
    Option("max_score", "--grader-max-score", points_total, None,
           "total points of the suite; marker points are scaled to it (default 100, or the "
           "visible points a student bundle's golden file records); at most 6 decimals",
           "POINTS"),
    Option("rel_tol", "--grader-rel-tol", non_negative_float, DEFAULT_REL_TOL,
           f"relative tolerance for real numbers (default {DEFAULT_REL_TOL:g})", "REL"),
    Option("abs_tol", "--grader-abs-tol", non_negative_float, DEFAULT_ABS_TOL,
           f"absolute tolerance for real numbers (default {DEFAULT_ABS_TOL:g})", "ABS"),
    Option("timeout", "--grader-timeout", positive_float, Limits.call_timeout_s,
           f"seconds one student call may take (default {Limits.call_timeout_s:g})", "SECONDS"),
    Option("time_budget", "--grader-time-budget", positive_float, Limits.total_budget_s,
           "seconds the student's code may take in one grading, all calls, imports and "
           "restarts together; past it the remaining calls are refused (default "
           f"{Limits.total_budget_s:g})", "SECONDS"),
    Option("examples", "--grader-examples", positive_int, 25,
           "examples per invariant test, drawn by a fixed generator (default 25)", "N"),
    Option("sandbox_user", "--grader-sandbox-user", str, DEFAULT_SANDBOX_USER,
           "when run as root, the unprivileged user the student's code runs as (created if "
           f"missing): by default ({DEFAULT_SANDBOX_USER}) a free user of the pool "
           f"{DEFAULT_SANDBOX_USER}-1 to -64, held by this grading alone; a named user is "
           "held the same way and must be dedicated to grading (its processes and files "
           "are removed)", "NAME"),
    Option("golden", "--grader-golden", str, None,
           "expected values from this golden file instead of the reference (default: the "
           "reference when installed, else the golden.json of a student bundle)", "PATH"),
    Option("classroom", "--grader-classroom", str, None,
           "write the scores for GitHub Classroom's grading reporter to this path", "PATH"),
    Option("submission_metadata", "--grader-submission-metadata", str, None,
           "Gradescope's submission_metadata.json: its submission id goes into the results' "
           "extra_data (ignored when the file is absent)", "PATH"),
    Option("exact_p99_points", "--grader-exact-p99-points", non_negative_float, 0.0,
           "points of the graded extension exact_p99_ms (the exact M/M/c p99; weighted like "
           "a test marker's points); 0, the default, leaves it out and every score unchanged",
           "POINTS"),
    Option("html", "--grader-html", str, None,
           "write a self-contained HTML feedback report (scores, feedback, and plots of the "
           "student's curves against the reference) to this path",
           "PATH"),
)


@dataclass(frozen=True)
class Settings:
    """Every setting of one grading run, resolved and validated."""

    student: Path | None
    results: Path | None
    tracks: Path | None
    max_score: Fraction | None
    tolerance: Tolerance
    limits: Limits
    examples: int
    sandbox_user: str
    golden: Path | None = None
    classroom: Path | None = None
    submission_metadata: Path | None = None
    html: Path | None = None
    exact_p99_points: float = 0.0

    @property
    def grading(self) -> bool:
        """Whether this run grades a submission (a student path is set)."""
        return self.student is not None


def resolve(raw: dict[str, Any], *, invocation_dir: Path, ini_dir: Path) -> Settings:
    """Build :class:`Settings` from parsed values; ``raw`` maps a name to (value, from_ini)."""

    def path(name: str) -> Path | None:
        value, from_ini = raw[name]
        if value in (None, ""):
            return None
        base = ini_dir if from_ini else invocation_dir
        return (base / str(value)).resolve() if not Path(str(value)).is_absolute() \
            else Path(str(value))

    return Settings(
        student=path("student"),
        results=path("results"),
        tracks=path("tracks"),
        max_score=raw["max_score"][0],
        tolerance=Tolerance(rel=raw["rel_tol"][0], abs=raw["abs_tol"][0]),
        limits=Limits(call_timeout_s=raw["timeout"][0], total_budget_s=raw["time_budget"][0]),
        examples=raw["examples"][0],
        sandbox_user=raw["sandbox_user"][0],
        golden=path("golden"),
        classroom=path("classroom"),
        submission_metadata=path("submission_metadata"),
        html=path("html"),
        exact_p99_points=raw["exact_p99_points"][0],
    )
