"""The exact sojourn-time distribution of an M/M/c queue (FCFS), beside the lab's formula.

A request's latency is its service time S ~ Exp(mu) plus its wait W, independent of S:
W = 0 with probability 1 - C (C the Erlang C value) and W ~ Exp(r), r = c*mu - lambda,
otherwise. So the latency is a mixture of the service exponential and its convolution
with the waiting exponential:

    P(T > t) = (1 - C) e^(-mu t) + C e^(-mu t) (1 + mu (1 - e^(-(r - mu) t)) / (r - mu)),

written so that it stays exact as r approaches mu (the bracket then tends to 1 + mu t).
The lab's formula adds a waiting-time quantile to the *mean* service time; these tails
include the service time's own, which is why a fleet's formula p99 is optimistic.
"""

from __future__ import annotations

import math

from reference.domain import at_least, finite
from reference.queueing import erlang_c

#: Relative accuracy of :func:`mmc_sojourn_quantile_ms` (absolute below 1 ms).
QUANTILE_TOLERANCE = 1e-12


def _rates(arrival_qps: float, service_ms: float, replicas: int) -> tuple[float, float, float]:
    """``(mu, r, C)`` per millisecond; ``r`` is ``inf`` for an unstable queue."""
    service = finite("service_ms", service_ms)
    if service <= 0 or not math.isfinite(service):
        raise ValueError(f"service_ms must be a positive finite number, got {service_ms!r}")
    wait_rate_per_s, wait_probability = erlang_c(arrival_qps, service, replicas)
    return 1.0 / service, wait_rate_per_s / 1000.0, wait_probability


def mmc_sojourn_survival(t_ms: float, *, arrival_qps: float, service_ms: float,
                         replicas: int = 1) -> float:
    """P(latency > ``t_ms``) for an M/M/c queue; 1.0 everywhere when it is unstable."""
    t = at_least("t_ms", t_ms, 0.0)
    mu, r, wait = _rates(arrival_qps, service_ms, replicas)
    if math.isinf(r):
        return 1.0
    served = math.exp(-mu * t)
    d = r - mu
    if d * t < -1.0:  # r well below mu: both exponentials decay, nothing overflows
        waited = (mu * math.exp(-r * t) - r * served) / (mu - r)
    else:  # (1 - e^(-d t)) / d through expm1: exact near d = 0, bounded by e here
        spread = t if d == 0 else -math.expm1(-d * t) / d
        waited = served * (1.0 + mu * spread)
    return min(1.0, (1.0 - wait) * served + wait * waited)


def mmc_sojourn_mean_ms(*, arrival_qps: float, service_ms: float, replicas: int = 1) -> float:
    """The mean latency of an M/M/c queue: 1/mu + C/r (``inf`` when unstable)."""
    mu, r, wait = _rates(arrival_qps, service_ms, replicas)
    return math.inf if math.isinf(r) else 1.0 / mu + (wait / r if wait > 0 else 0.0)


def mmc_sojourn_quantile_ms(quantile: float, *, arrival_qps: float, service_ms: float,
                            replicas: int = 1) -> float:
    """The latency that a fraction ``quantile`` of requests stay within, in ms.

    Bisection on the survival function (monotone), to :data:`QUANTILE_TOLERANCE`.
    """
    q = finite("quantile", quantile)
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile must be between 0 and 1 (exclusive), got {quantile!r}")
    mu, r, _ = _rates(arrival_qps, service_ms, replicas)
    if math.isinf(r):
        return math.inf
    target = 1.0 - q

    def survival(t: float) -> float:
        return mmc_sojourn_survival(t, arrival_qps=arrival_qps, service_ms=service_ms,
                                    replicas=replicas)

    low, high = 0.0, -math.log(target) * (1.0 / mu + 1.0 / r)  # above: S and W both pass it
    while survival(high) > target:
        low, high = high, 2.0 * high
    while high - low > QUANTILE_TOLERANCE * max(1.0, high):
        middle = 0.5 * (low + high)
        if middle in (low, high):
            break
        if survival(middle) > target:
            low = middle
        else:
            high = middle
    return 0.5 * (low + high)


def mmc_p99_ms(*, arrival_qps: float, service_ms: float, replicas: int = 1) -> float:
    """The exact p99 latency of an M/M/c queue, in ms (``inf`` when unstable)."""
    return mmc_sojourn_quantile_ms(0.99, arrival_qps=arrival_qps, service_ms=service_ms,
                                   replicas=replicas)
