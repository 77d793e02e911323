"""Cold start: reading, deserializing and warming a replica, and a warm pool's protection."""

from __future__ import annotations

from reference.domain import at_least, finite
from reference.results import ColdStartResult, ServingTrackProfile

#: Floor for every bandwidth, in GB/s, so a zero never divides.
MIN_BANDWIDTH_GBS = 0.001


def _bandwidth(name: str, given: float | None, fallback: float) -> float:
    """The given bandwidth, or the profile's when it is ``None`` or 0, floored."""
    value = fallback if given is None or given == 0 else finite(name, given)
    return max(MIN_BANDWIDTH_GBS, value)


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
    """Time to start a replica, and the latency the first request is exposed to."""
    precision = at_least("precision_bytes", precision_bytes, 0.0)
    weight_gb = max(0.0, profile.model_params_b * precision)
    storage = _bandwidth("storage_bandwidth_gbs", storage_bandwidth_gbs,
                         profile.storage_bandwidth_gbs)
    interconnect = _bandwidth("interconnect_bandwidth_gbs", interconnect_bandwidth_gbs,
                              profile.interconnect_bandwidth_gbs)
    deserialize = _bandwidth("deserialize_gbs", deserialize_gbs, profile.deserialize_gbs)
    effective = min(storage, interconnect)
    init_ms = profile.runtime_init_ms if runtime_init_ms is None else finite(
        "runtime_init_ms", runtime_init_ms)
    warm_ms = profile.warmup_ms if warmup_ms is None else finite("warmup_ms", warmup_ms)
    read_ms = weight_gb / effective * 1000.0
    deserialize_ms = weight_gb / deserialize * 1000.0
    cold_ms = read_ms + deserialize_ms + init_ms + warm_ms
    warm_pool = finite("warm_pool_replicas", warm_pool_replicas)
    scale_out = finite("scale_out_replicas", scale_out_replicas)
    protected = min(1.0, max(0.0, warm_pool) / max(1.0, scale_out))
    exposed_ms = profile.service_ms + cold_ms * (1.0 - protected)
    return ColdStartResult(
        model_weight_gb=weight_gb,
        storage_bandwidth_gbs=storage,
        interconnect_bandwidth_gbs=interconnect,
        effective_bandwidth_gbs=effective,
        read_ms=read_ms,
        deserialize_ms=deserialize_ms,
        runtime_init_ms=init_ms,
        warmup_ms=warm_ms,
        cold_start_ms=cold_ms,
        exposed_first_request_ms=exposed_ms,
        protected_fraction=protected,
        exceeds_slo=exposed_ms > profile.slo_ms,
    )
