"""The grader's error hierarchy: every message names the value, its source, the rule and the fix."""

from __future__ import annotations


class GraderError(Exception):
    """Base of every error the grader raises on purpose."""


class TrackError(ValueError, GraderError):
    """A track file is malformed, incomplete or inconsistent."""


class SubmissionError(ValueError, GraderError):
    """A submission path is missing, unsafe or not a ``serving.py``."""


class SettingsError(ValueError, GraderError):
    """An option, ini key or marker has a value outside its rule."""


class GoldenError(ValueError, GraderError):
    """A golden file is missing, malformed, or does not match the tracks or cases."""


class GraderFailure(GraderError):
    """The grader itself failed: not the submission's doing, nor the user's configuration.

    Never a score: ``graders grade`` exits with :data:`GRADER_FAILED_EXIT`, results.json
    holds a grader-failure record (no score), and a class regrade records ``grader_failed``
    and grades the submission again on its next run."""


#: The exit code of a grading whose grader failed (sysexits.h's EX_SOFTWARE): distinct from
#: a completed grading (0), a usage error (2), a score below --fail-under (3) and from
#: pytest's own codes.
GRADER_FAILED_EXIT = 70
#: The exit code of a completed grading whose score is below ``--fail-under``.
BELOW_FAIL_UNDER_EXIT = 3
#: What course staff should do about a grader failure, said with every one.
GRADER_FAILURE_ADVICE = ("this is the grader's failure, not the submission's: grade it again, "
                         "and if it fails again, report the reason to the course staff")
