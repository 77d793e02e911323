"""GitHub Classroom output: the JSON that classroom-resources' grading reporter reads.

A grading step writes ``result=<base64 of this JSON>`` to ``$GITHUB_OUTPUT``; the
reporter step reads it from the ``<RUNNER>_RESULTS`` environment variable and adds up
each test's ``score`` against ``max_score``.

Every Classroom score is a preview: the workflow runs in the student's own repository,
which the student controls, and the student bundle grades the visible tests only. The
document's ``message`` says so, and how the final grade is made; ``graders grade
--github-output`` also prints it as a notice on the workflow run's page
(:func:`preview_notice`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from graders.escaping import escape_controls, for_actions_log
from graders.grading.scoring import TestScore, rounded, written_points

#: The version of the runner-results format the reporter reads.
CLASSROOM_VERSION = 1
#: How the final grade is made, said by every preview.
FINAL_GRADE = "The final grade is made by the course staff with the course's full grader"
#: The ``message`` of a Classroom report graded from a golden file (the student bundle).
VISIBLE_PREVIEW_MESSAGE = (
    "This score is a preview of the visible tests, not your grade: this workflow runs in "
    f"your own repository, which you control. {FINAL_GRADE}: it also runs the hidden tests "
    "and checks every function on inputs you have not seen.")
#: The ``message`` of a Classroom report graded with the reference.
PREVIEW_MESSAGE = (
    "This score is a preview, not the final grade: a GitHub Classroom workflow runs in the "
    f"student's own repository, which the student controls. {FINAL_GRADE}.")
#: The title of the notice that ``graders grade --github-output`` prints.
PREVIEW_TITLE = "Preview, not the final grade"


def classroom_results(scores: Sequence[TestScore], *, import_error: str | None = None,
                      grader_failure: str | None = None,
                      visible_only: bool = False) -> dict[str, Any]:
    """The runner-results document: version, status, max_score, one entry per test and a
    ``message`` saying that the score is a preview (of the visible tests, when
    ``visible_only``: graded from a golden file) and how the final grade is made (for a
    grader failure: status "error", no test, so no points are reported, and the reason).

    The reporter prints each message to the workflow's log: messages carry no escape
    sequence and no line that would start a workflow command
    (:func:`graders.escaping.for_actions_log`)."""
    points = written_points(scores)
    if grader_failure is not None:
        return {"version": CLASSROOM_VERSION, "status": "error",
                "max_score": rounded(points.total_maximum), "tests": [],
                "message": for_actions_log(f"the grader failed: {grader_failure}")}
    tests = []
    for score, earned in zip(scores, points.earned, strict=True):
        status = "pass" if score.status == "passed" else \
            "error" if score.status == "error" else "fail"
        hidden = score.visibility != "visible"
        tests.append({
            "name": escape_controls(score.name),
            "status": status,
            "score": rounded(earned),
            "message": "" if status == "pass" else
            ("Hidden test." if hidden else for_actions_log(score.output)),
            "test_code": score.nodeid,
            "filename": "serving.py",
            "line_no": 0,
            "execution_time": "",
        })
    if import_error:
        status = "error"
    elif all(test["status"] == "pass" for test in tests):
        status = "pass"
    else:
        status = "fail"
    return {"version": CLASSROOM_VERSION, "status": status,
            "max_score": rounded(points.total_maximum), "tests": tests,
            "message": VISIBLE_PREVIEW_MESSAGE if visible_only else PREVIEW_MESSAGE}


def github_output_line(document: dict[str, Any]) -> str:
    """The ``result=...`` line for ``$GITHUB_OUTPUT`` (base64 of compact, strict JSON)."""
    text = json.dumps(document, allow_nan=False, separators=(",", ":"))
    return "result=" + base64.b64encode(text.encode("utf-8")).decode("ascii") + "\n"


def preview_title(document: dict[str, Any]) -> str:
    """The notice's title: the points the reporter adds up from ``document``, called a
    preview (GitHub shows it beside the reporter's own "Points" notice, which cannot say
    so), or :data:`PREVIEW_TITLE` alone for a report without points."""
    tests = document.get("tests")
    maximum = document.get("max_score")
    if not tests or not isinstance(maximum, int | float) or isinstance(maximum, bool):
        return PREVIEW_TITLE
    total = sum(float(test.get("score", 0)) for test in tests)
    return f"Preview {total:.2f} / {float(maximum):.2f} points, not the final grade"


def preview_notice(document: dict[str, Any]) -> str:
    """The workflow command (one line for the log) that shows ``document``'s message as a
    notice titled by :func:`preview_title` on the workflow run's page, beside the
    reporter's points."""
    return (f"::notice title={_command_value(preview_title(document), in_property=True)}::"
            f"{_command_value(str(document.get('message', '')))}\n")


def preview_summary(document: dict[str, Any]) -> str:
    """Markdown for the job summary (``$GITHUB_STEP_SUMMARY``), which GitHub shows on the
    run's page: :func:`preview_title` as a heading, then the message (the grader's own
    text: no student content)."""
    message = escape_controls(str(document.get("message", "")))
    return f"### {preview_title(document)}\n\n{message}\n"


def _command_value(text: str, *, in_property: bool = False) -> str:
    """``text`` escaped as GitHub's workflow commands require: ``%``, CR and LF always, and
    ``:`` and ``,`` in a property."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if in_property else text
