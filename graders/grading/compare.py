"""The one comparison of the grader: plain student data against the reference's values.

Real numbers agree when ``|actual - expected| <= max(rel * max(|actual|, |expected|), abs)``,
a symmetric test. ``inf`` must be met by the same ``inf``; NaN is always wrong.
bool, int, str and None compare exactly (an int is accepted where a real is
expected, never a bool); sequences compare element by element.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_REL_TOL = 1e-6
DEFAULT_ABS_TOL = 1e-9


@dataclass(frozen=True)
class Tolerance:
    """Relative and absolute tolerance for real numbers."""

    rel: float = DEFAULT_REL_TOL
    abs: float = DEFAULT_ABS_TOL

    def __post_init__(self) -> None:
        for name in ("rel", "abs"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ValueError(f"tolerance {name} must be a finite number >= 0, got {value!r}")

    def describe(self) -> str:
        return f"rel {self.rel:g}, abs {self.abs:g}"


@dataclass(frozen=True)
class Difference:
    """One field where the student's value is not the expected one."""

    field: str
    expected: Any
    actual: Any
    reason: str
    abs_error: float | None = None
    rel_error: float | None = None


def type_name(value: Any) -> str:
    """A reader's name for the kind of a plain value (or a worker tag)."""
    if isinstance(value, Mapping):
        for tag in ("$unsupported", "$missing", "$error"):
            if tag in value:
                return {"$unsupported": str(value[tag]), "$missing": "missing field",
                        "$error": "error while reading"}[tag]
        return "object"
    if value is None:
        return "None"
    if isinstance(value, list):
        return "sequence"
    return type(value).__name__


def _is_real(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _compare_real(field: str, expected: float, actual: Any, tol: Tolerance) -> Difference | None:
    if not _is_real(actual):
        reason = f"expected a real number, got {type_name(actual)}"
        return Difference(field, expected, actual, reason)
    try:
        actual = float(actual)
    except OverflowError:
        return Difference(field, expected, actual, "the int is too large for a real number")
    if math.isnan(actual):
        return Difference(field, expected, actual, "NaN is never a right answer")
    if math.isinf(expected) or math.isinf(actual):
        if actual == expected:
            return None
        return Difference(field, expected, actual, "infinity must match exactly")
    abs_error = abs(actual - expected)
    scale = max(abs(actual), abs(expected))
    rel_error = abs_error / scale if scale > 0 else 0.0
    if abs_error <= max(tol.rel * scale, tol.abs):
        return None
    return Difference(field, expected, actual, f"outside tolerance ({tol.describe()})",
                      abs_error, rel_error)


def differs(expected: Any, actual: Any, tol: Tolerance) -> bool:
    """Whether :func:`compare` finds a difference (two finite floats without building one)."""
    if type(expected) is float and type(actual) is float and math.isfinite(expected) \
            and math.isfinite(actual):
        return abs(actual - expected) > max(tol.rel * max(abs(actual), abs(expected)), tol.abs)
    return bool(compare(expected, actual, tol))


def compare(expected: Any, actual: Any, tol: Tolerance, field: str = "value") -> list[Difference]:
    """Every difference between ``expected`` (reference data) and ``actual`` (student data)."""
    if isinstance(expected, bool):
        if not isinstance(actual, bool):
            return [Difference(field, expected, actual,
                               f"expected a bool, got {type_name(actual)}")]
        return [] if actual == expected else [Difference(field, expected, actual, "wrong value")]
    if isinstance(expected, int):
        if not isinstance(actual, int) or isinstance(actual, bool):
            return [Difference(field, expected, actual,
                               f"expected an int, got {type_name(actual)}")]
        return [] if actual == expected else [Difference(field, expected, actual, "wrong value")]
    if isinstance(expected, float):
        difference = _compare_real(field, expected, actual, tol)
        return [] if difference is None else [difference]
    if expected is None or isinstance(expected, str):
        if type(actual) is not type(expected):
            what = "None" if expected is None else "a str"
            reason = f"expected {what}, got {type_name(actual)}"
            return [Difference(field, expected, actual, reason)]
        return [] if actual == expected else [Difference(field, expected, actual, "wrong value")]
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping) or any(tag in actual for tag in ("$unsupported",)):
            return [Difference(field, "a result object", actual,
                               f"expected a result with fields, got {type_name(actual)}")]
        differences: list[Difference] = []
        for name, value in expected.items():
            differences += compare(value, actual.get(name, {"$missing": name}), tol, name)
        return differences
    if isinstance(expected, Sequence):
        if not isinstance(actual, list):
            return [Difference(field, expected, actual,
                               f"expected a sequence, got {type_name(actual)}")]
        if len(actual) != len(expected):
            return [Difference(field, expected, actual,
                               f"expected {len(expected)} items, got {len(actual)}")]
        differences = []
        for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
            differences += compare(want, got, tol, f"{field}[{index}]")
        return differences
    raise TypeError(f"cannot compare against a {type(expected).__name__}")
