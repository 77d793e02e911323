"""The legend of a feedback plot: its entries, drawn where they hide the least.

Like matplotlib's ``loc="best"``: of nine places in the plot area, the one whose box
covers the fewest markers and line segments, the first in :data:`PLACES` on a tie.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from graders.feedback.svg import Canvas, Marker, Point, Stroke, fit, text_width

#: A box: left, top, width, height.
Box = tuple[float, float, float, float]
SIZE, ROW, SAMPLE, PAD = 10.0, 14.0, 24.0, 6.0
#: Where a legend may go, in matplotlib's order of preference.
PLACES = (("upper", "right"), ("upper", "left"), ("lower", "left"), ("lower", "right"),
          ("center", "right"), ("center", "left"), ("lower", "center"), ("upper", "center"),
          ("center", "center"))


@dataclass(frozen=True)
class Entry:
    """One legend entry: its label and its sample (a line, a marker or both)."""

    label: str
    stroke: Stroke | None = None
    marker: Marker | None = None
    color: str = "#222222"
    size: float = 0.0
    edge: str | None = None


def draw_legend(canvas: Canvas, area: Box, entries: Sequence[Entry],
                runs: Sequence[Sequence[Point]], points: Sequence[Point]) -> None:
    """``entries`` in a box inside ``area``, where it covers the fewest of ``points`` and
    of the segments of ``runs``; nothing without entries."""
    if not entries:
        return
    room = area[2] - SAMPLE - 5 * PAD
    labels = [fit(entry.label, room, SIZE) for entry in entries]
    width = SAMPLE + 3 * PAD + max(text_width(text, SIZE) for text in labels)
    height = ROW * len(entries) + 8
    left, top = place(area, width, height, runs, points)
    with canvas.group("legend"):
        canvas.rect((left, top), width, height, fill="#ffffff", fill_opacity=0.85,
                    stroke=Stroke("#cccccc", 0.8))
        start, end = left + PAD, left + PAD + SAMPLE
        for row, (entry, text) in enumerate(zip(entries, labels, strict=True)):
            y = top + 4 + ROW * (row + 0.5)
            if entry.stroke is not None:
                canvas.line((start, y), (end, y), entry.stroke)
            if entry.marker is not None:
                canvas.markers([((start + end) / 2, y)], entry.marker, min(entry.size, 10.0),
                               entry.color, edge=entry.edge)
            canvas.text((end + PAD, y + SIZE * 0.35), text, size=SIZE)


def place(area: Box, width: float, height: float, runs: Sequence[Sequence[Point]],
          points: Sequence[Point]) -> Point:
    """The top left corner of the best place for a ``width`` by ``height`` box."""
    left, top, room_x, room_y = area
    xs = {"left": left + PAD, "center": left + (room_x - width) / 2,
          "right": left + room_x - width - PAD}
    ys = {"upper": top + PAD, "center": top + (room_y - height) / 2,
          "lower": top + room_y - height - PAD}
    segments = [pair for run in runs for pair in pairwise(run)]

    def covered(corner: Point) -> int:
        box = (*corner, width, height)
        return (sum(inside(p, box) for p in points)
                + sum(crosses(p, q, box) for p, q in segments))

    return min(((xs[h], ys[v]) for v, h in PLACES), key=covered)


def inside(point: Point, box: Box) -> bool:
    """Whether ``point`` is in ``box`` (edges included)."""
    return box[0] <= point[0] <= box[0] + box[2] and box[1] <= point[1] <= box[1] + box[3]


def crosses(start: Point, end: Point, box: Box) -> bool:
    """Whether the segment from ``start`` to ``end`` meets ``box`` (Liang-Barsky)."""
    (x, y), (dx, dy) = start, (end[0] - start[0], end[1] - start[1])
    low, high = 0.0, 1.0
    for step, room in ((-dx, x - box[0]), (dx, box[0] + box[2] - x), (-dy, y - box[1]),
                       (dy, box[1] + box[3] - y)):
        if step == 0:
            if room < 0:
                return False
            continue
        t = room / step
        if step < 0:
            low = max(low, t)
        else:
            high = min(high, t)
        if low > high:
            return False
    return True
