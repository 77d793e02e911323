"""One grading run's state: settings, tracks, the student runner and the scores so far."""

from __future__ import annotations

import collections
import hashlib
import sys
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from graders.expected.oracle import Oracle, ReferenceOracle, choose_oracle
from graders.grading.cases import CONTRACT_FUNCTIONS, Case, visible_cases
from graders.grading.checks import failed_call_message, missed_case
from graders.grading.compare import compare
from graders.grading.credit import (
    FunctionEvidence,
    case_nontrivial_fields,
    field_of,
    invariant_refusal,
)
from graders.grading.diagnosis import case_inputs
from graders.grading.feedback_layout import FeedbackParts
from graders.grading.finders import Observed
from graders.grading.function_diagnosis import FunctionDiagnosis, diagnose_function
from graders.grading.probes import probe_of
from graders.grading.scoring import TestScore, on_grid
from graders.grading.unseen import (
    DEFAULT_UNSEEN,
    UnseenEvidence,
    confirmation,
    confirmation_note,
    fields_move,
    inputs_key,
    seed,
    unseen_cases,
    unseen_refusal,
)
from graders.plugin.experiments import WorkerLab, answer_of, probe_answers
from graders.plugin.settings import Settings
from graders.plugin.submission import locate_submission, read_submission
from graders.results.classroom import classroom_results
from graders.results.essentials import essentials_html
from graders.results.files import Reservation
from graders.results.fitting import fitted
from graders.results.metadata import submission_extra
from graders.results.reports import (
    grader_failure,
    grader_failure_results,
    gradescope_results,
    partial_run,
    validated_results,
    write_json_atomically,
)
from graders.sandbox.interrupts import deferred_signals
from graders.sandbox.limits import DEFAULT_SANDBOX_USER
from graders.sandbox.platforms import running_as_root
from graders.sandbox.privileges import (
    SandboxUser,
    claim_sandbox_user,
    close_to_others,
    protected_folders,
)
from graders.sandbox.runner import CallOutcome, CallRequest, StudentRunner
from graders.sandbox.seats import Seat, claim_seat, seated
from graders.units import registry
from graders.versions import grading_versions

#: Bytes held for results.json: it stays under 1 MiB whatever a submission returns.
RESULTS_RESERVATION_BYTES = 2 * 1024**2

if TYPE_CHECKING:
    from graders.feedback.page import FeedbackReport
    from graders.trackfiles.tracks import Track


class Verdict(NamedTuple):
    """One case judged: its expected value, whether it passed, how many of its non-trivial
    values were right, and whether computing nothing could pass it."""

    expected: Any
    passed: bool
    values_right: int
    trivial: bool
    #: The wrong fields (none when the call failed or passed).
    differences: list[Any]


@dataclass
class GradingSession:
    """Everything one run of the grading suite shares between its tests."""

    settings: Settings
    tracks: tuple[Track, ...]
    runner: StudentRunner
    started: float = field(default_factory=time.monotonic)
    scores: dict[str, TestScore] = field(default_factory=dict)
    oracle: Oracle = field(default_factory=ReferenceOracle)
    #: The submission's source, for the fresh worker of the hidden tests.
    submission: bytes = b""
    #: Answers to cases already asked, by ("hidden" or "visible", case key).
    outcomes: dict[tuple[str, str], CallOutcome] = field(default_factory=dict)
    evidences: dict[str, FunctionEvidence] = field(default_factory=dict)
    #: The visible cases of the run's tracks, by function, in suite order (made once).
    cases_by_function: dict[str, list[Case]] = field(default_factory=dict)
    #: The worker of the hidden tests, started after every visible call was made.
    hidden_runner: StudentRunner | None = None
    #: What the submission printed during the visible tests of each function (a
    #: function's first test asks all of its visible cases at once), by function.
    printed: dict[str, str] = field(default_factory=dict)
    #: Each failed visible test's feedback with nothing cut, by node id (the HTML page).
    full_outputs: dict[str, str] = field(default_factory=dict)
    #: Each failed visible test's feedback in parts, by node id (the terminal groups them).
    feedback_parts: dict[str, FeedbackParts] = field(default_factory=dict)
    #: The HTML report's curves, measured before the visible worker stops.
    feedback: FeedbackReport | None = None
    visible_finished: bool = False
    #: Whether the run's selection holds hidden tests (known once collection ends).
    hidden_selected: bool = False
    #: Disk space held for results.json since before the worker started.
    reservation: Reservation | None = None
    #: The seat both workers take in turn, where they run without namespaces.
    seat: Seat | None = None
    #: SHA-256 of every input the invariant tests asked, in order: equal digests mean
    #: the same examples (reported in the results' extra_data).
    invariant_inputs: Any = field(default_factory=hashlib.sha256)
    #: The seed of the unseen inputs (None where there is no reference: a student bundle).
    unseen_seed: str | None = None
    #: Unseen inputs of each function, split over the tracks (from the grader markers).
    unseen_counts: dict[str, int] = field(default_factory=dict)
    unseen_evidences: dict[str, UnseenEvidence] = field(default_factory=dict)
    #: SHA-256 of every unseen input asked, in order (reported in the results' extra_data).
    unseen_inputs: Any = field(default_factory=hashlib.sha256)
    #: Each visible case judged, by case key.
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    #: The pipeline of visible-worker calls being read (see :meth:`_send`): its
    #: generator, and the (kind, case key) of each answer it still holds, in order.
    pipeline: Generator[CallOutcome, None, None] | None = None
    piped: collections.deque[tuple[str, str]] = field(default_factory=collections.deque)
    piped_keys: set[tuple[str, str]] = field(default_factory=set)
    #: The functions whose visible cases have been sent (:meth:`_send_visible`).
    visible_sent: set[str] = field(default_factory=set)
    #: The oracle's value of each case asked so far, with the case, by case key.
    expected_values: dict[str, tuple[Case, Any]] = field(default_factory=dict)
    #: The expected values of each function's visible cases on each track, by (function,
    #: track id) (:meth:`_track_expected`).
    track_expected: dict[tuple[str, str], list[Any]] = field(default_factory=dict)
    #: The grading's one final result, made once at the end (:meth:`final_results`): the
    #: terminal, the exit code and every file written come from it.
    final: Mapping[str, Any] | None = None
    #: Each function's diagnosis (:meth:`diagnosis`), made once one of its cases failed.
    diagnoses: dict[str, FunctionDiagnosis] = field(default_factory=dict)
    #: Failures of the grader itself met while tests ran (a worker that could not start
    #: through no fault of the code, say): the final result is then a grader failure.
    failures: list[str] = field(default_factory=list)

    @property
    def max_score(self) -> Fraction:
        """The suite's total points: as set, else the oracle's default."""
        if self.settings.max_score is not None:
            return self.settings.max_score
        return on_grid(Fraction(self.oracle.default_max_score))

    @property
    def expected(self) -> Callable[[Case], Any]:
        """The expected plain value of a case (reference or golden file)."""
        return self.expected_value

    def expected_value(self, case: Case) -> Any:
        """The oracle's value of ``case``, computed once per run: a case is judged by its
        test and again for its function's evidence."""
        kept = self.expected_values.get(case.key)
        # the same key names the same inputs (a twin's, only once drawn); the check costs
        # little, nothing for the same case
        if kept is None or kept[0] is not case and kept[0] != case:
            kept = (case, self.oracle.expected(case))
            self.expected_values[case.key] = kept
        return kept[1]

    @classmethod
    def open(cls, settings: Settings, load_tracks: Callable[[], tuple[Track, ...]], *,
             verbose: bool = False) -> GradingSession:
        """Read the submission, start its worker, then load the tracks.

        The worker imports the submission (and pint) while this process loads the
        tracks and collects the tests. Raises a GraderError for a bad submission, track
        or golden file. As root, the folders closed to other users are said in one short
        line, or (``verbose``) with how other staff may still grade.
        """
        assert settings.student is not None
        oracle = choose_oracle(settings.golden)
        submission = read_submission(locate_submission(settings.student))
        unseen_seed = None if oracle.golden else seed(settings.secret(), submission)
        # the results' disk space is held before any student code runs: a submission
        # that fills the disk cannot keep them from being written
        reservation = None
        sandbox = None
        seat = None
        runner = None
        try:
            with deferred_signals():  # made and held here, or not made
                reservation = Reservation(settings.results, RESULTS_RESERVATION_BYTES) \
                    if settings.results is not None else None
            # without namespaces, a seat gives the worker the same box and user everywhere
            seat = claim_seat(submission, settings.sandbox_user) if seated() else None
            if running_as_root():  # this grading's alone
                sandbox = seat.user if seat is not None and seat.user is not None \
                    else claim_sandbox_user(settings.sandbox_user)
                changed = close_to_others(protected_folders(), sandbox_gid=sandbox.gid)
                note = closed_note(changed) if verbose else closed_line(changed)
                if note is not None:  # one line, said only by the run that closed them
                    sys.stderr.write(f"graders: note: {note}\n")
            runner = StudentRunner(submission, limits=settings.limits, sandbox=sandbox,
                                   box=seat.box if seat is not None else None)
            runner.start()
            if not runner.protections.confined:  # one line, whatever the verbosity
                reach = "" if runner.protections.network_isolation else " and reach the network"
                sys.stderr.write(
                    "graders: warning: the student's code runs without confinement (no "
                    f"namespaces here): it can read and write this user's files{reach}; see "
                    "extra_data.protections in the results\n")
            registry(runner.grader_definitions)  # parsed once, not at every grading
            tracks = oracle.bind(load_tracks())
        except BaseException:
            if runner is not None:
                runner.close()
            if sandbox is not None:
                sandbox.release()
            if seat is not None:
                seat.release()
            if reservation is not None:
                reservation.release()
            raise
        return cls(settings=settings, tracks=tracks, runner=runner, oracle=oracle,
                   submission=submission, reservation=reservation, unseen_seed=unseen_seed,
                   seat=seat)

    def isolation(self) -> str:
        """How the student's code is isolated, in one line for people and reports."""
        return self.runner.protections.description

    @property
    def import_error(self) -> str | None:
        return self.runner.import_error

    def close(self) -> None:
        """Stop both workers, then give the sandbox user back (the hidden worker reuses
        the visible one's user, so only the session may release it). The hidden worker,
        the one that may still run, is stopped first: the visible runner's sweep of the
        user then finds nothing left to kill. Safe to call again."""
        with deferred_signals():
            if self.hidden_runner is not None:
                self.hidden_runner.close()
                if self.hidden_runner.sandbox not in (None, self.runner.sandbox):
                    self.hidden_runner.sandbox.release()
            self.runner.close()
            if self.runner.sandbox is not None:
                self.runner.sandbox.release()
            if self.seat is not None:
                self.seat.release()

    def end(self) -> None:
        """:meth:`close`, and give back the results' reserved space if no results were
        written into it (the run's very end: whatever happened, nothing is left)."""
        with deferred_signals():
            self.close()
            reservation, self.reservation = self.reservation, None
            if reservation is not None:
                reservation.release()

    def case_outcome(self, case: Case, *, hidden: bool) -> CallOutcome:
        """The student's answer to ``case``, asked once per run: hidden cases in the hidden
        worker, the others in the visible one (every visible case in one pipeline)."""
        if hidden:
            key = ("hidden", case.key)
            if key not in self.outcomes:
                self.outcomes[key] = self.start_hidden().call(case.function, case.args,
                                                              case.kwargs, case.fields)
            return self.outcomes[key]
        return self._answer("visible", case)

    def _answer(self, kind: str, case: Case) -> CallOutcome:
        """The visible worker's answer to ``case`` (``kind``: "visible" or "unseen", kept
        apart): read from the pipeline that holds it, once every visible case of its
        function has been sent in one (:meth:`_send_visible`); a case no pipeline holds
        is asked alone."""
        key = (kind, case.key)
        if key not in self.outcomes and kind == "visible":
            self._send_visible(case.function)
        while key not in self.outcomes and key in self.piped_keys:
            self._read_piped()
        if key not in self.outcomes:
            self.settle()
            self.outcomes[key] = self.runner.call(case.function, case.args, case.kwargs,
                                                  case.fields)
        return self.outcomes[key]

    def _send_visible(self, function: str) -> None:
        """Send every visible case of ``function``, once, in one pipeline (every grading
        asks them all, for the function's evidence): the worker computes them while the
        grader judges the first ones. One function at a time, so that what the submission
        prints while they run shows with that function's tests."""
        if function in self.visible_sent or self.visible_finished:
            return
        self.visible_sent.add(function)
        self._send("visible", self._visible_cases(function))

    def _send(self, kind: str, cases: list[Case]) -> None:
        """Send the cases of ``kind`` not answered yet in one pipeline, after the last."""
        self.settle()
        missing: dict[str, Case] = {}
        for case in cases:
            if (kind, case.key) not in self.outcomes:
                missing.setdefault(case.key, case)
        if not missing:
            return
        self.piped = collections.deque((kind, case.key) for case in missing.values())
        self.piped_keys = set(self.piped)
        self.pipeline = self.runner.call_many([
            CallRequest(case.function, case.args, case.kwargs, case.fields)
            for case in missing.values()])

    def _read_piped(self) -> None:
        """Read the pipeline's next answer; after its last, close it."""
        assert self.pipeline is not None
        key = self.piped.popleft()
        self.piped_keys.discard(key)
        self.outcomes[key] = next(self.pipeline)
        if not self.piped:
            self.pipeline.close()
            self.pipeline = None

    def settle(self) -> None:
        """Read every answer the pipeline still holds, so that the visible worker is idle
        for whatever uses it next (an invariant test, the page's curves, its stop)."""
        while self.piped:
            self._read_piped()

    def _visible_outcomes(self, cases: list[Case], kind: str = "visible"
                          ) -> Iterator[CallOutcome]:
        """The visible worker's answer to each of ``cases``, in order, read as needed."""
        for case in cases:
            yield self._answer(kind, case)

    def _visible_cases(self, function: str) -> list[Case]:
        if not self.cases_by_function:
            for case in visible_cases(self.tracks):
                self.cases_by_function.setdefault(case.function, []).append(case)
        return self.cases_by_function.get(function, [])

    def evidence(self, function: str) -> FunctionEvidence:
        """What ``function`` answered across every visible case of the run's tracks."""
        if function not in self.evidences:
            evidence = FunctionEvidence()
            cases = self._visible_cases(function)
            for case, outcome in zip(cases, self._visible_outcomes(cases), strict=True):
                verdict = self.verdicts[case.key] = self._verdict(case, outcome)
                evidence.record(expected=verdict.expected, answer=outcome.value,
                                answered=outcome.ok, passed=verdict.passed,
                                values_right=verdict.values_right,
                                failure=failed_call_message(outcome), trivial=verdict.trivial,
                                miss="" if verdict.passed
                                else missed_case(case, outcome, verdict.differences))
            self.evidences[function] = evidence
        return self.evidences[function]

    def diagnosis(self, function: str) -> FunctionDiagnosis:
        """Why ``function``'s visible cases fail, read across all of them at once, with
        experiments in the visible worker while it runs (:mod:`graders.plugin.experiments`)."""
        if function not in self.diagnoses:
            cases = self._visible_cases(function)
            outcomes = list(self._visible_outcomes(cases))
            observed = [Observed(case, case_inputs(case.function, case.args, case.kwargs),
                                 self.expected_value(case), answer_of(outcome))
                        for case, outcome in zip(cases, outcomes, strict=True)]
            ask = None if self.visible_finished else self._probe
            lab = WorkerLab(self.settings.tolerance, self.expected_value, ask)
            try:
                self.diagnoses[function] = diagnose_function(function, observed, lab)
            except Exception as error:  # noqa: BLE001 - feedback only: never a score
                # a fault of the diagnosis itself costs the student nothing: their cases
                # get the hints one case at a time, and the staff get the fault
                self.diagnoses[function] = FunctionDiagnosis(function)
                # to the process's stderr, past pytest's capture of the test's output
                (sys.__stderr__ or sys.stderr).write(
                    f"graders: note: the diagnosis of {function} failed "
                    f"({type(error).__name__}: {error}); its hints are the single-case ones\n")
        return self.diagnoses[function]

    def _probe(self, cases: Sequence[Case]) -> list[Any]:
        self.settle()
        return probe_answers(self.runner, cases)

    def _differences(self, expected: Any, actual: Any) -> list[Any]:
        return list(compare(expected, actual, self.settings.tolerance))

    def _verdict(self, case: Case, outcome: CallOutcome) -> Verdict:
        expected = self.expected_value(case)
        differences = self._differences(expected, outcome.value) if outcome.ok else []
        passed = outcome.ok and not differences
        fields = case_nontrivial_fields(case, expected)  # none: the case is trivial
        # the non-trivial values answered right, field by field (credit.nontrivial_matches):
        # compare() judges a result field by field (an item of a list item by item), so in
        # a case that passed every value is right
        right = (len(fields) if passed else
                 sum(1 for where, wanted in fields
                     if not self._differences(wanted, field_of(outcome.value, where)))
                 ) if outcome.ok else 0
        return Verdict(expected, passed, right, not fields, differences)

    def unseen(self, function: str) -> UnseenEvidence:
        """How ``function`` did on its unseen inputs (nothing to tell without a seed)."""
        if function not in self.unseen_evidences:
            evidence = UnseenEvidence()
            if self._draws_unseen(function) and not self.visible_finished:
                assert self.unseen_seed is not None
                templates, spare = self._templates(function)
                twins = unseen_cases(self.unseen_seed, templates,
                                     self.unseen_counts.get(function, DEFAULT_UNSEEN),
                                     self._visible_cases(function), self._moves, spare)
                evidence.wanted, cases = twins.wanted, twins.cases
                for case in cases:
                    self.unseen_inputs.update(f"{inputs_key(case)}\n".encode())
                self._send("unseen", cases)
                for case, outcome in zip(cases, self._visible_outcomes(cases, "unseen"),
                                         strict=True):
                    verdict = self._verdict(case, outcome)
                    evidence.record(case, trivial=verdict.trivial, passed=verdict.passed,
                                    values_right=verdict.values_right)
            self.unseen_evidences[function] = evidence
        return self.unseen_evidences[function]

    def _moves(self, template: Case, twin: Case) -> bool:
        """Whether ``twin`` moves the answer: its expected value is not the answer of
        ``template``, the visible case it was drawn from, nor of any other visible case of
        its function and track (a copy of the visible answers answers with one of them;
        :func:`graders.grading.unseen.moves_answer`); and its inputs are not a diagnosis
        probe's, whose expected values the student bundle carries."""
        if probe_of(twin, self._visible_cases(twin.function)):
            return False
        return fields_move([self.expected_value(template),
                            *self._track_expected(twin.function, twin.track_id)],
                           case_nontrivial_fields(twin, self.expected_value(twin)),
                           self.settings.tolerance)

    def _track_expected(self, function: str, track_id: str) -> list[Any]:
        """The expected values of the visible cases of ``function`` on ``track_id``, in
        suite order (asked for every twin drawn: gathered once)."""
        key = (function, track_id)
        if key not in self.track_expected:
            self.track_expected[key] = [self.expected_value(case)
                                        for case in self._visible_cases(function)
                                        if case.track_id == track_id]
        return self.track_expected[key]

    def _templates(self, function: str) -> tuple[list[Case], list[Case]]:
        """The visible cases whose twins are the unseen inputs: the non-trivial ones the
        function passes, else (it passes none) the ones it gets some value of right; and
        the spare ones, its other non-trivial cases, whose twins fill a track where no
        twin of those moves the answer."""
        self.evidence(function)
        verdicts = [(case, self.verdicts[case.key]) for case in self._visible_cases(function)]
        passed = [case for case, verdict in verdicts
                  if verdict.passed and not verdict.trivial]
        templates = passed or [case for case, verdict in verdicts
                               if verdict.values_right and not verdict.trivial]
        chosen = {case.key for case in templates}
        return templates, [case for case, verdict in verdicts
                           if not verdict.trivial and case.key not in chosen]

    def confirmation(self, function: str) -> tuple[Fraction, str | None]:
        """The share of ``function``'s visible points its unseen inputs confirm, and the
        note that says why when it is below 1."""
        unseen = self.unseen(function)
        share = confirmation(unseen)
        return share, (confirmation_note(function, unseen, share) if share < 1 else None)

    def invariant_refusal(self, function: str) -> str | None:
        """Why the invariants of ``function`` pay nothing yet (None when they may pay)."""
        refusal = invariant_refusal(function, self.evidence(function))
        if refusal is None and self._draws_unseen(function) \
                and self.evidence(function).nontrivial:
            return unseen_refusal(function, self.unseen(function))
        return refusal

    def _draws_unseen(self, function: str) -> bool:
        """Whether this grading checks ``function`` on unseen inputs."""
        return self.unseen_seed is not None \
            and self.unseen_counts.get(function, DEFAULT_UNSEEN) > 0

    def finish_visible(self) -> None:
        """Make every visible call this run needs, then stop the visible worker: the
        evidence of every function and, when a page is asked for, the report's curves."""
        if self.visible_finished:
            return
        for function in CONTRACT_FUNCTIONS:
            self.evidence(function)
            self.unseen(function)
        self.settle()
        if self.settings.html is not None:
            from graders.feedback.page import FeedbackReport

            self.feedback = FeedbackReport.measure(self.tracks, self.runner, self.expected_value)
        self.runner.close()
        self.visible_finished = True

    def start_hidden(self) -> StudentRunner:
        """The hidden tests' worker, once the visible worker has stopped: it never served
        a visible call, and it is asked nothing before every visible call is made, so
        nothing it is asked can reach visible feedback."""
        self.finish_visible()
        if self.hidden_runner is None:
            self.hidden_runner = self._new_hidden_runner(self.runner.sandbox)
        return self.hidden_runner

    def _new_hidden_runner(self, sandbox: SandboxUser | None) -> StudentRunner:
        """A runner for the hidden tests, sharing the grading's time budget."""
        return StudentRunner(self.submission, limits=self.settings.limits, sandbox=sandbox,
                             budget=self.runner.budget,
                             box=self.seat.box if self.seat is not None else None)

    def prestart_hidden(self) -> None:
        """Start the hidden tests' worker now, while visible tests still run, so that it
        has imported the submission when they end: only once the visible worker has
        imported it, when hidden tests are selected, and where the two workers cannot
        meet. As root that takes a sandbox user of its own from the pool (the visible
        worker's user is swept when it stops); with a named sandbox user, or none free,
        the hidden worker starts when the hidden tests do, as it always may."""
        if not self.hidden_selected or self.hidden_runner is not None \
                or self.visible_finished or not self.runner.imported \
                or self.seat is not None:  # one seat: the same box and user, in turn
            return
        if self.runner.sandbox is not None and self.settings.sandbox_user != DEFAULT_SANDBOX_USER:
            return
        sandbox = runner = None
        try:
            if self.runner.sandbox is not None:
                sandbox = claim_sandbox_user()
            runner = self._new_hidden_runner(sandbox)
            runner.start(preload_pint=False)  # the hidden cases pass no quantities
        except Exception:  # noqa: BLE001 - only a head start: the hidden tests start it
            if runner is not None:  # as they always could, where a failure is reported
                runner.close()
            if sandbox is not None:
                sandbox.release()
            return
        self.hidden_runner = runner

    def _outcome_line(self) -> str:
        """How grading went, the first part of results.json's top-level output."""
        if self.import_error:
            return f"{self.import_error}\nEvery test fails until serving.py imports cleanly."
        return "Graded by the serving-lab grader. Each test lists its failed cases."

    def _printed(self) -> str:
        """What the student's code printed (the visible worker's only: the hidden one's
        never shows), the last part of results.json's top-level output."""
        printed = self.runner.output_summary()
        if not printed.total_bytes:
            return ""
        sentence = printed.sentence()
        return f"{sentence[:1].upper()}{sentence[1:]}; they follow.\n{printed.text}"

    def final_results(self) -> Mapping[str, Any]:
        """The grading's final result, made once from the scores recorded so far: valid
        Gradescope results, or a grader-failure record (never a score) when the grader
        could not build them."""
        if self.final is None:
            self.final = fitted(self.results_document())  # within 1 MiB, whatever it holds
        return self.final

    @property
    def grader_failure(self) -> str | None:
        """Why the grader failed, once the final result says it did (else None)."""
        return grader_failure(self.final) if self.final is not None else None

    def write_results(self, path: Path) -> Mapping[str, Any]:
        """Write the final result (:meth:`final_results`) atomically, into the space held
        for it. Returns it."""
        document = self.final_results()
        reservation, self.reservation = self.reservation, None
        try:
            write_json_atomically(path, document, reservation=reservation)
        finally:
            if reservation is not None:
                reservation.release()
        return document

    def page_document(self, document: Mapping[str, Any]) -> Mapping[str, Any]:
        """``document`` (the results) for the HTML page, where space is not scarce: each
        failed visible test's feedback uncut and, for Gradescope's html essentials (the
        page builds its own summary), the parts of them the page shows as text: a partial
        run, why serving.py did not import, and what the code printed (see
        :func:`graders.feedback.render.build_page`)."""
        tests = [{**test, "output": self.full_outputs.get(
                    str(test.get("extra_data", {}).get("nodeid")), test.get("output", ""))}
                 for test in document.get("tests", [])]
        if document.get("output_format") != "html":  # e.g. a grader failure: shown as is
            return {**document, "tests": tests}
        return {**document, "tests": tests, "output_format": "text",
                "output": partial_run(list(self.scores.values())) or "",
                "import_error": self.import_error or "", "printed": self._printed()}

    def results_document(self) -> Mapping[str, Any]:
        """The Gradescope results :meth:`write_results` writes, without writing them."""
        if self.failures:
            return grader_failure_results("; ".join(dict.fromkeys(self.failures)),
                                          execution_time_s=time.monotonic() - self.started)
        scores = list(self.scores.values())
        partial = partial_run(scores)
        outcome = self._outcome_line() if partial is None else \
            f"{partial}\n{self._outcome_line()}"
        printed = self._printed()
        summary = f"{outcome}\n{printed}" if printed else outcome
        try:
            document = gradescope_results(
                scores, execution_time_s=time.monotonic() - self.started,
                output=summary, output_html=essentials_html(scores, outcome, printed),
                extra={"isolation": self.isolation(),
                       "protections": self.runner.protections.as_dict(),
                       "invariant_inputs_sha256": self.invariant_inputs.hexdigest(),
                       "unseen_inputs_sha256": self.unseen_inputs.hexdigest(),
                       "versions": grading_versions(),
                       **({"partial_run": partial} if partial is not None else {}),
                       **self._short_twins(),
                       **submission_extra(self.settings.submission_metadata)})
        except Exception as error:  # the grader's own failure: said as such, never a score
            document = grader_failure_results(
                f"building the results failed: {type(error).__name__}: {error}",
                execution_time_s=time.monotonic() - self.started)
        return validated_results(document)

    def _short_twins(self) -> dict[str, Any]:
        """The functions that could not get their count of twins that move the answer
        (``unseen_short``: function -> "N of M twins"), if any."""
        short = {function: f"{unseen.asked} of {unseen.wanted} twins"
                 for function, unseen in sorted(self.unseen_evidences.items())
                 if unseen.short}
        return {"unseen_short": short} if short else {}

    def write_classroom(self, path: Path) -> None:
        """Write the GitHub Classroom runner results of the final result."""
        document = classroom_results(list(self.scores.values()),
                                     import_error=self.import_error,
                                     grader_failure=self.grader_failure,
                                     visible_only=self.oracle.golden)
        write_json_atomically(path, document)


#: What a grading that closed the grader's folders says by default: a student can ignore it.
CLOSED_LINE = ("closed the grader's folders to other users, so that the code it grades cannot "
               "read them; nothing to do (pytest -v says how other staff can still grade)")


def closed_line(changed: Iterable[tuple[Path, int, int]]) -> str | None:
    """:data:`CLOSED_LINE` when :func:`graders.sandbox.privileges.close_to_others` changed a
    folder, else None (the staff's version: :func:`closed_note`)."""
    return CLOSED_LINE if list(changed) else None


def closed_note(changed: Iterable[tuple[Path, int, int]]) -> str | None:
    """The note to staff on the folders :func:`graders.sandbox.privileges.close_to_others`
    closed and how other staff may grade, or None."""
    changed = list(changed)
    if not changed:
        return None
    import shlex

    folders = ", ".join(f"{str(path)!r} (mode {before:o} -> {after:o})"
                        for path, before, after in changed)
    # every closed folder not inside another (the grader's packages side by side, when
    # installed into site-packages), each named once in the fix
    closed = [path for path, _, _ in changed]
    outermost = [path for path in dict.fromkeys(closed)
                 if not any(path != other and path.is_relative_to(other) for other in closed)]
    groups = " or ".join(repr(name) for name in
                         dict.fromkeys(_group_name(path.stat().st_gid) for path in outermost))
    named = " ".join(shlex.quote(str(path)) for path in outermost)
    return (f"closed {folders} to other users so that student code, run as a sandbox user, "
            f"cannot read them; staff in their group {groups} can still grade; to let "
            "other staff grade without reopening them, give the grader's folders a group "
            f"of theirs: chgrp -R STAFF {named} && chmod -R g+rX {named} (a sandbox user "
            "is never in it)")


def _group_name(gid: int) -> str:
    try:
        import grp  # POSIX-only, so imported here: this module imports anywhere

        return grp.getgrgid(gid).gr_name
    except (ImportError, KeyError):
        return str(gid)
