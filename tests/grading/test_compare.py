"""The one comparison helper: tolerance, inf/NaN policy, exact types, sequences and fields."""

from __future__ import annotations

import math
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.grading.compare import (
    DEFAULT_ABS_TOL,
    DEFAULT_REL_TOL,
    Difference,
    Tolerance,
    compare,
    differs,
    type_name,
)

DEFAULT = Tolerance()
#: A tolerance whose bounds are exact binary fractions, so boundaries can be hit exactly.
QUARTER = Tolerance(rel=0.25, abs=0.0)
HALF_ABS = Tolerance(rel=0.0, abs=0.5)
INF = math.inf
NAN = math.nan


def agrees(expected: Any, actual: Any, tol: Tolerance = DEFAULT) -> bool:
    return compare(expected, actual, tol) == []


def only_reason(expected: Any, actual: Any, tol: Tolerance = DEFAULT) -> str:
    differences = compare(expected, actual, tol)
    assert len(differences) == 1, differences
    return differences[0].reason


# --- Tolerance ---------------------------------------------------------------------------


def test_the_default_tolerance_is_one_part_per_million_with_a_tiny_absolute_floor() -> None:
    assert (DEFAULT.rel, DEFAULT.abs) == (DEFAULT_REL_TOL, DEFAULT_ABS_TOL) == (1e-6, 1e-9)


@pytest.mark.parametrize(
    ("rel", "abs_"),
    [(-1e-6, 0.0), (0.0, -1e-9), (-0.0001, -1.0), (NAN, 0.0), (0.0, NAN), (INF, 0.0),
     (0.0, -INF)],
)
def test_a_negative_or_non_finite_tolerance_is_rejected(rel: float, abs_: float) -> None:
    with pytest.raises(ValueError, match="tolerance (rel|abs) must be a finite number >= 0"):
        Tolerance(rel=rel, abs=abs_)


def test_a_tolerance_that_is_not_a_number_is_rejected_with_its_value() -> None:
    with pytest.raises(ValueError, match="tolerance rel must be .* got '0.1'"):
        Tolerance(rel="0.1", abs=0.0)  # type: ignore[arg-type]


def test_a_zero_tolerance_is_allowed_and_demands_exact_reals() -> None:
    exact = Tolerance(rel=0.0, abs=0.0)
    assert agrees(0.1 + 0.2, 0.1 + 0.2, exact)
    assert not agrees(0.3, 0.1 + 0.2, exact)


def test_a_tolerance_describes_itself_for_messages() -> None:
    assert Tolerance(rel=1e-6, abs=1e-9).describe() == "rel 1e-06, abs 1e-09"


# --- reals: tolerance ---------------------------------------------------------------------


def test_a_real_exactly_at_the_relative_bound_agrees_from_either_side() -> None:
    # |4 - 3| = 1 = 0.25 * max(3, 4): exactly on the bound.
    assert agrees(3.0, 4.0, QUARTER)
    assert agrees(4.0, 3.0, QUARTER)
    assert agrees(-3.0, -4.0, QUARTER)


def test_a_real_just_past_the_relative_bound_is_outside_tolerance() -> None:
    beyond = math.nextafter(4.0, INF) + 1e-12
    assert only_reason(3.0, beyond, QUARTER) == "outside tolerance (rel 0.25, abs 0)"
    assert not agrees(beyond, 3.0, QUARTER)


def test_the_relative_bound_scales_with_the_larger_magnitude_not_the_expected_one() -> None:
    # Scaled by |expected| = 3 the bound would be 0.75 and this would fail.
    assert agrees(3.0, 4.0, QUARTER)
    assert not agrees(3.0, 4.0, Tolerance(rel=0.2499, abs=0.0))


def test_a_real_exactly_at_the_absolute_bound_agrees() -> None:
    assert agrees(1.0, 1.5, HALF_ABS)
    assert agrees(1.5, 1.0, HALF_ABS)
    assert agrees(0.0, -0.5, HALF_ABS)


def test_a_real_just_past_the_absolute_bound_is_outside_tolerance() -> None:
    assert not agrees(1.0, math.nextafter(1.5, INF), HALF_ABS)
    assert not agrees(0.0, math.nextafter(-0.5, -INF), HALF_ABS)


def test_the_absolute_floor_lets_tiny_values_agree_where_relative_error_is_huge() -> None:
    assert agrees(1e-12, 2e-12)  # rel error 0.5, abs error 1e-12 <= 1e-9
    assert agrees(0.0, 1e-9)
    assert not agrees(0.0, 2e-9)


def test_the_wider_of_the_relative_and_absolute_bounds_applies() -> None:
    tol = Tolerance(rel=0.25, abs=2.0)
    assert agrees(1.0, 3.0, tol)  # abs bound 2 is wider than 0.25 * 3
    assert agrees(100.0, 125.0, tol)  # rel bound 31.25 is wider than 2
    assert not agrees(1.0, 3.5, tol)


def test_a_difference_outside_tolerance_reports_its_absolute_and_relative_error() -> None:
    [difference] = compare(3.0, 5.0, QUARTER, field="total_ms")
    assert difference == Difference("total_ms", 3.0, 5.0, "outside tolerance (rel 0.25, abs 0)",
                                    abs_error=2.0, rel_error=0.4)


def test_negative_zero_equals_zero_even_with_a_zero_tolerance() -> None:
    exact = Tolerance(rel=0.0, abs=0.0)
    assert agrees(0.0, -0.0, exact)
    assert agrees(-0.0, 0.0, exact)


def test_large_reals_compare_relatively_without_overflow() -> None:
    big = sys.float_info.max
    assert agrees(big, big)
    assert agrees(1e300, 1e300 * (1 + 5e-7))
    assert not agrees(1e300, 1e300 * (1 + 2e-6))
    assert not agrees(big, -big)  # the difference overflows to inf: never within tolerance


def test_a_difference_of_opposite_maximal_reals_is_reported_not_raised() -> None:
    big = sys.float_info.max
    [difference] = compare(big, -big, DEFAULT)
    assert difference.reason.startswith("outside tolerance")
    assert difference.abs_error == INF


def test_an_int_is_accepted_where_a_real_is_expected() -> None:
    assert agrees(2.0, 2)
    assert agrees(256.0, 256)
    assert only_reason(2.0, 3).startswith("outside tolerance")


def test_a_huge_int_where_a_real_is_expected_is_a_difference_not_an_error() -> None:
    # A student may return any int; JSON carries it exactly. float() of it overflows.
    [difference] = compare(1.0, 10**400, DEFAULT, field="total_ms")
    assert difference.field == "total_ms"


@pytest.mark.parametrize(
    ("actual", "named"),
    [(True, "bool"), (False, "bool"), ("1.0", "str"), (None, "None"), ([1.0], "sequence"),
     ({"a": 1.0}, "object"), ({"$unsupported": "Decimal"}, "Decimal"),
     ({"$missing": "total_ms"}, "missing field"), ({"$error": "ValueError: x"},
                                                    "error while reading")],
)
def test_a_non_real_where_a_real_is_expected_names_its_type(actual: Any, named: str) -> None:
    assert only_reason(1.0, actual) == f"expected a real number, got {named}"


# --- reals: inf and NaN -------------------------------------------------------------------


@pytest.mark.parametrize("value", [INF, -INF])
def test_infinity_matches_the_same_infinity(value: float) -> None:
    assert agrees(value, value)


@pytest.mark.parametrize(
    ("expected", "actual"),
    [(INF, -INF), (-INF, INF), (INF, sys.float_info.max), (INF, 1e308), (1e308, INF),
     (5.0, INF), (5.0, -INF), (-INF, -1e308)],
)
def test_infinity_must_match_exactly(expected: float, actual: float) -> None:
    assert only_reason(expected, actual) == "infinity must match exactly"
    loose = Tolerance(rel=1e6, abs=1e300)
    assert only_reason(expected, actual, loose) == "infinity must match exactly"


@pytest.mark.parametrize("expected", [0.0, 1.0, -2.5, INF, -INF])
def test_nan_is_never_a_right_answer(expected: float) -> None:
    assert only_reason(expected, NAN) == "NaN is never a right answer"


def test_nan_is_wrong_even_when_nan_is_expected() -> None:
    assert not agrees(NAN, NAN, Tolerance(rel=1e6, abs=1e300))


# --- symmetry -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [(3.0, 4.0), (3.0, 4.000001), (1.0, 1.5), (1.0, 1.50001), (0.0, -0.0), (INF, INF),
     (INF, -INF), (1e300, 1e300 * (1 + 1e-7)), (0.0, 1e-9), (0.0, 1.1e-9), (-1.0, 1.0)],
)
@pytest.mark.parametrize("tol", [DEFAULT, QUARTER, HALF_ABS], ids=["default", "rel", "abs"])
def test_the_real_comparison_is_symmetric(a: float, b: float, tol: Tolerance) -> None:
    assert agrees(a, b, tol) == agrees(b, a, tol)


finite = st.floats(allow_nan=False, allow_infinity=True, width=64)
tolerances = st.builds(Tolerance, rel=st.floats(0, 1), abs=st.floats(0, 1e3))


@settings(derandomize=True, database=None, deadline=None, max_examples=300)
@given(a=finite, b=finite, tol=tolerances)
def test_the_real_comparison_is_symmetric_for_any_pair(a: float, b: float,
                                                       tol: Tolerance) -> None:
    assert agrees(a, b, tol) == agrees(b, a, tol)


@settings(derandomize=True, database=None, deadline=None, max_examples=200)
@given(a=finite, tol=tolerances)
def test_every_real_agrees_with_itself(a: float, tol: Tolerance) -> None:
    assert agrees(a, a, tol)


# --- bool, int, str, None: exact with type checks ----------------------------------------


def test_a_bool_must_be_the_same_bool() -> None:
    assert agrees(True, True)
    assert agrees(False, False)
    assert only_reason(True, False) == "wrong value"


@pytest.mark.parametrize(("actual", "named"), [(1, "int"), (0, "int"), (1.0, "float"),
                                               ("True", "str"), (None, "None")])
def test_a_bool_is_not_met_by_a_look_alike(actual: Any, named: str) -> None:
    assert only_reason(bool(actual), actual) == f"expected a bool, got {named}"


def test_an_int_must_be_the_same_int() -> None:
    assert agrees(8, 8)
    assert agrees(10**30, 10**30)
    assert only_reason(8, 9) == "wrong value"


@pytest.mark.parametrize(("actual", "named"), [(True, "bool"), (False, "bool"), (8.0, "float"),
                                               ("8", "str"), (None, "None"),
                                               ({"$missing": "passes"}, "missing field")])
def test_an_int_is_not_met_by_a_bool_a_float_or_a_string(actual: Any, named: str) -> None:
    expected = 1 if actual is True else 0 if actual is False else 8
    assert only_reason(expected, actual) == f"expected an int, got {named}"


def test_a_string_must_be_the_same_string() -> None:
    assert agrees("KV cache", "KV cache")
    assert only_reason("KV cache", "kv cache") == "wrong value"
    assert only_reason("KV cache", None) == "expected a str, got None"
    assert only_reason("1", 1) == "expected a str, got int"


def test_none_must_be_none() -> None:
    assert agrees(None, None)
    assert only_reason(None, 0.0) == "expected None, got float"
    assert only_reason(None, 0) == "expected None, got int"
    assert only_reason(None, "None") == "expected None, got str"
    assert only_reason(None, False) == "expected None, got bool"


# --- sequences ----------------------------------------------------------------------------


def test_a_tuple_is_compared_element_by_element_against_a_list() -> None:
    assert agrees((INF, 1.0), [INF, 1.0])
    assert agrees((5632.0, 45.45454545, 256), [5632, 45.45454545, 256])


def test_each_wrong_element_is_named_by_its_index() -> None:
    differences = compare((1.0, 2, True), [1.5, 2, 1], DEFAULT, field="erlang_c")
    assert [(d.field, d.reason) for d in differences] == [
        ("erlang_c[0]", "outside tolerance (rel 1e-06, abs 1e-09)"),
        ("erlang_c[2]", "expected a bool, got int"),
    ]


def test_a_sequence_of_another_length_is_one_difference() -> None:
    assert only_reason((1.0, 2.0), [1.0]) == "expected 2 items, got 1"
    assert only_reason((1.0, 2.0), [1.0, 2.0, 3.0]) == "expected 2 items, got 3"
    assert only_reason((), [0.0]) == "expected 0 items, got 1"


@pytest.mark.parametrize(("actual", "named"), [(1.0, "float"), ("ab", "str"), (None, "None"),
                                               ({"0": 1.0, "1": 2.0}, "object"),
                                               ({"$unsupported": "ndarray"}, "ndarray")])
def test_a_non_sequence_where_a_sequence_is_expected_names_its_type(actual: Any,
                                                                    named: str) -> None:
    assert only_reason((1.0, 2.0), actual) == f"expected a sequence, got {named}"


def test_nested_sequences_name_the_full_path() -> None:
    [difference] = compare([[1.0], [2.0, 3.0]], [[1.0], [2.0, 4.0]], DEFAULT, field="v")
    assert difference.field == "v[1][1]"


# --- mappings of fields and worker tags ---------------------------------------------------


def test_a_result_is_compared_field_by_field_by_name() -> None:
    expected = {"total_ms": 672.0, "throughput_rps": 380.952380952, "passes": 8}
    actual = {"passes": 8, "throughput_rps": 380.952380952, "total_ms": 672, "extra": "ignored"}
    assert agrees(expected, actual)


def test_every_wrong_field_is_reported_with_its_name() -> None:
    expected = {"total_ms": 672.0, "passes": 8, "stable": True}
    actual = {"total_ms": 700.0, "passes": 8.0, "stable": True}
    differences = compare(expected, actual, DEFAULT)
    assert [(d.field, d.reason) for d in differences] == [
        ("total_ms", "outside tolerance (rel 1e-06, abs 1e-09)"),
        ("passes", "expected an int, got float"),
    ]


def test_a_field_absent_from_the_student_data_is_a_missing_field() -> None:
    [difference] = compare({"total_ms": 1.0, "passes": 8}, {"total_ms": 1.0}, DEFAULT)
    assert difference.field == "passes"
    assert difference.actual == {"$missing": "passes"}
    assert difference.reason == "expected an int, got missing field"


@pytest.mark.parametrize(
    ("tag", "named"),
    [({"$missing": "weight_gb"}, "missing field"),
     ({"$error": "ZeroDivisionError: division by zero"}, "error while reading"),
     ({"$unsupported": "Decimal"}, "Decimal")],
)
@pytest.mark.parametrize("expected", [1.5, 3, True, "GB", None, (1.0,)],
                         ids=["real", "int", "bool", "str", "none", "sequence"])
def test_a_worker_tag_in_a_field_names_what_went_wrong(tag: dict[str, str], named: str,
                                                       expected: Any) -> None:
    [difference] = compare({"weight_gb": expected}, {"weight_gb": tag}, DEFAULT)
    assert difference.field == "weight_gb"
    assert difference.reason.endswith(f", got {named}")


def test_an_unsupported_object_where_a_result_is_expected_names_its_type() -> None:
    reason = only_reason({"total_ms": 1.0}, {"$unsupported": "MyResult"})
    assert reason == "expected a result with fields, got MyResult"


@pytest.mark.parametrize(("actual", "named"), [([1.0, 2.0], "sequence"), (1.0, "float"),
                                               (None, "None"), ("r", "str")])
def test_a_non_mapping_where_a_result_is_expected_names_its_type(actual: Any,
                                                                 named: str) -> None:
    [difference] = compare({"total_ms": 1.0}, actual, DEFAULT, field="serve")
    assert difference.field == "serve"
    assert difference.reason == f"expected a result with fields, got {named}"


def test_an_expected_value_of_an_unknown_kind_is_a_grader_error() -> None:
    with pytest.raises(TypeError, match="cannot compare against a set"):
        compare({1.0}, [1.0], DEFAULT)


# --- type_name ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "name"),
    [(None, "None"), (True, "bool"), (1, "int"), (1.0, "float"), ("s", "str"),
     ([], "sequence"), ({}, "object"), ({"$unsupported": "Foo"}, "Foo"),
     ({"$missing": "x"}, "missing field"), ({"$error": "E: m"}, "error while reading")],
)
def test_type_name_gives_a_readers_name_for_plain_values_and_tags(value: Any,
                                                                  name: str) -> None:
    assert type_name(value) == name


ANY_VALUE = st.one_of(st.floats(allow_nan=True), st.integers(), st.booleans(), st.none(),
                      st.text(max_size=3), st.lists(st.floats(), max_size=2))


@settings(max_examples=300, deadline=None)
@given(expected=ANY_VALUE, actual=ANY_VALUE,
       rel=st.sampled_from([0.0, 1e-9, 1e-6, 0.01]), absolute=st.sampled_from([0.0, 1e-9, 1.0]))
def test_differs_agrees_with_compare_whatever_the_values(
        expected: Any, actual: Any, rel: float, absolute: float) -> None:
    tol = Tolerance(rel=rel, abs=absolute)
    assert differs(expected, actual, tol) is bool(compare(expected, actual, tol))


@settings(max_examples=300, deadline=None)
@given(expected=st.floats(allow_nan=False, allow_infinity=False),
       factor=st.floats(0.999, 1.001))
def test_differs_agrees_with_compare_near_the_tolerance(expected: float, factor: float) -> None:
    tol = Tolerance(rel=1e-4, abs=1e-9)
    assert differs(expected, expected * factor, tol) is bool(compare(expected, expected * factor,
                                                                     tol))
