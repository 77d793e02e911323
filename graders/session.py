"""One grading run's state: settings, tracks, the student runner and the scores so far."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graders.cases import Case
from graders.classroom import classroom_results
from graders.gradescope_metadata import submission_extra
from graders.oracle import Oracle, ReferenceOracle, choose_oracle
from graders.reports import (
    fallback_results,
    gradescope_results,
    validated_results,
    write_json_atomically,
)
from graders.runner import StudentRunner
from graders.sandbox import (
    close_to_others,
    ensure_sandbox_user,
    protected_folders,
    running_as_root,
)
from graders.scoring import TestScore
from graders.settings import Settings
from graders.submission import locate_submission, read_submission

if TYPE_CHECKING:
    from graders.tracks import Track


@dataclass
class GradingSession:
    """Everything one run of the grading suite shares between its tests."""

    settings: Settings
    tracks: tuple[Track, ...]
    runner: StudentRunner
    started: float = field(default_factory=time.monotonic)
    scores: dict[str, TestScore] = field(default_factory=dict)
    oracle: Oracle = field(default_factory=ReferenceOracle)

    @property
    def max_score(self) -> float:
        """The suite's total points: as set, else the oracle's default."""
        if self.settings.max_score is not None:
            return self.settings.max_score
        return self.oracle.default_max_score

    @property
    def expected(self) -> Callable[[Case], Any]:
        """The expected plain value of a case (reference or golden file)."""
        return self.oracle.expected

    @classmethod
    def open(cls, settings: Settings, load_tracks: Callable[[], tuple[Track, ...]]
             ) -> GradingSession:
        """Read the submission, start its worker, then load the tracks.

        The worker imports the submission (and pint) while this process loads the
        tracks and collects the tests. Raises a GraderError for a bad submission, track
        or golden file.
        """
        assert settings.student is not None
        oracle = choose_oracle(settings.golden)
        submission = read_submission(locate_submission(settings.student))
        sandbox = None
        if running_as_root():
            sandbox = ensure_sandbox_user(settings.sandbox_user)
            close_to_others(protected_folders())
        runner = StudentRunner(submission, limits=settings.limits, sandbox=sandbox)
        runner.start()
        try:
            tracks = oracle.bind(load_tracks())
        except BaseException:
            runner.close()
            raise
        return cls(settings=settings, tracks=tracks, runner=runner, oracle=oracle)

    def isolation(self) -> str:
        """How the student's code is isolated, in one line for people and reports."""
        sandbox = self.runner.sandbox
        if sandbox is None:
            return ("privilege drop is off: the grader is not running as root, so the "
                    "student's code runs as this user (all other limits apply)")
        return f"the student's code runs as user {sandbox.name} (uid {sandbox.uid})"

    @property
    def import_error(self) -> str | None:
        return self.runner.import_error

    def close(self) -> None:
        self.runner.close()

    def summary(self) -> str:
        """The top-level output of results.json."""
        if self.import_error:
            return f"{self.import_error}\nEvery test fails until serving.py imports cleanly."
        return "Graded by the serving-lab grader. Each test lists its failed cases."

    def write_results(self, path: Path) -> Mapping[str, Any]:
        """Write Gradescope results for the scores recorded so far: validated, atomically,
        and if building them fails, the fallback with every test at 0. Returns them."""
        document = self.results_document()
        write_json_atomically(path, document)
        return document

    def results_document(self) -> Mapping[str, Any]:
        """The Gradescope results :meth:`write_results` writes, without writing them."""
        scores = list(self.scores.values())
        try:
            document = gradescope_results(
                scores, execution_time_s=time.monotonic() - self.started,
                output=self.summary(),
                extra={"isolation": self.isolation(),
                       **submission_extra(self.settings.submission_metadata)})
        except Exception as error:  # the grader's own failure must still leave valid results
            document = fallback_results(scores, f"{type(error).__name__}: {error}")
        return validated_results(document, scores)

    def write_classroom(self, path: Path) -> None:
        """Write the GitHub Classroom runner results for the scores recorded so far."""
        document = classroom_results(list(self.scores.values()),
                                     import_error=self.import_error)
        write_json_atomically(path, document)
