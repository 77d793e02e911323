"""Feedback a student can act on (issue 13): pure functions, tested directly."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from graders.export.build import INSTRUCTOR_ONLY
from graders.grading.cases import Case
from graders.grading.checks import (
    MAX_REASON_CHARS,
    Grading,
    GradingFailure,
    failed_call_message,
    root_cause,
    shortened,
)
from graders.grading.compare import Tolerance
from graders.grading.credit import FunctionEvidence
from graders.grading.diagnosis import WHERE_TO_LOOK
from graders.grading.hints import hint_for
from graders.sandbox.runner import CallOutcome

TOLERANCE = Tolerance(rel=1e-6, abs=1e-9)


class Source:
    """A case source with fixed answers, and functions that are wrong or right."""

    def __init__(self, answers: dict[str, Any], wrong: frozenset[str] = frozenset()) -> None:
        self.answers = answers
        self.wrong = wrong

    def expected(self, case: Case) -> Any:
        return {"queue_p99_ms": 46.53991375, "total_p99_ms": 132.1827709}

    def outcome(self, case: Case) -> CallOutcome:
        answer = self.answers[case.case_id]
        return answer if isinstance(answer, CallOutcome) else CallOutcome("ok", answer)

    def evidence(self, function: str) -> FunctionEvidence:
        evidence = FunctionEvidence()
        evidence.record(expected=2.5, answer=2.5 if function not in self.wrong else 3.5,
                        answered=True, passed=function not in self.wrong, trivial=False)
        evidence.record(expected=4.5, answer=4.5, answered=True, passed=True, trivial=False)
        return evidence

    def confirmation(self, function: str) -> tuple[Fraction, str | None]:
        return Fraction(1), None

    def diagnosis(self, function: str) -> None:
        return None  # each case diagnosed alone, as a hidden test's


def failure_of(source: Source, cases: list[Case]) -> GradingFailure:
    with pytest.raises(GradingFailure) as raised:
        Grading(source, TOLERANCE, label="batching_tax [iphone]", hidden=False).check(cases)
    return raised.value


CASES = [Case(f"case {i}", "batching_tax", (2,), {"arrival_qps": 8.0}) for i in range(3)]
WRONG = {"queue_p99_ms": 12.88158058, "total_p99_ms": 98.52443773}


def test_the_root_cause_names_the_deepest_wrong_function_of_the_chain() -> None:
    assert root_cause("batching_tax", lambda f: f == "queueing_latency") == (
        "your batching_tax uses your queueing_latency, which is wrong for these inputs: "
        "fix queueing_latency first")
    assert root_cause("batching_tax", lambda f: f == "erlang_c") == (
        "your batching_tax uses your queueing_latency, which uses your erlang_c, which is "
        "wrong for these inputs: fix erlang_c first")
    assert root_cause("cache_capacity", lambda f: f == "transformer_state_gb") is not None
    assert root_cause("serving_track_profile", lambda f: f == "quantity_to_float") is not None
    assert root_cause("batching_tax", lambda f: False) is None
    assert root_cause("serve", lambda f: True) is None


def test_an_unwritten_function_is_never_called_wrong_nor_blamed_on_another() -> None:
    def unwritten(name: str) -> bool:
        return name == "erlang_c"

    assert root_cause("queueing_latency", lambda f: True, unwritten) == (
        "your queueing_latency uses your erlang_c, which is not implemented yet: "
        "write erlang_c first")
    assert root_cause("erlang_c", lambda f: True, unwritten) is None
    assert root_cause("queueing_latency", lambda f: True, lambda f: True) is None


def test_a_wrong_dependency_comes_first_and_silences_the_misleading_hints() -> None:
    answers = dict.fromkeys((case.case_id for case in CASES), WRONG)
    failure = failure_of(Source(answers, frozenset({"queueing_latency"})), CASES)
    lines = str(failure).splitlines()
    assert lines[1] == ("your batching_tax uses your queueing_latency, which is wrong for "
                        "these inputs: fix queueing_latency first")
    assert "lambda/B" not in str(failure)
    assert failure.summary.startswith("3 of 3 cases failed: your batching_tax uses")


def test_without_a_wrong_dependency_the_hints_stay_and_no_root_cause_is_named() -> None:
    answers = dict.fromkeys((case.case_id for case in CASES), WRONG)
    failure = failure_of(Source(answers), CASES)
    general = hint_for("batching_tax", "queue_p99_ms")
    assert f"hint: {WHERE_TO_LOOK}{general}" in str(failure)
    assert "fix " not in str(failure)
    assert failure.summary == "3 of 3 cases failed: queue_p99_ms expected 46.54, got 12.882"


def test_a_failed_call_s_long_reason_is_capped_with_a_visible_marker_and_nothing_else_is(
        ) -> None:
    long_reason = CallOutcome("raised", message="ValueError: " + "x" * 5000)
    answers = {"case 0": long_reason, "case 1": WRONG, "case 2": WRONG}
    failure = failure_of(Source(answers), CASES)
    lines = str(failure).splitlines()
    reason = next(line for line in lines if line.startswith("  raised ValueError"))
    assert len(reason) <= MAX_REASON_CHARS + 40
    assert "… [cut: " in reason
    kept = [line for line in lines if "hint:" in line or "expected" in line]
    assert kept
    assert not [line for line in kept if "[cut: " in line]  # a case is whole or not shown
    assert len(failure.summary) <= MAX_REASON_CHARS + 40
    assert "\n" not in failure.summary


def test_text_is_cut_at_a_word_boundary_with_the_count_of_what_was_cut() -> None:
    text = "outside tolerance on the queue_amplifier field " * 3
    cut = shortened(text, 60)
    kept = cut.split("… [cut: ")[0]
    assert kept == "outside tolerance on the queue_amplifier field outside"
    assert cut.endswith(f"[cut: {len(text) - len(kept)} more characters]")
    assert shortened("x" * 100, 10) == "x" * 10 + "… [cut: 90 more characters]"  # no space
    assert shortened(text, None) == text


def test_the_full_feedback_keeps_every_case_and_every_character() -> None:
    long_reason = CallOutcome("raised", message="ValueError: " + "x" * 5000)
    answers = {"case 0": long_reason, "case 1": WRONG, "case 2": WRONG}
    failure = failure_of(Source(answers), CASES)
    assert "[cut: " in str(failure)
    assert "[cut: " not in failure.full
    assert "x" * 5000 in failure.full


def test_a_missing_function_is_not_said_to_have_raised() -> None:
    missing = CallOutcome("raised", message="serving.py does not define a function "
                                            "cache_capacity()")
    assert failed_call_message(missing) == ("serving.py does not define a function "
                                            "cache_capacity()")
    raised = CallOutcome("raised", message="ZeroDivisionError: division by zero")
    assert failed_call_message(raised) == "raised ZeroDivisionError: division by zero"


def test_case_inputs_name_tracks_and_models_in_the_lab_s_terms() -> None:
    import types

    profile = types.SimpleNamespace(track_id="cloud_fleet", raw={"a": 1}, path="/home/x")
    model = types.SimpleNamespace(name="Llama-2-70B")
    text = Case("c", "cache_capacity", (profile, model), {"context_tokens": 8}).describe_inputs()
    assert text == "cache_capacity(<track cloud_fleet>, <SimpleNamespace Llama-2-70B>, " \
                   "context_tokens=8)"
    assert "/home" not in text
    assert "raw" not in text


def test_the_student_bundle_leaves_out_the_instructor_commands() -> None:
    for part in ("export", "regrade", "cli/tracks.py", "trackfiles/generate.py",
                 "trackfiles/sanity.py"):
        assert part in INSTRUCTOR_ONLY


def test_a_moved_copy_of_a_tracks_hardware_and_model_is_named_by_kind() -> None:
    import types

    hardware = types.SimpleNamespace(name="NVIDIA H100", memory=types.SimpleNamespace())
    model = types.SimpleNamespace(name="Llama-2-70B", parameters=7e10)
    text = Case("c", "serving_track_profile", (hardware, model)).describe_inputs()
    assert text == "serving_track_profile(<hardware NVIDIA H100>, <model Llama-2-70B>)"
