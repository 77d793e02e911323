"""Checking cases and invariants against a student, with feedback a student can act on."""

from __future__ import annotations

import collections
import contextlib
import json
import math
import re
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

from graders.escaping import single_line
from graders.grading.cases import RESULT_FIELDS, Case
from graders.grading.compare import Difference, Tolerance, compare, type_name
from graders.grading.credit import (
    NOT_IMPLEMENTED,
    FunctionEvidence,
    answer_key,
    case_nontrivial_fields,
    trivial_refusal,
)
from graders.grading.diagnosis import (
    DERIVATIONS,
    Diagnosis,
    base_field,
    case_inputs,
    catalogue,
    diagnose,
    error_hint,
    error_knock_on,
    error_name,
)
from graders.grading.feedback_layout import (
    HANGS,
    CaseCounts,
    FailedCase,
    FeedbackParts,
    cases_that_fit,
    cause_of,
    informative_order,
    more_cases_line,
)
from graders.grading.function_diagnosis import FunctionDiagnosis
from graders.sandbox.runner import CallOutcome, CallRequest, StudentRunner
from graders.sandbox.wire import MAPPING, TUPLE, encode_argument

#: Failed cases spelled out in one test's feedback, at most; the rest are counted. Fewer
#: are when they do not fit in :data:`MAX_FEEDBACK_CHARS`: the list is cut, never a case.
MAX_CASES_SHOWN = 4
#: Characters of one student value, and of one test's whole feedback, that are shown.
MAX_VALUE_CHARS = 120
MAX_FEEDBACK_CHARS = 4000
#: Characters of a case's heading (its call).
MAX_HEADING_CHARS = 2 * MAX_VALUE_CHARS
#: Characters of a call failure's reason, and of a test's one-line summary.
MAX_REASON_CHARS = 300
#: Failed cases of one visible test whose values are kept for the class report's mistake
#: clusters (``failed_cases`` in the test's extra_data).
MAX_CASES_KEPT = 8
#: Wrong fields kept of one case, and characters of one non-numeric value kept there
#: (with the cases, a bound well under a results.json's reserved space).
MAX_FIELDS_KEPT = 6
MAX_KEPT_CHARS = 24
#: Characters of a finding's label kept with a failed case (the class page's cluster).
MAX_FINDING_CHARS = 160
#: The contract functions each function calls, per the lab: when one of them is wrong,
#: its callers' failures start there.
DEPENDS_ON: dict[str, tuple[str, ...]] = {
    "queueing_latency": ("erlang_c",),
    "batching_tax": ("queueing_latency",),
    "cache_capacity": ("transformer_state_gb",),
    "serving_track_profile": ("quantity_to_float",),
}


class GradingFailure(AssertionError):
    """Some of a test's cases failed; the message is the student's feedback, ``summary``
    its one line (for pytest's short summary)."""

    def __init__(self, feedback: str, summary: str = "", full: str = "",
                 parts: FeedbackParts | None = None) -> None:
        super().__init__(feedback)
        self.summary = summary or feedback.split("\n", 1)[0]
        #: The feedback with nothing cut, for the HTML page.
        self.full = full or feedback
        #: A visible test's feedback in parts, for the terminal (None for a hidden test).
        self.parts = parts


class StudentCallFailed(AssertionError):
    """A student call raised, crashed, hung or returned garbage."""


@dataclass
class Tally:
    """Cases run and passed by one test, and the feedback of the failures."""

    total: int = 0
    passed: int = 0
    failures: list[str] = field(default_factory=list)
    #: The first failed cases' inputs and values, as plain JSON (see :func:`kept_case`).
    kept: list[dict[str, Any]] = field(default_factory=list)
    #: The share of the passed cases' points that the function's unseen inputs confirm.
    share: Fraction = Fraction(1)

    def record(self, ok: bool, feedback: str = "") -> None:
        self.total += 1
        if ok:
            self.passed += 1
        elif feedback:
            self.failures.append(feedback)


#: How far back from the limit a cut looks for a word boundary.
WORD_BOUNDARY_REACH = 40


def shortened(text: str, limit: int | None) -> str:
    """``text`` cut to at most ``limit`` characters (None: never), at a word boundary
    where one is near, with a visible marker when cut."""
    if limit is None or len(text) <= limit:
        return text
    space = max(text.rfind(" ", 0, limit + 1), text.rfind("\n", 0, limit + 1))
    end = space if space > 0 and space >= limit - WORD_BOUNDARY_REACH else limit
    kept = text[:end].rstrip()
    return f"{kept}… [cut: {len(text) - len(kept)} more characters]"


def _number(value: Any, limit: int | None = MAX_VALUE_CHARS) -> str:
    if isinstance(value, float):
        if math.isinf(value) or math.isnan(value):
            return str(value)
        return f"{value:.10g}"
    if isinstance(value, dict) and len(value) == 1:
        return shortened(f"<{next(iter(value.values()))}>", limit)
    return shortened(repr(value), limit)


def describe_difference(difference: Difference, *, hint: str | None = None,
                        follows: str | None = None,
                        value_chars: int | None = MAX_VALUE_CHARS) -> str:
    """A wrong field's line: expected, got, errors and tolerance, then its ``hint`` on a
    line of its own; a knock-on's says the field it ``follows`` from instead (and has no
    hint). Values cut to ``value_chars`` characters (None: never)."""
    line = (f"  {difference.field}: expected {_number(difference.expected, value_chars)}, "
            f"got {_number(difference.actual, value_chars)} - ")
    if follows is not None:
        return f"{line}follows from {follows}"
    line += difference.reason
    if difference.abs_error is not None and difference.rel_error is not None:
        line += f"; abs error {difference.abs_error:.3g}, rel error {difference.rel_error:.3g}"
    return f"{line}\n    hint: {hint}" if hint else line


def case_lines(message: str, differences: Sequence[Difference], diagnosis: Diagnosis, *,
               hints: bool = True, value_chars: int | None = MAX_VALUE_CHARS,
               reason_chars: int | None = MAX_REASON_CHARS) -> list[str]:
    """A failed case's lines under its heading: a failed call's reason and its hint, or
    the root fields, each with its hint, then the knock-ons (no hints when ``hints`` is
    False: a wrong function it depends on is the likelier cause)."""
    if message:
        lines = [f"  {shortened(message, reason_chars)}"]
        return lines + ([f"    hint: {diagnosis.error_hint}"]
                        if hints and diagnosis.error_hint else [])
    ordered = ordered_differences(differences, diagnosis)
    return [describe_difference(
        d, hint=diagnosis.hints.get(base_field(d.field)) if hints else None,
        follows=diagnosis.follows.get(base_field(d.field)), value_chars=value_chars)
        for d in ordered]


def ordered_differences(differences: Sequence[Difference], diagnosis: Diagnosis
                        ) -> list[Difference]:
    """The wrong fields as a case shows them: the root fields first, then the knock-ons."""
    return sorted(differences, key=lambda d: base_field(d.field) in diagnosis.follows)


def _short_number(value: Any) -> str:
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:.5g}"
    return _number(value)


def failed_call_message(outcome: CallOutcome) -> str:
    """Why a call produced no value, in a student's words (an exception is named as
    raised; the grader's own reasons, e.g. a missing function, are not)."""
    message = single_line(outcome.message.split("\n", 1)[0]
                          if outcome.status == "unimportable" else outcome.message)
    hang = hang_message(outcome.status, message)
    if hang is not None:
        return hang
    if outcome.status == "raised":
        if message.startswith("NotImplementedError"):
            return f"{NOT_IMPLEMENTED} ({message})"
        if not message.startswith("serving.py"):
            return f"raised {message}"
    return message


#: The runner's words for a call stopped at the per-call deadline, and for a function no
#: longer called after too many of them.
_TIMED_OUT = re.compile(r"timed out after (?P<seconds>\S+) s")
_NO_MORE_CALLS = re.compile(r"\w+\(\) is not called again: it exceeded the per-call "
                            r"deadline (?P<count>\d+) times")


def hang_message(status: str, message: str) -> str | None:
    """A hanging call said as one event, whether it was stopped at the deadline or not made
    since (:data:`HANGS` and what happened), or None for any other failure."""
    if status == "timeout" and (timed_out := _TIMED_OUT.fullmatch(message)):
        return f"{HANGS}stopped at the per-call deadline, after {timed_out['seconds']} s"
    if status == "abandoned" and (refused := _NO_MORE_CALLS.fullmatch(message)):
        return (f"{HANGS}not called again, after {refused['count']} calls stopped at the "
                "per-call deadline")
    return None


def _kept_value(value: Any) -> Any:
    """A value as JSON keeps it: finite numbers, booleans and None as they are, infinities
    and NaN as text, anything else by a short description."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return value[:MAX_KEPT_CHARS]
    if isinstance(value, list | tuple):
        return "sequence"
    return type_name(value)[:MAX_KEPT_CHARS]


def kept_case(case: Case, outcome: CallOutcome, differences: Iterable[Difference],
              expected: Any = None) -> dict[str, Any]:
    """A failed case as plain data for the class report: its id, its numeric inputs
    (positional ones as ``arg0``, ``arg1``, ...), and either each wrong field's
    ``[expected, got]`` (the first :data:`MAX_FIELDS_KEPT`) or the error (an exception's
    name, or how the call failed); with them, as ``sources``, the reference's values of the
    right fields a wrong one is computed from (see :data:`DERIVATIONS`), which a
    catalogue entry may use (the warm pool dropped from the exposed latency)."""
    inputs = {f"arg{index}": value for index, value in enumerate(case.args)}
    inputs.update(case.kwargs)
    kept: dict[str, Any] = {
        "case": case.case_id,
        "inputs": {name: value for name, value in inputs.items()
                   if isinstance(value, int | float) and not isinstance(value, bool)
                   and math.isfinite(value)}}
    if not outcome.ok:
        message = outcome.message.strip()
        name = message.split(":", 1)[0] if outcome.status == "raised" else outcome.status
        kept["error"] = name[:MAX_KEPT_CHARS] if name.isidentifier() else outcome.status
    else:
        kept["fields"] = {d.field: [_kept_value(d.expected), _kept_value(d.actual)]
                          for d in list(differences)[:MAX_FIELDS_KEPT]}
        sources = _sources(case.function, kept["fields"], expected)
        if sources:
            kept["sources"] = sources
    return kept


def _sources(function: str, wrong: Iterable[str], expected: Any) -> dict[str, Any]:
    """The reference's numeric values of the fields the ``wrong`` ones are computed from,
    and of those a catalogue entry for a wrong one names (``p95_latency_ms`` under a p99
    taken at q = 0.95), but for the wrong ones themselves."""
    if not isinstance(expected, Mapping):
        return {}
    names = {base_field(name) for name in wrong}
    table = DERIVATIONS.get(function, {})
    wanted = [source for name in sorted(names)
              for derivation in table.get(name, ()) for source in derivation.sources]
    wanted += sorted({source for mistake in catalogue()
                      if mistake.function == function and mistake.field in names
                      for source in mistake.fields_used()})
    return {source: _kept_value(expected[source]) for source in wanted
            if source not in names and isinstance(expected.get(source), int | float)
            and not isinstance(expected.get(source), bool)}


def missed_case(case: Case, outcome: CallOutcome, differences: list[Difference]) -> str:
    """A failed case in a few words: which, on which track, and what was wrong, e.g.
    ``case 'defaults' [cloud_fleet]: value expected 0.33554, got 0.16777``."""
    where = f"case {case.case_id!r}" + (f" [{case.track_id}]" if case.track_id else "")
    if not outcome.ok:
        return f"{where}: {shortened(failed_call_message(outcome), MAX_VALUE_CHARS)}"
    first = differences[0] if differences else None
    if first is None:
        return where
    return (f"{where}: {first.field} expected {_short_number(first.expected)}, "
            f"got {_short_number(first.actual)}")


def shown_fields(differences: Sequence[Difference], diagnosis: Diagnosis, *, hints: bool
                 ) -> list[tuple[str, str, str]]:
    """A wrong answer's entries as the terminal and Gradescope show them, each ``(fields,
    why, text)``: one per root field (its expected-versus-got line and its hint), then one
    line per root naming the fields that follow from it (their values are on the page)."""
    ordered = ordered_differences(differences, diagnosis)
    roots = [d for d in ordered if base_field(d.field) not in diagnosis.follows]
    entries = [(d.field, d.reason, line) for d, line in
               zip(roots, case_lines("", roots, diagnosis, hints=hints), strict=True)]
    following: dict[str, list[str]] = {}
    for difference in ordered[len(roots):]:
        following.setdefault(diagnosis.follows[base_field(difference.field)],
                             []).append(difference.field)
    for root, fields in following.items():
        # the same cause whichever fields follow (a case far from saturation has fewer)
        entries.append((f"following from {root}", "follows",
                        f"  {', '.join(fields)}: wrong too, following from {root}"))
    return entries


def failed_case(heading: str, message: str, function: str,
                entries: Sequence[tuple[str, str, str]], error_hint: str | None = None
                ) -> FailedCase:
    """A failed case as shown: its heading and a failed call's reason shortened, and its
    ``entries`` (see :func:`shown_fields`) whole; a failed call's ``error_hint`` on a line
    of its own."""
    lines = [text for *_, text in entries]
    cause = cause_of(function, message, entries)
    if message and error_hint:
        lines.append(f"    hint: {error_hint}")
    return FailedCase(shortened(heading, MAX_HEADING_CHARS),
                      shortened(message, MAX_REASON_CHARS), tuple(lines), cause)


def root_cause(function: str, wrong: Callable[[str], bool],
               unwritten: Callable[[str], bool] = lambda name: False) -> str | None:
    """The line that sends a student to the contract function ``function`` depends on
    when that one is ``wrong`` too (the deepest wrong one of the chain), else None; None
    too when ``function`` itself is ``unwritten`` (not implemented: there is nothing to
    blame on its dependencies), and an unwritten culprit is called so, never wrong."""
    if unwritten(function):
        return None
    chain = [function, *callees(function)]
    culprit = None
    for length, callee in enumerate(chain[1:], start=2):
        if wrong(callee):
            culprit = length
    if culprit is None:
        return None
    uses = ", which uses your ".join(chain[1:culprit])
    blamed = chain[culprit - 1]
    if unwritten(blamed):
        return (f"your {function} uses your {uses}, which is {NOT_IMPLEMENTED}: "
                f"write {blamed} first")
    return f"your {function} uses your {uses}, which is wrong for these inputs: fix {blamed} first"


def callees(function: str) -> list[str]:
    """The contract functions ``function`` calls, directly or not (per the lab)."""
    chain = [function]
    while DEPENDS_ON.get(chain[-1]):
        chain.append(DEPENDS_ON[chain[-1]][0])
    return chain[1:]


class CaseSource(Protocol):
    """Where a test's cases get their answers, expected values and function verdicts."""

    def expected(self, case: Case) -> Any: ...

    def outcome(self, case: Case) -> CallOutcome: ...

    def evidence(self, function: str) -> FunctionEvidence: ...

    def confirmation(self, function: str) -> tuple[Fraction, str | None]: ...

    def diagnosis(self, function: str) -> FunctionDiagnosis | None:
        """The diagnosis of ``function`` across its visible cases (None: a hidden test's
        cases, which are diagnosed one at a time)."""


class Grading:
    """Runs one test's cases against the student and keeps its :class:`Tally`.

    A case that expects a trivial value (see :mod:`graders.grading.credit`) counts only once its
    function passes a non-trivial case; a function that answers everything the same way
    counts nothing.
    """

    def __init__(self, source: CaseSource, tolerance: Tolerance, *, label: str,
                 hidden: bool, per_track: bool = False) -> None:
        self._source = source
        self._tolerance = tolerance
        self._label = label
        self._hidden = hidden
        #: A test of one track: its counts say so (see :meth:`CaseCounts.text`).
        self._tracks = 1 if per_track else 0
        self._notes: list[str] = []
        self._root_cause: str | None = None
        self._first_problem = ""
        #: Each failed case's feedback uncut, for the HTML page.
        self._full_failures: list[str] = []
        #: Each failed case as shown (values shortened), in the order run.
        self._cases: list[FailedCase] = []
        #: Right answers that do not count (yet): trivial ones held back, or a constant's.
        self._held = 0
        self.tally = Tally()

    def check(self, cases: Iterable[Case]) -> None:
        """Check every case; raise :class:`GradingFailure` with feedback if any failed."""
        trivial_passes = 0
        functions: set[str] = set()
        failed: list[tuple[str, str, str, list[Difference], Diagnosis]] = []
        callee_only = True  # every failed case follows from a function it calls
        for case in cases:
            functions.add(case.function)
            expected = self._source.expected(case)
            ok, failure = self._check_one(case, expected)
            if ok and not case_nontrivial_fields(case, expected):  # a trivial case
                trivial_passes += 1
                self.tally.total += 1
            else:
                self.tally.record(ok)
                if failure is not None:
                    failed.append(failure)
                    callee_only = callee_only and self._follows_callee(case)
        if failed and callee_only:  # asks the functions it depends on only then
            causes = [root_cause(function, lambda f: self._source.evidence(f).wrong,
                                 lambda f: self._source.evidence(f).not_implemented)
                      for function in sorted(functions)]
            causes += [diagnosis.knock_on for *_, diagnosis in failed]
            self._root_cause = next((cause for cause in causes if cause), None)
        hints = self._root_cause is None
        for heading, message, function, differences, diagnosis in failed:
            shown = failed_case(heading, message, function,
                                shown_fields(differences, diagnosis, hints=hints),
                                diagnosis.error_hint if hints else None)
            self._cases.append(shown)
            self.tally.failures.append(shown.text())
            self._full_failures.append("\n".join([
                heading, *case_lines(message, differences, diagnosis, hints=hints,
                                     value_chars=None, reason_chars=None)]))
            if self._hidden and hints and diagnosis.error_hint \
                    and f"hint: {diagnosis.error_hint}" not in self._notes:
                self._notes.append(f"hint: {diagnosis.error_hint}")
        for function in sorted(functions):
            evidence = self._source.evidence(function)
            reason = trivial_refusal(function, evidence)
            if evidence.constant:
                self._held += self.tally.passed + trivial_passes
                self.tally.passed = 0
                trivial_passes = 0
            if reason is not None and (trivial_passes or evidence.constant
                                       or evidence.wrong_shape):
                self._notes.append(reason)
                if evidence.wrong_shape:  # the one cause of every failure: said first
                    self._first_problem = reason
            if not evidence.earns_trivial_cases:
                self._held += trivial_passes
                trivial_passes = 0
        self.tally.passed += trivial_passes
        self._confirm(functions)
        if self.tally.passed < self.tally.total or self.tally.share < 1:
            raise GradingFailure(self.feedback(), self.summary(), self._feedback(full=True),
                                 None if self._hidden else self.parts())

    def _diagnosis_of(self, function: str) -> FunctionDiagnosis | None:
        return None if self._hidden else self._source.diagnosis(function)

    def _case_diagnosis(self, case: Case) -> Diagnosis | None:
        """A failed visible case's causes, from its function's diagnosis."""
        diagnosis = self._diagnosis_of(case.function)
        return None if diagnosis is None else diagnosis.cases.get(case.key)

    def _follows_callee(self, case: Case) -> bool:
        """Whether every wrong value of a failed ``case`` follows from a function its
        function calls (a hidden case: whenever such a function is wrong, as before its
        diagnosis could tell)."""
        diagnosis = self._diagnosis_of(case.function)
        return diagnosis is None or case.key not in diagnosis.cases or \
            case.key in diagnosis.callee_only

    def _confirm(self, functions: set[str]) -> None:
        """Scale a visible test by what its functions' unseen inputs confirm."""
        if self._hidden or not self.tally.passed:
            return
        for function in sorted(functions):
            share, note = self._source.confirmation(function)
            self.tally.share = min(self.tally.share, share)
            if note is not None:
                self._notes.append(note)

    def _check_one(self, case: Case, expected: Any
                   ) -> tuple[bool, tuple[str, str, str, list[Difference], Diagnosis] | None]:
        """Whether ``case`` passed and, when it failed, its heading, a failed call's
        reason ("" for a wrong answer), its function, wrong fields (uncut) and causes."""
        outcome = self._source.outcome(case)
        heading = f"case {case.case_id!r}: {case.describe_inputs()}"
        if not outcome.ok:
            self._keep(case, outcome, ())
            message = failed_call_message(outcome)
            self._first_problem = self._first_problem or shortened(message, MAX_REASON_CHARS)
            error = error_name(outcome.message) if outcome.status == "raised" else ""
            found = self._case_diagnosis(case)
            diagnosis = found if found is not None else Diagnosis(
                error_hint=error_hint(case.function, error),
                knock_on=error_knock_on(case.function, error, callees(case.function)))
            return False, (heading, message, case.function, [], diagnosis)
        differences = compare(expected, outcome.value, self._tolerance)
        if not differences:
            return True, None
        first = differences[0]
        self._first_problem = self._first_problem or (
            f"{first.field} expected {_short_number(first.expected)}, "
            f"got {_short_number(first.actual)}")
        found = self._case_diagnosis(case)
        diagnosis = found if found is not None else diagnose(
            case.function, case_inputs(case.function, case.args, case.kwargs), expected,
            outcome.value, [d.field for d in differences])
        self._keep(case, outcome, differences, expected, self._findings(case, diagnosis))
        return False, (heading, "", case.function, list(differences), diagnosis)

    def _findings(self, case: Case, diagnosis: Diagnosis) -> dict[str, str]:
        """The named findings of a visible case's root fields, by field: the class page's
        clusters (:mod:`graders.regrade.clusters`)."""
        found = self._diagnosis_of(case.function)
        if found is None:
            return {}
        return {name: shortened(finding.label, MAX_FINDING_CHARS)
                for name in list(diagnosis.hints)[:MAX_FIELDS_KEPT]
                if (finding := found.findings.get(name)) is not None and finding.named}

    def _keep(self, case: Case, outcome: CallOutcome, differences: Iterable[Difference],
              expected: Any = None, findings: Mapping[str, str] | None = None) -> None:
        """Keep a failed case's values for the class report. Of a hidden case only the
        name of the error it raised is kept: its inputs and expected values stay here."""
        if len(self.tally.kept) >= MAX_CASES_KEPT:
            return
        kept = kept_case(case, outcome, differences, expected)
        if findings:
            kept["findings"] = dict(findings)
        if not self._hidden:
            self.tally.kept.append(kept)
        elif "error" in kept:
            self.tally.kept.append({"case": "hidden", "error": kept["error"]})

    def summary(self) -> str:
        """The failure in one line: cases failed and the first problem (or the root
        cause), e.g. ``11 of 13 cases failed: p99_latency_ms expected 132.87, got 80.77``."""
        counts = self._counts()
        if self._hidden:
            return f"{counts} (hidden cases)"
        reason = self._root_cause or self._first_problem or "; ".join(self._notes)
        return shortened(f"{counts}: {reason}" if reason else counts, MAX_REASON_CHARS)

    def _counts(self) -> str:
        """``3 of 13 cases failed`` (see :meth:`CaseCounts.text`)."""
        return self._case_counts().text(self._tracks)

    def _case_counts(self) -> CaseCounts:
        tally = self.tally
        return CaseCounts(tally.total - tally.passed - self._held, tally.total, self._held)

    def _notes_first(self) -> list[str]:
        """The lines said before the cases: the root cause, then the notes."""
        return [*([self._root_cause] if self._root_cause else []), *self._notes]

    def parts(self) -> FeedbackParts:
        """The feedback in parts, for the terminal (see :class:`FeedbackParts`)."""
        return FeedbackParts(self._case_counts(), self._tolerance.describe(),
                             tuple(self._notes_first()), tuple(self._cases))

    def feedback(self) -> str:
        """The failure summary: counts always, details only for visible tests; never more
        than :data:`MAX_FEEDBACK_CHARS` characters."""
        return shortened(self._feedback(), MAX_FEEDBACK_CHARS)

    def _feedback(self, *, full: bool = False) -> str:
        """The feedback text; ``full``: every failed case, nothing cut (the HTML page).
        Otherwise the most informative cases first (:func:`informative_order`), as many as
        fit in :data:`MAX_FEEDBACK_CHARS` (up to :data:`MAX_CASES_SHOWN`), each whole."""
        summary = f"{self._label}: {self._counts()} (tolerance {self._tolerance.describe()})"
        notes = self._notes_first()
        if self._hidden:
            return "\n".join([summary + "; the cases of this test are hidden.", *notes])
        failures = self._full_failures if full else self.tally.failures
        reasons = {failure.split("\n", 1)[-1] for failure in failures}
        if len(reasons) == 1 and len(failures) > 1:
            only = next(iter(reasons)).strip()
            return "\n".join([summary, *notes, f"every failed case: {only}"])
        if full:
            return "\n".join([summary, *notes, *failures])
        shown = [case.text() for case in informative_order(self._cases)]
        room = MAX_FEEDBACK_CHARS - len("\n".join([summary, *notes, *more_cases_line(
            len(shown))])) - 1
        count = cases_that_fit(shown, room, most=MAX_CASES_SHOWN)
        return "\n".join([summary, *notes, *shown[:count],
                          *more_cases_line(len(shown) - count)])


@dataclass(frozen=True)
class Explanation:
    """What is known of a falsified invariant example: words that end its message's line
    (``suffix``), and lines of their own under it."""

    suffix: str = ""
    lines: tuple[str, ...] = ()


NO_EXPLANATION = Explanation()


class Answer:
    """A student call asked through :meth:`Student.ask`: made with every call asked before
    it, pipelined, when its value is first read."""

    __slots__ = ("_student", "function", "args", "kwargs", "encoded", "asked", "sent",
                 "outcome")

    def __init__(self, student: Student, function: str, args: tuple[Any, ...],
                 kwargs: dict[str, Any], asked: str,
                 encoded: tuple[list[Any], dict[str, Any]]) -> None:
        self._student = student
        self.function = function
        self.args = args
        self.kwargs = kwargs
        #: ``args`` and ``kwargs`` as the worker receives them.
        self.encoded = encoded
        #: The call's inputs as plain JSON (the key of "same input, same answer").
        self.asked = asked
        #: Whether it is in the pipeline, waiting for its answer to be read.
        self.sent = False
        #: What the call produced, once made.
        self.outcome: CallOutcome | None = None

    @property
    def value(self) -> Any:
        """The call's plain result, or :class:`StudentCallFailed`."""
        return self._student.value_of(self)

    def real(self, field_name: str) -> float:
        """The result's field ``field_name`` as a real number, or a failed assertion."""
        return self._student.real(self.function, field_name, self.value)


class Student:
    """The student's functions for one invariant test: plain data back, or a failed assertion.

    Calls are asked first (:meth:`ask`) and sent when an answer is first read: every call
    asked by then goes to the worker in one pipeline, in the order asked, and each answer
    is read when it is needed, so a test that asks all of its examples' calls before it
    checks them costs one round trip, not one per call, and checks while the worker
    computes. A pipeline stops at its first failed call (its answer fails the check that
    reads it); the calls after it are sent again only if read. :meth:`settle` ends the
    pipeline when the test is done.

    ``gate`` says why the test's function has not earned its invariants (None when it
    has). The same input must always get the same answer. ``explain`` reads the answers of
    a falsifying example and says what is known of them: the lab's values beside the
    student's, and the failing cases they follow from (:meth:`explanation`).
    """

    def __init__(self, runner: StudentRunner, *, test_name: str = "",
                 gate: Callable[[], str | None] = lambda: None,
                 record: Callable[[str], None] = lambda asked: None,
                 explain: Callable[[Sequence[Answer]], Explanation] = lambda answers: NO_EXPLANATION
                 ) -> None:
        self._runner = runner
        self._gate = gate
        self._record = record
        self._explain = explain
        #: Where the calls asked now are also kept (:meth:`collecting`), if anywhere.
        self._collected: list[Answer] | None = None
        #: The first answer to each input asked (compared with any later one).
        self._answers: dict[str, Any] = {}
        #: Calls asked and not sent yet, and calls sent and not answered yet, in order.
        self._unsent: list[Answer] = []
        self._sent: collections.deque[Answer] = collections.deque()
        self._outcomes: Generator[CallOutcome, None, None] | None = None
        self.test_name = test_name

    def require_real_answers(self) -> None:
        """Fail the test unless its function has earned its invariants."""
        reason = self._gate()
        if reason is not None:
            raise StudentCallFailed(reason)

    def ask(self, function: str, *args: Any, **kwargs: Any) -> Answer:
        """Ask for ``function(*args, **kwargs)``; the call is made when its answer is read.

        Every input asked is passed to ``record`` first (the run's digest of its inputs)."""
        encoded = ([encode_argument(arg) for arg in args],
                   {key: encode_argument(value) for key, value in kwargs.items()})
        # as encode_argument(args) and encode_argument(kwargs) would encode them
        asked = json.dumps([function, {TUPLE: encoded[0]}, {MAPPING: encoded[1]}],
                           sort_keys=True)
        self._record(f"{self.test_name}\n{asked}\n")
        answer = Answer(self, function, args, kwargs, asked, encoded)
        self._unsent.append(answer)
        if self._collected is not None:
            self._collected.append(answer)
        return answer

    @contextlib.contextmanager
    def collecting(self) -> Iterator[list[Answer]]:
        """Within: every call asked is also put in the list it gives (one example's)."""
        outer, self._collected = self._collected, []
        try:
            yield self._collected
        finally:
            self._collected = outer

    def explanation(self, answers: Sequence[Answer]) -> Explanation:
        """What is known of a falsifying example's ``answers``: only answers already made
        are read, so explaining calls nothing."""
        made = [answer for answer in answers if answer.outcome is not None]
        return self._explain(made) if made else NO_EXPLANATION

    def call(self, function: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``function`` now; return its plain result, or raise
        :class:`StudentCallFailed` (an instructor's own tests call the student this way)."""
        return self.ask(function, *args, **kwargs).value

    def value_of(self, answer: Answer) -> Any:
        """``answer``'s plain result (making it and every call asked before it first), or
        :class:`StudentCallFailed`."""
        while answer.outcome is None:
            if answer.sent:
                self._next_outcome()
            else:
                self.settle()
                self._send_asked()
        outcome = answer.outcome
        if not outcome.ok:
            shown = ", ".join([*map(argument_text, answer.args),
                               *(f"{k}={argument_text(v)}" for k, v in answer.kwargs.items())])
            reason = shortened(failed_call_message(outcome), MAX_REASON_CHARS)
            raise StudentCallFailed(f"{reason}, in {answer.function}({shown})")
        first = self._answers.setdefault(answer.asked, outcome.value)
        if first is not outcome.value and answer_key(first) != answer_key(outcome.value):
            raise StudentCallFailed(f"{answer.function} gave different answers to the same "
                                    "input (its results must depend on its inputs only)")
        return outcome.value

    def _send_asked(self) -> None:
        """Send every call asked and not sent yet, in one pipeline; their answers are read
        as they are needed, so the checks of the first run while the worker computes the
        next."""
        self._sent, self._unsent = collections.deque(self._unsent), []
        for answer in self._sent:
            answer.sent = True
        self._outcomes = self._call_many([
            CallRequest(answer.function, answer.args, answer.kwargs,
                        RESULT_FIELDS[answer.function], answer.encoded)
            for answer in self._sent])

    def _next_outcome(self) -> None:
        """Read the next sent call's outcome; after a failed one, stop the pipeline (the
        calls sent after it are asked again if they are read)."""
        assert self._outcomes is not None
        answer = self._sent.popleft()
        answer.sent = False
        answer.outcome = next(self._outcomes)
        if not answer.outcome.ok:
            self.settle()

    def settle(self) -> None:
        """Stop the pipeline: the replies of the calls written are read and dropped, and the
        calls sent but not answered go back to the asked ones, in their order. Called once
        a test is done with its answers, before anything else uses the worker."""
        outcomes, self._outcomes = self._outcomes, None
        if outcomes is not None:
            outcomes.close()
        for answer in self._sent:
            answer.sent = False
        self._unsent = [*self._sent, *self._unsent]
        self._sent.clear()

    def _call_many(self, requests: list[CallRequest]) -> Generator[CallOutcome, None, None]:
        """The outcomes of ``requests``, in order, from the worker (pipelined)."""
        return self._runner.call_many(requests)

    def real(self, function: str, field_name: str, value: Any) -> float:
        """``value`` if it is a real number, else a failed assertion naming the field."""
        if isinstance(value, dict):
            value = value.get(field_name, {"$missing": field_name})
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise StudentCallFailed(
                f"{function}: {field_name} must be a real number, got {_number(value)}")
        if math.isnan(value):
            raise StudentCallFailed(f"{function}: {field_name} is NaN")
        return float(value)


def argument_text(value: Any) -> str:
    """An argument as the lab names it: a track's objects by track, numbers exactly as
    passed (``2.0`` a float, ``2`` an int, as a case's heading writes them)."""
    for attribute, kind in (("track_id", "profile"), ("name", "model")):
        label = getattr(value, attribute, None)
        if isinstance(label, str):
            return f"<{kind} {label}>"
    if isinstance(value, int | float | str | bool) or value is None:
        return repr(value)
    return f"<{type(value).__name__}>"
