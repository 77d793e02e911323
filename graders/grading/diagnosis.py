"""Why one answer is wrong: its knock-ons, its root fields, and one hint that names the cause.

A wrong field is a *knock-on* when a field of the same answer it is computed from is wrong
too and the student's own values are consistent with the lab's arithmetic between them
(``total_p99_ms`` equal to the student's own formation + batched service + queue tail);
it says what it follows from and gets no hint. Where the arithmetic is not cheap to
check (``queue_p99_ms`` from the batched service time), a wrong source suffices. The other
wrong fields are *root* fields: each gets the hint of the first catalogued mistake
(:mod:`graders.grading.mistakes`) that fits the student's value, else its general hint
(:mod:`graders.grading.hints`), and a text already given in the case is not repeated.

The derivations read the case's inputs and the student's own values only, and the
catalogue the expected values: never ``reference/``, which the student bundle does not
have. Across functions, the root cause is :func:`graders.grading.checks.root_cause`'s.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from graders.grading.compare import Tolerance, compare
from graders.grading.contract import PARAMETERS, REQUIRED
from graders.grading.hints import error_hint_for, hint_for
from graders.grading.mistakes import Mistake, load_catalogue

#: The lab's formula evaluated on the student's own values (``own``) and the case's inputs
#: (``inputs``, every parameter by name, defaults filled in). It raises (KeyError,
#: TypeError, ValueError, ArithmeticError) when it cannot be evaluated here.
Formula = Callable[[Mapping[str, Any], Mapping[str, Any]], Any]
#: How close the student's value must be to the formula on their own values.
CONSISTENT = Tolerance(rel=1e-6, abs=1e-9)
#: Functions whose infinite values mean an unstable queue.
QUEUE_FUNCTIONS = frozenset({"erlang_c", "queueing_latency", "batching_tax"})
#: A field's general hint restates the lab's rule: it says where to look, never the cause.
WHERE_TO_LOOK = "where to look: "
UNSTABLE_HINT = "the queue is unstable here (utilization >= 1): this value is infinite"


@dataclass(frozen=True)
class Derivation:
    """A field computed from ``sources`` (fields of the same answer), by ``formula`` when
    the lab's arithmetic between them is cheap (None: not checked)."""

    sources: tuple[str, ...]
    formula: Formula | None = None


def derived(*sources: str, formula: Formula | None = None) -> tuple[Derivation, ...]:
    return (Derivation(sources, formula),)


def _replicas(inputs: Mapping[str, Any]) -> int:
    return max(1, int(inputs["replicas"]))


def _variability(inputs: Mapping[str, Any]) -> float:
    return max(0.1, (1 + float(inputs["service_cv"]) ** 2) / 2)


def _mean(own: Mapping[str, Any], inputs: Mapping[str, Any]) -> float:
    """mean = S + P / r * 1000 * v, on the student's own P (and stability)."""
    if own["stable"] is False:
        return math.inf
    service = float(inputs["service_ms"])
    rate = _replicas(inputs) * 1000 / service - float(inputs["arrival_qps"])
    return service + float(own["queue_wait_probability"]) / rate * 1000 * _variability(inputs)


def _percentile(q: float, scale: str) -> Formula:
    """A percentile from the student's own P and ``scale`` (their mean, or their p99):
    both give the waiting part's scale v / r, so the percentiles follow from either."""
    def formula(own: Mapping[str, Any], inputs: Mapping[str, Any]) -> float:
        if own["stable"] is False:
            return math.inf
        service, wait = float(inputs["service_ms"]), float(own["queue_wait_probability"])
        if wait <= 0 or q <= 1 - wait:
            return service
        if scale == "mean_latency_ms":
            per_unit = (float(own[scale]) - service) / wait
        elif 1 - wait < 0.99:  # the p99's own waiting part
            per_unit = (float(own[scale]) - service) / -math.log(0.01 / wait)
        else:
            raise ValueError("p99 holds no waiting part here")
        return service + per_unit * -math.log((1 - q) / wait)
    return formula


def _percentile_sources(q: float) -> tuple[Derivation, ...]:
    from_mean = Derivation(("stable", "queue_wait_probability", "mean_latency_ms"),
                           _percentile(q, "mean_latency_ms"))
    if q == 0.99:
        return (from_mean,)
    return (from_mean, Derivation(("stable", "queue_wait_probability", "p99_latency_ms"),
                                  _percentile(q, "p99_latency_ms")))


def _profile(inputs: Mapping[str, Any], name: str) -> float:
    return float(getattr(inputs["profile"], name))


#: Within one answer, what each field is computed from (lab spec section 2). A field not
#: listed here is computed from the inputs alone: when wrong, it is a root.
DERIVATIONS: dict[str, dict[str, tuple[Derivation, ...]]] = {
    "serve": {
        # a floor'd pass count changes the requests per pass too: no cheap check
        "total_ms": derived("passes"),
        "throughput_rps": derived(
            "total_ms", formula=lambda own, i: i["n_requests"] / (own["total_ms"] / 1000)),
    },
    "queueing_latency": {
        "stable": derived("utilization", formula=lambda own, i: own["utilization"] < 1),
        "queue_wait_probability": derived(
            "stable", formula=lambda own, i: 1.0 if own["stable"] is False else _unknown()),
        "mean_latency_ms": derived("stable", "queue_wait_probability", formula=_mean),
        "p50_latency_ms": _percentile_sources(0.50),
        "p95_latency_ms": _percentile_sources(0.95),
        "p99_latency_ms": _percentile_sources(0.99),
        "p999_latency_ms": _percentile_sources(0.999),
        "slo_ok": derived(
            "p99_latency_ms", formula=lambda own, i: own["p99_latency_ms"] <= i["slo_ms"]),
        "queue_amplifier": derived(
            "p99_latency_ms", formula=lambda own, i: own["p99_latency_ms"] / i["service_ms"]),
    },
    "batching_tax": {
        # the queue's tail needs a whole queueing_latency: not checked
        "queue_p99_ms": derived("batched_service_ms", "effective_batch_qps"),
        "total_p99_ms": derived(
            "formation_delay_ms", "batched_service_ms", "queue_p99_ms",
            formula=lambda own, i: (own["formation_delay_ms"] + own["batched_service_ms"]
                                    + own["queue_p99_ms"])),
        "formation_slo_pct": derived(
            "formation_delay_ms",
            formula=lambda own, i: own["formation_delay_ms"] / i["slo_ms"] * 100),
        "throughput_gain": derived(
            "batched_service_ms",
            formula=lambda own, i: (max(1, int(i["batch_size"])) * i["service_ms"]
                                    / own["batched_service_ms"])),
        "utilization": derived(
            "batched_service_ms", "effective_batch_qps",
            formula=lambda own, i: (own["effective_batch_qps"] * own["batched_service_ms"]
                                    / (1000 * _replicas(i)))),
        "slo_ok": derived(
            "total_p99_ms", formula=lambda own, i: own["total_p99_ms"] <= i["slo_ms"]),
    },
    "cache_capacity": {
        "available_gb": derived(
            "total_memory_gb", "weight_gb",
            formula=lambda own, i: max(0.0, own["total_memory_gb"] - own["weight_gb"])),
        "max_concurrent": derived(
            "available_gb", "state_per_request_gb",
            formula=lambda own, i: (math.floor(own["available_gb"] / own["state_per_request_gb"])
                                    if own["state_per_request_gb"] > 0 else 0)),
        "oom": derived("max_concurrent", formula=lambda own, i: own["max_concurrent"] < 1),
    },
    "cold_start_latency": {
        "effective_bandwidth_gbs": derived(
            "storage_bandwidth_gbs", "interconnect_bandwidth_gbs",
            formula=lambda own, i: min(own["storage_bandwidth_gbs"],
                                       own["interconnect_bandwidth_gbs"])),
        "read_ms": derived(
            "model_weight_gb", "effective_bandwidth_gbs",
            formula=lambda own, i: own["model_weight_gb"] / own["effective_bandwidth_gbs"] * 1000),
        "deserialize_ms": derived("model_weight_gb"),
        "cold_start_ms": derived(
            "read_ms", "deserialize_ms", "runtime_init_ms", "warmup_ms",
            formula=lambda own, i: (own["read_ms"] + own["deserialize_ms"]
                                    + own["runtime_init_ms"] + own["warmup_ms"])),
        "exposed_first_request_ms": derived(
            "cold_start_ms", "protected_fraction",
            formula=lambda own, i: (_profile(i, "service_ms")
                                    + own["cold_start_ms"] * (1 - own["protected_fraction"]))),
        "exceeds_slo": derived(
            "exposed_first_request_ms",
            formula=lambda own, i: own["exposed_first_request_ms"] > _profile(i, "slo_ms")),
    },
}


def _unknown() -> Any:
    raise ValueError("not checked here")


@dataclass(frozen=True)
class Diagnosis:
    """One failed case's causes: each knock-on field with the root field it follows from,
    and each root field's hint (at most one per distinct text)."""

    follows: Mapping[str, str] = field(default_factory=dict)
    hints: Mapping[str, str] = field(default_factory=dict)
    #: For a call that raised: the hint for its error, and the line that sends the
    #: student to a function it calls whose catalogued mistake raises that error.
    error_hint: str | None = None
    knock_on: str | None = None

    @property
    def roots(self) -> list[str]:
        return list(self.hints)


@functools.cache
def catalogue() -> tuple[Mistake, ...]:
    """The grader's own catalogue (read once per process)."""
    return tuple(load_catalogue())


def case_inputs(function: str, args: Sequence[Any], kwargs: Mapping[str, Any]
                ) -> dict[str, Any]:
    """A case's inputs by parameter name (positional ones also as ``arg0``, ...), with the
    lab's defaults for those not given."""
    inputs: dict[str, Any] = {f"arg{index}": value for index, value in enumerate(args)}
    for index, (name, default) in enumerate(PARAMETERS.get(function, ())):
        if index < len(args):
            inputs[name] = args[index]
        elif name in kwargs:
            inputs[name] = kwargs[name]
        elif default is not REQUIRED:
            inputs[name] = default
    inputs.update(kwargs)
    return inputs


def _numbers(values: Mapping[str, Any]) -> dict[str, float]:
    numbers: dict[str, float] = {}
    for name, value in values.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            try:
                numbers[name] = float(value)
            except OverflowError:  # an int too large for a float names nothing
                continue
    return numbers


def base_field(name: str) -> str:
    """``wait_rate_per_s`` of ``wait_rate_per_s[0]``; fields of a sequence are one field."""
    return name.split("[", 1)[0]


def _consistent(derivation: Derivation, own: Mapping[str, Any], inputs: Mapping[str, Any],
                value: Any) -> bool | None:
    """Whether ``value`` is the formula's on the student's own values (None: unknown)."""
    if derivation.formula is None:
        return None
    try:
        predicted = derivation.formula(own, inputs)
    except (KeyError, TypeError, ValueError, ArithmeticError, AttributeError):
        return None
    if isinstance(predicted, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(predicted, bool) and value == predicted
    if isinstance(predicted, int) and isinstance(value, float):
        predicted = float(predicted)
    try:
        return not compare(predicted, value, CONSISTENT)
    except TypeError:
        return None


def knock_ons(function: str, wrong: Iterable[str], own: Mapping[str, Any],
              inputs: Mapping[str, Any]) -> dict[str, str]:
    """Each wrong field that follows from another wrong field of the same answer, with the
    root field it follows from (through any chain of knock-ons)."""
    wrong = set(wrong)
    table = DERIVATIONS.get(function, {})
    parent: dict[str, str] = {}
    for name in wrong:
        if not _answered(own.get(name)):  # not a number or a bool: a mistake of its own
            continue
        for derivation in table.get(name, ()):
            upstream = [source for source in derivation.sources if source in wrong]
            if not upstream:
                continue
            if _consistent(derivation, own, inputs, own.get(name)) is not False:
                parent[name] = upstream[0]
                break
    roots: dict[str, str] = {}
    for name in parent:
        seen, current = {name}, parent[name]
        while current in parent and parent[current] not in seen:
            seen.add(current)
            current = parent[current]
        roots[name] = current
    return roots


def _answered(value: Any) -> bool:
    """Whether ``value`` is a number (infinity included, NaN not) or a bool: something a
    formula on other fields could have produced."""
    return isinstance(value, int | float) and not (isinstance(value, float)
                                                    and math.isnan(value))


def contradicted(function: str, name: str, own: Mapping[str, Any],
                  inputs: Mapping[str, Any]) -> bool:
    """Whether the student's own values already follow the field's formula: its general
    hint (about that formula) would then be wrong."""
    return any(_consistent(derivation, own, inputs, own.get(name)) is True
               for derivation in DERIVATIONS.get(function, {}).get(name, ()))


def fitting_mistakes(function: str, name: str, expected: Any, got: Any,
                     inputs: Mapping[str, Any], mistakes: Iterable[Mistake] | None = None
                     ) -> list[Mistake]:
    """Every catalogued mistake of ``function`` that fits the student's value of ``name``
    (``expected`` and ``got``: the reference's and the student's whole answers, or the
    values themselves), in catalogue order. The one matcher of the feedback and of the
    class page's clusters (:mod:`graders.regrade.clusters`)."""
    value = expected.get(name) if isinstance(expected, Mapping) else expected
    answer = got.get(name) if isinstance(got, Mapping) else got
    fields = expected if isinstance(expected, Mapping) else None
    numbers = _numbers(inputs)
    return [mistake for mistake in (catalogue() if mistakes is None else mistakes)
            if mistake.function == function and not mistake.error
            and (mistake.field or "value") == name
            and mistake.agrees(value, answer, numbers, fields)]


def mistake_for(function: str, name: str, expected: Any, got: Any,
                inputs: Mapping[str, Any], mistakes: Iterable[Mistake] | None = None
                ) -> Mistake | None:
    """The first catalogued mistake with a hint that fits the student's value of ``name``."""
    return next((mistake for mistake in fitting_mistakes(function, name, expected, got,
                                                         inputs, mistakes) if mistake.hint),
                None)


def diagnose(function: str, inputs: Mapping[str, Any], expected: Any, got: Any,
             wrong: Sequence[str], mistakes: Iterable[Mistake] | None = None) -> Diagnosis:
    """Knock-ons and hints of one answer whose fields ``wrong`` differ (in that order)."""
    names = list(dict.fromkeys(base_field(name) for name in wrong))
    own = got if isinstance(got, Mapping) else {}
    follows = knock_ons(function, names, own, inputs) if own else {}
    hints: dict[str, str] = {}
    for name in names:
        if name in follows:
            continue
        hint = _hint(function, name, inputs, expected, got, own, mistakes)
        if hint is not None and hint not in hints.values():
            hints[name] = hint
    return Diagnosis(follows, hints)


def _hint(function: str, name: str, inputs: Mapping[str, Any], expected: Any, got: Any,
          own: Mapping[str, Any], mistakes: Iterable[Mistake] | None) -> str | None:
    found = mistake_for(function, name, expected, got, inputs, mistakes)
    if found is not None:
        return found.hint
    if own and contradicted(function, name, own, inputs):
        return None
    value = expected.get(name) if isinstance(expected, Mapping) else expected
    if function in QUEUE_FUNCTIONS and isinstance(value, float) and math.isinf(value):
        return UNSTABLE_HINT
    general = hint_for(function, name)
    return f"{WHERE_TO_LOOK}{general}" if general else None


def error_name(message: str) -> str:
    """The exception's name of a raised call's message (``OverflowError: ...``), else ""."""
    name = message.split(":", 1)[0].strip()
    return name if name.isidentifier() else ""


def error_hint(function: str, error: str, mistakes: Iterable[Mistake] | None = None
               ) -> str | None:
    """The hint for ``function`` raising ``error``: a catalogued mistake's, else the
    function's general hint for that error (none for a call that did not raise: "")."""
    if not error:
        return None
    for mistake in catalogue() if mistakes is None else mistakes:
        if mistake.function == function and mistake.error == error and mistake.hint:
            return mistake.hint
    general = error_hint_for(function, error)
    return f"{WHERE_TO_LOOK}{general}" if general else None


def error_knock_on(function: str, error: str, callees: Sequence[str],
                   mistakes: Iterable[Mistake] | None = None) -> str | None:
    """The line that sends a student to a function ``function`` calls when ``error`` is
    what a catalogued mistake of that one raises (and ``function`` has none of its own)."""
    every = list(catalogue() if mistakes is None else mistakes)
    if not error or any(m.function == function and m.error == error for m in every):
        return None
    for callee in callees:
        for mistake in every:
            if mistake.function == callee and mistake.error == error:
                return (f"your {function} uses your {callee}, and {error} likely comes "
                        f"from the {mistake.label}: fix {callee} first")
    return None
