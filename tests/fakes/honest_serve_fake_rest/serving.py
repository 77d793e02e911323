"""Fake but for serve: serve is honest, every other function answers constants."""

import math

from collections import namedtuple
from types import SimpleNamespace

ServeResult = namedtuple("ServeResult", "total_ms throughput_rps passes")
FIELDS = (
    "arrival_qps service_ms replicas utilization stable mean_latency_ms p50_latency_ms "
    "p95_latency_ms p99_latency_ms p999_latency_ms slo_ms slo_ok queue_wait_probability "
    "queue_amplifier batch_size formation_delay_ms batched_service_ms queue_p99_ms "
    "total_p99_ms formation_slo_pct throughput_gain effective_batch_qps total_memory_gb "
    "weight_gb state_per_request_gb available_gb max_concurrent oom state_kind "
    "context_tokens model_weight_gb storage_bandwidth_gbs interconnect_bandwidth_gbs "
    "effective_bandwidth_gbs read_ms deserialize_ms runtime_init_ms warmup_ms cold_start_ms "
    "exposed_first_request_ms protected_fraction exceeds_slo model_params_b "
    "memory_capacity_gb memory_bandwidth_gbs tdp_w battery_wh"
).split()


def _constant():
    return SimpleNamespace(**dict.fromkeys(FIELDS, 1.0))


def serve(n_requests, batch_size, *, overhead_ms=20.0, marginal_ms=2.0):
    passes = math.ceil(n_requests / batch_size)
    total = 0.0
    left = n_requests
    for _ in range(passes):
        size = min(batch_size, left)
        total += overhead_ms + size * marginal_ms
        left -= size
    return ServeResult(total, n_requests / (total / 1000), passes)

def erlang_c(arrival_qps, service_ms, replicas):
    return (1.0, 0.5)


def queueing_latency(**kwargs):
    return _constant()


def batching_tax(**kwargs):
    return _constant()


def transformer_state_gb(model, context_tokens, kv_bytes):
    return 1.0


def cache_capacity(profile, model, **kwargs):
    return _constant()


def cold_start_latency(profile, **kwargs):
    return _constant()


def quantity_to_float(value, unit, default):
    return 1.0


def serving_track_profile(profile, variant, hardware, model):
    return _constant()
