"""Mistake clusters: per contract function, the submissions whose wrong answers have the
same signature, each labelled with the catalogued mistake it matches (if any).

The signature of a submission for one function has two parts:

- a *shape*, compared exactly: which of the function's tests failed (hidden ones and
  invariants included), and in each failed case kept by the grader (the first
  :data:`graders.grading.checks.MAX_CASES_KEPT` of a test), which fields were wrong, or
  which error was raised, and every non-numeric wrong answer (``None``, ``inf``, ``True``);
- the *ratios* of each numeric wrong answer to the reference's (the answer itself where
  the reference's is 0 or not a number), compared within a relative tolerance
  (:data:`RATIO_REL`): two submissions join one cluster when their shapes are equal and
  every ratio agrees.

Why this is robust: it is read from the values the grader kept, not from the feedback
text, which is cut, shows few cases and is worded for students; the shape is discrete,
so equal bugs give equal shapes whatever the code looks like; ratios compared with a
tolerance, not rounded into buckets, keep submissions that differ only by floating-point
noise (another order of the same arithmetic) together, with no bucket edge to split
them; and a ratio, unlike a difference, is the same for a unit or factor mistake at
every scale. A knock-on failure (a wrong erlang_c making queueing_latency fail) forms a
cluster of the calling function too, whose hint names the root cause.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from graders.grading.checks import callees
from graders.grading.mistakes import Mistake, parameter_names
from graders.regrade.report import GradedSubmission, function_of, track_of

#: Relative tolerance within which two wrong answers' ratios to the reference agree.
RATIO_REL = 1e-6
NOT_IMPLEMENTED = "NotImplementedError"


@dataclass
class Cluster:
    """Submissions with the same wrong answers in one function."""

    function: str
    members: list[str]
    tests: list[str]
    tracks: list[str]
    first_case: str
    hint: str
    mistake: str = ""
    label: str = ""
    ratios: list[float] = field(default_factory=list, repr=False)
    kept: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list, repr=False)

    @property
    def representative(self) -> str:
        return self.members[0]


def _failed_tests(entry: GradedSubmission) -> dict[str, list[Mapping[str, Any]]]:
    """The failed tests of ``entry`` by function, in suite order."""
    failed: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for test in entry.tests:
        if test.get("status") != "passed":
            failed[function_of(test)].append(test)
    return failed


def _kept(test: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    extra = test.get("extra_data")
    cases = extra.get("failed_cases") if isinstance(extra, Mapping) else None
    return [case for case in cases if isinstance(case, Mapping)] \
        if isinstance(cases, list) else []


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) \
        and math.isfinite(value)


def _ratio(expected: Any, got: Any) -> float | None:
    """got / expected for two finite numbers, the expected one not 0; else None."""
    if not (_finite(expected) and _finite(got)) or expected == 0:
        return None
    return float(got) / float(expected)


def signature(tests: Sequence[Mapping[str, Any]]) -> tuple[tuple[Any, ...], list[float]]:
    """(shape, ratios) of one submission's failed tests of one function (see the module)."""
    shape: list[Any] = []
    ratios: list[float] = []
    for test in tests:
        extra = test.get("extra_data")
        nodeid = extra.get("nodeid") if isinstance(extra, Mapping) else None
        shape.append(str(nodeid or test.get("name", "")))
        for case in _kept(test):
            shape.append(str(case.get("case", "")))
            if "error" in case:
                shape.append(("error", str(case["error"])))
                continue
            fields = case.get("fields")
            for name, pair in sorted(fields.items()) if isinstance(fields, Mapping) else ():
                expected: Any = pair[0] if isinstance(pair, list) and len(pair) == 2 else pair
                got: Any = pair[1] if isinstance(pair, list) and len(pair) == 2 else None
                ratio = _ratio(expected, got)
                if ratio is not None:
                    shape.append(name)
                    ratios.append(ratio)
                elif _finite(got):  # against inf, None or 0: the answer itself
                    shape.append((name, repr(expected), "a number"))
                    ratios.append(float(got))
                else:
                    shape.append((name, repr(expected), repr(got)))
    return tuple(shape), ratios


def _agree(left: Sequence[float], right: Sequence[float]) -> bool:
    return all(abs(a - b) <= RATIO_REL * max(abs(a), abs(b)) for a, b in zip(left, right,
                                                                               strict=True))


def cluster(entries: Sequence[GradedSubmission], catalogue: Sequence[Mistake] = ()
            ) -> list[Cluster]:
    """The mistake clusters of the graded ``entries``, largest first, each labelled with
    the first entry of ``catalogue`` its representative matches."""
    groups: dict[tuple[str, tuple[Any, ...]], list[Cluster]] = defaultdict(list)
    for entry in entries:
        if not entry.graded:
            continue
        for function, tests in _failed_tests(entry).items():
            shape, ratios = signature(tests)
            candidates = groups[(function, shape)]
            for found in candidates:
                if _agree(found.ratios, ratios):
                    found.members.append(entry.id)
                    break
            else:
                candidates.append(_new_cluster(entry.id, function, tests, ratios))
    clusters = [found for candidates in groups.values() for found in candidates]
    for found in clusters:
        found.mistake, found.label = _label(found, catalogue)
    return sorted(clusters, key=lambda c: (-len(c.members), c.function, c.representative))


def _new_cluster(ident: str, function: str, tests: Sequence[Mapping[str, Any]],
                 ratios: list[float]) -> Cluster:
    tracks = sorted({track for test in tests if (track := track_of(test))})
    kept = [(str(test.get("name", "")), case) for test in tests for case in _kept(test)]
    return Cluster(function, [ident], [str(test.get("name", "")) for test in tests], tracks,
                   _first_case(tests), _hint(tests), ratios=ratios, kept=kept)


def _first_case(tests: Sequence[Mapping[str, Any]]) -> str:
    """The first failed case, as a reader would look for it."""
    for test in tests:
        for case in _kept(test):
            name = f"{test.get('name', '')}, case {case.get('case', '')!r}"
            if "error" in case:
                return f"{name}: raised {case['error']}"
            fields = case.get("fields")
            if isinstance(fields, Mapping) and fields:
                field_name, pair = next(iter(fields.items()))
                if isinstance(pair, list) and len(pair) == 2:
                    return f"{name}: {field_name} expected {pair[0]!r}, got {pair[1]!r}"
    first = tests[0]
    summary = str(first.get("output", "")).split("\n", 1)[0]
    return summary or str(first.get("name", ""))


def _hint(tests: Sequence[Mapping[str, Any]]) -> str:
    """The root cause the grader names, else its first field hint, else nothing."""
    hints = []
    for test in tests:
        for line in str(test.get("output", "")).splitlines():
            text = line.strip()
            if text.startswith("your ") and " first" in text:
                return text
            if text.startswith("hint:"):
                hints.append(text.removeprefix("hint:").strip())
    return hints[0] if hints else ""


def _inputs(function: str, case: Mapping[str, Any]) -> dict[str, float]:
    """A kept case's inputs, positional ones also by the reference's parameter names."""
    raw = case.get("inputs")
    inputs = {str(k): float(v) for k, v in raw.items()
              if isinstance(v, int | float) and not isinstance(v, bool)} \
        if isinstance(raw, Mapping) else {}
    for index, name in enumerate(parameter_names(function)):
        if f"arg{index}" in inputs:
            inputs.setdefault(name, inputs[f"arg{index}"])
    return inputs


def matches(mistake: Mistake, function: str, kept: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the kept failed cases of ``function`` show ``mistake`` (see
    :mod:`graders.grading.mistakes`)."""
    if mistake.function != function:
        return False
    if mistake.error:
        errors = [case["error"] for case in kept if "error" in case]
        return bool(errors) and all(error == mistake.error for error in errors)
    name = mistake.field or "value"
    pairs = [(case["fields"][name], case) for case in kept
             if isinstance(case.get("fields"), Mapping) and name in case["fields"]]
    return bool(pairs) and all(
        isinstance(pair, list) and len(pair) == 2
        and mistake.agrees(pair[0], pair[1], _inputs(function, case)) for pair, case in pairs)


def _label(found: Cluster, catalogue: Sequence[Mistake]) -> tuple[str, str]:
    """(catalogue id, label): the first entry that matches; else, for a knock-on, the
    function to fix first (and its catalogued error, when the errors match one); else
    "not implemented yet" when every kept call said so; else nothing."""
    kept = [case for _, case in found.kept]
    for mistake in catalogue:
        if matches(mistake, found.function, kept):
            return mistake.id, mistake.label
    called = callees(found.function)
    for mistake in catalogue:
        if mistake.function in called and mistake.error and matches(
                replace(mistake, function=found.function), found.function, kept):
            return "", f"knock-on of {mistake.label} (in {mistake.function})"
    root = _ROOT_CAUSE.search(found.hint)
    if root is not None:
        return "", f"knock-on of a wrong {root.group(1)}: fix it first"
    errors = [case.get("error") for case in kept]
    if errors and all(error == NOT_IMPLEMENTED for error in errors):
        return "", "not implemented yet"
    return "", ""


_ROOT_CAUSE = re.compile(r"^your \w+ uses your .*: fix (\w+) first$")
