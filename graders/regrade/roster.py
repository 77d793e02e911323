"""The submissions of a class: a Gradescope export, a folder of folders, or of ``*.py`` files.

A Gradescope "export submissions" folder holds one folder per submission (for example
``submission_123456``) and ``submission_metadata.yml``, which maps each folder to its
submitters. That file is read with PyYAML's ``safe_load``; when it cannot be read, the
folder names are the only ids and a warning says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from graders.errors import SubmissionError
from graders.sandbox.submission import SKIPPED_FOLDERS, locate_submission

METADATA_NAME = "submission_metadata.yml"


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

    Each folder is a submission, and so is each ``*.py`` file; hidden entries,
    ``__MACOSX`` and ``exclude`` (the output folder, if it lies inside) are skipped.
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
        if entry.suffix == ".py" and not entry.is_dir():
            ident = entry.stem
        elif entry.is_dir() or entry.is_symlink():  # a link is listed, and refused when read
            ident = entry.name
        else:
            continue
        if ident in found:
            raise SubmissionError(f"two submissions have the id {ident!r}: "
                                  f"{found[ident].path.name} and {entry.name}; rename one")
        found[ident] = ClassSubmission(ident, entry, people.get(entry.name, ()),
                                       *times.get(entry.name, ("", "")))
    missing = sorted(set(people) - {s.path.name for s in found.values()})
    if missing:
        warnings.append(f"{METADATA_NAME} lists {len(missing)} folder(s) that do not exist: "
                        + ", ".join(missing[:5]))
    return sorted(found.values(), key=lambda s: s.id), warnings


def submission_file(submission: ClassSubmission) -> Path:
    """The ``serving.py`` of a submission (see
    :func:`graders.sandbox.submission.locate_submission`)."""
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
