"""Fixtures of the grading suite: the track, the student, and a per-test case checker."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import pytest

from graders.grading.cases import Case
from graders.grading.checks import NO_EXPLANATION, Answer, Explanation, Grading, Student
from graders.grading.credit import FunctionEvidence
from graders.grading.function_diagnosis import FunctionDiagnosis
from graders.plugin.session import GradingSession
from graders.plugin.stash import SCORE_KEY, SESSION_KEY, TALLY_KEY
from graders.sandbox.runner import CallOutcome


def _session(request: pytest.FixtureRequest) -> GradingSession:
    session = request.config.stash.get(SESSION_KEY, None)
    if session is None:
        pytest.fail("the grading suite needs a submission: pass --student PATH or set "
                    "the grader_student ini key", pytrace=False)
    return session


@dataclass(frozen=True)
class SessionCases:
    """A test's view of the session's cases: hidden tests ask the hidden worker."""

    session: GradingSession
    hidden: bool

    def expected(self, case: Case) -> Any:
        return self.session.expected_value(case)

    def outcome(self, case: Case) -> CallOutcome:
        return self.session.case_outcome(case, hidden=self.hidden)

    def evidence(self, function: str) -> FunctionEvidence:
        return self.session.evidence(function)

    def diagnosis(self, function: str) -> FunctionDiagnosis | None:
        return None if self.hidden else self.session.diagnosis(function)

    def confirmation(self, function: str) -> tuple[Fraction, str | None]:
        return self.session.confirmation(function)


@pytest.fixture
def track(request: pytest.FixtureRequest) -> object:
    """One track of the run (the suite is parametrized over every track file)."""
    return request.param


@pytest.fixture
def student(request: pytest.FixtureRequest) -> Student:
    """The student's functions, run in the isolated worker, for one invariant test."""
    session = _session(request)
    score = request.node.stash.get(SCORE_KEY, None)
    function = score.function if score is not None else ""

    def gate() -> str | None:
        refusal = session.invariant_refusal(function) if function else None
        session.settle()  # asked before any call: the student's calls find the worker idle
        return refusal

    hidden = score is not None and score.visibility != "visible"

    def explain(answers: Sequence[Answer]) -> Explanation:
        if hidden:
            return NO_EXPLANATION
        # imported with the diagnosis it runs, only once an example is falsified
        from graders.plugin.invariant_notes import explain_example

        return explain_example(session, answers)

    return Student(session.runner, test_name=request.node.name, gate=gate,
                   record=lambda asked: session.invariant_inputs.update(asked.encode()),
                   explain=explain)


@pytest.fixture
def grading(request: pytest.FixtureRequest) -> Grading:
    """Checks a test's cases against the reference and records its tally for scoring."""
    session = _session(request)
    score = request.node.stash.get(SCORE_KEY, None)
    hidden = score is not None and score.visibility != "visible"
    label = score.name if score is not None else request.node.name
    checker = Grading(SessionCases(session, hidden), session.settings.tolerance,
                      label=label, hidden=hidden,
                      per_track=score is not None and bool(score.track))
    request.node.stash[TALLY_KEY] = checker.tally
    return checker


@pytest.fixture(scope="session")
def tracks(request: pytest.FixtureRequest) -> tuple[object, ...]:
    """Every loaded track."""
    return tuple(_session(request).tracks)


@pytest.fixture(scope="session")
def invariant_examples(request: pytest.FixtureRequest) -> int:
    """Examples per invariant test (``--grader-examples``)."""
    return _session(request).settings.examples
