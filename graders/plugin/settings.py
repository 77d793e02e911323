"""The grader's settings: one table of options, resolved CLI first, then ini, then defaults."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from graders.feedback.audience import Audience, page_audience
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


#: The longest wait any option may ask for, in seconds: a day, far inside what the
#: runner's clocks and selectors can wait for (an epoll timeout tops out at 2**31 ms).
MAX_SECONDS = 24 * 3600.0
#: The largest tolerance: past 1, a relative tolerance accepts any answer of the right
#: sign, and an absolute one answers of the lab's probabilities and fractions alike.
MAX_TOLERANCE = 1.0
#: The most examples one invariant test may draw.
MAX_EXAMPLES = 10_000
#: Examples per invariant test in an official grading (the student bundle knows the lab's
#: answers at these).
DEFAULT_EXAMPLES = 25
#: The largest weight of a test (a marker's points): ten times the shipped suite's total.
MAX_WEIGHT = 1000.0


def ranged_float(low: float, high: float, *, low_inclusive: bool) -> Callable[[str], float]:
    """An argparse type: a finite number in [low, high] (or (low, high])."""
    interval = f"{'[' if low_inclusive else '('}{low:g}, {high:g}]"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value) or value > high or value < low \
                or (value == low and not low_inclusive):
            raise argparse.ArgumentTypeError(f"must lie in {interval}, got {text!r}")
        return value

    return parse


def ranged_int(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number from ``low`` to ``high``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") \
                from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must lie in [{low}, {high}], got {text!r}")
        return value

    return parse


#: An argparse type for waits in seconds: (0, MAX_SECONDS].
seconds = ranged_float(0.0, MAX_SECONDS, low_inclusive=False)
#: An argparse type for tolerances: [0, MAX_TOLERANCE].
tolerance = ranged_float(0.0, MAX_TOLERANCE, low_inclusive=True)
#: An argparse type for a test's weight: [0, MAX_WEIGHT].
weight = ranged_float(0.0, MAX_WEIGHT, low_inclusive=True)


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
    Option("rel_tol", "--grader-rel-tol", tolerance, DEFAULT_REL_TOL,
           f"relative tolerance for real numbers, 0 to {MAX_TOLERANCE:g} (default "
           f"{DEFAULT_REL_TOL:g})", "REL"),
    Option("abs_tol", "--grader-abs-tol", tolerance, DEFAULT_ABS_TOL,
           f"absolute tolerance for real numbers, 0 to {MAX_TOLERANCE:g} (default "
           f"{DEFAULT_ABS_TOL:g})", "ABS"),
    Option("timeout", "--grader-timeout", seconds, Limits.call_timeout_s,
           f"seconds one student call may take, up to {MAX_SECONDS:g} (default "
           f"{Limits.call_timeout_s:g})", "SECONDS"),
    Option("time_budget", "--grader-time-budget", seconds, Limits.total_budget_s,
           "seconds the student's code may take in one grading, all calls, imports and "
           "restarts together; past it the remaining calls are refused (up to "
           f"{MAX_SECONDS:g}; default {Limits.total_budget_s:g})", "SECONDS"),
    Option("examples", "--grader-examples", ranged_int(1, MAX_EXAMPLES), DEFAULT_EXAMPLES,
           f"examples per invariant test, drawn by a fixed generator, 1 to {MAX_EXAMPLES} "
           "(default 25)", "N"),
    Option("sandbox_user", "--grader-sandbox-user", str, DEFAULT_SANDBOX_USER,
           "when run as root, the unprivileged user the student's code runs as (created if "
           f"missing): by default ({DEFAULT_SANDBOX_USER}) a free user of the pool "
           f"{DEFAULT_SANDBOX_USER}-1 to -64, held by this grading alone; a named user is "
           "held the same way and must be dedicated to grading (its processes and files "
           "are removed): an account with a login shell, a home folder or a person's uid is "
           "refused", "NAME"),
    Option("golden", "--grader-golden", str, None,
           "expected values from this golden file instead of the reference (default: the "
           "reference when installed, else the golden.json of a student bundle)", "PATH"),
    Option("classroom", "--grader-classroom", str, None,
           "write the scores for GitHub Classroom's grading reporter to this path", "PATH"),
    Option("submission_metadata", "--grader-submission-metadata", str, None,
           "Gradescope's submission_metadata.json: its submission id goes into the results' "
           "extra_data (ignored when the file is absent)", "PATH"),
    Option("secret_file", "--grader-secret-file", str, None,
           "the course secret (a file, as 'graders export gradescope' writes it) that seeds "
           "the unseen inputs of the official grade with a hash of the submission (default: "
           "no secret; the inputs still change with every change to the file)", "PATH"),
    Option("exact_p99_points", "--grader-exact-p99-points", weight, 0.0,
           "points of the graded extension exact_p99_ms (the exact M/M/c p99; weighted like "
           f"a test marker's points), 0 to {MAX_WEIGHT:g}; 0, the default, leaves it out and "
           "every score unchanged",
           "POINTS"),
    Option("html", "--grader-html", str, None,
           "write a self-contained HTML feedback report (scores, feedback, and plots of the "
           "student's curves against the reference) to this path",
           "PATH"),
    Option("html_for", "--grader-html-for", page_audience, "student",
           "who the HTML page is for: 'student' (the default; the hidden tests' results, "
           "and every total that counts them, are left out) or 'staff' (every result, "
           "hidden ones included, under a banner saying it is a staff page)",
           "{student,staff}"),
)


#: The options that change a grade and that a course sets for its assignment, by name.
#: Every command that grades or builds a grader builds these flags from this list:
#: ``graders grade`` (as every option), ``graders regrade`` (passed to each grading),
#: ``graders export gradescope`` (set in the zip's run_autograder) and ``graders export
#: student`` (the points the bundle grades out of), so that a regrade reproduces the
#: exported grades and no command can be left without one.
GRADE_CHANGING: tuple[str, ...] = ("max_score", "exact_p99_points")
#: Every other option, and why it is ``graders grade``'s alone (or handled otherwise).
NOT_GRADE_CHANGING: dict[str, str] = {
    "student": "the submission itself",
    "results": "an output path",
    "classroom": "an output path",
    "html": "an output path (graders regrade --pages writes each page)",
    "html_for": "what the page shows, never the score (graders regrade --pages writes "
                "students' pages)",
    "submission_metadata": "Gradescope's per-submission file, read by run_autograder",
    "sandbox_user": "where the code runs, never what it scores",
    "golden": "the student bundle's source of expected values, set by its export",
    "tracks": "graders regrade --tracks; both exports ship the project's tracks/",
    "secret_file": "graders regrade and export gradescope --secret-file; never in the "
                   "student bundle, which draws no unseen inputs",
    "rel_tol": "a local experiment: the official grade uses the default",
    "abs_tol": "a local experiment: the official grade uses the default",
    "timeout": "a local experiment: the official grade uses the default",
    "time_budget": "a local experiment: the official grade uses the default",
    "examples": "a local experiment: the official grade uses the default",
}


def option_named(name: str) -> Option:
    """The option called ``name`` in :data:`OPTIONS`."""
    [option] = [option for option in OPTIONS if option.name == name]
    return option


def grade_changing_options() -> tuple[Option, ...]:
    """The options of :data:`GRADE_CHANGING`, in its order."""
    return tuple(option_named(name) for name in GRADE_CHANGING)


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
    html_for: Audience = "student"
    exact_p99_points: float = 0.0
    secret_file: Path | None = None

    def secret(self) -> bytes:
        """The course secret (b"" when none is set); a SettingsError if it cannot be read."""
        return read_secret(self.secret_file)

    @property
    def grading(self) -> bool:
        """Whether this run grades a submission (a student path is set)."""
        return self.student is not None


def read_secret(path: Path | None) -> bytes:
    """The course secret in ``path`` (b"" for None); a SettingsError if it cannot be read
    or is empty."""
    if path is None:
        return b""
    from graders.errors import SettingsError

    try:
        secret = path.read_bytes().strip()
    except OSError as error:
        raise SettingsError(f"--secret-file {path}: cannot be read ({error.strerror}); pass "
                            "the file 'graders export gradescope' wrote") from None
    if not secret:
        raise SettingsError(f"--secret-file {path}: the file is empty; pass the file "
                            "'graders export gradescope' wrote")
    return secret


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
        html_for=raw["html_for"][0],
        secret_file=path("secret_file"),
        exact_p99_points=raw["exact_p99_points"][0],
    )
