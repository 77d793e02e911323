"""Locating and copying a submission: only ``serving.py`` is ever taken, as a regular file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from graders.errors import SubmissionError

SUBMISSION_NAME = "serving.py"
#: The largest ``serving.py`` accepted, in bytes.
MAX_SUBMISSION_BYTES = 1_000_000


def locate_submission(path: str | os.PathLike[str]) -> Path:
    """The ``serving.py`` named by ``path``: the file itself, or the one inside a folder."""
    candidate = Path(path)
    if candidate.is_dir() and not candidate.is_symlink():
        candidate = candidate / SUBMISSION_NAME
    if not os.path.lexists(candidate):
        raise SubmissionError(
            f"submission {str(path)!r} not found: give a serving.py or a folder holding one"
        )
    return candidate


def read_submission(path: Path) -> bytes:
    """The bytes of ``path`` if it is a regular file (not a link) within the size cap."""
    try:
        info = path.lstat()
    except OSError as error:
        raise SubmissionError(f"cannot read submission {str(path)!r}: {error.strerror}") from None
    if stat.S_ISLNK(info.st_mode):
        raise SubmissionError(
            f"submission {str(path)!r} is a symbolic link; submit serving.py itself"
        )
    if not stat.S_ISREG(info.st_mode):
        raise SubmissionError(f"submission {str(path)!r} is not a regular file")
    if info.st_size > MAX_SUBMISSION_BYTES:
        raise SubmissionError(
            f"submission {str(path)!r} is {info.st_size} bytes; the limit is "
            f"{MAX_SUBMISSION_BYTES} bytes"
        )
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_SUBMISSION_BYTES + 1)
    if len(data) > MAX_SUBMISSION_BYTES:
        raise SubmissionError(f"submission {str(path)!r} grew past the size limit while read")
    return data
