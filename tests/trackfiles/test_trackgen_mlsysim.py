"""``generate_track_toml`` rebuilds the shipped tracks from MLSysIM and writes new ones.

Tests that read MLSysIM request the module-scoped ``mlsysim`` fixture: it imports the
package once (about 7 s) and skips them when the optional extra is not installed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from graders.cli import main
from graders.errors import TrackError
from graders.trackfiles.generate import format_number, generate_track_toml, toml_value
from graders.trackfiles.tracks import (
    Track,
    default_tracks_dir,
    load_track,
    load_track_text,
    load_tracks,
)
from reference.units import ureg

#: Where each quantity lives in a track file, and the unit to compare it in.
QUANTITY_PATHS = {
    ("hardware", "tdp"): "W", ("hardware", "battery_capacity"): "Wh",
    ("hardware", "memory", "capacity"): "GB", ("hardware", "memory", "bandwidth"): "GB/s",
    ("hardware", "storage", "bandwidth"): "GB/s",
    ("hardware", "interconnect", "bandwidth"): "GB/s", ("model", "parameters"): "param",
}


needs_mlsysim = pytest.mark.needs_mlsysim


@pytest.fixture(scope="module")
def mlsysim() -> ModuleType:
    return pytest.importorskip("mlsysim")


@pytest.fixture(scope="module")
def shipped() -> tuple[Track, ...]:
    return load_tracks(default_tracks_dir())


def settings_of(track: Track) -> dict[str, str]:
    """The ``--set`` values that describe a shipped track beyond its MLSysIM facts."""
    raw = track.raw_dict()
    values: dict[str, Any] = {
        "label": raw["track"]["label"], "category": raw["track"]["category"],
        "primary_metric": raw["variant"]["primary_metric"],
        "guardrail_metric": raw["variant"]["guardrail_metric"],
        **raw["variant"].get("assumptions", {}), **raw["variant"].get("defaults", {}),
    }
    return {key: value if isinstance(value, str) else toml_value(value)
            for key, value in values.items()}


def canonical(track: Track) -> dict[str, Any]:
    """The file's data with each quantity as a float in one fixed unit."""
    data = track.raw_dict()
    for path, unit in QUANTITY_PATHS.items():
        table: Any = data
        for key in path[:-1]:
            table = table.get(key, {})
        if path[-1] in table:
            magnitude = ureg.Quantity(table[path[-1]]).m_as(unit)
            table[path[-1]] = float(f"{magnitude:.12g}")
    return data


@needs_mlsysim
@pytest.mark.parametrize("track_id", ["cloud_fleet", "iphone", "oura_ring", "robotaxi"])
def test_each_shipped_track_regenerates_from_mlsysim_to_the_same_data(
    mlsysim: ModuleType, shipped: tuple[Track, ...], track_id: str,
) -> None:
    track = next(track for track in shipped if track.track_id == track_id)
    text = generate_track_toml(track_id, track.variant.hardware_ref, track.variant.model_ref,
                               settings_of(track))
    regenerated = load_track_text(text, Path(f"{track_id}.toml"))
    assert canonical(regenerated) == canonical(track)
    assert regenerated.reference_profile() == track.reference_profile()


@needs_mlsysim
def test_regenerated_text_matches_the_shipped_file_below_its_comments(
    mlsysim: ModuleType, shipped: tuple[Track, ...],
) -> None:
    for track in shipped:
        text = generate_track_toml(track.track_id, track.variant.hardware_ref,
                                   track.variant.model_ref, settings_of(track))
        body = track.path.read_text(encoding="utf-8").split("\n[track]", 1)[1]
        assert text.split("\n[track]", 1)[1] == body, track.track_id


@needs_mlsysim
def test_quantities_keep_mlsysims_own_units(mlsysim: ModuleType) -> None:
    text = generate_track_toml("robotaxi", "Hardware.Edge.RoboTaxi",
                               "Models.Vision.YOLOv8_Nano", {})
    for line in ('capacity = "32 GiB"', 'bandwidth = "30 Gbps"', 'tdp = "60 W"',
                 'parameters = "3200000 param"'):
        assert line in text


@needs_mlsysim
def test_graders_tracks_new_writes_a_fifth_device_that_loads(
    mlsysim: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["tracks", "new", "--id", "jetson_orin_nx", "--hardware",
            "Hardware.Edge.JetsonOrinNX", "--model", "Models.Language.Llama2_7B",
            "--set", "label=Jetson Orin NX", "--set", "category=Edge AI",
            "--set", "arrival_qps=4", "--set", "validation_tests=soak, burst",
            "--set", "serving_policy=on-device batching", "--tracks", str(tmp_path)]
    assert main(argv) == 0
    assert "jetson_orin_nx.toml" in capsys.readouterr().out
    track = load_track(tmp_path / "jetson_orin_nx.toml")
    profile = track.reference_profile()
    assert (profile.label, track.category, profile.arrival_qps) == ("Jetson Orin NX", "Edge AI", 4)
    assert profile.hardware_name == "NVIDIA Jetson Orin NX"
    assert profile.memory_capacity_gb == pytest.approx(16 * 2**30 / 1e9)
    assert profile.validation_tests == ("soak", "burst")
    assert profile.serving_policy == "on-device batching"
    assert (track.model.layers, track.model.hidden_dim) == (32, 4096)
    assert [path.name for path in tmp_path.iterdir()] == ["jetson_orin_nx.toml"]


@needs_mlsysim
def test_new_with_force_overwrites_and_check_accepts_the_folder(
    mlsysim: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["tracks", "new", "--id", "orin", "--hardware", "Hardware.Edge.JetsonAGXOrin",
            "--model", "Models.Vision.YOLOv8_Nano", "--tracks", str(tmp_path)]
    assert main(argv) == 0
    assert main([*argv, "--set", "replicas=3"]) == 2
    assert main([*argv, "--set", "replicas=3", "--force"]) == 0
    assert load_track(tmp_path / "orin.toml").reference_profile().replicas == 3
    capsys.readouterr()
    assert main(["tracks", "check", "--tracks", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("ok  orin  ")


@needs_mlsysim
def test_an_unknown_ref_lists_close_matches(mlsysim: ModuleType) -> None:
    with pytest.raises(TrackError, match=r"did you mean Hardware\.Edge\.JetsonOrinNX"):
        generate_track_toml("x", "Hardware.Edge.JetsonOrinNx", "Models.Vision.YOLOv8_Nano", {})
    with pytest.raises(TrackError, match=r"unknown MLSysIM model ref 'Models\.Vision\.Yolo'"):
        generate_track_toml("x", "Hardware.Cloud.H100", "Models.Vision.Yolo", {})
    with pytest.raises(TrackError, match="must be a dotted MLSysIM name starting with Models."):
        generate_track_toml("x", "Hardware.Cloud.H100", "Hardware.Cloud.H100", {})


@needs_mlsysim
def test_a_ref_that_is_not_a_device_is_refused(mlsysim: ModuleType) -> None:
    with pytest.raises(TrackError, match=r"not an MLSysIM hardware node \(it has no memory\)"):
        generate_track_toml("x", "Hardware.Tech.Memory", "Models.Vision.YOLOv8_Nano", {})


@needs_mlsysim
def test_a_bad_setting_value_is_reported_against_the_new_file(mlsysim: ModuleType) -> None:
    with pytest.raises(TrackError, match="x.toml: variant.defaults.replicas must be greater"):
        generate_track_toml("x", "Hardware.Cloud.H100", "Models.Vision.YOLOv8_Nano",
                            {"replicas": "0"})


def registry_refs(namespace: Any, prefix: str) -> list[str]:
    """Every dotted ref one level below ``namespace``'s categories."""
    return [f"{prefix}.{category}.{name}"
            for category in dir(namespace) if not category.startswith("_") and category != "list"
            for name in dir(getattr(namespace, category))
            if not name.startswith("_") and name != "list"]


@needs_mlsysim
def test_every_mlsysim_device_generates_a_valid_track(mlsysim: ModuleType) -> None:
    refs = registry_refs(mlsysim.Hardware, "Hardware")
    devices = [ref for ref in refs if getattr(_resolve(mlsysim, ref), "memory", None)]
    assert len(devices) > 40
    for ref in devices:
        text = generate_track_toml("device", ref, "Models.Language.Llama2_7B", {})
        hardware = load_track_text(text, Path("device.toml")).hardware
        node = _resolve(mlsysim, ref)
        assert hardware.memory.capacity.m_as("B") == pytest.approx(
            node.memory.capacity.m_as("B"), rel=1e-12), ref
        assert hardware.memory.bandwidth.m_as("B/s") == pytest.approx(
            node.memory.bandwidth.m_as("B/s"), rel=1e-12), ref


@needs_mlsysim
def test_every_mlsysim_model_with_parameters_generates_a_valid_track(
    mlsysim: ModuleType,
) -> None:
    for ref in registry_refs(mlsysim.Models, "Models"):
        node = _resolve(mlsysim, ref)
        if getattr(node, "parameters", None) is None:
            continue
        text = generate_track_toml("model", "Hardware.Cloud.H100", ref, {})
        model = load_track_text(text, Path("model.toml")).model
        assert model.parameters.m_as("param") == node.parameters.m_as("param"), ref


def _resolve(root: Any, ref: str) -> Any:
    for part in ref.split("."):
        root = getattr(root, part)
    return root


@pytest.mark.parametrize(
    ("value", "text"),
    [(7e10, "7e10"), (8.03e9, "8.03e9"), (3504872.0, "3504872"), (3.35, "3.35"), (7.0, "7.0"),
     (80, "80"), (0.08, "0.08"), (1e-05, "1e-5"), (1.76e12, "1.76e12"), (-2e10, "-2e10")],
)
def test_numbers_are_written_short_and_exact(value: float, text: str) -> None:
    assert format_number(value) == text
    assert float(text) == value


@pytest.mark.parametrize(
    ("value", "text"),
    [("a \"b\" \\ c", '"a \\"b\\" \\\\ c"'), ("tab\t", '"tab\\u0009"'), (True, "true"),
     (40, "40"), (1.5, "1.5"), (["x", 2], '["x", 2]')],
)
def test_toml_values_round_trip(value: object, text: str) -> None:
    import tomllib

    assert toml_value(value) == text
    assert tomllib.loads(f"v = {text}")["v"] == (list(value) if isinstance(value, list)
                                                 else value)


@needs_mlsysim
def test_mapping_settings_are_typed_by_their_key(mlsysim: ModuleType) -> None:
    settings: Mapping[str, str] = {
        "label": "true", "state_kind": '"KV cache"', "arrival_qps": "1.5", "replicas": "2",
        "validation_tests": '["a", "b"]',
    }
    track = load_track_text(
        generate_track_toml("typed", "Hardware.Cloud.H100", "Models.Language.Llama2_7B",
                            settings), Path("typed.toml"))
    defaults = track.variant.defaults
    assert track.label == "true"
    assert (defaults["state_kind"], defaults["arrival_qps"], defaults["replicas"]) == (
        "KV cache", 1.5, 2)
    assert defaults["validation_tests"] == ("a", "b")
