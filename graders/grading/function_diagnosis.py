"""Why a function's answers are wrong, read across all of its visible cases at once.

For one function, :func:`diagnose_function` takes every visible case (inputs, the lab's
answer, the student's) and a :class:`graders.grading.finders.Lab` to run experiments in:

1. In each failed case, the wrong fields that follow from another wrong field of the same
   answer are knock-ons (:func:`graders.grading.diagnosis.knock_ons`).
2. Where the lab makes the function call another (``batching_tax`` calls
   ``queueing_latency``), the callee is asked at the inputs the lab gives it there
   (:mod:`graders.grading.probes`). Where the student's callee answers right, the case's
   wrong fields are the function's own; where it answers wrong and a wrong field is what
   the lab's arithmetic makes of that wrong answer, the field follows from the callee.
   So a function whose own arithmetic is wrong where its callee is right is its own root.
3. Each remaining root field gets one finding from its failing and passing cases
   (:func:`graders.grading.finders.choose`); a field with none gets its general hint,
   worded as where to look, unless the student's own values already follow its formula.
4. Calls that raised are read the same way, one error at a time: a catalogued error, the
   callee raising the same error where the lab calls it, or a region of the inputs.

The same inputs give the same diagnosis in an official grading and in the student bundle:
the experiments' expected values come from the reference there and from the golden file's
probes here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

from graders.grading.cases import Case
from graders.grading.compare import Tolerance, compare
from graders.grading.diagnosis import (
    QUEUE_FUNCTIONS,
    UNSTABLE_HINT,
    WHERE_TO_LOOK,
    Diagnosis,
    base_field,
    catalogue,
    contradicted,
    knock_ons,
)
from graders.grading.finders import (
    MISSING,
    NOT_ASKED,
    Failed,
    FieldEvidence,
    Finding,
    Lab,
    Observed,
    choose,
    pick,
)
from graders.grading.hints import error_hint_for, hint_for
from graders.grading.mistakes import Mistake
from graders.grading.probes import FALLBACK, PROFILE_LINKS, callee_cases

#: A prediction of some of a function's fields from its callee's answers: the case, and
#: the student's answer at each callee probe by label. It raises (KeyError, TypeError,
#: ValueError, ArithmeticError) where it cannot be made.
Prediction = Callable[[Observed, Mapping[str, Any]], Mapping[str, Any]]


def _queueing_from_erlang_c(o: Observed, answers: Mapping[str, Any]) -> dict[str, Any]:
    """The lab's queue from the student's erlang_c (r, P) at the queue's inputs."""
    answer = answers["erlang_c"]
    rate, wait = float(answer["wait_rate_per_s"]), float(answer["wait_probability"])
    service = float(o.inputs["service_ms"])
    cv = float(o.inputs["service_cv"])
    v = max(0.1, (1 + cv * cv) / 2)

    def tail(q: float) -> float:
        if wait <= 0 or q <= 1 - wait:
            return service
        return service + v * (-math.log((1 - q) / wait) / rate * 1000)

    p99 = tail(0.99)
    return {"queue_wait_probability": wait, "mean_latency_ms": service + wait / rate * 1000 * v,
            "p50_latency_ms": tail(0.5), "p95_latency_ms": tail(0.95), "p99_latency_ms": p99,
            "p999_latency_ms": tail(0.999), "slo_ok": p99 <= float(o.inputs["slo_ms"]),
            "queue_amplifier": p99 / service}


def _batching_from_queue(o: Observed, answers: Mapping[str, Any]) -> dict[str, Any]:
    """The lab's batching tax from the student's queue of batches."""
    queue = answers["queueing_latency"]
    formation = float(o.expected["formation_delay_ms"])
    batched = float(o.expected["batched_service_ms"])
    queue_p99 = max(0.0, float(queue["p99_latency_ms"]) - batched)
    total = formation + batched + queue_p99 if queue["stable"] is True else math.inf
    return {"queue_p99_ms": queue_p99, "total_p99_ms": total,
            "utilization": float(queue["utilization"]),
            "slo_ok": total <= float(o.inputs["slo_ms"])}


def _cache_from_state(o: Observed, answers: Mapping[str, Any]) -> dict[str, Any]:
    """The lab's capacity from the student's transformer_state_gb."""
    state = answers["transformer_state_gb"]
    if state is None:
        megabytes = getattr(o.inputs["profile"], "state_mb_per_request", None)
        state = megabytes / 1024 if megabytes is not None \
            else max(0.001, 0.1 * float(o.expected["weight_gb"]))
    state = float(state)
    available = float(o.expected["available_gb"])
    fits = math.floor(available / state) if state > 0 else 0
    return {"state_per_request_gb": state, "max_concurrent": fits, "oom": fits < 1}


def _profile_from_quantities(o: Observed, answers: Mapping[str, Any]) -> dict[str, Any]:
    """The lab's profile fields from the student's quantity_to_float of each quantity. A
    missing link is the student's conversion of None with the lab's fallback; where that
    gives the fallback back, it is the student's own fallback (their memory bandwidth)."""
    found = {name: float(answer) for name, answer in answers.items()
             if not name.endswith(FALLBACK)}
    if "model_params_b" in found:
        found["model_params_b"] /= 1e9
    memory = pick(o.expected, "memory_bandwidth_gbs")
    for name in PROFILE_LINKS:
        fallback = answers.get(f"{name}{FALLBACK}")
        if fallback is not None and name in found and _real_number(memory) and \
                found[name] == float(memory):
            found[name] = float(fallback)
    return found


def _real_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


#: Each function the lab makes call another: the callee's name and what the lab's
#: arithmetic makes of the callee's answers.
CALLEE_PREDICTIONS: dict[str, tuple[str, Prediction]] = {
    "queueing_latency": ("erlang_c", _queueing_from_erlang_c),
    "batching_tax": ("queueing_latency", _batching_from_queue),
    "cache_capacity": ("transformer_state_gb", _cache_from_state),
    "serving_track_profile": ("quantity_to_float", _profile_from_quantities),
}


class _AskedOnce:
    """A lab that asks each case once: the fields of one function share their probes."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.expected_values: dict[str, Any] = {}
        self.answered: dict[str, Any] = {}

    @property
    def tolerance(self) -> Tolerance:
        return self.lab.tolerance

    def expected(self, case: Case) -> Any:
        if case.key not in self.expected_values:
            self.expected_values[case.key] = self.lab.expected(case)
        return self.expected_values[case.key]

    def answers(self, cases: Sequence[Case]) -> list[Any]:
        new = list({case.key: case for case in cases
                    if case.key not in self.answered}.values())
        if new:
            for case, answer in zip(new, self.lab.answers(new), strict=True):
                if answer != NOT_ASKED:
                    self.answered[case.key] = answer
        return [self.answered.get(case.key, NOT_ASKED) for case in cases]


@dataclass(frozen=True)
class FunctionDiagnosis:
    """One function's diagnosis: each failed visible case's knock-ons and hints (by case
    key), each root field's finding, and the callee some cases follow from."""

    function: str
    cases: Mapping[str, Diagnosis] = field(default_factory=dict)
    findings: Mapping[str, Finding] = field(default_factory=dict)
    #: The callee (per the lab) that every wrong field of these cases follows from.
    callee_only: frozenset[str] = frozenset()

    def case(self, key: str) -> Diagnosis:
        return self.cases.get(key, Diagnosis())

    def summary(self) -> dict[str, Any]:
        """The findings as plain data, for results.json (the class page's clusters)."""
        return {name: {"key": finding.key, "label": finding.label, "named": finding.named}
                for name, finding in self.findings.items()}


def _wrong_fields(o: Observed, lab: Lab) -> list[str]:
    differences = compare(o.expected, o.got, lab.tolerance)
    return list(dict.fromkeys(base_field(d.field) for d in differences))


def _callee_follows(function: str, failed: Sequence[tuple[Observed, list[str]]], lab: Lab,
                    right: set[str] | None = None) -> dict[str, dict[str, str]]:
    """For each failed case (by key), its wrong fields (or ``error``) that follow from the
    student's callee, answered at the inputs the lab gives it there; the keys of the cases
    where the callee answered right go into ``right``."""
    if function not in CALLEE_PREDICTIONS or not failed:
        return {}
    callee, predict = CALLEE_PREDICTIONS[function]
    callee_right = right
    asked: list[tuple[Observed, list[tuple[str, Case]]]] = [
        (o, callee_cases(o.case, o.expected)) for o, _ in failed]
    probes = [case for _, cases in asked for _, case in cases]
    answers = iter(lab.answers(probes)) if probes else iter(())
    follows: dict[str, dict[str, str]] = {}
    wrong_of = {o.case.key: wrong for o, wrong in failed}
    for o, cases in asked:
        got = {label: next(answers) for label, _ in cases}
        if not cases:
            continue
        correct = {label: _same(lab.expected(case), got[label], lab) for label, case in cases}
        if all(correct.values()):
            if callee_right is not None:
                callee_right.add(o.case.key)
            continue  # the callee is right where the function calls it: its own failure
        source = f"your {callee}"
        if isinstance(o.got, Failed):  # the callee's own exception, message and all: the
            # same name alone is no evidence (every unwritten function raises
            # NotImplementedError, each with its own message)
            if any(isinstance(answer, Failed) and answer.error == o.got.error
                   and answer.message == o.got.message for answer in got.values()):
                follows[o.case.key] = {"error": source}
            continue
        answered = {label: answer for label, answer in got.items()
                    if not isinstance(answer, Failed)}
        try:
            predicted = predict(o, answered)
        except (KeyError, TypeError, ValueError, ArithmeticError, AttributeError):
            continue
        mine = {name: source for name in wrong_of[o.case.key]
                if name in predicted and _same(predicted[name], pick(o.got, name), lab)}
        if mine:
            follows[o.case.key] = mine
    return follows


def _same(predicted: Any, actual: Any, lab: Lab) -> bool:
    """Whether the student's ``actual`` is ``predicted`` (never where either is missing)."""
    if actual is MISSING or predicted is MISSING or isinstance(actual, Failed):
        return False
    if isinstance(predicted, float) and isinstance(actual, int) and \
            not isinstance(actual, bool):
        actual = float(actual)
    try:
        return not compare(predicted, actual, lab.tolerance)
    except TypeError:
        return False


def diagnose_function(function: str, observed: Sequence[Observed], lab: Lab,
                      mistakes: Iterable[Mistake] | None = None) -> FunctionDiagnosis:
    """The diagnosis of ``function`` from every visible case of it (see the module)."""
    known = tuple(catalogue() if mistakes is None else mistakes)
    lab = _AskedOnce(lab)
    failed: list[tuple[Observed, list[str]]] = []
    for o in observed:
        if isinstance(o.got, Failed):
            failed.append((o, []))
        else:
            wrong = _wrong_fields(o, lab)
            if wrong:
                failed.append((o, wrong))
    if not failed:
        return FunctionDiagnosis(function)
    callee_right: set[str] = set()
    from_callee = _callee_follows(function, [(o, w) for o, w in failed if w or (
        isinstance(o.got, Failed) and o.got.error.isidentifier())], lab, callee_right)
    follows: dict[str, dict[str, str]] = {}
    roots: dict[str, list[Observed]] = {}
    for o, wrong in failed:
        if not wrong:
            continue
        own = o.got if isinstance(o.got, Mapping) else {}
        mine = dict(knock_ons(function, wrong, own, o.inputs)) if own else {}
        callee = from_callee.get(o.case.key, {})
        for name in wrong:
            root = mine.get(name, name)
            if root in callee:
                mine[name] = callee[root]
        follows[o.case.key] = mine
        for name in wrong:
            if name not in mine:
                roots.setdefault(name, []).append(o)
    findings: dict[str, Finding] = {}
    answered = [o for o in observed if not isinstance(o.got, Failed)]
    wrong_in = {o.case.key: set(wrong) for o, wrong in failed}
    for name, failing in roots.items():
        passing = [o for o in answered if name not in wrong_in.get(o.case.key, ())]
        finding = choose(FieldEvidence(function, name, failing, passing, lab, known))
        if finding is not None:
            findings[name] = finding
    cases: dict[str, Diagnosis] = {}
    callee_only: set[str] = set()
    errors = _error_findings(function, failed, from_callee, observed, lab, known,
                             callee_right)
    callee_name = CALLEE_PREDICTIONS.get(function, ("",))[0]
    for o, wrong in failed:
        key = o.case.key
        if not wrong:
            error = o.got.error if isinstance(o.got, Failed) else ""
            if "error" in from_callee.get(key, {}):
                callee_only.add(key)
                cases[key] = Diagnosis(knock_on=(
                    f"your {function} uses your {callee_name}, which raises {error} where "
                    f"{function} calls it: fix {callee_name} first"))
            else:
                cases[key] = Diagnosis(error_hint=errors.get(error))
            continue
        mine = follows[key]
        hints: dict[str, str] = {}
        for name in wrong:
            if name not in mine:
                hint = _hint(function, name, o, findings.get(name))
                if hint is not None and hint not in hints.values():
                    hints[name] = hint
        if wrong and all(name in mine and mine[name].startswith("your ") for name in wrong):
            callee_only.add(key)
        cases[key] = Diagnosis(mine, hints)
    return FunctionDiagnosis(function, cases, findings, frozenset(callee_only))


def _diagnosable(got: Any) -> bool:
    return isinstance(got, Failed) and got.error.isidentifier() and \
        got.error != "NotImplementedError"


def _hint(function: str, name: str, o: Observed, finding: Finding | None) -> str | None:
    """The hint of a root field in one case: its finding when it names a cause; else what
    was observed and, unless the student's own values already follow the field's formula,
    where to look (the general hint, never said as the cause)."""
    if finding is not None and finding.named:
        return finding.text
    own = o.got if isinstance(o.got, Mapping) else {}
    general = None if own and contradicted(function, name, own, o.inputs) \
        else hint_for(function, name)
    if finding is not None:
        return f"{finding.text}; {WHERE_TO_LOOK}{general}" if general else finding.text
    want = pick(o.expected, name)
    if function in QUEUE_FUNCTIONS and isinstance(want, float) and math.isinf(want):
        return UNSTABLE_HINT
    return f"{WHERE_TO_LOOK}{general}" if general else None


def _error_findings(function: str, failed: Sequence[tuple[Observed, list[str]]],
                    from_callee: Mapping[str, Mapping[str, str]],
                    observed: Sequence[Observed], lab: Lab, known: Sequence[Mistake],
                    callee_right: Set[str] = frozenset()
                    ) -> dict[str, str]:
    """The hint for each error the function raised on its own (not from its callee): the
    catalogued error whose every case raised it, else the region where it is raised,
    else its general hint as where to look (not when it sends the student to the callee
    and the callee answered right at every one of those cases)."""
    callee = CALLEE_PREDICTIONS.get(function, ("",))[0]
    raised: dict[str, list[Observed]] = {}
    for o, wrong in failed:
        if not wrong and _diagnosable(o.got) and "error" not in from_callee.get(o.case.key, {}):
            raised.setdefault(o.got.error, []).append(o)
    answered = [o for o in observed if not isinstance(o.got, Failed)]
    hints: dict[str, str] = {}
    for error, cases in raised.items():
        mistake = next((m for m in known if m.function == function and m.error == error
                        and m.hint), None)
        if mistake is not None:
            hints[error] = mistake.hint
            continue
        finding = choose(FieldEvidence(function, "error", cases, answered, lab, (),
                                       wrong_words=f"your {function} raises {error}"))
        general = error_hint_for(function, error)
        contradicted = bool(callee) and callee in (general or "") and \
            all(o.case.key in callee_right for o in cases)
        if finding is not None and finding.named:
            hints[error] = finding.text
        elif general and not contradicted:
            hints[error] = f"{WHERE_TO_LOOK}{general}"
    return hints
