"""The essentials of a grading as the top-level output of Gradescope's results.json, in its
``html`` format: what students see on Gradescope without the HTML page.

Gradescope sanitizes ``html`` output and styles few tags, so the snippet uses only plain
ones that sanitizers keep (``p``, ``strong``, ``pre``): the per-function table as
aligned text in a ``pre``, then the first failed case. Every text in it is escaped as
HTML element content (:func:`_text`). Hidden tests are left out of the table (their points
would reveal their scores).
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from graders.escaping import escape_controls
from graders.grading.scoring import TestScore, written_points
from graders.results.reports import points_rows, points_text

#: Lines of a failed test's feedback shown as its first failed case, at most.
MAX_CASE_LINES = 12
#: The page's file name everywhere students read it: this hint, the student README, the
#: student bundle's .gitignore (which keeps it out of their commits), the class regrade.
PAGE_FILE = "feedback.html"
#: Where the rest is; Gradescope's output only (the page itself never says it).
PAGE_HINT = ("The full feedback, every failed case and plots of your curves against the "
             f"reference, is on the HTML page: run pytest --grader-html {PAGE_FILE} in your "
             f"copy of the lab repository, then open {PAGE_FILE} in a browser.")


def essentials_html(scores: Sequence[TestScore], outcome: str, printed: str = "") -> str:
    """The top-level output: ``outcome`` (how grading went: a partial run, an import
    error), the per-function table of the visible tests, the first failed visible test's
    first failed case, where the full feedback is, then ``printed`` (what the code
    printed, if anything)."""
    visible = [score for score in scores if score.visibility == "visible"]
    parts = [f"<pre>{_text(outcome)}</pre>", _table(visible)]
    failed = next((score for score in visible if score.status not in ("passed", "not run")),
                  None)
    if failed is not None:
        parts += [f"<p><strong>First failed case</strong> ({_text(failed.name)}):</p>",
                  f"<pre>{_text(first_case(failed.output))}</pre>"]
    parts.append(f"<p>{_text(PAGE_HINT)}</p>")
    if printed:
        parts.append(f"<pre>{_text(printed)}</pre>")
    return "\n".join(parts)


def first_case(output: str) -> str:
    """A failed test's feedback cut to its first failed case: the summary line, its notes,
    and the first ``case ...`` block (all of a short feedback)."""
    lines = output.splitlines()
    starts = [index for index, line in enumerate(lines) if line.startswith("case ")]
    end = starts[1] if len(starts) > 1 else len(lines)
    return "\n".join(lines[:min(end, MAX_CASE_LINES)])


def _table(scores: Sequence[TestScore]) -> str:
    """The visible tests by function, with the points every output writes (the visible
    tests' points are shared among them alone, so this is their share of the terminal's
    table too)."""
    points = written_points(scores)
    lines = points_rows(scores, points, "function", "function")
    if lines:
        earned, maximum = points_text(points.total_earned, points.total_maximum)
        width = len(lines[0]) - len(f"  {'score':>8}  {'max':>8}  tests")
        lines.append(f"{'visible':<{width}}  {earned:>8}  {maximum:>8}")
    return ("<p><strong>Score by function</strong> (visible tests):</p>\n"
            f"<pre>{_text(chr(10).join(lines))}</pre>")


#: Markdown's link and image brackets as HTML character references: they read the same,
#: and nothing would render as a link or an image even were the output read as Markdown.
_MARKDOWN_LINKS = str.maketrans({"[": "&#91;", "]": "&#93;", "!": "&#33;"})


def _text(text: str) -> str:
    """``text`` as HTML element content: ``& < >`` escaped, control characters escaped
    visibly, link and image brackets as references; quotes stay as they are (no
    attribute is ever built from it)."""
    return html.escape(escape_controls(text), quote=False).translate(_MARKDOWN_LINKS)
