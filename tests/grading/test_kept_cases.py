"""The failed cases a test keeps for the class report's mistake clusters."""

from __future__ import annotations

import json
import math

from graders.grading.cases import RESULT_FIELDS, Case
from graders.grading.checks import kept_case
from graders.grading.compare import Difference
from graders.grading.diagnosis import catalogue
from graders.sandbox.runner import CallOutcome


def test_a_wrong_answer_keeps_its_numeric_inputs_and_each_wrong_fields_values() -> None:
    case = Case("batch 8", "batching_tax", (object(), 3), {"batch_size": 8, "slo_ms": 200.0,
                                                           "name": "x", "flag": True})
    kept = kept_case(case, CallOutcome("ok", {}), [
        Difference("batched_service_ms", 4.84375, 4.556, "outside tolerance"),
        Difference("total_p99_ms", math.inf, None, "expected inf"),
        Difference("state_kind", "kv", {"$missing": "state_kind"}, "missing")])
    assert kept == {"case": "batch 8",
                    "inputs": {"arg1": 3, "batch_size": 8, "slo_ms": 200.0},
                    "fields": {"batched_service_ms": [4.84375, 4.556],
                               "total_p99_ms": ["inf", None],
                               "state_kind": ["kv", "missing field"]}}
    json.dumps(kept, allow_nan=False)  # strict JSON: no Infinity


def test_a_failed_call_keeps_the_exceptions_name_or_how_it_failed() -> None:
    case = Case("n=1 B=2", "serve", (1, 2))
    raised = kept_case(case, CallOutcome("raised", None, "ZeroDivisionError: division by "
                                                         "zero"), ())
    assert raised == {"case": "n=1 B=2", "inputs": {"arg0": 1, "arg1": 2},
                      "error": "ZeroDivisionError"}
    assert kept_case(case, CallOutcome("timeout", None, "took too long"), ())["error"] == \
        "timeout"


def test_a_wrong_field_keeps_the_reference_values_it_is_computed_from() -> None:
    case = Case("warm pool 1 of 4", "cold_start_latency", (object(),),
                {"warm_pool_replicas": 1, "scale_out_replicas": 4})
    expected = {"cold_start_ms": 400.0, "protected_fraction": 0.25, "service_ms": 30.0,
                "exposed_first_request_ms": 330.0, "exceeds_slo": True,
                "read_ms": 1.0}
    kept = kept_case(case, CallOutcome("ok", {}), [
        Difference("exposed_first_request_ms", 330.0, 430.0, "outside tolerance"),
        Difference("exceeds_slo", True, True, "outside tolerance")], expected)
    # the exposed latency is computed from the cold start and the protected fraction (the
    # wrong exceeds_slo from the exposed latency, itself wrong: not a source)
    assert kept["sources"] == {"cold_start_ms": 400.0, "protected_fraction": 0.25}
    # read_ms's sources (the weight and the effective bandwidth) are not in this answer
    assert "sources" not in kept_case(case, CallOutcome("ok", {}), [
        Difference("read_ms", 1.0, 2.0, "outside tolerance")], expected)


def test_a_wrong_field_keeps_every_field_a_catalogue_entry_for_it_names() -> None:
    """Each entry of the grader's catalogue can be matched on a class report: a case whose
    field the entry explains keeps the reference's values of every field its expression
    names (p95_latency_ms under a p99 taken at q = 0.95)."""
    for mistake in catalogue():
        names = mistake.fields_used() - {mistake.field}
        if not names:
            continue
        expected = dict.fromkeys(RESULT_FIELDS[mistake.function] or (), 1.5)
        case = Case("any", mistake.function, (), {})
        kept = kept_case(case, CallOutcome("ok", {}), [
            Difference(mistake.field, 1.5, 2.5, "outside tolerance")], expected)
        assert names <= set(kept.get("sources", {})), mistake.id
    [p99] = [m for m in catalogue() if m.id == "p99-at-q095"]
    assert p99.fields_used() == {"p95_latency_ms"}
    [slo] = [m for m in catalogue() if m.id == "slo-ok-from-mean"]
    assert slo.fields_used() == {"mean_latency_ms", "slo_ms"}
