"""Domains: what the reference rejects (ValueError naming the parameter and the rule), and the
edge cases lab-spec section 2 defines instead of rejecting."""

from __future__ import annotations

import dataclasses
import math
import re
from types import SimpleNamespace
from typing import Any

import pytest

from reference import (
    ServingTrackProfile,
    batching_tax,
    cache_capacity,
    cold_start_latency,
    erlang_c,
    queueing_latency,
    serve,
    transformer_state_gb,
)

NAN = math.nan
INF = math.inf


def _raises(message: str) -> Any:
    return pytest.raises(ValueError, match=re.escape(message))


# --- rejected inputs -------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "kwargs", "message"), [
    ((0, 1), {}, "n_requests must be >= 1, got 0"),
    ((-5, 1), {}, "n_requests must be >= 1, got -5"),
    ((2.5, 1), {}, "n_requests must be an integer, got 2.5"),
    ((True, 1), {}, "n_requests must be an integer, got True"),
    (("256", 1), {}, "n_requests must be an integer, got '256'"),
    ((256, 0), {}, "batch_size must be >= 1, got 0"),
    ((256, 4.0), {}, "batch_size must be an integer, got 4.0"),
    ((256, 4), {"overhead_ms": -1.0}, "overhead_ms must be >= 0, got -1.0"),
    ((256, 4), {"marginal_ms": -0.5}, "marginal_ms must be >= 0, got -0.5"),
    ((256, 4), {"overhead_ms": NAN}, "overhead_ms must not be NaN"),
    ((256, 4), {"marginal_ms": "2"}, "marginal_ms must be a real number, got '2'"),
    ((256, 4), {"overhead_ms": 0.0, "marginal_ms": 0.0},
     "overhead_ms and marginal_ms must not both be 0"),
])
def test_serve_rejects_inputs_outside_its_domain(
    args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    with _raises(message):
        serve(*args, **kwargs)


def test_serve_accepts_the_edges_of_its_domain() -> None:
    assert serve(1, 1, overhead_ms=0.0, marginal_ms=1.0) == (1.0, 1000.0, 1)
    assert serve(3, 5, overhead_ms=2.0, marginal_ms=0.0) == (2.0, 1500.0, 1)


@pytest.mark.parametrize(("args", "message"), [
    ((-1.0, 5.0, 1), "arrival_qps must be >= 0, got -1.0"),
    ((NAN, 5.0, 1), "arrival_qps must not be NaN"),
    ((10.0, NAN, 1), "service_ms must not be NaN"),
    ((10.0, "5", 1), "service_ms must be a real number, got '5'"),
    ((10.0, 5.0, 2.5), "replicas must be a whole number, got 2.5"),
    ((10.0, 5.0, INF), "replicas must be a whole number, got inf"),
    ((10.0, 5.0, NAN), "replicas must not be NaN"),
    ((10.0, 5.0, None), "replicas must be a real number, got None"),
])
def test_erlang_c_rejects_inputs_outside_its_domain(
    args: tuple[Any, ...], message: str
) -> None:
    with _raises(message):
        erlang_c(*args)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"arrival_qps": -0.1}, "arrival_qps must be >= 0, got -0.1"),
    ({"arrival_qps": NAN}, "arrival_qps must not be NaN"),
    ({"service_ms": NAN}, "service_ms must not be NaN"),
    ({"service_cv": -0.1}, "service_cv must be >= 0, got -0.1"),
    ({"slo_ms": NAN}, "slo_ms must not be NaN"),
    ({"replicas": NAN}, "replicas must not be NaN"),
    ({"replicas": "2"}, "replicas must be a real number, got '2'"),
])
def test_queueing_latency_rejects_inputs_outside_its_domain(
    kwargs: dict[str, Any], message: str
) -> None:
    inputs: dict[str, Any] = {"arrival_qps": 10.0, "service_ms": 5.0, **kwargs}
    with _raises(message):
        queueing_latency(**inputs)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"batch_size": NAN}, "batch_size must not be NaN"),
    ({"arrival_qps": NAN}, "arrival_qps must not be NaN"),
    ({"service_ms": NAN}, "service_ms must not be NaN"),
    ({"slo_ms": NAN}, "slo_ms must not be NaN"),
    ({"efficiency_gain": NAN}, "efficiency_gain must not be NaN"),
    ({"service_cv": -1.0}, "service_cv must be >= 0, got -1.0"),
    ({"replicas": NAN}, "replicas must not be NaN"),
])
def test_batching_tax_rejects_inputs_outside_its_domain(
    kwargs: dict[str, Any], message: str
) -> None:
    inputs: dict[str, Any] = {
        "batch_size": 8, "arrival_qps": 100.0, "service_ms": 5.0, "slo_ms": 50.0, **kwargs
    }
    with _raises(message):
        batching_tax(**inputs)


def test_transformer_state_rejects_negative_tokens_and_bytes() -> None:
    model = SimpleNamespace(layers=2, hidden_dim=4)
    with _raises("context_tokens must be >= 0, got -1"):
        transformer_state_gb(model, -1, 2)
    with _raises("kv_bytes must be >= 0, got -2"):
        transformer_state_gb(model, 16, -2)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"context_tokens": -1}, "context_tokens must be >= 0, got -1"),
    ({"precision_bytes": -2.0}, "precision_bytes must be >= 0, got -2.0"),
    ({"precision_bytes": NAN}, "precision_bytes must not be NaN"),
    ({"devices_per_replica": NAN}, "devices_per_replica must not be NaN"),
    ({"kv_precision_bytes": -1.0}, "kv_bytes must be >= 0, got -1.0"),
])
def test_cache_capacity_rejects_inputs_outside_its_domain(
    cloud_profile: ServingTrackProfile, llama_model: SimpleNamespace, kwargs: dict[str, Any],
    message: str,
) -> None:
    inputs: dict[str, Any] = {"context_tokens": 4096, "precision_bytes": 2.0, **kwargs}
    with _raises(message):
        cache_capacity(cloud_profile, llama_model, **inputs)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"precision_bytes": -1.0}, "precision_bytes must be >= 0, got -1.0"),
    ({"precision_bytes": NAN}, "precision_bytes must not be NaN"),
    ({"storage_bandwidth_gbs": NAN}, "storage_bandwidth_gbs must not be NaN"),
    ({"interconnect_bandwidth_gbs": NAN}, "interconnect_bandwidth_gbs must not be NaN"),
    ({"deserialize_gbs": NAN}, "deserialize_gbs must not be NaN"),
    ({"runtime_init_ms": NAN}, "runtime_init_ms must not be NaN"),
    ({"warmup_ms": "fast"}, "warmup_ms must be a real number, got 'fast'"),
    ({"warm_pool_replicas": NAN}, "warm_pool_replicas must not be NaN"),
    ({"scale_out_replicas": NAN}, "scale_out_replicas must not be NaN"),
])
def test_cold_start_rejects_inputs_outside_its_domain(
    cloud_profile: ServingTrackProfile, kwargs: dict[str, Any], message: str
) -> None:
    inputs: dict[str, Any] = {"precision_bytes": 2.0, **kwargs}
    with _raises(message):
        cold_start_latency(cloud_profile, **inputs)


# --- defined edge cases: erlang_c ------------------------------------------------------------


@pytest.mark.parametrize(("arrival", "service", "replicas"), [
    (10.0, 0.0, 1),  # service_ms <= 0
    (10.0, -5.0, 4),
    (0.0, 0.0, 1),
    (10.0, 5.0, 0),  # replicas <= 0
    (10.0, 5.0, -3),
    (200.0, 5.0, 1),  # a == c
    (1000.0, 5.0, 4),  # a > c
    (INF, 5.0, 4),
    (10.0, INF, 2),  # an infinite service time: mu = 0, so a = inf >= c
    (0.0, INF, 2),
])
def test_erlang_c_of_a_degenerate_or_overloaded_queue_is_inf_and_1(
    arrival: float, service: float, replicas: int
) -> None:
    assert erlang_c(arrival, service, replicas) == (INF, 1.0)


def test_erlang_c_with_no_arrivals_never_waits() -> None:
    assert erlang_c(0.0, 5.0, 3) == (600.0, 0.0)


def test_erlang_c_accepts_whole_float_replicas() -> None:
    assert erlang_c(100.0, 5.0, 2.0) == erlang_c(100.0, 5.0, 2)


# --- defined edge cases: queueing_latency ----------------------------------------------------


@pytest.mark.parametrize(("arrival", "service", "replicas", "utilization"), [
    (300.0, 5.0, 1, 1.5),
    (200.0, 5.0, 1, 1.0),
    (1000.0, 5.0, 2, 2.5),
    (10.0, 0.0, 1, INF),
    (10.0, -5.0, 3, INF),
    (0.0, 0.0, 1, INF),
    (10.0, INF, 1, INF),
])
def test_an_unstable_queue_reports_inf_latencies_and_certain_waiting(
    arrival: float, service: float, replicas: int, utilization: float
) -> None:
    q = queueing_latency(arrival_qps=arrival, service_ms=service, replicas=replicas, slo_ms=1e9)
    assert q.utilization == utilization
    assert q.stable is False
    for name in ("mean_latency_ms", "p50_latency_ms", "p95_latency_ms", "p99_latency_ms",
                 "p999_latency_ms", "queue_amplifier"):
        assert getattr(q, name) == INF, name
    assert q.slo_ok is False
    assert q.queue_wait_probability == 1.0
    assert (q.arrival_qps, q.service_ms, q.replicas, q.slo_ms) == (
        arrival, service, replicas, 1e9
    )


@pytest.mark.parametrize(("replicas", "servers"), [(0, 1), (-3, 1), (2.7, 2), (4, 4)])
def test_queueing_uses_at_least_one_whole_replica(replicas: float, servers: int) -> None:
    q = queueing_latency(arrival_qps=100.0, service_ms=5.0, replicas=replicas)
    assert q.replicas == servers
    assert type(q.replicas) is int
    assert q.utilization == pytest.approx(100.0 * 5.0 / (servers * 1000.0), rel=1e-12)


def test_a_queue_without_arrivals_answers_in_the_bare_service_time() -> None:
    q = queueing_latency(arrival_qps=0.0, service_ms=7.0, replicas=3, slo_ms=7.0)
    assert q.stable is True
    assert q.utilization == 0.0
    assert q.queue_wait_probability == 0.0
    assert (q.mean_latency_ms, q.p50_latency_ms, q.p999_latency_ms) == (7.0, 7.0, 7.0)
    assert q.queue_amplifier == 1.0
    assert q.slo_ok is True  # p99 <= slo_ms, with equality


def test_deterministic_service_halves_the_queueing_delay() -> None:
    # v = max(0.1, (1 + cv^2) / 2) = 0.5 at cv = 0: M/M/1 at rho 0.8 waits 0.8 / 40 s, halved.
    q = queueing_latency(arrival_qps=160.0, service_ms=5.0, service_cv=0.0)
    assert q.mean_latency_ms == pytest.approx(5.0 + 0.8 / 40 * 1000 * 0.5, rel=1e-12)


# --- defined edge cases: batching_tax --------------------------------------------------------


def test_batching_floors_batch_size_at_1_and_arrivals_at_a_ten_thousandth() -> None:
    b = batching_tax(batch_size=0, arrival_qps=-5.0, service_ms=5.0, slo_ms=50.0)
    assert b.batch_size == 1
    assert b.arrival_qps == 0.0001
    assert b.formation_delay_ms == 0.0
    b = batching_tax(batch_size=4.9, arrival_qps=0.0, service_ms=5.0, slo_ms=50.0)
    assert b.batch_size == 4
    assert b.formation_delay_ms == pytest.approx(3 / (2 * 0.0001) * 1000, rel=1e-12)


def test_batching_an_overloaded_queue_has_an_infinite_tail_and_misses_the_slo() -> None:
    b = batching_tax(batch_size=4, arrival_qps=2000.0, service_ms=5.0, slo_ms=1e9)
    assert b.utilization > 1.0
    assert b.total_p99_ms == INF
    assert b.queue_p99_ms == INF
    assert b.slo_ok is False


def test_batching_against_a_zero_slo_reports_an_infinite_formation_share() -> None:
    b = batching_tax(batch_size=4, arrival_qps=100.0, service_ms=5.0, slo_ms=0.0)
    assert b.formation_slo_pct == INF
    assert b.slo_ok is False


def test_batching_with_zero_service_has_an_infinite_gain_and_an_unstable_queue() -> None:
    b = batching_tax(batch_size=4, arrival_qps=100.0, service_ms=0.0, slo_ms=50.0)
    assert b.batched_service_ms == 0.0
    assert b.throughput_gain == INF
    assert b.utilization == INF
    assert b.total_p99_ms == INF


def test_an_efficiency_gain_below_1_counts_as_1() -> None:
    low = batching_tax(batch_size=8, arrival_qps=400.0, service_ms=5.0, slo_ms=50.0,
                       efficiency_gain=0.25)
    one = batching_tax(batch_size=8, arrival_qps=400.0, service_ms=5.0, slo_ms=50.0)
    assert low == one
    assert low.batched_service_ms == pytest.approx(5.0 * 1.24, rel=1e-12)


def test_the_inner_queue_gets_at_least_a_thousandth_of_a_ms_of_slo() -> None:
    # Formation (31 ms) exceeds the 10 ms SLO: the queue's own SLO is floored, not negative.
    b = batching_tax(batch_size=32, arrival_qps=500.0, service_ms=5.0, slo_ms=10.0,
                     efficiency_gain=6.4)
    assert b.formation_slo_pct == pytest.approx(310.0, rel=1e-12)
    assert b.slo_ok is False
    assert math.isfinite(b.total_p99_ms)


# --- defined edge cases: transformer_state_gb and cache_capacity -----------------------------


@pytest.mark.parametrize("model", [
    SimpleNamespace(layers=None, hidden_dim=8192),
    SimpleNamespace(layers=80, hidden_dim=None),
    SimpleNamespace(layers=0, hidden_dim=8192),
    SimpleNamespace(layers=80, hidden_dim=0),
    SimpleNamespace(hidden_dim=8192),
    SimpleNamespace(layers=80),
    object(),
])
def test_a_model_without_layers_or_hidden_size_has_no_transformer_state(model: object) -> None:
    assert transformer_state_gb(model, 4096, 2) is None


def test_transformer_state_at_zero_tokens_is_zero() -> None:
    assert transformer_state_gb(SimpleNamespace(layers=80, hidden_dim=8192), 0, 2) == 0.0


def test_a_transformer_at_zero_context_tokens_fits_no_request(
    cloud_profile: ServingTrackProfile, llama_model: SimpleNamespace
) -> None:
    c = cache_capacity(cloud_profile, llama_model, context_tokens=0, precision_bytes=2,
                       devices_per_replica=8)
    assert c.state_per_request_gb == 0.0
    assert c.max_concurrent == 0
    assert c.oom is True
    assert c.context_tokens == 0


def test_cache_state_falls_back_to_megabytes_over_1024_then_a_tenth_of_the_weights(
    cloud_profile: ServingTrackProfile,
) -> None:
    vision = SimpleNamespace(layers=54, hidden_dim=None)
    with_mb = dataclasses.replace(cloud_profile, state_mb_per_request=512.0)
    assert cache_capacity(with_mb, vision, context_tokens=1, precision_bytes=2,
                          devices_per_replica=8).state_per_request_gb == 0.5
    without = cache_capacity(cloud_profile, vision, context_tokens=1, precision_bytes=2)
    assert without.state_per_request_gb == pytest.approx(14.0, rel=1e-12)  # 0.1 * 140 GB
    tiny = dataclasses.replace(cloud_profile, model_params_b=0.0)
    assert cache_capacity(tiny, vision, context_tokens=1, precision_bytes=2
                          ).state_per_request_gb == 0.001


def test_kv_precision_defaults_to_the_profiles_and_can_be_overridden(
    cloud_profile: ServingTrackProfile, llama_model: SimpleNamespace
) -> None:
    one_byte = dataclasses.replace(cloud_profile, kv_precision_bytes=1.0)
    default = cache_capacity(one_byte, llama_model, context_tokens=1000, precision_bytes=2)
    given = cache_capacity(one_byte, llama_model, context_tokens=1000, precision_bytes=2,
                           kv_precision_bytes=4.0)
    assert default.state_per_request_gb == pytest.approx(2 * 80 * 8192 * 1000 * 1 / 1e9)
    assert given.state_per_request_gb == pytest.approx(2 * 80 * 8192 * 1000 * 4 / 1e9)


@pytest.mark.parametrize("devices", [0, -2])
def test_no_devices_means_no_memory_and_out_of_memory(
    cloud_profile: ServingTrackProfile, llama_model: SimpleNamespace, devices: int
) -> None:
    c = cache_capacity(cloud_profile, llama_model, context_tokens=4096, precision_bytes=2,
                       devices_per_replica=devices)
    assert c.total_memory_gb == 0.0
    assert c.available_gb == 0.0
    assert c.max_concurrent == 0
    assert c.oom is True


def test_weights_larger_than_memory_leave_nothing_available(
    cloud_profile: ServingTrackProfile, llama_model: SimpleNamespace
) -> None:
    c = cache_capacity(cloud_profile, llama_model, context_tokens=4096, precision_bytes=2,
                       devices_per_replica=1)
    assert c.weight_gb == 140.0
    assert c.available_gb == 0.0
    assert c.oom is True


# --- defined edge cases: cold_start_latency --------------------------------------------------


@pytest.mark.parametrize("given", [None, 0, 0.0])
def test_cold_start_without_a_bandwidth_uses_the_profiles(
    cloud_profile: ServingTrackProfile, given: float | None
) -> None:
    s = cold_start_latency(cloud_profile, precision_bytes=2, storage_bandwidth_gbs=given,
                           interconnect_bandwidth_gbs=given, deserialize_gbs=given)
    assert (s.storage_bandwidth_gbs, s.interconnect_bandwidth_gbs) == (7.0, 64.0)
    assert s.deserialize_ms == pytest.approx(140 / 20 * 1000, rel=1e-12)
    assert s.cold_start_ms == pytest.approx(28300.0, rel=1e-12)


def test_a_given_bandwidth_is_used_and_floored_at_a_thousandth(
    cloud_profile: ServingTrackProfile,
) -> None:
    s = cold_start_latency(cloud_profile, precision_bytes=2, storage_bandwidth_gbs=100.0,
                           interconnect_bandwidth_gbs=-4.0, deserialize_gbs=1e-9)
    assert s.storage_bandwidth_gbs == 100.0
    assert s.interconnect_bandwidth_gbs == 0.001
    assert s.effective_bandwidth_gbs == 0.001
    assert s.read_ms == pytest.approx(140 / 0.001 * 1000, rel=1e-12)
    assert s.deserialize_ms == pytest.approx(140 / 0.001 * 1000, rel=1e-12)


def test_zero_runtime_init_and_warmup_are_honoured(cloud_profile: ServingTrackProfile) -> None:
    s = cold_start_latency(cloud_profile, precision_bytes=2, runtime_init_ms=0, warmup_ms=0.0)
    assert (s.runtime_init_ms, s.warmup_ms) == (0.0, 0.0)
    assert s.cold_start_ms == pytest.approx(27000.0, rel=1e-12)
    default = cold_start_latency(cloud_profile, precision_bytes=2)
    assert (default.runtime_init_ms, default.warmup_ms) == (800.0, 500.0)


@pytest.mark.parametrize(("warm", "scale_out", "protected"), [
    (0, 1, 0.0), (2, 4, 0.5), (5, 4, 1.0), (-3, 4, 0.0), (1, 0, 1.0), (1, -2, 1.0),
])
def test_protected_fraction_is_the_warm_pool_share_of_the_scale_out_clamped(
    cloud_profile: ServingTrackProfile, warm: int, scale_out: int, protected: float
) -> None:
    s = cold_start_latency(cloud_profile, precision_bytes=2, warm_pool_replicas=warm,
                           scale_out_replicas=scale_out)
    assert s.protected_fraction == protected
    assert s.exposed_first_request_ms == pytest.approx(25 + 28300 * (1 - protected), rel=1e-12)


def test_a_fully_protected_start_exposes_the_service_time_and_meets_the_slo(
    cloud_profile: ServingTrackProfile,
) -> None:
    s = cold_start_latency(cloud_profile, precision_bytes=2, warm_pool_replicas=4,
                           scale_out_replicas=4)
    assert s.exposed_first_request_ms == 25.0
    assert s.exceeds_slo is False


def test_zero_precision_loads_no_weights(cloud_profile: ServingTrackProfile) -> None:
    s = cold_start_latency(cloud_profile, precision_bytes=0)
    assert (s.model_weight_gb, s.read_ms, s.deserialize_ms) == (0.0, 0.0, 0.0)
    assert s.cold_start_ms == 1300.0
