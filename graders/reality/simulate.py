"""A seeded G/G/c FCFS simulation with Poisson arrivals and batches released when full.

Requests arrive as a Poisson stream; every ``batch_size`` consecutive requests form a batch,
released when its last request arrives; batches queue FCFS for ``replicas`` servers, and
each batch's service time is drawn from a gamma or a lognormal distribution with the
given mean and coefficient of variation (gamma is exactly exponential at cv 1). A
request's latency runs from its own arrival to its batch's departure.

numpy is imported only here and only when a simulation runs: the curves are precomputed
(``graders reality build``, an export) and read from a cache while grading. Runs are
reproducible byte for byte from their seed (numpy's PCG64 streams).

Near saturation a queue started empty takes long to fill: the stated rule below lengthens
each replication to :data:`RUN_RELAXATIONS` relaxation times and deletes the first
:data:`WARMUP_RELAXATIONS` of them (never less than :data:`REQUESTS` and
:data:`WARMUP_FRACTION`). One replica without batching needs none of it: its tail is exact
(:mod:`graders.reality.mg1`).
"""

from __future__ import annotations

import heapq
import math
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeAlias

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

Distribution: TypeAlias = Literal["gamma", "lognormal"]
DISTRIBUTIONS: tuple[Distribution, ...] = ("gamma", "lognormal")

#: Requests per replication (at least), replications (seeds) per estimate, the warm-up
#: discarded (at least).
REQUESTS = 200_000
SEEDS = 8
WARMUP_FRACTION = 0.1
#: A replication's length and its deleted warm-up, in relaxation times (see
#: :func:`relaxation_requests`), and the longest replication.
RUN_RELAXATIONS = 50
WARMUP_RELAXATIONS = 10
MAX_REQUESTS = 2_000_000
#: Student's t at 97.5 % for 1 to 15 degrees of freedom (a 95 % two-sided interval).
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201,
         2.179, 2.160, 2.145, 2.131)


@dataclass(frozen=True)
class Scenario:
    """One queue: Poisson requests at ``arrival_qps``, batches of ``batch_size`` released
    when full, served by ``replicas`` servers in ``service_ms`` (per batch) on average."""

    arrival_qps: float
    service_ms: float
    replicas: int = 1
    service_cv: float = 1.0
    distribution: Distribution = "gamma"
    batch_size: int = 1

    @property
    def utilization(self) -> float:
        """Offered load per server: lambda / B * service / c."""
        return self.arrival_qps / self.batch_size * self.service_ms / 1000.0 / self.replicas


@dataclass(frozen=True)
class Estimate:
    """Mean and p99 latency (ms) with the half-widths of their 95 % confidence intervals."""

    mean_ms: float
    mean_half_ms: float
    p99_ms: float
    p99_half_ms: float
    seeds: int
    requests: int


def relaxation_requests(scenario: Scenario) -> float:
    """The queue's relaxation time in requests, by the heavy-traffic rule for a queue fed
    by Poisson arrivals: (1 + cv^2) / 2 * rho / (1 - sqrt(rho))^2 (M/M/1's at cv 1; one
    server's or a fleet's alike, rho being the load per server)."""
    rho = scenario.utilization
    return (1.0 + scenario.service_cv ** 2) / 2.0 * rho / (1.0 - math.sqrt(rho)) ** 2


def run_requests(scenario: Scenario, requests: int) -> int:
    """A replication's length: ``requests``, or :data:`RUN_RELAXATIONS` relaxation times
    near saturation (at most :data:`MAX_REQUESTS`)."""
    longer = math.ceil(RUN_RELAXATIONS * relaxation_requests(scenario))
    return max(requests, min(MAX_REQUESTS, longer))


def warmup_requests(scenario: Scenario, count: int) -> int:
    """The requests deleted from the start of a replication of ``count``: a fraction
    :data:`WARMUP_FRACTION`, or :data:`WARMUP_RELAXATIONS` relaxation times if more (at
    most half the run)."""
    relaxed = math.ceil(WARMUP_RELAXATIONS * relaxation_requests(scenario))
    return min(count // 2, max(int(count * WARMUP_FRACTION), relaxed))


def service_times(rng: np.random.Generator, scenario: Scenario, count: int) -> npt.NDArray[
        np.float64]:
    """``count`` service times (ms) with the scenario's mean, cv and distribution."""
    import numpy as np

    mean, cv = scenario.service_ms, scenario.service_cv
    if cv == 0:
        return np.full(count, mean)
    if scenario.distribution == "gamma":
        shape = 1.0 / (cv * cv)
        return rng.gamma(shape, mean / shape, count)
    sigma2 = math.log1p(cv * cv)
    return rng.lognormal(math.log(mean) - sigma2 / 2.0, math.sqrt(sigma2), count)


def departures(releases: npt.NDArray[np.float64], services: npt.NDArray[np.float64],
               replicas: int) -> npt.NDArray[np.float64]:
    """FCFS departure times of jobs released at ``releases`` (sorted) onto ``replicas``."""
    import numpy as np

    if replicas == 1:  # Lindley: D_k = S_1..k + max over j <= k of (R_j - S_1..j-1)
        served = np.cumsum(services)
        return served + np.maximum.accumulate(releases - (served - services))
    free = [0.0] * replicas
    out = np.empty(len(releases))
    for index, (release, service) in enumerate(zip(releases.tolist(), services.tolist(),
                                                   strict=True)):
        done = max(release, free[0]) + service
        heapq.heapreplace(free, done)
        out[index] = done
    return out


def replicate(scenario: Scenario, seed: int, requests: int) -> tuple[float, float]:
    """One replication of ``requests`` from an empty system: ``(mean_ms, p99_ms)`` of the
    requests after the warm-up (:func:`warmup_requests`)."""
    import numpy as np

    rng = np.random.Generator(np.random.PCG64(seed))
    batch = scenario.batch_size
    count = requests - requests % batch
    arrivals = np.cumsum(rng.exponential(1000.0 / scenario.arrival_qps, count))
    releases = arrivals[batch - 1::batch]
    done = departures(releases, service_times(rng, scenario, len(releases)),
                      scenario.replicas)
    latency = np.repeat(done, batch) - arrivals
    kept = latency[warmup_requests(scenario, count):]
    return float(kept.mean()), float(np.quantile(kept, 0.99))


def estimate(scenario: Scenario, *, seeds: int | None = None, requests: int | None = None,
             base_seed: int = 0) -> Estimate:
    """Mean and p99 over ``seeds`` independent replications (default :data:`SEEDS` of
    :data:`REQUESTS`, longer near saturation: :func:`run_requests`), with 95 % intervals;
    ``inf`` without a run when unstable."""
    seeds = SEEDS if seeds is None else seeds
    requests = REQUESTS if requests is None else requests
    if not scenario.utilization < 1.0:
        return Estimate(math.inf, 0.0, math.inf, 0.0, 0, 0)
    requests = run_requests(scenario, requests)
    runs = [replicate(scenario, base_seed + index, requests) for index in range(seeds)]
    means, p99s = [m for m, _ in runs], [p for _, p in runs]
    t = T_975[min(seeds - 1, len(T_975)) - 1] if seeds > 1 else math.inf

    def half(values: list[float]) -> float:
        return t * statistics.stdev(values) / math.sqrt(len(values)) if seeds > 1 else math.inf

    return Estimate(statistics.fmean(means), half(means), statistics.fmean(p99s), half(p99s),
                    seeds, requests)
