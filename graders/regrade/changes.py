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

Scores lie on a grid of 1e-6 points (:data:`GRID`), and a test's share of a total can
move by one unit of it when the total is shared again: a submission *changed* only when
its status differs or its score moved by more than one unit; a test *flipped* only when
it passed and now fails, or the reverse. A test whose maximum changed while its share of
it did not was *rescaled*: that is said once for the class, one line per cause
(:func:`point_changes`), never per submission.
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
from graders.regrade.report import SCORED, GradedSubmission, function_of, track_of
from graders.regrade.state import code_files, sha256, track_files

RUN_NAME = "run.json"
CHANGES_NAME = "changes.csv"
#: One row per submission and test that changed, whatever the test's name holds.
TEST_CHANGES_NAME = "changed_tests.csv"
#: The grid written scores lie on (graders.grading.scoring.SCORE_UNIT), in points.
GRID = 1e-6
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
            "track": track_of(test), "function": function_of(test),
            "tolerance": tolerance.group(1) if tolerance else ""}


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


#: How a test changed: its outcome (passed <-> failed), its share of its points, only its
#: maximum, or it is in one run only.
FLIPPED, POINTS, RESCALED, ADDED, REMOVED = "flipped", "points", "rescaled", "added", "removed"


@dataclass(frozen=True)
class ChangedTest:
    """One test of one submission that changed (see :data:`FLIPPED` and the others)."""

    name: str
    track: str
    kind: str
    before: Mapping[str, Any] | None
    after: Mapping[str, Any] | None

    def text(self) -> str:
        return f"{self.name}: {state_text(self.before)} -> {state_text(self.after)}"


@dataclass(frozen=True)
class Move:
    """One submission whose grade or tests changed, and why."""

    submission: str
    before_status: str
    after_status: str
    before: float | None
    after: float | None
    tests: tuple[ChangedTest, ...]
    reasons: tuple[str, ...]

    @property
    def change(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return round(self.after - self.before, 6)

    @property
    def changed(self) -> bool:
        """Whether its status differs or its score moved beyond the grid."""
        if self.before_status != self.after_status:
            return True
        if self.before is None or self.after is None:
            return self.before != self.after
        return round(abs(self.after - self.before) / GRID) > 1

    @property
    def flips(self) -> tuple[ChangedTest, ...]:
        """The tests that passed and now fail, or the reverse."""
        return tuple(test for test in self.tests if test.kind == FLIPPED)


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
    """Every submission whose status, score or tests differ between two runs beyond the
    grid, with why: those that changed (:attr:`Move.changed`) first, largest move first."""
    was, now = previous.get("submissions", {}), current.get("submissions", {})
    settings = (previous.get("settings", {}), current.get("settings", {}))
    moves = []
    for ident in [*now, *(ident for ident in was if ident not in now)]:
        before, after = was.get(ident, {}), now.get(ident, {})
        tests = changed_tests(before.get("tests", {}), after.get("tests", {}))
        move = Move(ident, before.get("status", "absent"), after.get("status", "absent"),
                    before.get("score"), after.get("score"), tuple(tests), ())
        if not move.changed and not tests:
            continue
        moves.append(Move(move.submission, move.before_status, move.after_status,
                          move.before, move.after, move.tests,
                          tuple(_reasons(before, after, settings, tests))))
    return sorted(moves, key=lambda move: (not move.changed, -abs(move.change or 0.0),
                                           move.submission))


def changed_tests(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[ChangedTest]:
    """How each test of one submission changed between two runs (unchanged ones left
    out), in the later run's order."""
    found = []
    for key in [*after, *(key for key in before if key not in after)]:
        old, new = before.get(key), after.get(key)
        kind = _kind(old, new)
        if kind is not None:
            outcome = new or old or {}
            found.append(ChangedTest(str(outcome.get("name", key)), str(outcome.get("track", "")),
                                    kind, old, new))
    return found


def _kind(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> str | None:
    """How one test changed (None: it did not, beyond the grid)."""
    if old is None or new is None:
        return None if old is new else ADDED if old is None else REMOVED
    if (old.get("status") == "passed") != (new.get("status") == "passed"):
        return FLIPPED
    scores = (old.get("score"), new.get("score"), old.get("max_score"), new.get("max_score"))
    if not all(isinstance(value, int | float) for value in scores):
        return None if scores[:2] == scores[2:] or old == new else POINTS
    score, now, maximum, new_maximum = (float(value) for value in scores)  # type: ignore[arg-type]
    ratio = new_maximum / maximum if maximum else 1.0
    # each score is within one unit of the grid of its exact share: more is a move
    if abs(now - score * ratio) > GRID * (1 + ratio) * (1 + 1e-9):
        return POINTS
    return RESCALED if abs(new_maximum - maximum) > GRID * 1.5 else None


def state_text(outcome: Mapping[str, Any] | None) -> str:
    """A test's outcome in one run: ``failed (0.5/2)``, or ``absent``."""
    if outcome is None:
        return "absent"
    return f"{outcome['status']} ({outcome['score']:g}/{outcome['max_score']:g})" \
        if isinstance(outcome.get("score"), int | float) \
        and isinstance(outcome.get("max_score"), int | float) else str(outcome["status"])


def _reasons(before: Mapping[str, Any], after: Mapping[str, Any],
             settings: tuple[Mapping[str, Any], Mapping[str, Any]],
             tests: Sequence[ChangedTest]) -> list[str]:
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
    flipped = [(test.before or {}, test.after or {}) for test in tests]
    # a test only rescaled is the points' doing, never its track's
    tracks = {test.track for test in tests if test.kind != RESCALED}
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
    """The rows of changes.csv, header first: one row per submission that changed
    (:attr:`Move.changed`), with how many of its tests flipped; each test is a row of
    :func:`changed_tests_table`."""
    names = {entry.id: "; ".join(person.name for person in entry.submitters)
             for entry in entries}
    rows = [["submission", "names", "status_before", "status_after", "score_before",
             "score_after", "change", "flipped", "why"]]
    rows += [[for_csv_cell(move.submission), for_csv_cell(names.get(move.submission, "")),
              move.before_status, move.after_status, _number(move.before),
              _number(move.after), _number(move.change), str(len(move.flips)),
              "; ".join(move.reasons)] for move in moves if move.changed]
    return rows


def changed_tests_table(moves: Sequence[Move]) -> list[list[str]]:
    """The rows of changed_tests.csv, header first: one row per submission and test that
    changed (flipped, points, rescaled, added or removed), each field in a cell of its
    own, so that no test name can break a row."""
    rows = [["submission", "test", "track", "change", "status_before", "status_after",
             "score_before", "max_before", "score_after", "max_after"]]
    for move in moves:
        for test in move.tests:
            old, new = test.before or {}, test.after or {}
            rows.append([for_csv_cell(move.submission), for_csv_cell(test.name), test.track,
                         test.kind, str(old.get("status", "absent")),
                         str(new.get("status", "absent")), _cell(old.get("score")),
                         _cell(old.get("max_score")), _cell(new.get("score")),
                         _cell(new.get("max_score"))])
    return rows


def _cell(value: Any) -> str:
    return _number(float(value)) if isinstance(value, int | float) else ""


def point_changes(previous: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """What changed in the tests' points for the whole class, one line per cause: the
    tests added or removed, and the tests whose maximum changed, grouped by track (tracks
    whose tests changed alike share a line)."""
    before, after = _maxima(previous), _maxima(current)
    lines = []
    for what, keys, side in (("added", [k for k in after if k not in before], after),
                             ("removed", [k for k in before if k not in after], before)):
        by_track: dict[str, list[str]] = {}
        for key in keys:
            by_track.setdefault(side[key][0], []).append(key)
        for track, found in sorted(by_track.items()):
            points = sum(side[key][2] for key in found)
            lines.append(f"tests {what}: {len(found)} {_where(track)} ({points:g} points)")
    rescaled: dict[str, list[tuple[str, float, float]]] = {}
    for key in after:
        if key in before and abs(after[key][2] - before[key][2]) > GRID * 1.5:
            rescaled.setdefault(after[key][0], []).append(
                (after[key][1], before[key][2], after[key][2]))
    alike: dict[tuple[tuple[str, float, float], ...], list[str]] = {}
    for track, found_tests in sorted(rescaled.items()):
        alike.setdefault(tuple(sorted(found_tests)), []).append(track)
    for tests, tracks in alike.items():
        functions = sorted({function for function, _, _ in tests})
        whole = all(sorted(f for t, f, _ in after.values() if t == track) == sorted(
            function for function, _, _ in tests) for track in tracks)
        what = "every test" if whole else f"the tests of {', '.join(functions)}"
        old = round(sum(value for _, value, _ in tests), 6)
        new = round(sum(value for _, _, value in tests), 6)
        each = " each" if len(tracks) > 1 else ""
        where = (f"on the {_listed(tracks)} track{'s' if len(tracks) > 1 else ''}"
                 if tracks != [""] else "without a track")
        if abs(old - new) > GRID * 1.5:
            plural = "s" if len(tests) != 1 else ""
            moved = f"{old:g} -> {new:g}{each} ({len(tests)} test{plural}{each})"
        else:  # points moved between its tests: each one's
            moved = ", ".join(f"{function} {before_max:g} -> {after_max:g}"
                              for function, before_max, after_max in tests) + each
        lines.append(f"points of {what} {where}: {moved}")
    return lines


def _maxima(run: Mapping[str, Any]) -> dict[str, tuple[str, str, float]]:
    """Every test of a run's graded submissions: (track, function, maximum)."""
    found: dict[str, tuple[str, str, float]] = {}
    for entry in run.get("submissions", {}).values():
        for key, test in entry.get("tests", {}).items():
            if key not in found and isinstance(test.get("max_score"), int | float):
                function = str(test.get("function") or str(test.get("name", key)).split(" ")[0])
                found[key] = (str(test.get("track", "")), function, float(test["max_score"]))
    return found


def _where(track: str) -> str:
    return f"on the {track} track" if track else "without a track"


def _listed(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _number(value: float | None) -> str:
    return "" if value is None else repr(round(value, 6))
