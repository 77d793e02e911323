"""Points and partial credit (graders.grading.scoring); the reports built from them are
tested in results/test_reports.py."""

from __future__ import annotations

import math
import re
from fractions import Fraction

import pytest
from helpers import sample_score
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.grading.scoring import (
    MAX_POINTS,
    SCORE_DECIMALS,
    SCORE_UNIT,
    VISIBILITIES,
    GraderMark,
    TestScore,
    decimal_text,
    exact_points,
    on_grid,
    rounded,
    scaled_maxima,
    total,
    written_points,
)

WHERE = "graders/suite/test_cases.py::test_serve"


def score(name: str = "serve matches", maximum: Fraction | None = None, **kwargs: object
          ) -> TestScore:
    """A sample test's score; ``maximum`` as its second argument."""
    if maximum is not None:
        kwargs["max_score"] = maximum
    return sample_score(name, **kwargs)  # type: ignore[arg-type]


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


def test_equal_weights_split_the_total_in_thirds_on_the_grid_adding_up_exactly() -> None:
    maxima = scaled_maxima({"a": 1.0, "b": 1.0, "c": 1.0}, 100.0)
    unit = SCORE_UNIT
    assert maxima == {"a": Fraction(100, 3) + unit * Fraction(2, 3),
                      "b": Fraction(100, 3) - unit / 3, "c": Fraction(100, 3) - unit / 3}
    assert sum(maxima.values()) == 100


def test_six_tracks_maxima_add_up_to_the_total_as_written() -> None:
    # the four book tracks and two more: each per-track test a sixth of its function's
    weights = {f"{function}[{track}]": points / 6 for function, points in
               (("cache", 11.0), ("cold", 11.0), ("profile", 12.0)) for track in range(6)}
    weights.update({"serve": 12.0, "erlang": 11.0, "queue": 23.0, "tax": 12.0, "state": 4.0,
                    "units": 4.0})
    maxima = scaled_maxima(weights, 100)
    assert sum(rounded(value) for value in maxima.values()) == pytest.approx(100, abs=1e-9)
    assert sum(maxima.values(), Fraction(0)) == 100


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(weights=st.lists(st.floats(min_value=0.001, max_value=1000, allow_nan=False),
                        min_size=1, max_size=200),
       units=st.integers(min_value=1, max_value=MAX_POINTS * 10**SCORE_DECIMALS),
       visible=st.lists(st.booleans(), min_size=200, max_size=200))
def test_any_weights_and_total_give_grid_maxima_adding_up_exactly(
        weights: list[float], units: int, visible: list[bool]) -> None:
    total_points = units * SCORE_UNIT
    keyed = {f"t{i}": weight for i, weight in enumerate(weights)}
    for groups in (None, {key: str(visible[i]) for i, key in enumerate(keyed)}):
        maxima = scaled_maxima(keyed, total_points, groups)
        assert sum(maxima.values(), Fraction(0)) == total_points
        assert all((value / SCORE_UNIT).denominator == 1 for value in maxima.values())
        assert all(value >= 0 for value in maxima.values())
        full = [score(key, maximum) for key, maximum in maxima.items()]
        written = written_points([s.with_outcome("passed", Fraction(1), "") for s in full])
        assert written.total_earned == written.total_maximum == total_points


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.lists(st.tuples(st.integers(0, 10**9), st.fractions(0, 1), st.booleans()),
                min_size=1, max_size=80))
def test_written_points_add_up_to_the_total_and_never_pass_a_maximum(
        tests: list[tuple[int, Fraction, bool]]) -> None:
    scores = [score(f"t{i}", units * SCORE_UNIT,
                    visibility="visible" if visible else "hidden").with_outcome(
                        "failed", fraction, "")
              for i, (units, fraction, visible) in enumerate(tests)]
    written = written_points(scores)
    assert sum(written.earned, Fraction(0)) == written.total_earned
    assert sum(written.maxima, Fraction(0)) == written.total_maximum
    assert all(0 <= earned <= maximum for earned, maximum in
               zip(written.earned, written.maxima, strict=True))
    for visible in (True, False):  # each group's total is its exact total, rounded
        group = [i for i, s in enumerate(scores) if (s.visibility == "visible") == visible]
        exact = sum((scores[i].earned for i in group), Fraction(0))
        assert abs(sum((written.earned[i] for i in group), Fraction(0)) - exact) \
            <= SCORE_UNIT / 2
    for s, earned in zip(scores, written.earned, strict=True):
        assert abs(earned - s.earned) < SCORE_UNIT


def test_a_visible_test_is_written_the_same_whether_or_not_hidden_tests_ran() -> None:
    maxima = scaled_maxima({"a": 1, "b": 1, "c": 1, "h": 1}, 100,
                           groups={"a": "visible", "b": "visible", "c": "visible",
                                   "h": "other"})
    visible = [score(name, maxima[name]).with_outcome("failed", Fraction(1, 3), "")
               for name in "abc"]
    hidden = score("h", maxima["h"], visibility="hidden").with_outcome(
        "failed", Fraction(2, 7), "")
    assert written_points([*visible, hidden]).earned[:3] == written_points(visible).earned


@pytest.mark.parametrize(("text", "value"), [("100", Fraction(100)), ("33.333333",
                         Fraction(33333333, 10**6)), ("95.5", Fraction(191, 2)),
                         ("1e2", Fraction(100)), (" 7 ", Fraction(7))])
def test_a_total_of_points_is_read_exactly(text: str, value: Fraction) -> None:
    assert exact_points(text) == value
    assert exact_points(decimal_text(value)) == value


@pytest.mark.parametrize(("text", "rule"), [
    ("33.3333333", "at most 6 decimals"), ("0", "> 0"), ("-5", "> 0"), ("nan", "a number"),
    ("inf", "a number"), ("abc", "a number"), ("1e7", "<= 1,000,000"), ("", "a number")])
def test_a_total_the_outputs_cannot_keep_is_refused_with_the_rule(text: str, rule: str) -> None:
    with pytest.raises(ValueError, match=re.escape(rule)):
        exact_points(text)


def test_decimal_text_writes_a_total_back_as_typed() -> None:
    assert decimal_text(Fraction(100)) == "100"
    assert decimal_text(Fraction(33333333, 10**6)) == "33.333333"
    assert decimal_text(Fraction(191, 2)) == "95.5"


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


# --- each function's maximum is its share on the grid ----------------------------------------

UNIT = SCORE_UNIT  # the grid of written scores


@settings(max_examples=200, deadline=None)
@given(points=st.lists(st.integers(1, 30), min_size=1, max_size=10),
       tests=st.lists(st.integers(1, 25), min_size=10, max_size=10),
       hidden=st.lists(st.booleans(), min_size=10, max_size=10),
       total=st.integers(1, 10**9).map(lambda units: Fraction(units, 10**6)))
def test_each_functions_maxima_add_up_to_its_share_on_the_grid(
        points: list[int], tests: list[int], hidden: list[bool], total: Fraction) -> None:
    """A function of ``points`` split over its tests (one per track: up to 25), its last
    test hidden when drawn so: its tests' maxima add up to its exact share of the total
    within one grid unit per group it spans (visible, hidden), and exactly when each of
    its groups' exact share lies on the grid."""
    weights: dict[str, Fraction] = {}
    groups: dict[str, tuple[str, str, str]] = {}
    for f, whole in enumerate(points):
        count = tests[f] + (1 if hidden[f] else 0)
        for t in range(count):
            key = f"f{f}-t{t}"
            weights[key] = Fraction(whole, tests[f]) if t < tests[f] else Fraction(1)
            groups[key] = ("other" if t >= tests[f] else "visible", "lab", f"f{f}")
    maxima = scaled_maxima(weights, total, groups=groups)
    assert sum(maxima.values()) == total
    assert all(value == on_grid(value) for value in maxima.values())
    whole = sum(weights.values())
    for f in range(len(points)):
        mine = [key for key in weights if key.startswith(f"f{f}-")]
        spans = len({groups[key][0] for key in mine})
        exact = total * sum(weights[key] for key in mine) / whole
        assert abs(sum(maxima[key] for key in mine) - exact) <= spans * UNIT, f
