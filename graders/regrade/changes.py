"""What a regrade changes. Each run records what decided its grades in ``OUT/run.json``
(:func:`run_record`); the next run compares itself with it, or with the run of another
folder (``--compare DIR``): who moves, from what score to what, which tests flipped, and
why (:func:`compare`).

Why is read from what the two runs recorded, never guessed:

- *a new submission*, or *the submission is gone*: it is in one run only;
- *the submission file*: its SHA-256 differs (or it has one only now);
- *the grader version*: ``graders.__version__`` differs (at one version: *the grader's
  code*, the files of ``graders/`` and ``reference/`` that decide a score);
- *a track*: its file's SHA-256 differs (or it was added or removed), and a flipped test
  is on that track;
- *the points*: a flipped test's maximum differs, or ``--max-score`` or
  ``--exact-p99-points`` does;
- *the tolerance*: a flipped test's stated tolerance differs;
- *the secret*: the course secret's SHA-256 differs.

A move none of these explains says "no recorded cause".
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graders import __version__
from graders.escaping import for_csv_cell
from graders.regrade.report import SCORED, GradedSubmission, track_of
from graders.regrade.state import code_files, sha256, track_files

RUN_NAME = "run.json"
CHANGES_NAME = "changes.csv"
SCHEMA_VERSION = 1
#: Options whose value is a path: recorded by what they hold (tracks, secret), not here.
_PATH_OPTIONS = ("--tracks", "--secret-file")
#: Options that set points.
POINTS_OPTIONS = ("--max-score", "--exact-p99-points")
_TOLERANCE = re.compile(r"\(tolerance ([^)]*)\)")


def run_settings(*, tracks: Path | None, options: Sequence[str], secret: bytes | None
                 ) -> dict[str, Any]:
    """What decides this run's grades besides the submissions (see the module)."""
    code = hashlib.sha256()
    for name, path in code_files():
        code.update(f"{name}\0{sha256(path.read_bytes())}\n".encode())
    given = dict(zip(options[::2], options[1::2], strict=False))
    return {"grader_version": __version__, "code_sha256": code.hexdigest(),
            "tracks": {Path(name).stem: sha256(path.read_bytes())
                       for name, path in track_files(tracks)},
            "options": {flag: value for flag, value in given.items()
                        if flag not in _PATH_OPTIONS},
            "secret_sha256": sha256(secret) if secret else ""}


def run_record(entries: Sequence[GradedSubmission], settings: Mapping[str, Any],
               files: Mapping[str, str]) -> dict[str, Any]:
    """This run as ``run.json`` keeps it: its settings, and per submission its status,
    score, file digest (``files``) and every test's outcome."""
    return {
        "schema_version": SCHEMA_VERSION,
        "finished_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "settings": dict(settings),
        "submissions": {entry.id: {
            "status": entry.status,
            "score": entry.score if entry.status in SCORED else None,
            "sha256": files.get(entry.id, ""),
            "tests": {_key(test): _outcome(test) for test in entry.tests}}
            for entry in entries},
    }


def _key(test: Mapping[str, Any]) -> str:
    extra = test.get("extra_data")
    nodeid = extra.get("nodeid") if isinstance(extra, Mapping) else None
    return str(nodeid or test.get("name", ""))


def _outcome(test: Mapping[str, Any]) -> dict[str, Any]:
    tolerance = _TOLERANCE.search(str(test.get("output", "")).split("\n", 1)[0])
    return {"name": str(test.get("name", "")), "status": str(test.get("status", "")),
            "score": test.get("score"), "max_score": test.get("max_score"),
            "track": track_of(test), "tolerance": tolerance.group(1) if tolerance else ""}


def read_run(folder: Path) -> dict[str, Any] | None:
    """The run recorded in ``folder`` (None when there is none, or not of this version)."""
    try:
        document = json.loads((folder / RUN_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict) or document.get("schema_version") != SCHEMA_VERSION \
            or not _well_formed(document):
        return None
    return document


def _score_like(value: Any) -> bool:
    return value is None or isinstance(value, int | float) and not isinstance(value, bool)


def _well_formed(document: Mapping[str, Any]) -> bool:
    """Whether a run.json has the shape :func:`compare` reads (one edited by hand, or
    damaged, is no baseline rather than a crash after the grading)."""
    submissions, settings = document.get("submissions"), document.get("settings", {})
    if not isinstance(submissions, dict) or not isinstance(settings, dict):
        return False
    for entry in submissions.values():
        tests = entry.get("tests", {}) if isinstance(entry, dict) else None
        if not isinstance(tests, dict) or not _score_like(entry.get("score")):
            return False
        if not all(isinstance(test, dict) and "status" in test
                   and _score_like(test.get("score")) and _score_like(test.get("max_score"))
                   for test in tests.values()):
            return False
    return True


@dataclass(frozen=True)
class Flip:
    """One test whose outcome changed."""

    name: str
    before: str
    after: str

    def text(self) -> str:
        return f"{self.name}: {self.before} -> {self.after}"


@dataclass(frozen=True)
class Move:
    """One submission whose grade or tests changed, and why."""

    submission: str
    before_status: str
    after_status: str
    before: float | None
    after: float | None
    flips: tuple[Flip, ...]
    reasons: tuple[str, ...]

    @property
    def change(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return round(self.after - self.before, 6)


def setting_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The run-level differences between two runs' settings, one line each."""
    lines = []
    if before.get("grader_version") != after.get("grader_version"):
        lines.append(f"grader version {before.get('grader_version')} -> "
                     f"{after.get('grader_version')}")
    elif before.get("code_sha256") != after.get("code_sha256"):
        lines.append("the grader's code (same version)")
    lines += [f"track {name}: {_what(before.get('tracks', {}), after.get('tracks', {}), name)}"
              for name in _changed(before.get("tracks", {}), after.get("tracks", {}))]
    lines += [f"{flag} {before.get('options', {}).get(flag, 'default')} -> "
              f"{after.get('options', {}).get(flag, 'default')}"
              for flag in _changed(before.get("options", {}), after.get("options", {}))]
    if before.get("secret_sha256") != after.get("secret_sha256"):
        lines.append("the course secret")
    return lines


def _changed(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    return sorted(name for name in {*before, *after} if before.get(name) != after.get(name))


def _what(before: Mapping[str, Any], after: Mapping[str, Any], name: str) -> str:
    return "added" if name not in before else "removed" if name not in after else "changed"


def compare(previous: Mapping[str, Any], current: Mapping[str, Any]) -> list[Move]:
    """Every submission whose status, score or tests differ between two runs, with why."""
    was, now = previous.get("submissions", {}), current.get("submissions", {})
    settings = (previous.get("settings", {}), current.get("settings", {}))
    moves = []
    for ident in [*now, *(ident for ident in was if ident not in now)]:
        before, after = was.get(ident, {}), now.get(ident, {})
        flips = _flips(before.get("tests", {}), after.get("tests", {}))
        if (before.get("status"), before.get("score")) == (after.get("status"),
                                                           after.get("score")) and not flips:
            continue
        moves.append(Move(ident, before.get("status", "absent"), after.get("status", "absent"),
                          before.get("score"), after.get("score"), tuple(flips),
                          tuple(_reasons(before, after, settings))))
    return sorted(moves, key=lambda move: (-abs(move.change or 0.0), move.submission))


def _flips(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Flip]:
    flips = []
    for key in [*after, *(key for key in before if key not in after)]:
        old, new = before.get(key), after.get(key)
        if old is not None and new is not None and (old["status"], old["score"]) == (
                new["status"], new["score"]):
            continue
        flips.append(Flip((new or old or {}).get("name", key), _state(old), _state(new)))
    return flips


def _state(outcome: Mapping[str, Any] | None) -> str:
    if outcome is None:
        return "absent"
    return f"{outcome['status']} ({outcome['score']:g}/{outcome['max_score']:g})" \
        if isinstance(outcome.get("score"), int | float) \
        and isinstance(outcome.get("max_score"), int | float) else str(outcome["status"])


def _reasons(before: Mapping[str, Any], after: Mapping[str, Any],
             settings: tuple[Mapping[str, Any], Mapping[str, Any]]) -> list[str]:
    """Why one submission moved (see the module)."""
    was, now = settings
    reasons = []
    if not before or not after:  # in one run only
        reasons.append("a new submission" if after else "the submission is gone")
    elif before.get("sha256") != after.get("sha256"):  # one file made, or changed
        reasons.append("the submission file")
    if was.get("grader_version") != now.get("grader_version"):
        reasons.append(f"grader version {was.get('grader_version')} -> "
                       f"{now.get('grader_version')}")
    elif was.get("code_sha256") != now.get("code_sha256"):
        reasons.append("the grader's code")
    tests_before, tests_after = before.get("tests", {}), after.get("tests", {})
    flipped = [(tests_before.get(key) or {}, tests_after.get(key) or {})
               for key in {*tests_before, *tests_after}
               if tests_before.get(key) != tests_after.get(key)]
    tracks = {outcome.get("track") for pair in flipped for outcome in pair}
    changed = _changed(was.get("tracks", {}), now.get("tracks", {}))
    reasons += [f"track {name}" for name in changed if name in tracks]
    if any(old.get("max_score") != new.get("max_score") for old, new in flipped if old and new) \
            or any(was.get("options", {}).get(flag) != now.get("options", {}).get(flag)
                   for flag in POINTS_OPTIONS):
        reasons.append("the points")
    if any(old.get("tolerance") and new.get("tolerance")
           and old["tolerance"] != new["tolerance"] for old, new in flipped):
        reasons.append("the tolerance")
    if was.get("secret_sha256") != now.get("secret_sha256"):
        reasons.append("the secret")
    if not reasons and changed:  # a track changed, though no flipped test names it
        reasons += [f"track {name}" for name in changed]
    return reasons or ["no recorded cause"]


def changes_table(moves: Sequence[Move], entries: Sequence[GradedSubmission]
                  ) -> list[list[str]]:
    """The rows of changes.csv, header first: one row per submission that moved."""
    names = {entry.id: "; ".join(person.name for person in entry.submitters)
             for entry in entries}
    rows = [["submission", "names", "status_before", "status_after", "score_before",
             "score_after", "change", "tests_flipped", "why"]]
    rows += [[for_csv_cell(move.submission), for_csv_cell(names.get(move.submission, "")),
              move.before_status, move.after_status, _number(move.before),
              _number(move.after), _number(move.change),
              for_csv_cell("; ".join(flip.text() for flip in move.flips)),
              "; ".join(move.reasons)] for move in moves]
    return rows


def _number(value: float | None) -> str:
    return "" if value is None else repr(round(value, 6))
