"""One replica's exact tail at constant service (graders/reality/md1.py): Erlang's series,
checked against its closed forms on the first two service intervals, the
Pollaczek-Khinchine mean, and the curves that label it."""

from __future__ import annotations

import math

import pytest

from graders.reality import md1
from graders.reality.curves import LOADS, RealityPoint, _real
from graders.reality.simulate import Scenario

SERVICE_MS = 25.0


def _rate(rho: float) -> float:
    return rho / SERVICE_MS


@pytest.mark.parametrize("rho", [0.1, 0.5, 0.9, 0.99])
def test_below_one_service_time_the_wait_is_the_closed_form(rho: float) -> None:
    """P(W <= x) = (1 - rho) e^{lambda x} for x < D, and (1 - rho)(e^{lambda x} - lambda (x
    - D) e^{lambda (x - D)}) for D <= x < 2D."""
    rate = _rate(rho)
    for fraction in (0.0, 0.3, 0.99):
        x = fraction * SERVICE_MS
        assert md1.wait_cdf(x, rate_per_ms=rate, service_ms=SERVICE_MS) == pytest.approx(
            (1 - rho) * math.exp(rate * x), rel=1e-12)
    for fraction in (1.0, 1.5, 1.99):
        x = fraction * SERVICE_MS
        expected = (1 - rho) * (math.exp(rate * x) - rate * (x - SERVICE_MS)
                                * math.exp(rate * (x - SERVICE_MS)))
        assert md1.wait_cdf(x, rate_per_ms=rate, service_ms=SERVICE_MS) == pytest.approx(
            expected, rel=1e-12)


@pytest.mark.parametrize("rho", [0.3, 0.8])
def test_the_mean_wait_is_pollaczek_khinchines(rho: float) -> None:
    """The integral of P(W > x) is rho D / (2 (1 - rho)) (trapezoids, far into the tail)."""
    rate, step = _rate(rho), SERVICE_MS / 200
    xs = [i * step for i in range(int(60 * SERVICE_MS / step) + 1)]
    tail = [1.0 - md1.wait_cdf(x, rate_per_ms=rate, service_ms=SERVICE_MS) for x in xs]
    integral = step * (sum(tail) - 0.5 * (tail[0] + tail[-1]))
    assert integral == pytest.approx(rho * SERVICE_MS / (2 * (1 - rho)), rel=1e-4)


def test_far_into_the_tail_near_saturation_the_series_keeps_its_digits() -> None:
    """The terms grow to about e^(1.2 lambda x) before cancelling: at rho 0.99 the cdf
    still rises, stays a probability, and reaches 1 (no digits lost to cancellation)."""
    rate = _rate(0.99)
    values = [md1.wait_cdf(x, rate_per_ms=rate, service_ms=SERVICE_MS)
              for x in range(0, 700 * int(SERVICE_MS), 25 * int(SERVICE_MS))]
    assert all(0.0 <= value <= 1.0 for value in values)
    assert values == sorted(values)
    assert values[-1] == pytest.approx(1.0, abs=1e-4)


@pytest.mark.parametrize("rho", LOADS)
def test_the_p99_leaves_one_percent_of_sojourns_above_it(rho: float) -> None:
    arrival = rho * 1000 / SERVICE_MS
    p99 = md1.quantile_ms(0.99, arrival_qps=arrival, service_ms=SERVICE_MS)
    assert md1.wait_cdf(p99 - SERVICE_MS, rate_per_ms=_rate(rho),
                        service_ms=SERVICE_MS) == pytest.approx(0.99, abs=1e-8)


def test_where_at_least_99_percent_never_wait_the_p99_is_the_service_time() -> None:
    assert md1.quantile_ms(0.99, arrival_qps=0.005 * 1000 / SERVICE_MS,
                           service_ms=SERVICE_MS) == SERVICE_MS


@pytest.mark.parametrize(("quantile", "arrival", "service"), [
    (0.99, 40.0, 25.0), (0.99, 50.0, 25.0), (1.0, 10.0, 25.0), (0.0, 10.0, 25.0),
    (0.99, 10.0, 0.0)])
def test_an_unstable_queue_or_a_bad_quantile_is_refused(quantile: float, arrival: float,
                                                        service: float) -> None:
    with pytest.raises(ValueError, match="quantile|stable"):
        md1.quantile_ms(quantile, arrival_qps=arrival, service_ms=service)


def _point(cv: float, rho: float = 0.99) -> RealityPoint:
    scenario = Scenario(rho * 1000 / SERVICE_MS, SERVICE_MS, 1, cv, "gamma")
    return _real(scenario, 0.0, rho)


def test_constant_service_on_one_replica_is_exact_m_d_1() -> None:
    point = _point(0.0)
    assert point.source == "exact"
    assert point.p99_ms == md1.quantile_ms(0.99, arrival_qps=0.99 * 1000 / SERVICE_MS,
                                           service_ms=SERVICE_MS)


@pytest.mark.slow
@pytest.mark.parametrize("cv", [0.01, 0.05, 0.1])
def test_a_nearly_constant_service_is_never_labelled_exact(cv: float) -> None:
    """Below mg1.MIN_EXACT_CV the inversion misses (by up to 7 %), so the point is
    simulated, with its interval."""
    point = _point(cv, rho=0.5)
    assert point.source == "simulated"
    assert point.half_ms > 0
