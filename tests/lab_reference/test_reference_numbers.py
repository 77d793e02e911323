"""Every number of lab-spec sections 2 and 3, reproduced by the reference.

Where the spec prints a rounded figure, the test checks it to the printed decimals and also
pins the exact value with a closed form written out here (never by calling the reference
again).  The tracks are built by hand from the spec's table, as MLSysIM-shaped
``SimpleNamespace`` objects holding pint quantities.
"""

from __future__ import annotations

import dataclasses
import math
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pint
import pytest

import reference
from reference import (
    ServingTrackProfile,
    batching_tax,
    cache_capacity,
    cold_start_latency,
    quantity_to_float,
    queueing_latency,
    serve,
    serving_track_profile,
)
from reference.units import ureg

EXACT = 1e-12
"""Relative tolerance for closed forms: a handful of rounding steps, far below 1e-9."""

GIB = 2**30 / 1e9
MIB = 2**20 / 1e9


def assert_printed(value: float, printed: str, exact: float) -> None:
    """``value`` rounds to the spec's ``printed`` figure and equals the closed form ``exact``."""
    half_unit = float(Decimal(5).scaleb(Decimal(printed).as_tuple().exponent - 1))
    assert abs(exact - float(printed)) <= half_unit, "the closed form disagrees with the spec"
    assert value == pytest.approx(float(printed), rel=0, abs=half_unit)
    assert value == pytest.approx(exact, rel=EXACT, abs=0)


def test_assert_printed_uses_half_a_unit_of_the_last_printed_digit() -> None:
    assert_printed(132.8694, "132.869", 132.8694)
    assert_printed(5.8594e-05, "5.859e-05", 5.8594e-05)
    with pytest.raises(AssertionError):
        assert_printed(132.8696, "132.869", 132.8696)
    with pytest.raises(AssertionError):
        assert_printed(5.8596e-05, "5.859e-05", 5.8596e-05)
    with pytest.raises(AssertionError):
        assert_printed(132.8694, "132.869", 132.8693)


# --- section 2: serve --------------------------------------------------------------------


def test_unbatched_serve_takes_5632_ms_in_256_passes() -> None:
    result = serve(256, 1)
    assert result.passes == 256
    assert result.total_ms == pytest.approx(5632.0, rel=EXACT)
    assert_printed(result.throughput_rps, "45.45", 256 / 5.632)


def test_batched_serve_takes_672_ms_in_8_passes() -> None:
    result = serve(256, 32)
    assert result.passes == 8
    assert result.total_ms == pytest.approx(672.0, rel=EXACT)
    assert_printed(result.throughput_rps, "380.95", 256 / 0.672)


def test_serve_returns_a_named_tuple_in_spec_order() -> None:
    result = serve(256, 32)
    assert isinstance(result, tuple)
    assert result._fields == ("total_ms", "throughput_rps", "passes")
    assert tuple(result) == (result.total_ms, result.throughput_rps, result.passes)


def test_batching_the_lab_workload_gains_8_38_times_and_passes_the_lab_mark() -> None:
    gain = serve(256, 32).throughput_rps / serve(256, 1).throughput_rps
    assert_printed(gain, "8.38", 5632 / 672)
    assert gain > 2.0


def test_serve_sums_the_cost_of_every_pass_including_a_partial_last_one() -> None:
    result = serve(10, 4, overhead_ms=3.0, marginal_ms=0.5)
    assert result.passes == 3
    assert result.total_ms == pytest.approx((3 + 4 * 0.5) * 2 + (3 + 2 * 0.5), rel=EXACT)
    assert result.throughput_rps == pytest.approx(10 / (14.0 / 1000), rel=EXACT)


# --- section 2: queueing, batching, cache and cold start reference cases --------------------


def test_queueing_reference_case_is_80_percent_busy_with_a_114_ms_p99() -> None:
    result = queueing_latency(arrival_qps=160, service_ms=5, replicas=1, service_cv=1, slo_ms=50)
    # M/M/1: P(wait) = rho = 0.8, wait rate = mu - lambda = 200 - 160 = 40 /s.
    assert_printed(result.utilization, "0.80", 0.8)
    assert_printed(result.mean_latency_ms, "25.0", 5 + 0.8 / 40 * 1000)
    assert_printed(result.p99_latency_ms, "114.5507", 5 + math.log(0.8 / 0.01) / 40 * 1000)
    assert result.slo_ok is False
    assert result.stable is True
    assert result.queue_wait_probability == pytest.approx(0.8, rel=EXACT)
    assert result.p50_latency_ms == pytest.approx(5 + math.log(0.8 / 0.5) / 40 * 1000, rel=EXACT)
    assert result.p95_latency_ms == pytest.approx(5 + math.log(0.8 / 0.05) / 40 * 1000, rel=EXACT)
    assert result.p999_latency_ms == pytest.approx(
        5 + math.log(0.8 / 0.001) / 40 * 1000, rel=EXACT
    )
    assert result.queue_amplifier == pytest.approx(result.p99_latency_ms / 5, rel=EXACT)
    assert (result.arrival_qps, result.service_ms, result.replicas, result.slo_ms) == (
        160.0,
        5.0,
        1,
        50.0,
    )


def test_batching_reference_case_forms_for_31_ms_and_totals_32_69_ms() -> None:
    result = batching_tax(
        batch_size=32, arrival_qps=500, service_ms=5, slo_ms=50, efficiency_gain=6.4
    )
    batched = 5 * (1 + 0.08 * 5) / 6.4  # log2(32) = 5
    lam = 500 / 32
    rho = lam * batched / 1000
    queue_p99 = math.log(rho / 0.01) / (1000 / batched - lam) * 1000  # M/M/1, P = rho
    assert_printed(result.formation_delay_ms, "31.0", 31 / (2 * 500) * 1000)
    assert_printed(result.formation_slo_pct, "62.0", 31.0 / 50 * 100)
    assert_printed(result.throughput_gain, "146.29", 32 * 5 / batched)
    assert_printed(result.total_p99_ms, "32.690", 31.0 + batched + queue_p99)
    assert result.batched_service_ms == pytest.approx(1.09375, rel=EXACT)
    assert result.queue_p99_ms == pytest.approx(queue_p99, rel=EXACT)
    assert result.effective_batch_qps == pytest.approx(15.625, rel=EXACT)
    assert result.utilization == pytest.approx(rho, rel=EXACT)
    assert result.batch_size == 32
    assert result.arrival_qps == 500.0
    assert result.slo_ok is True


def test_cache_reference_case_fits_one_131072_token_llama_request(
    cloud_profile: ServingTrackProfile, llama_model: SimpleNamespace
) -> None:
    result = cache_capacity(
        cloud_profile, llama_model, context_tokens=131072, precision_bytes=2,
        devices_per_replica=8,
    )
    state = 2 * 80 * 8192 * 131072 * 2 / 1e9
    assert_printed(result.weight_gb, "140.0", 70e9 * 2 / 1e9)
    assert_printed(result.state_per_request_gb, "343.597", state)
    assert result.total_memory_gb == pytest.approx(8 * 80 * GIB, rel=EXACT)
    assert result.available_gb == pytest.approx(8 * 80 * GIB - 140, rel=EXACT)
    assert result.max_concurrent == 1
    assert result.oom is False
    assert result.state_kind == "KV cache"
    assert result.context_tokens == 131072


def test_cold_start_reference_case_takes_28300_ms_and_exceeds_the_slo(
    cloud_profile: ServingTrackProfile,
) -> None:
    result = cold_start_latency(cloud_profile, precision_bytes=2, scale_out_replicas=4)
    cold = 140 / 7.0 * 1000 + 140 / 20 * 1000 + 800 + 500
    assert_printed(result.model_weight_gb, "140", 140.0)
    assert_printed(result.cold_start_ms, "28300", cold)
    assert result.read_ms == pytest.approx(20000.0, rel=EXACT)
    assert result.deserialize_ms == pytest.approx(7000.0, rel=EXACT)
    assert result.effective_bandwidth_gbs == 7.0
    assert result.protected_fraction == 0.0
    assert result.exposed_first_request_ms == pytest.approx(25 + cold, rel=EXACT)
    assert result.exceeds_slo is True


def test_cold_start_with_the_tracks_warm_pool_exposes_14175_ms(
    cloud_profile: ServingTrackProfile,
) -> None:
    result = cold_start_latency(
        cloud_profile, precision_bytes=2, warm_pool_replicas=2, scale_out_replicas=4
    )
    assert result.protected_fraction == 0.5
    assert_printed(result.exposed_first_request_ms, "14175", 25 + 28300 * (1 - 2 / 4))
    assert result.exceeds_slo is True


# --- section 3: the four tracks as MLSysIM-shaped objects -----------------------------------


def _q(text: str) -> pint.Quantity:  # type: ignore[type-arg]
    return ureg.Quantity(text)


def _link(bandwidth: str) -> SimpleNamespace:
    return SimpleNamespace(bandwidth=_q(bandwidth))


VALIDATION_TESTS = {
    "iphone": (
        "interactive p99 replay",
        "background-load burst",
        "thermal soak",
        "battery regression",
    ),
    "oura_ring": (
        "24-hour duty-cycle replay",
        "sensor-window cadence",
        "SRAM/flash audit",
        "battery regression",
    ),
    "robotaxi": (
        "sensor burst replay",
        "p99/p999 deadline test",
        "rare-event replay",
        "power envelope",
    ),
    "cloud_fleet": (
        "load test",
        "p99 SLA canary",
        "KV cache memory audit",
        "warm-pool scale-out drill",
    ),
}

TRACK_IDS = ("iphone", "oura_ring", "robotaxi", "cloud_fleet")


def _variant(**fields: Any) -> dict[str, Any]:
    return fields


def _defaults(**values: Any) -> dict[str, Any]:
    return values


def track_inputs(track_id: str) -> tuple[SimpleNamespace, ...]:
    """(profile, variant, hardware, model) for ``track_id``, as MLSysIM shapes them."""
    if track_id == "iphone":
        hardware = SimpleNamespace(
            name="iPhone 15 Pro (A17 Pro)",
            memory=SimpleNamespace(capacity=_q("8 GiB"), bandwidth=_q("51.2 GB/s")),
            storage=None,
            interconnect=None,
            tdp=_q("5 W"),
            battery_capacity=_q("15 Wh"),
        )
        model = SimpleNamespace(
            name="MobileNetV2", parameters=_q("3504872 param"), layers=54, hidden_dim=None
        )
        variant = _variant(
            hardware_ref="Hardware.Mobile.iPhone15Pro",
            model_ref="Models.Vision.MobileNetV2",
            primary_metric="p99 app latency",
            guardrail_metric="responsiveness and battery headroom",
            serving_policy="local interactive path with bounded fallback",
            defaults=_defaults(
                arrival_qps=8, service_ms=30, replicas=1, slo_ms=100, service_cv=0.8,
                batch_size=2, batch_efficiency_gain=1.4, context_tokens=2048,
                state_kind="activation/cache buffers", state_mb_per_request=64,
                precision_bytes=2, kv_precision_bytes=2, devices_per_replica=1,
                deserialize_gbs=20, runtime_init_ms=300, warmup_ms=100,
                warm_pool_replicas=0, scale_out_replicas=1,
            ),
        )
        label = "iPhone"
    elif track_id == "oura_ring":
        hardware = SimpleNamespace(
            name="Oura Ring 4 (wearable reference profile)",
            memory=SimpleNamespace(capacity=_q("2 MiB"), bandwidth=_q("0.08 GB/s")),
            tdp=_q("0.02 W"),
            battery_capacity=_q("0.06 Wh"),
        )
        model = SimpleNamespace(
            name="DS-CNN (KWS)", parameters=_q("200000 param"), layers=None, hidden_dim=None
        )
        variant = _variant(
            hardware_ref="Hardware.Tiny.OuraRing",
            model_ref="Models.Tiny.DS_CNN",
            primary_metric="duty-cycle p99 latency",
            guardrail_metric="battery life and sampling cadence",
            serving_policy="ring-local duty-cycle inference",
            defaults=_defaults(
                arrival_qps=0.02, service_ms=80, replicas=1, slo_ms=300, service_cv=0.6,
                batch_size=1, batch_efficiency_gain=1.0, context_tokens=256,
                state_kind="sensor window buffers", state_mb_per_request=0.06,
                precision_bytes=1, kv_precision_bytes=1, devices_per_replica=1,
                deserialize_gbs=0.04, runtime_init_ms=50, warmup_ms=20,
                warm_pool_replicas=1, scale_out_replicas=1,
            ),
        )
        label = "Oura Ring"
    elif track_id == "robotaxi":
        hardware = SimpleNamespace(
            name="RoboTaxi Reference Compute (NVIDIA DRIVE AGX Orin class)",
            memory=SimpleNamespace(capacity=_q("32 GiB"), bandwidth=_q("200 GB/s")),
            storage=_link("1.0 GB/s"),
            interconnect=_link("30 Gbps"),
            tdp=_q("60 W"),
            battery_capacity=None,
        )
        model = SimpleNamespace(
            name="YOLOv8-Nano", parameters=_q("3200000 param"), layers=225, hidden_dim=None
        )
        variant = _variant(
            hardware_ref="Hardware.Edge.RoboTaxi",
            model_ref="Models.Vision.YOLOv8_Nano",
            primary_metric="p99/p999 perception latency",
            guardrail_metric="safety margin and rare-event recall",
            serving_policy="vehicle-local deadline scheduler",
            defaults=_defaults(
                arrival_qps=30, service_ms=20, replicas=1, slo_ms=50, service_cv=1.2,
                batch_size=1, batch_efficiency_gain=1.0, context_tokens=4096,
                state_kind="sensor-frame state buffers", state_mb_per_request=768,
                precision_bytes=1, kv_precision_bytes=1, devices_per_replica=1,
                deserialize_gbs=8, runtime_init_ms=800, warmup_ms=200,
                warm_pool_replicas=1, scale_out_replicas=1,
            ),
        )
        label = "RoboTaxi"
    elif track_id == "cloud_fleet":
        hardware = SimpleNamespace(
            name="NVIDIA H100",
            memory=SimpleNamespace(capacity=_q("80 GiB"), bandwidth=_q("3.35 TB/s")),
            storage=_link("7.0 GB/s"),
            interconnect=_link("64 GB/s"),
            tdp=_q("700 W"),
            battery_capacity=None,
        )
        model = SimpleNamespace(
            name="Llama-2-70B", parameters=_q("7e10 param"), layers=80, hidden_dim=8192
        )
        variant = _variant(
            hardware_ref="Hardware.Cloud.H100",
            model_ref="Models.Language.Llama2_70B",
            primary_metric="SLA-compliant p99 latency",
            guardrail_metric="cost/request and quality",
            serving_policy="continuous-batched GPU fleet with warm pool",
            defaults=_defaults(
                arrival_qps=500, service_ms=25, replicas=8, slo_ms=200, service_cv=1.0,
                batch_size=32, batch_efficiency_gain=6.4, context_tokens=131072,
                state_kind="KV cache", precision_bytes=2, kv_precision_bytes=2,
                devices_per_replica=8, deserialize_gbs=20, runtime_init_ms=800,
                warmup_ms=500, warm_pool_replicas=2, scale_out_replicas=4,
            ),
        )
        label = "Cloud Fleet"
    else:
        raise KeyError(track_id)
    variant["defaults"]["validation_tests"] = list(VALIDATION_TESTS[track_id])
    policy = variant.pop("serving_policy")
    return (
        SimpleNamespace(track_id=track_id, label=label),
        SimpleNamespace(assumptions={"serving_policy": policy}, **variant),
        hardware,
        model,
    )


def _expected(track_id: str, **fields: Any) -> ServingTrackProfile:
    _, variant, hardware, model = track_inputs(track_id)
    return ServingTrackProfile(
        track_id=track_id,
        hardware_ref=variant.hardware_ref,
        model_ref=variant.model_ref,
        hardware_name=hardware.name,
        model_name=model.name,
        validation_tests=VALIDATION_TESTS[track_id],
        serving_policy=variant.assumptions["serving_policy"],
        primary_metric=variant.primary_metric,
        guardrail_metric=variant.guardrail_metric,
        source_refs=(variant.hardware_ref, variant.model_ref),
        **fields,
    )


#: The profile each track must flatten to, with every number written in decimal units.
EXPECTED_PROFILES = {
    "iphone": _expected(
        "iphone", label="iPhone", model_params_b=0.003504872, memory_capacity_gb=8 * GIB,
        memory_bandwidth_gbs=51.2, storage_bandwidth_gbs=51.2, interconnect_bandwidth_gbs=51.2,
        tdp_w=5.0, battery_wh=15.0, arrival_qps=8.0, service_ms=30.0, replicas=1,
        slo_ms=100.0, service_cv=0.8, batch_size=2, batch_efficiency_gain=1.4,
        context_tokens=2048, state_kind="activation/cache buffers", state_mb_per_request=64.0,
        precision_bytes=2.0, kv_precision_bytes=2.0, default_devices_per_replica=1,
        deserialize_gbs=20.0, runtime_init_ms=300.0, warmup_ms=100.0, warm_pool_replicas=0,
        scale_out_replicas=1,
    ),
    "oura_ring": _expected(
        "oura_ring", label="Oura Ring", model_params_b=0.0002, memory_capacity_gb=2 * MIB,
        memory_bandwidth_gbs=0.08, storage_bandwidth_gbs=0.08, interconnect_bandwidth_gbs=0.08,
        tdp_w=0.02, battery_wh=0.06, arrival_qps=0.02, service_ms=80.0, replicas=1,
        slo_ms=300.0, service_cv=0.6, batch_size=1, batch_efficiency_gain=1.0,
        context_tokens=256, state_kind="sensor window buffers", state_mb_per_request=0.06,
        precision_bytes=1.0, kv_precision_bytes=1.0, default_devices_per_replica=1,
        deserialize_gbs=0.04, runtime_init_ms=50.0, warmup_ms=20.0, warm_pool_replicas=1,
        scale_out_replicas=1,
    ),
    "robotaxi": _expected(
        "robotaxi", label="RoboTaxi", model_params_b=0.0032, memory_capacity_gb=32 * GIB,
        memory_bandwidth_gbs=200.0, storage_bandwidth_gbs=1.0, interconnect_bandwidth_gbs=3.75,
        tdp_w=60.0, battery_wh=None, arrival_qps=30.0, service_ms=20.0, replicas=1,
        slo_ms=50.0, service_cv=1.2, batch_size=1, batch_efficiency_gain=1.0,
        context_tokens=4096, state_kind="sensor-frame state buffers", state_mb_per_request=768.0,
        precision_bytes=1.0, kv_precision_bytes=1.0, default_devices_per_replica=1,
        deserialize_gbs=8.0, runtime_init_ms=800.0, warmup_ms=200.0, warm_pool_replicas=1,
        scale_out_replicas=1,
    ),
    "cloud_fleet": _expected(
        "cloud_fleet", label="Cloud Fleet", model_params_b=70.0, memory_capacity_gb=80 * GIB,
        memory_bandwidth_gbs=3350.0, storage_bandwidth_gbs=7.0, interconnect_bandwidth_gbs=64.0,
        tdp_w=700.0, battery_wh=None, arrival_qps=500.0, service_ms=25.0, replicas=8,
        slo_ms=200.0, service_cv=1.0, batch_size=32, batch_efficiency_gain=6.4,
        context_tokens=131072, state_kind="KV cache", state_mb_per_request=None,
        precision_bytes=2.0, kv_precision_bytes=2.0, default_devices_per_replica=8,
        deserialize_gbs=20.0, runtime_init_ms=800.0, warmup_ms=500.0, warm_pool_replicas=2,
        scale_out_replicas=4,
    ),
}


def assert_same_profile(got: ServingTrackProfile, expected: ServingTrackProfile) -> None:
    """Field by field: floats to 1e-12 relative, everything else exactly and of the same type."""
    for field in dataclasses.fields(ServingTrackProfile):
        value, want = getattr(got, field.name), getattr(expected, field.name)
        assert type(value) is type(want), (field.name, value, want)
        if isinstance(want, float):
            assert value == pytest.approx(want, rel=EXACT, abs=0), field.name
        else:
            assert value == want, field.name


def test_the_cloud_fleet_fixture_matches_the_tables_cloud_fleet_column(
    cloud_profile: ServingTrackProfile,
) -> None:
    assert_same_profile(cloud_profile, EXPECTED_PROFILES["cloud_fleet"])


@pytest.mark.parametrize("track_id", TRACK_IDS)
def test_serving_track_profile_flattens_each_book_track_to_plain_units(track_id: str) -> None:
    got = serving_track_profile(*track_inputs(track_id))
    assert_same_profile(got, EXPECTED_PROFILES[track_id])


def test_iphone_without_storage_or_interconnect_falls_back_to_memory_bandwidth() -> None:
    got = serving_track_profile(*track_inputs("iphone"))
    assert got.storage_bandwidth_gbs == pytest.approx(51.2, rel=EXACT)
    assert got.interconnect_bandwidth_gbs == pytest.approx(51.2, rel=EXACT)


def test_absent_storage_and_interconnect_attributes_fall_back_like_none_ones() -> None:
    profile, variant, hardware, model = track_inputs("iphone")
    del hardware.storage, hardware.interconnect
    got = serving_track_profile(profile, variant, hardware, model)
    assert got.storage_bandwidth_gbs == pytest.approx(51.2, rel=EXACT)
    assert got.interconnect_bandwidth_gbs == pytest.approx(51.2, rel=EXACT)


def test_a_link_without_a_bandwidth_falls_back_to_memory_bandwidth() -> None:
    profile, variant, hardware, model = track_inputs("robotaxi")
    hardware.storage = SimpleNamespace(bandwidth=None)
    hardware.interconnect = SimpleNamespace()
    got = serving_track_profile(profile, variant, hardware, model)
    assert got.storage_bandwidth_gbs == pytest.approx(200.0, rel=EXACT)
    assert got.interconnect_bandwidth_gbs == pytest.approx(200.0, rel=EXACT)


def test_missing_memory_bandwidth_is_0_but_links_then_fall_back_to_1_gbs() -> None:
    profile, variant, hardware, model = track_inputs("iphone")
    hardware.memory = SimpleNamespace(capacity=_q("8 GiB"))
    got = serving_track_profile(profile, variant, hardware, model)
    assert got.memory_bandwidth_gbs == 0.0
    assert got.storage_bandwidth_gbs == 1.0
    assert got.interconnect_bandwidth_gbs == 1.0


def test_robotaxi_interconnect_of_30_gbps_is_3_75_gb_per_s() -> None:
    got = serving_track_profile(*track_inputs("robotaxi"))
    assert got.interconnect_bandwidth_gbs == pytest.approx(30 / 8, rel=EXACT)
    assert got.storage_bandwidth_gbs == pytest.approx(1.0, rel=EXACT)


def test_bandwidths_in_defaults_override_the_hardware() -> None:
    profile, variant, hardware, model = track_inputs("cloud_fleet")
    variant.defaults["storage_bandwidth_gbs"] = 2.5
    variant.defaults["interconnect_bandwidth_gbs"] = _q("100 Gbps")
    got = serving_track_profile(profile, variant, hardware, model)
    assert got.storage_bandwidth_gbs == 2.5
    assert got.interconnect_bandwidth_gbs == pytest.approx(12.5, rel=EXACT)


@pytest.mark.parametrize(("track_id", "battery_wh"), [
    ("iphone", 15.0), ("oura_ring", 0.06), ("robotaxi", None), ("cloud_fleet", None)
])
def test_battery_is_in_watt_hours_or_none_without_a_battery(
    track_id: str, battery_wh: float | None
) -> None:
    got = serving_track_profile(*track_inputs(track_id))
    if battery_wh is None:
        assert got.battery_wh is None
    else:
        assert got.battery_wh == pytest.approx(battery_wh, rel=EXACT)


def test_hardware_without_a_battery_attribute_has_battery_none() -> None:
    profile, variant, hardware, model = track_inputs("robotaxi")
    del hardware.battery_capacity
    assert serving_track_profile(profile, variant, hardware, model).battery_wh is None


def test_empty_defaults_give_the_spec_default_for_every_lab_field() -> None:
    profile, variant, hardware, model = track_inputs("cloud_fleet")
    variant.defaults = {}
    variant.assumptions = {}
    got = serving_track_profile(profile, variant, hardware, model)
    expected = {
        "arrival_qps": 100.0, "service_ms": 20.0, "replicas": 1, "slo_ms": 100.0,
        "service_cv": 1.0, "batch_size": 1, "batch_efficiency_gain": 1.0,
        "context_tokens": 4096, "state_kind": "state/cache", "state_mb_per_request": None,
        "precision_bytes": 2.0, "kv_precision_bytes": 2.0, "default_devices_per_replica": 1,
        "deserialize_gbs": 20.0, "runtime_init_ms": 800.0, "warmup_ms": 500.0,
        "warm_pool_replicas": 0, "scale_out_replicas": 1, "validation_tests": (),
        "serving_policy": "track-specific serving policy",
    }
    assert {name: getattr(got, name) for name in expected} == expected
    for name, value in expected.items():
        assert type(getattr(got, name)) is type(value), name
    # The hardware still supplies the links once defaults no longer name them.
    assert got.storage_bandwidth_gbs == pytest.approx(7.0, rel=EXACT)
    assert got.interconnect_bandwidth_gbs == pytest.approx(64.0, rel=EXACT)


def test_defaults_and_assumptions_of_none_count_as_empty() -> None:
    profile, variant, hardware, model = track_inputs("oura_ring")
    variant.defaults = None
    variant.assumptions = None
    got = serving_track_profile(profile, variant, hardware, model)
    assert got.arrival_qps == 100.0
    assert got.serving_policy == "track-specific serving policy"


def test_serving_policy_defaults_when_assumptions_lack_the_key() -> None:
    profile, variant, hardware, model = track_inputs("robotaxi")
    variant.assumptions = {"something_else": "x"}
    got = serving_track_profile(profile, variant, hardware, model)
    assert got.serving_policy == "track-specific serving policy"


def test_validation_tests_become_a_tuple_of_strings() -> None:
    got = serving_track_profile(*track_inputs("oura_ring"))
    assert got.validation_tests == VALIDATION_TESTS["oura_ring"]
    assert isinstance(got.validation_tests, tuple)


@pytest.mark.parametrize("missing", ["absent", "none", "empty"])
def test_hardware_and_model_names_fall_back_to_their_refs(missing: str) -> None:
    profile, variant, hardware, model = track_inputs("iphone")
    for obj in (hardware, model):
        if missing == "absent":
            del obj.name
        else:
            obj.name = None if missing == "none" else ""
    got = serving_track_profile(profile, variant, hardware, model)
    assert got.hardware_name == "Hardware.Mobile.iPhone15Pro"
    assert got.model_name == "Models.Vision.MobileNetV2"
    assert got.source_refs == ("Hardware.Mobile.iPhone15Pro", "Models.Vision.MobileNetV2")


def test_missing_hardware_and_model_quantities_default_to_0() -> None:
    profile, variant, _, _ = track_inputs("iphone")
    got = serving_track_profile(profile, variant, SimpleNamespace(), SimpleNamespace())
    assert (got.model_params_b, got.memory_capacity_gb, got.memory_bandwidth_gbs, got.tdp_w) == (
        0.0,
        0.0,
        0.0,
        0.0,
    )
    assert got.battery_wh is None


# --- section 3: outputs at each track's defaults --------------------------------------------


def test_iphone_outputs_at_defaults() -> None:
    p = EXPECTED_PROFILES["iphone"]
    _, _, _, model = track_inputs("iphone")
    # Queueing: M/M/1 with v = (1 + 0.8^2) / 2 = 0.82, P = rho = 0.24, r = 1000/30 - 8.
    q = queueing_latency(arrival_qps=8, service_ms=30, replicas=1, service_cv=0.8, slo_ms=100)
    assert_printed(q.utilization, "0.24", 8 * 30 / 1000)
    assert_printed(q.p99_latency_ms, "132.869", 30 + 0.82 * math.log(0.24 / 0.01)
                   / (1000 / 30 - 8) * 1000)
    assert q.slo_ok is False
    # Batching: B = 2 at 8 qps forms in 62.5 ms; the batched queue is M/M/1 at 4 qps.
    b = batching_tax(batch_size=2, arrival_qps=8, service_ms=30, slo_ms=100,
                     efficiency_gain=1.4, replicas=1, service_cv=0.8)
    batched = 30 * 1.08 / 1.4
    rho = 4 * batched / 1000
    assert_printed(b.total_p99_ms, "132.183", 62.5 + batched + 0.82 * math.log(rho / 0.01)
                   / (1000 / batched - 4) * 1000)
    # Cache: MobileNetV2 is not a transformer, so the state is 64 MB / 1024.
    c = cache_capacity(p, model, context_tokens=2048, precision_bytes=2, devices_per_replica=1)
    assert_printed(c.state_per_request_gb, "0.0625", 64 / 1024)
    assert c.max_concurrent == math.floor((8 * GIB - 3504872 * 2 / 1e9) / (64 / 1024)) == 137
    # Cold start: no storage or interconnect, so both read at memory bandwidth 51.2 GB/s.
    s = cold_start_latency(p, precision_bytes=2, warm_pool_replicas=0, scale_out_replicas=1)
    weight = 3504872 * 2 / 1e9
    cold = weight / 51.2 * 1000 + weight / 20 * 1000 + 300 + 100
    assert_printed(s.cold_start_ms, "400.487", cold)
    assert_printed(s.exposed_first_request_ms, "430.487", 30 + cold)
    assert s.exceeds_slo is True


def test_oura_ring_outputs_at_defaults() -> None:
    p = EXPECTED_PROFILES["oura_ring"]
    _, _, _, model = track_inputs("oura_ring")
    # P = rho = 0.0016 < 1%, so every tail up to p99 is the bare service time.
    q = queueing_latency(arrival_qps=0.02, service_ms=80, replicas=1, service_cv=0.6, slo_ms=300)
    assert_printed(q.utilization, "0.0016", 0.02 * 80 / 1000)
    assert_printed(q.p99_latency_ms, "80.000", 80.0)
    assert q.slo_ok is True
    b = batching_tax(batch_size=1, arrival_qps=0.02, service_ms=80, slo_ms=300,
                     efficiency_gain=1.0, replicas=1, service_cv=0.6)
    assert_printed(b.total_p99_ms, "80.000", 0 + 80 * (1 + 0.08 * 0) / 1.0 + 0)
    c = cache_capacity(p, model, context_tokens=256, precision_bytes=1, devices_per_replica=1)
    assert_printed(c.state_per_request_gb, "5.859e-05", 0.06 / 1024)
    assert c.max_concurrent == math.floor((2 * MIB - 200000 / 1e9) / (0.06 / 1024)) == 32
    # Links fall back to memory bandwidth 0.08 GB/s; a warm pool of 1 covers the scale-out.
    s = cold_start_latency(p, precision_bytes=1, warm_pool_replicas=1, scale_out_replicas=1)
    cold = 2e-4 / 0.08 * 1000 + 2e-4 / 0.04 * 1000 + 50 + 20
    assert_printed(s.cold_start_ms, "77.5", cold)
    assert_printed(s.exposed_first_request_ms, "80.0", 80 + cold * 0)
    assert s.exceeds_slo is False


def test_robotaxi_outputs_at_defaults() -> None:
    p = EXPECTED_PROFILES["robotaxi"]
    _, _, _, model = track_inputs("robotaxi")
    # M/M/1 at rho = 0.6 with v = (1 + 1.2^2) / 2 = 1.22 and r = 50 - 30 = 20 /s.
    q = queueing_latency(arrival_qps=30, service_ms=20, replicas=1, service_cv=1.2, slo_ms=50)
    p99 = 20 + 1.22 * math.log(0.6 / 0.01) / 20 * 1000
    assert_printed(q.utilization, "0.60", 0.6)
    assert_printed(q.p99_latency_ms, "269.755", p99)
    assert q.slo_ok is False
    b = batching_tax(batch_size=1, arrival_qps=30, service_ms=20, slo_ms=50,
                     efficiency_gain=1.0, replicas=1, service_cv=1.2)
    assert_printed(b.total_p99_ms, "269.755", p99)
    c = cache_capacity(p, model, context_tokens=4096, precision_bytes=1, devices_per_replica=1)
    assert_printed(c.state_per_request_gb, "0.75", 768 / 1024)
    assert c.max_concurrent == math.floor((32 * GIB - 0.0032) / 0.75) == 45
    # Storage 1.0 GB/s is slower than the 3.75 GB/s interconnect.
    s = cold_start_latency(p, precision_bytes=1, warm_pool_replicas=1, scale_out_replicas=1)
    assert s.effective_bandwidth_gbs == 1.0
    assert_printed(s.cold_start_ms, "1003.6", 0.0032 / 1.0 * 1000 + 0.0032 / 8 * 1000 + 800 + 200)
    assert_printed(s.exposed_first_request_ms, "20.0", 20.0)
    assert s.exceeds_slo is False


def test_cloud_fleet_outputs_at_defaults_fall_into_the_tail_latency_trap(
    llama_model: SimpleNamespace,
) -> None:
    p = EXPECTED_PROFILES["cloud_fleet"]
    q = queueing_latency(arrival_qps=500, service_ms=25, replicas=8, service_cv=1.0, slo_ms=200)
    assert_printed(q.utilization, "1.5625", 500 * 25 / (8 * 1000))
    assert q.stable is False
    assert q.p99_latency_ms == math.inf
    assert q.slo_ok is False
    # Batched: 15.625 qps on 8 replicas of 5.46875 ms; the offered load a = 0.085 makes
    # P(wait) <= a^8 / 8! / (1 - a/8) ~ 7e-14 < 1 %, so the p99 is the bare batched service.
    b = batching_tax(batch_size=32, arrival_qps=500, service_ms=25, slo_ms=200,
                     efficiency_gain=6.4, replicas=8, service_cv=1.0)
    assert_printed(b.total_p99_ms, "36.469", 31.0 + 25 * 1.4 / 6.4)
    assert b.queue_p99_ms == 0.0
    c = cache_capacity(p, llama_model, context_tokens=131072, precision_bytes=2,
                       devices_per_replica=8)
    assert_printed(c.state_per_request_gb, "343.597", 2 * 80 * 8192 * 131072 * 2 / 1e9)
    assert c.max_concurrent == 1
    s = cold_start_latency(p, precision_bytes=2, warm_pool_replicas=2, scale_out_replicas=4)
    cold = 140 / 7 * 1000 + 140 / 20 * 1000 + 800 + 500
    assert_printed(s.cold_start_ms, "28300", cold)
    assert_printed(s.exposed_first_request_ms, "14175", 25 + cold / 2)
    assert s.exceeds_slo is True


@pytest.mark.parametrize("track_id", TRACK_IDS)
def test_outputs_from_the_flattened_profile_equal_those_from_the_hand_built_one(
    track_id: str,
) -> None:
    flat = serving_track_profile(*track_inputs(track_id))
    hand = EXPECTED_PROFILES[track_id]
    _, _, _, model = track_inputs(track_id)

    def outputs(p: ServingTrackProfile) -> list[float]:
        c = cache_capacity(p, model, context_tokens=p.context_tokens,
                           precision_bytes=p.precision_bytes,
                           devices_per_replica=p.default_devices_per_replica)
        s = cold_start_latency(p, precision_bytes=p.precision_bytes,
                               warm_pool_replicas=p.warm_pool_replicas,
                               scale_out_replicas=p.scale_out_replicas)
        return [c.state_per_request_gb, c.max_concurrent, s.cold_start_ms,
                s.exposed_first_request_ms]

    assert outputs(flat) == pytest.approx(outputs(hand), rel=EXACT)


# --- quantity_to_float: the four branches -------------------------------------------------


class _ToOnly:
    """Has ``to`` (returning something with ``magnitude``) but no ``m_as``."""

    def __init__(self, magnitude: float, fail: bool = False) -> None:
        self.magnitude = magnitude
        self.fail = fail
        self.asked: list[str] = []

    def to(self, unit: str) -> _ToOnly:
        self.asked.append(unit)
        if self.fail:
            raise RuntimeError("cannot convert")
        return _ToOnly(self.magnitude * 1000)


class _MAsFails:
    def m_as(self, unit: str) -> float:
        raise RuntimeError("no")

    def to(self, unit: str) -> Any:  # never reached: m_as wins
        raise AssertionError("quantity_to_float used `to` although `m_as` exists")


def test_quantity_to_float_gives_the_default_for_none() -> None:
    assert quantity_to_float(None, "GB", 7.5) == 7.5


def test_quantity_to_float_converts_a_pint_quantity_with_m_as() -> None:
    value = quantity_to_float(ureg.Quantity(80, "GiB"), "GB", 0.0)
    assert value == pytest.approx(85.89934592, rel=EXACT)
    assert type(value) is float


def test_quantity_to_float_gives_the_default_when_m_as_raises() -> None:
    assert quantity_to_float(ureg.Quantity(5, "W"), "GB", -1.0) == -1.0
    assert quantity_to_float(_MAsFails(), "GB", 3.0) == 3.0


def test_quantity_to_float_uses_to_and_magnitude_without_m_as() -> None:
    obj = _ToOnly(2.5)
    value = quantity_to_float(obj, "MB", 0.0)
    assert value == 2500.0
    assert type(value) is float
    assert obj.asked == ["MB"]


def test_quantity_to_float_gives_the_default_when_to_raises() -> None:
    assert quantity_to_float(_ToOnly(2.5, fail=True), "MB", 9.0) == 9.0


@pytest.mark.parametrize(("value", "expected"), [(3, 3.0), (2.5, 2.5), ("4.25", 4.25), (True, 1.0)])
def test_quantity_to_float_calls_float_on_anything_else(value: object, expected: float) -> None:
    result = quantity_to_float(value, "GB", -1.0)
    assert result == expected
    assert type(result) is float


@pytest.mark.parametrize("value", ["not a number", object(), [1.0]])
def test_quantity_to_float_gives_the_default_when_float_fails(value: object) -> None:
    assert quantity_to_float(value, "GB", 42.0) == 42.0


def test_the_reference_package_exports_the_whole_contract() -> None:
    assert set(reference.__all__) >= {
        "serve", "erlang_c", "queueing_latency", "batching_tax", "transformer_state_gb",
        "cache_capacity", "cold_start_latency", "quantity_to_float", "serving_track_profile",
    }
