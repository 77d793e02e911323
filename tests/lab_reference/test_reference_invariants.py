"""The invariants of lab-spec section 4, property-tested on the reference with Hypothesis."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reference import (
    ServingTrackProfile,
    batching_tax,
    cache_capacity,
    cold_start_latency,
    erlang_c,
    queueing_latency,
    serve,
    serving_track_profile,
)
from reference.units import ureg

PROPERTIES = settings(derandomize=True, database=None, deadline=None, max_examples=150)

LATENCY_FIELDS = ("p50_latency_ms", "p95_latency_ms", "p99_latency_ms", "p999_latency_ms")

service_times = st.floats(min_value=0.05, max_value=2000.0)
replica_counts = st.integers(min_value=1, max_value=200)
loads = st.floats(min_value=0.0, max_value=1.3)
cvs = st.floats(min_value=0.0, max_value=4.0)


def _arrival(rho: float, replicas: int, service_ms: float) -> float:
    return rho * replicas * 1000.0 / service_ms


# --- serve ---------------------------------------------------------------------------------


def test_batching_the_lab_workload_at_least_doubles_throughput() -> None:
    assert serve(256, 32).throughput_rps >= 2.0 * serve(256, 1).throughput_rps


@PROPERTIES
@given(n=st.integers(1, 5000), batch=st.integers(1, 5000))
def test_passes_are_the_ceiling_of_requests_over_batch_size(n: int, batch: int) -> None:
    assert serve(n, batch).passes == (n + batch - 1) // batch


@PROPERTIES
@given(
    n=st.integers(1, 2000),
    batches=st.lists(st.integers(1, 2000), min_size=2, max_size=2).map(sorted),
    overhead=st.floats(min_value=1e-3, max_value=500.0),
    marginal=st.floats(min_value=0.0, max_value=50.0),
)
def test_throughput_never_falls_as_the_batch_grows_while_overhead_is_positive(
    n: int, batches: list[int], overhead: float, marginal: float
) -> None:
    small, large = (serve(n, b, overhead_ms=overhead, marginal_ms=marginal) for b in batches)
    assert large.throughput_rps >= small.throughput_rps


# --- queueing --------------------------------------------------------------------------------


@PROPERTIES
@given(
    rhos=st.lists(loads, min_size=2, max_size=2).map(sorted),
    service=service_times,
    replicas=replica_counts,
    cv=cvs,
)
def test_p99_never_falls_as_arrivals_rise(
    rhos: list[float], service: float, replicas: int, cv: float
) -> None:
    low, high = (
        queueing_latency(arrival_qps=_arrival(rho, replicas, service), service_ms=service,
                         replicas=replicas, service_cv=cv)
        for rho in rhos
    )
    assert high.p99_latency_ms >= low.p99_latency_ms


@PROPERTIES
@given(rho=loads, service=service_times, replicas=replica_counts, cv=cvs)
def test_percentiles_are_ordered_and_never_below_the_service_time(
    rho: float, service: float, replicas: int, cv: float
) -> None:
    q = queueing_latency(arrival_qps=_arrival(rho, replicas, service), service_ms=service,
                         replicas=replicas, service_cv=cv)
    assert q.p50_latency_ms <= q.p95_latency_ms <= q.p99_latency_ms <= q.p999_latency_ms
    assert q.p99_latency_ms >= service
    assert q.mean_latency_ms >= service


@PROPERTIES
@given(
    arrival=st.floats(min_value=0.0, max_value=1e5),
    service=service_times,
    replicas=st.lists(replica_counts, min_size=2, max_size=2).map(sorted),
    cv=cvs,
)
def test_adding_replicas_never_raises_p99(
    arrival: float, service: float, replicas: list[int], cv: float
) -> None:
    few, many = (
        queueing_latency(arrival_qps=arrival, service_ms=service, replicas=c, service_cv=cv)
        for c in replicas
    )
    assert many.p99_latency_ms <= few.p99_latency_ms


@PROPERTIES
@given(
    arrival=st.floats(min_value=0.0, max_value=1e6), service=service_times,
    replicas=replica_counts,
)
def test_utilization_is_arrivals_over_capacity(
    arrival: float, service: float, replicas: int
) -> None:
    q = queueing_latency(arrival_qps=arrival, service_ms=service, replicas=replicas)
    assert q.utilization == pytest.approx(arrival * service / (replicas * 1000.0), rel=1e-12)


@PROPERTIES
@given(rho=loads, service=service_times, replicas=replica_counts, cv=cvs)
def test_unstable_exactly_at_full_utilization_and_then_every_latency_is_infinite(
    rho: float, service: float, replicas: int, cv: float
) -> None:
    q = queueing_latency(arrival_qps=_arrival(rho, replicas, service), service_ms=service,
                         replicas=replicas, service_cv=cv, slo_ms=1e300)
    assert q.stable == (q.utilization < 1.0)
    if rho < 1 - 1e-9:
        assert q.stable
    if rho > 1 + 1e-9:
        assert not q.stable
    latencies = [getattr(q, name) for name in ("mean_latency_ms", *LATENCY_FIELDS)]
    if q.stable:
        assert all(math.isfinite(value) for value in latencies)
        assert math.isfinite(q.queue_amplifier)
        assert q.slo_ok  # an SLO of 1e300 ms is met by any finite p99
    else:
        assert latencies == [math.inf] * 5
        assert q.queue_amplifier == math.inf
        assert q.slo_ok is False
        assert q.queue_wait_probability == 1.0


@pytest.mark.parametrize(("arrival", "service", "replicas"), [
    (200.0, 5.0, 1), (400.0, 5.0, 2), (1000.0, 8.0, 8), (8.0, 125.0, 1)
])
def test_exactly_full_utilization_is_unstable(
    arrival: float, service: float, replicas: int
) -> None:
    q = queueing_latency(arrival_qps=arrival, service_ms=service, replicas=replicas)
    assert q.utilization == 1.0
    assert q.stable is False
    assert q.p99_latency_ms == math.inf


@PROPERTIES
@given(
    rho=st.one_of(loads, st.floats(min_value=0.999, max_value=1.0)),
    service=service_times,
    replicas=st.integers(min_value=1, max_value=3000),
)
def test_wait_probability_is_between_0_and_1(rho: float, service: float, replicas: int) -> None:
    arrival = _arrival(rho, replicas, service)
    rate, prob = erlang_c(arrival, service, replicas)
    assert 0.0 <= prob <= 1.0
    assert rate > 0
    q = queueing_latency(arrival_qps=arrival, service_ms=service, replicas=replicas)
    assert 0.0 <= q.queue_wait_probability <= 1.0


def _last_loads_before_saturation(replicas: int, service: float) -> list[float]:
    """Arrival rates 0..12 ulps below ``replicas`` full servers, rising."""
    rates = [replicas * 1000.0 / service]
    for _ in range(12):
        rates.append(math.nextafter(rates[-1], 0.0))
    return rates[::-1]


SATURATION_GRID = [
    (replicas, 0.37 * 1.37**k)
    for replicas in (1, 2, 3, 5, 7, 12, 167, 400)
    for k in range(25)
]


def test_p99_never_falls_across_the_last_floats_before_saturation() -> None:
    for replicas, service in SATURATION_GRID:
        p99s = []
        for arrival in _last_loads_before_saturation(replicas, service):
            q = queueing_latency(arrival_qps=arrival, service_ms=service, replicas=replicas)
            rate, prob = erlang_c(arrival, service, replicas)
            assert q.stable == (q.utilization < 1.0)
            if q.stable:
                # A stable queue has a positive, finite wait rate: erlang_c agrees it is stable.
                assert 0.0 < rate < math.inf, (replicas, service, arrival)
                assert q.queue_wait_probability == prob
            p99s.append(q.p99_latency_ms)
        assert p99s == sorted(p99s), (replicas, service)


# --- batching_tax ----------------------------------------------------------------------------


@PROPERTIES
@given(
    batches=st.lists(st.integers(1, 512), min_size=2, max_size=2, unique=True).map(sorted),
    arrival=st.floats(min_value=1e-3, max_value=1e5),
    service=service_times,
)
def test_formation_delay_grows_with_batch_size(
    batches: list[int], arrival: float, service: float
) -> None:
    small, large = (
        batching_tax(batch_size=b, arrival_qps=arrival, service_ms=service, slo_ms=100)
        for b in batches
    )
    assert large.formation_delay_ms > small.formation_delay_ms


@PROPERTIES
@given(
    batch=st.integers(1, 512),
    arrivals=st.lists(st.floats(min_value=1e-3, max_value=1e5), min_size=2, max_size=2,
                      unique=True).map(sorted),
    service=service_times,
)
def test_formation_delay_falls_with_arrival_rate(
    batch: int, arrivals: list[float], service: float
) -> None:
    slow, fast = (
        batching_tax(batch_size=batch, arrival_qps=a, service_ms=service, slo_ms=100)
        for a in arrivals
    )
    if batch == 1:
        assert fast.formation_delay_ms == slow.formation_delay_ms == 0.0
    else:
        assert fast.formation_delay_ms < slow.formation_delay_ms


@PROPERTIES
@given(
    batch=st.integers(1, 512),
    arrival=st.floats(min_value=1e-3, max_value=1e5),
    service=service_times,
    slo=st.floats(min_value=0.0, max_value=1e4),
    gain=st.floats(min_value=0.0, max_value=64.0),
    replicas=st.integers(1, 64),
    cv=cvs,
)
def test_total_p99_is_at_least_formation_plus_batched_service(
    batch: int, arrival: float, service: float, slo: float, gain: float, replicas: int,
    cv: float,
) -> None:
    b = batching_tax(batch_size=batch, arrival_qps=arrival, service_ms=service, slo_ms=slo,
                     efficiency_gain=gain, replicas=replicas, service_cv=cv)
    assert b.total_p99_ms >= b.formation_delay_ms + b.batched_service_ms
    assert b.queue_p99_ms >= 0.0


# --- cache_capacity --------------------------------------------------------------------------

memories = st.floats(min_value=0.0, max_value=200.0)
params_b = st.floats(min_value=0.0, max_value=100.0)


def _profile(base: ServingTrackProfile, memory_gb: float, params: float) -> ServingTrackProfile:
    return dataclasses.replace(base, memory_capacity_gb=memory_gb, model_params_b=params)


transformers = st.builds(
    SimpleNamespace, layers=st.integers(1, 128), hidden_dim=st.integers(1, 16384)
)
any_models = st.one_of(transformers, st.builds(SimpleNamespace, layers=st.none()))


@PROPERTIES
@given(
    memory=memories, params=params_b, model=any_models,
    tokens=st.lists(st.integers(0, 1 << 20), min_size=2, max_size=2).map(sorted),
    devices=st.integers(1, 16),
    state_mb=st.one_of(st.none(), st.floats(min_value=1e-3, max_value=1e4)),
)
def test_max_concurrent_never_rises_with_context_length(
    cloud_profile: ServingTrackProfile, memory: float, params: float, model: SimpleNamespace,
    tokens: list[int], devices: int, state_mb: float | None,
) -> None:
    profile = dataclasses.replace(_profile(cloud_profile, memory, params),
                                  state_mb_per_request=state_mb)
    short, long = (
        cache_capacity(profile, model, context_tokens=t, precision_bytes=2,
                       devices_per_replica=devices)
        for t in tokens
    )
    if tokens[0] > 0:  # at 0 tokens a transformer has no state and the result is 0 by rule
        assert long.max_concurrent <= short.max_concurrent


@PROPERTIES
@given(
    memory=memories, params=params_b, model=any_models, tokens=st.integers(1, 1 << 20),
    devices=st.lists(st.integers(1, 64), min_size=2, max_size=2).map(sorted),
)
def test_max_concurrent_never_falls_with_more_devices(
    cloud_profile: ServingTrackProfile, memory: float, params: float, model: SimpleNamespace,
    tokens: int, devices: list[int],
) -> None:
    profile = _profile(cloud_profile, memory, params)
    few, many = (
        cache_capacity(profile, model, context_tokens=tokens, precision_bytes=2,
                       devices_per_replica=d)
        for d in devices
    )
    assert many.max_concurrent >= few.max_concurrent


@PROPERTIES
@given(
    memory=memories, params=params_b, model=any_models, tokens=st.integers(0, 1 << 20),
    devices=st.integers(0, 16), precision=st.floats(min_value=0.0, max_value=4.0),
)
def test_oom_holds_exactly_when_no_request_fits(
    cloud_profile: ServingTrackProfile, memory: float, params: float, model: SimpleNamespace,
    tokens: int, devices: int, precision: float,
) -> None:
    c = cache_capacity(_profile(cloud_profile, memory, params), model, context_tokens=tokens,
                       precision_bytes=precision, devices_per_replica=devices)
    assert c.oom == (c.max_concurrent < 1)
    assert c.max_concurrent >= 0


# --- cold_start ------------------------------------------------------------------------------

bandwidths = st.floats(min_value=1e-4, max_value=1e5)


@PROPERTIES
@given(
    which=st.sampled_from(
        ["storage_bandwidth_gbs", "interconnect_bandwidth_gbs", "deserialize_gbs"]
    ),
    pair=st.lists(bandwidths, min_size=2, max_size=2).map(sorted),
    others=st.tuples(bandwidths, bandwidths),
    precision=st.floats(min_value=0.0, max_value=4.0),
)
def test_cold_start_never_rises_with_more_bandwidth(
    cloud_profile: ServingTrackProfile, which: str, pair: list[float],
    others: tuple[float, float], precision: float,
) -> None:
    names = ["storage_bandwidth_gbs", "interconnect_bandwidth_gbs", "deserialize_gbs"]
    names.remove(which)
    fixed = dict(zip(names, others, strict=True))
    slow, fast = (
        cold_start_latency(cloud_profile, precision_bytes=precision, **fixed, **{which: bw})
        for bw in pair
    )
    assert fast.cold_start_ms <= slow.cold_start_ms
    assert fast.exposed_first_request_ms <= slow.exposed_first_request_ms


@PROPERTIES
@given(
    pools=st.lists(st.integers(0, 64), min_size=2, max_size=2).map(sorted),
    scale_out=st.integers(0, 64),
    precision=st.floats(min_value=0.0, max_value=4.0),
    service=st.floats(min_value=0.0, max_value=1e4),
)
def test_a_larger_warm_pool_never_raises_exposed_latency_which_stays_above_service(
    cloud_profile: ServingTrackProfile, pools: list[int], scale_out: int, precision: float,
    service: float,
) -> None:
    profile = dataclasses.replace(cloud_profile, service_ms=service)
    small, large = (
        cold_start_latency(profile, precision_bytes=precision, warm_pool_replicas=w,
                           scale_out_replicas=scale_out)
        for w in pools
    )
    assert large.exposed_first_request_ms <= small.exposed_first_request_ms
    assert large.exposed_first_request_ms >= service
    assert small.exposed_first_request_ms >= service


# --- units -----------------------------------------------------------------------------------

#: How many of each unit make one of the first (reference) unit, written out by hand.
CAPACITY_UNITS = {"GiB": 1.0, "MiB": 1024.0, "MB": 1073.741824, "GB": 1.073741824,
                  "TiB": 1 / 1024, "kB": 1073741.824}
BANDWIDTH_UNITS = {"GB/s": 1.0, "TB/s": 1e-3, "MB/s": 1e3, "Gbps": 8.0, "Mbps": 8e3,
                   "GiB/s": 1 / 1.073741824}
POWER_UNITS = {"W": 1.0, "mW": 1e3, "kW": 1e-3}
ENERGY_UNITS = {"Wh": 1.0, "J": 3600.0, "kWh": 1e-3, "mWh": 1e3, "kJ": 3.6}
PARAM_UNITS = {"param": 1.0, "kiloparam": 1e-3, "megaparam": 1e-6, "gigaparam": 1e-9}


def _quantity(magnitude: float, units: dict[str, float], unit: str) -> object:
    return ureg.Quantity(magnitude * units[unit], unit)


def _hardware(facts: dict[str, float | None], choice: dict[str, str]) -> SimpleNamespace:
    battery = facts["battery"]
    return SimpleNamespace(
        name="unit test rig",
        memory=SimpleNamespace(
            capacity=_quantity(facts["capacity"] or 0.0, CAPACITY_UNITS, choice["capacity"]),
            bandwidth=_quantity(facts["memory_bw"] or 0.0, BANDWIDTH_UNITS, choice["memory_bw"]),
        ),
        storage=SimpleNamespace(
            bandwidth=_quantity(facts["storage_bw"] or 0.0, BANDWIDTH_UNITS, choice["storage_bw"])
        ),
        interconnect=SimpleNamespace(
            bandwidth=_quantity(facts["link_bw"] or 0.0, BANDWIDTH_UNITS, choice["link_bw"])
        ),
        tdp=_quantity(facts["tdp"] or 0.0, POWER_UNITS, choice["tdp"]),
        battery_capacity=(
            None if battery is None else _quantity(battery, ENERGY_UNITS, choice["battery"])
        ),
    )


positive = st.floats(min_value=1e-3, max_value=1e4)
hardware_facts = st.fixed_dictionaries({
    "capacity": positive, "memory_bw": positive, "storage_bw": positive, "link_bw": positive,
    "tdp": positive, "battery": st.one_of(st.none(), positive),
    "params": st.floats(min_value=1.0, max_value=1e12),
})
unit_choices = st.fixed_dictionaries({
    "capacity": st.sampled_from(sorted(CAPACITY_UNITS)),
    "memory_bw": st.sampled_from(sorted(BANDWIDTH_UNITS)),
    "storage_bw": st.sampled_from(sorted(BANDWIDTH_UNITS)),
    "link_bw": st.sampled_from(sorted(BANDWIDTH_UNITS)),
    "tdp": st.sampled_from(sorted(POWER_UNITS)),
    "battery": st.sampled_from(sorted(ENERGY_UNITS)),
    "params": st.sampled_from(sorted(PARAM_UNITS)),
})


def _track(facts: dict[str, float | None], choice: dict[str, str]) -> ServingTrackProfile:
    model = SimpleNamespace(
        name="m", parameters=_quantity(facts["params"] or 0.0, PARAM_UNITS, choice["params"]),
        layers=2, hidden_dim=8,
    )
    variant = SimpleNamespace(
        hardware_ref="Hardware.Test.Rig", model_ref="Models.Test.M", defaults={},
        assumptions={}, primary_metric="p99", guardrail_metric="cost",
    )
    return serving_track_profile(
        SimpleNamespace(track_id="t", label="T"), variant, _hardware(facts, choice), model
    )


def _assert_profiles_agree(a: ServingTrackProfile, b: ServingTrackProfile) -> None:
    for field in dataclasses.fields(ServingTrackProfile):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, float):
            assert y == pytest.approx(x, rel=1e-9, abs=0), field.name
        else:
            assert x == y, field.name


@PROPERTIES
@given(facts=hardware_facts, first=unit_choices, second=unit_choices)
def test_the_same_hardware_in_other_units_gives_the_same_profile(
    facts: dict[str, float | None], first: dict[str, str], second: dict[str, str]
) -> None:
    a, b = _track(facts, first), _track(facts, second)
    _assert_profiles_agree(a, b)
    gib = 2**30 / 1e9
    assert a.memory_capacity_gb == pytest.approx((facts["capacity"] or 0.0) * gib, rel=1e-9)
    assert a.memory_bandwidth_gbs == pytest.approx(facts["memory_bw"], rel=1e-9)
    assert a.storage_bandwidth_gbs == pytest.approx(facts["storage_bw"], rel=1e-9)
    assert a.interconnect_bandwidth_gbs == pytest.approx(facts["link_bw"], rel=1e-9)
    assert a.tdp_w == pytest.approx(facts["tdp"], rel=1e-9)
    assert a.model_params_b == pytest.approx((facts["params"] or 0.0) / 1e9, rel=1e-9)
    if facts["battery"] is None:
        assert a.battery_wh is None
    else:
        assert a.battery_wh == pytest.approx(facts["battery"], rel=1e-9)


def test_h100_in_gib_and_tb_per_s_equals_h100_in_mb_and_gb_per_s() -> None:
    binary = {"capacity": 80.0, "memory_bw": 3350.0, "storage_bw": 7.0, "link_bw": 64.0,
              "tdp": 700.0, "battery": None, "params": 7e10}
    left = {"capacity": "GiB", "memory_bw": "TB/s", "storage_bw": "GB/s", "link_bw": "GB/s",
            "tdp": "W", "battery": "Wh", "params": "param"}
    right = {"capacity": "MB", "memory_bw": "GB/s", "storage_bw": "Gbps", "link_bw": "Gbps",
             "tdp": "mW", "battery": "J", "params": "megaparam"}
    a, b = _track(binary, left), _track(binary, right)
    _assert_profiles_agree(a, b)
    assert b.memory_capacity_gb == pytest.approx(85.89934592, rel=1e-12)
