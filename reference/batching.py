"""The batching simulator and the batching tax (formation delay plus queueing tail)."""

from __future__ import annotations

import math

from reference.domain import at_least, finite, whole_at_least
from reference.queueing import queueing_latency
from reference.results import BatchingTaxResult, ServeResult

#: Extra per-batch service time for each doubling of the batch (8 %).
BATCH_SLOWDOWN_PER_DOUBLING = 0.08


def serve(
    n_requests: int,
    batch_size: int,
    *,
    overhead_ms: float = 20.0,
    marginal_ms: float = 2.0,
) -> ServeResult:
    """Serve ``n_requests`` in passes of at most ``batch_size``.

    A pass of ``b`` requests costs ``overhead_ms + b * marginal_ms``.
    """
    n = whole_at_least("n_requests", n_requests, 1)
    batch = whole_at_least("batch_size", batch_size, 1)
    overhead = at_least("overhead_ms", overhead_ms, 0.0)
    marginal = at_least("marginal_ms", marginal_ms, 0.0)
    if overhead == 0.0 and marginal == 0.0:
        raise ValueError("overhead_ms and marginal_ms must not both be 0")
    passes = -(-n // batch)
    total_ms = passes * overhead + n * marginal
    return ServeResult(total_ms=total_ms, throughput_rps=n / (total_ms / 1000.0), passes=passes)


def batching_tax(
    *,
    batch_size: int,
    arrival_qps: float,
    service_ms: float,
    slo_ms: float,
    efficiency_gain: float = 1.0,
    replicas: int = 1,
    service_cv: float = 1.0,
) -> BatchingTaxResult:
    """Tail latency of waiting for a batch to form, then queueing for a replica."""
    batch = max(1, int(finite("batch_size", batch_size)))
    arrival = max(0.0001, finite("arrival_qps", arrival_qps))
    service = finite("service_ms", service_ms)
    slo = finite("slo_ms", slo_ms)
    gain = max(1.0, finite("efficiency_gain", efficiency_gain))

    formation_ms = (batch - 1) / (2.0 * arrival) * 1000.0
    batched_ms = service * (1.0 + BATCH_SLOWDOWN_PER_DOUBLING * math.log2(batch)) / gain
    queue = queueing_latency(
        arrival_qps=arrival / batch,
        service_ms=batched_ms,
        replicas=replicas,
        service_cv=service_cv,
        slo_ms=max(0.001, slo - formation_ms),
    )
    queue_p99_ms = max(0.0, queue.p99_latency_ms - batched_ms)
    total_p99_ms = formation_ms + batched_ms + queue_p99_ms if queue.stable else math.inf
    return BatchingTaxResult(
        batch_size=batch,
        arrival_qps=arrival,
        formation_delay_ms=formation_ms,
        batched_service_ms=batched_ms,
        queue_p99_ms=queue_p99_ms,
        total_p99_ms=total_p99_ms,
        formation_slo_pct=formation_ms / slo * 100.0 if slo > 0 else math.inf,
        throughput_gain=batch * service / batched_ms if batched_ms > 0 else math.inf,
        effective_batch_qps=arrival / batch,
        utilization=queue.utilization,
        slo_ok=total_p99_ms <= slo,
    )
