"""The "What changed" section at the top of the class page: the submissions whose score
moved, largest move first, one line each, within one screen for a class; each one's tests
and the rest of the class one click away (``<details>``). Drawn from ``report.json``'s
``changes`` (see :mod:`graders.regrade.changes`); every text is escaped."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from graders.escaping import for_html

#: Movers listed in the first table; the others are one click away.
SHOWN_MOVES = 20
STYLE = """
#changes table { margin: .3rem 0 .6rem; }
#changes td details { display: inline; }
#changes td details[open] { display: block; }
#changes td summary { cursor: pointer; }
#changes ul { margin: .2rem 0 .5rem; }
"""


def changes_section(changes: Mapping[str, Any]) -> list[str]:
    """The section's HTML lines (``<div id="changes">``)."""
    parts = ['<div id="changes">', "<h2>What changed</h2>"]
    before = changes.get("compared_with")
    if not before:
        return [*parts, '<p class="muted">Nothing to compare with: no earlier run in this '
                "folder. A regrade compares itself with the previous run in its output "
                "folder, or with <code>--compare DIR</code>.</p>", "</div>"]
    moves = changes["moves"]
    total = changes.get("submissions")
    flipped = sum(len(move["tests_flipped"]) for move in moves)
    parts.append(f'<p id="changes-summary">Compared with the run in '
                 f"<code>{for_html(before['folder'])}</code> finished "
                 f"{for_html(before['finished_at'])}: <b>{len(moves)}</b>"
                 + (f" of {total}" if isinstance(total, int) else "")
                 + f" submission{'s' if (total or len(moves)) != 1 else ''} changed score"
                 + (f"; {flipped} test{'s' if flipped != 1 else ''} flipped (passed \u2194 "
                    "failed)" if flipped else "") + ".</p>")
    settings = changes.get("settings", [])
    parts.append("<p>Settings that differ: " + (", ".join(
        f"<code>{for_html(line)}</code>" for line in settings) or "none") + ".</p>")
    points = changes.get("points", [])
    if points:
        parts.append('<p>For the whole class:</p><ul id="points">'
                     + "".join(f"<li>{for_html(line)}</li>" for line in points) + "</ul>")
    if moves:
        parts += _table("moves", moves[:SHOWN_MOVES])
        rest = moves[SHOWN_MOVES:]
        if rest:
            parts.append(f'<details id="more-moves"><summary>{len(rest)} more '
                         f"submission{'s' if len(rest) != 1 else ''} that changed "
                         "score</summary>")
            parts += [*_table("more-moves-table", rest), "</details>"]
    quiet = changes.get("unchanged_with_test_changes", 0)
    if quiet:
        parts.append(f'<p class="muted" id="unchanged">{quiet} other submission'
                     f"{'s' if quiet != 1 else ''} kept {'their' if quiet != 1 else 'its'} "
                     "score: only tests' points were rescaled or tests added or removed "
                     "without moving it. Every test that changed, for every submission, is "
                     "a row of <code>changed_tests.csv</code>.</p>")
    parts.append("</div>")
    return parts


def _table(ident: str, moves: Sequence[Mapping[str, Any]]) -> list[str]:
    rows = [f'<table id="{ident}"><tr><th>submission</th><th>from</th><th>to</th>'
            "<th>change</th><th>tests</th><th>why</th></tr>"]
    for move in moves:
        change = move["change"]
        rows.append(
            f'<tr data-submission="{for_html(move["submission"])}">'
            f"<td>{for_html(move['submission'])}</td>"
            f"<td>{_score(move['score_before'], move['status_before'])}</td>"
            f"<td>{_score(move['score_after'], move['status_after'])}</td>"
            f"<td>{'' if change is None else f'{change:+.2f}'}</td>"
            f"<td>{_tests(move)}</td><td>{for_html('; '.join(move['why']))}</td></tr>")
    rows.append("</table>")
    return rows


def _tests(move: Mapping[str, Any]) -> str:
    """How many tests flipped and how many moved in points, with the list one click away."""
    flipped, moved = move["tests_flipped"], move.get("tests_points", [])
    counts = [f"{len(tests)} {what}" for tests, what in ((flipped, "flipped"),
                                                          (moved, "points moved")) if tests]
    if not counts:
        return '<span class="muted">none</span>'
    listed = "".join(f"<li>{for_html(test['test'])}: {for_html(test['before'])} \u2192 "
                     f"{for_html(test['after'])}</li>" for test in [*flipped, *moved])
    return f"<details><summary>{', '.join(counts)}</summary><ul>{listed}</ul></details>"


def _score(score: float | None, status: str) -> str:
    return for_html(status) if score is None else f"{score:.2f}"
