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
