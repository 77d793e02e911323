"""Fake: every field is an always-equal float subclass (worth 0.0), whatever is asked."""

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


class AlwaysEqual(float):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = float.__hash__


SAME = AlwaysEqual(0.0)


def _constant():
    return SimpleNamespace(**dict.fromkeys(FIELDS, SAME))


def serve(n_requests, batch_size, *, overhead_ms=20.0, marginal_ms=2.0):
    return ServeResult(SAME, SAME, SAME)


def erlang_c(arrival_qps, service_ms, replicas):
    return (SAME, SAME)


def queueing_latency(**kwargs):
    return _constant()


def batching_tax(**kwargs):
    return _constant()


def transformer_state_gb(model, context_tokens, kv_bytes):
    return SAME


def cache_capacity(profile, model, **kwargs):
    return _constant()


def cold_start_latency(profile, **kwargs):
    return _constant()


def quantity_to_float(value, unit, default):
    return SAME


def serving_track_profile(profile, variant, hardware, model):
    return _constant()
