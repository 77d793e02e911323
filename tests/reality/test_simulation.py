"""The G/G/c simulation (graders/reality/simulate.py): reproducible, and right where theory
is exact (M/M/c, reference/tails.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from graders.reality.simulate import (
    Scenario,
    departures,
    estimate,
    replicate,
    service_times,
)
from reference import queueing_latency
from reference.tails import mmc_p99_ms, mmc_sojourn_mean_ms

SERVICE_MS = 25.0


def _arrival(rho: float, replicas: int) -> float:
    return rho * replicas * 1000.0 / SERVICE_MS


def test_a_replication_is_reproducible_byte_for_byte_from_its_seed() -> None:
    scenario = Scenario(_arrival(0.8, 4), SERVICE_MS, 4, 1.5, "lognormal", batch_size=3)
    first = replicate(scenario, 7, 20_000)
    assert replicate(scenario, 7, 20_000) == first
    assert replicate(scenario, 8, 20_000) != first


def test_one_servers_vectorised_recursion_equals_the_event_by_event_queue() -> None:
    rng = np.random.Generator(np.random.PCG64(3))
    releases = np.cumsum(rng.exponential(10.0, 5000))
    services = rng.gamma(0.5, 18.0, 5000)
    free = 0.0
    expected = []
    for release, service in zip(releases, services, strict=True):
        free = max(release, free) + service
        expected.append(free)
    assert departures(releases, services, 1) == pytest.approx(expected, rel=1e-12)


def test_many_servers_take_jobs_in_order_onto_the_first_free_one() -> None:
    releases = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    services = np.array([10.0, 10.0, 1.0, 5.0, 1.0])
    # two servers busy until 10 and 11: job 2 starts at 10 (done 11), job 3 at 11 (done
    # 16) on the other server, job 4 at 11 on the first one free again (done 12)
    assert list(departures(releases, services, 2)) == [10.0, 11.0, 11.0, 16.0, 12.0]


@pytest.mark.parametrize("distribution", ["gamma", "lognormal"])
@pytest.mark.parametrize("cv", [0.5, 1.0, 2.0])
def test_service_times_have_the_asked_mean_and_cv(distribution: str, cv: float) -> None:
    scenario = Scenario(1.0, SERVICE_MS, 1, cv, distribution)  # type: ignore[arg-type]
    draws = service_times(np.random.Generator(np.random.PCG64(11)), scenario, 400_000)
    assert draws.mean() == pytest.approx(SERVICE_MS, rel=0.02 * cv)
    assert draws.std() / draws.mean() == pytest.approx(cv, rel=0.05 * cv)


def test_an_unstable_queue_is_infinite_without_a_run() -> None:
    found = estimate(Scenario(_arrival(1.0, 2), SERVICE_MS, 2))
    assert (found.p99_ms, found.seeds) == (math.inf, 0)


def test_the_same_mean_and_cv_give_different_tails() -> None:
    """Lognormal service instead of gamma at cv 2 raises one replica's p99 at load 0.5."""
    gamma, lognormal = (estimate(Scenario(_arrival(0.5, 1), SERVICE_MS, 1, 2.0, shape),
                                 seeds=4, requests=100_000).p99_ms
                        for shape in ("gamma", "lognormal"))
    assert lognormal > 1.2 * gamma


@pytest.mark.slow
@pytest.mark.parametrize("replicas", [1, 8])
@pytest.mark.parametrize("rho", [0.3, 0.5, 0.7, 0.8, 0.9])
def test_exact_mmc_tails_lie_within_the_simulations_95_percent_interval(
        replicas: int, rho: float) -> None:
    arrival = _arrival(rho, replicas)
    found = estimate(Scenario(arrival, SERVICE_MS, replicas), requests=500_000)
    exact_p99 = mmc_p99_ms(arrival_qps=arrival, service_ms=SERVICE_MS, replicas=replicas)
    exact_mean = mmc_sojourn_mean_ms(arrival_qps=arrival, service_ms=SERVICE_MS,
                                     replicas=replicas)
    assert abs(found.p99_ms - exact_p99) <= found.p99_half_ms
    assert abs(found.mean_ms - exact_mean) <= found.mean_half_ms


@pytest.mark.slow
def test_the_formula_p99_of_a_fleet_is_optimistic_where_fleets_run() -> None:
    """The issue's finding: cloud_fleet's shape (8 replicas, cv 1), formula against
    simulation, -78 % at utilization 0.3 and still below reality at 0.9."""
    errors = {}
    for rho in (0.3, 0.9):
        arrival = _arrival(rho, 8)
        formula = queueing_latency(arrival_qps=arrival, service_ms=SERVICE_MS, replicas=8)
        found = estimate(Scenario(arrival, SERVICE_MS, 8))
        errors[rho] = formula.p99_latency_ms / found.p99_ms - 1.0
    assert errors[0.3] == pytest.approx(-0.78, abs=0.01)
    assert -0.2 < errors[0.9] < 0.0


def test_runs_last_longer_and_delete_more_only_near_saturation() -> None:
    """The stated rule: at least 50 relaxation times per run and 10 deleted; below load
    0.95 the defaults (200,000 requests, a tenth deleted) already cover it."""
    from graders.reality import simulate

    for rho in (0.3, 0.9, 0.95):
        scenario = Scenario(_arrival(rho, 1), SERVICE_MS, 1)
        assert simulate.run_requests(scenario, simulate.REQUESTS) == simulate.REQUESTS
        assert simulate.warmup_requests(scenario, simulate.REQUESTS) == 20_000
    near = Scenario(_arrival(0.99, 8), SERVICE_MS, 8, 1.2)
    relaxation = simulate.relaxation_requests(near)
    assert relaxation == pytest.approx(1.22 * 0.99 / (1 - math.sqrt(0.99)) ** 2)
    length = simulate.run_requests(near, simulate.REQUESTS)
    assert length == simulate.MAX_REQUESTS < 50 * relaxation
    assert simulate.warmup_requests(near, length) == math.ceil(10 * relaxation)
