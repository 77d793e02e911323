"""Plots of the feedback report: the student's curves against the reference, as inline SVG.

matplotlib is an optional extra; it is imported only here, and only when a report is
asked for. Figures are drawn with the object-oriented API (no pyplot, no global backend).
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graders.errors import ReportError
from graders.feedback.checks import Row, real
from graders.feedback.measure import MeasuredSweep

if TYPE_CHECKING:
    from matplotlib.axes import Axes

INSTALL_HINT = "pip install 'serving-lab-grader[report]'"
#: The same, in the student bundle (its package is serving-lab-student, installed editable).
BUNDLE_INSTALL_HINT = "pip install -e '.[report]' (in the folder of the lab's pyproject.toml)"
FIELD_LABELS = {
    "p99_latency_ms": "p99", "p999_latency_ms": "p999", "total_p99_ms": "total p99",
    "throughput_gain": "throughput gain", "max_concurrent": "max_concurrent",
    "cold_start_ms": "cold start", "exposed_first_request_ms": "exposed latency",
}
COLORS = ("#1f5fbf", "#d9731a")
VIOLATION = "#d62728"
#: Where infinite values are drawn, as a fraction of the axes' height.
INF_HEIGHT = 0.96
INF_LABEL = "infinite (drawn at the top)"
#: The vertical step between the rows of infinite markers of a panel's fields.
INF_STEP = 0.035
INF_LEGEND_COLOR = "#555555"
#: Colour and line style of the guides: vertical (saturation, scale-out) and horizontal
#: (SLO, service time, pass mark) ones differ, so their legend entries do too.
GUIDE_STYLES = {"x": ("#555555", ":"), "y": ("#b8860b", "-.")}
PANEL_WIDTH_IN = 4.6


def require_matplotlib(flag: str) -> None:
    """Raise :class:`ReportError` naming ``flag`` and the install command if matplotlib is
    missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ReportError(f"{flag} needs matplotlib, which is not installed: "
                          f"{install_hint()}") from None


def install_hint() -> str:
    """The command that installs the report extra where this grader is: the student bundle
    (which carries golden.json) or the grader's own package."""
    bundle = (Path(__file__).parents[1] / "golden.json").exists()
    return BUNDLE_INSTALL_HINT if bundle else INSTALL_HINT


def figure_uri(sweeps: Sequence[MeasuredSweep]) -> str:
    """One figure, a panel per plotted panel of ``sweeps``, as an SVG ``data:`` URI."""
    import matplotlib
    from matplotlib.figure import Figure

    panels = [(m, i) for m in sweeps if m.plotted for i in range(len(m.sweep.panels))]
    if not panels:
        raise ValueError("no sweep to plot")
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "serving-lab",
                                "font.size": 9, "axes.titlesize": 10}):
        width = PANEL_WIDTH_IN * len(panels)
        figure = Figure(figsize=(width, 3.4))  # fixed margins: constrained layout is slow
        figure.subplots_adjust(left=0.8 / width, right=1 - 0.1 / width, bottom=0.15,
                               top=0.9, wspace=0.3)
        axes = figure.subplots(1, len(panels), squeeze=False)[0]
        for ax, (measured, index) in zip(axes, panels, strict=True):
            _draw(ax, measured, index)
        buffer = io.BytesIO()
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _tick(value: float, _position: int | None = None) -> str:
    return f"{value:g}"


def _tidy_y(ax: Axes, scale: str) -> None:
    """A narrow positive range reads better on a linear axis; a few decades, with
    ticks at 1, 2 and 5 of each."""
    from matplotlib.ticker import LogLocator

    low, high = ax.get_ylim()
    if scale not in ("log", "symlog") or low <= 0:
        return
    if high / low < 10:
        ax.set_yscale("linear")
    elif high / low < 1000 and scale == "log":
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))


def _values(rows: Sequence[Row], field: str) -> list[float | None]:
    return [real(row, field) for row in rows]


def _draw(ax: Axes, measured: MeasuredSweep, index: int) -> None:
    from matplotlib.ticker import FuncFormatter

    sweep = measured.sweep
    panel = sweep.panels[index]
    ax.set_xscale(sweep.x_scale)
    if panel.y_scale == "symlog":
        ax.set_yscale("symlog", linthresh=1.0)
    else:
        ax.set_yscale(panel.y_scale)
    positive = panel.y_scale == "log"
    xs = list(sweep.xs)
    for index, (color, field) in enumerate(zip(COLORS, panel.fields, strict=False)):
        name = FIELD_LABELS.get(field, field)
        height = INF_HEIGHT - INF_STEP * index  # each field's triangles on a row of their own
        _line(ax, xs, _values(measured.reference, field), positive, color=color,
              label=f"reference {name}", style={"linestyle": "-", "linewidth": 4,
                                                "alpha": 0.3}, height=height)
        _line(ax, xs, _values(measured.student, field), positive, color=color,
              label=f"yours: {name}", style={"linestyle": "--", "linewidth": 1.2,
                                            "marker": "o", "markersize": 3.5}, yours=True,
              height=height)
    for guide in panel.guides:
        draw = ax.axvline if guide.axis == "x" else ax.axhline
        color, linestyle = GUIDE_STYLES[guide.axis]
        draw(guide.value, color=color, linestyle=linestyle, linewidth=1, label=guide.label)
    _violations(ax, measured, panel.fields, positive)
    fields = " and ".join(FIELD_LABELS.get(f, f) for f in panel.fields)
    ax.set_title(f"{fields} against {sweep.x_label.split(' (')[0]}")
    ax.set_xlabel(sweep.x_label)
    ax.set_ylabel(panel.y_label)
    _tidy_y(ax, panel.y_scale)
    ax.grid(True, which="major", alpha=0.25)
    ax.minorticks_off()
    for axis in (ax.xaxis, ax.yaxis):  # plain numbers: mathtext labels are slow to lay out
        axis.set_major_formatter(FuncFormatter(_tick))
    ax.legend(fontsize=7, loc="best")


def _line(ax: Axes, xs: Sequence[float], ys: Sequence[float | None], positive: bool, *,
          color: str, label: str, style: dict[str, Any], yours: bool = False,
          height: float = 0.0) -> None:
    """A curve with gaps where there is no value; infinite values as ^ at the top
    (the student's first ones labelled in the legend)."""
    finite = [math.nan if y is None or math.isinf(y) or (positive and y <= 0) else y
              for y in ys]
    if all(math.isnan(y) for y in finite) and not any(y is not None and math.isinf(y)
                                                        for y in ys):
        return
    ax.plot(xs, finite, color=color, label=label, **style)
    infinite = [x for x, y in zip(xs, ys, strict=True) if y is not None and math.isinf(y)]
    if infinite:
        if yours and not any(line.get_label() == INF_LABEL for line in ax.get_lines()):
            # the legend's entry: a neutral triangle of its own, never one a curve hides
            ax.plot([], [], linestyle="none", marker="^", color=INF_LEGEND_COLOR,
                    markersize=6, label=INF_LABEL)
        ax.plot(infinite, [height or INF_HEIGHT] * len(infinite), linestyle="none",
                marker="^", color=color, alpha=style.get("alpha", 1.0), markersize=6,
                transform=ax.get_xaxis_transform(), label=None)


def _violations(ax: Axes, measured: MeasuredSweep, fields: Sequence[str],
                positive: bool) -> None:
    marks = [v for v in measured.violations if v.field in fields]
    if not marks:
        return
    finite_x, finite_y, top_x = [], [], []
    for violation in marks:
        x = measured.sweep.xs[violation.index]
        y = real(measured.student[violation.index], violation.field)
        if y is None or math.isinf(y) or (positive and y <= 0):
            top_x.append(x)
        else:
            finite_x.append(x)
            finite_y.append(y)
    style: dict[str, Any] = {"linestyle": "none", "marker": "X", "markersize": 10,
                             "color": VIOLATION, "markeredgecolor": "white", "zorder": 5}
    if finite_x:
        ax.plot(finite_x, finite_y, label="invariant violated", **style)
    if top_x:
        ax.plot(top_x, [INF_HEIGHT] * len(top_x), transform=ax.get_xaxis_transform(),
                label=None if finite_x else "invariant violated", **style)
