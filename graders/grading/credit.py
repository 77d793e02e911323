"""Credit only for real answers: trivial cases, constant functions, and the function gate.

Three rules decide whether passing checks earn points (docs/students.md, "How a score is made"):

- A case is *trivial* when every value it expects is degenerate (None, a bool, 0, 1, an
  infinity) or echoes one of its inputs: a function that does nothing, or returns its
  arguments, gets it right. A trivial case counts only once the same function passes a
  non-trivial case somewhere in the run (or when the run's tracks give it none to pass).
- A function that gives the same answer whatever it is asked earns nothing from any test.
- An invariant test pays only when its function computes some non-trivial value of its
  cases right, field by field (the gate).

All three are decided on the evidence of every visible case of the function, so the
verdict does not depend on which test runs first.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from graders.grading.contract import RESULT_FIELDS
from graders.identity import IdentityMemo

if TYPE_CHECKING:
    from graders.grading.cases import Case

#: How a failed call's reason starts when the function raised NotImplementedError.
NOT_IMPLEMENTED = "not implemented yet"
#: Leaf values a function that computes nothing can still produce.
_DEGENERATE = (0, 1)


def _leaves(value: Any) -> Iterator[Any]:
    """The scalar values inside a plain value (dicts of fields, lists, scalars)."""
    if isinstance(value, Mapping):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


#: The scalars of frozen dataclass instances (a track's profile is in thousands of cases).
_FROZEN_SCALARS: IdentityMemo[frozenset[Any]] = IdentityMemo(256)


def input_scalars(value: Any, depth: int = 0) -> set[Any]:
    """Every number and string reachable in a case's inputs (quantities by magnitude)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type) \
            and type(value).__dataclass_params__.frozen:  # type: ignore[attr-defined]
        return set(_FROZEN_SCALARS.get(
            value, lambda: frozenset(_input_scalars(value, depth)), depth))
    return _input_scalars(value, depth)


def _input_scalars(value: Any, depth: int) -> set[Any]:
    found: set[Any] = set()
    if depth > 6:
        return found
    if isinstance(value, bool) or value is None:
        return found
    if isinstance(value, int | float) and math.isfinite(value):
        found.add(float(value))
    elif isinstance(value, str):
        found.add(value)
    elif hasattr(value, "m_as") and hasattr(value, "magnitude"):
        magnitude = value.magnitude
        if isinstance(magnitude, int | float):
            found.add(float(magnitude))
    elif isinstance(value, Mapping):
        for item in value.values():
            found |= input_scalars(item, depth + 1)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            found |= input_scalars(item, depth + 1)
    elif hasattr(value, "__dict__"):
        for item in vars(value).values():
            found |= input_scalars(item, depth + 1)
    return found


def _trivial_leaf(leaf: Any, inputs: set[Any]) -> bool:
    if leaf is None or isinstance(leaf, bool):
        return True
    if isinstance(leaf, int | float):
        if math.isnan(leaf) or math.isinf(leaf) or leaf in _DEGENERATE:
            return True
        return float(leaf) in inputs
    if isinstance(leaf, str):
        return leaf in inputs
    return False


def _scalars(inputs: Iterable[Any]) -> set[Any]:
    """Every number and string reachable in all of ``inputs`` (see :func:`input_scalars`)."""
    scalars: set[Any] = set()
    for value in inputs:
        scalars |= input_scalars(value)
    return scalars


def is_trivial(expected: Any, inputs: Iterable[Any]) -> bool:
    """Whether a function that computes nothing could produce ``expected`` for ``inputs``."""
    scalars = _scalars(inputs)
    return all(_trivial_leaf(leaf, scalars) for leaf in _leaves(expected))


def nontrivial_fields(expected: Any, inputs: Iterable[Any]) -> list[tuple[tuple[str, Any], Any]]:
    """The fields of ``expected`` (a dict's fields, a list's items, else the value itself)
    that a function computing nothing could not give for ``inputs``: (where, value) pairs,
    ``where`` for :func:`field_of`."""
    scalars = _scalars(inputs)
    if isinstance(expected, Mapping):
        parts: list[tuple[Any, Any]] = [((_FIELD, name), expected[name]) for name in expected]
    elif isinstance(expected, list | tuple):
        parts = [((_ITEM, index), item) for index, item in enumerate(expected)]
    else:
        parts = [((_WHOLE, None), expected)]
    return [(where, wanted) for where, wanted in parts
            if not all(_trivial_leaf(leaf, scalars) for leaf in _leaves(wanted))]


_FIELD, _ITEM, _WHOLE = "field", "item", "whole"

#: Each case's non-trivial fields, by its expected value (the object) and key, with the
#: case: a grading asks them of a visible case in its test and for its function's
#: evidence (two equal Case objects), and of a twin when it is drawn and when it is judged.
_CASE_FIELDS: IdentityMemo[tuple[Case, list[tuple[tuple[str, Any], Any]]]] = IdentityMemo(4096)


def case_nontrivial_fields(case: Case, expected: Any) -> list[tuple[tuple[str, Any], Any]]:
    """:func:`nontrivial_fields` of ``expected``, the expected value of ``case``, for the
    case's inputs; worked out once per expected value and case. None of them: the case
    is trivial (:func:`is_trivial`)."""
    kept, fields = _CASE_FIELDS.get(expected, lambda: (case, nontrivial_fields(
        expected, [*case.args, *case.kwargs.values()])), case.key)
    if kept is not case and kept != case:  # another case of that key: its own inputs
        return nontrivial_fields(expected, [*case.args, *case.kwargs.values()])
    return fields


def field_of(answer: Any, where: tuple[str, Any]) -> Any:
    """The field of ``answer`` at ``where`` (see :func:`nontrivial_fields`); None when the
    answer has no such field."""
    kind, key = where
    if kind == _FIELD:
        return answer.get(key) if isinstance(answer, Mapping) else None
    if kind == _ITEM:
        return answer[key] if isinstance(answer, list | tuple) and key < len(answer) else None
    return answer


def nontrivial_matches(expected: Any, answer: Any, inputs: Iterable[Any],
                       same: Callable[[Any, Any], bool]) -> int:
    """How many non-trivial values of ``expected`` the answer gets right, field by field
    (a dict's fields, a list's items): evidence of a real computation even in a case
    whose other fields are wrong."""
    return sum(1 for where, wanted in nontrivial_fields(expected, inputs)
               if same(wanted, field_of(answer, where)))


def answer_key(value: Any) -> str:
    """A canonical text of a plain answer: equal answers give equal keys."""
    return json.dumps(value, sort_keys=True, allow_nan=True, separators=(",", ":"))


@dataclass
class FunctionEvidence:
    """What one contract function answered across its visible cases."""

    cases: int = 0
    answered: int = 0
    #: Cases answered right, trivial or not.
    passed: int = 0
    nontrivial: int = 0
    nontrivial_passed: int = 0
    #: Non-trivial values (fields) answered right, in passed and failed cases alike.
    nontrivial_values_right: int = 0
    answers: set[str] = field(default_factory=set)
    expected: set[str] = field(default_factory=set)
    #: Why the first unanswered case got no answer ("" while every case was answered).
    first_failure: str = ""
    #: Cases that raised NotImplementedError (the template's "implement me").
    unwritten: int = 0
    #: The first case that needs a real computation and was missed, and how (for example
    #: "case 'defaults' [cloud_fleet]: value expected 0.3355, got 0.1678").
    first_real_miss: str = ""
    #: Answers that had none of the result's fields (a result in a shape the grader
    #: cannot read: the same "answer" whatever was computed).
    shapeless: int = 0

    def record(self, *, expected: Any, answer: Any | None, answered: bool, passed: bool,
               trivial: bool, failure: str = "", values_right: int = 0,
               miss: str = "") -> None:
        """Add one case: what was expected, what came back (if anything), the verdict, how
        many of its non-trivial values the answer got right, and ``miss``, the case and
        what was wrong, should it be failed."""
        if not trivial and not passed and not self.first_real_miss:
            self.first_real_miss = miss
        self.cases += 1
        self.passed += passed
        self.nontrivial_values_right += values_right
        if not answered and not self.first_failure:
            self.first_failure = failure or "no answer"
        if not answered and failure.startswith(NOT_IMPLEMENTED):
            self.unwritten += 1
        if answered:
            self.answered += 1
            self.shapeless += _shapeless(answer)
            self.answers.add(answer_key(answer))
            self.expected.add(answer_key(expected))
        if not trivial:
            self.nontrivial += 1
            self.nontrivial_passed += passed

    @property
    def not_implemented(self) -> bool:
        """Every visible case raised NotImplementedError: the function is not written yet
        (which is not the same as wrong)."""
        return self.cases > 0 and self.unwritten == self.cases

    @property
    def wrong(self) -> bool:
        """Some visible case of the function failed."""
        return self.passed < self.cases

    @property
    def constant(self) -> bool:
        """One answer for inputs that call for different ones (not counting a result whose
        fields could not be read: that is a shape to fix, see :func:`shape_problem`)."""
        return len(self.answers) == 1 and len(self.expected) > 1 and not self.wrong_shape

    @property
    def wrong_shape(self) -> bool:
        """Every answer lacked every field of the result."""
        return self.answered > 0 and self.shapeless == self.answered

    @property
    def earns_invariants(self) -> bool:
        """Some non-trivial value is computed right (or the run has none to compute)."""
        return (self.nontrivial_values_right > 0 or self.nontrivial == 0) \
            and not self.constant

    @property
    def earns_trivial_cases(self) -> bool:
        """A non-trivial case passed, or the run has none to pass (then nothing tells an
        honest answer from a trivial one, and the honest one must not lose)."""
        return (self.nontrivial_passed > 0 or self.nontrivial == 0) and not self.constant


def _shapeless(answer: Any) -> bool:
    """Whether a plain answer of a result with fields has none of them."""
    return isinstance(answer, Mapping) and bool(answer) and all(
        isinstance(value, Mapping) and set(value) == {"$missing"} for value in answer.values())


def shape_problem(function: str, evidence: FunctionEvidence) -> str | None:
    """The one line that names the shape ``function`` must return, when none of its answers
    had a field the grader reads (None otherwise)."""
    fields = RESULT_FIELDS.get(function)
    if not evidence.wrong_shape or not fields:
        return None
    names = ", ".join(fields)
    return (f"{function} returns a value the grader cannot read its fields from: return an "
            f"object with the attributes {names} (e.g. the result class of serving.py), a "
            f"dict with these keys, or a tuple or list of exactly {len(fields)} values in "
            "this order")


def _constant_reason(function: str, evidence: FunctionEvidence) -> str | None:
    shape = shape_problem(function, evidence)
    if shape is not None:
        return shape
    if evidence.constant:
        return (f"{function} gives the same answer whatever it is asked, so none of its "
                "tests earn points")
    if evidence.answered == 0 and evidence.cases:
        return f"{function} answered none of its cases: {evidence.first_failure}"
    return None


def trivial_refusal(function: str, evidence: FunctionEvidence) -> str | None:
    """Why the passed trivial cases of ``function`` do not count, or None if they do."""
    if evidence.earns_trivial_cases:
        return None
    first = f", such as {evidence.first_real_miss}" if evidence.first_real_miss else ""
    return _constant_reason(function, evidence) or (
        f"{function} must first be right on a case that needs a real computation{first}; "
        "until then its right answers to cases with trivial answers (None, 0, a flag, an "
        "echo of an input) do not count")


def invariant_refusal(function: str, evidence: FunctionEvidence) -> str | None:
    """Why the invariant tests of ``function`` pay nothing, or None if they may pay."""
    if evidence.earns_invariants:
        return None
    return _constant_reason(function, evidence) or (
        f"{function} computes none of the values its reference cases check (every value "
        "it got right is one that computing nothing gives), so its invariants pay nothing "
        "yet")
