"""One bug, one hint that names it (issue 31): the knock-on table, the choice of the hint
and the hints of errors, on hand-made answers (pure functions, tested directly)."""

from __future__ import annotations

import inspect
import math
import types
from fractions import Fraction
from typing import Any

import pytest

from graders.grading.cases import Case
from graders.grading.checks import Grading, GradingFailure, case_lines
from graders.grading.compare import Difference, Tolerance
from graders.grading.contract import PARAMETERS, REQUIRED
from graders.grading.credit import FunctionEvidence
from graders.grading.diagnosis import (
    DERIVATIONS,
    WHERE_TO_LOOK,
    Diagnosis,
    case_inputs,
    catalogue,
    diagnose,
    error_hint,
    error_knock_on,
    knock_ons,
)
from graders.grading.hints import hint_for
from graders.grading.mistakes import input_names, sojourn_quantile
from graders.sandbox.runner import CallOutcome

# --- batching_tax: B = 4, λ = 8/s, S = 30 ms, SLO 100 ms, gain 1.4, one replica ------------

BATCH_INPUTS = case_inputs("batching_tax", (), {
    "batch_size": 4, "arrival_qps": 8.0, "service_ms": 30.0, "slo_ms": 100.0,
    "efficiency_gain": 1.4})
RIGHT_BATCHED = 30.0 * (1 + 0.08 * math.log2(4)) / 1.4
NATURAL_BATCHED = 30.0 * (1 + 0.08 * math.log(4)) / 1.4


def batching_answer(batched: float, queue_p99: float = 20.0, formation: float = 187.5
                    ) -> dict[str, Any]:
    """A batching_tax answer whose fields follow the lab's arithmetic from its own values."""
    total = formation + batched + queue_p99
    return {"batch_size": 4, "arrival_qps": 8.0, "formation_delay_ms": formation,
            "batched_service_ms": batched, "queue_p99_ms": queue_p99, "total_p99_ms": total,
            "formation_slo_pct": formation / 100.0 * 100, "throughput_gain": 4 * 30.0 / batched,
            "effective_batch_qps": 2.0, "utilization": 2.0 * batched / 1000,
            "slo_ok": total <= 100.0}


def test_fields_computed_from_a_wrong_field_with_the_students_own_arithmetic_are_knock_ons(
        ) -> None:
    own = batching_answer(NATURAL_BATCHED, queue_p99=21.0)
    wrong = ["batched_service_ms", "queue_p99_ms", "total_p99_ms", "throughput_gain",
             "utilization"]
    assert knock_ons("batching_tax", wrong, own, BATCH_INPUTS) == {
        "queue_p99_ms": "batched_service_ms", "total_p99_ms": "batched_service_ms",
        "throughput_gain": "batched_service_ms", "utilization": "batched_service_ms"}


def test_a_field_that_breaks_its_own_arithmetic_is_a_root_even_beside_a_wrong_source(
        ) -> None:
    own = batching_answer(NATURAL_BATCHED)
    own["total_p99_ms"] = own["formation_delay_ms"] + own["batched_service_ms"]  # no queue
    follows = knock_ons("batching_tax", ["batched_service_ms", "total_p99_ms"], own,
                        BATCH_INPUTS)
    assert "total_p99_ms" not in follows


def test_a_knock_on_names_the_root_at_the_start_of_its_chain() -> None:
    own = batching_answer(NATURAL_BATCHED)
    own["slo_ok"] = own["total_p99_ms"] <= 100.0
    follows = knock_ons("batching_tax", ["batched_service_ms", "queue_p99_ms",
                                         "total_p99_ms", "slo_ok"], own, BATCH_INPUTS)
    assert follows["slo_ok"] == "batched_service_ms"  # through total_p99_ms


def test_the_catalogued_mistake_names_the_bug_and_its_knock_ons_get_no_hint() -> None:
    expected = batching_answer(RIGHT_BATCHED)
    got = batching_answer(NATURAL_BATCHED, queue_p99=21.0)
    diagnosis = diagnose("batching_tax", BATCH_INPUTS, expected, got,
                         ["batched_service_ms", "queue_p99_ms", "total_p99_ms",
                          "throughput_gain", "utilization"])
    assert list(diagnosis.hints) == ["batched_service_ms"]
    assert "log2(B), not the natural log" in diagnosis.hints["batched_service_ms"]
    assert "lambda/B" not in str(diagnosis)


def test_a_root_that_no_mistake_fits_gets_its_general_hint() -> None:
    expected = batching_answer(RIGHT_BATCHED)
    got = batching_answer(RIGHT_BATCHED * 1.3)
    diagnosis = diagnose("batching_tax", BATCH_INPUTS, expected, got,
                         ["batched_service_ms", "total_p99_ms"])
    assert diagnosis.hints == {
        "batched_service_ms": WHERE_TO_LOOK + hint_for("batching_tax", "batched_service_ms")}
    assert diagnosis.follows == {"total_p99_ms": "batched_service_ms"}


# --- cache_capacity ------------------------------------------------------------------------

PROFILE = types.SimpleNamespace(track_id="iphone", memory_capacity_gb=8.589934592)
CACHE_INPUTS = case_inputs("cache_capacity", (PROFILE, None),
                           {"context_tokens": 2048, "precision_bytes": 2.0})


def cache_answer(state: float, max_concurrent: int) -> dict[str, Any]:
    return {"total_memory_gb": 8.589934592, "weight_gb": 0.007009744,
            "state_per_request_gb": state, "available_gb": 8.582924848,
            "max_concurrent": max_concurrent, "oom": max_concurrent < 1,
            "state_kind": "activation/cache buffers", "context_tokens": 2048}


def test_round_down_is_not_hinted_when_max_concurrent_already_rounds_down_the_own_state(
        ) -> None:
    expected, got = cache_answer(0.0625, 137), cache_answer(0.064, 134)  # MB / 1000
    diagnosis = diagnose("cache_capacity", CACHE_INPUTS, expected, got,
                         ["state_per_request_gb", "max_concurrent"])
    assert diagnosis.follows == {"max_concurrent": "state_per_request_gb"}
    assert diagnosis.hints == {
        "state_per_request_gb": "the lab converts the state's MB to GB by dividing by "
                                "1024, not 1000"}


def test_a_general_hint_the_students_own_values_contradict_is_not_shown() -> None:
    expected, got = cache_answer(0.0625, 137), cache_answer(0.0625, 136)
    got["available_gb"] = 136.5 * 0.0625  # floor(available / state) is 136: it rounds down
    diagnosis = diagnose("cache_capacity", CACHE_INPUTS, expected, got, ["max_concurrent"])
    assert diagnosis == Diagnosis()


def test_max_concurrent_rounded_up_is_named_as_such() -> None:
    expected, got = cache_answer(0.0625, 137), cache_answer(0.0625, 138)
    diagnosis = diagnose("cache_capacity", CACHE_INPUTS, expected, got, ["max_concurrent"])
    assert "round max_concurrent down (floor), not up" in diagnosis.hints["max_concurrent"]


# --- queueing_latency: λ = 8/s, S = 30 ms, one replica, cv 0.8, SLO 100 ms ------------------

QUEUE_INPUTS = case_inputs("queueing_latency", (), {
    "arrival_qps": 8.0, "service_ms": 30.0, "replicas": 1, "service_cv": 0.8,
    "slo_ms": 100.0})


def queue_answer(v: float, *, stable: bool = True, p99_q: float = 0.99) -> dict[str, Any]:
    """The lab's answer with variability factor ``v`` (and p99 taken at ``p99_q``)."""
    wait, rate = 0.24, 1000 / 30.0 - 8.0

    def tail(q: float) -> float:
        return 30.0 if q <= 1 - wait else 30.0 + v * (-math.log((1 - q) / wait) / rate * 1000)

    p99 = tail(p99_q) if stable else math.inf
    return {"arrival_qps": 8.0, "service_ms": 30.0, "replicas": 1, "utilization": 0.24,
            "stable": stable, "mean_latency_ms": 30.0 + wait / rate * 1000 * v,
            "p50_latency_ms": tail(0.5), "p95_latency_ms": tail(0.95), "p99_latency_ms": p99,
            "p999_latency_ms": tail(0.999), "slo_ms": 100.0, "slo_ok": p99 <= 100.0,
            "queue_wait_probability": wait, "queue_amplifier": p99 / 30.0}


def wrong_fields(expected: dict[str, Any], got: dict[str, Any]) -> list[str]:
    from graders.grading.compare import compare

    return [difference.field for difference in compare(expected, got, Tolerance())]


def test_a_linear_cv_gets_one_hint_on_the_mean_and_the_percentiles_follow_from_it() -> None:
    expected, got = queue_answer((1 + 0.8**2) / 2), queue_answer((1 + 0.8) / 2)
    wrong = wrong_fields(expected, got)
    diagnosis = diagnose("queueing_latency", QUEUE_INPUTS, expected, got, wrong)
    assert list(diagnosis.hints) == ["mean_latency_ms"]
    assert "(1 + cv²)/2), not (1 + cv)/2" in diagnosis.hints["mean_latency_ms"]
    assert set(diagnosis.follows) == set(wrong) - {"mean_latency_ms"}
    assert set(diagnosis.follows.values()) == {"mean_latency_ms"}


def test_p99_at_the_wrong_q_is_a_root_its_amplifier_follows() -> None:
    v = (1 + 0.8**2) / 2
    expected, got = queue_answer(v), queue_answer(v, p99_q=0.95)
    diagnosis = diagnose("queueing_latency", QUEUE_INPUTS, expected, got,
                         wrong_fields(expected, got))
    assert list(diagnosis.hints) == ["p99_latency_ms"]
    assert "q = 0.95" in diagnosis.hints["p99_latency_ms"]
    assert diagnosis.follows["queue_amplifier"] == "p99_latency_ms"


def test_slo_ok_from_the_mean_breaks_its_own_arithmetic_and_is_named() -> None:
    v = (1 + 0.8**2) / 2
    expected, got = queue_answer(v), queue_answer(v)
    expected["slo_ok"], got["slo_ok"] = False, True  # p99 132.9 > 100 >= mean 37.8
    diagnosis = diagnose("queueing_latency", QUEUE_INPUTS, expected, got, ["slo_ok"])
    assert diagnosis.hints == {"slo_ok": "slo_ok compares p99 with the SLO, not the mean "
                                         "latency"}


def test_an_unstable_queue_called_stable_is_the_one_root_of_its_finite_latencies() -> None:
    inputs = case_inputs("queueing_latency", (), {"arrival_qps": 100 / 3, "service_ms": 30.0,
                                                  "replicas": 1, "service_cv": 0.8})
    inf = math.inf
    expected = {"utilization": 1.0, "stable": False, "mean_latency_ms": inf,
                "p99_latency_ms": inf, "slo_ok": False, "queue_wait_probability": 1.0,
                "queue_amplifier": inf}
    got = {"utilization": 1.0, "stable": True, "mean_latency_ms": 30.0,
           "p99_latency_ms": 30.0, "slo_ok": True, "queue_wait_probability": 1.0,
           "queue_amplifier": 1.0}
    diagnosis = diagnose("queueing_latency", inputs, expected, got,
                         ["stable", "mean_latency_ms", "p99_latency_ms", "slo_ok",
                          "queue_amplifier"])
    assert list(diagnosis.hints) == ["stable"]
    assert "utilization < 1, not <= 1" in diagnosis.hints["stable"]
    assert set(diagnosis.follows.values()) == {"stable"}


def test_the_unstable_hint_stays_for_a_finite_latency_the_own_stability_contradicts(
        ) -> None:
    inputs = case_inputs("queueing_latency", (), {"arrival_qps": 40.0, "service_ms": 30.0})
    expected = {"stable": False, "mean_latency_ms": math.inf}
    got = {"stable": False, "mean_latency_ms": 30.0}
    diagnosis = diagnose("queueing_latency", inputs, expected, got, ["mean_latency_ms"])
    assert diagnosis.hints == {"mean_latency_ms": "the queue is unstable here "
                                                  "(utilization >= 1): this value is infinite"}


# --- errors --------------------------------------------------------------------------------


def test_a_raised_error_gets_its_functions_hint_for_that_error() -> None:
    assert "Erlang B recursion" in str(error_hint("erlang_c", "OverflowError"))
    assert "ceil(n / B)" in str(error_hint("serve", "ZeroDivisionError"))
    assert error_hint("serve", "NotImplementedError") is None
    assert error_hint("serve", "") is None


def test_an_error_a_called_function_is_known_to_raise_sends_the_student_there() -> None:
    line = error_knock_on("queueing_latency", "OverflowError", ["erlang_c"])
    assert line is not None
    assert line.startswith("your queueing_latency uses your erlang_c, and OverflowError")
    assert line.endswith(": fix erlang_c first")
    assert error_knock_on("queueing_latency", "KeyError", ["erlang_c"]) is None
    assert error_knock_on("erlang_c", "OverflowError", []) is None


class ErrorSource:
    """Every case raises ``message``; every function right on its visible cases."""

    def __init__(self, message: str) -> None:
        self.message = message

    def expected(self, case: Case) -> Any:
        return {"wait_rate_per_s": 10.0, "wait_probability": 0.5}

    def outcome(self, case: Case) -> CallOutcome:
        return CallOutcome("raised", message=self.message)

    def evidence(self, function: str) -> FunctionEvidence:
        evidence = FunctionEvidence()
        evidence.record(expected=2.5, answer=2.5, answered=True, passed=True, trivial=False)
        return evidence

    def confirmation(self, function: str) -> tuple[Fraction, str | None]:
        return Fraction(1), None

    def diagnosis(self, function: str) -> None:
        return None  # each case diagnosed alone, as a hidden test's


@pytest.mark.parametrize("hidden", [False, True])
def test_a_test_whose_cases_raise_shows_the_errors_hint_once(hidden: bool) -> None:
    cases = [Case(f"fleet {c}", "erlang_c", (c * 10.0, 100.0, c)) for c in (200, 400, 800)]
    grading = Grading(ErrorSource("OverflowError: int too large to convert to float"),
                      Tolerance(), label="erlang_c on large fleets", hidden=hidden)
    with pytest.raises(GradingFailure) as raised:
        grading.check(cases)
    text = str(raised.value)
    hint = "hint: the textbook Erlang C (factorials and a ** c) overflows"
    assert text.count(hint) == 1, text
    assert ("raised OverflowError" in text) is not hidden
    assert ("the cases of this test are hidden" in text) is hidden


def test_a_knock_ons_line_follows_its_root_and_comes_after_it() -> None:
    differences = [Difference("total_p99_ms", 1.0, 2.0, "outside tolerance"),
                   Difference("batched_service_ms", 1.0, 2.0, "outside tolerance")]
    diagnosis = Diagnosis({"total_p99_ms": "batched_service_ms"},
                          {"batched_service_ms": "a named cause"})
    lines = "\n".join(case_lines("", differences, diagnosis)).splitlines()
    assert lines == ["  batched_service_ms: expected 1, got 2 - outside tolerance",
                     "    hint: a named cause",
                     "  total_p99_ms: expected 1, got 2 - follows from batched_service_ms"]
    assert case_lines("", differences, diagnosis, hints=False) == [lines[0], lines[2]]


# --- the tables ----------------------------------------------------------------------------


def test_the_contract_parameters_are_the_references_in_order_with_its_defaults() -> None:
    import reference

    for function, parameters in PARAMETERS.items():
        signature = inspect.signature(getattr(reference, function)).parameters
        assert [name for name, _ in parameters] == list(signature), function
        for name, default in parameters:
            wanted = signature[name].default
            assert default == (REQUIRED if wanted is inspect.Parameter.empty else wanted), \
                (function, name)


def test_case_inputs_name_positional_inputs_and_fill_in_the_lab_defaults() -> None:
    assert case_inputs("serve", (256, 32), {}) == {
        "arg0": 256, "arg1": 32, "n_requests": 256, "batch_size": 32, "overhead_ms": 20.0,
        "marginal_ms": 2.0}


def test_every_derivation_reads_fields_of_its_own_function() -> None:
    from graders.grading.contract import RESULT_FIELDS

    for function, table in DERIVATIONS.items():
        fields = set(RESULT_FIELDS[function] or ())
        for name, derivations in table.items():
            assert name in fields, (function, name)
            for derivation in derivations:
                assert set(derivation.sources) <= fields, (function, name)


def test_every_entry_of_the_graders_catalogue_tells_the_student_its_cause() -> None:
    for mistake in catalogue():
        assert mistake.hint, mistake.id
        assert len(mistake.hint) <= 160, mistake.id
        if mistake.got:
            names = input_names(mistake.function)
            assert names is not None


def test_the_exact_tail_expression_is_the_exact_m_m_c_quantile() -> None:
    from reference.queueing import erlang_c
    from reference.tails import mmc_sojourn_quantile_ms

    for arrival, service, replicas in ((8.0, 30.0, 1), (256.0, 25.0, 8), (30.0, 20.0, 1)):
        _, wait = erlang_c(arrival, service, replicas)
        for q in (0.5, 0.95, 0.99, 0.999):
            exact = mmc_sojourn_quantile_ms(q, arrival_qps=arrival, service_ms=service,
                                            replicas=replicas)
            assert sojourn_quantile(q, arrival, service, replicas, wait) == \
                pytest.approx(exact, rel=1e-9)
