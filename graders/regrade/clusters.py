"""Mistake clusters: the causes of a class's wrong answers, each with the submissions that
show it and the other functions it breaks.

A submission's failed tests are read function by function, along the lab's call chain
(:func:`graders.grading.checks.callees`):

- a function that is *not implemented yet* (every kept call raised NotImplementedError)
  puts its submission in the class's one "not implemented yet" cluster, which lists per
  submission the functions not started;
- a function that fails while a function it calls fails too is a *knock-on*: it is no
  cluster of its own, but is listed inside its root's cluster ("also breaks batching_tax
  in these 3 submissions"), the root being the deepest failing function of the chain;
- every other failing function is a *root*. Its *causes* are read from the values the
  grader kept: in each kept case, the wrong fields that do not follow from another wrong
  field of the same answer (:func:`graders.grading.diagnosis.knock_ons`), and the error
  raised. When every such field fits catalogued mistakes in every case where it is wrong
  (:func:`graders.grading.diagnosis.fitting_mistakes`, the matcher of the students'
  feedback), and every error a catalogued error, each field's fitting entries are one
  named cause: two bugs in one function are two causes, and the submission is counted in
  both clusters; a field that fits two entries is one cause that names both.
- A root with a wrong answer the catalogue does not name forms a cluster by its
  *signature*: a *shape*, compared exactly (which of the function's tests failed, and in
  each kept case, which fields were wrong or which error was raised, and every
  non-numeric wrong answer), and the *ratios* of each numeric wrong answer to the
  reference's (the answer itself where the reference's is 0 or not a number), compared
  within :data:`RATIO_REL`. Equal bugs give equal shapes whatever the code looks like;
  ratios compared with a tolerance keep floating-point noise together with no bucket
  edge to split them, and a ratio is the same for a unit or factor mistake at every scale.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from graders.grading.checks import callees
from graders.grading.diagnosis import base_field, fitting_mistakes, knock_ons
from graders.grading.mistakes import Mistake, parameter_names
from graders.regrade.report import GradedSubmission, function_of, track_of

#: Relative tolerance within which two wrong answers' ratios to the reference agree.
RATIO_REL = 1e-6
NOT_IMPLEMENTED = "NotImplementedError"
NOT_STARTED_LABEL = "not implemented yet"

#: A test and one of its kept failed cases.
Kept = tuple[Mapping[str, Any], Mapping[str, Any]]


@dataclass
class Cluster:
    """One cause of wrong answers, and the submissions that show it."""

    function: str
    members: list[str]
    tests: list[str]
    tracks: list[str]
    first_case: str
    hint: str
    #: The catalogued mistakes that name the cause (ids, and their labels).
    mistakes: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    #: A label the catalogue does not give (a knock-on whose root passed its own tests).
    note: str = ""
    #: Each function this cause breaks too (a knock-on), with the members it breaks it in.
    breaks: dict[str, list[str]] = field(default_factory=dict)
    #: Of the "not implemented yet" cluster: each member's functions not started.
    not_started: dict[str, list[str]] = field(default_factory=dict)
    ratios: list[float] = field(default_factory=list, repr=False)
    kept: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list, repr=False)

    @property
    def representative(self) -> str:
        return self.members[0]

    @property
    def mistake(self) -> str:
        """The first catalogued mistake's id ("" when none names the cause)."""
        return self.mistakes[0] if self.mistakes else ""

    @property
    def label(self) -> str:
        """The cause's name: its catalogued mistakes' labels, else the note."""
        return " or ".join(self.labels) if self.labels else self.note

    def add(self, ident: str) -> None:
        if ident not in self.members:
            self.members.append(ident)


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


def _float(value: Any) -> float | None:
    """A finite number as a float; None for anything else (an int too large included)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _ratio(expected: Any, got: Any) -> float | None:
    """got / expected for two finite numbers, the expected one not 0; else None."""
    low, high = _float(expected), _float(got)
    if low is None or high is None or low == 0:
        return None
    return high / low


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
            for name, (expected, got) in _pairs(case).items():
                ratio = _ratio(expected, got)
                answer = _float(got)
                if ratio is not None:
                    shape.append(name)
                    ratios.append(ratio)
                elif answer is not None:  # against inf, None or 0: the answer itself
                    shape.append((name, repr(expected), "a number"))
                    ratios.append(answer)
                else:
                    shape.append((name, repr(expected), repr(got)))
    return tuple(shape), ratios


def _pairs(case: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """A kept case's wrong fields, each ``(expected, got)``, by name."""
    fields = case.get("fields")
    if not isinstance(fields, Mapping):
        return {}
    return {str(name): (pair[0], pair[1]) if isinstance(pair, list) and len(pair) == 2
            else (pair, None) for name, pair in sorted(fields.items())}


def _agree(left: Sequence[float], right: Sequence[float]) -> bool:
    return all(abs(a - b) <= RATIO_REL * max(abs(a), abs(b)) for a, b in zip(left, right,
                                                                               strict=True))


def cluster(entries: Sequence[GradedSubmission], catalogue: Sequence[Mistake] = ()
            ) -> list[Cluster]:
    """The causes of the graded ``entries``' wrong answers, most submissions first (see
    the module): knock-ons inside their root's cluster, every submission with a function
    not implemented yet in one cluster."""
    clusters = _Clusters(catalogue)
    for entry in entries:
        if entry.graded:
            clusters.add(entry)
    return sorted(clusters.all(), key=lambda c: (-len(c.members), c.function,
                                                 c.representative))


def _not_implemented(tests: Sequence[Mapping[str, Any]]) -> bool:
    errors = [case.get("error") for test in tests for case in _kept(test)]
    return bool(errors) and all(error == NOT_IMPLEMENTED for error in errors)


def _root(function: str, failed: Mapping[str, Any]) -> str | None:
    """The deepest function of ``function``'s call chain that failed too, if any."""
    found = None
    for callee in callees(function):
        if callee in failed:
            found = callee
    return found


class _Clusters:
    """The clusters of a class, made one submission at a time."""

    def __init__(self, catalogue: Sequence[Mistake]) -> None:
        self.catalogue = catalogue
        self.named: dict[tuple[str, tuple[str, ...]], Cluster] = {}
        self.unnamed: dict[tuple[str, tuple[Any, ...]], list[Cluster]] = defaultdict(list)
        self.started: Cluster | None = None
        #: Submissions that do not import, one cluster per error (its first line).
        self.unimportable: dict[str, Cluster] = {}
        #: Roots the catalogue does not name but the diagnosis does, by its finding.
        self.found: dict[tuple[str, tuple[str, ...]], Cluster] = {}
        self.causes: dict[tuple[str, tuple[Any, ...]],
                          list[tuple[list[float], list[Cause] | None]]] = defaultdict(list)

    def all(self) -> list[Cluster]:
        found = [*self.named.values(), *self.found.values(),
                 *(c for group in self.unnamed.values() for c in group)]
        return [*found, *([self.started] if self.started else []),
                *self.unimportable.values()]

    def add(self, entry: GradedSubmission) -> None:
        failed = _failed_tests(entry)
        error = _import_failure(failed)
        if error is not None:  # one cause, whatever each function shows of it
            if error not in self.unimportable:
                self.unimportable[error] = Cluster("", [], [], [], error, "",
                                                   note=f"does not import: {error}")
            self.unimportable[error].add(entry.id)
            return
        unwritten = [name for name, tests in failed.items() if _not_implemented(tests)]
        homes: dict[str, list[Cluster]] = {}
        if unwritten:
            started = self._not_started(failed[unwritten[0]])
            started.add(entry.id)
            started.not_started[entry.id] = unwritten
            homes.update(dict.fromkeys(unwritten, [started]))
        roots = {name: _root(name, failed) for name in failed if name not in unwritten}
        for name, root in roots.items():
            if root is not None and self._own_cause(name, root, failed):
                roots[name] = None
        for name, root in roots.items():
            if root is None:
                homes[name] = self._causes(entry.id, name, failed[name])
        for name, root in roots.items():
            for home in homes.get(root, []) if root else []:
                members = home.breaks.setdefault(name, [])
                if entry.id not in members:
                    members.append(entry.id)

    def _own_cause(self, function: str, root: str,
                   failed: Mapping[str, Sequence[Mapping[str, Any]]]) -> bool:
        """Whether ``function``, failing below its failing callee ``root``, has a bug of its
        own: its values fit a catalogued mistake whose fix (hint) is not one of the root's
        (an entry such as "seen through transformer_state_gb" is the root's bug)."""
        own = self._named(function, failed[function], *signature(failed[function]))
        if own is None:
            return False
        below = self._named(root, failed[root], *signature(failed[root])) or []
        fixes = {mistake.hint for mistakes, _ in below for mistake in mistakes}
        return any(mistake.hint not in fixes for mistakes, _ in own for mistake in mistakes)

    def _not_started(self, tests: Sequence[Mapping[str, Any]]) -> Cluster:
        if self.started is None:
            self.started = Cluster("", [], [], [], _first_case(tests), "",
                                   note=NOT_STARTED_LABEL)
        return self.started

    def _causes(self, ident: str, function: str, tests: Sequence[Mapping[str, Any]]
                ) -> list[Cluster]:
        """The clusters ``ident`` joins for its root ``function``'s failure."""
        shape, ratios = signature(tests)
        causes = self._named(function, tests, shape, ratios)
        if causes is None:
            return [self._by_signature(ident, function, tests, shape, ratios)]
        joined = []
        for mistakes, shown in causes:
            key = (function, tuple(m.id for m in mistakes))
            found = self.named.get(key)
            if found is None:
                found = self.named[key] = _named_cluster(function, mistakes, shown, tests)
            else:
                _widen(found, shown)
            found.add(ident)
            joined.append(found)
        return joined

    def _named(self, function: str, tests: Sequence[Mapping[str, Any]],
               shape: tuple[Any, ...], ratios: list[float]) -> list[Cause] | None:
        """:func:`named_causes`, read once per signature: equal signatures (the same
        tests and cases wrong in the same fields, every ratio agreeing) have the same
        causes, shown in the same tests and cases."""
        known = self.causes[(function, shape)]
        for seen, causes in known:
            if _agree(seen, ratios):
                return causes
        causes = named_causes(function, tests, self.catalogue)
        known.append((ratios, causes))
        return causes

    def _by_signature(self, ident: str, function: str, tests: Sequence[Mapping[str, Any]],
                      shape: tuple[Any, ...], ratios: list[float]) -> Cluster:
        findings = _findings(tests)
        if findings:  # the diagnosis named it: one cluster per finding, whatever the values
            key = (function, findings)
            if key not in self.found:
                tracks = sorted({track for test in tests if (track := track_of(test))})
                self.found[key] = Cluster(function, [], [str(t.get("name", "")) for t in tests],
                                          tracks, _first_case(tests), _hint(tests),
                                          note="; ".join(findings))
            self.found[key].add(ident)
            return self.found[key]
        candidates = self.unnamed[(function, shape)]
        for found in candidates:
            if _agree(found.ratios, ratios):
                found.add(ident)
                return found
        tracks = sorted({track for test in tests if (track := track_of(test))})
        kept = [(str(test.get("name", "")), case) for test in tests for case in _kept(test)]
        found = Cluster(function, [ident], [str(test.get("name", "")) for test in tests],
                        tracks, _first_case(tests), _hint(tests), ratios=ratios, kept=kept)
        found.note = _note(found, self.catalogue)
        candidates.append(found)
        return found


#: A cause: the catalogued mistakes that name it, and the (test, case, field) that show it
#: (field "" for an error).
Cause = tuple[tuple[Mistake, ...], list[tuple[Mapping[str, Any], Mapping[str, Any], str]]]


def named_causes(function: str, tests: Sequence[Mapping[str, Any]],
                 catalogue: Sequence[Mistake]) -> list[Cause] | None:
    """The catalogued causes of a root function's failure, one per group of fitting
    entries; None when a wrong answer fits no entry (or no case was kept)."""
    kept: list[Kept] = [(test, case) for test in tests for case in _kept(test)]
    if not kept:
        return None
    causes: dict[tuple[str, ...], Cause] = {}

    def found(mistakes: Sequence[Mistake], shown: list[tuple[Mapping[str, Any],
                                                              Mapping[str, Any], str]]) -> None:
        key = tuple(m.id for m in mistakes)
        causes.setdefault(key, (tuple(mistakes), []))[1].extend(shown)

    errors = [(test, case) for test, case in kept if "error" in case]
    if errors:
        fits = [m for m in catalogue if m.function == function and m.error
                and all(case["error"] == m.error for _, case in errors)]
        if not fits:
            return None
        found(fits, [(test, case, "") for test, case in errors])
    for name, shown in _root_fields(function, kept).items():
        named: list[Mistake] | None = None
        for _, case, _ in shown:
            expected, got, inputs = _case_values(function, case)
            fitting = fitting_mistakes(function, name, expected, got, inputs, catalogue)
            named = fitting if named is None else [m for m in named if m in fitting]
        if not named:
            return None
        found(named, shown)
    return list(causes.values()) or None


def _root_fields(function: str, kept: Sequence[Kept]
                 ) -> dict[str, list[tuple[Mapping[str, Any], Mapping[str, Any], str]]]:
    """Each wrong field that does not follow from another wrong field of its answer, with
    the cases where it is such a root."""
    roots: dict[str, list[tuple[Mapping[str, Any], Mapping[str, Any], str]]] = {}
    for test, case in kept:
        if "error" in case:
            continue
        _, got, inputs = _case_values(function, case)
        wrong = list(dict.fromkeys(base_field(name) for name in _pairs(case)))
        follows = knock_ons(function, wrong, got, inputs)
        for name in wrong:
            if name not in follows:
                roots.setdefault(name, []).append((test, case, name))
    return roots


def _value(value: Any) -> Any:
    """A kept value, with the infinities JSON keeps as text read back."""
    return float(value) if value in ("inf", "-inf") else value


def _case_values(function: str, case: Mapping[str, Any]
                 ) -> tuple[dict[str, Any], dict[str, Any], dict[str, float]]:
    """A kept case's reference values (its wrong fields and their sources), the student's
    wrong values, and its inputs."""
    expected: dict[str, Any] = {}
    sources = case.get("sources")
    if isinstance(sources, Mapping):
        expected.update({str(name): _value(value) for name, value in sources.items()})
    got: dict[str, Any] = {}
    for name, (want, answer) in _pairs(case).items():
        expected.setdefault(base_field(name), _value(want))
        got.setdefault(base_field(name), _value(answer))
    return expected, got, _inputs(function, case)


def _named_cluster(function: str, mistakes: Sequence[Mistake],
                   shown: Sequence[tuple[Mapping[str, Any], Mapping[str, Any], str]],
                   tests: Sequence[Mapping[str, Any]]) -> Cluster:
    test, case, name = shown[0]
    hint = (_field_hint(tests, name) if name else "") \
        or next((m.hint for m in mistakes if m.hint), "") or _hint(tests)
    found = Cluster(function, [], [], [], _shown_case(test, case, name), hint,
                    mistakes=[m.id for m in mistakes], labels=[m.label for m in mistakes])
    _widen(found, shown)
    return found


def _widen(found: Cluster, shown: Sequence[tuple[Mapping[str, Any], Mapping[str, Any], str]]
           ) -> None:
    """Add the tests and tracks where a member shows the cause."""
    for test, _, _ in shown:
        name = str(test.get("name", ""))
        if name not in found.tests:
            found.tests.append(name)
        track = track_of(test)
        if track and track not in found.tracks:
            found.tracks.append(track)
            found.tracks.sort()


def _shown_case(test: Mapping[str, Any], case: Mapping[str, Any], name: str) -> str:
    """A kept case as a reader looks for it, showing ``name`` (or the error)."""
    where = f"{test.get('name', '')}, case {case.get('case', '')!r}"
    if "error" in case:
        return f"{where}: raised {case['error']}"
    for field_name, (expected, got) in _pairs(case).items():
        if not name or base_field(field_name) == name:
            return f"{where}: {field_name} expected {expected!r}, got {got!r}"
    return where


#: The error kept of a case whose submission did not import.
UNIMPORTABLE = "unimportable"
#: How a test's output says that every failed case failed the same way.
EVERY_FAILED = "every failed case: "


def _import_failure(failed: Mapping[str, Sequence[Mapping[str, Any]]]) -> str | None:
    """The first line of the import error of a submission that did not import (every kept
    case of every failed test says so), else None."""
    kept = [case for tests in failed.values() for test in tests for case in _kept(test)]
    if not kept or any(case.get("error") != UNIMPORTABLE for case in kept):
        return None
    for tests in failed.values():
        for test in tests:
            for line in str(test.get("output", "")).splitlines():
                if line.startswith(EVERY_FAILED):
                    return line.removeprefix(EVERY_FAILED).split(";", 1)[0].strip()
    return "the submission could not be imported"


def _findings(tests: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The diagnosis's findings of a root's kept cases (their labels, in order), when it
    named the cause of every kept case that has wrong fields; else ()."""
    labels: dict[str, None] = {}
    for test in tests:
        for case in _kept(test):
            if "error" in case:
                continue
            found = case.get("findings")
            if not isinstance(found, Mapping) or not found:
                return ()
            labels.update(dict.fromkeys(str(label) for label in found.values()))
    return tuple(labels)


def _first_case(tests: Sequence[Mapping[str, Any]]) -> str:
    """The first failed case, as a reader would look for it."""
    for test in tests:
        for case in _kept(test):
            if "error" in case or _pairs(case):
                return _shown_case(test, case, "")
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


def _field_hint(tests: Sequence[Mapping[str, Any]], name: str) -> str:
    """The grader's hint under a line of the field ``name`` in the tests' output."""
    for test in tests:
        lines = [line.strip() for line in str(test.get("output", "")).splitlines()]
        for line, following in zip(lines, lines[1:], strict=False):
            if line.startswith((f"{name}:", f"{name}[")) and following.startswith("hint:"):
                return following.removeprefix("hint:").strip()
    return ""


def _inputs(function: str, case: Mapping[str, Any]) -> dict[str, float]:
    """A kept case's inputs, positional ones also by the reference's parameter names."""
    raw = case.get("inputs")
    inputs = {str(k): number for k, v in raw.items() if (number := _float(v)) is not None} \
        if isinstance(raw, Mapping) else {}
    for index, name in enumerate(parameter_names(function)):
        if f"arg{index}" in inputs:
            inputs.setdefault(name, inputs[f"arg{index}"])
    return inputs


def _error_fits(mistake: Mistake, kept: Sequence[Mapping[str, Any]]) -> bool:
    errors = [case["error"] for case in kept if "error" in case]
    return bool(errors) and all(error == mistake.error for error in errors)


def _note(found: Cluster, catalogue: Sequence[Mistake]) -> str:
    """The label of a cluster the catalogue does not name: for a knock-on whose root
    passed its own tests, the function to fix first (and its catalogued error, when the
    errors match one); else nothing."""
    kept = [case for _, case in found.kept]
    called = callees(found.function)
    for mistake in catalogue:
        if mistake.function in called and mistake.error and _error_fits(mistake, kept):
            return f"knock-on of {mistake.label} (in {mistake.function})"
    root = _ROOT_CAUSE.search(found.hint)
    if root is not None:
        return f"knock-on of a wrong {root.group(1)}: fix it first"
    return ""


_ROOT_CAUSE = re.compile(r"^your \w+ uses your .*: fix (\w+) first$")
