"""Each track's reality curves: the formula's p99 beside the exact or simulated one.

Two curves per track, on the same inputs as the feedback page's: ``queueing_latency``
against the load and ``batching_tax`` against the batch size (batches released when
full). A point is exact where a closed form or a numerical inversion exists (M/M/c: cv 1
without batching, :mod:`reference.tails`; one replica without batching: M/D/1 at cv 0,
:mod:`graders.reality.md1`, and M/G/1 with gamma service where its Laplace inversion is
accurate, :mod:`graders.reality.mg1`), else simulated. Each also holds the point at the
track's defaults, for ``graders tracks show``. Building them runs the simulation (numpy);
reading them (:mod:`graders.reality.store`) runs nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from graders.reality import md1, mg1
from graders.reality.simulate import Distribution, Scenario, estimate

if TYPE_CHECKING:
    from graders.trackfiles.tracks import Track

Source = Literal["exact", "simulated", "unstable"]

#: Loads (fractions of the fleet's capacity, stable ones) and batch sizes: the feedback page
#: sweeps these (graders.feedback.curves), so the reality curves share its inputs.
LOADS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.97, 0.99)
BATCHES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
FUNCTIONS = ("queueing_latency", "batching_tax")


@dataclass(frozen=True)
class RealityPoint:
    """One input: the formula's p99, the real one and its 95 % half-width (0 when exact)."""

    x: float
    formula_p99_ms: float
    p99_ms: float
    half_ms: float
    source: Source

    @property
    def error(self) -> float:
        """The formula's relative error: negative when it is optimistic."""
        if not (math.isfinite(self.p99_ms) and self.p99_ms > 0):
            return math.nan
        return self.formula_p99_ms / self.p99_ms - 1.0

    def flips(self, slo_ms: float) -> bool:
        """True when the SLO verdict of the formula and of reality differ at this input
        (only where the interval is clear of the SLO: a verdict inside it is unknown)."""
        if self.source == "unstable":
            return False
        formula_ok = self.formula_p99_ms <= slo_ms
        if formula_ok:
            return self.p99_ms - self.half_ms > slo_ms
        return self.p99_ms + self.half_ms <= slo_ms


@dataclass(frozen=True)
class RealityCurve:
    """One function on one track: its points, and the point at the track's defaults."""

    track_id: str
    function: str
    x_label: str
    slo_ms: float
    service_cv: float
    replicas: int
    points: tuple[RealityPoint, ...]
    default: RealityPoint

    def flips(self) -> tuple[RealityPoint, ...]:
        """Every point at which the SLO verdict would flip."""
        return tuple(point for point in self.points if point.flips(self.slo_ms))


def _real(scenario: Scenario, formula_p99_ms: float, x: float) -> RealityPoint:
    """The exact point where one exists (M/M/c; one replica: M/D/1, or M/G/1 with gamma
    service of cv at least :data:`mg1.MIN_EXACT_CV`), else the simulated one."""
    from reference.tails import mmc_p99_ms

    if not scenario.utilization < 1.0:
        return RealityPoint(x, formula_p99_ms, math.inf, 0.0, "unstable")
    unbatched = scenario.batch_size == 1 and scenario.distribution == "gamma"
    if unbatched and scenario.service_cv == 1.0:
        exact = mmc_p99_ms(arrival_qps=scenario.arrival_qps, service_ms=scenario.service_ms,
                           replicas=scenario.replicas)
        return RealityPoint(x, formula_p99_ms, exact, 0.0, "exact")
    if unbatched and scenario.replicas == 1 and scenario.service_cv == 0.0:
        exact = md1.quantile_ms(0.99, arrival_qps=scenario.arrival_qps,
                                service_ms=scenario.service_ms)
        return RealityPoint(x, formula_p99_ms, exact, 0.0, "exact")
    if unbatched and scenario.replicas == 1 and scenario.service_cv >= mg1.MIN_EXACT_CV:
        exact = mg1.quantile_ms(0.99, arrival_qps=scenario.arrival_qps,
                                service_ms=scenario.service_ms,
                                service_cv=scenario.service_cv)
        return RealityPoint(x, formula_p99_ms, exact, 0.0, "exact")
    found = estimate(scenario)
    return RealityPoint(x, formula_p99_ms, found.p99_ms, found.p99_half_ms, "simulated")


def load_point(p: Any, arrival_qps: float, distribution: Distribution = "gamma",
               service_cv: float | None = None) -> RealityPoint:
    """queueing_latency of profile ``p`` at ``arrival_qps``: formula and reality."""
    from reference import queueing_latency

    cv = p.service_cv if service_cv is None else service_cv
    formula = queueing_latency(arrival_qps=arrival_qps, service_ms=p.service_ms,
                               replicas=p.replicas, service_cv=cv, slo_ms=p.slo_ms)
    scenario = Scenario(arrival_qps, p.service_ms, p.replicas, cv, distribution)
    return _real(scenario, formula.p99_latency_ms, arrival_qps)


def batch_point(p: Any, batch_size: int) -> RealityPoint:
    """batching_tax of profile ``p`` at ``batch_size``: formula and reality."""
    from reference import batching_tax

    formula = batching_tax(batch_size=batch_size, arrival_qps=p.arrival_qps,
                           service_ms=p.service_ms, slo_ms=p.slo_ms,
                           efficiency_gain=p.batch_efficiency_gain, replicas=p.replicas,
                           service_cv=p.service_cv)
    # the rate the formula used: the lab floors it (0.0001 req/s), so a track with no
    # arrivals has curves as the formula sees them, never a division by zero
    scenario = Scenario(formula.arrival_qps, formula.batched_service_ms, p.replicas,
                        p.service_cv, batch_size=batch_size)
    return _real(scenario, formula.total_p99_ms, float(batch_size))


def capacity_qps(p: Any) -> float:
    """The fleet's capacity in requests per second."""
    return float(p.replicas * 1000.0 / p.service_ms)


def track_reality(track: Track) -> tuple[RealityCurve, RealityCurve]:
    """Both reality curves of ``track`` (runs the simulation: a precomputation only)."""
    p = track.reference_profile()
    capacity = capacity_qps(p)
    loads = tuple(load_point(p, rho * capacity) for rho in LOADS)
    batches = tuple(batch_point(p, batch) for batch in BATCHES)
    def curve(function: str, x_label: str, points: tuple[RealityPoint, ...],
              default: RealityPoint) -> RealityCurve:
        return RealityCurve(track.track_id, function, x_label, p.slo_ms, p.service_cv,
                            p.replicas, points, default)

    return (curve("queueing_latency", "arrival rate (req/s)", loads,
                  load_point(p, p.arrival_qps)),
            curve("batching_tax", "batch size", batches, batch_point(p, p.batch_size)))
