"""Gradebook import files: a class's scores in the CSV layout an LMS imports.

- ``canvas`` (``gradebook-canvas.csv``): Canvas's gradebook CSV, as Grades → Import
  reads it: the columns ``Student``, ``ID``, ``SIS User ID``, ``SIS Login ID`` and
  ``Section``, then one assignment column (``Name`` or ``Name (assignment id)``), a
  ``Points Possible`` row, then a row per student. Canvas finds each student by ``ID``,
  else ``SIS User ID``, else ``SIS Login ID``, else by name.
- ``moodle`` (``gradebook-moodle.csv``): for Moodle's Grades → Import → CSV file, which
  maps one identifier column to a user field (``Email address`` to email address, ``ID
  number`` to ID number, or ``Username`` to username) and the grade column to a grade
  item, when the file is imported.
- ``csv`` (``gradebook.csv``): every student of the roster, with or without a
  submission, for any other LMS or spreadsheet.

A score is the submission's points (out of ``max_score``). A submission that has no
score (the grader failed or ran out of time), or no known student, is left out, and so
is a student found in two submissions with a score each: each is said in a warning,
never guessed. Every text cell is safe in a spreadsheet
(:func:`graders.escaping.for_csv_cell`).
"""

from __future__ import annotations

import csv
import io
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from graders.escaping import for_csv_cell
from graders.regrade.classlist import ClassList, Student
from graders.regrade.report import SCORED, GradedSubmission, max_score

FORMATS = ("canvas", "moodle", "csv")
FILE_NAMES = {"canvas": "gradebook-canvas.csv", "moodle": "gradebook-moodle.csv",
              "csv": "gradebook.csv"}
DEFAULT_COLUMN = "Serving lab"
#: Canvas's columns before the assignments, in the order its importer requires.
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_POINTS_ROW = "Points Possible"
#: The identifier columns of the Moodle file, as Moodle's own export names them.
MOODLE_COLUMNS = ("Email address", "ID number", "Username", "Full name")


@dataclass(frozen=True)
class Grade:
    """One student's score, from one submission."""

    student: Student
    submission: str
    score: float


def grades(entries: Sequence[GradedSubmission], classlist: ClassList
           ) -> tuple[list[Grade], list[str]]:
    """A grade per student of every scored submission, and a line for each submission or
    student left out (see the module's docstring)."""
    unscored = [entry.id for entry in entries if entry.status not in SCORED]
    unknown = [entry.id for entry in entries
               if entry.status in SCORED and not classlist.students.get(entry.id)]
    found = [Grade(student, entry.id, entry.score) for entry in entries
             if entry.status in SCORED for student in classlist.students.get(entry.id, ())]
    seen: dict[Student, list[str]] = {}
    for grade in found:
        seen.setdefault(grade.student, []).append(grade.submission)
    twice = {student: idents for student, idents in seen.items() if len(idents) > 1}
    warnings = []
    if unscored:
        warnings.append(f"{len(unscored)} submission(s) have no score and are left out of "
                        f"the gradebook: {_some(unscored)}; regrade them first")
    if unknown:
        warnings.append(f"{len(unknown)} submission(s) have no known student and are left "
                        f"out of the gradebook: {_some(unknown)}; pass --roster (GitHub "
                        "Classroom's or Gradescope's roster CSV) to name them")
    warnings += [f"{_label(student)} has a score in {len(idents)} submissions "
                 f"({', '.join(idents)}) and is left out of the gradebook: enter the one "
                 "that counts by hand" for student, idents in twice.items()]
    return [grade for grade in found if grade.student not in twice], warnings


def canvas_table(chosen: Sequence[Grade], column: str, maximum: float | None
                 ) -> list[list[str]]:
    """Canvas's gradebook CSV: the header, the Points Possible row and a row per grade."""
    blank = [""] * (len(CANVAS_COLUMNS) - 1)
    return [[*CANVAS_COLUMNS, for_csv_cell(column)],
            [CANVAS_POINTS_ROW, *blank, "" if maximum is None else _points(maximum)],
            *([*map(for_csv_cell, (grade.student.name, grade.student.lms_id,
                                   grade.student.sid, grade.student.login,
                                   grade.student.section)), _points(grade.score)]
              for grade in chosen)]


def moodle_table(chosen: Sequence[Grade], column: str) -> list[list[str]]:
    """The Moodle import file: its identifier columns, then the grade column."""
    return [[*MOODLE_COLUMNS, for_csv_cell(column)],
            *([*map(for_csv_cell, (grade.student.email, grade.student.sid,
                                   grade.student.login, grade.student.name)),
               _points(grade.score)] for grade in chosen)]


def plain_table(chosen: Sequence[Grade], classlist: ClassList, maximum: float | None
                ) -> list[list[str]]:
    """Every student: those with a grade, then the roster's without a submission."""
    rows = [["name", "sid", "email", "login", "section", "github_username", "submission",
             "score", "max_score"]]
    limit = "" if maximum is None else _points(maximum)
    for grade in chosen:
        rows.append([*_identity(grade.student), for_csv_cell(grade.submission),
                     _points(grade.score), limit])
    for student in classlist.without_submission:
        rows.append([*_identity(student), "", "", limit])
    return rows


def lookup_warnings(chosen: Sequence[Grade], formats: Sequence[str]) -> list[str]:
    """What the LMS will not be able to match: students Canvas can find by name alone,
    students with no identifier Moodle can map."""
    warnings = []
    if "canvas" in formats:
        by_name = [grade for grade in chosen if not any(
            (grade.student.lms_id, grade.student.sid, grade.student.login))]
        if by_name:
            warnings.append(f"{len(by_name)} student(s) have no Canvas ID, SIS User ID or "
                            "SIS Login ID: Canvas matches them by name alone; pass Canvas's "
                            "gradebook export (Grades → Export) as --roster to match by ID")
    if "moodle" in formats and chosen:
        covered = {column: sum(bool(getattr(grade.student, field)) for grade in chosen)
                   for column, field in zip(MOODLE_COLUMNS[:3], ("email", "sid", "login"),
                                            strict=True)}
        if max(covered.values()) < len(chosen):  # Moodle maps one column for every row
            warnings.append(
                f"no column of {FILE_NAMES['moodle']} identifies all {len(chosen)} "
                "students, and Moodle matches by one: "
                + ", ".join(f"{column} {count}" for column, count in covered.items())
                + "; give every student of the roster the same kind of identifier")
    return warnings


def write_gradebooks(out: Path, entries: Sequence[GradedSubmission], classlist: ClassList,
                     formats: Sequence[str], column: str = DEFAULT_COLUMN
                     ) -> tuple[list[Path], list[str]]:
    """Write a file per format in ``formats`` into ``out``; return the paths and the
    warnings (what was left out, what the LMS may not match)."""
    chosen, warnings = grades(entries, classlist)
    maximum = max_score(entries)
    tables = {"canvas": lambda: canvas_table(chosen, column, maximum),
              "moodle": lambda: moodle_table(chosen, column),
              "csv": lambda: plain_table(chosen, classlist, maximum)}
    written = []
    for name in dict.fromkeys(formats):
        path = out / FILE_NAMES[name]
        _write_rows(path, tables[name]())
        written.append(path)
    return written, [*warnings, *lookup_warnings(chosen, formats)]


def _identity(student: Student) -> list[str]:
    return [for_csv_cell(value) for value in (student.name, student.sid, student.email,
                                              student.login, student.section,
                                              student.github)]


def _write_rows(path: Path, rows: Sequence[Sequence[str]]) -> None:
    """Write ``rows`` as CSV (RFC 4180, CRLF line ends, UTF-8), atomically."""
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(handle, "w", encoding="utf-8", errors="backslashreplace",
                   newline="") as stream:
        stream.write(buffer.getvalue())
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)


def _points(value: float) -> str:
    return repr(round(value, 6))


def _label(student: Student) -> str:
    return student.name or student.github or student.email or student.sid or student.login


def _some(labels: Sequence[str], shown: int = 5) -> str:
    return ", ".join(labels[:shown]) + (f", ... ({len(labels) - shown} more)"
                                        if len(labels) > shown else "")


def gradebook_outputs(out: Path, entries: Sequence[GradedSubmission], classlist: ClassList,
                      formats: Sequence[str], column: str = DEFAULT_COLUMN
                      ) -> tuple[list[Path], list[str], list[str]]:
    """:func:`write_gradebooks`, guarded as the regrade's other outputs are: the paths
    written, the warnings, and a line when writing failed (never fatal to the rest)."""
    if not formats:
        return [], [], []
    try:
        written, warnings = write_gradebooks(out, entries, classlist, formats, column)
    except Exception as error:  # a bug of the grader's, or a full disk: said, not fatal
        return [], [], [f"writing the gradebook files failed: {type(error).__name__}: "
                        f"{error}"]
    return written, warnings, []
