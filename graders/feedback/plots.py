"""Plots of the feedback report: the student's curves against the reference, as inline SVG.

What each panel shows is decided here; the axes come from :mod:`graders.feedback.scales`
and the drawing from :mod:`graders.feedback.svg` (standard library only, so the page
needs nothing beyond the grader's base install).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from graders.feedback.checks import Row, real
from graders.feedback.curves import Panel
from graders.feedback.legend import Entry, draw_legend
from graders.feedback.measure import MeasuredSweep
from graders.feedback.scales import Kind, Scale, autoscale, choose_ticks, label, representable
from graders.feedback.svg import Canvas, Marker, Point, Stroke, fit, text_width
from graders.reality.curves import RealityCurve, RealityPoint

FIELD_LABELS = {
    "p99_latency_ms": "p99", "p999_latency_ms": "p999", "total_p99_ms": "total p99",
    "throughput_gain": "throughput gain", "max_concurrent": "max_concurrent",
    "cold_start_ms": "cold start", "exposed_first_request_ms": "exposed latency",
}
COLORS = ("#1f5fbf", "#d9731a")
#: The reality curve: its colour, the field it goes beside, the flips' diamonds.
REALITY = "#2e8b3e"
REALITY_FIELDS = {"queueing_latency": "p99_latency_ms", "batching_tax": "total_p99_ms"}
FLIP, FLIP_COLOR = 11.0, "#7b3fa0"
VIOLATION = "#d62728"
#: Where infinite values are drawn, as a fraction of the plot area's height.
INF_HEIGHT = 0.96
INF_LABEL = "infinite (drawn at the top)"
#: The vertical step between the rows of infinite markers of a panel's fields.
INF_STEP = 0.035
INF_LEGEND_COLOR = "#555555"
#: Colour and line style of the guides: vertical (saturation, scale-out) and horizontal
#: (SLO, service time, pass mark) ones differ, so their legend entries do too.
GUIDE_STYLES = {"x": ("#555555", ":"), "y": ("#b8860b", "-.")}
#: Line styles as SVG dash patterns, for a line 1.3 wide.
DASHES = {"-": None, "--": "5.9 2.6", ":": "1.3 2.2", "-.": "8.5 2.1 1.3 2.1"}

PANEL_WIDTH, PANEL_HEIGHT = 440.0, 330.0
TOP, BOTTOM, RIGHT = 30.0, 46.0, 16.0
TICK_SIZE, LABEL_SIZE, TITLE_SIZE = 11.0, 12.0, 13.0
FRAME, GRID = "#333333", "#dddddd"
#: Marker sizes: the student's dots, infinite values' triangles, violations' crosses.
DOT, TRIANGLE, CROSS = 4.7, 8.0, 13.0
MAX_X_TICKS, MAX_Y_TICKS = 9, 8


@dataclass(frozen=True)
class _Area:
    """A panel's plot area in pixels, and its scales."""

    left: float
    top: float
    width: float
    height: float
    x: Scale
    y: Scale

    def point(self, x: float, y: float) -> Point:
        """Where the value ``(x, y)`` is drawn."""
        return (self.left + self.width * self.x.fraction(x),
                self.top + self.height * (1.0 - self.y.fraction(y)))

    def top_row(self, x: float, height: float) -> Point:
        """``x`` at ``height``, a fraction of the area's height (for infinite values)."""
        return self.left + self.width * self.x.fraction(x), self.top + self.height * (
            1.0 - height)


@dataclass
class _Drawing:
    """A panel being drawn: its legend's entries, and what the legend should not hide."""

    canvas: Canvas
    area: _Area
    legend: list[Entry] = field(default_factory=list)
    runs: list[list[Point]] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)

    def once(self, entry: Entry) -> None:
        """Add ``entry`` to the legend unless an entry has its label already."""
        if all(e.label != entry.label for e in self.legend):
            self.legend.append(entry)

    def path(self, runs: list[list[Point]], stroke: Stroke, *, round_cap: bool = False) -> None:
        """Draw a line (the legend keeps clear of it)."""
        self.canvas.path(runs, stroke, cap="round" if round_cap else "butt")
        self.runs.extend(runs)

    def markers(self, points: list[Point], shape: Marker, size: float, color: str, *,
                opacity: float = 1.0, edge: str | None = None) -> None:
        """Draw markers (the legend keeps clear of them)."""
        self.canvas.markers(points, shape, size, color, opacity=opacity, edge=edge)
        self.points.extend(points)


def figure_uri(sweeps: Sequence[MeasuredSweep], reality: RealityCurve | None = None) -> str:
    """One figure, a panel per plotted panel of ``sweeps``, as an SVG ``data:`` URI;
    ``reality`` (the function's exact or simulated p99) is drawn on its field's panel."""
    panels = [(m, i) for m in sweeps if m.plotted for i in range(len(m.sweep.panels))]
    if not panels:
        raise ValueError("no sweep to plot")
    canvas = Canvas(PANEL_WIDTH * len(panels), PANEL_HEIGHT)
    for column, (measured, index) in enumerate(panels):
        shown = reality if reality is not None and REALITY_FIELDS.get(
            reality.function) in measured.sweep.panels[index].fields else None
        _draw(canvas, PANEL_WIDTH * column, measured, index, shown)
    return "data:image/svg+xml;base64," + base64.b64encode(canvas.document()).decode("ascii")


def _values(rows: Sequence[Row], name: str) -> list[float | None]:
    return [real(row, name) for row in rows]


def _draw(canvas: Canvas, offset: float, measured: MeasuredSweep, index: int,
          reality: RealityCurve | None = None) -> None:
    sweep = measured.sweep
    panel = sweep.panels[index]
    xs = list(sweep.xs)
    curves = [(color, name, _values(measured.reference, name), _values(measured.student, name))
              for color, name in zip(COLORS, panel.fields, strict=False)]
    x_values = [*xs, *(g.value for g in panel.guides if g.axis == "x")]
    y_values = [*(y for _, _, ref, mine in curves for y in (*ref, *mine)),
                *(g.value for g in panel.guides if g.axis == "y"),
                *(y for p in _real_points(reality) for y in (p.p99_ms - p.half_ms,
                                                             p.p99_ms + p.half_ms))]
    area, x_ticks, y_ticks = _layout(offset, autoscale(sweep.x_scale, x_values),
                                     autoscale(panel.y_scale, y_values))
    drawing = _Drawing(canvas, area)
    _axes(drawing, x_ticks, y_ticks)
    for row, (color, name, reference, student) in enumerate(curves):
        shown = FIELD_LABELS.get(name, name)
        height = INF_HEIGHT - INF_STEP * row  # each field's triangles on a row of their own
        _curve(drawing, xs, reference, panel.y_scale, height,
               Entry(f"reference {shown}", Stroke(color, 5.3, opacity=0.3)))
        _curve(drawing, xs, student, panel.y_scale, height,
               Entry(f"yours: {shown}", Stroke(color, 1.6, DASHES["--"]), "circle", color, DOT))
    if reality is not None:
        _reality(drawing, reality)
    _guides(drawing, panel)
    _violations(drawing, measured, panel)
    canvas.rect((area.left, area.top), area.width, area.height, stroke=Stroke(FRAME, 1.0))
    fields = " and ".join(FIELD_LABELS.get(f, f) for f in panel.fields)
    _labels(canvas, offset, area, f"{fields} against {sweep.x_label.split(' (')[0]}",
            sweep.x_label, panel.y_label)
    draw_legend(canvas, (area.left, area.top, area.width, area.height), drawing.legend,
                drawing.runs, drawing.points)


def _fits(ticks: list[float], scale: Scale, length: float, limit: int,
          room: Callable[[float, float], float]) -> bool:
    """At most ``limit`` ticks, neighbours at least ``room(a, b)`` apart on ``length``."""
    places = [scale.fraction(t) * length for t in ticks]
    return len(ticks) <= limit and all(
        b - a >= room(s, t) for (a, s), (b, t) in pairwise(zip(places, ticks, strict=True)))


def _layout(offset: float, x: Scale, y: Scale) -> tuple[_Area, list[float], list[float]]:
    """The plot area (its left margin fits the y ticks' labels) and the ticks of both axes."""
    height = PANEL_HEIGHT - TOP - BOTTOM
    y_ticks = choose_ticks(y, lambda ticks: _fits(ticks, y, height, MAX_Y_TICKS,
                                                  lambda a, b: TICK_SIZE * 1.6))
    left = 34.0 + max((text_width(label(t), TICK_SIZE) for t in y_ticks), default=0.0)
    width = PANEL_WIDTH - left - RIGHT

    def apart(a: float, b: float) -> float:
        return (text_width(label(a), TICK_SIZE) + text_width(label(b), TICK_SIZE)) / 2 + 10

    x_ticks = choose_ticks(x, lambda ticks: _fits(ticks, x, width, MAX_X_TICKS, apart))
    return _Area(offset + left, TOP, width, height, x, y), x_ticks, y_ticks


def _axes(drawing: _Drawing, x_ticks: list[float], y_ticks: list[float]) -> None:
    """Grid lines, tick marks and tick labels."""
    a, canvas = drawing.area, drawing.canvas
    bottom = a.top + a.height
    xs = [(t, a.point(t, a.y.low)[0]) for t in x_ticks]
    ys = [(t, a.point(a.x.low, t)[1]) for t in y_ticks]
    canvas.path([[(x, a.top), (x, bottom)] for _, x in xs]
                + [[(a.left, y), (a.left + a.width, y)] for _, y in ys], Stroke(GRID, 0.8))
    canvas.path([[(x, bottom), (x, bottom + 4)] for _, x in xs]
                + [[(a.left - 4, y), (a.left, y)] for _, y in ys], Stroke(FRAME, 0.8))
    for tick, x in xs:
        canvas.text((x, bottom + 5 + TICK_SIZE), label(tick), size=TICK_SIZE, anchor="middle")
    for tick, y in ys:
        canvas.text((a.left - 7, y + TICK_SIZE * 0.35), label(tick), size=TICK_SIZE,
                    anchor="end")


def _curve(drawing: _Drawing, xs: Sequence[float], ys: Sequence[float | None], kind: Kind,
           height: float, entry: Entry) -> None:
    """A curve with gaps where there is no value (or none a ``kind`` axis can show);
    infinite values as triangles at ``height`` (the student's in the legend once)."""
    a = drawing.area
    runs: list[list[Point]] = [[]]
    infinite = []
    for x, y in zip(xs, ys, strict=True):
        if a.x.holds(x) and y is not None and math.isinf(y):
            infinite.append(a.top_row(x, height))
        if a.x.holds(x) and y is not None and representable(kind, y) and a.y.holds(y):
            runs[-1].append(a.point(x, y))
        elif runs[-1]:
            runs.append([])
    runs = [run for run in runs if run]
    if not runs and not infinite or entry.stroke is None:
        return
    drawing.legend.append(entry)
    drawing.path(runs, entry.stroke, round_cap=entry.marker is None)
    if entry.marker is not None:
        drawing.markers([p for run in runs for p in run], entry.marker, entry.size, entry.color)
    if infinite:
        if entry.marker is not None:  # the legend's entry: a neutral triangle of its own
            drawing.once(Entry(INF_LABEL, marker="triangle", color=INF_LEGEND_COLOR,
                                size=TRIANGLE))
        drawing.markers(infinite, "triangle", TRIANGLE, entry.stroke.color,
                        opacity=entry.stroke.opacity)


def _real_points(curve: RealityCurve | None) -> list[RealityPoint]:
    """The curve's points that have a finite p99 (unstable ones are not drawn)."""
    if curve is None:
        return []
    return [p for p in curve.points if p.source != "unstable" and math.isfinite(p.p99_ms)]


def _reality(drawing: _Drawing, curve: RealityCurve) -> None:
    """The exact or simulated p99, its 95 % band, and a diamond where the SLO verdict of the
    formula and of reality differ."""
    a = drawing.area
    shown = [p for p in _real_points(curve) if a.x.holds(p.x)
             and a.y.holds(p.p99_ms) and a.y.holds(max(p.p99_ms - p.half_ms, a.y.low))
             and a.y.holds(min(p.p99_ms + p.half_ms, a.y.high))]
    if not shown:
        return
    simulated = any(p.source == "simulated" for p in shown)
    if any(p.half_ms > 0 for p in shown):
        upper = [a.point(p.x, min(p.p99_ms + p.half_ms, a.y.high)) for p in shown]
        lower = [a.point(p.x, max(p.p99_ms - p.half_ms, a.y.low)) for p in reversed(shown)]
        drawing.canvas.polygon([*upper, *lower], REALITY, opacity=0.18)
    label = "simulated p99 (95 % band)" if simulated else \
        f"exact p99 ({'M/M/c' if curve.service_cv == 1.0 else 'M/G/1'})"
    drawing.path([[a.point(p.x, p.p99_ms) for p in shown]], Stroke(REALITY, 1.8),
                 round_cap=True)
    drawing.legend.append(Entry(label, Stroke(REALITY, 1.8)))
    flips = [a.point(p.x, p.p99_ms) for p in shown if p.flips(curve.slo_ms)]
    if flips:
        drawing.markers(flips, "diamond", FLIP, FLIP_COLOR, edge="#ffffff")
        drawing.once(Entry("SLO verdict flips", marker="diamond", color=FLIP_COLOR,
                           size=FLIP, edge="#ffffff"))


def _guides(drawing: _Drawing, panel: Panel) -> None:
    """Vertical guides for axis "x", horizontal ones for "y", each in the legend."""
    a = drawing.area
    for guide in panel.guides:
        color, style = GUIDE_STYLES[guide.axis]
        stroke = Stroke(color, 1.3, DASHES[style])
        if guide.axis == "x" and a.x.holds(guide.value):
            x = a.point(guide.value, a.y.low)[0]
            drawing.path([[(x, a.top), (x, a.top + a.height)]], stroke)
        elif guide.axis == "y" and a.y.holds(guide.value):
            y = a.point(a.x.low, guide.value)[1]
            drawing.path([[(a.left, y), (a.left + a.width, y)]], stroke)
        else:
            continue
        drawing.legend.append(Entry(guide.label, stroke))


def _violations(drawing: _Drawing, measured: MeasuredSweep, panel: Panel) -> None:
    """A red X on every point that breaks an invariant; at the top when its value is not
    a number the axis can show."""
    a = drawing.area
    marks: list[Point] = []
    for violation in measured.violations:
        x = measured.sweep.xs[violation.index]
        if violation.field not in panel.fields or not a.x.holds(x):
            continue
        y = real(measured.student[violation.index], violation.field)
        if y is not None and representable(panel.y_scale, y) and a.y.holds(y):
            marks.append(a.point(x, y))
        else:
            marks.append(a.top_row(x, INF_HEIGHT))
    if marks:
        edge = "#ffffff"
        drawing.markers(list(dict.fromkeys(marks)), "cross", CROSS, VIOLATION, edge=edge)
        drawing.once(Entry("invariant violated", marker="cross", color=VIOLATION, size=CROSS,
                            edge=edge))


def _labels(canvas: Canvas, offset: float, a: _Area, title: str, x_label: str,
            y_label: str) -> None:
    """The title above the plot area, the axes' labels beside it, each cut to its room."""
    middle = a.left + a.width / 2
    _centred(canvas, title, TITLE_SIZE, (middle, TOP - 10), offset)
    _centred(canvas, x_label, LABEL_SIZE, (middle, PANEL_HEIGHT - 8), offset)
    canvas.text((offset + 16, a.top + a.height / 2), fit(y_label, a.height, LABEL_SIZE),
                size=LABEL_SIZE, anchor="middle", vertical=True)


def _centred(canvas: Canvas, text: str, size: float, at: Point, offset: float) -> None:
    """``text`` centred on ``at``, moved in as far as it must to stay on its panel."""
    text = fit(text, PANEL_WIDTH - 8, size)
    half = text_width(text, size) / 2
    x = min(max(at[0], offset + 4 + half), offset + PANEL_WIDTH - 4 - half)
    canvas.text((x, at[1]), text, size=size, anchor="middle")
