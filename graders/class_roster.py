"""The submissions of a class: a Gradescope export, a folder of folders, or of ``*.py`` files.

A Gradescope "export submissions" folder holds one folder per submission (for example
``submission_123456``) and ``submission_metadata.yml``, which maps each folder to its
submitters. That file is read by a small parser of its known shape (no PyYAML needed);
when it cannot be read, the folder names are the only ids and a warning says why.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from graders.errors import SubmissionError
from graders.submission import SKIPPED_FOLDERS, locate_submission

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
    metadata = root / METADATA_NAME
    if metadata.is_file():
        try:
            people = parse_submission_metadata(metadata.read_text(encoding="utf-8"))
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
        found[ident] = ClassSubmission(ident, entry, people.get(entry.name, ()))
    missing = sorted(set(people) - {s.path.name for s in found.values()})
    if missing:
        warnings.append(f"{METADATA_NAME} lists {len(missing)} folder(s) that do not exist: "
                        + ", ".join(missing[:5]))
    return sorted(found.values(), key=lambda s: s.id), warnings


def submission_file(submission: ClassSubmission) -> Path:
    """The ``serving.py`` of a submission (see :func:`graders.submission.locate_submission`)."""
    return locate_submission(submission.path)


_TOP_KEY = re.compile(r"^(?P<key>[^\s#][^:]*|'[^']*'|\"[^\"]*\"):\s*$")
_FIELD = re.compile(r"^(?P<dash>-\s+)?:?(?P<key>[A-Za-z_]+):(?:\s+(?P<value>.*))?$")


def parse_submission_metadata(text: str) -> dict[str, tuple[Submitter, ...]]:
    """Map each folder of Gradescope's ``submission_metadata.yml`` to its submitters.

    Reads the known shape only: top-level folder keys, each with a ``:submitters:``
    list of ``:name:``, ``:sid:`` and ``:email:`` entries; every other key is ignored.
    Raises ValueError when no folder is found.
    """
    folders: dict[str, list[dict[str, str]]] = {}
    folder: str | None = None
    list_indent: int | None = None  # indentation of the :submitters: key, while inside it
    for raw in text.splitlines():
        if not raw.strip() or raw.lstrip().startswith("#") or raw.startswith("---"):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        line = raw.strip()
        if indent == 0:
            match = _TOP_KEY.match(line)
            folder = _scalar(match.group("key")) if match else None
            if folder is not None:
                folders[folder] = []
            list_indent = None
            continue
        if folder is None:
            continue
        field = _FIELD.match(line)
        if list_indent is None or indent < list_indent or \
                (indent == list_indent and not line.startswith("-")):
            list_indent = indent if field and field.group("key") == "submitters" \
                and not field.group("value") else None
            continue
        if field is None:
            continue
        if field.group("dash") or not folders[folder]:
            folders[folder].append({})
        key, value = field.group("key"), field.group("value")
        if key in ("name", "sid", "email") and value:
            folders[folder][-1][key] = _scalar(value)
    if not folders:
        raise ValueError("no submission folders found in it")
    return {name: tuple(Submitter(**entry) for entry in entries if entry)
            for name, entries in folders.items()}


def _scalar(value: str) -> str:
    """A YAML scalar as text: quotes removed (and escapes read), or a trailing comment cut."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    if len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            decoded = json.loads(value)
        except ValueError:
            return value[1:-1]
        return decoded if isinstance(decoded, str) else value[1:-1]
    return value.split(" #", 1)[0].strip()
