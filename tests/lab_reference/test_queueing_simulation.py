"""The queueing math against a discrete-event simulation of M/M/c queues (ciw).

For each case, independent replications (fixed seeds) each start empty, discard a warm-up of
several relaxation times, then record every customer who arrives in an observation window.
The simulation runs on past the window until all of those customers have left, so no long
sojourn is cut off.  Each replication gives one mean sojourn time and one fraction of
customers who waited; their spread across replications gives the standard error.  The
reference must lie within 3 standard errors of the simulated mean, for both figures.
"""

from __future__ import annotations

import functools
import math
import statistics
from typing import NamedTuple

import ciw
import pytest

from reference import erlang_c, queueing_latency

pytestmark = pytest.mark.slow

SERVICE_MS = 5.0
REPLICAS = (1, 4, 16)
LOADS = (0.5, 0.8, 0.9)
REPLICATIONS = 20
CUSTOMERS_PER_REPLICATION = {0.5: 2000, 0.8: 4000, 0.9: 8000}
"""Customers observed per replication, by load: heavier loads are noisier, so run longer."""
WARMUP_RELAXATIONS = 5.0
"""Warm-up length in relaxation times 1 / (c mu (1 - sqrt(rho))^2) of the M/M/c queue."""
DRAIN_MEAN_SOJOURNS = 60.0
"""Run on this many mean sojourn times past the window: P(sojourn > 60 means) < e^-60."""
Z_BOUND = 3.0
BASE_SEED = 20240601


class Agreement(NamedTuple):
    replicas: int
    rho: float
    reference_mean_ms: float
    simulated_mean_ms: float
    mean_se_ms: float
    mean_z: float
    reference_wait_probability: float
    simulated_wait_probability: float
    wait_probability_se: float
    wait_probability_z: float


def _replication(replicas: int, rho: float, seed: int, reference_mean_ms: float) -> tuple[
    float, float
]:
    """(mean sojourn in ms, fraction who waited) over one replication's window."""
    mu = 1.0 / SERVICE_MS  # per ms
    lam = rho * replicas * mu
    warmup = WARMUP_RELAXATIONS / (replicas * mu * (1.0 - math.sqrt(rho)) ** 2)
    window_end = warmup + CUSTOMERS_PER_REPLICATION[rho] / lam
    network = ciw.create_network(
        arrival_distributions=[ciw.dists.Exponential(rate=lam)],
        service_distributions=[ciw.dists.Exponential(rate=mu)],
        number_of_servers=[replicas],
    )
    ciw.seed(seed)
    simulation = ciw.Simulation(network)
    simulation.simulate_until_max_time(window_end + DRAIN_MEAN_SOJOURNS * reference_mean_ms)
    still_inside = [
        person
        for person in simulation.nodes[1].all_individuals
        if warmup <= person.arrival_date < window_end
    ]
    assert not still_inside, "a customer of the window had not left when the run stopped"
    observed = [
        record
        for record in simulation.get_all_records()
        if warmup <= record.arrival_date < window_end
    ]
    sojourns = [record.waiting_time + record.service_time for record in observed]
    waited = sum(1 for record in observed if record.waiting_time > 0.0)
    return statistics.fmean(sojourns), waited / len(observed)


@functools.cache
def agreement(replicas: int, rho: float) -> Agreement:
    """Simulate one case and compare it with the reference."""
    arrival_qps = rho * replicas * 1000.0 / SERVICE_MS
    reference = queueing_latency(arrival_qps=arrival_qps, service_ms=SERVICE_MS,
                                 replicas=replicas, service_cv=1.0)
    _, wait_probability = erlang_c(arrival_qps, SERVICE_MS, replicas)
    assert reference.queue_wait_probability == wait_probability
    case_seed = BASE_SEED + 1000 * replicas + round(100 * rho)
    results = [
        _replication(replicas, rho, case_seed * 100 + index, reference.mean_latency_ms)
        for index in range(REPLICATIONS)
    ]
    means = [mean for mean, _ in results]
    waits = [wait for _, wait in results]
    mean_se = statistics.stdev(means) / math.sqrt(REPLICATIONS)
    wait_se = statistics.stdev(waits) / math.sqrt(REPLICATIONS)
    simulated_mean = statistics.fmean(means)
    simulated_wait = statistics.fmean(waits)
    return Agreement(
        replicas=replicas,
        rho=rho,
        reference_mean_ms=reference.mean_latency_ms,
        simulated_mean_ms=simulated_mean,
        mean_se_ms=mean_se,
        mean_z=(simulated_mean - reference.mean_latency_ms) / mean_se,
        reference_wait_probability=wait_probability,
        simulated_wait_probability=simulated_wait,
        wait_probability_se=wait_se,
        wait_probability_z=(simulated_wait - wait_probability) / wait_se,
    )


def agreement_table() -> list[Agreement]:
    """Rows (c, rho, reference mean, simulated mean, SE, z, reference P(wait), simulated
    P(wait), SE, z) for every case, for the closing note."""
    return [agreement(c, rho) for c in REPLICAS for rho in LOADS]


CASES = [pytest.param(c, rho, id=f"c{c}-rho{rho}") for c in REPLICAS for rho in LOADS]


@pytest.mark.parametrize(("replicas", "rho"), CASES)
def test_simulated_mean_sojourn_agrees_with_the_reference_within_3_se(
    replicas: int, rho: float
) -> None:
    row = agreement(replicas, rho)
    # The check has power: 3 standard errors are under 22.5 % of the latency it checks.
    assert row.mean_se_ms < 0.075 * row.reference_mean_ms
    assert abs(row.mean_z) <= Z_BOUND, row


@pytest.mark.parametrize(("replicas", "rho"), CASES)
def test_simulated_probability_of_waiting_agrees_with_erlang_c_within_3_se(
    replicas: int, rho: float
) -> None:
    row = agreement(replicas, rho)
    # The check has power: 3 standard errors are under 6 percentage points.
    assert row.wait_probability_se < 0.02
    assert abs(row.wait_probability_z) <= Z_BOUND, row
