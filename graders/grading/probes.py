"""The inputs of a diagnosis's experiments, derived from a visible case and nothing else.

A *move* changes one parameter of a case (``batch_size + 1``, ``devices_per_replica = 1``,
``runtime_init_ms`` not given) or swaps two; a *callee probe* asks a function the case's
function calls (per the lab) with the inputs the lab's own arithmetic gives it there
(``queueing_latency`` at the batches' rate, for a ``batching_tax`` case). Both are plain
:class:`Case` objects of the same track, so their expected values come from the oracle like
any case's: the reference in an official grading, the golden file's probe section in the
student bundle (:mod:`graders.expected.golden`), which is built from :func:`probe_cases`.

Every probe is a pure function of the visible case and its expected value, never of the
student's answers, so the bundle can carry the expected value of every probe a grading
may ask.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from graders.grading.cases import Case
from graders.grading.contract import PARAMETERS, REQUIRED

#: Whole numbers a move changes by one, at most (a context length is moved too).
MAX_STEPPED = 10**7
#: The name of a probe's case id after its case's (never in a visible case id).
PROBE_MARK = " ~ "


@dataclass(frozen=True)
class Move:
    """One change of a case's inputs: ``parameter`` set to ``value`` (``NOT_GIVEN``: left to
    its default), or swapped with ``other``; ``label`` says it as the student reads it."""

    parameter: str
    value: Any
    label: str
    other: str = ""

    @property
    def key(self) -> str:
        """The move, the same for every case (a cluster of the class page keys on it)."""
        return self.label


class _NotGiven:
    def __repr__(self) -> str:
        return "NOT_GIVEN"


NOT_GIVEN: Any = _NotGiven()


def given(case: Case) -> dict[str, Any]:
    """The parameters ``case`` passes, by name (positional ones by the contract's names)."""
    names = [name for name, _ in PARAMETERS.get(case.function, ())]
    values = {names[index]: value for index, value in enumerate(case.args) if index < len(names)}
    values.update(case.kwargs)
    return values


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) \
        and math.isfinite(value)


def _whole(value: Any) -> bool:
    return _number(value) and float(value).is_integer() and abs(value) <= MAX_STEPPED


def _step(value: Any, by: int) -> Any:
    return value + by if isinstance(value, int) else float(value) + by


def _candidates(name: str, value: Any, default: Any) -> list[tuple[Any, str]]:
    """The new values one move gives the number ``value`` of ``name``, with their labels."""
    candidates: list[tuple[Any, str]] = []
    if default is None:
        candidates.append((NOT_GIVEN, f"{name} not given"))
    elif default is not REQUIRED:
        candidates.append((default, f"{name} = {default!r} (its default)"))
    candidates += [(type(value)(fixed), f"{name} = {fixed}") for fixed in (0, 1)]
    if _whole(value):
        candidates.append((_step(value, 1), f"{name} + 1"))
        if value >= 1:
            candidates.append((_step(value, -1), f"{name} - 1"))
    return candidates


def moves(case: Case) -> list[Move]:
    """The moves of ``case``'s given numeric parameters, each new input once: a parameter
    with a default to it (or not given at all, when the default is None), every number to 0
    and to 1, a whole number by one up and down, and two numbers swapped."""
    defaults = dict(PARAMETERS.get(case.function, ()))
    found: dict[tuple[str, str], Move] = {}
    values = given(case)
    numbers = {name: value for name, value in values.items() if _number(value)}
    for name, value in numbers.items():
        for new, label in _candidates(name, value, defaults.get(name, REQUIRED)):
            same = new is not NOT_GIVEN and new == value
            if not same:
                found.setdefault((name, repr(new)), Move(name, new, label))
    names = sorted(numbers)
    for index, first in enumerate(names):
        for second in names[index + 1:]:
            if numbers[first] != numbers[second]:
                found[(first, second)] = Move(first, numbers[second],
                                              f"{first} and {second} swapped", second)
    return list(found.values())


def moved_case(case: Case, move: Move) -> Case:
    """``case`` with ``move`` made (its inputs by keyword, but the positional ones)."""
    names = [name for name, _ in PARAMETERS.get(case.function, ())]
    args = list(case.args)
    kwargs = dict(case.kwargs)
    values = given(case)
    changes = {move.parameter: move.value}
    if move.other:
        changes = {move.parameter: values[move.other], move.other: values[move.parameter]}
    for name, value in changes.items():
        position = names.index(name) if name in names else -1
        if 0 <= position < len(args):
            args[position] = value
        elif value is NOT_GIVEN:
            kwargs.pop(name, None)
        else:
            kwargs[name] = value
    return dataclasses.replace(case, case_id=f"{case.case_id}{PROBE_MARK}{move.label}",
                               args=tuple(args), kwargs=kwargs)


# --- callee probes: a function the case's function calls, at the inputs the lab gives it ---


def _attribute(value: Any, *names: str) -> Any:
    for name in names:
        value = getattr(value, name, None)
        if value is None:
            return None
    return value


def _queueing_callees(case: Case, expected: Any) -> Iterator[tuple[str, Case]]:
    """erlang_c at the queue's own inputs, where the lab computes it (a stable queue)."""
    inputs = given(case)
    if not isinstance(expected, Mapping) or expected.get("stable") is not True:
        return
    replicas = max(1, int(inputs.get("replicas", 1)))
    yield "erlang_c", Case(f"{case.function}:{case.case_id}{PROBE_MARK}erlang_c",
                           "erlang_c", (float(inputs["arrival_qps"]),
                                        float(inputs["service_ms"]), replicas),
                           track_id=case.track_id)


def _batching_callees(case: Case, expected: Any) -> Iterator[tuple[str, Case]]:
    """queueing_latency at the batches' rate, the batched service time and the SLO left
    after the formation delay (the lab's own inputs, from the expected answer)."""
    if not isinstance(expected, Mapping):
        return
    inputs = given(case)
    try:
        batch = int(expected["batch_size"])
        arrival = float(expected["arrival_qps"])
        formation = float(expected["formation_delay_ms"])
        batched = float(expected["batched_service_ms"])
        slo = float(inputs["slo_ms"])
    except (KeyError, TypeError, ValueError):
        return
    kwargs = {"arrival_qps": arrival / batch, "service_ms": batched,
              "replicas": inputs.get("replicas", 1), "service_cv": inputs.get("service_cv", 1.0),
              "slo_ms": max(0.001, slo - formation)}
    yield "queueing_latency", Case(
        f"{case.function}:{case.case_id}{PROBE_MARK}queueing_latency", "queueing_latency",
        (), kwargs, track_id=case.track_id)


def _cache_callees(case: Case, expected: Any) -> Iterator[tuple[str, Case]]:
    """transformer_state_gb of the model at the case's context and KV bytes."""
    inputs = given(case)
    profile, model = inputs.get("profile"), inputs.get("model")
    kv = inputs.get("kv_precision_bytes")
    if kv is None:
        kv = getattr(profile, "kv_precision_bytes", None)
    if model is None or kv is None or "context_tokens" not in inputs:
        return
    yield "transformer_state_gb", Case(
        f"{case.function}:{case.case_id}{PROBE_MARK}transformer_state_gb",
        "transformer_state_gb", (model, inputs["context_tokens"], kv), track_id=case.track_id)


#: The profile's fields that the lab converts with quantity_to_float: the quantity's path
#: in the inputs, its unit and its default.
PROFILE_CONVERSIONS: dict[str, tuple[tuple[str, ...], str, float]] = {
    "model_params_b": (("model", "parameters"), "param", 0.0),
    "memory_capacity_gb": (("hardware", "memory", "capacity"), "GB", 0.0),
    "memory_bandwidth_gbs": (("hardware", "memory", "bandwidth"), "GB/s", 0.0),
    "tdp_w": (("hardware", "tdp"), "W", 0.0),
    "battery_wh": (("hardware", "battery_capacity"), "Wh", 0.0),
}


#: The label of a link's fallback probe, after the link's field.
FALLBACK = " fallback"
#: The links whose bandwidth the profile reads from ``variant.defaults`` or the hardware.
PROFILE_LINKS = {"storage_bandwidth_gbs": "storage", "interconnect_bandwidth_gbs": "interconnect"}


def _profile_callees(case: Case, expected: Any) -> Iterator[tuple[str, Case]]:
    """quantity_to_float of each quantity the profile converts, as the lab converts it:
    each fact, then each link's bandwidth (from the defaults, else the hardware, None where
    it has none) with the lab's fallback, the memory bandwidth (1.0 where that is missing)."""
    inputs = given(case)

    def probe(name: str, value: Any, unit: str, default: float) -> tuple[str, Case]:
        return name, Case(f"{case.function}:{case.case_id}{PROBE_MARK}{name}",
                          "quantity_to_float", (value, unit, default), track_id=case.track_id)

    for name, (path, unit, default) in PROFILE_CONVERSIONS.items():
        value = _attribute(inputs.get(path[0]), *path[1:])
        if value is not None:
            yield probe(name, value, unit, default)
    memory = _attribute(inputs.get("hardware"), "memory", "bandwidth")
    defaults = getattr(inputs.get("variant"), "defaults", None) or {}
    memory_gbs = expected.get("memory_bandwidth_gbs") if isinstance(expected, Mapping) else None
    if memory is None or not isinstance(memory_gbs, int | float):
        memory_gbs = 1.0  # the links' fallback where the memory bandwidth is missing
    for name, link in PROFILE_LINKS.items():
        value = defaults[name] if name in defaults else \
            _attribute(inputs.get("hardware"), link, "bandwidth")
        yield probe(name, value, "GB/s", float(memory_gbs))
        if value is None and memory is not None:  # the fallback, as the lab converts it
            yield probe(f"{name}{FALLBACK}", memory, "GB/s", 1.0)


#: Each function the lab makes call another, with the callee probes of one of its cases:
#: ``(label, case)`` pairs (the label names what the callee's answer stands for).
CALLEE_PROBES: dict[str, Callable[[Case, Any], Iterator[tuple[str, Case]]]] = {
    "queueing_latency": _queueing_callees,
    "batching_tax": _batching_callees,
    "cache_capacity": _cache_callees,
    "serving_track_profile": _profile_callees,
}


def callee_cases(case: Case, expected: Any) -> list[tuple[str, Case]]:
    """The callee probes of ``case`` (none for a function that calls no other)."""
    make = CALLEE_PROBES.get(case.function)
    return list(make(case, expected)) if make is not None else []


def probe_cases(case: Case, expected: Any) -> list[Case]:
    """Every probe a diagnosis may ask of ``case``: its moves, then its callee probes."""
    return [*(moved_case(case, move) for move in moves(case)),
            *(probe for _, probe in callee_cases(case, expected))]


def probe_of(case: Case, visible: Iterable[Case]) -> bool:
    """Whether ``case`` has the inputs of a move of one of ``visible`` (its function's
    visible cases): a move changes one or two numbers and nothing else, so only a case
    that differs from one of them so is checked against that one's moves. Unseen inputs
    are never such a case: the bundle's probes file holds the expected values there."""
    mine = given(case)
    for other in visible:
        if other.function != case.function or other.track_id != case.track_id:
            continue
        theirs = given(other)
        differ = sorted(_numbers_moved(mine, theirs))
        defaults = dict(PARAMETERS.get(other.function, ()))
        if len(differ) == 1:  # one number moved (or left to its default)
            name = differ[0]
            if name in theirs and _number(theirs[name]) and any(
                    _same(mine.get(name, NOT_GIVEN), new) for new, _ in
                    _candidates(name, theirs[name], defaults.get(name, REQUIRED))):
                return True
        elif len(differ) == 2:  # two numbers swapped
            first, second = differ
            if all(name in mine and name in theirs for name in differ) and \
                    _same(mine[first], theirs[second]) and _same(mine[second], theirs[first]):
                return True
    return False


def _numbers_moved(mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> set[str]:
    """The one or two parameters in which two inputs differ, when they are numbers (or
    not given) and all else is the same; else none."""
    differ: set[str] = set()
    for name in mine.keys() | theirs.keys():
        first, second = mine.get(name, NOT_GIVEN), theirs.get(name, NOT_GIVEN)
        if first is second:
            continue
        if not all(value is NOT_GIVEN or _number(value) for value in (first, second)):
            return set()  # an object (a profile) differs: no move changes one
        if not _same(first, second):
            differ.add(name)
            if len(differ) > 2:
                return set()
    return differ


def _same(first: Any, second: Any) -> bool:
    """Whether two numbers (or NOT_GIVEN) are the same input: of one type, and equal."""
    return first is second or (type(first) is type(second) and bool(first == second))
