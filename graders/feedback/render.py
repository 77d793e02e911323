"""The feedback page, built by a pure function: results and rendered plots in, HTML out.

The page is self-contained: styles inline, images as ``data:`` URIs, no script, and a
Content-Security-Policy that forbids every network request. Every text is escaped once
(:func:`graders.escaping.for_html`), here and nowhere before.
Scores come from the Gradescope results document, so the page and ``results.json``
agree. The page has an audience (:data:`AUDIENCES`). The student's page, the default,
is made before the hidden tests are released: a test that is not visible shows its name
and that it is hidden, nothing more, and no score, total or sentence counts its points
or says how it went (only how many points the hidden tests are worth). The staff page
shows every test, hidden ones included, and says on top that it is for staff.
A function's row has the same maximum and test count in every output (the terminal's
table, grades.csv, both pages); the student's page splits it into the visible tests'
score and maximum and the points of its hidden tests.
The page builds its summary from that data: how the run went (the document's ``output``
when it is text; Gradescope's ``html`` essentials are never shown, the page says it all
itself) and what to fix first (the first failed visible test and its first failed case).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from graders.escaping import for_html
from graders.feedback.audience import AUDIENCES, Audience
from graders.feedback.budget import MAX_FIRST_CASE_BYTES, feedback_budget, fitted
from graders.feedback.curves import PASS_MARK_TEXT
from graders.reality.curves import RealityCurve
from graders.reality.store import MISSING_TEXT
from graders.reality.table import error_text, flip_text, input_text, milliseconds, real_text
from graders.results.essentials import first_case
from graders.results.reports import TRACK_TABLE_TITLE, points_text, result_tags

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1180px;
       padding: 1rem 1.5rem 3rem; color: #1d1d1f; }
h1 { margin-bottom: 0.2rem; } h2 { border-bottom: 1px solid #ddd; margin-top: 2rem; }
.score { font-size: 1.6rem; font-weight: 600; margin: 0.3rem 0; }
.summary { color: #444; white-space: pre-wrap; }
.next { background: #fdf1f1; border-left: 4px solid #d62728; padding: 0.1rem 1rem 0.3rem;
        margin: 0.8rem 0; }
.next.done { background: #eef7f0; border-color: #2ca02c; }
.next h2 { border: 0; margin: 0.6rem 0 0.3rem; font-size: 1.15rem; }
.next pre { background: #fff; }
table { border-collapse: collapse; margin: 0.5rem 2rem 1rem 0; display: inline-table;
        vertical-align: top; }
th, td { padding: 0.2rem 0.8rem; border-bottom: 1px solid #eee; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
ul.tests { list-style: none; padding-left: 0; }
li.test { margin: 0.3rem 0; padding: 0.3rem 0.6rem; border-left: 4px solid #bbb; }
li.passed { border-color: #2ca02c; } li.failed { border-color: #d62728; }
li.hidden { border-color: #999; color: #555; }
.status { font-weight: 600; margin-right: 0.5rem; }
.staff { background: #fff4e5; border-left: 4px solid #d9731a; padding: 0.3rem 1rem; }
.hidden-note { color: #555; }
pre { background: #f6f6f8; padding: 0.6rem; overflow-x: auto; font-size: 12.5px;
      white-space: pre-wrap; }
.plots { display: flex; flex-wrap: wrap; gap: 0 2rem; align-items: flex-start; }
figure.plot { margin: 0.5rem 0 1.5rem; max-width: 100%; }
figure.plot img { max-width: 100%; height: auto; }
figure.plot h4, .no-plot h4 { margin: 0.3rem 0; }
.no-plot { flex: 0 1 420px; margin: 0.5rem 0 1.5rem; padding: 0.6rem 1rem;
           background: #fff4e5; border-left: 4px solid #d9731a; }
.message { font-weight: 600; }
.violations li { color: #b01e1e; } .notes li { color: #6b4e00; }
.reality-note { background: #eef7f0; border-left: 4px solid #2e8b3e; padding: 0.3rem 1rem; }
table.reality caption { text-align: left; font-weight: 600; padding-bottom: 0.2rem; }
"""
REALITY_TEXT = (
    '<div class="reality-note"><p><strong>Where the formulas meet reality (not graded).'
    "</strong> The green line is the p99 a real queue with these inputs has (Poisson "
    "arrivals, gamma service times with the track's mean and cv, batches released when "
    "full): exact without batching for an M/M/c queue (service cv 1) or one replica "
    "(M/G/1), otherwise simulated, with its 95 % confidence band shaded. You are graded "
    "on the lab's formulas, which differ for three reasons:</p><ul>"
    "<li><em>The service tail.</em> The formula adds a waiting-time quantile to the "
    "<em>mean</em> service time; a real request's own service time has a tail too, so a "
    "lightly loaded fleet's formula p99 is just its mean service time.</li>"
    "<li><em>A mean added to a quantile.</em> batching_tax adds the <em>mean</em> time a "
    "batch takes to fill; some requests wait for a whole batch, and that wait has a tail "
    "of its own.</li>"
    "<li><em>The distribution's shape.</em> Two service-time distributions with the same "
    "mean and cv can have very different tails; no formula in the mean and cv alone can "
    "know which one you have.</li></ul>"
    "<p>A purple &#9670; marks an input at which the formula and reality disagree about "
    "the SLO: the verdict would flip. The table under each track's figures gives where "
    "they differ as intervals: each change lies between the two inputs named.</p></div>")
REALITY_MISSING = '<p class="reality-missing" data-reason="{reason}">The real p99 of this ' \
    "track is not shown: {text}.</p>"
#: The staff page's banner.
STAFF_TEXT = ("Staff page: it shows the hidden tests' results, which students do not see "
              "before they are released. Do not hand it back; hand back the student's page.")
HIDDEN_TEXT = {
    "hidden": "hidden: its details are not shown",
    "after_due_date": "hidden until after the due date",
    "after_published": "hidden until the grades are published",
}


@dataclass(frozen=True)
class PlotView:
    """One function on one track: its figure, or why there is none, and what it shows."""

    track_id: str
    track_label: str
    function: str
    image: str | None
    messages: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    violations: tuple[str, ...] = ()


def esc(value: object) -> str:
    """``value`` as HTML text or attribute content: markup and quotes escaped, and control
    characters, bidi overrides and lone surrogates shown as escapes (``\\ud800``), so the
    page always encodes as UTF-8."""
    return for_html(str(value))


def number(value: float) -> str:
    """A score as results.json holds it, without trailing zeros: 85.25812, 100."""
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def shown(value: float) -> str:
    """A score as people read it, as the terminal's table and the test rows show it: 80.25."""
    return f"{value:.2f}"


def shown_pair(earned: float, maximum: float) -> tuple[str, str]:
    """Points and their maximum as the terminal's table shows them: two decimals, or as
    many more as it takes for neither to be misread (0.000003 is not 0.00, and 99.999999 of
    100 is not 100.00)."""
    return points_text(Fraction(number(earned)), Fraction(number(maximum)))


def build_page(document: Mapping[str, Any], plots: Sequence[PlotView], *,
               title: str = "Serving lab feedback",
               reality: Mapping[str, Sequence[RealityCurve]] | None = None,
               reality_missing: Mapping[str, str] | None = None,
               notes: Sequence[str] = (), audience: Audience = "student") -> str:
    """The whole page for one grading run, for ``audience`` (see the module's docstring);
    ``reality``: each track's exact or simulated
    tails, drawn in the figures and tabled under them (never graded); ``reality_missing``:
    why a track has none (a key of :data:`graders.reality.store.MISSING_TEXT`, "not
    built" when not given); ``notes``: what went wrong with the page itself (shown as
    "(feedback report: ...)").

    ``document`` is a results document (see :mod:`graders.results.reports`); its
    ``output`` is shown only in the ``text`` format. Two keys of the page's own may come
    with it: ``import_error``, why serving.py did not import (then the first thing to
    fix), and ``printed``, what the code printed (its first line says how much), shown
    in a section of its own."""
    if audience not in AUDIENCES:
        raise ValueError(f"a page's audience is one of {', '.join(AUDIENCES)}, "
                         f"not {audience!r}")
    tests = [t for t in document.get("tests", []) if isinstance(t, Mapping)]
    failed = document.get("grader_failed") is True  # a grader failure shows no score
    score = float(document.get("score", 0.0))
    extra = document.get("extra_data", {})
    maximum = float(extra.get("max_score", sum(float(t.get("max_score", 0)) for t in tests))
                    if isinstance(extra, Mapping) else 0.0)
    withheld = [t for t in tests if not _visible(t)] if audience == "student" else []
    if withheld:  # the visible tests' points alone: no total that implies the hidden ones
        score = sum(float(t.get("score", 0)) for t in tests if _visible(t))
        maximum -= sum(float(t.get("max_score", 0)) for t in withheld)
        score, maximum = float(number(score)), float(number(maximum))
    headline = "grader failed" if failed else " / ".join(shown_pair(score, maximum))
    printed = str(document.get("printed") or "")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}: {esc(headline)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<header><h1>{esc(title)}</h1>",
        f'<p class="staff" id="staff-page">{esc(STAFF_TEXT)}</p>' if audience == "staff"
        else "",
        '<p class="score" id="grader-failed" role="status">The grader failed: no score was '
        'given.</p>'
        if failed else
        f'<p class="score">Score <span id="score" data-score="{esc(number(score))}">'
        f'{esc(shown_pair(score, maximum)[0])}</span> / <span id="max-score">'
        f'{esc(shown_pair(score, maximum)[1])}</span></p>',
        "" if failed else _withheld_note(withheld),
        _summary(document, notes),
        "" if failed else _next_step(tests, score, maximum,
                                     str(document.get("import_error") or ""),
                                     withheld=bool(withheld)),
        '<nav><a href="#scores">scores</a> &middot; <a href="#curves">curves</a> &middot; '
        '<a href="#feedback">feedback</a>'
        + (' &middot; <a href="#printed">what your code printed</a>' if printed else "")
        + "</nav></header>",
        _score_tables(tests, withheld=bool(withheld)),
        _curves(plots, reality or {}, reality_missing or {}),
        _feedback(tests, staff=audience == "staff"),
        _printed(printed),
        _versions(extra),
        "</body></html>",
    ]
    return "\n".join(part for part in parts if part) + "\n"


def _summary(document: Mapping[str, Any], notes: Sequence[str]) -> str:
    """How the run went, as plain text: the document's output when it is text (a partial
    run, an import error, a grader failure), then ``notes``. Gradescope's ``html``
    output is left out: it is markup for Gradescope, and the page says the same itself."""
    output = document.get("output", "")
    lines = [str(output)] if document.get("output_format", "text") != "html" else []
    lines += [f"(feedback report: {note})" for note in notes]
    text = "\n".join(line for line in lines if line.strip()).strip()
    return f'<p class="summary">{esc(text)}</p>' if text else ""


def _outcome(test: Mapping[str, Any]) -> str:
    """passed, failed, not run (a partial run): the grader's outcome, else the status."""
    extra = test.get("extra_data")
    outcome = extra.get("outcome") if isinstance(extra, Mapping) else None
    return str(outcome or test.get("status", "failed"))


def _next_step(tests: Sequence[Mapping[str, Any]], score: float, maximum: float,
               import_error: str = "", *, withheld: bool = False) -> str:
    """What to do next: make serving.py import; else the first failed visible test, its
    first failed case (with its hint, if any), and where the rest is; or that every
    (visible) test passes. ``withheld``: the hidden tests' results are left out, so
    nothing is said of them."""
    if import_error:
        return ('<section id="next" class="next" role="status"><h2>What to fix first</h2>'
                "<p>serving.py does not import, so every test fails:</p>"
                f'<pre class="first-case">{esc(import_error)}</pre>'
                "<p>Fix it, then run <code>pytest</code> again.</p></section>")
    if not tests:
        return ""
    visible = [(n, t) for n, t in enumerate(tests) if _visible(t)]
    first = next(((n, t) for n, t in visible if _outcome(t) not in ("passed", "not run")),
                 None)
    if first is None:
        if score >= maximum and not withheld:
            text = "Every test passes: there is nothing left to fix."
        elif any(_outcome(t) == "not run" for _, t in visible):
            text = "Every visible test that ran passes."
        elif withheld:
            text = ("Every visible test passes. The hidden tests' results are not shown "
                    "before they are released.")
        else:
            hidden = [t for t in tests if not _visible(t)]
            earned = sum(float(t.get("score", 0)) for t in hidden)
            most = sum(float(t.get("max_score", 0)) for t in hidden)
            points = shown_pair(earned, most)
            text = (f"Every visible test passes. The hidden tests earn {points[0]} of "
                    f"{points[1]} points; their cases are not shown.")
        return (f'<section id="next" class="next done" role="status"><p>{esc(text)}</p>'
                "</section>")
    number, test = first
    function = _tags(test)[0]
    output = str(test.get("output", "")).strip()
    case = (f'<pre class="first-case">{fitted(first_case(output), MAX_FIRST_CASE_BYTES, esc)}'
            "</pre>") if output else ""
    lead = ("Its first failed case:" if output else
            f"Its test &ldquo;{esc(test.get('name', ''))}&rdquo; failed.")
    return (f'<section id="next" class="next" role="status"><h2>What to fix first</h2>'
            f"<p>Start with <strong>{esc(function)}</strong>, the first function with a "
            f"failed test. {lead}</p>{case}"
            "<p>Fix it, then run <code>pytest</code> again. "
            f'<a href="#test-{number}">Every failed case of this test</a>, and every other '
            'failed test, are under <a href="#feedback">feedback</a>.</p></section>')


def _visible(test: Mapping[str, Any]) -> bool:
    return bool(test.get("visibility", "visible") == "visible")


def _printed(printed: str) -> str:
    """What the code printed: its first line says how much, the rest is the text."""
    if not printed:
        return ""
    sentence, _, text = printed.partition("\n")
    return (f'<section id="printed"><h2>What your code printed</h2><p>{esc(sentence)}</p>'
            + (f"<pre>{esc(text)}</pre>" if text else "") + "</section>")


def _versions(extra: Any) -> str:
    """The footer: what graded this page (the grader's and its dependencies' versions)."""
    versions = extra.get("versions") if isinstance(extra, Mapping) else None
    if not isinstance(versions, Mapping) or not versions:
        return ""
    text = ", ".join(f"{name} {version}" for name, version in versions.items())
    return f'<footer><p class="versions">Graded with {esc(text)}.</p></footer>'


def _tags(test: Mapping[str, Any]) -> tuple[str, str]:
    function, track = result_tags(test)
    return (function if test.get("tags") else "other"), track


def _score_tables(tests: Sequence[Mapping[str, Any]], *, withheld: bool = False) -> str:
    """Points by function and by track, as the terminal's table sums them (every test of
    a function, hidden ones included). ``withheld``: the hidden tests' results are left
    out; each function's row then gives its visible tests' points, and a last column the
    points of its hidden tests out of the function's whole share (the terminal's max)."""
    parts = ['<section id="scores"><h2>Score by function and track</h2>']
    if withheld:
        parts.append('<p class="hidden-note">Scores count the visible tests only. The last '
                     "column gives the points of each function's hidden tests, whose "
                     "results are not shown before they are released.</p>")
    for key, heading in ((0, "function"), (1, "track")):
        rows: dict[str, list[float]] = {}
        for test in tests:
            name = _tags(test)[key]
            if not name or (withheld and key == 1 and not _visible(test)):
                continue
            row = rows.setdefault(name, [0.0, 0.0, 0, 0.0])
            if withheld and not _visible(test):
                row[3] += float(test.get("max_score", 0))
                continue
            row[0] += float(test.get("score", 0))
            row[1] += float(test.get("max_score", 0))
            row[2] += 1
        if not rows:
            continue
        title = TRACK_TABLE_TITLE if heading == "track" else heading
        split = withheld and heading == "function"
        parts.append(f'<table class="by-{heading}"><thead><tr><th>{title}</th><th>score</th>'
                     "<th>max</th><th>tests</th>"
                     + ("<th>in hidden tests</th>" if split else "") + "</tr></thead><tbody>")
        for name, (earned, maximum, count, hidden) in rows.items():
            cells = shown_pair(earned, maximum)
            whole = shown_pair(maximum + hidden, maximum + hidden)[1]
            extra = (f'<td class="num">{shown_pair(hidden, hidden)[1]} of {whole}</td>'
                     if hidden else "<td></td>") if split else ""
            parts.append(f'<tr data-{heading}="{esc(name)}"><td>{esc(name)}</td>'
                         f'<td class="num">{cells[0]}</td><td class="num">{cells[1]}</td>'
                         f'<td class="num">{int(count)}</td>{extra}</tr>')
        parts.append("</tbody></table>")
    parts.append("</section>")
    return "\n".join(parts)


def _withheld_note(withheld: Sequence[Mapping[str, Any]]) -> str:
    """Under the score: how many hidden tests the student's page leaves out, what they
    are worth, and when they are shown (never how they went)."""
    if not withheld:
        return ""
    most = sum(float(t.get("max_score", 0)) for t in withheld)
    when = sorted({HIDDEN_TEXT.get(str(t.get("visibility")), "hidden") for t in withheld})
    count = f"{len(withheld)} hidden test{'s' if len(withheld) != 1 else ''}"
    return (f'<p class="hidden-note" id="hidden-note">Not counted here: {count}, worth '
            f"{shown_pair(most, most)[1]} points ({esc('; '.join(when))}). Their results "
            "are not shown before they are released.</p>")


def _feedback(tests: Sequence[Mapping[str, Any]], *, staff: bool = False) -> str:
    """Every test's row, grouped by function; ``staff``: hidden tests' rows too show their
    outcome, points and output, labelled as hidden from students."""
    groups: dict[str, list[tuple[int, Mapping[str, Any]]]] = {}
    for number, test in enumerate(tests):
        groups.setdefault(_tags(test)[0], []).append((number, test))
    shown = feedback_budget({number: _output(test, staff) for number, test in enumerate(tests)
                             if _output(test, staff)}, esc)
    parts = ['<section id="feedback"><h2>Feedback</h2>']
    for function, members in groups.items():
        parts.append(f'<h3>{esc(function)}</h3><ul class="tests">')
        parts.extend(_test_item(number, test, shown.get(number, ""), staff=staff)
                     for number, test in members)
        parts.append("</ul>")
    parts.append("</section>")
    return "\n".join(parts)


def _output(test: Mapping[str, Any], staff: bool = False) -> str:
    """The feedback a test's row shows: a failed visible test's output (on the staff
    page, a failed hidden one's too), else none."""
    if not (staff or _visible(test)) or test.get("status") == "passed":
        return ""
    return str(test.get("output", "")).strip()


def _test_item(number: int, test: Mapping[str, Any], output: str, *,
               staff: bool = False) -> str:
    """The test's row: its status, name and points; a failed one's feedback (``output``,
    escaped and cut to its share of the page, see :mod:`graders.feedback.budget`). A
    hidden test's row shows its name and that it is hidden, nothing else, except on the
    staff page, where it is labelled as hidden from students."""
    name = esc(test.get("name", ""))
    visibility = str(test.get("visibility", "visible"))
    hidden = HIDDEN_TEXT.get(visibility, "hidden")
    if visibility != "visible" and not staff:  # its name and that it is hidden: nothing else
        return (f'<li class="test hidden" data-visibility="{esc(visibility)}">'
                f'<span class="status">hidden</span> {name} <em>({esc(hidden)})</em></li>')
    status = "passed" if test.get("status") == "passed" else "failed"
    # the state in words, not by the border's colour alone
    said = "not run" if _outcome(test) == "not run" else status
    points = " / ".join(shown_pair(float(test.get("score", 0)), float(test.get("max_score", 0))))
    label = "" if visibility == "visible" else \
        f' <strong class="staff-only">[hidden from students: {esc(hidden)}]</strong>'
    item = (f'<li class="test {status}" id="test-{number}"'
            + (f' data-visibility="{esc(visibility)}"' if visibility != "visible" else "")
            + f'><span class="status">{said}</span> {name} <em>({esc(points)})</em>{label}')
    if status != "passed" and output:
        item += f"<pre>{output}</pre>"
    return item + "</li>"


def _curves(plots: Sequence[PlotView], reality: Mapping[str, Sequence[RealityCurve]],
            missing: Mapping[str, str]) -> str:
    parts = ['<section id="curves"><h2>Your curves against the reference</h2>',
             "<p>Thick pale lines are the reference; dashed lines with dots are yours. "
             "&#9650; at the top of a plot is an infinite value (an unstable queue); "
             "a red &#10006; marks a point where your values break one of the lab's "
             "invariants. Every point here uses the tracks' public data only.</p>",
             f"<p>{esc(PASS_MARK_TEXT)}</p>"]
    if reality:
        parts.append(REALITY_TEXT)
    if not plots:
        parts.append("<p>No curves were measured.</p>")
    tracks: dict[str, list[PlotView]] = {}
    for plot in plots:
        tracks.setdefault(plot.track_id, []).append(plot)
    for track_id, members in tracks.items():
        parts.append(f'<section class="track" data-track="{esc(track_id)}">'
                     f"<h3>{esc(members[0].track_label)} ({esc(track_id)})</h3>"
                     '<div class="plots">')
        parts.extend(_plot(plot) for plot in members)
        parts.append("</div>" + (_reality_table(track_id, reality[track_id])
                                 if track_id in reality else
                                 _reality_missing(missing.get(track_id, "not built")))
                     + "</section>")
    parts.append("</section>")
    return "\n".join(parts)


def _reality_missing(reason: str) -> str:
    """One line: why the track has no reality curve, and what to run."""
    text = MISSING_TEXT.get(reason, MISSING_TEXT["not built"])
    return REALITY_MISSING.format(reason=esc(reason), text=esc(text))


def _reality_table(track_id: str, curves: Sequence[RealityCurve]) -> str:
    """The track's formula p99 against the real one at its defaults, and where the SLO
    verdicts of the formula and of reality differ."""
    if not curves:
        return ""
    rows = "".join(
        f'<tr data-function="{esc(c.function)}"><td>{esc(c.function)}</td>'
        f"<td>{esc(input_text(c, c.default.x))}</td>"
        f'<td class="num">{esc(milliseconds(c.default.formula_p99_ms))}</td>'
        f'<td class="num">{esc(real_text(c.default))}</td>'
        f'<td class="num">{esc(error_text(c.default))}</td>'
        f"<td>{esc(flip_text(c))}</td></tr>"
        for c in curves)
    return (f'<table class="reality" data-track="{esc(track_id)}"><caption>Formula against '
            "reality at the track's defaults (SLO "
            f"{esc(milliseconds(curves[0].slo_ms))}; not graded)</caption><thead><tr>"
            "<th>function</th><th>at</th><th>formula p99</th><th>real p99</th><th>error</th>"
            f"<th>SLO verdicts differ</th></tr></thead><tbody>{rows}</tbody></table>")


def _plot(plot: PlotView) -> str:
    data = f'data-function="{esc(plot.function)}" data-track="{esc(plot.track_id)}"'
    details = ("".join(f'<p class="message">{esc(message)}</p>' for message in plot.messages)
               + _list("violations", "Invariants your values break:", plot.violations)
               + _list("notes", "Points without a value:", plot.notes))
    if plot.image is None:
        return (f'<div class="no-plot" {data}><h4>{esc(plot.function)}</h4>'
                f"{details}<p>Fix this and grade again to see its curves.</p></div>")
    alt = f"{plot.function} on {plot.track_id}: your curves against the reference"
    return (f'<figure class="plot" {data}><h4>{esc(plot.function)}</h4>'
            f'<img {data} src="{esc(plot.image)}" alt="{esc(alt)}">'
            f"<figcaption>{details}</figcaption></figure>")


def _list(kind: str, heading: str, items: Sequence[str]) -> str:
    if not items:
        return ""
    lead = f"<p>{esc(heading)}</p>" if heading else ""
    rows = "".join(f"<li>{esc(item)}</li>" for item in items)
    return f'{lead}<ul class="{esc(kind)}">{rows}</ul>'
