"""The diagnosis by experiment (graders/grading/finders.py, function_diagnosis.py,
probes.py), tried on bugs its hints were not written for: the slips of tests/slips (written
from the student's kit alone, by someone who had not read the diagnosis) and generated
mutants of reference/ (tests/mutants.py).

The properties: a finding is never a wrong cause (it names the function the bug is in, and
it still holds on unseen inputs of that function with three times the experiments); nine
single slips in ten get a finding that names a cause; a two-bug submission gets each bug's
finding that the bug alone gets.
"""

from __future__ import annotations

import functools
import math
import re
import tempfile
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from diagnosis_lab import (
    InProcessLab,
    diagnose,
    falsified,
    load_source,
    observe,
    slip_names,
    slip_source,
    slip_truth,
    tracks,
    twins,
)

from graders.grading.cases import CONTRACT_FUNCTIONS, Case, visible_cases
from graders.grading.compare import Tolerance
from graders.grading.diagnosis import WHERE_TO_LOOK
from graders.grading.finders import (
    MISSING,
    NOT_ASKED,
    Failed,
    FieldEvidence,
    Observed,
    choose,
    interleaved,
)
from graders.grading.function_diagnosis import FunctionDiagnosis, diagnose_function
from graders.grading.probes import Move, moved_case, moves, probe_of

# --- the slips -----------------------------------------------------------------------------


@functools.cache
def _cases() -> dict[str, list[Case]]:
    found: dict[str, list[Case]] = {}
    for case in visible_cases(tracks()):
        found.setdefault(case.function, []).append(case)
    return found


@functools.cache
def _module(name: str) -> types.ModuleType:
    folder = Path(tempfile.mkdtemp(prefix="slip-"))
    return load_source(slip_source(name), f"slip_{name}", folder)


@functools.cache
def _diagnoses(name: str) -> dict[str, tuple[FunctionDiagnosis, InProcessLab]]:
    """Each failing function's diagnosis of the slip ``name``."""
    found = {}
    for function in CONTRACT_FUNCTIONS:
        diagnosis, lab = diagnose(_module(name), function)
        if diagnosis.cases:
            found[function] = (diagnosis, lab)
    return found


def _named(name: str) -> tuple[set[str], list[str]]:
    """The functions of the slip that get a finding naming a cause, and each wrong cause
    (a finding on another function, or one false on unseen inputs)."""
    truth = {bug["function"] for bug in slip_truth(name)}
    named: set[str] = set()
    wrong: list[str] = []
    for function, (diagnosis, lab) in _diagnoses(name).items():
        for field, finding in diagnosis.findings.items():
            if not finding.named:
                continue
            if function not in truth:
                wrong.append(f"{function}.{field}: {finding.text}")
                continue
            wide = observe(_module(name), [*_cases()[function], *twins(function, tracks())],
                           lab)
            if falsified(function, field, finding.key, wide, lab):
                wrong.append(f"{function}.{field}, false on unseen inputs: {finding.text}")
            else:
                named.add(function)
        if function in truth and any(
                case.error_hint and not case.error_hint.startswith(WHERE_TO_LOOK)
                for case in diagnosis.cases.values()):
            named.add(function)
    return named, wrong


SINGLE = [name for name in slip_names() if len(slip_truth(name)) == 1]
DOUBLE = [name for name in slip_names() if len(slip_truth(name)) == 2]


def test_the_slips_are_many_and_cover_every_graded_function() -> None:
    assert len(SINGLE) >= 20
    assert len(DOUBLE) >= 2
    functions = {slip_truth(name)[0]["function"] for name in SINGLE}
    assert functions >= set(CONTRACT_FUNCTIONS)


@pytest.mark.slow
@pytest.mark.parametrize("name", slip_names())
def test_no_slip_gets_a_wrong_cause(name: str) -> None:
    _, wrong = _named(name)
    assert wrong == []


@pytest.mark.slow
def test_nine_single_slips_in_ten_get_a_finding_that_names_a_cause() -> None:
    visible = [name for name in SINGLE if _diagnoses(name)]
    named = [name for name in visible
             if slip_truth(name)[0]["function"] in _named(name)[0]]
    assert len(visible) >= 50
    assert len(named) >= 0.9 * len(visible), sorted(set(visible) - set(named))


@pytest.mark.slow
@pytest.mark.parametrize("name", DOUBLE)
def test_a_two_bug_slip_names_each_bug_its_slip_alone_names(name: str) -> None:
    named, _ = _named(name)
    alone = set()
    for bug in slip_truth(name):
        single = next((other for other in SINGLE
                       if slip_source(other) and _same_bug(other, bug)), None)
        if single is None or bug["function"] in _named(single)[0]:
            alone.add(bug["function"])
    assert alone, name
    assert alone <= named


def _same_bug(single: str, bug: dict[str, Any]) -> bool:
    (mine,) = slip_truth(single)
    return mine["function"] == bug["function"] and mine["line"] == bug["line"]


# --- the mutants ---------------------------------------------------------------------------


@pytest.mark.slow
def test_no_mutant_of_the_reference_gets_a_wrong_cause() -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import diagnosis as sweep  # bench/diagnosis.py
    import mutants

    loaded = tracks()
    cases: dict[str, list[Case]] = {}
    for case in visible_cases(loaded):
        cases.setdefault(case.function, []).append(case)
    counts: dict[str, int] = {}
    wrong = []
    for mutant in mutants.mutants():
        kind, why = sweep.classify(mutant, loaded, cases)
        counts[kind] = counts.get(kind, 0) + 1
        if kind == "wrong":
            wrong.append((mutant.name, why))
    assert sum(counts.values()) >= 300
    assert counts.get("named", 0) >= counts.get("observed", 0) + counts.get("silent", 0)
    assert wrong == []


# --- the finders, one at a time --------------------------------------------------------------


class TableLab:
    """A lab of one function given as two formulas: the lab's and the student's."""

    def __init__(self, lab: Any, student: Any) -> None:
        self.lab, self.student = lab, student
        self.tolerance = Tolerance(rel=1e-6, abs=1e-9)
        self.asked = 0

    def expected(self, case: Case) -> Any:
        try:
            return self.lab(**case.kwargs)
        except (ValueError, ZeroDivisionError):
            return MISSING

    def answers(self, cases: Sequence[Case]) -> list[Any]:
        self.asked += len(cases)
        found: list[Any] = []
        for case in cases:
            try:
                found.append(self.student(**case.kwargs))
            except ZeroDivisionError:
                found.append(Failed("ZeroDivisionError"))
        return found


def _formation(*, batch_size: int, arrival_qps: float, service_ms: float = 20.0,
               slo_ms: float = 100.0, efficiency_gain: float = 1.0, replicas: int = 1,
               service_cv: float = 1.0) -> dict[str, Any]:
    batch = max(1, int(batch_size))
    formation = (batch - 1) / (2 * arrival_qps) * 1000
    return {"formation_delay_ms": formation, "batched_service_ms": service_ms,
            "total_p99_ms": formation + service_ms}


def _observed(lab: TableLab, inputs: Sequence[dict[str, Any]]) -> list[Observed]:
    found = []
    for index, kwargs in enumerate(inputs):
        case = Case(f"case {index}", "batching_tax", (), kwargs, track_id="t")
        found.append(Observed(case, dict(kwargs), lab.expected(case),
                              lab.answers([case])[0]))
    return found


def _evidence(lab: TableLab, inputs: Sequence[dict[str, Any]], name: str) -> FieldEvidence:
    every = _observed(lab, inputs)
    probe = FieldEvidence("batching_tax", name, [], [], lab)
    return FieldEvidence("batching_tax", name, [o for o in every if probe.wrong(o)],
                         [o for o in every if not probe.wrong(o)], lab)


INPUTS = [{"batch_size": b, "arrival_qps": q} for b in (1, 2, 4, 8, 32) for q in (30.0, 500.0)]


def test_b_instead_of_b_minus_1_is_said_as_batch_size_plus_1_never_as_the_missing_half() -> None:
    def student(**kwargs: Any) -> dict[str, Any]:
        answer = _formation(**kwargs)
        answer["formation_delay_ms"] = max(1, int(kwargs["batch_size"])) / (
            2 * kwargs["arrival_qps"]) * 1000
        return answer

    finding = choose(_evidence(TableLab(_formation, student), INPUTS, "formation_delay_ms"))
    assert finding is not None
    assert finding.named
    assert finding.key == "moved:batch_size + 1"
    assert "/ 2" not in finding.text


def test_a_unit_factor_is_named_with_its_reading() -> None:
    def student(**kwargs: Any) -> dict[str, Any]:
        answer = _formation(**kwargs)
        answer["formation_delay_ms"] /= 1000
        return answer

    finding = choose(_evidence(TableLab(_formation, student), INPUTS, "formation_delay_ms"))
    assert finding is not None
    assert "1000× too small" in finding.text
    assert "seconds" in finding.text


def test_a_wrong_value_that_fits_no_rule_is_said_as_observed_never_as_a_cause() -> None:
    def student(**kwargs: Any) -> dict[str, Any]:
        answer = _formation(**kwargs)
        answer["formation_delay_ms"] = math.sin(kwargs["batch_size"] * 7.3) + 3.3
        return answer

    finding = choose(_evidence(TableLab(_formation, student), INPUTS, "formation_delay_ms"))
    assert finding is None or not finding.named


def test_a_rule_is_tried_on_probes_and_dropped_when_one_contradicts_it() -> None:
    # the visible cases cannot tell B + 1 from "always 1000/(2λ) more" at B = 1..2; the
    # student's real rule (a square) shows only once B moves
    def student(**kwargs: Any) -> dict[str, Any]:
        answer = _formation(**kwargs)
        batch = max(1, int(kwargs["batch_size"]))
        answer["formation_delay_ms"] = (batch * batch) / (2 * kwargs["arrival_qps"]) * 1000
        return answer

    lab = TableLab(_formation, student)
    evidence = _evidence(lab, [{"batch_size": 1, "arrival_qps": 30.0},
                               {"batch_size": 2, "arrival_qps": 500.0}], "formation_delay_ms")
    finding = choose(evidence)
    assert lab.asked > 2  # experiments were run
    assert finding is None or finding.key != "moved:batch_size + 1"


def test_a_probe_the_student_could_not_answer_is_no_evidence_either_way() -> None:
    def student(**kwargs: Any) -> dict[str, Any]:
        if kwargs["batch_size"] == 3:
            raise ZeroDivisionError
        answer = _formation(**kwargs)
        answer["formation_delay_ms"] *= 2
        return answer

    evidence = _evidence(TableLab(_formation, student), INPUTS, "formation_delay_ms")
    assert any(isinstance(p.got, Failed) for p in evidence.probes())  # batch_size + 1 = 3
    finding = choose(evidence)
    assert finding is not None
    assert "2× too large" in finding.text


def test_probes_not_asked_are_left_out() -> None:
    class Deaf(TableLab):
        def answers(self, cases: Sequence[Case]) -> list[Any]:
            return [NOT_ASKED] * len(cases)

    evidence = _evidence(Deaf(_formation, _formation), INPUTS[:2], "formation_delay_ms")
    assert evidence.probes() == []


def test_the_first_probes_of_a_case_move_every_parameter() -> None:
    case = Case("c", "cold_start_latency", (), {
        "profile": None, "precision_bytes": 2.0, "storage_bandwidth_gbs": 3.0,
        "interconnect_bandwidth_gbs": 5.0, "runtime_init_ms": 7.0, "warmup_ms": 11.0,
        "warm_pool_replicas": 2, "scale_out_replicas": 4}, track_id="t")
    ordered = interleaved(moves(case))
    parameters = {move.parameter for move in ordered}
    assert {move.parameter for move in ordered[:len(parameters)]} == parameters


def test_unseen_inputs_are_never_a_probe_s() -> None:
    case = Case("c", "serve", (64, 8), {}, track_id="")
    moved = moved_case(case, Move("batch_size", 9, "batch_size + 1"))
    twin = Case("unseen 1", "serve", (64, 9), {}, track_id="")
    far = Case("unseen 2", "serve", (65, 9), {}, track_id="")
    swapped = Case("unseen 3", "serve", (8, 64), {}, track_id="")
    given = Case("c", "serve", (64, 8), {"overhead_ms": 20.0}, track_id="")
    zero = Case("unseen 4", "serve", (64, 8), {"overhead_ms": 0.0}, track_id="")
    assert probe_of(swapped, [case])
    assert probe_of(zero, [given])
    assert not probe_of(zero, [case])  # a move changes only what the case gives
    assert probe_of(twin, [case])
    assert probe_of(moved, [case])
    assert not probe_of(far, [case])


def test_a_function_whose_callee_is_right_where_it_calls_it_is_its_own_root() -> None:
    # a queue whose erlang_c is right but whose mean forgets the variability factor
    module = _module("ql_mean_no_v")
    diagnosis, _ = diagnose(module, "queueing_latency")
    assert diagnosis.cases
    assert not diagnosis.callee_only
    assert "mean_latency_ms" in diagnosis.findings


def test_a_function_that_only_follows_its_callee_says_so() -> None:
    diagnosis, _ = diagnose(_module("erlang_rate_single_server"), "queueing_latency")
    assert diagnosis.cases
    assert set(diagnosis.cases) == set(diagnosis.callee_only)
    assert diagnosis.findings == {}


def test_a_correct_submission_asks_for_no_experiment() -> None:
    lab = TableLab(_formation, _formation)
    observed = _observed(lab, INPUTS)
    asked = lab.asked
    assert diagnose_function("batching_tax", observed, lab).cases == {}
    assert lab.asked == asked


TEMPLATE_SOURCE = (Path(__file__).resolve().parents[2] / "student_template" / "serving.py")


def test_an_unwritten_function_is_never_blamed_on_an_unwritten_callee(tmp_path: Path) -> None:
    """On the template every function raises NotImplementedError, each with its own
    message: batching_tax's own error is no evidence against queueing_latency."""
    module = load_source(TEMPLATE_SOURCE.read_text(encoding="utf-8"), "template_serving",
                         tmp_path)
    for function in ("batching_tax", "cache_capacity"):
        diagnosis, _ = diagnose(module, function)
        knock_ons = [d.knock_on for d in diagnosis.cases.values() if d.knock_on]
        assert knock_ons == [], (function, knock_ons[:1])


def test_a_function_whose_callee_raises_is_sent_to_the_callee(tmp_path: Path) -> None:
    """batching_tax written, queueing_latency not: batching_tax raises queueing_latency's
    own exception, so each failed case is a knock-on of it."""
    source = (Path(__file__).resolve().parents[1] / "slips" / "correct" / "serving.py"
              ).read_text(encoding="utf-8")
    head = source.index("def queueing_latency(")
    signature = re.compile(r"\)(?: -> [\w.\[\], ]+)?:\n").search(source, head)
    assert signature is not None
    body = signature.end()  # the first line of its body
    source = (f"{source[:body]}    raise NotImplementedError('queueing_latency: implement "
              f"me')\n{source[body:]}")
    module = load_source(source, "callee_unwritten", tmp_path)
    diagnosis, _ = diagnose(module, "batching_tax")
    knock_ons = {d.knock_on for d in diagnosis.cases.values()}
    assert knock_ons == {"your batching_tax uses your queueing_latency, which raises "
                         "NotImplementedError where batching_tax calls it: fix "
                         "queueing_latency first"}
