"""The lab's invariants (lab spec section 4) checked on one student curve, point by point.

These use the student's own values only, so they can be marked on the student's plot.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from graders.feedback.curves import GAIN_PASS_BATCH, GAIN_PASS_MARK, Sweep

#: Relative slack for "never rises"/"never falls": float noise, not a tolerance for bugs.
SLACK = 1e-9
PERCENTILES = ("p50_latency_ms", "p95_latency_ms", "p99_latency_ms", "p999_latency_ms")


@dataclass(frozen=True)
class Violation:
    """An invariant the student's value at point ``index`` breaks, marked on ``field``."""

    index: int
    field: str
    rule: str


Row = dict[str, Any] | None


def real(row: Row, field: str) -> float | None:
    """The field as a real number (inf allowed), or None if it is missing or not a number."""
    value = row.get(field) if isinstance(row, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return None
    return float(value)


def at_most(low: float, high: float) -> bool:
    """``low <= high`` up to float noise; infinities compare exactly."""
    if math.isinf(low) or math.isinf(high):
        return low <= high
    return low <= high + SLACK * max(abs(low), abs(high), 1.0)


def _monotone(rows: Sequence[Row], field: str, rule: str, *, rising: bool) -> list[Violation]:
    """Points where ``field`` moves against its direction (``rising``: it never falls)
    from the previous point that has a value."""
    found = []
    previous: float | None = None
    for index, row in enumerate(rows):
        value = real(row, field)
        if value is None:
            continue
        if previous is not None and not (at_most(previous, value) if rising
                                         else at_most(value, previous)):
            found.append(Violation(index, field, rule))
        previous = value
    return found


def _each(rows: Sequence[Row], field: str, rule: str,
          broken: Callable[[Row], bool]) -> list[Violation]:
    return [Violation(index, field, rule) for index, row in enumerate(rows)
            if row is not None and broken(row)]


def _floor(sweep: Sweep, field: str) -> Callable[[Row], bool]:
    def broken(row: Row) -> bool:
        value = real(row, field)
        return value is not None and not at_most(sweep.service_ms, value)

    return broken


def _load(sweep: Sweep, rows: Sequence[Row]) -> list[Violation]:
    p99 = "p99_latency_ms"

    def disordered(row: Row) -> bool:
        values = [real(row, name) for name in PERCENTILES]
        known = [v for v in values if v is not None]
        return len(known) == len(values) and not all(
            at_most(a, b) for a, b in zip(known, known[1:], strict=False))

    def unstable_mismatch(row: Row) -> bool:
        utilization, stable = real(row, "utilization"), (row or {}).get("stable")
        return utilization is not None and isinstance(stable, bool) \
            and stable != (utilization < 1)

    def finite_when_unstable(row: Row) -> bool:
        value = real(row, p99)
        return (row or {}).get("stable") is False and value is not None \
            and not math.isinf(value)

    def utilization_wrong(index: int) -> bool:
        utilization = real(rows[index], "utilization")
        kwargs = sweep.cases[index].kwargs
        capacity = kwargs["replicas"] * 1000.0 / kwargs["service_ms"]
        expected = kwargs["arrival_qps"] / capacity
        return utilization is not None and not math.isclose(utilization, expected,
                                                            rel_tol=1e-6, abs_tol=1e-12)

    return [
        *_monotone(rows, p99, "p99 falls as the load rises", rising=True),
        *_each(rows, p99, "percentiles out of order (p50 <= p95 <= p99 <= p999)", disordered),
        *_each(rows, p99, "p99 is below the service time", _floor(sweep, p99)),
        *_each(rows, p99, "stable does not match utilization < 1", unstable_mismatch),
        *_each(rows, p99, "the queue is unstable but p99 is finite", finite_when_unstable),
        *(Violation(i, p99, "utilization is not arrival / (replicas x 1000 / service_ms)")
          for i in range(len(rows)) if utilization_wrong(i)),
    ]


def _batch(sweep: Sweep, rows: Sequence[Row]) -> list[Violation]:
    total = "total_p99_ms"

    def uncovered(row: Row) -> bool:
        parts = [real(row, name) for name in ("formation_delay_ms", "batched_service_ms")]
        value = real(row, total)
        return value is not None and None not in parts \
            and not at_most(sum(p for p in parts if p is not None), value)

    def low_gain(index: int) -> bool:
        gain = real(rows[index], "throughput_gain")
        return sweep.xs[index] >= GAIN_PASS_BATCH and gain is not None \
            and gain <= GAIN_PASS_MARK

    falls = [Violation(v.index, total, "formation delay falls as the batch grows")
             for v in _monotone(rows, "formation_delay_ms", "", rising=True)]
    return [
        *falls,
        *_each(rows, total, "total p99 is below formation delay + batched service", uncovered),
        *(Violation(i, "throughput_gain", f"gain at batch >= {GAIN_PASS_BATCH} is not above "
                    f"the lab's {GAIN_PASS_MARK:g}x pass mark")
          for i in range(len(rows)) if low_gain(i)),
    ]


def _context(sweep: Sweep, rows: Sequence[Row]) -> list[Violation]:
    field = "max_concurrent"

    def oom_mismatch(row: Row) -> bool:
        value, oom = real(row, field), (row or {}).get("oom")
        return value is not None and isinstance(oom, bool) and oom != (value < 1)

    return [*_monotone(rows, field, "max_concurrent rises with context length", rising=False),
            *_each(rows, field, "oom does not match max_concurrent < 1", oom_mismatch)]


def _bandwidth(sweep: Sweep, rows: Sequence[Row]) -> list[Violation]:
    exposed = "exposed_first_request_ms"
    return [*_monotone(rows, "cold_start_ms", "cold start rises with more bandwidth",
                       rising=False),
            *_each(rows, exposed, "exposed latency is below the service time",
                   _floor(sweep, exposed))]


def _warm_pool(sweep: Sweep, rows: Sequence[Row]) -> list[Violation]:
    exposed = "exposed_first_request_ms"
    return [*_monotone(rows, exposed, "exposed latency rises with a larger warm pool",
                       rising=False),
            *_each(rows, exposed, "exposed latency is below the service time",
                   _floor(sweep, exposed))]


CHECKS: dict[str, Callable[[Sweep, Sequence[Row]], list[Violation]]] = {
    "load": _load, "batch": _batch, "context": _context, "bandwidth": _bandwidth,
    "warm-pool": _warm_pool,
}


def violations(sweep: Sweep, rows: Sequence[Row]) -> list[Violation]:
    """Every invariant the student's rows (one per x, None where a call failed) break."""
    check = CHECKS.get(sweep.name)
    found = check(sweep, rows) if check is not None else []
    return sorted(set(found), key=lambda v: (v.index, v.field, v.rule))
