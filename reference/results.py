"""Frozen result types of the serving-lab contract; field order follows the lab spec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class ServeResult(NamedTuple):
    """Outcome of serving ``n`` requests in passes of at most ``batch_size``."""

    total_ms: float
    throughput_rps: float
    passes: int


@dataclass(frozen=True)
class QueueingResult:
    """M/G/c latency estimate from Erlang C with a variability correction."""

    arrival_qps: float
    service_ms: float
    replicas: int
    utilization: float
    stable: bool
    mean_latency_ms: float
    p50_latency_ms: float
    p95_latency_ms: float
    p99_latency_ms: float
    p999_latency_ms: float
    slo_ms: float
    slo_ok: bool
    queue_wait_probability: float
    queue_amplifier: float


@dataclass(frozen=True)
class BatchingTaxResult:
    """Formation delay, batched service and queueing tail of a batching policy."""

    batch_size: int
    arrival_qps: float
    formation_delay_ms: float
    batched_service_ms: float
    queue_p99_ms: float
    total_p99_ms: float
    formation_slo_pct: float
    throughput_gain: float
    effective_batch_qps: float
    utilization: float
    slo_ok: bool


@dataclass(frozen=True)
class CacheCapacityResult:
    """How many concurrent requests' state fits beside the weights."""

    total_memory_gb: float
    weight_gb: float
    state_per_request_gb: float
    available_gb: float
    max_concurrent: int
    oom: bool
    state_kind: str
    context_tokens: int


@dataclass(frozen=True)
class ColdStartResult:
    """Time to bring a replica up, and what the first request sees."""

    model_weight_gb: float
    storage_bandwidth_gbs: float
    interconnect_bandwidth_gbs: float
    effective_bandwidth_gbs: float
    read_ms: float
    deserialize_ms: float
    runtime_init_ms: float
    warmup_ms: float
    cold_start_ms: float
    exposed_first_request_ms: float
    protected_fraction: float
    exceeds_slo: bool


@dataclass(frozen=True)
class ServingTrackProfile:
    """A track's hardware and model facts in plain units, with the lab's defaults."""

    track_id: str
    label: str
    hardware_ref: str
    model_ref: str
    hardware_name: str
    model_name: str
    model_params_b: float
    memory_capacity_gb: float
    memory_bandwidth_gbs: float
    storage_bandwidth_gbs: float
    interconnect_bandwidth_gbs: float
    tdp_w: float
    battery_wh: float | None
    arrival_qps: float
    service_ms: float
    replicas: int
    slo_ms: float
    service_cv: float
    batch_size: int
    batch_efficiency_gain: float
    context_tokens: int
    state_kind: str
    state_mb_per_request: float | None
    precision_bytes: float
    kv_precision_bytes: float
    default_devices_per_replica: int
    deserialize_gbs: float
    runtime_init_ms: float
    warmup_ms: float
    warm_pool_replicas: int
    scale_out_replicas: int
    validation_tests: tuple[str, ...]
    serving_policy: str
    primary_metric: str
    guardrail_metric: str
    source_refs: tuple[str, str]
