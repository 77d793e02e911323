"""Points: marker weights scaled to the suite's maximum, and partial credit per test."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Literal, TypeAlias

Visibility: TypeAlias = Literal["visible", "hidden", "after_due_date", "after_published"]
VISIBILITIES: tuple[str, ...] = ("visible", "hidden", "after_due_date", "after_published")
Status: TypeAlias = Literal["passed", "failed", "error", "skipped", "not run"]
#: Decimal places of every score written out.
SCORE_DECIMALS = 6


@dataclass(frozen=True)
class GraderMark:
    """The ``grader`` marker of a test: its points, function and visibility."""

    points: float
    function: str
    visibility: Visibility = "visible"

    @classmethod
    def from_marker(cls, args: Sequence[object], kwargs: Mapping[str, object],
                    where: str) -> GraderMark:
        """Validate ``@pytest.mark.grader(points=..., function=..., visibility=...)``."""
        if args:
            raise ValueError(f"{where}: grader marker takes keywords only, got {args!r}")
        unknown = set(kwargs) - {"points", "function", "visibility"}
        if unknown:
            raise ValueError(f"{where}: unknown grader marker keyword(s) {sorted(unknown)}")
        points = kwargs.get("points")
        if isinstance(points, bool) or not isinstance(points, int | float) \
                or not math.isfinite(points) or points < 0:
            raise ValueError(f"{where}: grader points must be a finite number >= 0, "
                             f"got {points!r}")
        function = kwargs.get("function")
        if not isinstance(function, str) or not function:
            raise ValueError(f"{where}: grader function must name a contract function")
        visibility = kwargs.get("visibility", "visible")
        if visibility not in VISIBILITIES:
            raise ValueError(f"{where}: grader visibility must be one of "
                             f"{', '.join(VISIBILITIES)}, got {visibility!r}")
        return cls(float(points), function, visibility)  # type: ignore[arg-type]


@dataclass(frozen=True)
class TestScore:
    """One graded test: what it could earn, what it earned, and why."""

    __test__ = False  # not a pytest test class

    nodeid: str
    name: str
    function: str
    track: str | None
    visibility: Visibility
    max_score: Fraction
    earned: Fraction = Fraction(0)
    status: Status = "not run"
    passed_cases: int = 0
    total_cases: int = 0
    output: str = ""
    #: The first failed cases' values (:func:`graders.grading.checks.kept_case`).
    failed_cases: tuple[Mapping[str, object], ...] = ()

    @property
    def tags(self) -> list[str]:
        return [self.function] + ([self.track] if self.track else [])

    def with_outcome(self, status: Status, fraction: Fraction, output: str,
                     passed_cases: int = 0, total_cases: int = 0,
                     failed_cases: Sequence[Mapping[str, object]] = ()) -> TestScore:
        """This test after a run phase; only a call-phase outcome earns points."""
        fraction = min(Fraction(1), max(Fraction(0), fraction))
        return replace(self, status=status, earned=self.max_score * fraction, output=output,
                       passed_cases=passed_cases, total_cases=total_cases,
                       failed_cases=tuple(failed_cases))


def scaled_maxima(weights: Mapping[str, float], total: float) -> dict[str, Fraction]:
    """Each test's maximum: its weight's share of ``total`` (exact fractions)."""
    exact = {key: Fraction(weight) for key, weight in weights.items()}
    whole = sum(exact.values(), Fraction(0))
    if whole == 0:
        return {key: Fraction(0) for key in exact}
    return {key: Fraction(total) * weight / whole for key, weight in exact.items()}


def rounded(value: Fraction) -> float:
    """A score as written out: a float with :data:`SCORE_DECIMALS` places."""
    return round(float(value), SCORE_DECIMALS)


def total(scores: Sequence[TestScore]) -> tuple[Fraction, Fraction]:
    """(earned, maximum) over ``scores``."""
    return (sum((s.earned for s in scores), Fraction(0)),
            sum((s.max_score for s in scores), Fraction(0)))
