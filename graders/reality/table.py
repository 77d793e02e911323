"""Where the lab's formulas hold, as a Markdown table an instructor pastes into the guide."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from graders.reality.curves import LOADS, RealityCurve, RealityPoint

#: A formula p99 within this fraction of reality "holds".
HOLDS_WITHIN = 0.10
HEADER = ("| track | function | at | formula p99 | real p99 | error | formula within 10 % "
          "| SLO verdict flips at |")


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


def _where_it_holds(curve: RealityCurve) -> str:
    """The inputs at which the formula's p99 is within :data:`HOLDS_WITHIN` of reality."""
    good = [curve.points[i] for i in range(len(curve.points))
            if curve.points[i].source != "unstable"
            and abs(curve.points[i].error) <= HOLDS_WITHIN]
    if not good:
        return "nowhere"
    if curve.function == "queueing_latency":
        loads = {p.x: rho for p, rho in zip(curve.points, LOADS, strict=True)}
        return ", ".join(f"{loads[p.x]:g}" for p in good) + " of capacity"
    return "B = " + ", ".join(f"{p.x:g}" for p in good)


#: The loads of the table of the queueing formula's error, as fractions of capacity.
TABLE_LOADS = (0.3, 0.5, 0.7, 0.8, 0.9, 0.95)


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
    """Both tables: the queueing formula's error against load, then one row per track and
    function at the track's defaults."""
    return [*load_lines(reality), "", *default_lines(reality)]


def default_lines(reality: Mapping[str, Sequence[RealityCurve]]) -> list[str]:
    """One row per track and function, at the track's defaults."""
    lines = [HEADER, "|---|---|---|---|---|---|---|---|"]
    for track_id, found in reality.items():
        for curve in found:
            point = curve.default
            flips = ", ".join(input_text(curve, p.x) for p in curve.flips()) or "nowhere"
            lines.append(f"| {track_id} | {curve.function} | {input_text(curve, point.x)} "
                         f"| {milliseconds(point.formula_p99_ms)} | {real_text(point)} "
                         f"| {error_text(point)} | {_where_it_holds(curve)} | {flips} |")
    return lines
