"""Checking cases and invariants against a student, with feedback a student can act on."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from graders.cases import RESULT_FIELDS, Case
from graders.compare import Difference, Tolerance, compare
from graders.hints import hint_for
from graders.runner import CallOutcome, StudentRunner

#: Functions whose infinite values mean an unstable queue.
QUEUE_FUNCTIONS = frozenset({"erlang_c", "queueing_latency", "batching_tax"})
#: Failed cases spelled out in one test's feedback; the rest are counted.
MAX_CASES_SHOWN = 4


class GradingFailure(AssertionError):
    """Some of a test's cases failed; the message is the student's feedback."""


class StudentCallFailed(AssertionError):
    """A student call raised, crashed, hung or returned garbage."""


@dataclass
class Tally:
    """Cases run and passed by one test, and the feedback of the failures."""

    total: int = 0
    passed: int = 0
    failures: list[str] = field(default_factory=list)

    def record(self, ok: bool, feedback: str = "") -> None:
        self.total += 1
        if ok:
            self.passed += 1
        else:
            self.failures.append(feedback)


def _number(value: Any) -> str:
    if isinstance(value, float):
        if math.isinf(value) or math.isnan(value):
            return str(value)
        return f"{value:.10g}"
    if isinstance(value, dict) and len(value) == 1:
        return f"<{next(iter(value.values()))}>"
    return repr(value)


def describe_difference(function: str, difference: Difference) -> str:
    """One line per wrong field: expected, got, errors, tolerance and a hint."""
    line = (f"  {difference.field}: expected {_number(difference.expected)}, "
            f"got {_number(difference.actual)} - {difference.reason}")
    if difference.abs_error is not None and difference.rel_error is not None:
        line += f"; abs error {difference.abs_error:.3g}, rel error {difference.rel_error:.3g}"
    hint = hint_for(function, difference.field)
    if function in QUEUE_FUNCTIONS and isinstance(difference.expected, float) \
            and math.isinf(difference.expected):
        hint = "the queue is unstable here (utilization >= 1): this value is infinite"
    return f"{line}\n    hint: {hint}" if hint else line


def failed_call_message(outcome: CallOutcome) -> str:
    """Why a call produced no value, in a student's words."""
    if outcome.status == "raised":
        if outcome.message.startswith("NotImplementedError"):
            return f"not implemented yet ({outcome.message})"
        return f"raised {outcome.message}"
    return outcome.message


class Grading:
    """Runs one test's cases against the student and keeps its :class:`Tally`."""

    def __init__(self, runner: StudentRunner, tolerance: Tolerance,
                 expected: Callable[[Case], Any], *, label: str, hidden: bool) -> None:
        self._runner = runner
        self._tolerance = tolerance
        self._expected = expected
        self._label = label
        self._hidden = hidden
        self.tally = Tally()

    def check(self, cases: Iterable[Case]) -> None:
        """Check every case; raise :class:`GradingFailure` with feedback if any failed."""
        for case in cases:
            self.tally.record(*self._check_one(case))
        if self.tally.failures:
            raise GradingFailure(self.feedback())

    def _check_one(self, case: Case) -> tuple[bool, str]:
        expected = self._expected(case)
        outcome = self._runner.call(case.function, case.args, case.kwargs, case.fields)
        heading = f"case {case.case_id!r}: {case.describe_inputs()}"
        if not outcome.ok:
            return False, f"{heading}\n  {failed_call_message(outcome)}"
        differences = compare(expected, outcome.value, self._tolerance)
        if not differences:
            return True, ""
        lines = [describe_difference(case.function, d) for d in differences]
        return False, "\n".join([heading, *lines])

    def feedback(self) -> str:
        """The failure summary: counts always, details only for visible tests."""
        tally = self.tally
        summary = (f"{self._label}: {tally.total - tally.passed} of {tally.total} cases failed "
                   f"(tolerance {self._tolerance.describe()})")
        if self._hidden:
            return summary + "; the cases of this test are hidden."
        reasons = {failure.split("\n", 1)[-1] for failure in tally.failures}
        if len(reasons) == 1 and len(tally.failures) > 1:
            only = next(iter(reasons)).strip()
            return f"{summary}\nevery failed case: {only}"
        shown = tally.failures[:MAX_CASES_SHOWN]
        rest = len(tally.failures) - len(shown)
        more = [f"... and {rest} more failed cases"] if rest else []
        return "\n".join([summary, *shown, *more])


class Student:
    """The student's functions for invariant tests: plain data back, or a failed assertion."""

    def __init__(self, runner: StudentRunner) -> None:
        self._runner = runner

    def call(self, function: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``function``; return its plain result, or raise :class:`StudentCallFailed`."""
        outcome = self._runner.call(function, args, kwargs, RESULT_FIELDS[function])
        if not outcome.ok:
            shown = ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())])
            raise StudentCallFailed(f"{function}({shown}): {failed_call_message(outcome)}")
        return outcome.value

    def real(self, function: str, field_name: str, value: Any) -> float:
        """``value`` if it is a real number, else a failed assertion naming the field."""
        if isinstance(value, dict):
            value = value.get(field_name, {"$missing": field_name})
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise StudentCallFailed(
                f"{function}: {field_name} must be a real number, got {_number(value)}")
        if math.isnan(value):
            raise StudentCallFailed(f"{function}: {field_name} is NaN")
        return float(value)
