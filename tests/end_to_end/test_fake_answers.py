"""Submissions that fake their answers earn nothing beyond what they implement honestly.

``tests/fakes/`` holds submissions that compute nothing: constants, NaN, always-equal
floats, the fallback 0 and echoes of the inputs, each graded to exactly 0, and one that is
honest in ``serve`` only, graded to exactly serve's points. The partly honest gradings
below build more such submissions from the correct one: the functions of one dependency
group stay honest, every other function answers constants, and the score must be exactly
the points the honest group earns in the correct grading. Each case grades only itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import CORPUS, FAKES

from graders.grading.contract import RESULT_FIELDS

pytestmark = pytest.mark.slow

CORRECT = CORPUS / "correct" / "serving.py"

#: What each fake earns: nothing, or (for honest_serve_fake_rest) serve's 12 points.
FAKE_SCORES = {
    "constant_numbers": 0.0,
    "always_equal_floats": 0.0,
    "nan_everywhere": 0.0,
    "fallback_zero": 0.0,
    "echo_inputs": 0.0,
    "honest_serve_fake_rest": 12.0,
}
#: The points of each function in a grading of the correct solution (100 in all).
POINTS = {"serve": 12.0, "erlang_c": 11.0, "queueing_latency": 23.0, "batching_tax": 12.0,
          "transformer_state_gb": 4.0, "cache_capacity": 11.0, "cold_start_latency": 11.0,
          "quantity_to_float": 4.0, "serving_track_profile": 12.0}
#: Functions that stay honest together: each group holds the functions its members call.
HONEST_GROUPS = (
    ("serve",),
    ("cold_start_latency",),
    ("erlang_c", "queueing_latency", "batching_tax"),
    ("quantity_to_float", "serving_track_profile"),
    ("transformer_state_gb", "cache_capacity"),
)
CONSTANT_ANSWERS = '''

# --- every function outside the honest group answers constants ---------------------------
from types import SimpleNamespace as _Namespace


def _fake(*args, **kwargs):
    return _Namespace(**{name: 1.0 for name in FIELDS})
'''


def grade(submission: Path, results: Path) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, "-m", "graders", "grade", str(submission), "--results", str(results),
         "-q"], capture_output=True, text=True, cwd=results.parent, timeout=600, check=False)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    document: dict[str, Any] = json.loads(results.read_text(encoding="utf-8"))
    return document


def function_points(document: dict[str, Any]) -> dict[str, float]:
    points: dict[str, float] = {}
    for test in document["tests"]:
        function = test["tags"][0]
        points[function] = points.get(function, 0.0) + test["score"]
    return points


def test_the_points_per_function_add_up_to_the_correct_grading(tmp_path: Path) -> None:
    document = grade(CORRECT.parent, tmp_path / "results.json")
    assert document["score"] == 100.0
    assert {name: round(value, 6) for name, value in function_points(document).items()} \
        == POINTS


@pytest.mark.parametrize("name", sorted(FAKE_SCORES))
def test_a_fake_submission_earns_nothing_beyond_its_honest_part(name: str,
                                                               tmp_path: Path) -> None:
    document = grade(FAKES / name, tmp_path / "results.json")
    assert document["score"] == FAKE_SCORES[name]
    if name == "honest_serve_fake_rest":
        earned = {function for function, points in function_points(document).items()
                  if points}
        assert earned == {"serve"}


def honest_only(group: tuple[str, ...]) -> str:
    """The correct solution with every function outside ``group`` answering constants."""
    source = CORRECT.read_text(encoding="utf-8")
    fields = sorted({field for names in RESULT_FIELDS.values() if names for field in names})
    lines = [source, CONSTANT_ANSWERS.replace("FIELDS", repr(fields))]
    for function in POINTS:
        if function in group:
            continue
        if function == "serve":
            lines.append("def serve(*args, **kwargs):\n    return ServeResult(1.0, 1.0, 1)\n")
        elif function == "erlang_c":
            lines.append("def erlang_c(*args, **kwargs):\n    return (1.0, 0.5)\n")
        elif function in ("transformer_state_gb", "quantity_to_float"):
            lines.append(f"def {function}(*args, **kwargs):\n    return 1.0\n")
        else:
            lines.append(f"def {function}(*args, **kwargs):\n    return _fake()\n")
    return "\n\n".join(lines)


@pytest.mark.parametrize("group", HONEST_GROUPS, ids=["+".join(g) for g in HONEST_GROUPS])
def test_a_partly_honest_submission_earns_exactly_its_honest_points(
        group: tuple[str, ...], tmp_path: Path) -> None:
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "serving.py").write_text(honest_only(group), encoding="utf-8")
    document = grade(folder, tmp_path / "results.json")
    points = function_points(document)
    assert document["score"] == pytest.approx(sum(POINTS[name] for name in group), abs=1e-6)
    for function, earned in points.items():
        expected = POINTS[function] if function in group else 0.0
        assert earned == pytest.approx(expected, abs=1e-6), function
