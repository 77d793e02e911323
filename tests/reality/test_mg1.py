"""One replica's exact tail (graders/reality/mg1.py): the Euler inversion of the
Pollaczek-Khinchine transform, checked where a closed form exists."""

from __future__ import annotations

import math

import pytest

from graders.reality import mg1
from reference.tails import mmc_p99_ms, mmc_sojourn_survival

SERVICE_MS = 25.0


def test_the_euler_inversion_of_an_exponentials_transform_is_the_exponential() -> None:
    for t in (0.1, 1.0, 3.0, 20.0):
        assert mg1.invert(lambda s: 1 / (s + 1), t) == pytest.approx(math.exp(-t), abs=1e-9)


@pytest.mark.parametrize("rho", [0.05, 0.3, 0.7, 0.9, 0.97, 0.99])
def test_at_cv_1_the_tail_is_m_m_1s_closed_form(rho: float) -> None:
    arrival = rho * 1000.0 / SERVICE_MS
    for t in (10.0, 100.0, 1000.0):
        assert mg1.survival(t, arrival_qps=arrival, service_ms=SERVICE_MS, service_cv=1.0) \
            == pytest.approx(mmc_sojourn_survival(t, arrival_qps=arrival,
                                                  service_ms=SERVICE_MS), abs=1e-8)
    assert mg1.quantile_ms(0.99, arrival_qps=arrival, service_ms=SERVICE_MS,
                           service_cv=1.0) == pytest.approx(
        mmc_p99_ms(arrival_qps=arrival, service_ms=SERVICE_MS), rel=1e-8)


def test_without_load_the_tail_is_the_gamma_service_times() -> None:
    """At (almost) no load the sojourn is the service time: gamma of shape 4 (cv 0.5),
    whose survival is a finite Poisson sum."""
    scale = SERVICE_MS / 4
    for t in (5.0, 25.0, 60.0):
        expected = sum(math.exp(-t / scale) * (t / scale) ** n / math.factorial(n)
                       for n in range(4))
        assert mg1.survival(t, arrival_qps=1e-9, service_ms=SERVICE_MS, service_cv=0.5) \
            == pytest.approx(expected, abs=1e-8)


@pytest.mark.parametrize(("quantile", "arrival", "cv"), [
    (0.99, 40.0, 1.0), (0.99, 50.0, 0.8), (1.0, 10.0, 0.8), (0.99, 10.0, 0.0)])
def test_an_unstable_queue_or_a_bad_quantile_is_refused(quantile: float, arrival: float,
                                                        cv: float) -> None:
    with pytest.raises(ValueError, match="quantile|stable"):
        mg1.quantile_ms(quantile, arrival_qps=arrival, service_ms=SERVICE_MS, service_cv=cv)


def _talbot_survival(t: float, *, arrival_qps: float, cv: float) -> float:
    """P(T > t) by mpmath's Talbot inversion at 30 digits: an independent check."""
    import mpmath  # noqa: PLC0415 - a development dependency, for this check only

    mpmath.mp.dps = 30
    shape, rate = mpmath.mpf(1) / mpmath.mpf(cv) ** 2, mpmath.mpf(arrival_qps) / 1000
    scale, rho = mpmath.mpf(SERVICE_MS) / shape, rate * SERVICE_MS

    def transform(s: object) -> object:
        b = (1 + s * scale) ** (-shape)  # type: ignore[operator]
        return (1 - (1 - rho) * s * b / (s - rate * (1 - b))) / s  # type: ignore[operator]

    return float(mpmath.invertlaplace(transform, t, method="talbot"))


def _p99_error(arrival: float, cv: float) -> float:
    """The Euler p99's relative error: its survival's miss over the density there."""
    p99 = mg1.quantile_ms(0.99, arrival_qps=arrival, service_ms=SERVICE_MS, service_cv=cv)
    h = p99 * 1e-4
    density = (_talbot_survival(p99 - h, arrival_qps=arrival, cv=cv)
               - _talbot_survival(p99 + h, arrival_qps=arrival, cv=cv)) / (2 * h)
    miss = _talbot_survival(p99, arrival_qps=arrival, cv=cv) - 0.01
    return abs(miss / density / p99)


@pytest.mark.slow
@pytest.mark.parametrize("cv", [mg1.MIN_EXACT_CV, 0.3, 0.45])
def test_from_its_smallest_cv_on_the_inversion_is_exact_at_every_load(cv: float) -> None:
    from graders.reality.curves import LOADS

    errors = [_p99_error(rho * 1000 / SERVICE_MS, cv) for rho in LOADS]
    assert max(errors) < 1e-5


@pytest.mark.slow
def test_below_its_smallest_cv_the_inversion_misses() -> None:
    """Why MIN_EXACT_CV is where it is: at cv 0.1 the p99 misses by more than 1e-5."""
    assert max(_p99_error(rho * 1000 / SERVICE_MS, 0.1) for rho in (0.1, 0.2, 0.4)) > 1e-5
