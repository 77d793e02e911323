"""The reality curves' cache (graders/reality/store.py) and the instructors' table: built
reproducibly, read without running anything, never stale."""

from __future__ import annotations

import argparse
import json
import math
import shutil
from pathlib import Path

import pytest

from graders.cli.tracks import run_show, show_lines
from graders.reality import curves, simulate, store
from graders.reality.curves import RealityCurve, RealityPoint
from graders.reality.table import (
    DEFAULT_LEGEND,
    HEADER,
    LOAD_LEGEND,
    TABLE_LOADS,
    default_lines,
    flip_text,
    load_lines,
    shown_point,
    table_lines,
    where_it_holds,
)
from graders.sandbox import runtime
from graders.trackfiles.tracks import Track, default_tracks_dir, load_track, load_tracks


@pytest.fixture
def small_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Simulations of 4,000 requests and 2 seeds: the same code, quick."""
    monkeypatch.setattr(simulate, "REQUESTS", 4000)
    monkeypatch.setattr(simulate, "SEEDS", 2)


@pytest.fixture
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache folder of the grader's and no bundled document: nothing built yet."""
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o755)
    monkeypatch.setattr(runtime, "cache_folder", lambda: folder)
    monkeypatch.setattr(store, "bundled_file", lambda: tmp_path / "no-bundle.json")
    return folder


@pytest.fixture
def iphone(tmp_path: Path) -> Track:
    shutil.copy(default_tracks_dir() / "iphone.toml", tmp_path / "iphone.toml")
    return load_track(tmp_path / "iphone.toml")


@pytest.mark.usefixtures("small_runs")
def test_a_document_is_reproducible_byte_for_byte(iphone: Track) -> None:
    first = store.document_text(store.build_document([iphone]))
    assert store.document_text(store.build_document([iphone])) == first
    parsed = store.parse_document(json.loads(first), [iphone])
    queueing, batching = parsed["iphone"]
    assert [queueing.function, batching.function] == list(curves.FUNCTIONS)
    # one replica: M/G/1 is exact without batching, simulated with it
    assert {p.source for p in queueing.points} == {"exact"}
    assert [p.source for p in batching.points][:2] == ["exact", "simulated"]


@pytest.mark.usefixtures("small_runs")
def test_a_changed_track_file_gets_no_curve_rather_than_a_stale_one(iphone: Track) -> None:
    document = store.build_document([iphone])
    iphone.path.write_text(iphone.path.read_text(encoding="utf-8").replace(
        "arrival_qps = 8", "arrival_qps = 9"), encoding="utf-8")
    assert store.parse_document(document, [load_track(iphone.path)]) == {}


@pytest.mark.usefixtures("private_cache")
def test_reading_the_curves_runs_no_simulation(monkeypatch: pytest.MonkeyPatch,
                                               iphone: Track) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a simulation ran while reading")

    monkeypatch.setattr(simulate, "estimate", refuse)
    monkeypatch.setattr(curves, "estimate", refuse)
    assert store.load_reality([iphone]) == {}  # no cache was built
    assert store.missing_reasons([iphone], {}) == {"iphone": "not built"}


def _two_tracks(folder: Path) -> list[Track]:
    folder.mkdir()
    for name in ("iphone.toml", "robotaxi.toml"):
        shutil.copy(default_tracks_dir() / name, folder / name)
    return list(load_tracks(folder))


@pytest.mark.usefixtures("small_runs", "private_cache")
def test_editing_one_track_rebuilds_only_that_tracks_curves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    tracks = _two_tracks(tmp_path / "tracks")
    first = store.built_reality(tracks)
    assert sorted(first) == ["iphone", "robotaxi"]
    robotaxi_file = store.cached_file(tracks[1])
    old_iphone_file = store.cached_file(tracks[0])
    assert old_iphone_file is not None
    path = tracks[0].path
    path.write_text(path.read_text(encoding="utf-8").replace("arrival_qps = 8",
                                                             "arrival_qps = 9"),
                    encoding="utf-8")
    edited = list(load_tracks(path.parent))
    assert store.load_reality(edited) == {"robotaxi": first["robotaxi"]}
    assert store.missing_reasons(edited, {"robotaxi": ()}) == {"iphone": "changed"}
    assert run_show(argparse.Namespace(tracks=str(path.parent), track_id="iphone")) == 0
    shown = capsys.readouterr().out
    assert shown.count(f"no real p99: {store.MISSING_TEXT['changed']}") == 2, shown
    built = []
    real_track_reality = curves.track_reality
    monkeypatch.setattr(curves, "track_reality",
                        lambda track: built.append(track.track_id) or real_track_reality(track))
    again = store.built_reality(edited)
    assert built == ["iphone"]
    assert again["robotaxi"] == first["robotaxi"]
    assert again["iphone"] != first["iphone"]
    assert store.cached_file(edited[1]) == robotaxi_file
    assert not old_iphone_file.parent.exists()  # the stale version's folder is removed
    new_iphone_file = store.cached_file(edited[0])
    assert new_iphone_file is not None
    assert store.trusted_cached_folders(store.CACHE_KIND, "iphone-") == \
        [new_iphone_file.parent]
    assert store.missing_reasons(edited, again) == {}


@pytest.mark.usefixtures("small_runs", "private_cache")
def test_an_export_ships_every_tracks_cached_curves_in_one_document(tmp_path: Path) -> None:
    tracks = _two_tracks(tmp_path / "tracks")
    document = json.loads(store.exported_text(tracks))
    assert store.parse_document(document, tracks) == store.load_reality(tracks)
    assert sorted(document["tracks"]) == ["iphone", "robotaxi"]


def test_an_exact_fleet_point_needs_no_simulation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(curves, "estimate", None)
    fleet = load_track(default_tracks_dir() / "cloud_fleet.toml").reference_profile()
    point = curves.load_point(fleet, 0.3 * curves.capacity_qps(fleet))
    assert (point.source, point.half_ms) == ("exact", 0.0)
    assert point.formula_p99_ms == pytest.approx(25.0)
    assert point.p99_ms == pytest.approx(115.148, abs=0.001)


@pytest.mark.parametrize(("formula", "real", "half", "flips"), [
    (90.0, 120.0, 5.0, True),    # the formula passes, reality fails clearly
    (90.0, 102.0, 5.0, False),   # reality's interval holds the SLO: unknown, no flip
    (120.0, 80.0, 5.0, True),    # the formula fails, reality passes
    (80.0, 95.0, 0.0, False),    # both pass
])
def test_a_verdict_flips_only_where_the_interval_is_clear_of_the_slo(
        formula: float, real: float, half: float, flips: bool) -> None:
    assert RealityPoint(1.0, formula, real, half, "simulated").flips(100.0) is flips


def _curve(function: str, points: tuple[RealityPoint, ...]) -> RealityCurve:
    return RealityCurve("demo", function, "x", 100.0, 1.0, 1, points, points[0])


def test_the_table_has_a_row_per_track_and_function_with_the_error_and_flips() -> None:
    loads = tuple(RealityPoint(float(i), 50.0, 50.0 / (1 - 0.5 * (i > 10)), 0.0, "exact")
                  for i in range(len(curves.LOADS)))
    batches = (RealityPoint(32.0, 36.5, 84.7, 0.3, "simulated"),
               RealityPoint(64.0, 90.0, 180.0, 1.0, "simulated"))
    reality = {"demo": (_curve("queueing_latency", loads), _curve("batching_tax", batches))}
    lines = default_lines(reality)
    assert table_lines(reality) == [LOAD_LEGEND, "", *load_lines(reality), "",
                                    DEFAULT_LEGEND, "", *lines]
    assert lines[0] == HEADER
    assert lines[2] == ("| demo | queueing_latency | 0 req/s | 50 ms | 50 ms (exact) | +0 % "
                        "| 0.05 to 0.9 of capacity | nowhere |")
    assert lines[3] == ("| demo | batching_tax | B = 32 | 36.5 ms | 84.7 ms ± 0.3 ms "
                        "(simulated) | -57 % | nowhere | from B = 64 on (not at B = 32) |")


def _batches(real: list[float]) -> RealityCurve:
    """A batching curve over B = 1, 2, 4, ...: formula 50 ms, ``real`` exact (SLO 100)."""
    points = tuple(RealityPoint(float(2 ** i), 50.0, value, 0.0, "exact")
                   for i, value in enumerate(real))
    return _curve("batching_tax", points)


@pytest.mark.parametrize(("real", "text"), [
    ([50, 150, 150, 50], "at B = 2 to B = 4 (not at B = 1 or B = 8)"),
    ([150, 150, 50, 50], "at B = 1 to B = 2 (not at B = 4)"),
    ([150, 150, 150], "at every computed input"),
    ([50, 150, 50, 150], "at B = 2 (not at B = 1 or B = 4); from B = 8 on (not at B = 4)"),
    ([50, 50, 150, 150], "from B = 4 on (not at B = 2)"),
    ([50, 50], "nowhere"),
])
def test_verdicts_differ_over_intervals_whose_ends_lie_between_computed_inputs(
        real: list[float], text: str) -> None:
    assert flip_text(_batches(real)) == text


def test_the_formula_holds_over_ranges_of_adjacent_computed_inputs() -> None:
    assert where_it_holds(_batches([50, 52, 80, 49, 51, 50])) == "B = 1 to B = 2, B = 8 to B = 32"
    assert where_it_holds(_batches([80, 50, 80])) == "B = 2"


def test_a_track_whose_default_load_is_unstable_is_compared_at_a_stable_load() -> None:
    loads = tuple(RealityPoint(100.0 * rho, 25.0, 100.0, 0.0, "exact") for rho in curves.LOADS)
    unstable = RealityPoint(500.0, math.inf, math.inf, 0.0, "unstable")
    curve = RealityCurve("fleet", "queueing_latency", "x", 200.0, 1.0, 8, loads, unstable)
    at, point = shown_point(curve)
    assert at == "50 req/s (load 0.5; default 500 req/s is unstable)"
    assert point.error == pytest.approx(-0.75)
    row = default_lines({"fleet": (curve,)})[2]
    assert row.startswith(f"| fleet | queueing_latency | {at} | 25 ms | 100 ms (exact) | -75 % |")


def test_the_load_table_has_the_queueing_formulas_error_at_each_load() -> None:
    loads = tuple(RealityPoint(float(i), 50.0 + i, 100.0 + 2 * i, 0.0, "exact")
                  for i in range(len(curves.LOADS)))
    lines = load_lines({"demo": (_curve("queueing_latency", loads),)})
    assert lines[0].split(" | ")[1:] == [f"load {load:g}" for load in TABLE_LOADS[:-1]] + [
        f"load {TABLE_LOADS[-1]:g} |"]
    assert 0.99 in TABLE_LOADS
    assert lines[2] == "| demo (1, 1) |" + " -50 % |" * len(TABLE_LOADS)


def test_a_tiny_negative_error_is_shown_as_0_not_minus_0() -> None:
    from graders.reality.table import error_text

    assert error_text(RealityPoint(1.0, 99.9, 100.0, 0.0, "exact")) == "+0 %"


def test_tracks_show_prints_the_real_p99_beside_each_formula_p99() -> None:
    track = load_tracks(default_tracks_dir())[0]
    queue = RealityPoint(1.0, 25.0, 115.148, 0.0, "exact")
    batch = RealityPoint(32.0, 36.5, 84.9, 0.29, "simulated")
    lines = "\n".join(show_lines(track, (_curve("queueing_latency", (queue,)),
                                         _curve("batching_tax", (batch,)))))
    assert "real p99 115 ms (exact), formula error -78 %" in lines
    assert "real p99 84.9 ms ± 0.29 ms (simulated), formula error -57 %" in lines
    assert "no real p99: its curves were never built here, or their cache was deleted: run " \
        "'graders reality build'" in "\n".join(show_lines(track))
    assert "no real p99: its track file (or the grader) changed after its curves were built" \
        in "\n".join(show_lines(track, None, store.MISSING_TEXT["changed"]))


def test_an_unstable_point_has_no_error_and_never_flips() -> None:
    point = RealityPoint(1.0, math.inf, math.inf, 0.0, "unstable")
    assert math.isnan(point.error)
    assert not point.flips(100.0)


def test_the_method_key_covers_the_reference_and_the_track_loader() -> None:
    # the cached formula p99 and exact points come from reference/, the profile from the
    # track loader: a change there must not leave stale curves valid
    from graders.reality.store import _method_sources

    names = {(path.parent.name, path.name) for path in _method_sources()}
    assert {("reference", "tails.py"), ("reference", "queueing.py"),
            ("reference", "batching.py"), ("trackfiles", "tracks.py"),
            ("reality", "mg1.py"), ("reality", "simulate.py")} <= names


@pytest.mark.usefixtures("small_runs", "private_cache")
@pytest.mark.parametrize("arrival", ["0", "0.0", "1e-9"])
def test_a_track_with_no_arrivals_gets_its_curves_as_the_formula_sees_them(
        tmp_path: Path, arrival: str) -> None:
    """``tracks check`` accepts arrival_qps = 0 (the lab floors it to 0.0001 req/s), so
    the curves, the reality build and the exports must too: the batch curve is simulated
    at the very rate the formula used."""
    folder = tmp_path / "tracks"
    folder.mkdir()
    text = (default_tracks_dir() / "iphone.toml").read_text(encoding="utf-8")
    assert "\narrival_qps = 8\n" in text
    (folder / "iphone.toml").write_text(text.replace("\narrival_qps = 8\n",
                                                     f"\narrival_qps = {arrival}\n"),
                                        encoding="utf-8")
    tracks = list(load_tracks(folder))
    document = json.loads(store.exported_text(tracks))  # what both exports ship
    queueing, batching = store.parse_document(document, tracks)["iphone"]
    for point in (*queueing.points, *batching.points):
        assert math.isfinite(point.formula_p99_ms), point
        assert math.isfinite(point.p99_ms) or point.source == "unstable", point
    assert batching.points[0].source == "exact"  # B = 1: M/G/1, no batch to wait for
