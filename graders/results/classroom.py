"""GitHub Classroom output: the JSON that classroom-resources' grading reporter reads.

A grading step writes ``result=<base64 of this JSON>`` to ``$GITHUB_OUTPUT``; the
reporter step reads it from the ``<RUNNER>_RESULTS`` environment variable and adds up
each test's ``score`` against ``max_score``.
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


def classroom_results(scores: Sequence[TestScore], *, import_error: str | None = None,
                      grader_failure: str | None = None) -> dict[str, Any]:
    """The runner-results document: version, status, max_score and one entry per test
    (for a grader failure: status "error" and no test, so no points are reported).

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
            "max_score": rounded(points.total_maximum), "tests": tests}


def github_output_line(document: dict[str, Any]) -> str:
    """The ``result=...`` line for ``$GITHUB_OUTPUT`` (base64 of compact, strict JSON)."""
    text = json.dumps(document, allow_nan=False, separators=(",", ":"))
    return "result=" + base64.b64encode(text.encode("utf-8")).decode("ascii") + "\n"
