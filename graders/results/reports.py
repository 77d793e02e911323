"""Score reports built by pure functions: Gradescope ``results.json`` and the terminal table."""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from graders.errors import GRADER_FAILURE_ADVICE
from graders.escaping import GRADESCOPE_FORMATS, escape_controls, for_gradescope, has_controls
from graders.grading.scoring import (
    SCORE_DECIMALS,
    TestScore,
    WrittenPoints,
    rounded,
    written_points,
)
from graders.results.files import Reservation
from graders.results.files import write_text_atomically as write_text_atomically

SCHEMA_VERSION = 1
#: Gradescope's ``output_format`` of every output and name the grader writes. "text" shows
#: the text as it is, in a <pre> block, and renders no HTML, Markdown or ANSI: the feedback
#: keeps its layout (aligned fields, indented hints), and no link, image, script or colour
#: in a student's exception message can render, whatever it holds. Only control characters
#: need escaping (:func:`graders.escaping.for_gradescope`). Without it the top-level
#: output would be "simple_format", which renders HTML.
OUTPUT_FORMAT = "text"


def _plain(value: Any) -> Any:
    """``value`` with every string in it (keys too) free of control characters."""
    if isinstance(value, str):
        return escape_controls(value)
    if isinstance(value, Mapping):
        return {escape_controls(str(key)): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def gradescope_results(scores: Sequence[TestScore], *, execution_time_s: float,
                       output: str, extra: Mapping[str, Any] | None = None,
                       output_html: str | None = None) -> dict[str, Any]:
    """A results.json document in Gradescope's format, with the points every output writes
    (:func:`graders.grading.scoring.written_points`: the tests add up to the score, the
    maxima to the maximum); every text escaped for :data:`OUTPUT_FORMAT`, which each
    output and name declares, but the top-level output when ``output_html`` (HTML whose
    every text is already escaped, see :mod:`graders.results.essentials`) replaces it in
    the ``html`` format."""
    points = written_points(scores)
    tests = []
    for number, (score, earned, maximum) in enumerate(
            zip(scores, points.earned, points.maxima, strict=True), start=1):
        tests.append({
            "name": for_gradescope(score.name, OUTPUT_FORMAT),
            "name_format": OUTPUT_FORMAT,
            "number": str(number),
            "score": rounded(earned),
            "max_score": rounded(maximum),
            "status": "passed" if score.status == "passed" else "failed",
            "output": for_gradescope(score.output, OUTPUT_FORMAT),
            "output_format": OUTPUT_FORMAT,
            "tags": _plain(score.tags),
            "visibility": score.visibility,
            "extra_data": _plain({"nodeid": score.nodeid, "outcome": score.status,
                                  "passed_cases": score.passed_cases,
                                  "total_cases": score.total_cases,
                                  **({"failed_cases": list(score.failed_cases)}
                                     if score.failed_cases else {})}),
        })
    return {
        "score": rounded(points.total_earned),
        "execution_time": round(execution_time_s, 3),
        "output": for_gradescope(output, OUTPUT_FORMAT) if output_html is None
        else output_html,
        "output_format": OUTPUT_FORMAT if output_html is None else "html",
        "test_output_format": OUTPUT_FORMAT,
        "test_name_format": OUTPUT_FORMAT,
        "stdout_visibility": "hidden",
        "extra_data": _plain({"schema_version": SCHEMA_VERSION,
                              "max_score": rounded(points.total_maximum), **(extra or {})}),
        "tests": tests,
    }


VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")


def gradescope_problems(document: Any) -> list[str]:
    """Every way ``document`` breaks Gradescope's results format (empty when it is valid)."""
    if not isinstance(document, Mapping):
        return ["the document is not a JSON object"]
    problems = []

    def real(value: Any) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool) \
            and math.isfinite(value)

    if not real(document.get("score")):
        problems.append("score must be a finite number")
    problems += _text_problems(document, "", ("output", "output_format"),
                               ("test_output_format", "test_name_format"))
    if document.get("stdout_visibility", "hidden") not in VISIBILITIES:
        problems.append("stdout_visibility must be a Gradescope visibility")
    if not real(document.get("execution_time", 0)):
        problems.append("execution_time must be a finite number")
    tests = document.get("tests")
    if not isinstance(tests, list):
        return [*problems, "tests must be a list"]
    for index, test in enumerate(tests):
        where = f"tests[{index}]"
        if not isinstance(test, Mapping):
            problems.append(f"{where} must be an object")
            continue
        for key in ("score", "max_score"):
            if not real(test.get(key)):
                problems.append(f"{where}.{key} must be a finite number")
        if real(test.get("score")) and real(test.get("max_score")) \
                and not 0 <= test["score"] <= test["max_score"]:
            problems.append(f"{where}.score must lie in [0, max_score]")
        if not isinstance(test.get("name"), str):
            problems.append(f"{where}.name must be a string")
        problems += _text_problems(test, f"{where}.", ("output", "output_format"),
                                   ("name_format",))
        if isinstance(test.get("name"), str) and has_controls(test["name"]):
            problems.append(f"{where}.name holds unescaped control characters")
        if test.get("status") not in ("passed", "failed"):
            problems.append(f"{where}.status must be passed or failed")
        if test.get("visibility", "visible") not in VISIBILITIES:
            problems.append(f"{where}.visibility must be a Gradescope visibility")
        tags = test.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
            problems.append(f"{where}.tags must be a list of strings")
    maximum = sum(t.get("max_score", 0) for t in tests if isinstance(t, Mapping)
                  and real(t.get("max_score")))
    if real(document.get("score")) and not 0 <= document["score"] <= maximum + 1e-6:
        problems.append("score must lie in [0, the sum of max_score]")
    return problems


def _text_problems(holder: Mapping[str, Any], where: str, output: tuple[str, str],
                   formats: tuple[str, ...]) -> list[str]:
    """Problems of an output and its format (and other format keys): the output is a string
    with no control character, and every format one of Gradescope's."""
    problems = []
    key, format_key = output
    text = holder.get(key, "")
    if not isinstance(text, str):
        problems.append(f"{where}{key} must be a string")
    elif has_controls(text):
        problems.append(f"{where}{key} holds unescaped control characters")
    for name in (format_key, *formats):
        if name in holder and holder[name] not in GRADESCOPE_FORMATS:
            problems.append(f"{where}{name} must be one of {', '.join(GRADESCOPE_FORMATS)}")
    return problems


def grader_failure_results(reason: str, *, execution_time_s: float = 0.0,
                           extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The record a grader failure leaves at the results path: no score at all.

    A failure of the grader is never written as points. The record has neither ``score``
    nor ``tests``, so that no reader can take it for a grade: :func:`read_valid_results`
    refuses it, a class regrade records ``grader_failed`` and grades the submission again,
    and the Gradescope runner removes it, so that Gradescope shows its own "the autograder
    failed to execute correctly" to the student and flags the submission to staff, who
    rerun it (see docs/course-staff.md)."""
    reason = " ".join(reason.split()) or "unknown failure"
    record: dict[str, Any] = _plain({
        "grader_failed": True,
        "schema_version": SCHEMA_VERSION,
        "reason": reason,
        "what_to_do": GRADER_FAILURE_ADVICE,
        "output": f"Grading did not complete: the grader failed ({reason}). This is not your "
                  "score: the course staff will grade this submission again.",
        "output_format": OUTPUT_FORMAT,
        "execution_time": round(execution_time_s, 3),
        "extra_data": {"schema_version": SCHEMA_VERSION, "grader_failed": True,
                       "grader_error": reason, **(extra or {})},
    })
    return record


def grader_failure(document: Any) -> str | None:
    """The reason of a grader-failure record (:func:`grader_failure_results`), else None."""
    if isinstance(document, Mapping) and document.get("grader_failed") is True:
        return str(document.get("reason") or "unknown failure")
    return None


def interrupted_results(signal_name: str) -> dict[str, Any]:
    """The record a grading stopped by a signal leaves: a grader-failure record (no score:
    graded again, as a grader failure is), whose ``extra_data.interrupted`` names the
    signal."""
    return grader_failure_results(f"the grading was interrupted by {signal_name}",
                                  extra={"interrupted": signal_name})


def interrupted_by_signal(document: Any) -> str | None:
    """The signal named by an :func:`interrupted_results` record, else None."""
    if grader_failure(document) is None:
        return None
    extra = document.get("extra_data")
    signal_name = extra.get("interrupted") if isinstance(extra, Mapping) else None
    return str(signal_name) if signal_name is not None else None


#: A folder or file of the grading machine, as a reason quotes it (``'/autograder/x'``).
_ABSOLUTE_PATH = re.compile(r""" (?:'(?:/|[A-Za-z]:\\)[^']*'|"(?:/|[A-Za-z]:\\)[^"]*")""")
#: What to submit, said when the reason does not say it already.
SUBMIT_SERVING_PY = ("Submit serving.py (the file itself, or a folder holding exactly one) "
                     "and grading will run.")


def unusable_submission_results(reason: str) -> dict[str, Any]:
    """Results for a submission with no usable ``serving.py``: 0 points, and why, said
    once (what to submit only if ``reason`` does not say it) and without the grading
    machine's paths (the reason as the student's own files name it)."""
    said = _ABSOLUTE_PATH.sub("", reason)
    ask = "" if "submit " in said.lower() else f" {SUBMIT_SERVING_PY}"
    return gradescope_results(
        [], execution_time_s=0.0,
        output=f"Your submission was not graded: {said}.{ask}",
        extra={"submission_error": said})


def validated_results(document: Mapping[str, Any]) -> Mapping[str, Any]:
    """``document`` if it is valid Gradescope output (or already a grader-failure record),
    else a grader-failure record that says what is wrong with it."""
    if grader_failure(document) is not None:
        return document
    problems = gradescope_problems(document)
    if problems:
        return grader_failure_results("the grader built invalid results: "
                                      + "; ".join(problems[:3]))
    return document


def write_results(path: Path, document: Mapping[str, Any]) -> Mapping[str, Any]:
    """Validate and write ``document``; an invalid one is replaced by a grader-failure
    record. Returns the document written."""
    document = validated_results(document)
    write_json_atomically(path, document)
    return document


def write_json_atomically(path: Path, document: Mapping[str, Any], *,
                          reservation: Reservation | None = None) -> None:
    """Write ``document`` to ``path`` through a temp file the grader creates and a rename
    (:func:`graders.results.files.write_text_atomically`), into ``reservation``'s space
    when given; no NaN allowed."""
    text = json.dumps(document, indent=2, allow_nan=False, sort_keys=False) + "\n"
    write_text_atomically(path, text, reservation=reservation)


def _rows(scores: Sequence[TestScore], points: WrittenPoints, key: str
          ) -> list[tuple[str, Fraction, Fraction, int]]:
    groups: dict[str, list[int]] = defaultdict(list)
    for index, score in enumerate(scores):
        name = score.function if key == "function" else (score.track or "")
        if name and score.status != "not run":
            groups[name].append(index)
    return [(name, sum((points.earned[i] for i in members), Fraction(0)),
             sum((points.maxima[i] for i in members), Fraction(0)), len(members))
            for name, members in groups.items()]


def points_rows(scores: Sequence[TestScore], points: WrittenPoints, key: str,
                title: str) -> list[str]:
    """The table of ``scores`` by ``key`` ("function" or "track"; tests that did not run
    left out), headed ``title``, with the points every output writes: the terminal's and
    the Gradescope summary's rows (empty when no test has that key)."""
    rows = _rows(scores, points, key)
    if not rows:
        return []
    width = max(len(title), *(len(row[0]) for row in rows))
    lines = [f"{title:<{width}}  {'score':>8}  {'max':>8}  tests"]
    for name, earned, maximum, count in rows:
        shown = points_text(earned, maximum)
        lines.append(f"{name:<{width}}  {shown[0]:>8}  {shown[1]:>8}  {count}")
    return lines


def points_text(earned: Fraction, maximum: Fraction, decimals: int = 2) -> tuple[str, str]:
    """``earned`` and ``maximum`` as the terminal shows them: ``decimals`` places, or as
    many more as it takes for neither to be misread (:func:`_misread`: 0.000003 never
    shows as 0.00, nor 99.999999 as 100.00) and for a score below the maximum not to
    read as the maximum. Scores lie on the grid, so :data:`SCORE_DECIMALS` places show
    them exactly."""
    places = decimals
    while places < SCORE_DECIMALS and (
            _misread(earned, places) or _misread(maximum, places)
            or earned != maximum
            and f"{rounded(earned):.{places}f}" == f"{rounded(maximum):.{places}f}"):
        places += 1
    return f"{rounded(earned):.{places}f}", f"{rounded(maximum):.{places}f}"


def _misread(value: Fraction, places: int) -> bool:
    """Whether ``value`` shown with ``places`` decimals reads as another value: zero for a
    value that is not, or rounded beyond its last digit (99.999999 as 100.00: every digit
    changed). Rounding in the last digit alone (91.666667 as 91.67) is not."""
    shown = Fraction(f"{rounded(value):.{places}f}")
    if shown == value:
        return False
    unit = Fraction(10) ** (1 - places)
    return shown == 0 or math.floor(shown / unit) != math.floor(value / unit)


def partial_run(scores: Sequence[TestScore]) -> str | None:
    """How a run that left graded tests out stands, or None when every graded test ran.

    Tests that did not run neither count as 0 nor scale the others up: the line gives
    the points of the tests that ran, out of their own maximum."""
    ran = [score for score in scores if score.status != "not run"]
    if len(ran) == len(scores):
        return None
    points = written_points(ran)
    earned, maximum = points_text(points.total_earned, points.total_maximum)
    return (f"partial run: {len(ran)} of {len(scores)} graded tests, "
            f"{earned} of their {maximum} points; run `pytest` "
            "with no selection for your score")


#: The track table's title: it sums the per-track tests only, so it adds up to less than
#: the total.
TRACK_TABLE_TITLE = "track (per-track tests only)"


def score_table(scores: Sequence[TestScore], *, grader_failure: str | None = None
                ) -> list[str]:
    """The terminal table: score by function, then by track, then the total (or, when
    some graded tests did not run, what the run checked instead of a total; or, when the
    grader itself failed, that it failed, and no score)."""
    if grader_failure is not None:
        return [f"GRADER FAILED: {grader_failure}",
                "No score was given: this is the grader's failure, not the submission's. "
                "Please tell the course staff."]
    partial = partial_run(scores)
    points = written_points(scores)
    lines: list[str] = []
    for key, title in (("function", "function"), ("track", TRACK_TABLE_TITLE)):
        rows = points_rows(scores, points, key, title)
        if rows:
            lines += [*rows, ""]
    if partial is not None:
        lines.append(partial)
        return lines
    earned_text, maximum_text = points_text(points.total_earned, points.total_maximum)
    lines.append(f"TOTAL {earned_text} / {maximum_text}")
    return lines


def result_tags(test: Mapping[str, Any]) -> tuple[str, str]:
    """The function and track ("" when absent) a results.json test is tagged with
    (see :attr:`TestScore.tags`)."""
    tags = test.get("tags") or []
    return (str(tags[0]) if len(tags) > 0 else "", str(tags[1]) if len(tags) > 1 else "")


def read_grader_failure(path: Path) -> str | None:
    """The reason of the grader-failure record at ``path``, if that is what it holds."""
    try:
        return grader_failure(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def read_valid_results(path: Path) -> dict[str, Any] | None:
    """A results.json that is strict JSON and valid Gradescope output, else None."""
    def reject(constant: str) -> None:
        raise ValueError(constant)

    try:
        document = json.loads(path.read_text(encoding="utf-8"), parse_constant=reject)
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) and not gradescope_problems(document) \
        else None
