"""Fixtures of the grading suite: the track, the student, and a per-test case checker."""

from __future__ import annotations

import pytest

from graders.grading import Grading, Student, Tally
from graders.session import GradingSession

TALLY_KEY = pytest.StashKey[Tally]()


def _session(request: pytest.FixtureRequest) -> GradingSession:
    from graders.plugin import SESSION_KEY

    session = request.config.stash.get(SESSION_KEY, None)
    if session is None:
        pytest.fail("the grading suite needs a submission: pass --student PATH or set "
                    "the grader_student ini key", pytrace=False)
    return session


@pytest.fixture
def track(request: pytest.FixtureRequest) -> object:
    """One track of the run (the suite is parametrized over every track file)."""
    return request.param


@pytest.fixture(scope="session")
def student(request: pytest.FixtureRequest) -> Student:
    """The student's functions, run in the isolated worker."""
    return Student(_session(request).runner)


@pytest.fixture
def grading(request: pytest.FixtureRequest) -> Grading:
    """Checks a test's cases against the reference and records its tally for scoring."""
    from graders.plugin import SCORE_KEY

    session = _session(request)
    score = request.node.stash.get(SCORE_KEY, None)
    hidden = score is not None and score.visibility != "visible"
    label = score.name if score is not None else request.node.name
    checker = Grading(session.runner, session.settings.tolerance, session.expected,
                      label=label, hidden=hidden)
    request.node.stash[TALLY_KEY] = checker.tally
    return checker


@pytest.fixture(scope="session")
def tracks(request: pytest.FixtureRequest) -> tuple[object, ...]:
    """Every loaded track."""
    return tuple(_session(request).tracks)


@pytest.fixture(scope="session")
def invariant_examples(request: pytest.FixtureRequest) -> int:
    """Hypothesis examples per invariant test (``--grader-examples``)."""
    return _session(request).settings.examples
