"""Gradebook import files (Canvas, Moodle, plain CSV) and the roster that names a class.

The Canvas and Moodle files are read back the way each LMS documents its CSV import:

- Canvas: "How do I import grades in the Gradebook?" (Canvas Instructor Guide; also
  https://teaching.resources.osu.edu/toolsets/carmencanvas/guides/calculating-final-grades/import-csv-file-carmen-grades)
  and Canvas's importer (instructure/canvas-lms, app/models/gradebook_importer.rb): the
  header starts ``Student``, ``ID``, then either ``Section`` or ``SIS User ID``, ``SIS
  Login ID`` and ``Section``; every later column is an assignment, ``Name`` or ``Name
  (assignment id)``; a row whose first cell holds ``Points Possible`` gives each
  assignment's points; a student is found by ``ID``, else ``SIS User ID``, else ``SIS
  Login ID``, else by name.
- Moodle: "Grade import" (https://docs.moodle.org/311/en/Grade_import): a CSV file with a
  header row; at import, "Map from" one column to a user field ("Email address" to
  useremail, "ID number" to useridnumber, or username), and each grade column to a grade
  item.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from helpers import CORPUS, CORPUS_EXPECTED

from graders.errors import GraderError
from graders.regrade.classlist import ClassList, Student, join, read_roster, with_submitters
from graders.regrade.gradebook import (
    FILE_NAMES,
    canvas_table,
    grades,
    lookup_warnings,
    moodle_table,
    write_gradebooks,
)
from graders.regrade.report import GradedSubmission
from graders.regrade.roster import ClassSubmission, Submitter

MAX = 100.0


def entry(ident: str, score: float, *people: Submitter, status: str = "graded"
          ) -> GradedSubmission:
    results = {"score": score, "tests": [{"name": "t", "score": score, "max_score": MAX}],
               "extra_data": {"max_score": MAX}}
    return GradedSubmission(ident, people, status, "", results if status == "graded" else {})


def read_csv(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"), newline="")))


# --- reading the files back as each LMS documents its import -------------------------


def canvas_import(rows: list[list[str]]) -> dict[str, object]:
    """What Canvas's gradebook import takes from ``rows`` (see the module's docstring):
    its student columns, the assignments (title, id), their points and each student's
    lookup keys and grade. Raises AssertionError where Canvas would refuse the file."""
    header = rows[0]
    assert len(header) > 3
    assert re.search("Student", header[0])
    assert re.search("ID", header[1])
    student_columns = 3
    if re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3]):
        student_columns += 2
    assert re.search("Section", header[student_columns - 1]), "Couldn't find header row"
    assignments = []
    for cell in header[student_columns:]:
        match = re.fullmatch(r"(.*) \((\d+)\)", cell)
        assignments.append((match.group(1), match.group(2)) if match else (cell, None))
    points: list[str] = []
    students = []
    for row in rows[1:]:
        if re.search("Points Possible", row[0]):
            points = row[student_columns:]
            continue
        students.append({"name": row[0], "id": row[1],
                         "sis_user_id": row[2] if student_columns == 5 else "",
                         "sis_login_id": row[3] if student_columns == 5 else "",
                         "grades": row[student_columns:]})
    return {"student_columns": student_columns, "assignments": assignments,
            "points": points, "students": students}


def moodle_import(rows: list[list[str]], map_from: str, grade_column: str
                  ) -> dict[str, str]:
    """Moodle's CSV import with "Map from" ``map_from`` and ``grade_column`` mapped to a
    grade item: each identifier's grade. A row with a blank identifier is skipped, as
    Moodle does; an unknown column is an error at mapping time."""
    header = rows[0]
    assert map_from in header
    assert grade_column in header
    key, grade = header.index(map_from), header.index(grade_column)
    assert all(len(row) == len(header) for row in rows[1:])
    return {row[key]: row[grade] for row in rows[1:] if row[key]}


# --- the class behind the files ------------------------------------------------------

ADA = Submitter(name="Ada Lovelace", sid="1001", email="ada@example.edu")
BOB = Submitter(name="Bob Babbage", sid="1002", email="bob@example.edu")
CY = Submitter(name="Cy Young", sid="1003", email="cy@example.edu")


def gradescope_class() -> list[GradedSubmission]:
    return [entry("submission_1", 92.5, ADA), entry("submission_2", 88.0, BOB, CY),
            entry("submission_3", 0.0, status="timed_out")]


def test_the_canvas_file_has_canvas_columns_a_points_possible_row_and_a_row_per_student(
        tmp_path: Path) -> None:
    entries = gradescope_class()
    written, warnings = write_gradebooks(tmp_path, entries, join(entries, None),
                                         ["canvas"], "Serving lab (4521)")
    assert written == [tmp_path / FILE_NAMES["canvas"]]
    rows = read_csv(written[0])
    assert rows[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    imported = canvas_import(rows)
    assert imported["student_columns"] == 5
    assert imported["assignments"] == [("Serving lab", "4521")]
    assert imported["points"] == ["100.0"]
    assert [(s["name"], s["sis_user_id"], s["grades"])  # type: ignore[index]
            for s in imported["students"]] == [  # type: ignore[attr-defined]
        ("Ada Lovelace", "1001", ["92.5"]), ("Bob Babbage", "1002", ["88.0"]),
        ("Cy Young", "1003", ["88.0"])]
    assert any("submission_3" in line and "no score" in line for line in warnings)
    assert written[0].read_bytes().count(b"\r\n") == len(rows)  # RFC 4180 line ends


def test_the_moodle_file_maps_by_email_or_id_number_to_the_grade_column(
        tmp_path: Path) -> None:
    entries = gradescope_class()
    written, _ = write_gradebooks(tmp_path, entries, join(entries, None), ["moodle"],
                                  "Serving lab")
    rows = read_csv(written[0])
    assert rows[0][:2] == ["Email address", "ID number"]
    assert moodle_import(rows, "Email address", "Serving lab") == {
        "ada@example.edu": "92.5", "bob@example.edu": "88.0", "cy@example.edu": "88.0"}
    assert moodle_import(rows, "ID number", "Serving lab") == {
        "1001": "92.5", "1002": "88.0", "1003": "88.0"}
    assert all(float(row[-1]) <= MAX for row in rows[1:])


def test_a_classroom_class_is_named_from_its_roster_in_every_gradebook(
        tmp_path: Path) -> None:
    roster = tmp_path / "classroom_roster.csv"
    roster.write_text('"identifier","github_username","github_id","name"\n'
                      '"ada@example.edu","ada","11","Ada Lovelace"\n'
                      '"1002","Bob-B","12","Bob Babbage"\n'
                      '"cy@example.edu","","","Cy Young"\n', encoding="utf-8")
    submissions = [ClassSubmission("serving-lab-ada", tmp_path),
                   ClassSubmission("serving-lab-bob-b", tmp_path),
                   ClassSubmission("serving-lab-zed", tmp_path)]
    classlist = join(submissions, read_roster(roster))
    named = with_submitters(submissions, classlist)
    assert [s.submitters for s in named] == [
        (Submitter("Ada Lovelace", "", "ada@example.edu"),),
        (Submitter("Bob Babbage", "1002", ""),), ()]
    assert any("serving-lab-zed" in line and "match no student" in line
               for line in classlist.warnings)
    assert any("Cy Young" in line and "no submission" in line for line in classlist.warnings)
    entries = [entry(s.id, 50.0 + i, *s.submitters) for i, s in enumerate(named)]
    written, warnings = write_gradebooks(tmp_path, entries, classlist,
                                         ["canvas", "moodle", "csv"])
    assert moodle_import(read_csv(tmp_path / FILE_NAMES["moodle"]), "Email address",
                         "Serving lab") == {"ada@example.edu": "50.0"}
    assert moodle_import(read_csv(tmp_path / FILE_NAMES["moodle"]), "ID number",
                         "Serving lab") == {"1002": "51.0"}
    plain = list(csv.DictReader(io.StringIO(
        (tmp_path / FILE_NAMES["csv"]).read_text(encoding="utf-8"))))
    assert [(row["name"], row["github_username"], row["score"]) for row in plain] == [
        ("Ada Lovelace", "ada", "50.0"), ("Bob Babbage", "Bob-B", "51.0"),
        ("Cy Young", "", "")]
    assert any("serving-lab-zed" in line and "no known student" in line
               for line in warnings)
    assert any("by name alone" in line for line in warnings)  # Ada has no SIS id


def test_usernames_that_end_alike_are_settled_by_the_class_prefix() -> None:
    roster = [Student(name="Ada", github="ada"), Student(name="Lab Ada", github="lab-ada"),
              Student(name="Bo", github="bo")]
    submissions = [ClassSubmission(name, Path()) for name in
                   ("serving-lab-ada", "serving-lab-bo")]
    classlist = join(submissions, roster)
    assert classlist.students["serving-lab-ada"] == (roster[0],)
    alone = join(submissions[:1], roster)  # no other repository tells the prefix
    assert "serving-lab-ada" not in alone.students
    assert any("more than one student" in line for line in alone.warnings)


def test_a_canvas_export_as_roster_gives_canvas_ids_and_skips_its_non_students(
        tmp_path: Path) -> None:
    roster = tmp_path / "export.csv"
    roster.write_text(
        "Student,ID,SIS User ID,SIS Login ID,Section,Lab 1 (77),Current Score\n"
        "    Points Possible,,,,,10,(read only)\n"
        '"Lovelace, Ada",4001,1001,ada,Section A,9,90\n'
        '"Student, Test",4999,,,Section A,,\n', encoding="utf-8")
    students = read_roster(roster)
    assert students == [Student(name="Lovelace, Ada", sid="1001", login="ada",
                                lms_id="4001", section="Section A")]
    entries = [entry("submission_1", 97.0, ADA)]
    classlist = join(entries, students)
    rows = canvas_table(grades(entries, classlist)[0], "Serving lab", MAX)
    imported = canvas_import(rows)
    assert imported["students"] == [{"name": "Lovelace, Ada", "id": "4001",
                                     "sis_user_id": "1001", "sis_login_id": "ada",
                                     "grades": ["97.0"]}]


def test_a_gradescope_roster_keeps_students_only_and_joins_first_and_last_names(
        tmp_path: Path) -> None:
    roster = tmp_path / "roster.csv"
    roster.write_text("First Name,Last Name,Email,SID,Role\n"
                      "Ada,Lovelace,ada@example.edu,1001,Student\n"
                      "Tess,Ta,ta@example.edu,,TA\n", encoding="utf-8")
    assert read_roster(roster) == [Student(name="Ada Lovelace", sid="1001",
                                           email="ada@example.edu")]


def test_a_roster_with_no_identifying_column_is_refused_naming_the_formats(
        tmp_path: Path) -> None:
    roster = tmp_path / "roster.csv"
    roster.write_text("Name,Team\nAda,1\n", encoding="utf-8")
    with pytest.raises(GraderError, match="no column that identifies a student"):
        read_roster(roster)


def test_a_student_with_scores_in_two_submissions_is_left_out_not_guessed() -> None:
    entries = [entry("submission_1", 90.0, ADA), entry("submission_2", 40.0, ADA, BOB)]
    chosen, warnings = grades(entries, join(entries, None))
    assert [grade.student.sid for grade in chosen] == ["1002"]
    assert any("Ada Lovelace" in line and "2 submissions" in line for line in warnings)


def test_cells_that_a_spreadsheet_would_evaluate_are_neutralised() -> None:
    evil = Submitter(name="=HYPERLINK(\"x\")", sid="1", email="e@x")
    entries = [entry("s", 1.0, evil)]
    chosen, _ = grades(entries, join(entries, None))
    assert canvas_table(chosen, "+lab", MAX)[2][0] == "'=HYPERLINK(\"x\")"
    assert moodle_table(chosen, "+lab")[0][-1] == "'+lab"


def test_without_a_roster_the_submitters_are_the_students() -> None:
    entries = gradescope_class()
    classlist = join(entries, None)
    assert classlist == ClassList({
        "submission_1": (Student("Ada Lovelace", "1001", "ada@example.edu"),),
        "submission_2": (Student("Bob Babbage", "1002", "bob@example.edu"),
                         Student("Cy Young", "1003", "cy@example.edu"))}, (), ())


def test_moodle_is_warned_of_when_no_one_column_identifies_every_student() -> None:
    entries = [entry("a", 1.0, Submitter(name="A", email="a@x")),
               entry("b", 2.0, Submitter(name="B", sid="2"))]
    chosen, _ = grades(entries, join(entries, None))
    assert any("Email address 1, ID number 1, Username 0" in line
               for line in lookup_warnings(chosen, ["moodle"]))
    chosen, _ = grades(gradescope_class(), join(gradescope_class(), None))
    assert lookup_warnings(chosen, ["moodle", "canvas"]) == []  # all have email and SID


# --- as an instructor runs it ----------------------------------------------------------


@pytest.mark.slow
def test_a_classroom_regrade_writes_gradebooks_that_canvas_and_moodle_read() -> None:
    base = Path(tempfile.mkdtemp(prefix="gradebook-test-", dir="/tmp"))
    try:
        base.chmod(0o755)
        for repository, bug in (("serving-lab-ada", "correct"),
                                ("serving-lab-bob", "cache_ceil")):
            (base / "class" / repository).mkdir(parents=True)
            shutil.copy(CORPUS / bug / "serving.py", base / "class" / repository)
        (base / "roster.csv").write_text(
            '"identifier","github_username","github_id","name"\n'
            '"ada@example.edu","ada","1","Ada Lovelace"\n'
            '"bob@example.edu","bob","2","Bob Babbage"\n', encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
        result = subprocess.run(
            [sys.executable, "-m", "graders", "regrade", "class", "--out", "out",
             "--jobs", "2", "--no-histogram", "--roster", "roster.csv",
             "--gradebook", "canvas", "--gradebook", "moodle",
             "--gradebook-column", "Serving lab (4521)"],
            cwd=base, env=env, capture_output=True, text=True, timeout=600, check=False)
        assert result.returncode == 0, result.stderr[-3000:]
        bob = str(CORPUS_EXPECTED["cache_ceil"].score)
        canvas = canvas_import(read_csv(base / "out" / FILE_NAMES["canvas"]))
        assert canvas["assignments"] == [("Serving lab", "4521")]
        assert canvas["points"] == ["100.0"]
        assert [(s["name"], s["grades"]) for s in canvas["students"]] == [  # type: ignore
            ("Ada Lovelace", ["100.0"]), ("Bob Babbage", [bob])]
        assert moodle_import(read_csv(base / "out" / FILE_NAMES["moodle"]), "Email address",
                             "Serving lab (4521)") == {"ada@example.edu": "100.0",
                                                       "bob@example.edu": bob}
        assert "gradebook-canvas.csv" in result.stdout
        assert "by name alone" in result.stderr  # a Classroom roster has no Canvas ids
    finally:
        shutil.rmtree(base, ignore_errors=True)
