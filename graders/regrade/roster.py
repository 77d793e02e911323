"""The submissions of a class: a Gradescope export, a folder of folders, or of ``*.py`` files.

A Gradescope "export submissions" folder holds one folder per submission (for example
``submission_123456``) and ``submission_metadata.yml``, which maps each folder to its
submitters. That file is read with PyYAML's ``safe_load``; when it cannot be read, the
folder names are the only ids and a warning says why. The export unzips to one folder
(``assignment_N_export/``): a folder holding just that is read as the export inside it
(:func:`export_inside`).

A submission's id is its file or folder name as text: bytes that are not UTF-8 (a name
from a Latin-1 archive) are shown as visible escapes (``R\\xe9sum\\xe9``), so that every
output can be written and read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml

from graders.errors import SubmissionError
from graders.plugin.submission import SKIPPED_FOLDERS, locate_submission

METADATA_NAME = "submission_metadata.yml"
#: The files that mark a folder as a regrade's output (``--out``), never a submission.
REGRADE_OUTPUT_FILES = ("run.json", "grades.csv")


@dataclass(frozen=True)
class Submitter:
    """One person behind a submission, as Gradescope lists them."""

    name: str = ""
    sid: str = ""
    email: str = ""


@dataclass(frozen=True)
class ClassSubmission:
    """One submission of the class: its id, where it is, and who made it."""

    id: str
    path: Path
    submitters: tuple[Submitter, ...] = ()
    #: When it was submitted and when it was due, as the metadata says ("" if unknown).
    created_at: str = ""
    due: str = ""


def discover(root: Path, *, exclude: Path | None = None
             ) -> tuple[list[ClassSubmission], list[str]]:
    """The submissions below ``root`` sorted by id, and warnings about what was skipped.

    Each folder is a submission, and so is each file (a ``*.py`` one is graded; any other,
    a notebook or a zip as an LMS download holds them, gets its row and the reason it
    cannot be graded); hidden entries, ``__MACOSX``, the metadata file and ``exclude``
    (the output folder, if it lies inside) are skipped, and a README file and an earlier
    regrade's output folder too, each with a warning.
    """
    if not root.is_dir():
        raise SubmissionError(f"submissions folder {str(root)!r} is not a folder")
    warnings: list[str] = []
    people: dict[str, tuple[Submitter, ...]] = {}
    times: dict[str, tuple[str, str]] = {}
    metadata = root / METADATA_NAME
    if metadata.is_file():
        try:
            text = metadata.read_text(encoding="utf-8")
            people, times = parse_submission_metadata(text), submission_times(text)
        except (OSError, UnicodeDecodeError, ValueError) as error:
            warnings.append(f"{METADATA_NAME} cannot be read ({error}); folder names are "
                            "the submission ids")
    excluded = exclude.resolve() if exclude is not None else None
    found: dict[str, ClassSubmission] = {}
    for entry in sorted(root.iterdir()):
        if entry.name.startswith(".") or entry.name in SKIPPED_FOLDERS \
                or entry.resolve() == excluded:
            continue
        if is_regrade_output(entry):  # an earlier --out inside the class: said, not graded
            warnings.append(f"{visible_name(entry.name)} is an earlier regrade's output "
                            f"({' and '.join(REGRADE_OUTPUT_FILES)} in it), not a submission: "
                            "left out; move it out of the submissions folder")
            continue
        if entry.suffix == ".py" and not entry.is_dir():
            ident = visible_name(entry.stem)
        elif entry.is_dir() or entry.is_symlink():  # a link is listed, and refused when read
            ident = visible_name(entry.name)
        elif entry.name == METADATA_NAME:
            continue
        elif entry.stem.lower() == "readme":  # the class folder's own notes: said, not graded
            warnings.append(f"{visible_name(entry.name)} is taken as the folder's notes, "
                            "not a submission")
            continue
        else:  # an LMS download's other files (a notebook, a zip, serving.PY): rejected,
            ident = visible_name(entry.stem)  # with the reason, never dropped unsaid
        if ident in found:
            raise SubmissionError(f"two submissions have the id {ident!r}: "
                                  f"{visible_name(found[ident].path.name)} and "
                                  f"{visible_name(entry.name)}; rename one")
        folder = visible_name(entry.name)  # as the metadata (UTF-8) names it
        found[ident] = ClassSubmission(ident, entry, people.get(folder, ()),
                                       *times.get(folder, ("", "")))
    missing = sorted(set(people) - {visible_name(s.path.name) for s in found.values()})
    if missing:
        warnings.append(f"{METADATA_NAME} lists {len(missing)} folder(s) that do not exist: "
                        + ", ".join(missing[:5]))
    return sorted(found.values(), key=lambda s: s.id), warnings


def file_name(ident: str) -> str:
    """The name of a file or folder named after the id ``ident``: its UTF-8 bytes, as
    this locale's file names hold them (so any locale finds the same one)."""
    return os.fsdecode(ident.encode("utf-8"))


def visible_name(name: str) -> str:
    """A file name as text that can be written anywhere: its bytes read as UTF-8 whatever
    the locale (a Latin-1 one would read ``gina lópez`` as ``gina lÃ³pez``), and the
    bytes that are not UTF-8 as visible ``\\xNN`` escapes."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def is_regrade_output(entry: Path) -> bool:
    """Whether ``entry`` is a folder a regrade wrote its outputs into (not a link)."""
    return entry.is_dir() and not entry.is_symlink() and all(
        (entry / name).is_file() for name in REGRADE_OUTPUT_FILES)


def export_inside(root: Path, *, exclude: Path | None = None) -> Path | None:
    """The Gradescope export folder that ``root`` holds, when ``root`` is the folder
    "Export Submissions" unzipped into: no ``submission_metadata.yml`` of its own and
    exactly one folder with one (anything else that could be a submission beside it is
    an error; an earlier regrade's output folder is not). None when ``root`` is itself
    the class."""
    if not root.is_dir() or (root / METADATA_NAME).is_file():
        return None
    excluded = exclude.resolve() if exclude is not None else None
    entries = [entry for entry in sorted(root.iterdir())
               if not entry.name.startswith(".") and entry.name not in SKIPPED_FOLDERS
               and entry.resolve() != excluded and (entry.is_dir() or entry.suffix == ".py")
               and not is_regrade_output(entry)]
    exports = [entry for entry in entries
               if not entry.is_symlink() and (entry / METADATA_NAME).is_file()]
    if not exports:
        return None
    names = ", ".join(repr(visible_name(entry.name)) for entry in exports)
    if len(exports) > 1:
        raise SubmissionError(f"{visible_name(str(root))!r} holds {len(exports)} Gradescope "
                              f"exports ({names}); regrade each folder on its own")
    others = [visible_name(entry.name) for entry in entries if entry != exports[0]]
    if others:
        shown = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
        raise SubmissionError(f"{visible_name(str(root))!r} holds the Gradescope export "
                              f"{names} and {len(others)} other submission(s) beside it "
                              f"({shown}); pass the export folder itself, or move them in")
    return exports[0]


class _Submitted(Protocol):
    """A submission and its submitters (a :class:`ClassSubmission` or a graded one)."""

    @property
    def id(self) -> str: ...

    @property
    def submitters(self) -> tuple[Submitter, ...]: ...


def duplicate_sid_warnings(submissions: Iterable[_Submitted]) -> list[str]:
    """One line per SID that appears in more than one submission, naming the SID, the
    person and every such submission. The rule: each submission keeps its rows in
    grades.csv (nothing is dropped or merged); the instructor decides which counts."""
    seen: dict[str, list[tuple[str, str]]] = {}
    for submission in submissions:
        for person in submission.submitters:
            if person.sid:
                seen.setdefault(person.sid, []).append((submission.id, person.name))
    warnings = []
    for sid, places in seen.items():
        idents = list(dict.fromkeys(ident for ident, _ in places))
        if len(idents) > 1:
            names = " / ".join(dict.fromkeys(name for _, name in places if name))
            warnings.append(f"SID {sid}{f' ({names})' if names else ''} is in "
                            f"{len(idents)} submissions: {', '.join(idents)}; grades.csv "
                            "has a row for each: keep the one that counts")
    return warnings


def submission_file(submission: ClassSubmission) -> Path:
    """The ``serving.py`` of a submission (see
    :func:`graders.plugin.submission.locate_submission`)."""
    return locate_submission(submission.path)


def parse_submission_metadata(text: str) -> dict[str, tuple[Submitter, ...]]:
    """Map each folder of Gradescope's ``submission_metadata.yml`` to its submitters.

    The file is YAML whose keys are Ruby symbols (``:submitters:``, ``:name:``): each
    top-level folder key holds a ``:submitters:`` list of ``:name:``, ``:sid:`` and
    ``:email:`` entries; every other key is ignored. Every value is read as the text
    written (PyYAML's ``BaseLoader``, no type resolution): an unquoted ``:sid: 0012346``
    stays ``"0012346"``, not the octal number 5350. Raises ValueError when the file is not
    YAML or names no folder.
    """
    document = _document(text)
    folders: dict[str, tuple[Submitter, ...]] = {}
    for folder, entry in document.items():
        submitters = _field(entry, "submitters")
        people = submitters if isinstance(submitters, list) else []
        folders[str(folder)] = tuple(
            Submitter(**{key: str(value) for key in ("name", "sid", "email")
                         if (value := _field(person, key)) not in (None, "")})
            for person in people if isinstance(person, dict))
    return folders


def _field(mapping: object, key: str) -> object:
    """``mapping[":key"]`` (Gradescope writes Ruby symbols) or ``mapping["key"]``."""
    if not isinstance(mapping, dict):
        return None
    return mapping.get(f":{key}", mapping.get(key))


def _document(text: str) -> dict[Any, Any]:
    """The metadata as nested dicts, lists and strings (see
    :func:`parse_submission_metadata`)."""
    try:
        document = yaml.load(text, Loader=yaml.BaseLoader)  # noqa: S506 - BaseLoader builds only str, list and dict
    except yaml.YAMLError as error:
        raise ValueError(f"it is not YAML ({str(error).splitlines()[0]})") from None
    if not isinstance(document, dict) or not document:
        raise ValueError("no submission folders found in it")
    return document


def submission_times(text: str) -> dict[str, tuple[str, str]]:
    """Map each folder to (``:created_at:``, the due date) as written; the due date is the
    folder's ``:due_date:``, or its ``:assignment:``'s (Gradescope's per-submission
    metadata), "" when neither is there."""
    times: dict[str, tuple[str, str]] = {}
    for folder, entry in _document(text).items():
        created, due = _field(entry, "created_at"), _field(entry, "due_date")
        if not isinstance(due, str):
            due = _field(_field(entry, "assignment"), "due_date")
        times[str(folder)] = (created if isinstance(created, str) else "",
                              due if isinstance(due, str) else "")
    return times
