"""Finders: what a wrong field's values prove about the student's code, and nothing more.

Each finder is a small pure function in :data:`FINDERS`, the one table of them. It reads a
wrong root field's :class:`FieldEvidence`: the cases where the field is wrong (and not a
knock-on of another wrong field), the cases where it is right, and a :class:`Lab` that
runs experiments (the lab's answers at moved inputs, the student's own answers there). It
yields :class:`Candidate` claims, each true on every failing case:

- a **rule** that gives the student's value from the lab's: a catalogued mistake; a
  constant ratio that is a named unit factor, or a ratio equal to an input; an offset equal
  to an input or to another field of the lab's answer; the lab's value with one input
  moved (by one, to its default, to 0 or 1); an equality with another field of the
  student's answer or of the lab's, with an input, or with the field's lab default; one
  constant. ``whole`` says whether the rule also gives every passing case; one that does
  not is said only of the cases where the field is wrong (with a region, when there is
  one);
- a **region**: the one predicate of a fixed library (an input is 0, is not given, n is not
  a multiple of B, the queue is unstable, the hardware has no storage, ...) that holds on
  exactly the failing cases;
- an **experiment** on the student's function: an input moved that moves the lab's value
  leaves the student's where it was.

Before a rule or a region is said, it is tried on the student's own function at moved
inputs (:meth:`FieldEvidence.probes`): where it predicts their answer there and the answer
differs, it is dropped. A coincidence of the visible cases (a ``kv_bytes + 1`` that is a
hard-coded 2 where every failing case has ``kv_bytes = 1``) does not survive it. The
probes' expected values are the ones the student bundle's golden file carries, so the
same submission gets the same words everywhere. :func:`choose` picks the most specific
claim that survives, or an observation, or nothing.
"""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from graders.grading.cases import Case
from graders.grading.compare import Tolerance, compare
from graders.grading.contract import PARAMETERS, PROFILE_DEFAULTS
from graders.grading.mistakes import Mistake
from graders.grading.probes import Move, moved_case, moves

#: A value the lab or the student does not have (a failed call, an input outside the
#: domain, a missing field).
MISSING: Any = types.SimpleNamespace(missing=True)
#: Depth of the attributes of an object input (a profile, hardware, a model) read.
ATTRIBUTE_DEPTH = 3
#: Failing cases whose moved inputs the rules are tried on (spread over all of them), and
#: moves tried per case.
PROBED_CASES = 4
PROBES_PER_CASE = 32
#: The unit of a function's plain result, for naming a unit factor.
PLAIN_UNITS = {"transformer_state_gb": "_gb"}


class Lab(Protocol):
    """Where a diagnosis's experiments are run: the grading's oracle and worker."""

    @property
    def tolerance(self) -> Tolerance: ...

    def expected(self, case: Case) -> Any:
        """The lab's answer to ``case``, or :data:`MISSING` (outside the domain)."""

    def answers(self, cases: Sequence[Case]) -> list[Any]:
        """The student's plain answers to ``cases``, in order (:class:`Failed` for a call
        that gave none), asked in one pipeline."""


@dataclass(frozen=True)
class Failed:
    """A call that gave no answer: the exception's name, or how the call failed, and the
    exception's whole message (``NotImplementedError: serve: implement me``; "" where
    none was kept)."""

    error: str
    message: str = ""


#: A probe the lab did not ask (its time allowance was spent, or its worker is gone): no
#: evidence either way, so it is left out of the probes.
NOT_ASKED = Failed("<not asked>")


@dataclass(frozen=True)
class Observed:
    """One case as the diagnosis sees it: a visible case, or a probe (``origin``: the
    visible case it moves, by ``move``)."""

    case: Case
    #: Every parameter by name, the lab's defaults filled in (see ``case_inputs``).
    inputs: Mapping[str, Any]
    expected: Any
    #: The student's plain answer, or :class:`Failed` when the call gave none.
    got: Any
    origin: Observed | None = None
    move: Move | None = None


def pick(answer: Any, name: str) -> Any:
    """The field ``name`` of an answer (the answer itself for ``value``); :data:`MISSING`
    for a failed call or a missing field."""
    if answer is MISSING or isinstance(answer, Failed):
        return MISSING
    if name == "value":
        return answer
    if isinstance(answer, Mapping):
        return answer.get(name, MISSING)
    return MISSING


def _real(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _finite(value: Any) -> bool:
    return _real(value) and math.isfinite(value)


def _rounded(value: Any) -> str:
    """A value with float noise rounded off (9 significant digits)."""
    return f"{value:.9g}" if isinstance(value, float) else repr(value)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "real"
    return "other"


# --- what the inputs hold ------------------------------------------------------------------


def _attributes(value: Any) -> Iterator[tuple[str, Any]]:
    """The public attributes of an object input (a dataclass, a namespace, a mapping)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for item in dataclasses.fields(value):
            yield item.name, getattr(value, item.name)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str):
                yield f"[{key!r}]", item
    elif isinstance(value, types.SimpleNamespace) or (
            hasattr(value, "__dict__") and not hasattr(value, "m_as")):
        for key, item in vars(value).items():
            if not key.startswith("_") and not callable(item):
                yield key, item


def flat_inputs(inputs: Mapping[str, Any], depth: int = ATTRIBUTE_DEPTH) -> dict[str, Any]:
    """Every number, string and None of a case's inputs by path (``service_ms``,
    ``profile.slo_ms``, ``variant.defaults['batch_size']``; a quantity by its magnitude,
    ``hardware.memory.capacity (magnitude)``)."""
    flat: dict[str, Any] = {}

    def walk(path: str, value: Any, level: int) -> None:
        if value is None or isinstance(value, bool | int | float | str):
            flat[path] = value
        elif hasattr(value, "m_as") and hasattr(value, "magnitude"):
            if _real(value.magnitude):
                flat[f"{path} (magnitude)"] = value.magnitude
        elif level < depth and not isinstance(value, list | tuple):
            for name, item in _attributes(value):
                walk(f"{path}{name}" if name.startswith("[") else f"{path}.{name}", item,
                     level + 1)

    for name, value in inputs.items():
        if not name.startswith("arg"):
            walk(name, value, 0)
    return flat


def _numbers(flat: Mapping[str, Any]) -> dict[str, float]:
    return {name: float(value) for name, value in flat.items() if _finite(value)}


# --- the evidence of one field -------------------------------------------------------------


@dataclass
class FieldEvidence:
    """A wrong root field of one function: its failing and passing cases and the lab."""

    function: str
    name: str
    failing: Sequence[Observed]
    passing: Sequence[Observed]
    lab: Lab
    mistakes: Sequence[Mistake] = ()
    #: How a finding says the field is wrong ("your total_ms is wrong"; for a raised
    #: error, "your serve raises ZeroDivisionError").
    wrong_words: str = ""
    _moved: dict[tuple[str, str], Any] = field(default_factory=dict, repr=False)
    _flat: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    _moves: dict[str, list[Move]] = field(default_factory=dict, repr=False)
    _probes: list[Observed] | None = field(default=None, repr=False)

    @property
    def subject(self) -> str:
        """The field as the student names it: ``total_ms``, or the function for a plain
        result."""
        return self.function if self.name == "value" else self.name

    @property
    def is_wrong(self) -> str:
        return self.wrong_words or f"your {self.subject} is wrong"

    def want(self, observed: Observed) -> Any:
        return pick(observed.expected, self.name)

    def got(self, observed: Observed) -> Any:
        return pick(observed.got, self.name)

    def wrong(self, observed: Observed) -> bool:
        return not self.matches(self.want(observed), self.got(observed))

    @property
    def kind(self) -> str:
        """``bool``, ``int``, ``real`` or ``other``: the kind of the lab's values."""
        kinds = {_kind(self.want(o)) for o in self.failing}
        return kinds.pop() if len(kinds) == 1 else "other"

    @property
    def distinct(self) -> int:
        """Failing cases with distinct values (the same wrong answer on four tracks, or in
        three units, is one)."""
        return len({(_rounded(self.want(o)), _rounded(self.got(o))) for o in self.failing})

    def matches(self, predicted: Any, actual: Any) -> bool:
        """Whether ``actual`` is ``predicted`` within the grading's tolerance."""
        if predicted is MISSING or actual is MISSING:
            return False
        if _real(predicted) and _real(actual):
            predicted, actual = float(predicted), float(actual)
        try:
            return not compare(predicted, actual, self.lab.tolerance)
        except TypeError:
            return False

    def flat(self, observed: Observed) -> dict[str, Any]:
        key = observed.case.key
        if key not in self._flat:
            self._flat[key] = flat_inputs(observed.inputs)
        return self._flat[key]

    def moves(self, observed: Observed) -> list[Move]:
        key = observed.case.key
        if key not in self._moves:
            self._moves[key] = moves(observed.case)
        return self._moves[key]

    def move(self, observed: Observed, label: str) -> Move | None:
        return next((move for move in self.moves(observed) if move.label == label), None)

    def moved(self, observed: Observed, move: Move) -> Any:
        """The lab's answer at ``observed``'s inputs with ``move`` made (asked once)."""
        key = (observed.case.key, move.label)
        if key not in self._moved:
            self._moved[key] = self.lab.expected(moved_case(observed.case, move))
        return self._moved[key]

    def probes(self) -> list[Observed]:
        """The first failing cases with their inputs moved (no swaps), each with the lab's
        answer and the student's, asked of the student's function in one pipeline."""
        if self._probes is None:
            from graders.grading.diagnosis import case_inputs

            chosen: list[tuple[Observed, Move, Case, Any]] = []
            for origin in spread(self.failing, PROBED_CASES):
                for move in interleaved(self.moves(origin))[:PROBES_PER_CASE]:
                    expected = self.moved(origin, move)
                    if expected is not MISSING:
                        chosen.append((origin, move, moved_case(origin.case, move), expected))
            answers = self.lab.answers([case for *_, case, _ in chosen]) if chosen else []
            self._probes = [
                Observed(case, case_inputs(case.function, case.args, case.kwargs), expected,
                         answer, origin, move)
                for (origin, move, case, expected), answer in zip(chosen, answers,
                                                                  strict=True)
                if answer != NOT_ASKED]
        return self._probes


def interleaved(moves: Sequence[Move]) -> list[Move]:
    """``moves`` taken one parameter at a time in turn, so that the first few move every
    parameter (the probes of a case with many parameters are cut)."""
    by_parameter: dict[str, list[Move]] = {}
    for move in moves:
        by_parameter.setdefault(move.parameter, []).append(move)
    queues = list(by_parameter.values())
    return [queue[index] for index in range(max(map(len, queues), default=0))
            for queue in queues if index < len(queue)]


def spread(items: Sequence[Observed], count: int) -> list[Observed]:
    """``count`` of ``items`` spread evenly from the first to the last (all when fewer)."""
    if len(items) <= count:
        return list(items)
    step = (len(items) - 1) / (count - 1)
    return [items[round(index * step)] for index in range(count)]


#: A rule's or region's test on one probe: True when the student's answer there is what it
#: says, False when it is not, None when it says nothing of that probe.
Check = Callable[[FieldEvidence, Observed], "bool | None"]


@dataclass(frozen=True)
class Candidate:
    """A claim about one field that holds on every failing case.

    ``kind`` is ``rule``, ``region`` or ``experiment``; ``rank`` orders claims (the most
    specific first); ``key`` is the same claim's in any submission (the class page's
    clusters key on it); ``whole`` (rules) says whether the rule gives every passing case
    too. ``text`` is the claim as the student reads it; ``local`` the same rule said of a
    region's cases. ``check`` tries it on a probe; ``needs`` is how many failing cases
    with distinct values, or probes it predicted right, it needs to be said.
    """

    kind: str
    finder: str
    rank: int
    key: str
    text: str
    whole: bool = True
    local: str = ""
    label: str = ""
    check: Check | None = field(default=None, compare=False, repr=False)
    needs: int = 1
    #: For a region: the predicate itself.
    predicate: Callable[[Observed], bool] | None = field(default=None, compare=False,
                                                         repr=False)


@dataclass(frozen=True)
class Finding:
    """What the diagnosis says of one wrong root field: ``text`` (the student's hint),
    ``key`` and ``label`` (the class page's cluster), ``named`` (a cause is named, not only
    an observation made) and the finders it came from."""

    text: str
    key: str
    label: str
    named: bool
    finders: tuple[str, ...] = ()


# --- rules ---------------------------------------------------------------------------------


def _fields_of(observed: Observed) -> Mapping[str, Any] | None:
    return observed.expected if isinstance(observed.expected, Mapping) else None


def catalogue_finder(ev: FieldEvidence) -> Iterator[Candidate]:
    """A catalogued mistake whose answer is the student's on every failing case (and, to
    be said of every case, the lab's on every passing one). Its expression is tried on
    the experiments too, as any rule's."""
    for mistake in ev.mistakes:
        if mistake.function != ev.function or mistake.error or \
                (mistake.field or "value") != ev.name or not mistake.hint:
            continue
        if not all(_agrees(ev, mistake, o, ev.got(o)) for o in ev.failing):
            continue
        whole = all(_agrees(ev, mistake, o, ev.want(o)) for o in ev.passing)
        yield Candidate("rule", "catalogue", 100, f"catalogue:{mistake.id}", mistake.hint,
                        label=mistake.label, whole=whole, local=mistake.hint,
                        check=_mistake_check(mistake))


def _agrees(ev: FieldEvidence, mistake: Mistake, o: Observed, answer: Any) -> bool:
    return answer is not MISSING and mistake.agrees(ev.want(o), answer, _numbers(ev.flat(o)),
                                                    _fields_of(o))


def _mistake_check(mistake: Mistake) -> Check:
    """A catalogued mistake's test on a probe: the student's answer is the mistake's."""
    def check(ev: FieldEvidence, probe: Observed) -> bool | None:
        if mistake.predicts(ev.want(probe), _numbers(ev.flat(probe)),
                            _fields_of(probe)) is None:
            return None
        return _agrees(ev, mistake, probe, ev.got(probe))
    return check


def _fits(ev: FieldEvidence, predicted: Any, observed: Observed) -> bool:
    """Whether a rule's answer for a passing case is the lab's there (MISSING: none)."""
    return predicted is MISSING or ev.matches(ev.want(observed), predicted)


def _rule_check(predicted: Callable[[Observed], Any]) -> Check:
    """A rule's check on a probe: its answer there against the student's."""
    def check(ev: FieldEvidence, probe: Observed) -> bool | None:
        try:
            value = predicted(probe)
        except (KeyError, TypeError, ValueError, ArithmeticError, AttributeError):
            return None
        if value is MISSING or (isinstance(value, float) and math.isnan(value)):
            return None
        return ev.matches(value, ev.got(probe))
    return check


#: The named unit factors: a constant ratio equal to one (or its inverse) is named.
NAMED_FACTORS: tuple[tuple[float, str], ...] = (
    (1000.0, "1000"), (1e6, "10^6"), (1e9, "10^9"), (1024.0, "1024"), (1024.0**2, "1024²"),
    (2**30 / 1e9, "1.0737 (2^30/10^9)"), (1.024, "1.024"), (8.0, "8"), (2.0, "2"),
    (100.0, "100"), (60.0, "60"), (3600.0, "3600"), (10.0, "10"),
)
#: What a unit factor means for a field of that unit (its suffix), when the student's
#: values are that many times too small or too large.
UNIT_READINGS: dict[tuple[str, float, str], str] = {
    ("_ms", 1000.0, "small"): "as if in seconds, where milliseconds are asked",
    ("_ms", 1000.0, "large"): "as if in microseconds, or multiplied by 1000 once too often",
    ("_rps", 1000.0, "small"): "as if per millisecond, where requests per second are asked",
    ("_gb", 2**30 / 1e9, "small"): "as if in binary GiB, where decimal GB are asked",
    ("_gb", 1000.0, "large"): "as if in MB, where GB are asked",
    ("_gb", 1.024, "large"): "as if MB were turned into GB by dividing by 1000, where the "
                             "lab divides by 1024",
    ("_gbs", 8.0, "large"): "as if in gigabits per second, where gigabytes per second are "
                            "asked",
    ("_gbs", 1000.0, "large"): "as if in MB/s, where GB/s are asked",
    ("_gbs", 1000.0, "small"): "as if in TB/s, where GB/s are asked",
    ("_gbs", 2**30 / 1e9, "small"): "as if in binary GiB/s, where decimal GB/s are asked",
    ("_pct", 100.0, "small"): "a fraction, where a percentage is asked",
    ("_b", 1e9, "large"): "a count of parameters, where billions are asked",
    ("_w", 1000.0, "large"): "as if in milliwatts, where watts are asked",
    ("_wh", 1000.0, "large"): "as if in mWh, where Wh are asked",
    ("_wh", 3600.0, "large"): "as if in joules (watt-seconds), where Wh are asked",
}


def _close(value: float, target: float, rel: float) -> bool:
    return abs(value - target) <= rel * max(abs(value), abs(target))


def _rel(ev: FieldEvidence) -> float:
    return max(ev.lab.tolerance.rel, 1e-9) * 4


def _reading(ev: FieldEvidence, factor: float, size: str) -> str:
    unit = PLAIN_UNITS.get(ev.function, "") if ev.name == "value" else ev.name
    return next((text for (suffix, f, s), text in UNIT_READINGS.items()
                 if unit.endswith(suffix) and f == factor and s == size), "")


def ratio_finder(ev: FieldEvidence) -> Iterator[Candidate]:
    """The student's values are the lab's times one constant (a named unit factor; else
    said as it is), or times (or over) an input that varies."""
    if ev.kind not in ("real", "int") or not ev.failing:
        return
    pairs = [(ev.want(o), ev.got(o)) for o in ev.failing]
    if not all(_finite(want) and want != 0 and _finite(got) and got != 0
               for want, got in pairs):
        return
    rel = _rel(ev)
    ratios = [got / want for want, got in pairs]
    whole = all(ev.want(o) == 0 or not _finite(ev.want(o)) for o in ev.passing)
    if all(_close(ratio, ratios[0], rel) for ratio in ratios):
        yield from _constant_ratio(ev, ratios[0], rel, whole)
        return
    flats = [_numbers(ev.flat(o)) for o in ev.failing]
    for name in sorted(set.intersection(*(set(flat) for flat in flats))):
        values = [flat[name] for flat in flats]
        if len(set(values)) < 2 or 0 in values:
            continue
        for power, words in ((1, "times"), (-1, "divided by")):
            if all(_close(ratio, value ** power, rel) for ratio, value in
                   zip(ratios, values, strict=True)):
                fits = all(ev.want(o) == 0 or _numbers(ev.flat(o)).get(name) == 1
                           for o in ev.passing)
                yield Candidate(
                    "rule", "ratio-input", 82, f"ratio:{words}:{name}",
                    f"your {ev.subject} is the lab's value {words} {name}"
                    + ("" if fits else " on every case where it is wrong"), whole=fits,
                    local=f"yours is the lab's value {words} {name}", needs=2,
                    check=_rule_check(partial(_scaled, ev, name=name, power=power,
                                              span=(min(values), max(values)),
                                              whole=all(float(v).is_integer() for v in values))))


def _scaled(ev: FieldEvidence, observed: Observed, *, name: str, power: int,
            span: tuple[float, float], whole: bool) -> Any:
    """The lab's value times an input to ``power``; none where the input is outside the
    ``span`` the failing cases showed the rule on, or not whole where they were (where the
    lab clamps or truncates an input, as max(1, int(B)), the rule's input is not the
    lab's)."""
    value = _numbers(ev.flat(observed)).get(name)
    if value is None or not span[0] <= value <= span[1] or \
            (whole and not float(value).is_integer()):
        return MISSING
    return ev.want(observed) * value ** power


def _constant_ratio(ev: FieldEvidence, ratio: float, rel: float, whole: bool
                    ) -> Iterator[Candidate]:
    check = _rule_check(lambda o: ratio * ev.want(o))
    for factor, name in NAMED_FACTORS:
        for value, size in ((factor, "large"), (1 / factor, "small")):
            if not _close(ratio, value, rel):
                continue
            reading = _reading(ev, factor, size)
            amount = f"{name}× too {size}"
            said = f"your {ev.subject} values are {amount}" + (
                "" if whole else " on every case where they are wrong") + (
                f": {reading}" if reading else "")
            yield Candidate("rule", "named-ratio", 80, f"ratio:{size}:{name}", said,
                            whole=whole, local=f"yours is {amount}", check=check)
            return
    yield Candidate("rule", "ratio", 20, "ratio:constant",
                    f"your {ev.subject} is {ratio:.6g}× the lab's value on every case where "
                    "it is wrong", whole=whole, local=f"yours is {ratio:.6g}× the lab's value",
                    needs=2, check=check)


def _sources(ev: FieldEvidence) -> list[tuple[str, str, Callable[[Observed], Any]]]:
    """The values a rule may relate a field to: each numeric input (and attribute of an
    object input) the failing cases share, then each other field of the lab's answer."""
    names: set[str] | None = None
    for o in ev.failing:
        found = set(_numbers(ev.flat(o)))
        names = found if names is None else names & found
    sources: list[tuple[str, str, Callable[[Observed], Any]]] = [
        (name, f"the input {name}", _input_of(ev, name))
        for name in sorted(names or ())]
    if ev.failing and all(isinstance(o.expected, Mapping) for o in ev.failing):
        sources += [(other, f"the lab's {other}", _lab_field(other))
                    for other in ev.failing[0].expected if other != ev.name]
    return sources


def offset_finder(ev: FieldEvidence) -> Iterator[Candidate]:
    """The student's values are the lab's plus or minus an input or another field of the
    lab's answer; or the lab's plus one constant where they are wrong."""
    if ev.kind not in ("real", "int") or not ev.failing:
        return
    pairs = [(ev.want(o), ev.got(o)) for o in ev.failing]
    if not all(_finite(want) and _finite(got) for want, got in pairs):
        return
    offsets = [got - want for want, got in pairs]
    for name, said, value_of in _sources(ev):
        values = [value_of(o) for o in ev.failing]
        if not all(_finite(value) and value != 0 for value in values):
            continue
        for sign, words, reading in ((-1, "minus", "is left out"),
                                     (1, "plus", "is counted once too often")):
            if all(ev.matches(want + sign * value, got)
                   for (want, got), value in zip(pairs, values, strict=True)):
                fits = all(value_of(o) == 0 or not _finite(value_of(o)) for o in ev.passing)
                yield Candidate(
                    "rule", "offset", 85, f"offset:{words}:{name}",
                    f"your {ev.subject} is the lab's value {words} {said}"
                    + ("" if fits else " on every case where it is wrong")
                    + f": {name} {reading}", whole=fits,
                    local=f"yours is the lab's value {words} {said}: {name} {reading}",
                    needs=2, check=_rule_check(_shifted(ev, value_of, sign)))
    if len(offsets) >= 2 and all(ev.matches(want + offsets[0], got)
                                            for want, got in pairs):
        constant = offsets[0]
        if ev.kind == "int" and constant in (1, -1):
            said = "one more" if constant > 0 else "one less"
            yield Candidate("rule", "offset-one", 46, f"offset:constant:{constant:.6g}",
                            f"your {ev.subject} is {said} than the lab's on every case where "
                            "it is wrong: a whole number rounded the other way, or an "
                            "off-by-one", whole=False, local=f"yours is {said} than the lab's",
                            needs=2, check=_rule_check(lambda o: ev.want(o) + constant))
            return
        shown = f"+ {constant:.6g}" if constant > 0 else f"- {-constant:.6g}"
        yield Candidate("rule", "offset-constant", 30, f"offset:constant:{constant:.6g}",
                        f"your {ev.subject} is the lab's value {shown} on every case where it "
                        "is wrong", whole=False, local=f"yours is the lab's value {shown}",
                        needs=2, check=_rule_check(lambda o: ev.want(o) + constant))


def affine_finder(ev: FieldEvidence) -> Iterator[Candidate]:
    """The part of the student's values above an input (``service_ms``) is the lab's part
    times a named unit factor: "the part above service_ms is 1000× too small"."""
    if ev.kind != "real" or not ev.failing:
        return
    rel = _rel(ev)
    for name, said, value_of in _sources(ev):
        if not name.endswith("service_ms"):
            continue
        parts = [(ev.want(o) - value_of(o), ev.got(o) - value_of(o), abs(value_of(o)))
                 for o in ev.failing
                 if _finite(ev.want(o)) and _finite(ev.got(o)) and _finite(value_of(o))]
        if len(parts) != len(ev.failing) or any(want == 0 for want, *_ in parts):
            continue
        ratio = max(parts, key=lambda part: abs(part[0]) / max(part[2], 1e-300))
        ratio = ratio[1] / ratio[0]  # from the part least cut by the subtraction
        # a part far below the input it sits on keeps fewer digits: allowed for
        if not all(abs(got - ratio * want) <= rel * abs(ratio * want) + 1e-12 * whole
                   for want, got, whole in parts):
            continue
        for factor, factor_name in NAMED_FACTORS:
            for value, size in ((factor, "large"), (1 / factor, "small")):
                if _close(ratio, value, rel):
                    yield Candidate(
                        "rule", "affine", 78, f"part:{name}:{size}:{factor_name}",
                        f"the part of your {ev.subject} above {said} is {factor_name}× too "
                        f"{size}" + (f": {_reading(ev, factor, size)}"
                                     if _reading(ev, factor, size) else ""),
                        whole=all(ev.want(o) == value_of(o) or not _finite(ev.want(o))
                                  for o in ev.passing),
                        local=f"the part of yours above {said} is {factor_name}× too {size}",
                        check=_rule_check(_part_scaled(ev, value_of, ratio)))


def equality_finder(ev: FieldEvidence) -> Iterator[Candidate]:
    """The student's value equals another field of their own answer or of the lab's, or an
    input, that varies across the failing cases; or one constant where it is wrong."""
    if not ev.failing:
        return
    if ev.kind != "bool":
        yield from _equal_to_fields(ev)
        yield from _equal_to_input(ev)
    yield from _reversed(ev)
    yield from _own_formula(ev)
    answers = [ev.got(o) for o in ev.failing]
    first = answers[0]
    if len(answers) >= 2 and first is not MISSING and not isinstance(first, bool) \
            and all(ev.matches(first, answer) for answer in answers[1:]):
        yield from _profile_default(ev, first)
        source = _source_of(ev)
        shown = _shown(first)
        yield Candidate("rule", "equals-constant", 45, f"equals:constant:{shown}",
                        f"your {ev.subject} is {shown} on every case where it is wrong{source}",
                        whole=False, local=f"yours is {shown}{source}",
                        check=_rule_check(lambda o: first))


def _equal_to_fields(ev: FieldEvidence) -> Iterator[Candidate]:
    mapping = all(isinstance(o.got, Mapping) and isinstance(o.expected, Mapping)
                  for o in ev.failing)
    if not mapping:
        return
    for other in ev.failing[0].expected:
        if other == ev.name:
            continue
        for whose, of in (("your", _own_field(other)), ("the lab's", _lab_field(other))):
            if not all(ev.matches(of(o), ev.got(o)) for o in ev.failing):
                continue
            if any(ev.matches(pick(o.expected, other), ev.want(o)) for o in ev.failing):
                continue  # where the lab's values are equal too, it says nothing
            if len({repr(of(o)) for o in ev.failing}) < 2:
                continue  # equal constants say nothing of where the value comes from
            fits = all(ev.matches(of(o), ev.got(o)) for o in ev.passing)
            rank, key = (76, f"equals:own:{other}") if whose == "your" else \
                (75, f"equals:lab:{other}")
            said = f"{whose} {other}"
            swapped = whose == "the lab's" and all(
                ev.matches(pick(o.got, other), ev.want(o)) for o in ev.failing)
            tail = f", and yours of {other} the lab's {ev.subject}: as if the two were " \
                "swapped" if swapped else ""
            yield Candidate("rule", "equals-field", rank, key,
                            f"your {ev.subject} equals {said} on every case"
                            + ("" if fits else " where it is wrong") + tail,
                            whole=fits, local=f"yours equals {said}", needs=1,
                            check=_rule_check(of))


def _equal_to_input(ev: FieldEvidence) -> Iterator[Candidate]:
    names: set[str] | None = None
    for o in ev.failing:
        found = {name for name, value in ev.flat(o).items() if value is not None}
        names = found if names is None else names & found
    for name in sorted(names or ()):
        values = [ev.flat(o)[name] for o in ev.failing]
        if not all(ev.matches(value, ev.got(o))
                   for value, o in zip(values, ev.failing, strict=True)):
            continue
        varies = len({repr(value) for value in values}) >= 2
        fits = all(ev.matches(ev.flat(o).get(name, MISSING), ev.got(o)) for o in ev.passing)
        yield Candidate("rule", "equals-input", 74, f"equals:input:{name}",
                        f"your {ev.subject} is the input {name} itself on every case"
                        + ("" if fits else " where it is wrong"), whole=fits,
                        local=f"yours is the input {name} itself", needs=1 if varies else 3,
                        check=_rule_check(_input_of(ev, name)))
        return


def _own_formula(ev: FieldEvidence) -> Iterator[Candidate]:
    """The student's value is one of their other fields over an input (a ratio field), or
    one of their other fields compared with an input (a bool field), on every case: the
    formula they wrote, with its operands named."""
    every = [*ev.failing, *ev.passing]
    if not all(isinstance(o.got, Mapping) for o in every):
        return
    inputs = sorted(set.intersection(*(set(_numbers(ev.flat(o))) for o in every)))
    others = [name for name, value in ev.failing[0].got.items()
              if name != ev.name and _real(value) and not isinstance(value, bool)]
    for other in others:
        unit = _unit_of(other)
        # an input in the same unit, or (a bool) a count against 0 and 1
        bounds: list[str | int] = [name for name in inputs if unit and _unit_of(name) == unit]
        if ev.kind == "bool" and all(isinstance(pick(o.got, other), int) for o in every):
            bounds += [0, 1]
        for name in bounds:
            if ev.kind == "bool":
                forms: list[tuple[str, Callable[[Observed], Any]]] = [
                    (f"your {other} <= {name}", _compared(ev, other, name, strict=False)),
                    (f"your {other} < {name}", _compared(ev, other, name, strict=True))]
            elif ev.kind == "real":
                forms = [(f"your {other} / {name}", _quotient(ev, other, name))]
            else:
                return
            yield from _formula_candidates(ev, every, forms)
        if ev.kind == "real":  # one of their fields over another (in ms: times 1000)
            yield from _formula_candidates(ev, every, [
                (f"your {other} / your {below}" + (" · 1000" if scale != 1 else ""),
                 _fields_quotient(other, below, scale))
                for below in others if below != other for scale in (1, 1000)])


def _formula_candidates(ev: FieldEvidence, every: Sequence[Observed],
                        forms: Sequence[tuple[str, Callable[[Observed], Any]]]
                        ) -> Iterator[Candidate]:
    """The forms that give the student's value on every case, and vary."""
    for words, formula in forms:
        if all(ev.matches(formula(o), ev.got(o)) for o in every) and \
                len({repr(formula(o)) for o in every}) >= 2:
            yield Candidate("rule", "own-formula", 79, f"formula:{words}",
                            f"your {ev.subject} is {words} on every case",
                            whole=True, needs=1, check=_rule_check(formula))


def _fields_quotient(other: str, below: str, scale: int) -> Callable[[Observed], Any]:
    def value(o: Observed) -> Any:
        top, bottom = pick(o.got, other), pick(o.got, below)
        return top / bottom * scale if _real(top) and _real(bottom) and bottom else MISSING
    return value


def _unit_of(name: str) -> str:
    """A field's or input's unit, by its name's suffix (``_ms``, ``_gb``; "" for none)."""
    stem = name.removesuffix(" (magnitude)").rsplit(".", 1)[-1]
    return "_" + stem.rsplit("_", 1)[-1] if "_" in stem else ""


def _quotient(ev: FieldEvidence, other: str, name: str | int) -> Callable[[Observed], Any]:
    def value(o: Observed) -> Any:
        divisor = _numbers(ev.flat(o)).get(name) if isinstance(name, str) else name
        mine = pick(o.got, other)
        return mine / divisor if _real(mine) and divisor else MISSING
    return value


def _compared(ev: FieldEvidence, other: str, name: str | int, *, strict: bool
              ) -> Callable[[Observed], Any]:
    def value(o: Observed) -> Any:
        bound = _numbers(ev.flat(o)).get(name) if isinstance(name, str) else name
        mine = pick(o.got, other)
        if not _real(mine) or bound is None:
            return MISSING
        return mine < bound if strict else mine <= bound
    return value


def _reversed(ev: FieldEvidence) -> Iterator[Candidate]:
    """A sequence answered in the reverse order of the lab's, on every failing case."""
    def flipped(o: Observed) -> Any:
        want = ev.want(o)
        return list(reversed(want)) if isinstance(want, list | tuple) else MISSING

    if all(flipped(o) is not MISSING and len(flipped(o)) >= 2 and
           ev.matches(flipped(o), ev.got(o)) for o in ev.failing):
        fits = all(ev.matches(flipped(o), ev.got(o)) for o in ev.passing)
        yield Candidate("rule", "reversed", 77, "equals:reversed",
                        f"your {ev.subject} holds the lab's items in reverse order on every "
                        + ("case" if fits else "case where it is wrong"), whole=fits,
                        local="yours holds the lab's items in reverse order",
                        check=_rule_check(flipped))


def _own_field(name: str) -> Callable[[Observed], Any]:
    return lambda o: pick(o.got, name)


def _lab_field(name: str) -> Callable[[Observed], Any]:
    return lambda o: pick(o.expected, name)


def _input_of(ev: FieldEvidence, name: str) -> Callable[[Observed], Any]:
    return lambda o: ev.flat(o).get(name, MISSING)


def _shifted(ev: FieldEvidence, value_of: Callable[[Observed], Any], sign: int
             ) -> Callable[[Observed], Any]:
    return lambda o: ev.want(o) + sign * value_of(o)


def _part_scaled(ev: FieldEvidence, value_of: Callable[[Observed], Any], ratio: float
                 ) -> Callable[[Observed], Any]:
    return lambda o: value_of(o) + ratio * (ev.want(o) - value_of(o))


def _profile_default(ev: FieldEvidence, value: Any) -> Iterator[Candidate]:
    """A profile field that is always its lab default, as if its key were not read."""
    if ev.function != "serving_track_profile" or ev.name not in PROFILE_DEFAULTS:
        return
    key, default = PROFILE_DEFAULTS[ev.name]
    if default is None or not ev.matches(default, value):
        return
    fits = all(ev.matches(default, ev.got(o)) for o in ev.passing)
    yield Candidate("rule", "profile-default", 86, f"default:{ev.name}",
                    f"your {ev.name} is {_shown(value)}, the lab's default for it, on every "
                    + ("case" if fits else "case where it is wrong")
                    + f": as if variant.defaults had no {key!r} key",
                    whole=fits, local=f"yours is its default {_shown(value)}")


def _source_of(ev: FieldEvidence) -> str:
    """Where the lab's value comes from on every failing case, when one input (or
    attribute of one) or one other field of its answer holds it."""
    for _, said, value_of in _sources(ev):
        if all(ev.matches(value_of(o), ev.want(o)) for o in ev.failing) and \
                len({repr(value_of(o)) for o in ev.failing}) >= min(2, ev.distinct):
            return f"; the lab's value there is {said}"
    return ""


def _shown(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return repr(value)


def moved_finder(ev: FieldEvidence) -> Iterator[Candidate]:
    """The student's value is the lab's at the same inputs with one of them moved (by one,
    to its default, to 0 or 1, or two swapped), on every failing case. Not for a bool: the
    lab's bool at moved inputs matches a wrong one by chance too often."""
    if not ev.failing or ev.kind == "bool":
        return
    labels: dict[str, Move] | None = None
    for o in ev.failing:
        found = {move.label: move for move in ev.moves(o)}
        labels = found if labels is None else {k: v for k, v in labels.items() if k in found}
    for label, move in (labels or {}).items():
        moved_of = _moved_value(ev, label)
        if not all(ev.matches(moved_of(o), ev.got(o)) for o in ev.failing):
            continue
        if not move.other and not move.label.endswith(("+ 1", "- 1")) and ev.distinct < 2:
            continue  # one value of the student's: the lab's at some input, by chance
        fits = all(_fits(ev, moved_of(o), o) for o in ev.passing
                   if ev.move(o, label) is not None)
        yield _moved_candidate(ev, move, fits)


def _moved_value(ev: FieldEvidence, label: str) -> Callable[[Observed], Any]:
    """The lab's value of the field with the input moved by ``label`` (MISSING where that
    move does not apply)."""
    def value(o: Observed) -> Any:
        move = ev.move(o, label)
        return MISSING if move is None else pick(ev.moved(o, move), ev.name)
    return value


def _moved_candidate(ev: FieldEvidence, move: Move, whole: bool) -> Candidate:
    name = move.parameter
    said = f"the lab's value with {move.label}"
    if move.other:
        why, rank, needs = "", 70, 2
        check = _swap_check(move)
    elif move.label.endswith(("+ 1", "- 1")):
        why, rank, needs = f": an off-by-one in {name}", 90, 2
        check = _step_check(move)
    else:
        why, rank, needs, check = "", 89, 2, _fixed_check(move)
    where = "on every case" if whole else "on every case where it is wrong"
    return Candidate("rule", "moved", rank, f"moved:{move.label}",
                     f"your {ev.subject} is, {where}, {said}{why}", whole=whole,
                     local=f"yours is {said}{why}", needs=needs, check=check)


def _step_check(move: Move) -> Check:
    """``p + 1``'s test: at a failing case with ``p`` one less, the student gives the
    lab's answer of the case itself (and the other way round for ``p - 1``)."""
    step = -1 if move.label.endswith("+ 1") else 1

    def check(ev: FieldEvidence, probe: Observed) -> bool | None:
        origin = probe.origin
        if probe.move is None or origin is None or probe.move.other or \
                probe.move.parameter != move.parameter:
            return None
        value = origin.inputs.get(move.parameter)
        if value is None or not _real(value) or probe.move.value != value + step:
            return None
        if ev.matches(ev.want(origin), ev.want(probe)):
            return None  # the lab's value does not move with the step (a clamped input)
        return ev.matches(ev.want(origin), ev.got(probe))
    return check


def _swap_check(move: Move) -> Check:
    """A swap's test: with the two inputs swapped back (a failing case's swap probe), the
    student gives the lab's answer of the case itself."""
    def check(ev: FieldEvidence, probe: Observed) -> bool | None:
        if probe.move is None or probe.origin is None or probe.move.label != move.label:
            return None
        return ev.matches(ev.want(probe.origin), ev.got(probe))
    return check


def _fixed_check(move: Move) -> Check:
    """``p = c``'s test: with ``p`` moved anywhere else, the student's answer stays the
    lab's answer at ``p = c`` (their value does not depend on ``p``)."""
    def check(ev: FieldEvidence, probe: Observed) -> bool | None:
        if probe.move is None or probe.origin is None or probe.move.other or \
                probe.move.parameter != move.parameter or probe.move.label == move.label:
            return None
        fixed = ev.move(probe.origin, move.label)
        if fixed is None:
            return None
        return ev.matches(pick(ev.moved(probe.origin, fixed), ev.name), ev.got(probe))
    return check


def sensitivity_finder(ev: FieldEvidence) -> Iterator[Candidate]:
    """An experiment on the student's function: one input moved, again and again, around
    the failing cases. Where every move of it moves the lab's value and none moves the
    student's, their value does not change with it; where no move moves the lab's value
    and every one moves the student's, theirs changes with it where the lab's does not.
    Moves the student or the lab cannot answer with a number are left out; so is a field
    wrong on one case only (one place says nothing of a dependence)."""
    if len(ev.failing) < 2 or ev.kind not in ("real", "int"):
        return
    # by parameter: for each probe, whether the lab's value moved and whether the student's
    seen: dict[str, list[tuple[bool, bool]]] = {}
    origins: dict[str, list[str]] = {}
    for probe in ev.probes():
        if probe.origin is None or probe.move is None or probe.move.other:
            continue
        values = (ev.want(probe.origin), ev.want(probe), ev.got(probe.origin), ev.got(probe))
        if not all(_real(value) and not math.isnan(value) for value in values):
            continue
        lab_moved = not ev.matches(values[0], values[1])
        student_moved = not ev.matches(values[2], values[3])
        seen.setdefault(probe.move.parameter, []).append((lab_moved, student_moved))
        origins.setdefault(probe.move.parameter, []).append(probe.origin.case.key)
    enough = min(PROBED_CASES, len(ev.failing))
    for parameter, found in seen.items():
        keys = origins[parameter]
        # every case tried at two moves at least: one move can step out of the region
        if len(found) < 3 or len(set(keys)) < enough or \
                any(keys.count(key) < 2 for key in set(keys)):
            continue
        if all(lab and not student for lab, student in found):
            yield Candidate("experiment", "sensitivity", 60, f"ignores:{parameter}",
                            f"around the cases where it is wrong, your {ev.subject} does not "
                            f"change with {parameter}, where the lab's does (tried at "
                            f"{len(found)} moved inputs)")
        elif all(student and not lab for lab, student in found):
            yield Candidate("experiment", "sensitivity", 59, f"depends:{parameter}",
                            f"around the cases where it is wrong, your {ev.subject} changes "
                            f"with {parameter}, where the lab's does not (tried at "
                            f"{len(found)} moved inputs)")


# --- regions -------------------------------------------------------------------------------

#: Friendlier words for some predicates, by (function, predicate key).
REGION_WORDS: dict[tuple[str, str], str] = {
    ("serve", "n_requests % batch_size"): "the last pass is partly filled (n_requests is "
                                           "not a multiple of batch_size)",
}
#: Words for the lab's answer's bool fields, by (field, value).
ANSWER_WORDS: dict[tuple[str, Any], str] = {
    ("stable", False): "the queue is unstable (utilization >= 1)",
    ("stable", True): "the queue is stable",
    ("oom", True): "nothing fits (the lab's oom is True)",
}
Predicate = tuple[str, str, Callable[[Observed], bool]]


def predicates(observed: Sequence[Observed], function: str) -> Iterator[Predicate]:
    """The region library: ``(key, words, predicate)`` on a case's inputs and the lab's
    answer. Parameters in contract order first, then pairs of them, then the lab's answer,
    then attributes of object inputs."""
    names = [name for name, _ in PARAMETERS.get(function, ())]

    def given(o: Observed, name: str) -> bool:
        return name in o.case.kwargs or names.index(name) < len(o.case.args)

    def not_given(o: Observed, name: str) -> bool:
        return not given(o, name)

    for name in names:
        if any(_real(o.inputs.get(name)) for o in observed):
            for value in (0, 1):
                yield f"{name} == {value}", f"{name} is {value}", \
                    partial(_input_equals, name=name, value=value)
        yield f"{name} given", f"{name} is given", partial(given, name=name)
        yield f"{name} not given", f"{name} is not given", partial(not_given, name=name)
        yield f"{name} is str", f"{name} is a string", partial(_input_is_str, name=name)
    counts = [name for name in names if all(isinstance(o.inputs.get(name), int)
                                            and not isinstance(o.inputs.get(name), bool)
                                            for o in observed)]
    for first in counts:
        for second in counts:
            if first == second:
                continue
            yield f"{first} < {second}", f"{first} < {second}", \
                partial(_input_below, first=first, second=second)
            if all(o.inputs[second] > 0 for o in observed):
                key = f"{first} % {second}"
                yield key, REGION_WORDS.get((function, key),
                                            f"{first} is not a multiple of {second}"), \
                    partial(_not_multiple, first=first, second=second)
    yield from _answer_predicates(observed)
    paths: dict[str, None] = {}
    for o in observed:
        for path in flat_inputs(o.inputs):
            if "." in path or "[" in path:
                paths.setdefault(path)
    for path in paths:
        yield f"{path} is None", f"{path.removesuffix(' (magnitude)')} is missing", \
            partial(_path_equals, path=path, value=None)
        yield f"{path} == 0", f"{path.removesuffix(' (magnitude)')} is 0", \
            partial(_path_equals, path=path, value=0)


def _answer_predicates(observed: Sequence[Observed]) -> Iterator[Predicate]:
    first = observed[0].expected if observed else None
    if isinstance(first, Mapping):
        for name, value in first.items():
            if isinstance(value, bool):
                for flag in (False, True):
                    yield f"lab {name} is {flag}", ANSWER_WORDS.get(
                        (name, flag), f"the lab's {name} is {flag}"), \
                        partial(_lab_is, name=name, value=flag)
            elif _real(value):
                yield f"lab {name} is inf", f"the lab's {name} is infinite", \
                    partial(_lab_infinite, name=name)
                for number in (0, 1):
                    yield f"lab {name} is {number}", f"the lab's {name} is {number}", \
                        partial(_lab_equals, name=name, value=number)
    else:
        yield "lab value is None", "the lab's value is None", lambda o: o.expected is None
        yield "lab value is 0", "the lab's value is 0", lambda o: o.expected == 0


def _input_equals(o: Observed, *, name: str, value: int) -> bool:
    return _real(o.inputs.get(name)) and bool(o.inputs[name] == value)


def _input_is_str(o: Observed, *, name: str) -> bool:
    return isinstance(o.inputs.get(name), str)


def _input_below(o: Observed, *, first: str, second: str) -> bool:
    return bool(o.inputs[first] < o.inputs[second])


def _not_multiple(o: Observed, *, first: str, second: str) -> bool:
    return int(o.inputs[first]) % int(o.inputs[second]) != 0


def _path_equals(o: Observed, *, path: str, value: Any) -> bool:
    found = flat_inputs(o.inputs).get(path)
    return found is None if value is None else bool(found == value)


def _lab_is(o: Observed, *, name: str, value: bool) -> bool:
    return pick(o.expected, name) is value


def _lab_infinite(o: Observed, *, name: str) -> bool:
    value = pick(o.expected, name)
    return _real(value) and math.isinf(value)


def _lab_equals(o: Observed, *, name: str, value: int) -> bool:
    return bool(pick(o.expected, name) == value)


def _holds(predicate: Callable[[Observed], bool], observed: Observed) -> bool | None:
    try:
        return bool(predicate(observed))
    except (TypeError, ValueError, KeyError, ZeroDivisionError, AttributeError):
        return None


def region_finder(ev: FieldEvidence) -> Iterator[Candidate]:
    """The predicate of the library that holds on exactly the failing cases (alone, or
    where a given input is not 0, which hides some mistakes). Where several different
    predicates separate the cases, the one that names the field's own inputs is said; a
    tie says nothing (the cases cannot tell them apart)."""
    if not ev.failing or not ev.passing:
        return
    every = [*ev.failing, *ev.passing]
    library = list(predicates(every, ev.function))
    zeros = [(key, words, predicate) for key, words, predicate in library
             if key.endswith("== 0") and "." not in key and "[" not in key]
    separating: list[Predicate] = []
    for key, words, predicate in library:
        if _separates(ev, predicate):
            separating.append((key, words, predicate))
    if not separating:
        for key, words, predicate in library:
            for zero_key, _, zero in zeros:
                both = lambda o, p=predicate, z=zero: bool(p(o)) and not z(o)  # noqa: E731
                if zero_key != key and _separates(ev, both):
                    name = zero_key.split(" ")[0]
                    separating.append((f"{key} and {name} != 0",
                                       f"{words} (and {name} is not 0)", both))
    if not separating:
        return
    stem = ev.name.split("_")[0]
    named = [item for item in separating if stem in item[0]] or separating
    if len(named) > 1 and not _same_region(ev, named):
        return
    key, words, predicate = named[0]
    yield Candidate("region", "region", 50, f"region:{key}", words, predicate=predicate,
                    check=_region_check(predicate))


def _same_region(ev: FieldEvidence, named: Sequence[Predicate]) -> bool:
    """Whether the separating predicates are one region said in several ways: on the
    probes too they agree, and the first is said."""
    probes = ev.probes()
    values = [[_holds(predicate, probe) for probe in probes] for _, _, predicate in named]
    return bool(probes) and all(value == values[0] for value in values)


def _separates(ev: FieldEvidence, predicate: Callable[[Observed], bool]) -> bool:
    return all(_holds(predicate, o) is True for o in ev.failing) and \
        all(_holds(predicate, o) is False for o in ev.passing)


def _region_check(predicate: Callable[[Observed], bool]) -> Check:
    """A region's test on a probe: the student is wrong there exactly when it holds."""
    def check(ev: FieldEvidence, probe: Observed) -> bool | None:
        holds = _holds(predicate, probe)
        if holds is None or ev.want(probe) is MISSING:
            return None
        return holds == ev.wrong(probe)
    return check


def right_whenever(ev: FieldEvidence) -> str:
    """The predicate of the library that implies a right answer on the most passing cases
    (and holds on no failing one): "right whenever ..." ("" for none)."""
    best, covered = "", 0
    every = [*ev.failing, *ev.passing]
    for _, words, predicate in predicates(every, ev.function):
        if any(_holds(predicate, o) is not False for o in ev.failing):
            continue
        count = sum(1 for o in ev.passing if _holds(predicate, o) is True)
        if count > covered:
            best, covered = words, count
    return best


#: The finders, in one table: each yields the claims that hold on every failing case of a
#: field (see the module). Experiments that call the student's function again are last.
FINDERS: tuple[Callable[[FieldEvidence], Iterator[Candidate]], ...] = (
    catalogue_finder,
    moved_finder,
    offset_finder,
    ratio_finder,
    affine_finder,
    equality_finder,
    region_finder,
)
EXPERIMENTS: tuple[Callable[[FieldEvidence], Iterator[Candidate]], ...] = (
    sensitivity_finder,
)


def survives(ev: FieldEvidence, candidate: Candidate, *,
             where: Callable[[Observed], bool] | None = None) -> bool:
    """Whether ``candidate`` is borne out: on the probes it speaks of (a rule said only
    where the field is wrong, of the probes where it is; ``where``: of the probes in a
    region), the student's answers are what it says, and it has the evidence it needs
    (failing cases with distinct values, and probes it predicted right)."""
    if candidate.check is None:
        return ev.distinct >= candidate.needs
    right = 0
    for probe in ev.probes():
        if ev.want(probe) is MISSING or (isinstance(probe.got, Failed) and ev.name != "error"):
            continue  # no value of the lab's, or none of the student's: nothing to test
        if candidate.kind == "rule" and not candidate.whole and not ev.wrong(probe):
            continue
        if where is not None and _holds(where, probe) is not True:
            continue
        verdict = candidate.check(ev, probe)
        if verdict is False:
            return False
        right += verdict is True
    return ev.distinct + right >= candidate.needs


def _best(ev: FieldEvidence, candidates: Sequence[Candidate], *,
          where: Callable[[Observed], bool] | None = None) -> Candidate | None:
    for candidate in sorted(candidates, key=lambda c: -c.rank):
        if survives(ev, candidate, where=where):
            return candidate
    return None


def choose(ev: FieldEvidence) -> Finding | None:
    """The most specific finding of a wrong root field that survives its experiments, or
    an observation, or None.

    A rule that gives every case (failing and passing) wins; else a region with the best
    rule for its cases; else the best rule for the failing cases, said of them; else an
    experiment on the student's function; else what was observed ("wrong on 3 of 6
    cases; right whenever ...")."""
    found = [candidate for finder in FINDERS for candidate in finder(ev)]
    # the catalogue first: a mistake someone wrote down, borne out here, is said as written
    known = _best(ev, [c for c in found if c.finder == "catalogue"])
    if known is not None:
        return Finding(known.text, known.key, known.label or known.text, True,
                       (known.finder,))
    rules = [c for c in found if c.kind == "rule"]
    whole = _best(ev, [c for c in rules if c.whole])
    if whole is not None:
        return Finding(whole.text, whole.key, whole.label or whole.text, whole.rank >= 45,
                       (whole.finder,))
    region = _best(ev, [c for c in found if c.kind == "region"])
    # a wrong bool is the other bool: inside a region, a rule for it says nothing more
    local_rules = [c for c in rules if c.finder != "catalogue" and ev.kind != "bool"]
    if region is not None:
        text = f"{ev.is_wrong} exactly when {region.text}"
        inside = _best(ev, [c for c in local_rules if c.rank >= 30], where=region.predicate)
        if inside is not None:
            return Finding(f"{text}, and there {inside.local}", f"{region.key}|{inside.key}",
                           f"{ev.is_wrong} when {region.text}: {inside.local}", True,
                           (region.finder, inside.finder))
        return Finding(f"{text}; right on every other case", region.key,
                       f"{ev.is_wrong} exactly when {region.text}", True, (region.finder,))
    local = _best(ev, [c for c in local_rules if c.rank >= 45])
    if local is not None:
        return Finding(local.text, local.key, local.text, True, (local.finder,))
    for experiment in EXPERIMENTS:
        tried = _best(ev, list(experiment(ev)))
        if tried is not None:
            return Finding(tried.text, tried.key, tried.text, True, (tried.finder,))
    weak = _best(ev, [c for c in local_rules if c.rank < 45])
    if weak is not None:
        return Finding(weak.text, weak.key, weak.text, False, (weak.finder,))
    total = len(ev.failing) + len(ev.passing)
    whenever = right_whenever(ev)
    if whenever:
        text = f"{ev.is_wrong} on {len(ev.failing)} of {total} cases; right whenever " \
               f"{whenever}"
        return Finding(text, f"observed:{whenever}", text, False, ("observed",))
    return None
