"""The shipped track files load to the facts and outputs of lab-spec section 3."""

from __future__ import annotations

import dataclasses
import math
import tomllib
from decimal import Decimal
from pathlib import Path

import pytest

import graders
from graders.trackfiles.tracks import Track, default_tracks_dir, load_track, load_tracks
from graders.units import ureg
from reference import ServingTrackProfile

TRACK_IDS = ("cloud_fleet", "iphone", "oura_ring", "robotaxi")


@pytest.fixture(scope="module")
def tracks() -> dict[str, Track]:
    return {track.track_id: track for track in load_tracks(default_tracks_dir())}


def matches_printed(value: float, printed: str) -> bool:
    """``value`` rounds to ``printed`` at the decimals ``printed`` shows."""
    exponent = Decimal(printed).as_tuple().exponent
    assert isinstance(exponent, int)
    return math.isclose(value, float(printed), rel_tol=0, abs_tol=0.5 * 10.0**exponent + 1e-12)


def test_the_default_tracks_dir_is_the_tracks_folder_beside_the_graders_package() -> None:
    expected = Path(graders.__file__).resolve().parent.parent / "tracks"
    assert default_tracks_dir() == expected


def test_the_four_book_tracks_load_sorted_by_id(tracks: dict[str, Track]) -> None:
    assert tuple(tracks) == TRACK_IDS
    for track_id, track in tracks.items():
        assert track.path.name == f"{track_id}.toml"
        assert track.profile.track_id == track_id


@pytest.mark.parametrize(
    ("track_id", "label", "category", "hardware_ref", "hardware_name", "model_ref", "model_name"),
    [
        ("iphone", "iPhone", "Mobile ML", "Hardware.Mobile.iPhone15Pro",
         "iPhone 15 Pro (A17 Pro)", "Models.Vision.MobileNetV2", "MobileNetV2"),
        ("oura_ring", "Oura Ring", "TinyML", "Hardware.Tiny.OuraRing",
         "Oura Ring 4 (wearable reference profile)", "Models.Tiny.DS_CNN", "DS-CNN (KWS)"),
        ("robotaxi", "RoboTaxi", "Edge AI", "Hardware.Edge.RoboTaxi",
         "RoboTaxi Reference Compute (NVIDIA DRIVE AGX Orin class)",
         "Models.Vision.YOLOv8_Nano", "YOLOv8-Nano"),
        ("cloud_fleet", "Cloud Fleet", "Cloud", "Hardware.Cloud.H100", "NVIDIA H100",
         "Models.Language.Llama2_70B", "Llama-2-70B"),
    ],
)
def test_each_track_names_its_mlsysim_hardware_and_model(
    tracks: dict[str, Track], track_id: str, label: str, category: str, hardware_ref: str,
    hardware_name: str, model_ref: str, model_name: str,
) -> None:
    track = tracks[track_id]
    profile = track.reference_profile()
    assert (track.label, track.category) == (label, category)
    assert (profile.label, profile.hardware_ref, profile.hardware_name) == (
        label, hardware_ref, hardware_name)
    assert (profile.model_ref, profile.model_name) == (model_ref, model_name)
    assert profile.source_refs == (hardware_ref, model_ref)


@pytest.mark.parametrize(
    ("track_id", "memory_gb", "memory_gbs", "storage_gbs", "interconnect_gbs", "tdp_w",
     "battery_wh", "params_b"),
    [
        ("iphone", 8 * 2**30 / 1e9, 51.2, 51.2, 51.2, 5.0, 15.0, 3_504_872 / 1e9),
        ("oura_ring", 2 * 2**20 / 1e9, 0.08, 0.08, 0.08, 0.02, 0.06, 200_000 / 1e9),
        ("robotaxi", 32 * 2**30 / 1e9, 200.0, 1.0, 3.75, 60.0, None, 3_200_000 / 1e9),
        ("cloud_fleet", 80 * 2**30 / 1e9, 3350.0, 7.0, 64.0, 700.0, None, 70.0),
    ],
)
def test_each_track_profile_has_the_hardware_facts_in_decimal_units(
    tracks: dict[str, Track], track_id: str, memory_gb: float, memory_gbs: float,
    storage_gbs: float, interconnect_gbs: float, tdp_w: float, battery_wh: float | None,
    params_b: float,
) -> None:
    profile = tracks[track_id].reference_profile()
    assert profile.memory_capacity_gb == pytest.approx(memory_gb, rel=1e-12)
    assert profile.memory_bandwidth_gbs == pytest.approx(memory_gbs, rel=1e-12)
    assert profile.storage_bandwidth_gbs == pytest.approx(storage_gbs, rel=1e-12)
    assert profile.interconnect_bandwidth_gbs == pytest.approx(interconnect_gbs, rel=1e-12)
    assert profile.tdp_w == pytest.approx(tdp_w, rel=1e-12)
    assert profile.battery_wh == (None if battery_wh is None else pytest.approx(battery_wh))
    assert profile.model_params_b == pytest.approx(params_b, rel=1e-12)


@pytest.mark.parametrize(
    ("track_id", "layers", "hidden_dim", "has_storage", "has_interconnect"),
    [
        ("iphone", 54, None, False, False),
        ("oura_ring", None, None, False, False),
        ("robotaxi", 225, None, True, True),
        ("cloud_fleet", 80, 8192, True, True),
    ],
)
def test_absent_mlsysim_facts_are_none_on_the_registry_objects(
    tracks: dict[str, Track], track_id: str, layers: int | None, hidden_dim: int | None,
    has_storage: bool, has_interconnect: bool,
) -> None:
    _, _, hardware, model = tracks[track_id].registry_objects()
    assert (model.layers, model.hidden_dim) == (layers, hidden_dim)
    assert (hardware.storage is not None, hardware.interconnect is not None) == (
        has_storage, has_interconnect)


@pytest.mark.parametrize(
    ("track_id", "workload", "batching", "cache", "cold", "policy"),
    [
        ("iphone", (8, 30, 1, 100, 0.8), (2, 1.4), (2048, "activation/cache buffers", 64.0),
         (2, 2, 1, 20, 300, 100, 0, 1), "local interactive path with bounded fallback"),
        ("oura_ring", (0.02, 80, 1, 300, 0.6), (1, 1.0), (256, "sensor window buffers", 0.06),
         (1, 1, 1, 0.04, 50, 20, 1, 1), "ring-local duty-cycle inference"),
        ("robotaxi", (30, 20, 1, 50, 1.2), (1, 1.0), (4096, "sensor-frame state buffers", 768.0),
         (1, 1, 1, 8, 800, 200, 1, 1), "vehicle-local deadline scheduler"),
        ("cloud_fleet", (500, 25, 8, 200, 1.0), (32, 6.4), (131072, "KV cache", None),
         (2, 2, 8, 20, 800, 500, 2, 4), "continuous-batched GPU fleet with warm pool"),
    ],
)
def test_each_track_profile_has_the_lab_defaults_of_the_spec(
    tracks: dict[str, Track], track_id: str, workload: tuple[float, ...],
    batching: tuple[float, ...], cache: tuple[object, ...], cold: tuple[float, ...],
    policy: str,
) -> None:
    p = tracks[track_id].reference_profile()
    assert (p.arrival_qps, p.service_ms, p.replicas, p.slo_ms, p.service_cv) == workload
    assert (p.batch_size, p.batch_efficiency_gain) == batching
    assert (p.context_tokens, p.state_kind, p.state_mb_per_request) == cache
    assert (p.precision_bytes, p.kv_precision_bytes, p.default_devices_per_replica,
            p.deserialize_gbs, p.runtime_init_ms, p.warmup_ms, p.warm_pool_replicas,
            p.scale_out_replicas) == cold
    assert p.serving_policy == policy
    assert len(p.validation_tests) == 4


def test_cloud_fleet_profile_equals_the_hand_written_profile_of_conftest(
    tracks: dict[str, Track], cloud_profile: ServingTrackProfile,
) -> None:
    loaded = dataclasses.asdict(tracks["cloud_fleet"].reference_profile())
    expected = dataclasses.asdict(cloud_profile)
    assert loaded.keys() == expected.keys()
    for field, value in expected.items():
        assert loaded[field] == (pytest.approx(value, rel=1e-12)
                                 if isinstance(value, float) else value), field


@pytest.mark.parametrize(
    ("track_id", "queueing", "total_p99", "state_gb", "max_concurrent", "cold_start"),
    [
        ("iphone", ("0.24", "132.869", True, False), "132.183", "0.0625", 137,
         ("400.487", "430.487", True)),
        ("oura_ring", ("0.0016", "80.000", True, True), "80.000", "5.859e-05", 32,
         ("77.5", "80.0", False)),
        ("robotaxi", ("0.60", "269.755", True, False), "269.755", "0.75", 45,
         ("1003.6", "20.0", False)),
        ("cloud_fleet", ("1.5625", "inf", False, False), "36.469", "343.597", 1,
         ("28300", "14175", True)),
    ],
)
def test_outputs_at_each_tracks_defaults_match_the_spec_table(
    tracks: dict[str, Track], track_id: str, queueing: tuple[str, str, bool, bool],
    total_p99: str, state_gb: str, max_concurrent: int, cold_start: tuple[str, str, bool],
) -> None:
    out = tracks[track_id].default_outputs()
    utilization, p99, stable, slo_ok = queueing
    assert matches_printed(out.queueing.utilization, utilization)
    assert (out.queueing.stable, out.queueing.slo_ok) == (stable, slo_ok)
    if p99 == "inf":
        assert out.queueing.p99_latency_ms == math.inf
    else:
        assert matches_printed(out.queueing.p99_latency_ms, p99)
    assert matches_printed(out.batching.total_p99_ms, total_p99)
    assert matches_printed(out.cache.state_per_request_gb, state_gb)
    assert out.cache.max_concurrent == max_concurrent
    cold_ms, exposed_ms, exceeds = cold_start
    assert matches_printed(out.cold_start.cold_start_ms, cold_ms)
    assert matches_printed(out.cold_start.exposed_first_request_ms, exposed_ms)
    assert out.cold_start.exceeds_slo is exceeds


#: The same hardware in other units: (old line, new line) per track.
OTHER_UNITS = {
    "cloud_fleet": [
        ('capacity = "80 GiB"', 'capacity = "85899.345920 MB"'),
        ('bandwidth = "3.35 TB/s"', 'bandwidth = "3350 GB/s"'),
        ('bandwidth = "7.0 GB/s"', 'bandwidth = "56 Gbps"'),
        ('bandwidth = "64.0 GB/s"', 'bandwidth = "512 Gbit/s"'),
        ('tdp = "700 W"', 'tdp = "700000 mW"'),
        ('parameters = "7e10 param"', "parameters = 70000000000"),
    ],
    "robotaxi": [
        ('capacity = "32 GiB"', 'capacity = "34359738368 B"'),
        ('bandwidth = "200.0 GB/s"', 'bandwidth = "0.2 TB/s"'),
        ('bandwidth = "1.0 GB/s"', 'bandwidth = "1000 MB/s"'),
        ('bandwidth = "30 Gbps"', 'bandwidth = "3.75 GB/s"'),
        ('tdp = "60 W"', 'tdp = "0.06 kW"'),
        ('parameters = "3200000 param"', 'parameters = "3.2e6"'),
    ],
    "iphone": [
        ('capacity = "8 GiB"', 'capacity = "8192 MiB"'),
        ('bandwidth = "51.2 GB/s"', 'bandwidth = "51200 MB/s"'),
        ('tdp = "5 W"', 'tdp = "5000 mW"'),
        ('battery_capacity = "15 Wh"', 'battery_capacity = "54000 J"'),
    ],
    "oura_ring": [
        ('capacity = "2 MiB"', 'capacity = "2048 KiB"'),
        ('bandwidth = "0.08 GB/s"', 'bandwidth = "80 MB/s"'),
        ('tdp = "0.02 W"', 'tdp = "20 mW"'),
        ('battery_capacity = "0.06 Wh"', 'battery_capacity = "60 mWh"'),
        ('parameters = "200000 param"', 'parameters = "200000 count"'),
    ],
}


@pytest.mark.parametrize("track_id", TRACK_IDS)
def test_the_same_hardware_in_other_units_gives_the_same_profile(
    tracks: dict[str, Track], track_id: str, tmp_path: Path,
) -> None:
    text = tracks[track_id].path.read_text(encoding="utf-8")
    for old, new in OTHER_UNITS[track_id]:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    copy = tmp_path / f"{track_id}.toml"
    copy.write_text(text, encoding="utf-8")
    shipped = dataclasses.asdict(tracks[track_id].reference_profile())
    converted = dataclasses.asdict(load_track(copy).reference_profile())
    for field, value in shipped.items():
        expected = pytest.approx(value, rel=1e-12) if isinstance(value, float) else value
        assert converted[field] == expected, field


def test_hardware_quantities_come_from_the_shared_registry(tracks: dict[str, Track]) -> None:
    hardware = tracks["robotaxi"].hardware
    assert isinstance(hardware.memory.capacity, ureg.Quantity)
    assert hardware.interconnect is not None
    assert hardware.interconnect.bandwidth.m_as("GB/s") == pytest.approx(3.75)
    assert tracks["cloud_fleet"].model.parameters.m_as("param") == 7e10


def test_a_track_and_its_parts_are_read_only(tracks: dict[str, Track]) -> None:
    track = tracks["iphone"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        track.label = "changed"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        track.hardware.memory.capacity = ureg.Quantity("1 GiB")  # type: ignore[misc]
    with pytest.raises(TypeError):
        track.variant.defaults["replicas"] = 2  # type: ignore[index]
    with pytest.raises(TypeError):
        track.raw["track"]["id"] = "x"  # type: ignore[index]


def test_raw_dict_is_the_files_toml_data_as_plain_dicts(tracks: dict[str, Track]) -> None:
    for track in tracks.values():
        assert track.raw_dict() == tomllib.loads(track.path.read_text(encoding="utf-8"))
