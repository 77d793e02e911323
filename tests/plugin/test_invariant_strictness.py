"""Every invariant of the suite holds a condition that a function computing nothing fails.

Each invariant test of ``graders/suite/test_invariants.py`` is run directly, with its gate
open, against answers that do not depend on the inputs: the reference's own answer to one
fixed case (the most plausible constant), all fields 1, all fields 0, NaN everywhere, and an
echo of the first number asked. Each must fail; the reference itself must pass.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Generator
from typing import Any

import pytest
from helpers import REPO

from graders.expected.reference import reference_expected, to_plain
from graders.grading.cases import RESULT_FIELDS, visible_cases
from graders.grading.checks import Student, StudentCallFailed
from graders.sandbox.runner import CallOutcome, CallRequest
from graders.suite import test_invariants as suite
from graders.trackfiles.tracks import Track, load_tracks

EXAMPLES = 6
INVARIANTS = sorted(name for name, function in vars(suite).items()
                    if name.startswith("test_") and inspect.isfunction(function))


def _fields(function: str, value: Callable[[str], Any]) -> Any:
    names = RESULT_FIELDS[function]
    return value("") if names is None else {name: value(name) for name in names}


def _first_number(args: tuple[Any, ...], kwargs: dict[str, Any]) -> float:
    numbers = [v for v in (*args, *kwargs.values())
               if isinstance(v, int | float) and not isinstance(v, bool)]
    return float(numbers[0]) if numbers else 0.0


class FakeStudent(Student):
    """A student whose answers come from ``answer(function, args, kwargs)``."""

    def __init__(self, test_name: str,
                 answer: Callable[[str, tuple[Any, ...], dict[str, Any]], Any]) -> None:
        super().__init__(runner=None, test_name=test_name)  # type: ignore[arg-type]
        self._answer = answer

    def _call_many(self, requests: list[CallRequest]) -> Generator[CallOutcome, None, None]:
        for request in requests:
            yield CallOutcome("ok", value=self._answer(request.function, tuple(request.args),
                                                       dict(request.kwargs or {})))


def _reference(function: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    import reference

    return to_plain(getattr(reference, function)(*args, **kwargs), RESULT_FIELDS[function])


@pytest.fixture(scope="module")
def tracks() -> tuple[Track, ...]:
    return load_tracks(REPO / "tracks")


@pytest.fixture(scope="module")
def fixed_answers(tracks: tuple[Track, ...]) -> dict[str, Any]:
    """The reference's answer to the first visible case of each function."""
    answers: dict[str, Any] = {}
    for case in visible_cases(tracks):
        answers.setdefault(case.function, reference_expected(case))
    return answers


def fakes(fixed: dict[str, Any]) -> dict[str, Callable[[str, tuple[Any, ...],
                                                        dict[str, Any]], Any]]:
    return {
        "the reference's answer to one case": lambda f, a, k: fixed[f],
        "ones": lambda f, a, k: _fields(f, lambda name: 1.0),
        "zeros": lambda f, a, k: _fields(f, lambda name: 0),
        "NaN": lambda f, a, k: _fields(f, lambda name: math.nan),
        "an echo of the first number": lambda f, a, k: _fields(
            f, lambda name: _first_number(a, k)),
    }


def run(name: str, student: Student, tracks: tuple[Track, ...]) -> None:
    test = getattr(suite, name)
    arguments: dict[str, Any] = {"student": student, "invariant_examples": EXAMPLES}
    if "tracks" in inspect.signature(test).parameters:
        arguments["tracks"] = tracks
    test(**arguments)


@pytest.mark.parametrize("name", INVARIANTS)
def test_the_reference_passes_every_invariant(name: str, tracks: tuple[Track, ...]) -> None:
    run(name, FakeStudent(name, _reference), tracks)


@pytest.mark.parametrize("fake", ["the reference's answer to one case", "ones", "zeros", "NaN",
                                  "an echo of the first number"])
@pytest.mark.parametrize("name", INVARIANTS)
def test_every_invariant_fails_an_answer_that_ignores_its_inputs(
        name: str, fake: str, tracks: tuple[Track, ...], fixed_answers: dict[str, Any]) -> None:
    with pytest.raises((AssertionError, StudentCallFailed)):
        run(name, FakeStudent(name, fakes(fixed_answers)[fake]), tracks)
