"""Shared code on the class page: each group of alike submissions
(:mod:`graders.regrade.similarity`) beside the mistake cluster its members share, with the
evidence (the wrong values they share there, the normalised lines that differ), and all
groups in one "Shared code" section. Worded for staff to look at, never as a verdict.

Members are named only with ``--names``; otherwise by their anonymous labels.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from graders.errors import SubmissionError
from graders.escaping import escape_controls, for_html
from graders.plugin.submission import read_submission
from graders.regrade.clusters import Cluster
from graders.regrade.report import GradedSubmission, function_of
from graders.regrade.roster import ClassSubmission, submission_file
from graders.regrade.similarity import Group, alike_pairs, groups

#: Shared wrong values shown per group beside a cluster.
SHOWN_VALUES = 5
CAUTION = ("Alike code is a reason to look, not a finding: a study group, a shared "
           "tutorial or one short formula written the obvious way also explain it. Read "
           "both submissions before drawing any conclusion.")


def shared_code_rows(report: dict[str, Any], clusters: Sequence[Cluster],
                     entries: Sequence[GradedSubmission], sources: Mapping[str, str],
                     shown: Callable[[str], str]) -> dict[str, Any]:
    """``report`` with ``shared_code`` (every group) and, on each cluster row (in the
    order of ``clusters``), the groups with two or more members in it. ``shown`` gives a
    submission's name or anonymous label."""
    ids = {entry.id for entry in entries}
    found = groups(alike_pairs({ident: text for ident, text in sources.items()
                                if ident in ids}))
    by_id = {entry.id: entry for entry in entries}
    rows = [_group_row(group, shown) for group in found]
    for row, cluster in zip(report.get("clusters", []), clusters, strict=False):
        beside = []
        for group, group_row in zip(found, rows, strict=True):
            inside = [ident for ident in group.members if ident in set(cluster.members)]
            if len(inside) > 1:
                values = _shared_values(cluster.function, [by_id[i] for i in inside])
                others = [i for i in cluster.members if i not in inside and i in by_id]
                beside.append({**group_row, "members": [shown(i) for i in inside],
                               "shared_wrong_values": [escape_controls(value) for value
                                                       in values[:SHOWN_VALUES]],
                               "others": len(others),
                               "others_with_values": sum(
                                   set(values) <= _wrong_values(cluster.function, by_id[i])
                                   .keys() for i in others) if values else 0})
        if beside:
            row["shared_code"] = beside
    return {**report, "shared_code": rows}


def _group_row(group: Group, shown: Callable[[str], str]) -> dict[str, Any]:
    return {"members": [shown(ident) for ident in group.members],
            "identical": group.identical,
            "share": min(pair.share for pair in group.pairs),
            "pairs": [{"first": shown(pair.first), "second": shown(pair.second),
                       "share": pair.share, "identical": pair.identical,
                       "diff": [escape_controls(line) for line in pair.diff]}
                      for pair in group.pairs]}


def _wrong_values(function: str, entry: GradedSubmission) -> dict[str, None]:
    """Every wrong value (or error) ``entry`` gave in the kept cases of ``function``."""
    values: dict[str, None] = {}
    for test in entry.tests:
        if test.get("status") == "passed" or function_of(test) != function:
            continue
        extra = test.get("extra_data")
        cases = extra.get("failed_cases") if isinstance(extra, Mapping) else None
        for case in cases if isinstance(cases, list) else []:
            if not isinstance(case, Mapping):
                continue
            fields = case.get("fields")
            where = f"{test.get('name', '')}, case {case.get('case', '')!r}"
            if "error" in case:
                values[f"{where}: raised {case['error']}"] = None
            for name, pair in (fields.items() if isinstance(fields, Mapping) else ()):
                if isinstance(pair, list) and len(pair) == 2:
                    values[f"{where}: {name} = {pair[1]!r} (expected {pair[0]!r})"] = None
    return values


def _shared_values(function: str, members: Sequence[GradedSubmission]) -> list[str]:
    """The wrong values every member gave in the same kept case of ``function``, in the
    first member's order."""
    sets = [_wrong_values(function, entry) for entry in members]
    return [value for value in sets[0] if all(value in other for other in sets[1:])] \
        if sets else []


def _what(row: Mapping[str, Any]) -> str:
    count = len(row["members"])
    if row["identical"]:
        return (f"{count} submissions have the same code once comments, whitespace, names "
                "and literals are set aside")
    return (f"{count} submissions are near-identical: at least {row['share']:.0%} of the "
            "smaller one's code fingerprints are in the other")


def _diffs(row: Mapping[str, Any]) -> list[str]:
    parts = []
    for pair in row["pairs"]:
        if pair["diff"]:
            parts.append(f"<details><summary>What differs between {for_html(pair['first'])} "
                         f"and {for_html(pair['second'])} once normalised "
                         f"({pair['share']:.0%} alike)</summary><pre>"
                         + for_html("\n".join(pair["diff"])) + "</pre></details>")
    return parts


def beside_cluster(cluster: Mapping[str, Any]) -> list[str]:
    """The class page's note on a cluster whose members include alike submissions."""
    parts = []
    for row in cluster.get("shared_code", []):
        parts.append('<div class="shared-code"><p><strong>Worth a look:</strong> '
                     f"{for_html(_what(row))}, and they are in this cluster: "
                     f"{for_html(', '.join(row['members']))}.</p>")
        if row["shared_wrong_values"]:
            parts.append("<p>The same wrong values in the same cases:</p><ul>"
                         + "".join(f"<li><code>{for_html(v)}</code></li>"
                                   for v in row["shared_wrong_values"]) + "</ul>")
            if row["others"]:
                parts.append(f"<p>{row['others_with_values']} of the cluster's other "
                             f"{row['others']} submissions gave these values too (the "
                             "same bug gives the same values).</p>")
        parts += _diffs(row)
        parts.append(f'<p class="muted">{for_html(CAUTION)}</p></div>')
    return parts


def shared_code_section(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The class page's "Shared code" section: every group of alike submissions."""
    parts = ['<h2 id="shared-code">Shared code</h2>',
             '<p class="muted">Submissions whose code is the same once comments, whitespace, '
             "names and literals are set aside, or near-identical (Moss-style winnowed "
             "fingerprints of the normalised tokens; the student template's own code does "
             f"not count). {for_html(CAUTION)}</p>"]
    if not rows:
        return [*parts, "<p>No two submissions are alike.</p>"]
    for row in rows:
        parts.append(f"<div class=\"shared-code\"><p>{for_html(_what(row))}: "
                     f"{for_html(', '.join(row['members']))}.</p>")
        parts += _diffs(row)
        parts.append("</div>")
    return parts


def read_sources(submissions: Sequence[ClassSubmission]) -> dict[str, str]:
    """Each readable submission's ``serving.py`` as text (a rejected one is left out)."""
    sources = {}
    for submission in submissions:
        try:
            data = read_submission(submission_file(submission))
        except SubmissionError:
            continue
        sources[submission.id] = data.decode("utf-8", "replace")
    return sources
