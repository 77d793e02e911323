"""What the class page and ``report.json`` show of the mistake clusters and the students,
under the privacy rule: submission names only with ``--names``, otherwise anonymous labels.

An anonymous label (``anon-3f9c2a``) is a keyed digest of the submission id: the same
submission keeps its label from one regrade to the next (the key is kept in OUT, readable
by its owner only), and nobody without the key can tell whose it is.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from graders.escaping import escape_controls
from graders.regrade.changes import FLIPPED, POINTS, Move, state_text
from graders.regrade.clusters import Cluster
from graders.regrade.job import PAGE_NAME
from graders.regrade.report import SCORED, GradedSubmission, lateness
from graders.regrade.roster import file_name

KEY_NAME = ".anonymous-labels.key"


def label_key(out: Path) -> bytes:
    """This class's key for anonymous labels, made on first use (mode 0600)."""
    path = out / KEY_NAME
    try:
        return bytes.fromhex(path.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        key = secrets.token_bytes(16)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="ascii") as stream:
            stream.write(key.hex() + "\n")
        return key


def anonymous_label(key: bytes, ident: str) -> str:
    return "anon-" + hmac.new(key, ident.encode("utf-8"), hashlib.sha256).hexdigest()[:6]


def page_link(ident: str) -> str:
    """The student's page, relative to the class page in OUT."""
    return f"submissions/{urllib.parse.quote(ident)}/{PAGE_NAME}"


def cluster_rows(clusters: Sequence[Cluster], graded: int, *, key: bytes, names: bool,
                 pages: set[str]) -> list[dict[str, Any]]:
    """The clusters as plain JSON, largest first: counts, share, where, the first failing
    case, the hint, the catalogued mistakes (``mistake`` and ``label``: the first id and
    every label), the functions it breaks too (``breaks``), the functions not started
    (``not_started``, of the "not implemented yet" cluster), and one representative (its
    name and page only with ``names``; then every member too)."""
    rows = []

    def shown(ident: str) -> str:
        return escape_controls(ident) if names else anonymous_label(key, ident)

    for cluster in clusters:
        first = cluster.representative
        row: dict[str, Any] = {
            "function": cluster.function,
            "submissions": len(cluster.members),
            "share": round(len(cluster.members) / graded, 6) if graded else 0.0,
            "tracks": cluster.tracks,
            "tests": [escape_controls(name) for name in cluster.tests],
            "first_case": escape_controls(cluster.first_case),
            "hint": escape_controls(cluster.hint),
            "mistake": cluster.mistake,
            "label": cluster.label,
            "mistakes": list(cluster.mistakes),
            "labels": list(cluster.labels),
            "breaks": [{"function": function, "submissions": len(members),
                        **({"members": [shown(m) for m in members]} if names else {})}
                       for function, members in cluster.breaks.items()],
            "representative": shown(first),
        }
        if cluster.not_started:
            row["not_started"] = [{"submission": shown(member), "functions": functions}
                                  for member, functions in cluster.not_started.items()]
        if names:
            row["members"] = [escape_controls(member) for member in cluster.members]
            if first in pages:
                row["representative_page"] = page_link(first)
        rows.append(row)
    return rows


def student_rows(entries: Sequence[GradedSubmission], pages: set[str]
                 ) -> list[dict[str, Any]]:
    """Every submission with its names, status, score, lateness (grades.csv's ``late`` and
    ``days_late``, "" when a time is unknown) and page (only with ``--names``)."""
    return [{"submission": escape_controls(entry.id),
             "names": escape_controls("; ".join(p.name for p in entry.submitters)),
             "status": entry.status,
             # a grader failure or a time-out has no score: None, never a 0
             "score": entry.score if entry.status in SCORED else None,
             **dict(zip(("late", "days_late"), lateness(entry.created_at, entry.due),
                        strict=True)),
             **({"page": page_link(entry.id)} if entry.id in pages else {})}
            for entry in entries]


def without_names(report: Mapping[str, Any], entries: Sequence[GradedSubmission], *,
                  key: bytes) -> dict[str, Any]:
    """``report`` (:func:`graders.regrade.report.class_report` of ``entries``) with the
    submissions that were not graded under their anonymous labels, as without ``--names``
    every other part of report.json and report.md shows them; their reasons name the
    label too, where they quote the submission's file or folder, or a path inside it
    (``'ada/serving.py'`` becomes ``'anon-1a2b3c/serving.py'``)."""
    ungraded = [entry for entry in entries if not entry.graded]

    def unnamed(row: Mapping[str, Any], ident: str) -> dict[str, Any]:
        label = anonymous_label(key, ident)
        quoted = re.compile(f"'{re.escape(escape_controls(ident))}(?:\\.[^'/]*|(/[^']*))?'")
        return {**row, "submission": label,
                "reason": quoted.sub(lambda found: f"'{label}{found[1] or ''}'",
                                     str(row["reason"]))}

    return {**report, "not_graded": [unnamed(row, entry.id) for row, entry in
                                     zip(report["not_graded"], ungraded, strict=True)]}


def pages_written(out: Path, entries: Sequence[GradedSubmission]) -> set[str]:
    """The submissions whose page the regrade wrote."""
    return {entry.id for entry in entries
            if (out / "submissions" / file_name(entry.id) / PAGE_NAME).is_file()}


def change_rows(moves: Sequence[Move], *, key: bytes, names: bool) -> list[dict[str, Any]]:
    """The submissions a regrade moved, as plain JSON: who (a name only with ``names``),
    from and to, the tests that flipped (passed <-> failed), those whose share of their
    points moved, and why."""
    return [{"submission": escape_controls(move.submission) if names
             else anonymous_label(key, move.submission),
             "status_before": move.before_status, "status_after": move.after_status,
             "score_before": move.before, "score_after": move.after, "change": move.change,
             **{field: [{"test": escape_controls(test.name), "before": state_text(test.before),
                         "after": state_text(test.after)}
                        for test in move.tests if test.kind == kind]
                for field, kind in (("tests_flipped", FLIPPED), ("tests_points", POINTS))},
             "why": list(move.reasons)} for move in moves]


def with_classes(report: Mapping[str, Any], clusters: list[dict[str, Any]],
                 students: list[dict[str, Any]] | None) -> dict[str, Any]:
    """``report`` with its clusters and, with ``--names``, its students."""
    return {**report, "clusters": clusters, **({"students": students} if students else {})}
