"""The exact sojourn-time tail of one FCFS server with Poisson arrivals and constant
service (M/D/1), by Erlang's finite series.

For arrival rate lambda and service time D (utilization rho = lambda D < 1), the waiting
time W has

    P(W <= x) = (1 - rho) sum_{k=0}^{floor(x/D)} (lambda (kD - x))^k / k! e^{-lambda (kD - x)}

(Erlang, 1909), and the sojourn time is W + D. The terms alternate in sign and reach about
e^(1.2 lambda x) in size before they cancel, so the sum is taken in decimal arithmetic with
enough digits for that cancellation (:func:`_digits`): stdlib only, no simulation, no
noise. The quantile is found by bisection.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext

#: Relative accuracy of the quantile's bisection.
QUANTILE_TOLERANCE = 1e-10
#: Digits kept beyond those the series' cancellation consumes.
SPARE_DIGITS = 40


def _digits(rate: float, x: float) -> int:
    """Decimal digits for the series at ``x``: its largest term is below e^(1.2 lambda x),
    about 0.52 lambda x digits; 0.7 lambda x leaves room, plus :data:`SPARE_DIGITS`."""
    return int(0.7 * rate * x) + SPARE_DIGITS


def wait_cdf(x_ms: float, *, rate_per_ms: float, service_ms: float) -> float:
    """P(W <= ``x_ms``) for M/D/1 (a stable queue; ``x_ms`` >= 0)."""
    if x_ms < 0:
        return 0.0
    with localcontext() as context:
        context.prec = _digits(rate_per_ms, x_ms)
        rate, service, x = Decimal(rate_per_ms), Decimal(service_ms), Decimal(x_ms)
        # e^{-lambda (kD - x)} = e^{lambda x} (e^{-lambda D})^k: two exponentials in all
        growth, step = (rate * x).exp(), (-rate * service).exp()
        total, factorial, decay = growth, Decimal(1), Decimal(1)  # k = 0: e^{lambda x}
        for k in range(1, math.floor(x_ms / service_ms) + 1):
            factorial *= k
            decay *= step
            total += (rate * (k * service - x)) ** k / factorial * growth * decay
        value = (1 - rate * service) * total
    return min(1.0, max(0.0, float(value)))


def quantile_ms(quantile: float, *, arrival_qps: float, service_ms: float) -> float:
    """The sojourn time that a fraction ``quantile`` of requests stay within (stable
    queue, constant service ``service_ms``)."""
    if not 0.0 < quantile < 1.0:
        raise ValueError(f"quantile must lie strictly between 0 and 1, got {quantile!r}")
    rate = arrival_qps / 1000.0
    if not (service_ms > 0 and 0.0 <= rate * service_ms < 1.0):
        raise ValueError("M/D/1 quantiles need a stable queue and a positive service time; "
                         f"got utilization {rate * service_ms!r}")

    def below(x: float) -> bool:
        return wait_cdf(x, rate_per_ms=rate, service_ms=service_ms) < quantile

    if not below(0.0):  # the wait's atom at 0 holds the quantile: no request waits
        return service_ms
    low, high = 0.0, service_ms
    while below(high):
        low, high = high, 2.0 * high
    while high - low > QUANTILE_TOLERANCE * high:
        middle = 0.5 * (low + high)
        low, high = (middle, high) if below(middle) else (low, middle)
    return service_ms + 0.5 * (low + high)
