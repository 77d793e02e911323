"""Right answers in every shape the student README allows get full marks (issue 21).

Each submission is the correct solution with one function's result handed back in another
shape (its own code keeps calling the original, under another name): a plain tuple, a
list, a dict from ``dataclasses.asdict``, a namespace, Decimal or Fraction values. Each
must score exactly 100, and no output may say the anti-cheat verdict "gives the same
answer whatever it is asked". A result the grader cannot read gets one line naming the
shape to return.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import CORPUS, graders, load

pytestmark = pytest.mark.slow

CORRECT = (CORPUS / "correct" / "serving.py").read_text(encoding="utf-8")
VERDICT = "gives the same answer whatever it is asked"
#: (function, how its right result is handed back, given the original's result as ``r``).
SHAPES = {
    "serve as a plain tuple": ("serve", "tuple(r)"),
    "erlang_c as a list": ("erlang_c", "list(r)"),
    "erlang_c as Decimal values": (
        "erlang_c", "tuple(__import__('decimal').Decimal(repr(v)) for v in r)"),
    "queueing_latency as dataclasses.asdict": (
        "queueing_latency", "__import__('dataclasses').asdict(r)"),
    "cache_capacity as a namespace": (
        "cache_capacity",
        "__import__('types').SimpleNamespace(**__import__('dataclasses').asdict(r))"),
    "transformer_state_gb as a Fraction": (
        "transformer_state_gb", "r if r is None else __import__('fractions').Fraction(r)"),
}


def reshaped(function: str, expression: str) -> str:
    """The correct solution with ``function``'s result handed back as ``expression``."""
    source = re.sub(rf"\b{function}\(", f"_{function}_original(", CORRECT)
    return (f"{source}\n\ndef {function}(*args, **kwargs):\n"
            f"    r = _{function}_original(*args, **kwargs)\n    return {expression}\n")


def grade(source: str, folder: Path) -> dict[str, object]:
    folder.mkdir()
    (folder / "serving.py").write_text(source, encoding="utf-8")
    run = graders("grade", folder, "--results", folder / "results.json", "-q")
    assert run.returncode == 0, run.stdout + run.stderr
    document: dict[str, object] = load(folder / "results.json")
    return document


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_right_answer_in_an_allowed_shape_gets_full_marks(shape: str, tmp_path: Path) -> None:
    document = grade(reshaped(*SHAPES[shape]), tmp_path / "submission")
    assert document["score"] == 100.0
    assert VERDICT not in str(document)


def test_a_result_the_grader_cannot_read_gets_one_line_naming_the_shape(tmp_path: Path) -> None:
    document = grade(reshaped("erlang_c", "r[1]"), tmp_path / "submission")
    tests = document["tests"]
    assert isinstance(tests, list)
    erlang = [test for test in tests if test["tags"][0] == "erlang_c"]
    assert erlang
    for test in erlang:
        assert test["output"].count("erlang_c returns a value the grader cannot read") == 1
        assert "a tuple or list of exactly 2 values" in test["output"]
    assert VERDICT not in str(document)
