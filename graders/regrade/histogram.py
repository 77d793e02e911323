"""The class score histogram as a PNG, drawn with matplotlib (imported only here)."""

from __future__ import annotations

import importlib.util
import io
from collections.abc import Sequence
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


def write_histogram(path: Path, edges: Sequence[float], counts: Sequence[int], *,
                    title: str) -> None:
    """Draw bars of ``counts`` between ``edges`` and write them to ``path`` (PNG), through a
    temp file the grader creates and a rename."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        raise HistogramError(MISSING) from None
    figure = Figure(figsize=(7, 4), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    widths = [high - low for low, high in zip(edges, edges[1:], strict=False)]
    axes.bar(list(edges[:-1]), list(counts), width=widths, align="edge",
             edgecolor="black", color="#4c72b0")
    axes.set_xlabel("score")
    axes.set_ylabel("submissions")
    axes.set_title(title)
    axes.set_xlim(edges[0], edges[-1])
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    figure.tight_layout()
    picture = io.BytesIO()
    figure.savefig(picture, format="png")
    write_bytes_atomically(path, picture.getvalue())
