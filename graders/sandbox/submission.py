"""The submission in the worker: its name (which file of a student's folder it is, and
how it is read: :mod:`graders.plugin.submission`), and why it cannot be imported."""

from __future__ import annotations

import contextlib
import importlib.util
import re
import sys

SUBMISSION_NAME = "serving.py"


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
