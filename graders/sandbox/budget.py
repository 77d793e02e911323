"""What a submission's calls may cost: the grading's time budget, with its part for hangs,
and the failures after which a function is not called again."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

from graders.sandbox.calls import Status
from graders.sandbox.limits import Limits

#: Why a function is not called again, by the status of the failures that count toward it.
STRIKES: dict[Status, str] = {"timeout": "it exceeded the per-call deadline",
                              "crashed": "it crashed the worker too often",
                              "garbage": "it made the worker send unreadable replies"}


class Strikes:
    """The failures of each function: one that failed too often one way is not called again
    (after ``timeouts_per_function`` timeouts, or ``crashes_per_function`` of the rest)."""

    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self._counts: Counter[tuple[Status, str]] = Counter()

    def count(self, status: Status, function: str | None) -> None:
        """Count a failure of ``function`` (None: no student function, nothing counted)."""
        if function is not None and status in STRIKES:
            self._counts[status, function] += 1

    def snapshot(self) -> Counter[tuple[Status, str]]:
        """The counts as they are (see :meth:`restore`)."""
        return Counter(self._counts)

    def restore(self, counts: Counter[tuple[Status, str]]) -> None:
        """Set the counts back to a :meth:`snapshot`."""
        self._counts = Counter(counts)

    def refusal(self, function: str) -> str | None:
        """Why ``function`` is not called again, or None."""
        for status, reason in STRIKES.items():
            count = self._counts[status, function]
            if count >= (self._limits.timeouts_per_function if status == "timeout"
                         else self._limits.crashes_per_function):
                return f"{function}() is not called again: {reason} {count} times"
        return None


@dataclass
class TimeBudget:
    """Wall time the student's code may cost one grading, shared by all its runners: calls,
    imports and restarts in all, and as a part of it hanging calls and their restarts."""

    total_s: float
    hang_s: float
    spent_s: float = 0.0
    hang_spent_s: float = 0.0

    @classmethod
    def of(cls, limits: Limits) -> TimeBudget:
        """A fresh budget of ``limits.total_budget_s`` and ``limits.hang_budget_s``."""
        return cls(total_s=limits.total_budget_s, hang_s=limits.hang_budget_s)

    def refusal(self) -> str | None:
        """Why no call is made any more, or None."""
        if self.hang_spent_s >= self.hang_s:
            return (f"not called: the submission used up the {self.hang_s:g} s budget for "
                    "hanging calls and worker restarts")
        return budget_message(self.total_s) if self.spent_s >= self.total_s else None

    def charged(self) -> _Charge:
        """A context that charges the wall time spent in it to this budget."""
        return _Charge(self)


class _Charge:
    """:meth:`TimeBudget.charged` (a class: cheaper than a generator, and made per call)."""

    def __init__(self, budget: TimeBudget) -> None:
        self.budget, self.started = budget, 0.0

    def __enter__(self) -> None:
        self.started = time.monotonic()

    def __exit__(self, *exc_info: object) -> None:
        self.budget.spent_s += time.monotonic() - self.started


def budget_message(budget_s: float) -> str:
    """Why a call is refused once the total time budget is spent."""
    return (f"time budget exhausted: the submission's calls, imports and worker restarts "
            f"have used the {budget_s:g} s that one grading allows them; this call was not run")
