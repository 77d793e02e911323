"""Reading a submission: only ``serving.py`` is ever taken, as a regular file (which file
of a student's folder it is: :mod:`graders.plugin.submission`); why it cannot be imported."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import stat
import sys
from pathlib import Path

from graders.errors import SubmissionError

SUBMISSION_NAME = "serving.py"
#: The largest ``serving.py`` accepted, in bytes.
MAX_SUBMISSION_BYTES = 1_000_000


#: What a student is told when serving.py imports a module that is neither its own nor
#: Python's: helper modules beside serving.py are not graded (see the student README).
ONLY_SERVING_PY = ("only serving.py is graded (a module of yours beside it is not): put "
                   "helper code in serving.py itself")
_MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([^'.]+)")


def import_error_message(error: str) -> str:
    """``error``, why ``serving.py`` could not be imported, with :data:`ONLY_SERVING_PY`
    when it names a missing module that may be the student's own: neither the standard
    library's nor installed beside the grader (numpy's message says so already)."""
    missing = _MISSING_MODULE.search(error)
    if missing is None or missing.group(1) in sys.stdlib_module_names:
        return error
    with contextlib.suppress(ImportError, ValueError):  # looked up, not imported
        if importlib.util.find_spec(missing.group(1)) is not None:
            return error
    return f"{error}; {ONLY_SERVING_PY}"


def read_submission(path: Path) -> bytes:
    """The bytes of ``path`` if it is a regular file (not a link) within the size cap."""
    try:
        info = path.lstat()
    except OSError as error:
        raise SubmissionError(f"cannot read submission {str(path)!r}: {error.strerror}") from None
    if stat.S_ISLNK(info.st_mode):
        raise SubmissionError(f"submission {str(path)!r} is a symbolic link; submit "
                              "serving.py itself")
    if not stat.S_ISREG(info.st_mode):
        raise SubmissionError(f"submission {str(path)!r} is not a regular file")
    if info.st_size > MAX_SUBMISSION_BYTES:
        raise SubmissionError(f"submission {str(path)!r} is {info.st_size} bytes; the limit "
                              f"is {MAX_SUBMISSION_BYTES} bytes")
    with os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)), "rb") as handle:
        data = handle.read(MAX_SUBMISSION_BYTES + 1)
    if len(data) > MAX_SUBMISSION_BYTES:
        raise SubmissionError(f"submission {str(path)!r} grew past the size limit while read")
    return data
