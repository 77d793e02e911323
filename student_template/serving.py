"""The serving lab: latency, throughput, tail latency, memory and cold starts.

Implement every function below. Keep the names, the parameters and the result types exactly
as they are: the autograder calls them by name and reads results by field name.

Units used throughout:
- times in milliseconds (ms);
- rates in requests per second (qps, req/s);
- memory in decimal gigabytes (GB, 1 GB = 10**9 bytes);
- bandwidths in GB per second (GB/s);
- numeric precisions in bytes per value (2 for fp16, 1 for int8).

This file must stay standalone: import only from Python's standard library.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

# --- result types (do not rename or reorder fields) -----------------------------------------


class ServeResult(NamedTuple):
    """Outcome of serving a workload in batches."""

    total_ms: float
    """Time to serve every request, in ms."""
    throughput_rps: float
    """Requests served per second over the whole run, in req/s."""
    passes: int
    """Number of passes (batches) run."""


@dataclass(frozen=True)
class QueueingResult:
    """Latency of a fleet of identical replicas fed by random arrivals."""

    arrival_qps: float
    """The arrival rate you were given, in qps."""
    service_ms: float
    """The service time you were given, in ms."""
    replicas: int
    """The whole number of replicas actually used (at least 1)."""
    utilization: float
    """Fraction of the fleet's capacity in use (1.0 = fully busy); math.inf with no capacity."""
    stable: bool
    """True when the fleet keeps up with the arrivals."""
    mean_latency_ms: float
    """Mean time from arrival to response, in ms (math.inf when unstable)."""
    p50_latency_ms: float
    """Median latency, in ms (math.inf when unstable)."""
    p95_latency_ms: float
    """95th-percentile latency, in ms (math.inf when unstable)."""
    p99_latency_ms: float
    """99th-percentile latency, in ms (math.inf when unstable)."""
    p999_latency_ms: float
    """99.9th-percentile latency, in ms (math.inf when unstable)."""
    slo_ms: float
    """The latency objective you were given, in ms."""
    slo_ok: bool
    """True when the p99 latency meets the objective."""
    queue_wait_probability: float
    """Probability that a request has to wait for a free replica (0 to 1)."""
    queue_amplifier: float
    """How many times the bare service time the p99 latency is (dimensionless)."""


@dataclass(frozen=True)
class BatchingTaxResult:
    """What batching costs in latency and buys in throughput."""

    batch_size: int
    """The whole batch size actually used (at least 1)."""
    arrival_qps: float
    """The arrival rate actually used, in qps."""
    formation_delay_ms: float
    """Mean time a request waits for its batch to fill, in ms."""
    batched_service_ms: float
    """Time to serve one whole batch, in ms."""
    queue_p99_ms: float
    """p99 time a batch waits for a replica, beyond its own service, in ms."""
    total_p99_ms: float
    """p99 latency of a request: forming, queueing and service, in ms."""
    formation_slo_pct: float
    """Formation delay as a percentage of the latency objective, in %."""
    throughput_gain: float
    """How many times more requests per unit of service time batching gives."""
    effective_batch_qps: float
    """Rate at which batches reach the replicas, in batches per second."""
    utilization: float
    """Fraction of the fleet's capacity the batches use."""
    slo_ok: bool
    """True when total_p99_ms meets the latency objective."""


@dataclass(frozen=True)
class CacheCapacityResult:
    """How many requests' state fits in memory beside the model weights."""

    total_memory_gb: float
    """Memory of one replica across its devices, in GB."""
    weight_gb: float
    """Memory taken by the model weights, in GB."""
    state_per_request_gb: float
    """Memory one in-flight request needs (KV cache or other state), in GB."""
    available_gb: float
    """Memory left for request state, in GB."""
    max_concurrent: int
    """How many requests fit at once."""
    oom: bool
    """True when not even one request fits."""
    state_kind: str
    """The profile's name for the per-request state, echoed."""
    context_tokens: int
    """The context length you were given, in tokens."""


@dataclass(frozen=True)
class ColdStartResult:
    """Time to bring a new replica up, and what the first request sees."""

    model_weight_gb: float
    """Size of the weights to load, in GB."""
    storage_bandwidth_gbs: float
    """Storage read bandwidth used, in GB/s."""
    interconnect_bandwidth_gbs: float
    """Interconnect bandwidth used, in GB/s."""
    effective_bandwidth_gbs: float
    """The bandwidth the weights actually load at, in GB/s."""
    read_ms: float
    """Time to move the weights, in ms."""
    deserialize_ms: float
    """Time to deserialize the weights, in ms."""
    runtime_init_ms: float
    """Time to start the runtime, in ms."""
    warmup_ms: float
    """Time to warm the model up, in ms."""
    cold_start_ms: float
    """Total time to start one replica, in ms."""
    exposed_first_request_ms: float
    """Expected latency of the first request during a scale-out, in ms."""
    protected_fraction: float
    """Share of the new replicas a warm pool covers (0 to 1)."""
    exceeds_slo: bool
    """True when the exposed latency is over the profile's objective."""


@dataclass(frozen=True)
class ServingTrackProfile:
    """A track's hardware and model facts in plain units, with the lab's default settings."""

    track_id: str
    label: str
    hardware_ref: str
    model_ref: str
    hardware_name: str
    model_name: str
    model_params_b: float
    """Model parameters, in billions."""
    memory_capacity_gb: float
    """Device memory, in GB."""
    memory_bandwidth_gbs: float
    """Device memory bandwidth, in GB/s."""
    storage_bandwidth_gbs: float
    """Storage read bandwidth, in GB/s."""
    interconnect_bandwidth_gbs: float
    """Interconnect bandwidth, in GB/s."""
    tdp_w: float
    """Thermal design power, in W."""
    battery_wh: float | None
    """Battery capacity, in Wh, or None without a battery."""
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
    """(hardware_ref, model_ref)."""


# --- part 1: batching -----------------------------------------------------------------------


def serve(
    n_requests: int,
    batch_size: int,
    *,
    overhead_ms: float = 20.0,
    marginal_ms: float = 2.0,
) -> ServeResult:
    """Serve ``n_requests`` requests in passes (batches) of at most ``batch_size`` requests.

    Args:
        n_requests: how many requests to serve (a whole number, at least 1).
        batch_size: the most requests one pass may hold (a whole number, at least 1).
        overhead_ms: fixed cost of running one pass, whatever its size, in ms.
        marginal_ms: extra cost of each request in a pass, in ms.

    Returns:
        ServeResult(total_ms, throughput_rps, passes): total time in ms, throughput in
        requests per second, and the number of passes.
    """
    raise NotImplementedError("serve: implement me")


# --- part 2: queueing and the tail ----------------------------------------------------------


def erlang_c(arrival_qps: float, service_ms: float, replicas: int) -> tuple[float, float]:
    """Erlang C for ``replicas`` identical servers fed by random (Poisson) arrivals.

    Args:
        arrival_qps: arrival rate, in requests per second.
        service_ms: mean time one replica takes per request, in ms.
        replicas: number of replicas (servers), a whole number.

    Returns:
        ``(wait_rate_per_s, wait_probability)``: the rate, per second, at which a queued
        request's wait decays, and the probability that a request has to wait (0 to 1).
        An overloaded or degenerate queue returns ``(math.inf, 1.0)``. Must stay finite and
        accurate for fleets of up to 10,000 replicas.
    """
    raise NotImplementedError("erlang_c: implement me")


def queueing_latency(
    *,
    arrival_qps: float,
    service_ms: float,
    replicas: int = 1,
    service_cv: float = 1.0,
    slo_ms: float = 100.0,
) -> QueueingResult:
    """Mean and tail latency of a fleet of replicas.

    Args:
        arrival_qps: arrival rate, in requests per second.
        service_ms: mean service time of one request on one replica, in ms.
        replicas: number of replicas (at least 1 is used).
        service_cv: coefficient of variation of the service time (standard deviation over
            mean; 1.0 for exponential service, 0 for constant service).
        slo_ms: the p99 latency objective, in ms.

    Returns:
        A QueueingResult; every latency field is in ms.
    """
    raise NotImplementedError("queueing_latency: implement me")


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
    """The latency a batching policy adds, and the throughput it buys.

    Args:
        batch_size: requests per batch.
        arrival_qps: arrival rate of single requests, in requests per second.
        service_ms: service time of one unbatched request, in ms.
        slo_ms: the p99 latency objective for a request, in ms.
        efficiency_gain: how many times faster the hardware runs a batch than the same
            requests one by one (values below 1 count as 1).
        replicas: number of replicas serving batches.
        service_cv: coefficient of variation of the batch service time.

    Returns:
        A BatchingTaxResult; times in ms, formation_slo_pct in percent.
    """
    raise NotImplementedError("batching_tax: implement me")


# --- part 3: memory -------------------------------------------------------------------------


def transformer_state_gb(model: object, context_tokens: int, kv_bytes: float) -> float | None:
    """KV-cache size of one request of a transformer model, in GB.

    Args:
        model: an object with ``layers`` (number of layers) and ``hidden_dim`` (hidden size).
        context_tokens: tokens of context the request keeps, a whole number.
        kv_bytes: bytes per stored key or value element.

    Returns:
        The size in decimal GB, or None when the model is not a transformer (its
        ``layers`` or ``hidden_dim`` is missing, None or 0).
    """
    raise NotImplementedError("transformer_state_gb: implement me")


def cache_capacity(
    profile: ServingTrackProfile,
    model: object,
    *,
    context_tokens: int,
    precision_bytes: float,
    devices_per_replica: int = 1,
    kv_precision_bytes: float | None = None,
) -> CacheCapacityResult:
    """How many concurrent requests' state fits on one replica beside the weights.

    Args:
        profile: the track profile (memory per device in GB, model size in billions of
            parameters, per-request state in MB, default KV precision in bytes).
        model: the model object (see ``transformer_state_gb``).
        context_tokens: tokens of context per request.
        precision_bytes: bytes per weight.
        devices_per_replica: devices whose memory one replica pools.
        kv_precision_bytes: bytes per KV-cache element; None means the profile's.

    Returns:
        A CacheCapacityResult; memory in GB.
    """
    raise NotImplementedError("cache_capacity: implement me")


# --- part 4: cold starts --------------------------------------------------------------------


def cold_start_latency(
    profile: ServingTrackProfile,
    *,
    precision_bytes: float,
    storage_bandwidth_gbs: float | None = None,
    interconnect_bandwidth_gbs: float | None = None,
    deserialize_gbs: float | None = None,
    runtime_init_ms: float | None = None,
    warmup_ms: float | None = None,
    warm_pool_replicas: int = 0,
    scale_out_replicas: int = 1,
) -> ColdStartResult:
    """Time to start a new replica, and the latency the first request is exposed to.

    Args:
        profile: the track profile (model size, bandwidths, start-up times, service time and
            latency objective).
        precision_bytes: bytes per weight.
        storage_bandwidth_gbs: storage read bandwidth in GB/s; None or 0 means the profile's.
        interconnect_bandwidth_gbs: interconnect bandwidth in GB/s; None or 0 means the
            profile's.
        deserialize_gbs: deserialization speed in GB/s; None or 0 means the profile's.
        runtime_init_ms: runtime start-up time in ms; None means the profile's (0 is a value).
        warmup_ms: warm-up time in ms; None means the profile's (0 is a value).
        warm_pool_replicas: replicas kept warm, ready to take traffic at once.
        scale_out_replicas: replicas a scale-out event adds.

    Returns:
        A ColdStartResult; times in ms, bandwidths in GB/s, weights in GB.
    """
    raise NotImplementedError("cold_start_latency: implement me")


# --- part 5: track profiles -----------------------------------------------------------------


def quantity_to_float(value: Any, unit: str, default: float) -> float:
    """A quantity as a plain float in ``unit``.

    Args:
        value: a pint Quantity (or any object with ``m_as`` or ``to``), a plain number,
            or None.
        unit: the unit to express it in, as pint spells it (for example "GB/s").
        default: what to return for None, or when the value cannot be converted.

    Returns:
        The magnitude in ``unit``, as a float.
    """
    raise NotImplementedError("quantity_to_float: implement me")


def serving_track_profile(
    profile: Any, variant: Any, hardware: Any, model: Any
) -> ServingTrackProfile:
    """Flatten MLSysIM-style registry objects into one ServingTrackProfile in plain units.

    Args:
        profile: has ``track_id`` and ``label``.
        variant: has ``hardware_ref``, ``model_ref``, ``defaults`` (a mapping of lab
            settings), ``assumptions`` (a mapping), ``primary_metric``, ``guardrail_metric``.
        hardware: has ``name``, ``memory.capacity``, ``memory.bandwidth``,
            ``storage.bandwidth``, ``interconnect.bandwidth``, ``tdp`` and
            ``battery_capacity`` as pint quantities; storage, interconnect and battery may
            be missing or None.
        model: has ``name``, ``parameters`` (a pint quantity in ``param``), ``layers`` and
            ``hidden_dim``.

    Returns:
        A ServingTrackProfile with GB, GB/s, W, Wh and billions of parameters.
    """
    raise NotImplementedError("serving_track_profile: implement me")
