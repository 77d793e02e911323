"""The reality curves' cache (graders/reality/store.py) and the instructors' table: built
reproducibly, read without running anything, never stale."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from graders.cli.tracks import show_lines
from graders.reality import curves, simulate, store
from graders.reality.curves import RealityCurve, RealityPoint
from graders.reality.table import HEADER, TABLE_LOADS, default_lines, load_lines, table_lines
from graders.trackfiles.tracks import Track, default_tracks_dir, load_track, load_tracks


@pytest.fixture
def small_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Simulations of 4,000 requests and 2 seeds: the same code, quick."""
    monkeypatch.setattr(simulate, "REQUESTS", 4000)
    monkeypatch.setattr(simulate, "SEEDS", 2)


@pytest.fixture
def iphone(tmp_path: Path) -> Track:
    shutil.copy(default_tracks_dir() / "iphone.toml", tmp_path / "iphone.toml")
    return load_track(tmp_path / "iphone.toml")


@pytest.mark.usefixtures("small_runs")
def test_a_document_is_reproducible_byte_for_byte(iphone: Track) -> None:
    first = store.document_text(store.build_document([iphone]))
    assert store.document_text(store.build_document([iphone])) == first
    parsed = store.parse_document(json.loads(first), [iphone])
    assert [c.function for c in parsed["iphone"]] == list(curves.FUNCTIONS)
    assert {p.source for c in parsed["iphone"] for p in c.points} == {"simulated"}


@pytest.mark.usefixtures("small_runs")
def test_a_changed_track_file_gets_no_curve_rather_than_a_stale_one(iphone: Track) -> None:
    document = store.build_document([iphone])
    iphone.path.write_text(iphone.path.read_text(encoding="utf-8").replace(
        "arrival_qps = 8", "arrival_qps = 9"), encoding="utf-8")
    assert store.parse_document(document, [load_track(iphone.path)]) == {}


def test_reading_the_curves_runs_no_simulation(monkeypatch: pytest.MonkeyPatch,
                                               iphone: Track) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a simulation ran while reading")

    monkeypatch.setattr(simulate, "estimate", refuse)
    monkeypatch.setattr(curves, "estimate", refuse)
    assert store.load_reality([iphone]) == {}  # a copy no cache was built for


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
    assert table_lines(reality) == [*load_lines(reality), "", *lines]
    assert lines[0] == HEADER
    assert lines[2] == ("| demo | queueing_latency | 0 req/s | 50 ms | 50 ms (exact) | +0 % "
                        "| 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9 of capacity "
                        "| nowhere |")
    assert lines[3] == ("| demo | batching_tax | B = 32 | 36.5 ms | 84.7 ms ± 0.3 ms "
                        "(simulated) | -57 % | nowhere | B = 64 |")


def test_the_load_table_has_the_queueing_formulas_error_at_each_load() -> None:
    loads = tuple(RealityPoint(float(i), 50.0 + i, 100.0 + 2 * i, 0.0, "exact")
                  for i in range(len(curves.LOADS)))
    lines = load_lines({"demo": (_curve("queueing_latency", loads),)})
    assert lines[0].split(" | ")[1:] == [f"load {load:g}" for load in TABLE_LOADS[:-1]] + [
        f"load {TABLE_LOADS[-1]:g} |"]
    assert lines[2] == "| demo (1, 1) | -50 % | -50 % | -50 % | -50 % | -50 % | -50 % |"


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
    assert "real p99 not built (run 'graders reality build')" in "\n".join(show_lines(track))


def test_an_unstable_point_has_no_error_and_never_flips() -> None:
    point = RealityPoint(1.0, math.inf, math.inf, 0.0, "unstable")
    assert math.isnan(point.error)
    assert not point.flips(100.0)
