"""The class score histogram as a PNG, drawn with matplotlib (imported only here)."""

from __future__ import annotations

import importlib.util
import io
from collections.abc import Mapping, Sequence
from pathlib import Path

from graders.errors import GraderError
from graders.results.files import write_bytes_atomically

MISSING = ("the score histogram needs matplotlib: install the grader with its 'report' "
           "extra (pip install 'serving-lab-grader[report]'), or pass --no-histogram")


class HistogramError(GraderError):
    """matplotlib is missing, or the PNG cannot be drawn."""


def check_available() -> None:
    """Raise :class:`HistogramError` naming the ``report`` extra if matplotlib is missing."""
    if importlib.util.find_spec("matplotlib") is None:
        raise HistogramError(MISSING)


#: Colours of the bars of submissions that were not graded, by status.
APART_COLOURS = {"grader_failed": "#c44e52", "timed_out": "#dd8452", "rejected": "#8c8c8c",
                 "missing": "#b0b0b0"}


def write_histogram(path: Path, edges: Sequence[float], counts: Sequence[int], *,
                    title: str, apart: Mapping[str, int] | None = None) -> None:
    """Draw a bar of ``counts`` per bin of ``edges`` (side by side, named by its range)
    and, to their right past a gap, one hatched
    bar per reason a submission was not graded (``apart``: a grader failure is never drawn
    as a score of 0), and write them to ``path`` (PNG), through a temp file the grader
    creates and a rename."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        raise HistogramError(MISSING) from None
    figure = Figure(figsize=(7, 4), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    # one bar per bin, side by side and named by its range: the bins fit the class (finer
    # where most scores are), so their widths in points differ
    ranges = [f"{low:g}-{high:g}" for low, high in zip(edges, edges[1:], strict=False)]
    axes.bar(range(len(counts)), list(counts), width=0.9, edgecolor="black",
             color="#4c72b0")
    ticks: list[float] = [float(index) for index in range(len(counts))]
    names = ranges
    for index, (status, count) in enumerate(sorted((apart or {}).items())):
        x = len(counts) + 0.5 + index
        axes.bar([x], [count], width=0.9, edgecolor="black", hatch="//",
                 color=APART_COLOURS.get(status, "#8c8c8c"),
                 label=f"not graded: {status.replace('_', ' ')}")
        ticks, names = [*ticks, x], [*names, status.replace("_", " ")]
    axes.set_xticks(ticks, names, rotation=45, ha="right", fontsize="small")
    axes.set_xlabel("score (bins that fit the class)"
                    + ("; hatched: not graded, apart from the scores" if apart else ""))
    axes.set_ylabel("submissions")
    axes.set_title(title)
    if apart:
        axes.legend(loc="upper left", fontsize="small")
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    figure.tight_layout()
    picture = io.BytesIO()
    figure.savefig(picture, format="png")
    write_bytes_atomically(path, picture.getvalue())
