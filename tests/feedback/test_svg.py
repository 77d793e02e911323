"""The feedback plots' own SVG writer: scales and ticks, the drawing primitives, the figures."""

from __future__ import annotations

import base64
import math
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from graders.escaping import single_line
from graders.expected.reference import reference_expected
from graders.feedback.checks import real
from graders.feedback.curves import Guide, Sweep, track_sweeps
from graders.feedback.legend import crosses, inside
from graders.feedback.measure import MeasuredSweep, measure
from graders.feedback.plots import COLORS, DASHES, INF_LABEL, VIOLATION, figure_uri
from graders.feedback.scales import (
    LARGEST,
    Scale,
    autoscale,
    choose_ticks,
    forward,
    inverse,
    label,
    representable,
)
from graders.feedback.svg import Canvas, Stroke, escape, fit, number, text_width
from graders.grading.cases import Case
from graders.sandbox.runner import CallOutcome
from graders.trackfiles.tracks import Track, default_tracks_dir, load_tracks

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = '</text><script>alert("x")</script>&amp;\x1b[31m\u202e\ufffe\ud800\n\x00 \'end'


def anything(ticks: list[float]) -> bool:
    return True


def at_most(count: int) -> Callable[[list[float]], bool]:
    return lambda ticks: len(ticks) <= count


# --- scales and ticks ------------------------------------------------------------------


def test_linear_limits_hold_the_values_with_a_margin_and_ticks_are_nice_numbers() -> None:
    scale = autoscale("linear", [16.0, 400.0, None, math.nan, math.inf])
    assert scale.kind == "linear"
    assert scale.low == pytest.approx(16 - 0.05 * 384)
    assert scale.high == pytest.approx(400 + 0.05 * 384)
    ticks = choose_ticks(scale, at_most(9))
    assert ticks == [0, 50, 100, 150, 200, 250, 300, 350, 400]
    assert choose_ticks(scale, at_most(5)) == [0, 100, 200, 300, 400]
    assert [label(t) for t in choose_ticks(autoscale("linear", [0.0, 0.35]), at_most(8))] \
        == ["0", "0.05", "0.1", "0.15", "0.2", "0.25", "0.3", "0.35"]  # no 0.30000000000000004


def test_a_constant_is_widened_as_matplotlib_did() -> None:
    scale = autoscale("linear", [137.0] * 5)
    assert (scale.low, scale.high) == pytest.approx((137 * 0.95 - 0.05 * 13.7,
                                                     137 * 1.05 + 0.05 * 13.7))
    assert choose_ticks(scale, at_most(8)) == [130, 132, 134, 136, 138, 140, 142, 144]
    zero = autoscale("linear", [0.0])
    assert zero.low < 0 < zero.high


def test_log_ticks_are_1_2_5_over_a_few_decades_and_decades_over_more() -> None:
    few = autoscale("log", [20.0, 2000.0])
    assert few.kind == "log"
    assert choose_ticks(few, at_most(8)) == [20, 50, 100, 200, 500, 1000, 2000]
    assert choose_ticks(autoscale("log", [0.25, 256.0]), at_most(9)) == [1, 10, 100]
    many = autoscale("log", [1.0, 1e12])
    assert choose_ticks(many, anything) == [10.0**e for e in range(13)]
    assert choose_ticks(many, at_most(7)) == [1, 100, 1e4, 1e6, 1e8, 1e10, 1e12]
    assert [label(t) for t in choose_ticks(many, at_most(4))] == ["1", "10000", "1e+08",
                                                                  "1e+12"]


def test_a_log_axis_spanning_less_than_a_decade_is_linear() -> None:
    for kind in ("log", "symlog"):
        scale = autoscale(kind, [3.0, 7.0])
        assert scale.kind == "linear"
        assert choose_ticks(scale, at_most(8)) == [3, 4, 5, 6, 7]
    assert autoscale("log", [3.0, 70.0]).kind == "log"


def test_a_log_axis_without_two_nice_ticks_falls_back_to_linear_ones() -> None:
    scale = Scale("log", 2.1, 4.9)
    ticks = choose_ticks(scale, at_most(8))
    assert len(ticks) >= 2
    assert all(2.1 <= t <= 4.9 for t in ticks)
    assert [scale.fraction(t) for t in ticks] == sorted(scale.fraction(t) for t in ticks)


def test_symlog_is_linear_inside_linthresh_1_and_logarithmic_outside() -> None:
    assert forward("symlog", 0.0) == 0.0
    assert forward("symlog", 0.5) == pytest.approx(0.5 / 0.9)
    assert forward("symlog", 10.0) - forward("symlog", 1.0) == pytest.approx(1.0)
    assert forward("symlog", -100.0) == -forward("symlog", 100.0)
    for value in (-1e6, -3.0, -1.0, -0.2, 0.0, 0.7, 1.0, 42.0, 1e9):
        assert inverse("symlog", forward("symlog", value)) == pytest.approx(value)
    scale = autoscale("symlog", [0.0, 4.0, 1400.0])
    assert scale.kind == "symlog"
    assert scale.low < 0
    assert choose_ticks(scale, at_most(8)) == [0, 1, 10, 100, 1000]
    negative = autoscale("symlog", [-5.0, 1400.0])
    assert choose_ticks(negative, at_most(8)) == [-10, -1, 0, 1, 10, 100, 1000]


def test_a_symlog_axis_with_no_value_near_0_is_a_log_axis_without_a_0_tick() -> None:
    scale = autoscale("symlog", [1.0, 3.0, 45.0, 137.0])  # max_concurrent, nothing oom
    assert scale.kind == "log"
    ticks = choose_ticks(scale, at_most(8))
    assert 0 not in ticks
    assert ticks == [1, 2, 5, 10, 20, 50, 100]


def test_a_scale_maps_its_limits_to_0_and_1() -> None:
    log = Scale("log", 1.0, 100.0)
    assert (log.fraction(1.0), log.fraction(10.0), log.fraction(100.0)) == (0.0, 0.5, 1.0)
    linear = Scale("linear", -2.0, 2.0)
    assert linear.fraction(1.0) == 0.75


def test_values_no_axis_can_hold_are_left_out_and_never_break_the_limits() -> None:
    assert not representable("log", 0.0)
    assert not representable("log", -1.0)
    assert representable("symlog", -1.0)
    for kind in ("linear", "log", "symlog"):
        for bad in (math.nan, math.inf, -math.inf, None, 10 * LARGEST):
            assert not representable(kind, bad)
        scale = autoscale(kind, [-1e300, 5e-324, 1e-250, 1e250, 2.0, 300.0])
        assert math.isfinite(scale.low)
        assert math.isfinite(scale.high)
        assert scale.low < scale.high
        ticks = choose_ticks(scale, at_most(8))
        assert len(ticks) >= 2
    assert autoscale("log", [0.0, -3.0]) == Scale("log", 1.0, 10.0)  # nothing to hold


def test_tick_labels_are_plain_numbers() -> None:
    assert [label(v) for v in (0.0, 0.25, 2.0, 1000.0, 1e6, -10.0)] == [
        "0", "0.25", "2", "1000", "1e+06", "-10"]


# --- the drawing primitives ------------------------------------------------------------


def parse(document: bytes) -> ET.Element:
    root = ET.fromstring(document)
    assert root.tag == f"{SVG}svg"
    return root


def test_text_is_escaped_for_xml_and_controls_show_as_escapes() -> None:
    canvas = Canvas(100, 50)
    canvas.text((10, 20), HOSTILE, size=10)
    document = canvas.document()
    document.decode("ascii")  # everything else as character references
    assert b"<script" not in document
    assert b"</text><" not in document
    assert not any(byte < 0x20 and byte != 0x0A for byte in document)  # no raw controls
    [text] = parse(document).iter(f"{SVG}text")
    shown = single_line(HOSTILE).replace("\ufffe", "\\ufffe")
    assert text.text == shown
    for escaped in ("\\x1b", "\\u202e", "\\ud800", "\\ufffe", "\\n", "\\x00"):
        assert escaped in shown
    assert escape('a"b\'c<d>&') == "a&quot;b&apos;c&lt;d&gt;&amp;"


def test_a_document_is_deterministic_ascii_xml() -> None:
    def draw() -> bytes:
        canvas = Canvas(200, 100)
        canvas.path([[(0, 0), (10.04, 20.06)], [], [(30, 40)]], Stroke("#123456", 1.5, "2 1"))
        canvas.markers([(5, 5), (6, 6)], "triangle", 8, "#abcdef", opacity=0.3)
        canvas.markers([(7, 7)], "cross", 10, "#d62728", edge="#ffffff")
        canvas.markers([(8, 8)], "circle", 4, "#000000")
        canvas.rect((1, 2), 3, 4, fill="#ffffff", fill_opacity=0.5, stroke=Stroke("#ccc"))
        canvas.text((50, 50), "y label", size=12, anchor="middle", vertical=True)
        return canvas.document()

    first = draw()
    assert first == draw()
    root = parse(first)
    [path, triangles, cross] = root.iter(f"{SVG}path")
    assert path.get("d") == "M0 0 10 20.1 M30 40"  # a gap: two runs, one decimal
    assert path.get("stroke-dasharray") == "2 1"
    assert triangles.get("d", "").count("Z") == 2
    assert cross.get("stroke") == "#ffffff"
    assert len(list(root.iter(f"{SVG}circle"))) == 1
    assert [t.get("transform") for t in root.iter(f"{SVG}text")] == ["rotate(-90 50 50)"]


def test_coordinates_are_short_and_always_finite() -> None:
    assert [number(v) for v in (12.5, 40.0, -3.0, -0.04, 1 / 3)] == ["12.5", "40", "-3", "0",
                                                                      "0.3"]
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError, match="finite"):
            number(bad)


def test_text_is_cut_to_its_room_quickly() -> None:
    assert fit("short", 200, 10) == "short"
    cut = fit("a fairly long label " * 10, 120, 10)
    assert cut.endswith("...")
    assert text_width(cut, 10) <= 120
    started = time.perf_counter()
    huge = fit("\x1b" * 200_000, 300, 12)
    assert time.perf_counter() - started < 1.0
    assert huge.startswith("\\x1b")
    assert huge.endswith("...")


def test_the_legend_geometry() -> None:
    box = (10.0, 10.0, 20.0, 10.0)
    assert inside((15, 15), box)
    assert not inside((35, 15), box)
    assert crosses((0, 15), (40, 15), box)  # straight through, no end inside
    assert not crosses((0, 0), (40, 5), box)
    assert crosses((15, 0), (15, 12), box)


# --- the figures -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def tracks() -> tuple[Track, ...]:
    return load_tracks(default_tracks_dir())


def measured_as(sweeps: list[Sweep], change: Callable[[Case, dict[str, Any]], Any] | None = None
                ) -> list[MeasuredSweep]:
    """``sweeps`` measured against a student who answers as the reference, then
    ``change(case, answer)`` (the row, or an outcome)."""
    def call(case: Case) -> CallOutcome:
        answer = dict(reference_expected(case))
        if change is not None:
            changed = change(case, answer)
            if isinstance(changed, CallOutcome):
                return changed
        return CallOutcome("ok", value=answer)

    return measure(sweeps, call, reference_expected)


def figure(measured: list[MeasuredSweep]) -> tuple[bytes, ET.Element]:
    uri = figure_uri(measured)
    prefix = "data:image/svg+xml;base64,"
    assert uri.startswith(prefix)
    document = base64.b64decode(uri.removeprefix(prefix), validate=True)
    return document, parse(document)


def plotted(root: ET.Element, tag: str) -> list[ET.Element]:
    """The ``tag`` elements of the plots, not of their legends."""
    legends = {id(e) for g in root.iter(f"{SVG}g") if g.get("class") == "legend"
               for e in g.iter()}
    return [e for e in root.iter(f"{SVG}{tag}") if id(e) not in legends]


def student_paths(root: ET.Element, color: str) -> list[str]:
    return [p.get("d", "") for p in plotted(root, "path")
            if p.get("stroke") == color and p.get("stroke-dasharray") == DASHES["--"]]


def titles(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{SVG}text") if t.get("font-size") == "13"]


def texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{SVG}text")]


def test_every_figure_is_well_formed_small_and_deterministic(tracks: tuple[Track, ...]) -> None:
    for track in tracks:
        measured = measured_as(track_sweeps(track))
        for function in {m.sweep.function for m in measured}:
            group = [m for m in measured if m.sweep.function == function]
            document, root = figure(group)
            assert figure(group)[0] == document
            panels = sum(len(m.sweep.panels) for m in group)
            assert float(root.get("width", 0)) == 440 * panels
            assert len(document) < 12_000 * panels
            assert len(titles(root)) == panels
            assert all(" against " in title for title in titles(root))
            assert len([g for g in root.iter(f"{SVG}g") if g.get("class") == "legend"]) \
                == panels


def test_the_load_figure_shows_both_curves_guides_and_infinite_values(
        tracks: tuple[Track, ...]) -> None:
    [load] = measured_as([track_sweeps(tracks[0])[0]])
    assert any(row is not None and math.isinf(row["p99_latency_ms"]) for row in load.student)
    _, root = figure([load])
    shown = texts(root)
    assert titles(root) == ["p99 and p999 against arrival rate"]
    for entry in ("reference p99", "yours: p99", "reference p999", "yours: p999", INF_LABEL,
                  "SLO 200 ms", "saturation (320 req/s)"):
        assert shown.count(entry) == 1, entry
    assert "invariant violated" not in shown
    assert "latency (ms)" in shown
    assert "arrival rate (req/s)" in shown
    assert {"20", "50", "100", "200", "500", "1000"} <= set(shown)  # 1-2-5 on the log axis
    triangles = [p for p in plotted(root, "path") if p.get("fill") in COLORS]
    assert {p.get("fill") for p in triangles} == set(COLORS)  # a row for each field
    tops = {p.get("fill"): float(p.get("d", "").split()[1]) for p in triangles
            if p.get("fill-opacity") is None}
    assert tops[COLORS[0]] < tops[COLORS[1]]  # p99's row above p999's
    for color, name in zip(COLORS, ("p99_latency_ms", "p999_latency_ms"), strict=True):
        [mine] = [p for p in triangles if p.get("fill") == color and not p.get("fill-opacity")]
        assert mine.get("d", "").count("M") == sum(math.isinf(r[name]) for r in load.student
                                                   if r)


def test_missing_values_and_values_a_log_axis_cannot_show_are_gaps(
        tracks: tuple[Track, ...]) -> None:
    sweep = track_sweeps(tracks[0])[0]

    def change(case: Case, answer: dict[str, Any]) -> Any:
        index = sweep.cases.index(case)
        if index == 3:
            return CallOutcome("raised", message="ZeroDivisionError: float division by zero")
        if index == 5:
            answer["p99_latency_ms"] = math.nan
        if index == 8:
            answer["p999_latency_ms"] = 0.0  # no place on a log axis
        return None

    [load] = measured_as([sweep], change)
    _, root = figure([load])
    for color, name in zip(COLORS, ("p99_latency_ms", "p999_latency_ms"), strict=True):
        [path] = student_paths(root, color)
        assert path.count("M") == runs([real(row, name) for row in load.student]), name
    assert runs([real(row, "p99_latency_ms") for row in load.student]) >= 3  # gaps at 3, 5
    assert runs([real(row, "p999_latency_ms") for row in load.student]) >= 3  # at 3, 8


def runs(values: list[float | None]) -> int:
    """How many unbroken runs of values a log axis can show ``values`` has."""
    shown = [v is not None and math.isfinite(v) and v > 0 for v in values]
    return sum(1 for i, ok in enumerate(shown) if ok and (i == 0 or not shown[i - 1]))


def test_a_violation_is_a_red_x_on_the_point_and_in_the_legend(
        tracks: tuple[Track, ...]) -> None:
    sweep = track_sweeps(tracks[0])[0]

    def change(case: Case, answer: dict[str, Any]) -> Any:
        if sweep.cases.index(case) == 6:
            answer["p99_latency_ms"] /= 3  # falls as the load rises
        return None

    [load] = measured_as([sweep], change)
    assert {v.index for v in load.violations} >= {6}
    _, root = figure([load])
    assert texts(root).count("invariant violated") == 1
    [crosses_drawn] = [p for p in plotted(root, "path")
                       if p.get("fill") == VIOLATION and p.get("stroke") == "#ffffff"]
    assert crosses_drawn.get("d", "").count("Z") == len({v.index for v in load.violations})


def test_a_hostile_label_is_escaped_and_the_figure_still_parses(
        tracks: tuple[Track, ...]) -> None:
    [load] = measured_as([track_sweeps(tracks[0])[0]])
    panel = load.sweep.panels[0]
    panel = replace(panel, y_label=HOSTILE, guides=(*panel.guides, Guide("y", 50.0, HOSTILE)))
    load = replace(load, sweep=replace(load.sweep, x_label=HOSTILE, panels=(panel,)))
    document, root = figure([load])
    assert b"<script" not in document
    assert b"</text><script" not in document
    assert not any(byte < 0x20 and byte != 0x0A for byte in document)
    shown = texts(root)
    assert sum("<script>" in text for text in shown) >= 3  # as text, for the reader
    assert all("\x1b" not in text and "\n" not in text for text in shown)


def test_a_student_curve_with_no_point_on_the_axis_draws_nothing_but_its_triangles(
        tracks: tuple[Track, ...]) -> None:
    sweep = next(s for s in track_sweeps(tracks[0]) if s.name == "bandwidth")

    def change(case: Case, answer: dict[str, Any]) -> Any:
        answer["cold_start_ms"] = math.inf
        return None

    [bandwidth] = measured_as([sweep], change)
    _, root = figure([bandwidth])
    assert student_paths(root, COLORS[0]) == []
    assert INF_LABEL in texts(root)
    assert "yours: cold start" in texts(root)


def test_no_plotted_sweep_is_an_error() -> None:
    with pytest.raises(ValueError, match="no sweep to plot"):
        figure_uri([])
