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
    """The ``grader`` marker of a test: its points, function, visibility and, for a test
    of cases, how many unseen inputs the official grade adds (None: the default)."""

    points: float
    function: str
    visibility: Visibility = "visible"
    unseen: int | None = None

    @classmethod
    def from_marker(cls, args: Sequence[object], kwargs: Mapping[str, object],
                    where: str) -> GraderMark:
        """Validate ``@pytest.mark.grader(points=..., function=..., visibility=...,
        unseen=...)``."""
        if args:
            raise ValueError(f"{where}: grader marker takes keywords only, got {args!r}")
        unknown = set(kwargs) - {"points", "function", "visibility", "unseen"}
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
        unseen = kwargs.get("unseen")
        if unseen is not None and (type(unseen) is not int or not 0 <= unseen <= 1000):
            raise ValueError(f"{where}: grader unseen must be a whole number from 0 to 1000, "
                             f"got {unseen!r}")
        return cls(float(points), function, visibility,  # type: ignore[arg-type]
                   unseen)


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


#: The grid every written score lies on: :data:`SCORE_DECIMALS` places.
SCORE_UNIT = Fraction(1, 10**SCORE_DECIMALS)
#: The largest total a suite may be worth: written scores keep every decimal up to it.
MAX_POINTS = 10**6


def exact_points(text: str) -> Fraction:
    """A total of points as typed (``"33.333333"``, ``"1e2"``): exact, > 0, at most
    :data:`MAX_POINTS`, with no more than :data:`SCORE_DECIMALS` decimals (the outputs
    keep no more). Raises ValueError with the rule."""
    try:
        value = Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"expected a number, got {text!r}") from None
    if not 0 < value <= MAX_POINTS:
        raise ValueError(f"must be a number > 0 and <= {MAX_POINTS:,}, got {text!r}")
    if (value / SCORE_UNIT).denominator != 1:
        raise ValueError(f"must have at most {SCORE_DECIMALS} decimals (the scores written "
                         f"out keep {SCORE_DECIMALS}), got {text!r}")
    return value


def apportioned(shares: Sequence[Fraction], total: Fraction) -> list[Fraction]:
    """``shares`` on the grid of written scores, adding up to ``total`` exactly.

    The largest-remainder method: each share is rounded down to a multiple of
    :data:`SCORE_UNIT`, then the units still missing from ``total`` (a multiple of it) go
    one each to the shares that lost the most, the earliest first among equals. No share
    moves by a unit or more, and a share already on the grid keeps its value when the
    others are on it too.
    """
    units = total / SCORE_UNIT
    if units.denominator != 1:
        raise ValueError(f"total {total} is not a multiple of {SCORE_UNIT}")
    floors = [math.floor(share / SCORE_UNIT) for share in shares]
    missing = int(units) - sum(floors)
    if not 0 <= missing <= len(shares):
        raise ValueError(f"shares adding up to {sum(shares, Fraction(0))} cannot be "
                         f"apportioned to {total}")
    order = sorted(range(len(shares)),
                   key=lambda index: (-(shares[index] / SCORE_UNIT - floors[index]), index))
    for index in order[:missing]:
        floors[index] += 1
    return [units_ * SCORE_UNIT for units_ in floors]


def on_grid(value: Fraction) -> Fraction:
    """``value`` rounded to the nearest multiple of :data:`SCORE_UNIT` (halves up)."""
    return math.floor(value / SCORE_UNIT + Fraction(1, 2)) * SCORE_UNIT


def scaled_maxima(weights: Mapping[str, float | Fraction], total: Fraction | float,
                  groups: Mapping[str, str | tuple[str, ...]] | None = None
                  ) -> dict[str, Fraction]:
    """Each test's maximum: its weight's share of ``total``, apportioned on the grid of
    written scores, so that the maxima as written add up to ``total`` exactly.

    With ``groups`` (a group name per key, or a path of names, one per level), ``total``
    is first shared among the groups by their weights, then each group's share among its
    subgroups, and so on down to its members: every group's maxima then add up to its
    share exactly (the visible tests of a suite to what a student bundle grades out of,
    whatever the number of tracks; within them, each function's tests to the function's
    share)."""
    exact = {key: Fraction(str(weight)) for key, weight in weights.items()}
    goal = on_grid(Fraction(total))
    if groups is None:
        return _shared(exact, goal)
    paths = {key: (path,) if isinstance(path, str) else tuple(path)
             for key, path in groups.items()}
    return _nested(exact, goal, paths, 0)


def _nested(weights: Mapping[str, Fraction], goal: Fraction,
            paths: Mapping[str, tuple[str, ...]], level: int) -> dict[str, Fraction]:
    """``goal`` shared among the groups of ``weights`` at ``level`` of their ``paths``, each
    group's share among its own (the members themselves past the last level)."""
    if all(len(paths[key]) <= level for key in weights):
        return _shared(weights, goal)
    members: dict[str, dict[str, Fraction]] = {}
    for key, weight in weights.items():
        members.setdefault(paths[key][level], {})[key] = weight
    group_totals = _shared({name: sum(part.values(), Fraction(0))
                            for name, part in members.items()}, goal)
    maxima: dict[str, Fraction] = {}
    for name, part in members.items():
        maxima.update(_nested(part, group_totals[name], paths, level + 1))
    return {key: maxima[key] for key in weights}


def _shared(weights: Mapping[str, Fraction], goal: Fraction) -> dict[str, Fraction]:
    whole = sum(weights.values(), Fraction(0))
    if whole == 0:
        return {key: Fraction(0) for key in weights}
    shares = [goal * weight / whole for weight in weights.values()]
    return dict(zip(weights, apportioned(shares, goal), strict=True))


@dataclass(frozen=True)
class WrittenPoints:
    """The points of a list of tests as every output writes them: each test's earned points
    and maximum on the grid, adding up exactly to the totals written beside them."""

    earned: tuple[Fraction, ...]
    maxima: tuple[Fraction, ...]
    total_earned: Fraction
    total_maximum: Fraction


def written_points(scores: Sequence[TestScore]) -> WrittenPoints:
    """The points ``scores`` write, group by group: the visible tests, then the others
    (the shares :func:`scaled_maxima` gives first). A group's earned total is its exact
    total rounded to the grid (never above its maximum), shared among its tests by the
    largest-remainder method (:func:`apportioned`): no test shows more than its maximum,
    the tests add up to the total every output prints, and a visible test is written the
    same whether or not the hidden tests ran (a student bundle's grading and the official
    one agree test by test)."""
    maxima = [on_grid(score.max_score) for score in scores]
    exact = [min(max(score.earned, Fraction(0)), maximum)
             for score, maximum in zip(scores, maxima, strict=True)]
    earned = [Fraction(0)] * len(scores)
    for visible in (True, False):
        members = [index for index, score in enumerate(scores)
                   if (score.visibility == "visible") == visible]
        if not members:
            continue
        group_maximum = sum((maxima[index] for index in members), Fraction(0))
        group_total = min(on_grid(sum((exact[index] for index in members), Fraction(0))),
                          group_maximum)
        for index, value in zip(members, apportioned([exact[index] for index in members],
                                                     group_total), strict=True):
            earned[index] = value
    return WrittenPoints(tuple(earned), tuple(maxima), sum(earned, Fraction(0)),
                         sum(maxima, Fraction(0)))


def decimal_text(value: Fraction) -> str:
    """``value`` (on the grid) as a plain decimal, with no trailing zeros: ``"33.333333"``,
    ``"100"``; what a total typed at the command line is written back as."""
    units = math.floor(on_grid(value) / SCORE_UNIT)
    whole, part = divmod(units, 10**SCORE_DECIMALS)
    return f"{whole}.{part:0{SCORE_DECIMALS}d}".rstrip("0").rstrip(".")


def rounded(value: Fraction) -> float:
    """A score as written out: a float with :data:`SCORE_DECIMALS` places."""
    return round(float(value), SCORE_DECIMALS)


def total(scores: Sequence[TestScore]) -> tuple[Fraction, Fraction]:
    """(earned, maximum) over ``scores``."""
    return (sum((s.earned for s in scores), Fraction(0)),
            sum((s.max_score for s in scores), Fraction(0)))
