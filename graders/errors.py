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


def disk_full(error: BaseException) -> str | None:
    """The grader-failure reason for ``error`` when it says a disk is full (ENOSPC, or a
    disk quota used up): which folder, and what to do; None for any other error."""
    import errno
    import os
    import tempfile

    if not isinstance(error, OSError) or error.errno not in (errno.ENOSPC, errno.EDQUOT):
        return None
    what = "the disk is full" if error.errno == errno.ENOSPC else "the disk quota is used up"
    temp = os.path.realpath(tempfile.gettempdir())
    written = os.path.realpath(os.fsdecode(error.filename)) if error.filename else None
    if written is None or os.path.commonpath([temp, written]) == temp:
        return (f"{what}: no space left in {temp} (the temp folder, TMPDIR)"
                + (f" while writing {written}" if written else "")
                + "; free space there, or set TMPDIR to a folder with room")
    folder = os.path.dirname(written)
    while not os.path.ismount(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    return f"{what}: no space left in {folder} while writing {written}; free space there"
