"""The class page (``class.html``): one self-contained HTML page for course staff, drawn from
the class report (``report.json``'s data): the score distribution with the submissions that
were not graded shown apart, a function x track heat map of pass rates, the mistake
clusters largest first, and, with ``--names``, every submission with a link to its page.

No script, no network: inline CSS and SVG only, under the same Content-Security-Policy as
the student's page. Every text is escaped (:func:`graders.escaping.for_html`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from graders.escaping import for_html
from graders.feedback.render import CSP
from graders.regrade.changespage import STYLE as CHANGES_STYLE
from graders.regrade.changespage import changes_section
from graders.regrade.histogram import APART_COLOURS
from graders.regrade.sharedcode import beside_cluster, shared_code_section

PAGE_NAME = "class.html"
STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1180px;
       padding: 1rem 1.5rem 3rem; color: #1d1d1f; }
table { border-collapse: collapse; margin: .5rem 0 1rem; }
th, td { border: 1px solid #d0d0d7; padding: .25rem .5rem; text-align: left;
         vertical-align: top; }
td.rate { text-align: center; font-variant-numeric: tabular-nums; min-width: 4.5rem; }
.cluster { border: 1px solid #d0d0d7; border-radius: 6px; padding: .5rem .9rem;
           margin: .6rem 0; }
.cluster h3 { margin: .2rem 0; font-size: 1.05rem; }
.label { font-weight: 600; }
.unknown { color: #6e6e73; font-style: italic; }
.muted { color: #6e6e73; }
code { background: #f2f2f5; padding: 0 .2rem; border-radius: 3px; }
.shared-code { border-left: 3px solid #b58900; padding: .1rem .7rem; margin: .5rem 0; }
"""
#: The colour of the distribution's graded bars (the others: APART_COLOURS).
GRADED_COLOUR = "#4c72b0"


def build_class_page(report: Mapping[str, Any], *, names: bool) -> str:
    """The class page of ``report`` (:func:`graders.regrade.report.class_report` plus its
    ``clusters``, ``heatmap`` and, with ``names``, ``students``)."""
    total, graded = report["submissions"], report["graded"]
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{for_html(CSP)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>Class report</title>", f"<style>{STYLE}{CHANGES_STYLE}</style></head><body>",
        "<h1>Class report</h1>",
        f'<p id="summary">{total} submissions, {graded} graded'
        + (f", {total - graded} not graded" if total > graded else "") + ".",
    ]
    scores = report.get("scores")
    if scores:
        parts.append(f" Mean {scores['mean']:.2f}, median {scores['median']:.2f}; "
                     f"{scores['full_marks']} with full marks.")
    parts.append("</p>")
    if report.get("version_drift"):
        parts.append(f'<p id="version-drift"><b>Warning:</b> '
                     f"{for_html(report['version_drift'])}: these scores may differ from "
                     "Gradescope's, which grades with the pinned versions.</p>")
    if names:  # every submission named as changes.csv and grades.csv name it
        report = with_people(report)
    if "changes" in report:
        parts += changes_section(report["changes"])
    parts += _distribution(report)
    parts += _heatmap(report.get("heatmap", {}))
    parts += _clusters(report.get("clusters", []), graded, names=names)
    if "shared_code" in report:
        parts += shared_code_section(report["shared_code"])
    if names:
        parts += _students(report.get("students", []))
    else:
        parts.append('<p class="muted" id="privacy">Submissions are shown by anonymous '
                     "labels only; run the regrade with <code>--names</code> to see names "
                     "and links to each student's page.</p>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def with_people(report: Mapping[str, Any]) -> dict[str, Any]:
    """``report`` with each submission id the page shows (the clusters' and the changes')
    followed by its submitters' names, ``submission_1 (Ada Lovelace)``, from its
    ``students`` (made with ``--names``); an id without names stays as it is."""
    people = {row["submission"]: row["names"] for row in report.get("students", [])
              if row.get("names")}

    def who(ident: str) -> str:
        return f"{ident} ({people[ident]})" if ident in people else ident

    def cluster(row: Mapping[str, Any]) -> dict[str, Any]:
        named = {**row, "representative": who(row["representative"])}
        if "members" in row:
            named["members"] = [who(member) for member in row["members"]]
        if "breaks" in row:
            named["breaks"] = [{**broken, **({"members": [who(m) for m in broken["members"]]}
                                             if "members" in broken else {})}
                               for broken in row["breaks"]]
        if "not_started" in row:
            named["not_started"] = [{**item, "submission": who(item["submission"])}
                                    for item in row["not_started"]]
        return named

    named: dict[str, Any] = {**report,
                             "clusters": [cluster(row) for row in report.get("clusters", [])]}
    if "changes" in report:
        named["changes"] = {**report["changes"], "moves": [
            {**move, "submission": who(move["submission"])}
            for move in report["changes"].get("moves", [])]}
    return named


def _distribution(report: Mapping[str, Any]) -> list[str]:
    """Bars of the graded scores, then one bar per reason a submission was not graded."""
    edges, counts = report["histogram"]["edges"], report["histogram"]["counts"]
    apart = {status: count for status, count in report["histogram"].get("apart", {}).items()
             if count}
    bars = [(f"{low:g}-{high:g}", count, GRADED_COLOUR, "graded")
            for low, high, count in zip(edges, edges[1:], counts, strict=False)]
    bars += [(status.replace("_", " "), count, APART_COLOURS.get(status, "#8c8c8c"), status)
             for status, count in apart.items()]
    tallest = max([count for _, count, _, _ in bars] + [1])
    width, height, bar, gap = 60 * len(bars) + 40, 220, 44, 16
    svg = [f'<svg id="distribution" role="img" width="{width}" height="{height + 50}" '
           f'viewBox="0 0 {width} {height + 50}" xmlns="http://www.w3.org/2000/svg">',
           f"<title>Scores of {report['graded']} graded submissions, and those not "
           "graded, apart</title>"]
    for index, (label, count, colour, kind) in enumerate(bars):
        x = 20 + index * 60 + (gap if kind != "graded" else 0)
        tall = round(height * count / tallest)
        svg.append(f'<rect data-kind="{for_html(kind)}" data-count="{count}" x="{x}" '
                   f'y="{height - tall + 20}" width="{bar}" height="{tall}" fill="{colour}"/>')
        svg.append(f'<text x="{x + bar / 2}" y="{height + 15 - tall}" font-size="12" '
                   f'text-anchor="middle">{count}</text>')
        svg.append(f'<text x="{x + bar / 2}" y="{height + 38}" font-size="11" '
                   f'text-anchor="middle">{for_html(label)}</text>')
    svg.append("</svg>")
    note = ("Blue bars are graded scores. Submissions that were not graded (the grader "
            "failed, timed out, or found no serving.py) are drawn apart, never as a 0."
            if apart else "Every submission was graded.")
    ranges = ", ".join(f"{low:g}\u2013{high:g}" for low, high in zip(edges, edges[1:],
                                                                      strict=False))
    stated = (f'<p class="muted" id="bins">Bins (points): {for_html(ranges)}, the last one '
              "closed. They fit the class: a bin holding more than a third of the scores is "
              "halved (finer where most scores are), and empty ranges are one bin.</p>")
    return ["<h2>Score distribution</h2>", *svg, f"<p class=\"muted\">{note}</p>", stated]


def _colour(rate: float) -> str:
    """Red (0 %) through yellow to green (100 %)."""
    return f"hsl({round(120 * rate)}, 65%, 78%)"


def _heatmap(heatmap: Mapping[str, Any]) -> list[str]:
    functions, tracks = heatmap.get("functions", []), heatmap.get("tracks", [])
    rates = heatmap.get("pass_rate", {})
    if not functions:
        return []
    rows = ["<h2>Pass rate by function and track</h2>",
            '<p class="muted">Share of graded submissions with full marks on the tests of '
            "each function and track (tests without a track under \u201call\u201d).</p>",
            '<table id="heatmap"><tr><th>function</th>'
            + "".join(f"<th>{for_html(track or 'all')}</th>" for track in tracks) + "</tr>"]
    for function in functions:
        cells = []
        for track in tracks:
            rate = rates.get(function, {}).get(track)
            cells.append('<td class="rate muted">\u2013</td>' if rate is None else
                         f'<td class="rate" data-function="{for_html(function)}" '
                         f'data-track="{for_html(track)}" data-rate="{rate}" '
                         f'style="background: {_colour(rate)}">{rate:.0%}</td>')
        rows.append(f"<tr><th>{for_html(function)}</th>{''.join(cells)}</tr>")
    rows.append("</table>")
    return rows


def _clusters(clusters: Sequence[Mapping[str, Any]], graded: int, *, names: bool
              ) -> list[str]:
    parts = ["<h2>Mistakes by cause</h2>",
             '<p class="muted">Each cluster is one cause: the submissions that show it, most '
             "first, named after the known mistakes it fits. A wrong function that breaks "
             "the functions calling it lists them inside its cluster (a knock-on is never a "
             "mistake of its own), and every submission with functions not implemented yet "
             "is in one cluster. A submission with two bugs is counted in both.</p>"]
    if not clusters:
        return [*parts, "<p>No function was failed by any graded submission.</p>"]
    parts.append('<div id="clusters">')
    for rank, cluster in enumerate(clusters, start=1):
        parts += _cluster(rank, cluster, graded, names=names)
    parts.append("</div>")
    return parts


def _cluster(rank: int, cluster: Mapping[str, Any], graded: int, *, names: bool
             ) -> list[str]:
    labels = cluster.get("labels") or ([cluster["label"]] if cluster["label"] else [])
    label = (" or ".join(f'<span class="label">{for_html(text)}</span>' for text in labels)
             if labels else '<span class="unknown">not in the catalogue</span>')
    started = cluster.get("not_started")
    where = "not started" if started is not None else cluster["function"]
    representative = for_html(cluster["representative"])
    page = cluster.get("representative_page")
    if names and page:
        representative = f'<a href="{for_html(page)}">{representative}</a>'
    count = cluster["submissions"]
    parts = [
        f'<section class="cluster" data-function="{for_html(cluster["function"])}" '
        f'data-count="{count}" data-mistake="{for_html(cluster["mistake"])}" '
        f'data-mistakes="{for_html(" ".join(cluster.get("mistakes", [])))}">',
        f"<h3>{rank}. {for_html(where)}: {label}</h3>",
        f"<p><b>{count}</b> submission{'s' if count != 1 else ''} "
        f"({cluster['share']:.0%} of {graded} graded)"
        + ("." if started is not None else
           f"; tracks: {for_html(', '.join(cluster['tracks']) or 'none')}; "
           f"{len(cluster['tests'])} failed test(s).") + "</p>",
        f"<p>First failing case: <code>{for_html(cluster['first_case'])}</code></p>",
        *([f"<p>Hint: {for_html(cluster['hint'])}</p>"] if cluster["hint"] else []),
    ]
    if cluster.get("breaks"):
        callee = "a function not implemented yet" if started is not None else for_html(where)
        parts.append('<ul class="breaks">')
        for broken in cluster["breaks"]:
            many = broken["submissions"]
            who = (": " + ", ".join(for_html(m) for m in broken["members"])
                   if names and broken.get("members") else "")
            parts.append(f'<li data-function="{for_html(broken["function"])}" '
                         f'data-count="{many}">also breaks '
                         f"<b>{for_html(broken['function'])}</b> in "
                         f"{'these' if many != 1 else 'this'} {many} submission"
                         f"{'s' if many != 1 else ''}{who} (a knock-on: it calls "
                         f"{callee})</li>")
        parts.append("</ul>")
    if started is not None:
        parts.append('<table class="not-started">')
        parts += [f"<tr><td>{for_html(row['submission'])}</td><td>not started: "
                  f"{for_html(', '.join(row['functions']))}</td></tr>" for row in started]
        parts.append("</table>")
    parts.append(f"<p>Representative: {representative}</p>")
    if names and cluster.get("members"):
        parts.append("<details><summary>All submissions</summary><p>"
                     + ", ".join(for_html(m) for m in cluster["members"])
                     + "</p></details>")
    parts += beside_cluster(cluster)
    parts.append("</section>")
    return parts


def _score(score: float | None) -> str:
    return "no score" if score is None else f"{score:.2f}"


def _late(student: Mapping[str, Any]) -> str:
    """grades.csv's lateness in words: "on time", "3 days late", or a dash when unknown."""
    if student.get("late") == "yes":
        days = int(student.get("days_late") or 0)
        return f"{days} day{'s' if days != 1 else ''} late"
    return "on time" if student.get("late") == "no" else "\u2013"


def _students(students: Sequence[Mapping[str, Any]]) -> list[str]:
    rows = ["<h2>Submissions</h2>", '<table id="students"><tr><th>submission</th>'
            "<th>names</th><th>status</th><th>score</th><th>late</th><th>page</th></tr>"]
    for student in students:
        page = student.get("page")
        link = f'<a href="{for_html(page)}">feedback</a>' if page else "\u2013"
        rows.append(f"<tr><td>{for_html(student['submission'])}</td>"
                    f"<td>{for_html(student['names'])}</td>"
                    f"<td>{for_html(student['status'])}</td>"
                    f"<td>{_score(student['score'])}</td>"
                    f'<td class="late">{_late(student)}</td><td>{link}</td></tr>')
    rows.append("</table>")
    return rows
