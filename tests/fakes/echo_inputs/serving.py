"""Fake: every function answers with its own inputs, and computes nothing."""

from collections import namedtuple
from types import SimpleNamespace

ServeResult = namedtuple("ServeResult", "total_ms throughput_rps passes")


def _echo(fields, value, **known):
    return SimpleNamespace(**{name: known.get(name, value) for name in fields.split()})


def serve(n_requests, batch_size, *, overhead_ms=20.0, marginal_ms=2.0):
    return ServeResult(float(n_requests), float(batch_size), n_requests)


def erlang_c(arrival_qps, service_ms, replicas):
    return (arrival_qps, service_ms)


def queueing_latency(*, arrival_qps, service_ms, replicas=1, service_cv=1.0, slo_ms=100.0):
    return _echo(
        "arrival_qps service_ms replicas utilization stable mean_latency_ms p50_latency_ms "
        "p95_latency_ms p99_latency_ms p999_latency_ms slo_ms slo_ok queue_wait_probability "
        "queue_amplifier", arrival_qps, service_ms=service_ms, replicas=replicas,
        slo_ms=slo_ms, stable=True, slo_ok=True)


def batching_tax(*, batch_size, arrival_qps, service_ms, slo_ms, efficiency_gain=1.0,
                 replicas=1, service_cv=1.0):
    return _echo(
        "batch_size arrival_qps formation_delay_ms batched_service_ms queue_p99_ms "
        "total_p99_ms formation_slo_pct throughput_gain effective_batch_qps utilization "
        "slo_ok", batch_size, arrival_qps=arrival_qps, batched_service_ms=service_ms,
        slo_ok=True)


def transformer_state_gb(model, context_tokens, kv_bytes):
    return float(context_tokens)


def cache_capacity(profile, model, *, context_tokens, precision_bytes, devices_per_replica=1,
                   kv_precision_bytes=None):
    return _echo(
        "total_memory_gb weight_gb state_per_request_gb available_gb max_concurrent oom "
        "state_kind context_tokens", float(context_tokens), state_kind=profile.state_kind,
        context_tokens=context_tokens, max_concurrent=devices_per_replica, oom=False)


def cold_start_latency(profile, *, precision_bytes, **overrides):
    return _echo(
        "model_weight_gb storage_bandwidth_gbs interconnect_bandwidth_gbs "
        "effective_bandwidth_gbs read_ms deserialize_ms runtime_init_ms warmup_ms "
        "cold_start_ms exposed_first_request_ms protected_fraction exceeds_slo",
        profile.service_ms, exceeds_slo=False)


def quantity_to_float(value, unit, default):
    return default


def serving_track_profile(profile, variant, hardware, model):
    return SimpleNamespace(track_id=profile.track_id, label=profile.label,
                           hardware_ref=variant.hardware_ref, model_ref=variant.model_ref,
                           **dict(variant.defaults))
