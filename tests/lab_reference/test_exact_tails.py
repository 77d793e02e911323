"""The exact M/M/c sojourn-time distribution (reference/tails.py) against independent math.

mpmath at 50 digits evaluates the same mixture from its textbook form,
P(T > t) = (1 - C) e^(-mu t) + C (r e^(-mu t) - mu e^(-r t)) / (r - mu), with C from
the textbook Erlang C sum, and solves P(T > t) = 1 - q with its own root finder; the
reference's quantiles must agree to 1e-9 (relative).
"""

from __future__ import annotations

import math

import mpmath
import pytest

from reference import queueing_latency
from reference.tails import (
    mmc_p99_ms,
    mmc_sojourn_mean_ms,
    mmc_sojourn_quantile_ms,
    mmc_sojourn_survival,
)

SERVICE_MS = 25.0
TOLERANCE = 1e-9
mpmath.mp.dps = 50


def _arrival(rho: float, replicas: int) -> float:
    return rho * replicas * 1000.0 / SERVICE_MS


def _mp_quantile(q: float, arrival: float, replicas: int) -> mpmath.mpf:
    mu = mpmath.mpf(1) / mpmath.mpf(SERVICE_MS)
    lam = mpmath.mpf(arrival) / 1000
    a = lam / mu
    c = replicas
    top = a**c / mpmath.factorial(c) * c / (c - a)
    wait = top / (mpmath.fsum(a**n / mpmath.factorial(n) for n in range(c)) + top)
    r = c * mu - lam

    def survival(t: mpmath.mpf) -> mpmath.mpf:
        if abs(r - mu) < mpmath.mpf(10) ** -30:
            mixed = (1 + mu * t) * mpmath.exp(-mu * t)
        else:
            mixed = (r * mpmath.exp(-mu * t) - mu * mpmath.exp(-r * t)) / (r - mu)
        return (1 - wait) * mpmath.exp(-mu * t) + wait * mixed

    guess = mmc_sojourn_quantile_ms(q, arrival_qps=arrival, service_ms=SERVICE_MS,
                                    replicas=replicas)
    return mpmath.findroot(lambda t: survival(t) - (1 - mpmath.mpf(q)), mpmath.mpf(guess))


@pytest.mark.parametrize("replicas", [1, 2, 8, 32])
@pytest.mark.parametrize("rho", [0.05, 0.3, 0.5, 0.7, 0.8, 0.9, 0.99])
@pytest.mark.parametrize("q", [0.5, 0.95, 0.99, 0.999])
def test_quantiles_agree_with_high_precision_arithmetic_to_1e_9(
        replicas: int, rho: float, q: float) -> None:
    arrival = _arrival(rho, replicas)
    ours = mmc_sojourn_quantile_ms(q, arrival_qps=arrival, service_ms=SERVICE_MS,
                                   replicas=replicas)
    exact = float(_mp_quantile(q, arrival, replicas))
    assert ours == pytest.approx(exact, rel=TOLERANCE)


@pytest.mark.parametrize("rho", [0.1, 0.5, 0.8, 0.95])
def test_one_replica_p99_is_ln_100_over_mu_times_1_minus_rho(rho: float) -> None:
    arrival = _arrival(rho, 1)
    expected = math.log(100.0) * SERVICE_MS / (1.0 - rho)
    assert mmc_p99_ms(arrival_qps=arrival, service_ms=SERVICE_MS) == pytest.approx(
        expected, rel=TOLERANCE)


def test_the_fleet_p99_at_light_load_is_near_the_service_tail_not_the_mean() -> None:
    """cloud_fleet at utilization 0.3: the issue's 115 ms, where the formula says 25 ms."""
    arrival = _arrival(0.3, 8)
    exact = mmc_p99_ms(arrival_qps=arrival, service_ms=SERVICE_MS, replicas=8)
    formula = queueing_latency(arrival_qps=arrival, service_ms=SERVICE_MS, replicas=8)
    assert exact == pytest.approx(115.148, abs=0.001)
    assert formula.p99_latency_ms == pytest.approx(SERVICE_MS)


@pytest.mark.parametrize("replicas", [1, 8])
def test_the_mean_matches_the_formula_at_cv_1(replicas: int) -> None:
    arrival = _arrival(0.7, replicas)
    formula = queueing_latency(arrival_qps=arrival, service_ms=SERVICE_MS, replicas=replicas)
    assert mmc_sojourn_mean_ms(arrival_qps=arrival, service_ms=SERVICE_MS,
                               replicas=replicas) == pytest.approx(formula.mean_latency_ms,
                                                                   rel=1e-12)


def test_the_survival_function_falls_from_1_and_is_continuous_where_r_equals_mu() -> None:
    # c = 2, lambda = mu makes r = 2 mu - mu = mu: the convolution's degenerate case
    arrival = 1000.0 / SERVICE_MS
    values = [mmc_sojourn_survival(t, arrival_qps=arrival, service_ms=SERVICE_MS, replicas=2)
              for t in (0.0, 10.0, 50.0, 100.0, 400.0)]
    assert values[0] == 1.0
    assert all(a > b for a, b in zip(values, values[1:], strict=False))
    near = mmc_sojourn_survival(50.0, arrival_qps=arrival * (1 + 1e-12),
                                service_ms=SERVICE_MS, replicas=2)
    assert near == pytest.approx(values[2], rel=1e-9)


def test_an_unstable_queue_has_an_infinite_tail() -> None:
    assert mmc_p99_ms(arrival_qps=_arrival(1.0, 4), service_ms=SERVICE_MS, replicas=4) \
        == math.inf
    assert mmc_sojourn_mean_ms(arrival_qps=_arrival(1.2, 4), service_ms=SERVICE_MS,
                               replicas=4) == math.inf


@pytest.mark.parametrize("quantile", [0.0, 1.0, -0.1, math.nan])
def test_a_quantile_outside_0_to_1_is_refused(quantile: float) -> None:
    with pytest.raises(ValueError, match="quantile"):
        mmc_sojourn_quantile_ms(quantile, arrival_qps=10.0, service_ms=SERVICE_MS)


def test_far_tails_of_a_nearly_saturated_queue_do_not_overflow() -> None:
    """One replica at 99 % load: r is far below mu, where e^((mu - r) t) would overflow."""
    arrival = _arrival(0.99, 1)
    assert mmc_sojourn_survival(1e7, arrival_qps=arrival, service_ms=SERVICE_MS) == 0.0
    expected = math.log(100.0) * SERVICE_MS / (1.0 - 0.99)
    assert mmc_p99_ms(arrival_qps=arrival, service_ms=SERVICE_MS) == pytest.approx(
        expected, rel=TOLERANCE)
