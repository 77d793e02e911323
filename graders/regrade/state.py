"""What a regrade keeps per submission, so that a second run skips the work already done.

``OUT/submissions/<id>/meta.json`` records how grading ended and two digests: of the
``serving.py`` that was graded, and of the grader configuration (the grader's and the
reference's files, the tracks, the options, the versions of the packages that decide a
verdict). A submission is up to date when it was graded, its results.json is valid, and
both digests still match: a changed submission or a changed rubric is graded again.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from graders.errors import TrackError
from graders.regrade.roster import Submitter
from graders.results.reports import read_valid_results, write_json_atomically

SCHEMA_VERSION = 1
RESULTS_NAME = "results.json"
META_NAME = "meta.json"
#: Packages whose version can change a verdict.
_VERSIONED = ("pytest", "hypothesis", "pint")
#: The sub-package of the batch around the gradings, which never changes a score: editing it
#: does not make a class stale.
BATCH_PACKAGE = "regrade"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _package_files(module: str) -> list[Path]:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return []
    folder = Path(spec.origin).parent
    return sorted(path for path in folder.rglob("*") if path.is_file()
                  and "__pycache__" not in path.parts and path.suffix != ".pyc")


def code_files() -> list[tuple[str, Path]]:
    """The grader's and the reference's files that decide a score, by relative name."""
    files: list[tuple[str, Path]] = []
    for module in ("graders", "reference"):
        spec = importlib.util.find_spec(module)
        base = Path(spec.origin).parent.parent if spec and spec.origin else Path()
        files += [(str(path.relative_to(base)), path) for path in _package_files(module)
                  if not (module == "graders" and path.parent == base / module / BATCH_PACKAGE)]
    return files


def track_files(tracks: Path | None) -> list[tuple[str, Path]]:
    """The track files graded on (``tracks``, else the default folder), by name."""
    if tracks is None:
        from graders.trackfiles.tracks import default_tracks_dir

        try:
            tracks = default_tracks_dir()
        except TrackError:
            tracks = None
    if tracks is None or not tracks.is_dir():
        return []
    return [(f"tracks/{path.name}", path) for path in sorted(tracks.glob("*.toml"))]


def grader_fingerprint(*, tracks: Path | None, options: Iterable[str] = ()) -> str:
    """A digest of everything that decides a score besides the submission itself."""
    digest = hashlib.sha256()
    for name, path in [*code_files(), *track_files(tracks)]:
        digest.update(f"{name}\0{sha256(path.read_bytes())}\n".encode())
    for package in _VERSIONED:
        try:
            version = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            version = "absent"
        digest.update(f"{package}=={version}\n".encode())
    digest.update(f"python {sys.version}\noptions {' '.join(options)}\n".encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class JobRecord:
    """How one submission's grading ended (meta.json)."""

    submission: str
    status: str
    reason: str
    submission_sha256: str
    grader_sha256: str
    source: str
    elapsed_s: float
    exit_code: int | None
    submitters: tuple[Submitter, ...] = ()

    def to_json(self) -> dict[str, Any]:
        document = asdict(self)
        document["submitters"] = [asdict(person) for person in self.submitters]
        return {"schema_version": SCHEMA_VERSION, **document}

    @classmethod
    def from_json(cls, document: Any) -> JobRecord | None:
        """The record in ``document``, or None when it is not one."""
        if not isinstance(document, Mapping) or document.get("schema_version") != SCHEMA_VERSION:
            return None
        try:
            people = tuple(Submitter(**person) for person in document["submitters"])
            fields = {key: document[key] for key in cls.__dataclass_fields__
                      if key != "submitters"}
            return cls(**fields, submitters=people)
        except (KeyError, TypeError):
            return None




def read_record(folder: Path) -> JobRecord | None:
    try:
        document = json.loads((folder / META_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return JobRecord.from_json(document)


def write_record(folder: Path, record: JobRecord) -> None:
    write_json_atomically(folder / META_NAME, record.to_json())


def up_to_date(folder: Path, submission_sha256: str, grader_sha256: str) -> bool:
    """Whether ``folder`` holds a completed grading of this submission by this grader."""
    record = read_record(folder)
    return (record is not None and record.status == "graded"
            and record.submission_sha256 == submission_sha256
            and record.grader_sha256 == grader_sha256
            and read_valid_results(folder / RESULTS_NAME) is not None)
