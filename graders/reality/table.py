"""Where the lab's formulas hold, as a Markdown table an instructor pastes into the guide."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from graders.reality.curves import LOADS, RealityCurve, RealityPoint

#: A formula p99 within this fraction of reality "holds".
HOLDS_WITHIN = 0.10
HEADER = ("| track | function | at | formula p99 | real p99 | error | formula within 10 % "
          "| SLO verdicts differ |")


def milliseconds(value: float) -> str:
    """A latency as the table shows it: 115 ms, 36.5 ms, 0.812 ms, inf."""
    if not math.isfinite(value):
        return "unstable"
    return f"{value:.3g} ms" if value < 100 else f"{value:.0f} ms"


def real_text(point: RealityPoint) -> str:
    """The real p99 with its source: "115 ms (exact)", "84.9 ± 0.3 ms (simulated)"."""
    if point.source == "unstable":
        return "unstable"
    if point.source == "exact":
        return f"{milliseconds(point.p99_ms)} (exact)"
    return f"{milliseconds(point.p99_ms)} ± {point.half_ms:.2g} ms (simulated)"


def error_text(point: RealityPoint) -> str:
    """The formula's relative error, negative when optimistic: "-57 %"."""
    if math.isnan(point.error):
        return "n/a"
    return f"{round(point.error * 100) + 0:+d} %"  # + 0: never "-0 %"


def input_text(curve: RealityCurve, x: float) -> str:
    if curve.function == "batching_tax":
        return f"B = {x:g}"
    return f"{x:.4g} req/s"


def _load_of(curve: RealityCurve, point: RealityPoint) -> float | None:
    """The load (fraction of capacity) of a queueing_latency point, if it is one of
    :data:`LOADS`."""
    loads = dict(zip((p.x for p in curve.points), LOADS, strict=False))
    return loads.get(point.x) if curve.function == "queueing_latency" else None


def _at(curve: RealityCurve, point: RealityPoint) -> str:
    """An input as the table's ranges name it: "0.5" (of capacity) or "B = 4"."""
    load = _load_of(curve, point)
    return f"{load:g}" if load is not None else input_text(curve, point.x)


def _runs(flags: Sequence[bool]) -> list[tuple[int, int]]:
    """The ``(first, last)`` indices of each run of consecutive true flags."""
    runs: list[tuple[int, int]] = []
    for index, flag in enumerate(flags):
        if flag and runs and runs[-1][1] == index - 1:
            runs[-1] = (runs[-1][0], index)
        elif flag:
            runs.append((index, index))
    return runs


def _unit(curve: RealityCurve) -> str:
    return " of capacity" if curve.function == "queueing_latency" else ""


def where_it_holds(curve: RealityCurve) -> str:
    """The computed inputs at which the formula's p99 is within :data:`HOLDS_WITHIN` of
    reality, as ranges of adjacent computed points: "0.3 to 0.99 of capacity"."""
    points = curve.points
    good = [p.source != "unstable" and abs(p.error) <= HOLDS_WITHIN for p in points]
    ranges = [_at(curve, points[a]) if a == b else f"{_at(curve, points[a])} to "
              f"{_at(curve, points[b])}" for a, b in _runs(good)]
    return ", ".join(ranges) + _unit(curve) if ranges else "nowhere"


def flip_text(curve: RealityCurve) -> str:
    """Where the SLO verdicts of the formula and of reality differ, by the computed inputs
    where they differ, with the nearest ones where they agree (each change lies between
    the two): "from B = 96 on (not at B = 64)", "at 0.9 to 0.95 of capacity (not at 0.8
    or 0.99)"."""
    points = curve.points
    last = len(points) - 1
    parts = []
    for a, b in _runs([p.flips(curve.slo_ms) for p in points]):
        if a == 0 and b == last:
            parts.append("at every computed input")
            continue
        first = _at(curve, points[a])
        if b == last:  # and beyond, as far as the inputs were computed
            where = f"from {first}{_unit(curve)} on"
        else:
            span = first if a == b else f"{first} to {_at(curve, points[b])}"
            where = f"at {span}{_unit(curve)}"
        agree = [_at(curve, points[i]) for i in (a - 1, b + 1) if 0 <= i <= last]
        parts.append(f"{where} (not at {' or '.join(agree)})" if agree else where)
    return "; ".join(parts) if parts else "nowhere"


#: The loads of the table of the queueing formula's error, as fractions of capacity.
TABLE_LOADS = (0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.99)
#: The load at which a track whose default load is unstable compares its queueing formula.
STABLE_LOAD = 0.5

LOAD_LEGEND = ("The queueing formula's p99 against the real one, by load. *Load*: the "
               "arrival rate as a fraction of the fleet's capacity (replicas x 1000 / "
               "service_ms requests per second). *Error*: formula p99 / real p99 - 1, "
               "negative when the formula is optimistic (it promises a lower p99 than the "
               "queue has). The real p99 is exact (M/M/c; one replica: M/D/1 at service cv 0, "
               "M/G/1 by Laplace inversion at cv 0.2 and above) or simulated (with its 95 % "
               "interval).")
DEFAULT_LEGEND = ("Both functions at each track's defaults (queueing_latency at load "
                  f"{STABLE_LOAD:g} where the default load is unstable). *Formula within "
                  "10 %*: the computed loads (fractions of capacity) or batch sizes at which "
                  "the error is at most 10 % either way, as ranges of adjacent computed "
                  "inputs. *SLO verdicts differ*: where the formula meets the SLO and the "
                  "real p99 does not, or the reverse (only where the real p99's interval is "
                  "clear of the SLO): the computed inputs where they differ and, in "
                  "parentheses, the nearest ones where they agree; each change lies between "
                  "the two.")


def load_lines(reality: Mapping[str, Sequence[RealityCurve]]) -> list[str]:
    """The queueing formula's p99 error against load, one row per track."""
    lines = ["| track (replicas, service cv) | "
             + " | ".join(f"load {load:g}" for load in TABLE_LOADS) + " |",
             "|---|" + "---|" * len(TABLE_LOADS)]
    for track_id, found in reality.items():
        curve = next((c for c in found if c.function == "queueing_latency"), None)
        if curve is None:
            continue
        by_load = dict(zip(LOADS, curve.points, strict=True))
        cells = " | ".join(error_text(by_load[load]) for load in TABLE_LOADS)
        lines.append(f"| {track_id} ({curve.replicas}, {curve.service_cv:g}) | {cells} |")
    return lines


def table_lines(reality: Mapping[str, Sequence[RealityCurve]]) -> list[str]:
    """Both tables, each after its legend: the queueing formula's error against load,
    then one row per track and function at the track's defaults."""
    return [LOAD_LEGEND, "", *load_lines(reality), "", DEFAULT_LEGEND, "",
            *default_lines(reality)]


def shown_point(curve: RealityCurve) -> tuple[str, RealityPoint]:
    """The input the defaults table compares at, and its point: the default, or load
    :data:`STABLE_LOAD` when the default load is unstable."""
    point = curve.default
    if curve.function == "queueing_latency" and point.source == "unstable":
        stable = dict(zip(LOADS, curve.points, strict=True))[STABLE_LOAD]
        return (f"{input_text(curve, stable.x)} (load {STABLE_LOAD:g}; default "
                f"{input_text(curve, point.x)} is unstable)", stable)
    return input_text(curve, point.x), point


def default_lines(reality: Mapping[str, Sequence[RealityCurve]]) -> list[str]:
    """One row per track and function, at the track's defaults (:func:`shown_point`)."""
    lines = [HEADER, "|---|---|---|---|---|---|---|---|"]
    for track_id, found in reality.items():
        for curve in found:
            at, point = shown_point(curve)
            lines.append(f"| {track_id} | {curve.function} | {at} "
                         f"| {milliseconds(point.formula_p99_ms)} | {real_text(point)} "
                         f"| {error_text(point)} | {where_it_holds(curve)} "
                         f"| {flip_text(curve)} |")
    return lines
