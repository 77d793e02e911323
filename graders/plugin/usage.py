"""Usage errors of a grading run, said as every ``graders`` command says them."""

from __future__ import annotations

import sys

import pytest


def usage_error(message: str) -> pytest.UsageError:
    """A usage error as one ``graders: error: ...`` line on stderr (pytest itself would
    print ``ERROR: ...``); raise what it returns, which makes pytest exit with code 4 and
    print nothing more."""
    sys.stderr.write(f"graders: error: {message}\n")
    return pytest.UsageError()
