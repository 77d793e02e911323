"""The rules that make credit need real answers: trivial cases, constants and the gate."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from graders.grading.cases import Case
from graders.grading.compare import Tolerance, compare
from graders.grading.credit import (
    FunctionEvidence,
    answer_key,
    case_nontrivial_fields,
    input_scalars,
    invariant_refusal,
    is_trivial,
    nontrivial_fields,
    nontrivial_matches,
    shape_problem,
    trivial_refusal,
)
from graders.units import ureg


def test_none_zero_flags_and_infinities_are_trivial_answers() -> None:
    assert is_trivial(None, [3.0])
    assert is_trivial(0.0, [3.0])
    assert is_trivial([math.inf, 1.0], [300.0, 20.0, 4])
    assert is_trivial({"oom": True, "max_concurrent": 0}, [])


def test_an_echo_of_an_input_is_trivial_even_inside_an_object() -> None:
    profile = SimpleNamespace(service_ms=25.0, label="Cloud")
    assert is_trivial(7.5, [None, "GB", 7.5])
    assert is_trivial({"service": 25.0, "name": "Cloud"}, [profile])
    assert is_trivial(80.0, [ureg.Quantity(80, "GiB")])


def test_a_computed_value_is_not_trivial() -> None:
    assert not is_trivial(85.899345920, [ureg.Quantity(80, "GiB"), "GB", 0.0])
    assert not is_trivial({"utilization": 0.8, "stable": True}, [{"arrival_qps": 160.0}])
    assert not is_trivial([672.0, 380.95, 8], [256, 32])


def test_input_scalars_reach_nested_objects_and_skip_flags() -> None:
    found = input_scalars([SimpleNamespace(a=1, b={"c": 2.5}, d=True), ("x", None)])
    assert found == {1.0, 2.5, "x"}


def test_equal_answers_give_equal_keys_whatever_their_order() -> None:
    assert answer_key({"a": 1.0, "b": [2]}) == answer_key({"b": [2], "a": 1.0})
    assert answer_key(float("nan")) == answer_key(float("nan"))


def evidence(*cases: tuple[object, object, bool, bool]) -> FunctionEvidence:
    """Evidence from (expected, answer, passed, trivial) tuples; answer None = no answer."""
    found = FunctionEvidence()
    for expected, answer, passed, trivial in cases:
        found.record(expected=expected, answer=answer, answered=answer is not None,
                     passed=passed, trivial=trivial, failure="raised ValueError: x")
    return found


def test_a_function_with_one_answer_for_different_questions_is_constant() -> None:
    constant = evidence((1.0, 2.0, False, False), (3.0, 2.0, False, False), (None, 2.0,
                                                                               False, True))
    assert constant.constant
    assert not constant.earns_trivial_cases
    assert "same answer whatever it is asked" in str(trivial_refusal("serve", constant))
    assert "same answer whatever it is asked" in str(invariant_refusal("serve", constant))


def test_the_same_answer_to_the_same_expected_value_is_not_constant() -> None:
    assert not evidence((None, None, False, True), (None, None, False, True)).constant


def test_trivial_cases_count_once_a_nontrivial_case_passes() -> None:
    earned = evidence((5.0, 5.0, True, False), (None, None, True, True))
    assert earned.earns_trivial_cases
    assert trivial_refusal("f", earned) is None
    unearned = evidence((5.0, 4.0, False, False), (0.0, 0.0, True, True))
    assert not unearned.earns_trivial_cases
    assert "f must first be right on a case that needs a real computation;" in str(
        trivial_refusal("f", unearned))
    assert "computes none of the values" in str(invariant_refusal("f", unearned))


def test_the_refusal_names_the_case_the_function_must_first_get_right() -> None:
    missed = FunctionEvidence()
    missed.record(expected=None, answer=None, answered=True, passed=True, trivial=True)
    missed.record(expected=5.0, answer=4.0, answered=True, passed=False, trivial=False,
                  miss="case 'a' [iphone]: value expected 5, got 4")
    missed.record(expected=6.0, answer=3.0, answered=True, passed=False, trivial=False,
                  miss="case 'b' [iphone]: value expected 6, got 3")
    assert str(trivial_refusal("f", missed)).startswith(
        "f must first be right on a case that needs a real computation, such as case 'a' "
        "[iphone]: value expected 5, got 4; until then its right answers")


def test_trivial_cases_count_when_the_run_has_no_other_kind() -> None:
    only_trivial = evidence((0.0, 0.0, True, True), (1.0, 1.0, True, True))
    assert only_trivial.earns_trivial_cases


def test_a_function_that_never_answers_is_refused_with_the_first_reason() -> None:
    silent = FunctionEvidence()
    silent.record(expected=1.0, answer=None, answered=False, passed=False, trivial=False,
                  failure="not implemented yet (NotImplementedError)")
    assert invariant_refusal("serve", silent) == (
        "serve answered none of its cases: not implemented yet (NotImplementedError)")


def same(wanted: object, got: object) -> bool:
    return wanted == got


def test_nontrivial_matches_count_the_computed_fields_answered_right() -> None:
    expected = {"utilization": 0.8, "p99": 114.55, "stable": True, "arrival_qps": 160.0}
    inputs = [{"arrival_qps": 160.0}]
    answer = {"utilization": 0.8, "p99": 99.0, "stable": True, "arrival_qps": 160.0}
    assert nontrivial_matches(expected, answer, inputs, same) == 1
    assert nontrivial_matches([5.0, 0.25], [5.0, 0.5], [], same) == 1
    assert nontrivial_matches(None, None, [], same) == 0
    assert nontrivial_matches({"p99": 1.0}, "garbage", [], same) == 0


def test_invariants_pay_for_a_right_field_in_a_failed_case() -> None:
    found = FunctionEvidence()
    found.record(expected={"a": 2.5, "b": 7.0}, answer={"a": 2.5, "b": 0.0}, answered=True,
                 passed=False, trivial=False, values_right=1)
    found.record(expected={"a": 3.5, "b": 9.0}, answer={"a": 3.5, "b": 0.0}, answered=True,
                 passed=False, trivial=False, values_right=1)
    assert found.earns_invariants
    assert not found.earns_trivial_cases


def test_a_result_whose_fields_cannot_be_read_is_told_its_shape_and_is_not_called_constant(
) -> None:
    missing = {name: {"$missing": name} for name in ("wait_rate_per_s", "wait_probability")}
    shapeless = evidence(({"wait_rate_per_s": 50.0, "wait_probability": 0.0}, missing, False,
                          False),
                         ({"wait_rate_per_s": 20.0, "wait_probability": 0.4}, missing, False,
                          False))
    assert shapeless.wrong_shape
    assert not shapeless.constant
    reason = str(trivial_refusal("erlang_c", shapeless))
    assert reason == shape_problem("erlang_c", shapeless)
    assert "same answer whatever it is asked" not in reason
    assert "wait_rate_per_s, wait_probability" in reason
    assert "a tuple or list of exactly 2 values" in reason
    assert reason == invariant_refusal("erlang_c", shapeless)


def test_one_readable_answer_is_enough_to_judge_the_function_as_usual() -> None:
    missing = {"value": {"$missing": "value"}}
    mixed = evidence(({"value": 1.5}, missing, False, False),
                     ({"value": 2.5}, {"value": 2.5}, True, False))
    assert not mixed.wrong_shape
    assert shape_problem("erlang_c", mixed) is None


values = st.one_of(st.floats(allow_nan=False, width=64), st.integers(-5, 5), st.booleans(),
                   st.none(), st.sampled_from(["a", "b"]))
results = st.one_of(values, st.lists(values, max_size=4),
                    st.dictionaries(st.sampled_from(["x", "y", "z"]), values, max_size=3))


@given(expected=results, noise=st.floats(-2e-9, 2e-9), answer=results, echo=st.booleans(),
       inputs=st.lists(st.floats(allow_nan=False), max_size=3))
def test_a_case_compare_passes_has_every_nontrivial_value_right(
        expected: Any, noise: float, answer: Any, echo: bool, inputs: list[float]) -> None:
    """The session counts a passed case's right values without comparing them one by one:
    compare() judges a result value by value, so when it finds no difference, each part
    nontrivial_matches looks at is right too."""
    tolerance = Tolerance()
    actual = _nudged(expected, noise) if echo else answer
    if compare(expected, actual, tolerance):
        return
    each = nontrivial_matches(expected, actual, inputs,
                              lambda wanted, got: not compare(wanted, got, tolerance))
    assert each == nontrivial_matches(expected, actual, inputs, lambda wanted, got: True)


@given(expected=st.one_of(results, st.dictionaries(st.sampled_from(["x", "y"]), results,
                                                     max_size=2)),
       inputs=st.lists(values, max_size=3), echo=st.booleans())
def test_a_case_is_trivial_exactly_when_it_has_no_nontrivial_field(
        expected: Any, inputs: list[Any], echo: bool) -> None:
    """The session and the case tests read a case's triviality from its non-trivial fields
    (worked out once per case): there are none exactly when is_trivial says so."""
    if echo:  # an input echoed by the expected value
        inputs = [*inputs, *[leaf for leaf in _flat(expected)
                             if isinstance(leaf, float | str)][:1]]
    assert is_trivial(expected, inputs) == (not nontrivial_fields(expected, inputs))


def _flat(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _flat(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _flat(item)]
    return [value]


def test_a_cases_nontrivial_fields_are_those_of_the_expected_value_asked() -> None:
    """Kept per case and expected value: an equal case (the test's and the session's Case
    objects) shares them; another expected value of the same case (a golden file's, a
    test's), or the same value for another case of the same key, gets its own."""
    case = Case("c", "serve", (256, 32))
    first = [672.0, 380.95, 8]
    assert case_nontrivial_fields(case, first) == nontrivial_fields(first, [256, 32])
    assert case_nontrivial_fields(case, first) is case_nontrivial_fields(case, first)
    assert case_nontrivial_fields(Case("c", "serve", (256, 32)), first) is \
        case_nontrivial_fields(case, first)
    assert [value for _, value in
            case_nontrivial_fields(Case("c", "serve", (672.0, 8)), first)] == [380.95]
    assert case_nontrivial_fields(case, [256.0, 1.0, 32]) == []
    assert case_nontrivial_fields(Case("d", "serve", (672, 1)), first) == \
        nontrivial_fields(first, [672, 1])
    assert [value for _, value in case_nontrivial_fields(case, first)] == first


def _nudged(value: Any, noise: float) -> Any:
    """``value`` with each float moved by ``noise`` of itself (within the tolerance)."""
    if isinstance(value, float) and math.isfinite(value):
        return value * (1.0 + noise)
    if isinstance(value, list):
        return [_nudged(item, noise) for item in value]
    if isinstance(value, dict):
        return {key: _nudged(item, noise) for key, item in value.items()}
    return value
