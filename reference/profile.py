"""Unit-aware track profiles: MLSysIM-shaped hardware and model facts in plain units."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reference.results import ServingTrackProfile

#: Lab defaults read from ``variant.defaults``: profile field -> (key, default).
DEFAULT_FIELDS: dict[str, tuple[str, Any]] = {
    "arrival_qps": ("arrival_qps", 100.0),
    "service_ms": ("service_ms", 20.0),
    "replicas": ("replicas", 1),
    "slo_ms": ("slo_ms", 100.0),
    "service_cv": ("service_cv", 1.0),
    "batch_size": ("batch_size", 1),
    "batch_efficiency_gain": ("batch_efficiency_gain", 1.0),
    "context_tokens": ("context_tokens", 4096),
    "state_kind": ("state_kind", "state/cache"),
    "state_mb_per_request": ("state_mb_per_request", None),
    "precision_bytes": ("precision_bytes", 2.0),
    "kv_precision_bytes": ("kv_precision_bytes", 2.0),
    "default_devices_per_replica": ("devices_per_replica", 1),
    "deserialize_gbs": ("deserialize_gbs", 20.0),
    "runtime_init_ms": ("runtime_init_ms", 800.0),
    "warmup_ms": ("warmup_ms", 500.0),
    "warm_pool_replicas": ("warm_pool_replicas", 0),
    "scale_out_replicas": ("scale_out_replicas", 1),
}

#: Fields of :class:`ServingTrackProfile` that hold whole numbers.
INTEGER_FIELDS = frozenset(
    {"replicas", "batch_size", "context_tokens", "default_devices_per_replica",
     "warm_pool_replicas", "scale_out_replicas"}
)
DEFAULT_SERVING_POLICY = "track-specific serving policy"


def quantity_to_float(value: Any, unit: str, default: float) -> float:
    """``value`` in ``unit`` as a float; ``None`` or a failed conversion gives ``default``."""
    if value is None:
        return default
    if hasattr(value, "m_as"):
        try:
            return float(value.m_as(unit))
        except Exception:
            return default
    if hasattr(value, "to"):
        try:
            return float(value.to(unit).magnitude)
        except Exception:
            return default
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def _lab_default(field: str, defaults: Mapping[str, Any]) -> Any:
    key, fallback = DEFAULT_FIELDS[field]
    value = defaults.get(key, fallback)
    if value is None or isinstance(value, str):
        return value
    return int(value) if field in INTEGER_FIELDS else float(value)


def _nested(obj: Any, *names: str) -> Any:
    for name in names:
        obj = getattr(obj, name, None)
        if obj is None:
            return None
    return obj


def serving_track_profile(
    profile: Any, variant: Any, hardware: Any, model: Any
) -> ServingTrackProfile:
    """Flatten MLSysIM-shaped registry objects into one plain-unit :class:`ServingTrackProfile`."""
    defaults: Mapping[str, Any] = variant.defaults or {}
    assumptions: Mapping[str, Any] = variant.assumptions or {}
    memory_bandwidth = quantity_to_float(_nested(hardware, "memory", "bandwidth"), "GB/s", 0.0)
    fallback_bandwidth = quantity_to_float(_nested(hardware, "memory", "bandwidth"), "GB/s", 1.0)

    def link_bandwidth(key: str, component: str) -> float:
        if key in defaults:
            return quantity_to_float(defaults[key], "GB/s", fallback_bandwidth)
        return quantity_to_float(
            _nested(hardware, component, "bandwidth"), "GB/s", fallback_bandwidth
        )

    battery = getattr(hardware, "battery_capacity", None)
    hardware_ref = str(variant.hardware_ref)
    model_ref = str(variant.model_ref)
    lab = {field: _lab_default(field, defaults) for field in DEFAULT_FIELDS}
    return ServingTrackProfile(
        track_id=str(profile.track_id),
        label=str(profile.label),
        hardware_ref=hardware_ref,
        model_ref=model_ref,
        hardware_name=str(getattr(hardware, "name", None) or hardware_ref),
        model_name=str(getattr(model, "name", None) or model_ref),
        model_params_b=quantity_to_float(getattr(model, "parameters", None), "param", 0.0) / 1e9,
        memory_capacity_gb=quantity_to_float(_nested(hardware, "memory", "capacity"), "GB", 0.0),
        memory_bandwidth_gbs=memory_bandwidth,
        storage_bandwidth_gbs=link_bandwidth("storage_bandwidth_gbs", "storage"),
        interconnect_bandwidth_gbs=link_bandwidth("interconnect_bandwidth_gbs", "interconnect"),
        tdp_w=quantity_to_float(getattr(hardware, "tdp", None), "W", 0.0),
        battery_wh=None if battery is None else quantity_to_float(battery, "Wh", 0.0),
        validation_tests=tuple(str(test) for test in defaults.get("validation_tests", ())),
        serving_policy=str(assumptions.get("serving_policy", DEFAULT_SERVING_POLICY)),
        primary_metric=str(variant.primary_metric),
        guardrail_metric=str(variant.guardrail_metric),
        source_refs=(hardware_ref, model_ref),
        **lab,
    )
