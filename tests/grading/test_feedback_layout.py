"""Which failed cases a student reads first and how many fit (issue 31): pure functions of
:mod:`graders.grading.feedback_layout`, and a test's feedback built by :class:`Grading`."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from graders.grading.cases import Case
from graders.grading.checks import (
    MAX_FEEDBACK_CHARS,
    Grading,
    GradingFailure,
    argument_text,
)
from graders.grading.compare import Tolerance
from graders.grading.credit import FunctionEvidence
from graders.grading.diagnosis import WHERE_TO_LOOK
from graders.grading.feedback_layout import (
    CaseCounts,
    FailedCase,
    cases_that_fit,
    cause_of,
    informative_order,
    more_cases_line,
    without_numbers,
)
from graders.grading.hints import hint_for
from graders.sandbox.runner import CallOutcome

TOLERANCE = Tolerance(rel=1e-6, abs=1e-9)
HINT = "    hint: check the variability factor max(0.1, (1+cv^2)/2)"


def field(name: str, expected: float, got: float, hint: str = HINT) -> tuple[str, str, str]:
    line = f"  {name}: expected {expected}, got {got} - outside tolerance (rel 1e-06, abs 1e-09)"
    return name, "outside tolerance (rel 1e-06, abs 1e-09)", f"{line}\n{hint}" if hint else line


def failed(heading: str, *fields: tuple[str, str, str], message: str = "",
           function: str = "queueing_latency") -> FailedCase:
    return FailedCase(heading, message, tuple(text for _, _, text in fields),
                      cause_of(function, message, fields))


def test_numbers_do_not_make_two_failures_different() -> None:
    assert without_numbers("expected 29.46918873, got -3e-05 (rel 1e-06)") == \
        "expected #, got # (rel #)"
    assert cause_of("queueing_latency", "", [field("mean_latency_ms", 29.4, 30.3)]) == \
        cause_of("queueing_latency", "", [field("mean_latency_ms", 42.8, 35.7)])
    assert cause_of("serve", "raised ZeroDivisionError: division by zero in pass 3", []) == \
        cause_of("serve", "raised ZeroDivisionError: division by zero in pass 12", [])


def test_other_wrong_fields_another_hint_or_another_error_make_another_cause() -> None:
    mean = cause_of("queueing_latency", "", [field("mean_latency_ms", 1, 2)])
    assert mean != cause_of("queueing_latency", "", [field("mean_latency_ms", 1, 2),
                                                     field("p99_latency_ms", 1, 2)])
    assert mean != cause_of("queueing_latency", "",
                            [field("mean_latency_ms", 1, 2, hint="    hint: unstable")])
    assert mean != cause_of("batching_tax", "", [field("mean_latency_ms", 1, 2)])
    assert cause_of("serve", "raised ZeroDivisionError: x", []) != \
        cause_of("serve", "raised OverflowError: x", [])


def test_distinct_failures_come_first_and_repeats_last_each_in_their_order() -> None:
    zero = [failed(f"case 'n=1 B={b}'", message="raised ZeroDivisionError: float division "
                                              "by zero", function="serve") for b in (2, 3, 8)]
    wrong = failed("case 'n=7 B=2'", ("passes", "wrong value", "  passes: expected 4, got 3"),
                   function="serve")
    other = failed("case 'n=9 B=2'", ("total_ms", "wrong value", "  total_ms: expected 1"),
                   function="serve")
    ordered = informative_order([*zero, wrong, zero[0], other])
    assert [case.heading for case in ordered] == [
        "case 'n=1 B=2'", "case 'n=7 B=2'", "case 'n=9 B=2'", "case 'n=1 B=3'",
        "case 'n=1 B=8'", "case 'n=1 B=2'"]


def test_the_case_list_is_cut_never_a_case() -> None:
    texts = ["a" * 100, "b" * 100, "c" * 100, "d" * 100]
    assert cases_that_fit(texts, 1000, most=4) == 4
    assert cases_that_fit(texts, 1000, most=2) == 2
    assert cases_that_fit(texts, 201, most=4) == 2  # two cases and the newline between
    assert cases_that_fit(texts, 200, most=4) == 1
    assert cases_that_fit(texts, 10, most=4) == 1  # the first is shown whole, whatever
    assert cases_that_fit([], 10, most=4) == 0
    assert more_cases_line(0) == []
    assert more_cases_line(3) == ["... and 3 more failed cases"]


def test_a_case_reads_its_heading_its_reason_or_its_fields_with_their_hints() -> None:
    case = failed("case 'defaults': queueing_latency(arrival_qps=8.0)",
                  field("mean_latency_ms", 37.7, 38.5))
    assert case.lines("on iphone") == [
        "case 'defaults': queueing_latency(arrival_qps=8.0) on iphone",
        "  mean_latency_ms: expected 37.7, got 38.5 - outside tolerance (rel 1e-06, abs 1e-09)",
        HINT]
    error = failed("case 'n=1 B=2': serve(1, 2)", message="raised ZeroDivisionError: x")
    assert error.text() == "case 'n=1 B=2': serve(1, 2)\n  raised ZeroDivisionError: x"
    assert error.body == "  raised ZeroDivisionError: x"


def test_counts_add_up_and_read_as_before() -> None:
    assert CaseCounts(2, 13).text() == "2 of 13 cases failed"
    assert (CaseCounts(2, 13) + CaseCounts(10, 13)).text() == "12 of 26 cases failed"
    assert CaseCounts(0, 10, 10).text() == "10 of 10 cases right but not counted yet"
    assert CaseCounts(3, 10, 2).text() == "3 of 10 cases failed, 2 right but not counted yet"


def test_the_counts_of_a_per_track_test_say_whose_cases_they_are() -> None:
    assert CaseCounts(16, 16).text(1) == "16 of 16 cases failed, on this track"
    assert (CaseCounts(16, 16) + CaseCounts(16, 16) + CaseCounts(16, 16)).text(3) == \
        "48 of 48 cases failed, on 3 tracks together"
    assert CaseCounts(0, 10, 10).text(1) == \
        "10 of 10 cases right but not counted yet, on this track"
    assert CaseCounts(3, 10, 2).text(2) == \
        "3 of 10 cases failed, 2 right but not counted yet, on 2 tracks together"


# --- a test's feedback, as Grading builds it -----------------------------------------------

LATENCIES = ("mean_latency_ms", "p50_latency_ms", "p95_latency_ms", "p99_latency_ms",
             "p999_latency_ms")
EXPECTED = {name: 100.0 + index for index, name in enumerate(LATENCIES)}


class Source:
    """Fixed answers to queueing_latency's latency fields; no dependency is wrong."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers

    def expected(self, case: Case) -> Any:
        return EXPECTED

    def outcome(self, case: Case) -> CallOutcome:
        answer = self.answers[case.case_id]
        return answer if isinstance(answer, CallOutcome) else CallOutcome("ok", answer)

    def evidence(self, function: str) -> FunctionEvidence:
        evidence = FunctionEvidence()
        evidence.record(expected=2.5, answer=2.5, answered=True, passed=True, trivial=False)
        return evidence

    def confirmation(self, function: str) -> tuple[Fraction, str | None]:
        return Fraction(1), None

    def diagnosis(self, function: str) -> None:
        return None  # each case diagnosed alone, as a hidden test's


def failure_of(answers: dict[str, Any]) -> GradingFailure:
    cases = [Case(case_id, "queueing_latency", (), {"arrival_qps": 8.0 * (index + 1)},
                  track_id="iphone") for index, case_id in enumerate(answers)]
    with pytest.raises(GradingFailure) as raised:
        Grading(Source(answers), TOLERANCE, label="queueing_latency [iphone]",
                hidden=False).check(cases)
    return raised.value


def test_every_hint_and_expected_line_is_whole_even_in_a_long_case() -> None:
    failure = failure_of({f"load {i}": dict.fromkeys(LATENCIES, "x" * (500 + i))
                          for i in range(12)})  # long values: shortened in their line
    text = str(failure)
    assert len(text) <= MAX_FEEDBACK_CHARS
    hints = [line for line in text.splitlines() if "hint:" in line]
    assert f"    hint: {WHERE_TO_LOOK}{hint_for('queueing_latency', 'mean_latency_ms')}" in hints
    assert all("[cut: " not in line and "…" not in line for line in hints)
    assert all(line.count("[cut: ") <= 1 for line in text.splitlines() if "expected" in line)
    shown = text.count("\ncase ")
    assert 1 <= shown < 4  # fewer cases, each whole
    assert f"... and {12 - shown} more failed cases" in text
    assert failure.parts is not None
    assert failure.parts.counts == CaseCounts(12, 12)


def test_the_cases_shown_are_distinct_errors_and_field_sets_before_repeats() -> None:
    zero = CallOutcome("raised", message="ZeroDivisionError: float division by zero")
    mean_wrong = {**EXPECTED, "mean_latency_ms": 1.0}
    tail_wrong = {**EXPECTED, "p99_latency_ms": 1.0}
    answers: dict[str, Any] = {f"zero {i}": zero for i in range(4)}
    answers |= {"mean": mean_wrong, "mean again": mean_wrong, "tail": tail_wrong}
    failure = failure_of(answers)
    headings = [line.split(":", 1)[0] for line in str(failure).splitlines()
                if line.startswith("case ")]
    assert headings == ["case 'zero 0'", "case 'mean'", "case 'tail'", "case 'zero 1'"]
    assert str(failure).endswith("... and 3 more failed cases")
    assert failure.full.count("\ncase ") == 7  # the page: every case, in order
    assert failure.full.index("case 'zero 3'") < failure.full.index("case 'mean'")


def test_a_hidden_test_gives_no_parts_to_the_terminal() -> None:
    cases = [Case("hidden 0", "queueing_latency", (), {"arrival_qps": 8.0})]
    with pytest.raises(GradingFailure) as raised:
        Grading(Source({"hidden 0": {**EXPECTED, "mean_latency_ms": 1.0}}), TOLERANCE,
                label="queueing_latency at scale", hidden=True).check(cases)
    assert raised.value.parts is None


@pytest.mark.parametrize("value", [2.0, 2, 0.1, 1e-05, 166.66666666666666, 3.0e20, 0, -1.5,
                                   True, None, "GB"])
def test_a_call_s_arguments_read_as_the_case_heading_writes_them(value: object) -> None:
    """A failed call's arguments (an invariant's, a callee's) and a case's heading write a
    number alike, exactly as it was passed: 2.0 a float, 2 an int, never rounded."""
    heading = Case("c", "serve", (value,), {"precision_bytes": value}).describe_inputs()
    shown = argument_text(value)
    assert heading == f"serve({shown}, precision_bytes={shown})"
    if isinstance(value, float):
        assert float(shown) == value
        assert "." in shown or "e" in shown  # a float reads as one
