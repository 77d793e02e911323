"""Erlang-C queueing and the tail latency of an M/G/c serving fleet."""

from __future__ import annotations

import math

from reference.domain import at_least, finite
from reference.results import QueueingResult

#: Percentiles reported by :func:`queueing_latency`, by result field.
PERCENTILES = {
    "p50_latency_ms": 0.50,
    "p95_latency_ms": 0.95,
    "p99_latency_ms": 0.99,
    "p999_latency_ms": 0.999,
}


def _whole_replicas(replicas: float) -> int:
    value = finite("replicas", replicas)
    if not value.is_integer():
        raise ValueError(f"replicas must be a whole number, got {replicas!r}")
    return int(value)


def erlang_c(arrival_qps: float, service_ms: float, replicas: int) -> tuple[float, float]:
    """Return ``(wait_rate_per_s, wait_probability)`` for an M/M/c queue.

    Uses the Erlang B recursion, which stays finite and accurate for large fleets.
    An overloaded or degenerate queue gives ``(inf, 1.0)``.
    """
    arrival = at_least("arrival_qps", arrival_qps, 0.0)
    service = finite("service_ms", service_ms)
    servers = _whole_replicas(replicas)
    if service <= 0 or servers <= 0:
        return math.inf, 1.0
    rate = 1000.0 / service
    if rate <= 0:  # an infinite service time serves nobody: the offered load is infinite
        return math.inf, 1.0
    offered = arrival / rate
    if offered >= servers:
        return math.inf, 1.0
    blocking = 1.0
    for k in range(1, servers + 1):
        blocking = offered * blocking / (k + offered * blocking)
    wait_probability = servers * blocking / (servers - offered * (1.0 - blocking))
    # c * mu - lambda, written as mu * (c - a): c - a is exact near saturation, so the rate
    # stays positive whenever a < c instead of rounding to 0.
    return (servers - offered) * rate, wait_probability


def _percentile_ms(
    quantile: float, service_ms: float, wait_rate: float, wait_prob: float, variability: float
) -> float:
    if wait_prob <= 0 or quantile <= 1.0 - wait_prob:
        return service_ms
    return service_ms + variability * (-math.log((1.0 - quantile) / wait_prob) / wait_rate * 1000.0)


def queueing_latency(
    *,
    arrival_qps: float,
    service_ms: float,
    replicas: int = 1,
    service_cv: float = 1.0,
    slo_ms: float = 100.0,
) -> QueueingResult:
    """Mean and tail latency of ``replicas`` servers fed at ``arrival_qps``."""
    arrival = at_least("arrival_qps", arrival_qps, 0.0)
    service = finite("service_ms", service_ms)
    cv = at_least("service_cv", service_cv, 0.0)
    slo = finite("slo_ms", slo_ms)
    servers = max(1, int(finite("replicas", replicas)))
    rate = 1000.0 / service if service > 0 else 0.0
    # lambda / (c * mu) computed as (lambda / mu) / c: equal in exact arithmetic, and rounded
    # this way stable (rho < 1) holds exactly when erlang_c's offered load a = lambda / mu < c.
    utilization = arrival / rate / servers if rate > 0 else math.inf
    stable = utilization < 1.0
    if not stable or rate <= 0:
        return QueueingResult(
            arrival_qps=arrival,
            service_ms=service,
            replicas=servers,
            utilization=utilization,
            stable=False,
            mean_latency_ms=math.inf,
            p50_latency_ms=math.inf,
            p95_latency_ms=math.inf,
            p99_latency_ms=math.inf,
            p999_latency_ms=math.inf,
            slo_ms=slo,
            slo_ok=False,
            queue_wait_probability=1.0,
            queue_amplifier=math.inf,
        )
    variability = max(0.1, (1.0 + cv * cv) / 2.0)
    wait_rate, wait_prob = erlang_c(arrival, service, servers)
    tails = {
        field: _percentile_ms(q, service, wait_rate, wait_prob, variability)
        for field, q in PERCENTILES.items()
    }
    p99 = tails["p99_latency_ms"]
    return QueueingResult(
        arrival_qps=arrival,
        service_ms=service,
        replicas=servers,
        utilization=utilization,
        stable=True,
        mean_latency_ms=service + wait_prob / wait_rate * 1000.0 * variability,
        slo_ms=slo,
        slo_ok=p99 <= slo,
        queue_wait_probability=wait_prob,
        queue_amplifier=p99 / service,
        **tails,
    )
