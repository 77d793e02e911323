"""Every cached point of the shipped one-replica tracks against an independent estimate of
the truth, computed here by other means than graders/reality's:

- an M/G/1 point (no batching), exact in the cache (graders/reality/mg1.py: Euler
  inversion in double precision), against mpmath's Talbot inversion at 30 digits, and
  against an i.i.d. Benes sampler (a geometric number of residual service times, plus a
  service time: every sample independent, so no start-up bias);
- a simulated point (batches of 2 or more), against this module's own event loop, with
  twice the requests and seeds of the cache.

Each must be within 5 % of the truth, with a 95 % half-width under 5 %, and inside its
interval: an exact point's interval is its numerical precision (relative 1e-6); a
simulated point's and the independent estimate's 95 % intervals must overlap.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator
from typing import Any

import mpmath
import numpy as np
import pytest

from graders.reality import simulate
from graders.reality.curves import RealityPoint
from graders.reality.store import built_reality
from graders.trackfiles.tracks import Track, default_tracks_dir, load_tracks
from reference import batching_tax

pytestmark = pytest.mark.slow

WITHIN = 0.05
EXACT = 1e-6
P = 0.99


def _one_replica_tracks() -> list[Track]:
    return [t for t in load_tracks(default_tracks_dir()) if t.reference_profile().replicas == 1]


def _points(track: Track, reality: dict[str, Any]) -> Iterator[tuple[str, RealityPoint,
                                                                     float, float, int]]:
    """Each cached point of ``track`` with its queue: ``(label, point, arrival_qps,
    service_ms, batch_size)``."""
    p = track.reference_profile()
    for curve in reality[track.track_id]:
        for point in (*curve.points, curve.default):
            if curve.function == "queueing_latency":
                yield (f"{track.track_id} load {point.x:g} req/s", point, point.x,
                       p.service_ms, 1)
            else:
                batch = int(point.x)
                batched = batching_tax(batch_size=batch, arrival_qps=p.arrival_qps,
                                       service_ms=p.service_ms, slo_ms=p.slo_ms,
                                       efficiency_gain=p.batch_efficiency_gain,
                                       service_cv=p.service_cv).batched_service_ms
                yield (f"{track.track_id} B = {batch}", point, p.arrival_qps, batched, batch)


@pytest.fixture(scope="module")
def cases() -> list[tuple[str, RealityPoint, float, float, int, float]]:
    """Every cached point of the one-replica tracks (built first, as an install does),
    with its track's service cv."""
    tracks = _one_replica_tracks()
    reality = built_reality(tracks)
    assert sorted(reality) == sorted(t.track_id for t in tracks)
    return [(label, point, arrival, service, batch, t.reference_profile().service_cv)
            for t in tracks for label, point, arrival, service, batch in _points(t, reality)]


# --- the independent estimates -----------------------------------------------------------


def talbot_p99(arrival_qps: float, service_ms: float, cv: float) -> float:
    """M/G/1's p99 with gamma service: the Pollaczek-Khinchine transform inverted by
    mpmath (Talbot's contour, 30 digits), the quantile by bisection to 1e-9."""
    mpmath.mp.dps = 30
    shape, rate = mpmath.mpf(1) / mpmath.mpf(cv) ** 2, mpmath.mpf(arrival_qps) / 1000
    scale = mpmath.mpf(service_ms) / shape
    rho = rate * service_ms

    def survival(t: Any) -> Any:
        def transform(s: Any) -> Any:
            b = (1 + s * scale) ** (-shape)
            return (1 - (1 - rho) * s * b / (s - rate * (1 - b))) / s
        return mpmath.invertlaplace(transform, t, method="talbot")

    # P(T > t) falls through 1 - P between half the mean service and this bound (the
    # service's own p99 is below 8 means at cv up to 1.2; the wait's, heavy traffic's)
    low, high = service_ms / 2, service_ms * (8 + 5 * (1 + cv * cv) / (1 - float(rho)))
    assert survival(low) > 1 - P > survival(high)
    while high - low > 1e-9 * high:
        middle = (low + high) / 2
        low, high = (middle, high) if survival(middle) > 1 - P else (low, middle)
    return (low + high) / 2


def benes_p99(arrival_qps: float, service_ms: float, cv: float, samples: int, seed: int,
              z: float) -> tuple[float, float, float]:
    """M/G/1's p99 from ``samples`` i.i.d. sojourn times: the wait is a sum of N residual
    service times, P(N = n) = (1 - rho) rho^n, the residual of gamma(k, theta) being
    U * gamma(k + 1, theta). Returns the estimate and its distribution-free interval
    (order statistics, ``z`` standard errors of the rank either side)."""
    rng = np.random.Generator(np.random.PCG64(seed))
    shape, rho = 1.0 / (cv * cv), arrival_qps / 1000.0 * service_ms
    scale = service_ms / shape
    sojourn = []
    for _ in range(samples // 10_000):
        counts = rng.geometric(1.0 - rho, 10_000) - 1
        residuals = rng.uniform(size=counts.sum()) * rng.gamma(shape + 1.0, scale,
                                                               counts.sum())
        owner = np.repeat(np.arange(10_000), counts)
        waits = np.bincount(owner, weights=residuals, minlength=10_000)
        sojourn.append(waits + rng.gamma(shape, scale, 10_000))
    ordered = np.sort(np.concatenate(sojourn))
    n = len(ordered)
    spread = z * math.sqrt(n * P * (1 - P))
    low, high = math.floor(n * P - spread), math.ceil(n * P + spread)
    return float(np.quantile(ordered, P)), float(ordered[low]), float(ordered[high])


def loop_p99(arrival_qps: float, service_ms: float, cv: float, batch: int, requests: int,
             seeds: int) -> tuple[float, float]:
    """Batches of ``batch`` released when full onto one server, request by request in a
    plain loop; ``seeds`` replications from empty, the first tenth deleted. Returns the
    mean p99 and its 95 % half-width."""
    p99s = []
    shape = 1.0 / (cv * cv)
    for seed in range(seeds):
        rng = np.random.Generator(np.random.PCG64(10_000 + seed))
        arrivals = np.cumsum(rng.exponential(1000.0 / arrival_qps, requests)).tolist()
        services = rng.gamma(shape, service_ms / shape, requests // batch).tolist()
        latencies, free = [], 0.0
        for index, service in enumerate(services):
            members = arrivals[index * batch:(index + 1) * batch]
            free = max(members[-1], free) + service
            latencies.extend(free - arrival for arrival in members)
        p99s.append(float(np.quantile(latencies[len(latencies) // 10:], P)))
    t_975 = 2.131  # 15 degrees of freedom
    return statistics.fmean(p99s), t_975 * statistics.stdev(p99s) / math.sqrt(seeds)


# --- the comparisons -----------------------------------------------------------------------


def test_every_one_replica_point_has_a_half_width_under_5_percent(cases: list[Any]) -> None:
    wide = [(label, point.half_ms / point.p99_ms) for label, point, *_ in cases
            if point.half_ms > WITHIN * point.p99_ms]
    assert not wide, wide


def test_every_exact_point_is_the_transform_inversion_of_mpmath(cases: list[Any]) -> None:
    exact = [(label, point, arrival, service, cv)
             for label, point, arrival, service, batch, cv in cases if batch == 1]
    assert len(exact) >= 3 * 15
    for label, point, arrival, service, cv in exact:
        assert point.source == "exact", label
        truth = talbot_p99(arrival, service, cv)
        assert point.p99_ms == pytest.approx(truth, rel=EXACT), label


def test_every_exact_point_is_within_5_percent_of_an_iid_benes_sample(
        cases: list[Any]) -> None:
    """The Benes sample checks the truth of the previous test by other means: the cached
    p99 lies within 5 % of its estimate and inside its interval, a simultaneous 95 % one
    over all the points (Bonferroni: each at 1 - 0.05 / their number)."""
    exact = [case for case in cases if case[4] == 1]
    z = statistics.NormalDist().inv_cdf(1 - 0.025 / len(exact))
    for seed, (label, point, arrival, service, _, cv) in enumerate(exact):
        estimate, low, high = benes_p99(arrival, service, cv, 200_000, seed, z)
        assert abs(point.p99_ms / estimate - 1) <= WITHIN, (label, point.p99_ms, estimate)
        assert low <= point.p99_ms <= high, (label, point.p99_ms, low, high)


def test_every_simulated_point_agrees_with_an_independent_event_loop(
        cases: list[Any]) -> None:
    simulated = [case for case in cases if case[4] > 1]
    assert simulated
    for label, point, arrival, service, batch, cv in simulated:
        assert point.source == "simulated", label
        truth, half = loop_p99(arrival, service, cv, batch, 2 * simulate.REQUESTS, 16)
        assert abs(point.p99_ms / truth - 1) <= WITHIN, (label, point.p99_ms, truth)
        assert abs(point.p99_ms - truth) <= point.half_ms + half, (
            label, point.p99_ms, point.half_ms, truth, half)
