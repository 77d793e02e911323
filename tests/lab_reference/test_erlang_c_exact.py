"""erlang_c against exact arithmetic, from one replica to a fleet of 10,000.

Two independent oracles evaluate the textbook Erlang C formula of lab-spec section 2,

    C(c, a) = T / (sum_{n<c} a^n / n! + T),   T = a^c / c! * c / (c - a),

on the exact rational value of the inputs: ``fractions.Fraction`` (fully exact, used up to
171 replicas) and mpmath at 60 significant digits (used everywhere; no overflow, and every
term is positive, so there is no cancellation).  The oracles are checked against each other.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import mpmath
import pytest

from reference import erlang_c, queueing_latency

SERVICE_MS = 5.0  # mu = 200 per second
SIZES = (1, 2, 10, 50, 170, 171, 1000, 10000)
LOADS = (0.5, 0.9, 0.99)
TOLERANCE = 1e-9
SMALLEST_NORMAL = 2.2250738585072014e-308


def _arrival(rho: float, replicas: int) -> float:
    return rho * replicas * 1000.0 / SERVICE_MS


def _offered(arrival: float) -> Fraction:
    """The exact offered load a = lambda / mu of the float inputs."""
    return Fraction(arrival) * Fraction(SERVICE_MS) / 1000


def erlang_c_fraction(replicas: int, offered: Fraction) -> Fraction:
    term = Fraction(1)
    below = Fraction(0)
    for n in range(replicas):
        below += term
        term = term * offered / (n + 1)  # a^(n+1) / (n+1)!
    top = term * replicas / (replicas - offered)
    return top / (below + top)


@functools.cache
def erlang_c_mpmath(replicas: int, offered: Fraction) -> mpmath.mpf:
    with mpmath.workdps(60):
        a = mpmath.mpf(offered.numerator) / offered.denominator
        term = mpmath.mpf(1)
        below = mpmath.mpf(0)
        for n in range(replicas):
            below += term
            term = term * a / (n + 1)
        top = term * replicas / (replicas - a)
        return top / (below + top)


@pytest.mark.parametrize("replicas", [1, 2, 10, 170, 171])
@pytest.mark.parametrize("rho", LOADS)
def test_the_two_oracles_agree_to_40_digits(replicas: int, rho: float) -> None:
    offered = _offered(_arrival(rho, replicas))
    exact = erlang_c_fraction(replicas, offered)
    with mpmath.workdps(60):
        high = erlang_c_mpmath(replicas, offered)
        exact_mp = mpmath.mpf(exact.numerator) / exact.denominator
        assert abs(high - exact_mp) <= mpmath.mpf(10) ** -40 * exact_mp


def test_the_fraction_oracle_knows_the_mm1_and_mm2_closed_forms() -> None:
    a = Fraction(4, 5)
    assert erlang_c_fraction(1, a) == a  # M/M/1: P(wait) = rho
    b = Fraction(3, 2)
    assert erlang_c_fraction(2, b) == b**2 / (2 + b)  # M/M/2: C = a^2 / (2 + a)


#: Every size at every load, except C(10000, 5000) ~ 1e-839, which no double can hold.
UNDERFLOWING = (10000, 0.5)
REPRESENTABLE = [(c, rho) for c in SIZES for rho in LOADS if (c, rho) != UNDERFLOWING]


@pytest.mark.parametrize(("replicas", "rho"), REPRESENTABLE)
def test_wait_probability_matches_exact_arithmetic_to_1e_9(replicas: int, rho: float) -> None:
    arrival = _arrival(rho, replicas)
    offered = _offered(arrival)
    exact = float(erlang_c_mpmath(replicas, offered))
    if replicas <= 171:
        assert exact == float(erlang_c_fraction(replicas, offered))
    assert exact >= SMALLEST_NORMAL
    rate, prob = erlang_c(arrival, SERVICE_MS, replicas)
    assert prob == pytest.approx(exact, rel=TOLERANCE, abs=0)
    exact_rate = Fraction(replicas) * 1000 / Fraction(SERVICE_MS) - Fraction(arrival)
    assert rate == pytest.approx(float(exact_rate), rel=TOLERANCE, abs=0)


def test_only_the_excluded_case_is_below_the_double_range() -> None:
    below = [
        (c, rho)
        for c in SIZES
        for rho in LOADS
        if erlang_c_mpmath(c, _offered(_arrival(rho, c))) < SMALLEST_NORMAL
    ]
    assert below == [UNDERFLOWING]


def test_a_wait_probability_below_the_double_range_underflows_to_about_zero() -> None:
    arrival = _arrival(0.5, 10000)
    exact = erlang_c_mpmath(10000, _offered(arrival))
    assert exact < mpmath.mpf(10) ** -800  # about exp(-c (rho - 1 - ln rho)) = 1e-839
    rate, prob = erlang_c(arrival, SERVICE_MS, 10000)
    assert 0.0 <= prob <= 1e-300
    assert rate == pytest.approx(10000 * 200 - arrival, rel=TOLERANCE)


@pytest.mark.parametrize(
    ("replicas", "rho"),
    [(1, 1 - 1e-9), (2, 0.999999), (5, 1 - 1e-8), (30, 0.9999), (400, 1e-6), (3000, 0.999),
     (10000, 0.95)],
)
def test_more_loads_match_exact_arithmetic(replicas: int, rho: float) -> None:
    arrival = _arrival(rho, replicas)
    exact = float(erlang_c_mpmath(replicas, _offered(arrival)))
    assert erlang_c(arrival, SERVICE_MS, replicas)[1] == pytest.approx(exact, rel=TOLERANCE)


def test_erlang_c_stays_finite_and_in_range_up_to_10000_replicas() -> None:
    sizes = sorted({*range(1, 10001, 333), 169, 170, 171, 172, 1000, 9999, 10000})
    for replicas in sizes:
        for rho in (1e-9, 0.3, 0.5, 0.9, 0.99, 0.999999):
            rate, prob = erlang_c(_arrival(rho, replicas), SERVICE_MS, replicas)
            assert 0.0 < rate < math.inf, (replicas, rho, rate)
            assert 0.0 <= prob <= 1.0, (replicas, rho, prob)


def test_queueing_latency_at_10000_replicas_is_finite_and_ordered() -> None:
    q = queueing_latency(arrival_qps=_arrival(0.99, 10000), service_ms=SERVICE_MS,
                         replicas=10000)
    values = [q.mean_latency_ms, q.p50_latency_ms, q.p95_latency_ms, q.p99_latency_ms,
              q.p999_latency_ms, q.queue_wait_probability, q.queue_amplifier]
    assert all(math.isfinite(value) for value in values)
    assert q.stable is True
    assert SERVICE_MS <= q.p50_latency_ms <= q.p99_latency_ms <= q.p999_latency_ms
    exact = float(erlang_c_mpmath(10000, _offered(_arrival(0.99, 10000))))
    assert q.queue_wait_probability == pytest.approx(exact, rel=TOLERANCE)
