"""Points and partial credit (graders.grading.scoring); the reports built from them are
tested in results/test_reports.py."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from helpers import sample_score as score

from graders.grading.scoring import (
    SCORE_DECIMALS,
    VISIBILITIES,
    GraderMark,
    rounded,
    scaled_maxima,
    total,
)

WHERE = "graders/suite/test_cases.py::test_serve"


def mark(*args: object, **kwargs: object) -> GraderMark:
    return GraderMark.from_marker(args, kwargs, WHERE)


# --- GraderMark.from_marker ----------------------------------------------------------------


def test_a_valid_marker_gives_float_points_and_visible_by_default() -> None:
    assert mark(points=3, function="serve") == GraderMark(3.0, "serve", "visible")
    assert type(mark(points=3, function="serve").points) is float


@pytest.mark.parametrize("visibility", VISIBILITIES)
def test_every_gradescope_visibility_is_accepted(visibility: str) -> None:
    assert mark(points=1.5, function="erlang_c", visibility=visibility).visibility == visibility


def test_zero_points_are_allowed() -> None:
    assert mark(points=0, function="serve").points == 0.0


def test_positional_marker_arguments_are_refused_and_shown() -> None:
    with pytest.raises(ValueError, match=rf"^{WHERE}: grader marker takes keywords only, "
                                         r"got \(3, 'serve'\)$"):
        mark(3, "serve")


@pytest.mark.parametrize("points", [-1, -0.5, -1e-9])
def test_negative_points_are_refused_with_their_value(points: float) -> None:
    with pytest.raises(ValueError, match=rf"^{WHERE}: grader points must be a finite number >= 0, "
                                         rf"got {points!r}$"):
        mark(points=points, function="serve")


@pytest.mark.parametrize("points", [True, False])
def test_bool_points_are_refused(points: bool) -> None:
    message = f"grader points must be a finite number >= 0, got {points}"
    with pytest.raises(ValueError, match=message):
        mark(points=points, function="serve")


@pytest.mark.parametrize("points", [None, "3", [3], {"points": 3}])
def test_points_that_are_not_a_plain_number_are_refused(points: object) -> None:
    with pytest.raises(ValueError, match="grader points must be a finite number >= 0"):
        mark(points=points, function="serve")


def test_missing_points_are_refused() -> None:
    with pytest.raises(ValueError, match="grader points must be a finite number >= 0, got None"):
        mark(function="serve")


@pytest.mark.parametrize("points", [math.nan, math.inf])
def test_points_that_are_not_finite_are_refused(points: float) -> None:
    # NaN is not >= 0, and neither can be scaled: Fraction(nan) and Fraction(inf) raise.
    with pytest.raises(ValueError, match="grader points must be"):
        mark(points=points, function="serve")


def test_unknown_marker_keywords_are_refused_and_listed_sorted() -> None:
    with pytest.raises(ValueError, match=rf"^{WHERE}: unknown grader marker keyword\(s\) "
                                         r"\['track', 'weight'\]$"):
        mark(points=1, function="serve", weight=2, track="iphone")


@pytest.mark.parametrize("function", [None, "", 3])
def test_a_marker_must_name_a_function(function: object) -> None:
    with pytest.raises(ValueError, match=f"^{WHERE}: grader function must name a contract"):
        mark(points=1, function=function)


@pytest.mark.parametrize("visibility", ["Visible", "private", "", None])
def test_an_unknown_visibility_is_refused_with_the_allowed_ones(visibility: object) -> None:
    message = (f"grader visibility must be one of visible, hidden, after_due_date, "
               f"after_published, got {visibility!r}")
    with pytest.raises(ValueError, match=f"^{WHERE}: {message}$"):
        mark(points=1, function="serve", visibility=visibility)


# --- scaled_maxima, rounded, total ---------------------------------------------------------


def test_equal_weights_split_the_total_exactly_in_thirds() -> None:
    maxima = scaled_maxima({"a": 1.0, "b": 1.0, "c": 1.0}, 100.0)
    assert maxima == {"a": Fraction(100, 3), "b": Fraction(100, 3), "c": Fraction(100, 3)}
    assert sum(maxima.values()) == 100


@pytest.mark.parametrize(
    ("weights", "total_points"),
    [({"a": 0.1, "b": 0.2, "c": 0.7}, 100.0), ({"a": 3.0, "b": 1.5, "c": 1.0 / 3, "d": 7.0}, 37.5),
     ({f"t{i}": 1.0 / (i + 1) for i in range(48)}, 100.0), ({"only": 4.0}, 12.0)],
)
def test_scaled_maxima_sum_exactly_to_the_total(weights: dict[str, float],
                                                total_points: float) -> None:
    maxima = scaled_maxima(weights, total_points)
    assert set(maxima) == set(weights)
    assert sum(maxima.values(), Fraction(0)) == Fraction(total_points)


def test_scaled_maxima_keep_the_proportions_of_the_weights() -> None:
    maxima = scaled_maxima({"serve": 8.0, "erlang_c": 4.0}, 60.0)
    assert maxima == {"serve": Fraction(40), "erlang_c": Fraction(20)}


def test_all_zero_weights_give_zero_maxima_not_a_division_error() -> None:
    assert scaled_maxima({"a": 0.0, "b": 0.0}, 100.0) == {"a": 0, "b": 0}
    assert scaled_maxima({}, 100.0) == {}


def test_a_score_is_written_with_score_decimals_places() -> None:
    places = SCORE_DECIMALS
    assert places >= 2
    assert rounded(Fraction(1, 3)) == float("0." + "3" * places)
    assert rounded(Fraction(2, 3)) == float("0." + "6" * (places - 1) + "7")
    assert rounded(Fraction(100, 3)) == float("33." + "3" * places)
    assert rounded(Fraction(0)) == 0.0
    assert type(rounded(Fraction(7))) is float


def test_total_sums_earned_and_maximum_points_exactly() -> None:
    third = Fraction(100, 3)
    scores = [score(f"t{i}", max_score=third, earned=third if i else Fraction(0))
              for i in range(3)]
    assert total(scores) == (Fraction(200, 3), Fraction(100))
    assert total([]) == (0, 0)


# --- TestScore ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fraction", "earned"),
    [(Fraction(1, 2), Fraction(5)), (Fraction(1), Fraction(10)), (Fraction(0), Fraction(0)),
     (Fraction(3, 2), Fraction(10)), (Fraction(-1, 4), Fraction(0)), (Fraction(7), Fraction(10))],
)
def test_with_outcome_scales_the_maximum_by_the_fraction_clamped_to_0_and_1(
        fraction: Fraction, earned: Fraction) -> None:
    after = score().with_outcome("failed", fraction, "2 of 4 cases failed", 2, 4)
    assert after.earned == earned
    assert (after.status, after.output, after.passed_cases, after.total_cases) == (
        "failed", "2 of 4 cases failed", 2, 4)
    assert after.max_score == Fraction(10)


def test_with_outcome_returns_a_new_score_and_leaves_the_original() -> None:
    before = score()
    after = before.with_outcome("passed", Fraction(1), "All cases passed.")
    assert before.earned == 0
    assert before.status == "not run"
    assert after.earned == 10


def test_the_tags_name_the_function_and_the_track_when_there_is_one() -> None:
    assert score(function="cache_capacity", track="iphone").tags == ["cache_capacity", "iphone"]
    assert score(function="serve").tags == ["serve"]
