"""Domain checks shared by the reference functions; each raises ``ValueError`` naming the rule."""

from __future__ import annotations

import math


def finite(name: str, value: float) -> float:
    """Return ``value`` as a float, or raise if it is NaN or not a real number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    if math.isnan(value):
        raise ValueError(f"{name} must not be NaN")
    return float(value)


def at_least(name: str, value: float, bound: float) -> float:
    """Return ``value`` if it is a real number ``>= bound``."""
    number = finite(name, value)
    if number < bound:
        raise ValueError(f"{name} must be >= {bound:g}, got {value!r}")
    return number


def whole_at_least(name: str, value: int, bound: int) -> int:
    """Return ``value`` if it is an integer ``>= bound``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < bound:
        raise ValueError(f"{name} must be >= {bound}, got {value!r}")
    return value
