"""The students of a class, from a roster file, joined to the class's submissions.

A roster is a CSV file with a header row. Its columns are found by name, whatever their
case and order:

- GitHub Classroom's roster (``identifier``, ``github_username``, ``github_id``,
  ``name``): the ``identifier`` is the email when it holds an ``@``, else the student id;
- Gradescope's roster (``Name`` or ``First Name`` and ``Last Name``, ``Email``, ``SID``,
  ``Role``: only students are kept), or any list with such columns (``Email address``,
  ``ID number``, ``Username`` as Moodle exports them);
- Canvas's gradebook export (``Student``, ``ID``, ``SIS User ID``, ``SIS Login ID``,
  ``Section``): its ``Points Possible`` row and the Test Student are skipped.

A submission is joined to its students by its submitters (a Gradescope export: by SID,
else email, else name) or, when it has none, by its id: equal to a student's GitHub
username, SID, email or login, or, as GitHub Classroom names repositories, the
assignment's prefix, ``-`` and the GitHub username (``serving-lab-ada``).
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from graders.errors import GraderError
from graders.regrade.roster import ClassSubmission, Submitter


@dataclass(frozen=True)
class Student:
    """One student as the gradebooks know them ("" where the roster does not say)."""

    name: str = ""
    #: The institution's student id: Canvas's SIS User ID, Moodle's ID number.
    sid: str = ""
    email: str = ""
    #: The LMS login: Canvas's SIS Login ID, Moodle's username.
    login: str = ""
    #: Canvas's own user id (the ``ID`` column of its gradebook export).
    lms_id: str = ""
    section: str = ""
    github: str = ""

    def submitter(self) -> Submitter:
        """This student as grades.csv lists a submitter."""
        return Submitter(name=self.name, sid=self.sid, email=self.email)


#: The roster's header names (lower case) that each field is read from, first found wins.
_COLUMNS: Mapping[str, tuple[str, ...]] = {
    "name": ("name", "full name", "student", "student name"),
    "sid": ("sid", "student id", "sis user id", "id number", "student number"),
    "email": ("email", "email address", "e-mail"),
    "login": ("sis login id", "username", "login", "login id"),
    "section": ("section", "sections"),
    "github": ("github_username", "github username"),
}
_FIRST, _LAST = ("first name", "firstname", "given name"), ("last name", "lastname", "surname")
#: Rows of a Canvas gradebook export that are not students.
_NOT_STUDENTS = ("points possible", "student, test", "test student")


def read_roster(path: Path) -> list[Student]:
    """The students listed in the roster CSV at ``path`` (see the module's docstring).

    Raises GraderError, naming the file, when it cannot be read, has no header row or no
    column that identifies a student."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise GraderError(f"--roster {str(path)!r} cannot be read: {error}") from None
    rows = list(csv.reader(text.splitlines()))
    if not rows:
        raise GraderError(f"--roster {str(path)!r} is empty: expected a CSV file with a "
                          "header row")
    header = [cell.strip().lower() for cell in rows[0]]
    columns = {field: next((header.index(name) for name in names if name in header), None)
               for field, names in _COLUMNS.items()}
    identifier = header.index("identifier") if "identifier" in header else None
    canvas_id = header.index("id") if "id" in header and "student" in header else None
    first = next((header.index(name) for name in _FIRST if name in header), None)
    last = next((header.index(name) for name in _LAST if name in header), None)
    role = header.index("role") if "role" in header else None
    if all(columns[field] is None for field in ("sid", "email", "login", "github")) \
            and identifier is None and canvas_id is None:
        raise GraderError(
            f"--roster {str(path)!r} has no column that identifies a student (its header: "
            f"{', '.join(rows[0][:8])}): expected GitHub Classroom's roster (identifier, "
            "github_username, github_id, name), Gradescope's (Name, Email, SID) or Canvas's "
            "gradebook export (Student, ID, SIS User ID, SIS Login ID, Section)")

    def cell(row: Sequence[str], index: int | None) -> str:
        return row[index].strip() if index is not None and index < len(row) else ""

    students = []
    for row in rows[1:]:
        values = {field: cell(row, index) for field, index in columns.items()}
        if not values["name"]:
            values["name"] = " ".join(part for part in (cell(row, first), cell(row, last))
                                      if part)
        if values["name"].lower() in _NOT_STUDENTS \
                or values["name"].lower().startswith("points possible"):
            continue
        if role is not None and cell(row, role).lower() not in ("", "student"):
            continue  # Gradescope lists its staff too
        ident = cell(row, identifier)
        if ident and "@" in ident and not values["email"]:
            values["email"] = ident
        elif ident and not values["sid"]:
            values["sid"] = ident
        student = Student(lms_id=cell(row, canvas_id), **values)
        if any((student.sid, student.email, student.login, student.github, student.lms_id)):
            students.append(student)
    return students


class _Submitted(Protocol):
    """A submission and its submitters (a ClassSubmission or a GradedSubmission)."""

    @property
    def id(self) -> str: ...

    @property
    def submitters(self) -> tuple[Submitter, ...]: ...


@dataclass(frozen=True)
class ClassList:
    """Who made each submission, and what the join could not settle."""

    #: Each submission id's students (absent: nobody is known for it).
    students: Mapping[str, tuple[Student, ...]]
    #: Roster students that no submission was joined to.
    without_submission: tuple[Student, ...]
    warnings: tuple[str, ...]


def join(submissions: Sequence[_Submitted], roster: Sequence[Student] | None) -> ClassList:
    """Join each submission to its students: by its submitters, found in the roster when
    there is one, else by its id (see the module's docstring). Without a roster, the
    submitters alone are its students."""
    found: dict[str, tuple[Student, ...]] = {}
    if roster is None:
        for submission in submissions:
            if submission.submitters:
                found[submission.id] = tuple(_from_submitter(person)
                                             for person in submission.submitters)
        return ClassList(found, (), ())
    warnings: list[str] = []
    by_id: dict[str, list[Student]] = {}
    for submission in submissions:
        if submission.submitters:
            found[submission.id] = tuple(_in_roster(person, roster)
                                         for person in submission.submitters)
        else:
            by_id[submission.id] = _id_matches(submission.id, roster)
    prefixes = Counter(_prefix(ident, matches[0]) for ident, matches in by_id.items()
                       if len(matches) == 1)
    unmatched, ambiguous = [], []
    common = prefixes.most_common(1)[0][0] if prefixes else None
    for ident, matches in by_id.items():
        if len(matches) > 1:  # usernames that end alike: the class's common prefix decides
            settled = [student for student in matches if _prefix(ident, student) == common]
            matches = settled if len(settled) == 1 else matches
        if len(matches) == 1:
            found[ident] = (matches[0],)
        elif matches:
            ambiguous.append(ident)
        else:
            unmatched.append(ident)
    if unmatched:
        warnings.append(f"{len(unmatched)} submission(s) match no student of the roster: "
                        + _some(unmatched))
    if ambiguous:
        warnings.append(f"{len(ambiguous)} submission(s) match more than one student of the "
                        "roster: " + _some(ambiguous))
    joined = {student for people in found.values() for student in people}
    missing = tuple(student for student in roster if student not in joined)
    if missing:
        warnings.append(f"{len(missing)} student(s) of the roster have no submission: "
                        + _some([_label(student) for student in missing]))
    return ClassList(found, missing, tuple(warnings))


def with_submitters(submissions: Sequence[ClassSubmission], classlist: ClassList
                    ) -> list[ClassSubmission]:
    """``submissions``, each one that has no submitters given its students from the join
    (so that grades.csv names the students of a GitHub Classroom class)."""
    return [replace(submission, submitters=tuple(
                student.submitter() for student in classlist.students[submission.id]))
            if not submission.submitters and submission.id in classlist.students
            else submission for submission in submissions]


def _from_submitter(person: Submitter) -> Student:
    return Student(name=person.name, sid=person.sid, email=person.email)


def _in_roster(person: Submitter, roster: Sequence[Student]) -> Student:
    """``person`` as the roster knows them (by SID, else email, else name), with the
    submitter's own fields where the roster's are empty; the submitter alone if absent."""
    own = _from_submitter(person)
    for key, value in (("sid", person.sid), ("email", person.email.casefold()),
                       ("name", person.name.casefold())):
        if not value:
            continue
        for student in roster:
            theirs = getattr(student, key)
            if (theirs.casefold() if key != "sid" else theirs) == value:
                return replace(student, **{field: getattr(own, field)
                                           for field in ("name", "sid", "email")
                                           if getattr(own, field)
                                           and not getattr(student, field)})
    return own


def _id_matches(ident: str, roster: Sequence[Student]) -> list[Student]:
    """The roster students a submission id names: exactly (a GitHub username, SID, email
    or login), else as the end of a Classroom repository name (``PREFIX-username``)."""
    key = ident.casefold()
    exact = [student for student in roster
             if key in {value.casefold() for value in (student.github, student.sid,
                                                       student.email, student.login)
                        if value}]
    if exact:
        return exact
    return [student for student in roster
            if student.github and key.endswith("-" + student.github.casefold())]


def _prefix(ident: str, student: Student) -> str:
    """The assignment prefix of a Classroom repository name (``serving-lab`` of
    ``serving-lab-ada``), "" when the id is not one."""
    github = student.github.casefold()
    return ident[:-len(github) - 1] if github and ident.casefold().endswith("-" + github) \
        else ""


def _label(student: Student) -> str:
    return student.name or student.github or student.email or student.sid or student.login


def _some(labels: Sequence[str], shown: int = 5) -> str:
    return ", ".join(labels[:shown]) + (f", ... ({len(labels) - shown} more)"
                                        if len(labels) > shown else "")
