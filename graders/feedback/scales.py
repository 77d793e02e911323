"""Axis scales of the feedback plots: linear, log and symlog, their limits and their ticks.

Pure arithmetic, no drawing: a :class:`Scale` maps a value to a fraction of its axis,
:func:`autoscale` picks limits that hold every value (with a 5% margin, as matplotlib
did), and :func:`choose_ticks` picks "nice" ticks, densest first, that a caller's test of
fit accepts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

Kind: TypeAlias = Literal["linear", "log", "symlog"]

#: symlog is linear within +-LINTHRESH and logarithmic outside (matplotlib's linthresh=1).
LINTHRESH = 1.0
#: The width of symlog's linear part, in decades (matplotlib's linscale=1 with base 10).
_LINEAR_DECADES = 1.0 / (1.0 - 1.0 / 10.0)
MARGIN = 0.05
#: The largest value an axis holds, and the smallest a log axis holds (beyond: a gap).
LARGEST, SMALLEST = 1e250, 1e-250
#: Steps of linear ticks, as mantissas of a power of ten.
_STEPS = (1.0, 2.0, 2.5, 5.0)
#: A log axis spanning less than this ratio gets ticks at 1, 2 and 5 of each decade.
_FEW_DECADES = 1000.0


def forward(kind: Kind, value: float) -> float:
    """``value`` in the scale's own linear space (log10 for log)."""
    if kind == "log":
        return math.log10(value)
    if kind == "symlog":
        size = abs(value)
        if size <= LINTHRESH:
            return value * _LINEAR_DECADES
        return math.copysign(_LINEAR_DECADES + math.log10(size / LINTHRESH), value)
    return value


def inverse(kind: Kind, position: float) -> float:
    """The value at ``position`` of the scale's own linear space."""
    if kind == "log":
        return math.pow(10.0, position)
    if kind == "symlog":
        size = abs(position)
        if size <= _LINEAR_DECADES:
            return position / _LINEAR_DECADES
        return math.copysign(LINTHRESH * math.pow(10.0, size - _LINEAR_DECADES), position)
    return position


def representable(kind: Kind, value: float | None) -> bool:
    """Whether ``value`` has a place on a ``kind`` axis: at most :data:`LARGEST` in size
    (limits with margins stay finite), and on a log axis at least :data:`SMALLEST`."""
    return value is not None and abs(value) <= LARGEST and (kind != "log" or value >= SMALLEST)


@dataclass(frozen=True)
class Scale:
    """An axis from ``low`` to ``high`` on a ``kind`` scale."""

    kind: Kind
    low: float
    high: float

    def fraction(self, value: float) -> float:
        """Where ``value`` lies, from 0 at ``low`` to 1 at ``high``."""
        start, end = forward(self.kind, self.low), forward(self.kind, self.high)
        return (forward(self.kind, value) - start) / (end - start)

    def holds(self, value: float | None) -> bool:
        """Whether ``value`` can be drawn on this axis."""
        return representable(self.kind, value)


def autoscale(kind: Kind, values: Iterable[float | None]) -> Scale:
    """Limits holding every representable value, a margin of :data:`MARGIN` of the span
    beyond each end; a log or symlog axis whose positive range spans less than a decade
    is linear instead (it reads better), and a symlog axis with no value below
    :data:`LINTHRESH` is a log axis (no "0" tick where no value is near 0)."""
    shown = sorted(v for v in values if v is not None and representable(kind, v))
    if kind == "symlog" and shown and shown[0] >= LINTHRESH:  # nothing near 0: a log
        return autoscale("log", shown)                       # axis, and no "0" tick
    if not shown:
        return Scale(kind, 1.0, 10.0) if kind == "log" else Scale(kind, 0.0, 1.0)
    low, high = shown[0], shown[-1]
    if low == high:  # as matplotlib's nonsingular: 5% either way, or +-0.05 around 0
        spread = 0.05 * abs(low) if abs(low) >= SMALLEST else 0.05
        low, high = low - spread, high + spread
    start, end = forward(kind, low), forward(kind, high)
    pad = MARGIN * (end - start)
    scale = Scale(kind, inverse(kind, start - pad), inverse(kind, end + pad))
    if kind != "linear" and scale.low > 0 and scale.high / scale.low < 10:
        return autoscale("linear", shown)
    return scale


def _exact(mantissa: float, exponent: int) -> float:
    """``mantissa * 10**exponent`` as the float its decimal text reads (no 0.30000000004)."""
    return float(f"{mantissa:g}e{exponent}")


def _linear(low: float, high: float) -> Iterator[list[float]]:
    """Multiples of 1, 2, 2.5 and 5 times a power of ten, densest first."""
    if not high > low:
        return
    top = math.floor(math.log10(high - low))
    for exponent in range(top - 2, top + 2):
        for mantissa in _STEPS:
            step = _exact(mantissa, exponent)
            first, last = math.ceil(low / step - 1e-9), math.floor(high / step + 1e-9)
            if last - first < 60:
                yield [float(f"{k * step:.12g}") + 0.0 for k in range(first, last + 1)]


def _decades(exponents: Sequence[int], *, signs: tuple[float, ...] = (1.0,)) -> Iterator[
        list[float]]:
    """Every decade, then every 2nd, 3rd, ... (aligned at 1)."""
    for stride in range(1, max(len(exponents), 1) + 1):
        yield sorted(sign * _exact(1, e) for e in exponents if e % stride == 0
                     for sign in signs)


def _candidates(scale: Scale) -> Iterator[list[float]]:
    low, high = scale.low, scale.high
    if scale.kind == "log":
        exponents = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
        if high / low < _FEW_DECADES:
            yield [_exact(m, e) for e in exponents for m in (1, 2, 5)]
        yield from _decades([e for e in exponents if low <= _exact(1, e) <= high])
    elif scale.kind == "symlog":
        largest = max(abs(low), abs(high), LINTHRESH)
        exponents = range(0, math.floor(math.log10(largest / LINTHRESH)) + 1)
        for ticks in _decades(exponents, signs=(-LINTHRESH, LINTHRESH)):
            yield sorted([0.0, *ticks])
    yield from _linear(low, high)


def choose_ticks(scale: Scale, fits: Callable[[list[float]], bool]) -> list[float]:
    """The densest "nice" ticks within ``scale``, at least two, that ``fits`` accepts (the
    linear ones last: e.g. for a log axis inside one decade); if none fits, the sparsest."""
    sparsest: list[float] = []
    for candidate in _candidates(scale):
        ticks = [t for t in candidate if scale.low <= t <= scale.high]
        if len(ticks) >= 2 and fits(ticks):
            return ticks
        if len(ticks) >= 2 or not sparsest:
            sparsest = ticks
    return sparsest


def label(value: float) -> str:
    """A tick's label, a plain number: ``0.25``, ``100``, ``1e+06``."""
    return f"{value:g}"
