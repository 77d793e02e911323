"""Expected values of cases: computed by :mod:`reference` in the grader process, as plain data."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from graders.grading.cases import Case


def to_plain(value: Any, fields: Sequence[str] | None) -> Any:
    """A reference result as the plain data the worker produces from a student's result."""
    if fields is not None:
        if isinstance(value, tuple) and not hasattr(value, "_fields"):
            return {name: to_plain(item, None) for name, item in zip(fields, value, strict=True)}
        return {name: to_plain(getattr(value, name), None) for name in fields}
    if isinstance(value, tuple | list):
        return [to_plain(item, None) for item in value]
    if dataclasses.is_dataclass(value):
        raise TypeError("a result object needs its field list")
    return value


def reference_expected(case: Case) -> Any:
    """Run the reference on the case's inputs and return plain data."""
    import reference

    function = getattr(reference, case.function)
    return to_plain(function(*case.args, **dict(case.kwargs)), case.fields)
