"""A small SVG writer: the drawing primitives of the feedback plots, standard library only.

Every text and attribute value is escaped for XML (:func:`escape`); coordinates are
written with one decimal, so the same drawing always gives the same, small, document.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal
from xml.sax.saxutils import escape as xml_escape

from graders.escaping import single_line

Point = tuple[float, float]
Anchor = Literal["start", "middle", "end"]
Marker = Literal["circle", "triangle", "cross", "diamond"]

FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
#: Estimates of characters' widths, in font sizes (for layout; no font is measured):
#: DejaVu Sans's, rounded up, so that a narrower font still fits.
_WIDTH_OF = {**dict.fromkeys(" .,:;'|!Iijl", 0.32), **dict.fromkeys("()[]{}-/frt", 0.42),
             **dict.fromkeys("mwMW", 0.9)}
#: Characters XML 1.0 forbids that :func:`graders.escaping.single_line` keeps.
_NONCHARACTERS = {0xFFFE: "\\ufffe", 0xFFFF: "\\uffff"}
#: Marker outlines around (0, 0) for a size of 1: an upward triangle, a thick X, a diamond.
_SHAPES: dict[str, tuple[Point, ...]] = {
    "triangle": ((0.0, -0.6), (0.55, 0.4), (-0.55, 0.4)),
    "diamond": ((0.0, -0.6), (0.45, 0.0), (0.0, 0.6), (-0.45, 0.0)),
    "cross": tuple((round((x - y) / math.sqrt(8), 4), round((x + y) / math.sqrt(8), 4))
                   for x, y in ((0.35, 1), (0.35, 0.35), (1, 0.35), (1, -0.35),
                                (0.35, -0.35), (0.35, -1), (-0.35, -1), (-0.35, -0.35),
                                (-1, -0.35), (-1, 0.35), (-0.35, 0.35), (-0.35, 1))),
}


def escape(text: str) -> str:
    """``text`` as XML character data or attribute value: control characters, line breaks
    and the characters XML forbids shown as escapes (``\\x1b``), markup and quotes escaped."""
    visible = single_line(text).translate(_NONCHARACTERS)
    return xml_escape(visible, {'"': "&quot;", "'": "&apos;"})


def number(value: float) -> str:
    """A coordinate with one decimal and no trailing zero: ``12.5``, ``40``, ``-3``."""
    if not math.isfinite(value):
        raise ValueError(f"a coordinate must be finite, not {value}")
    text = f"{value:.1f}".removesuffix(".0")
    return "0" if text == "-0" else text


def _width(char: str) -> float:
    width = _WIDTH_OF.get(char)
    return width if width is not None else 0.72 if char.isupper() else 0.64


def text_width(text: str, size: float) -> float:
    """An estimate of ``text``'s width at font size ``size``."""
    return size * sum(_width(char) for char in text)


def fit(text: str, room: float, size: float) -> str:
    """``text`` as it will show (control characters as escapes), cut to fit ``room`` at
    font size ``size``, ``...`` marking a cut. Reads no further than the cut."""
    text = single_line(text)
    ends = [0.0]  # the width of text[:n], for n up to the first character that overflows
    for char in text:
        ends.append(ends[-1] + size * _width(char))
        if ends[-1] > room:
            break
    else:
        return text
    room -= text_width("...", size)
    end = max((n for n, width in enumerate(ends) if width <= room), default=0)
    return text[:end].rstrip() + "..."


@dataclass(frozen=True)
class Stroke:
    """How a line is drawn: colour, width, ``stroke-dasharray`` and opacity."""

    color: str
    width: float = 1.0
    dash: str | None = None
    opacity: float = 1.0

    def attributes(self) -> str:
        """The stroke as SVG attributes."""
        text = f'stroke="{escape(self.color)}" stroke-width="{self.width:g}"'
        if self.dash:
            text += f' stroke-dasharray="{escape(self.dash)}"'
        if self.opacity != 1.0:
            text += f' stroke-opacity="{self.opacity:g}"'
        return text


class Canvas:
    """An SVG document drawn element by element, in painting order."""

    def __init__(self, width: float, height: float) -> None:
        self.width, self.height = width, height
        self._parts: list[str] = []

    @contextmanager
    def group(self, name: str) -> Iterator[None]:
        """What is drawn inside, as one group of class ``name``."""
        self._parts.append(f'<g class="{escape(name)}">')
        yield
        self._parts.append("</g>")

    def line(self, start: Point, end: Point, stroke: Stroke) -> None:
        """A straight line."""
        self.path([[start, end]], stroke)

    def path(self, runs: Sequence[Sequence[Point]], stroke: Stroke, *,
             cap: Literal["butt", "round"] = "butt") -> None:
        """Connected runs of points as one path, a gap between runs; nothing if empty."""
        data = " ".join("M" + " ".join(f"{number(x)} {number(y)}" for x, y in run)
                        for run in runs if run)
        if data:
            rounded = ' stroke-linecap="round" stroke-linejoin="round"' if cap == "round" \
                else ""
            self._parts.append(f'<path d="{data}" fill="none" {stroke.attributes()}'
                               f"{rounded}/>")

    def markers(self, points: Sequence[Point], shape: Marker, size: float, fill: str, *,
                opacity: float = 1.0, edge: str | None = None) -> None:
        """A marker of ``size`` at every point, filled with ``fill`` (``edge``: an outline)."""
        if not points:
            return
        style = f'fill="{escape(fill)}"'
        if opacity != 1.0:
            style += f' fill-opacity="{opacity:g}"'
        if edge is not None:
            style += f' stroke="{escape(edge)}" stroke-width="1" stroke-linejoin="round"'
        if shape == "circle":
            dots = "".join(f'<circle cx="{number(x)}" cy="{number(y)}" r="{size / 2:g}"/>'
                           for x, y in points)
            self._parts.append(f"<g {style}>{dots}</g>")
            return
        outline = _SHAPES[shape]
        data = "".join("M" + " ".join(f"{number(x + size * dx)} {number(y + size * dy)}"
                                      for dx, dy in outline) + "Z" for x, y in points)
        self._parts.append(f'<path d="{data}" {style}/>')

    def polygon(self, points: Sequence[Point], fill: str, *, opacity: float = 1.0) -> None:
        """A filled polygon without an outline (a confidence band); nothing if empty."""
        if len(points) < 3:
            return
        data = "M" + " ".join(f"{number(x)} {number(y)}" for x, y in points) + "Z"
        extra = f' fill-opacity="{opacity:g}"' if opacity != 1.0 else ""
        self._parts.append(f'<path d="{data}" fill="{escape(fill)}"{extra} stroke="none"/>')

    def rect(self, corner: Point, width: float, height: float, *, fill: str = "none",
             stroke: Stroke | None = None, fill_opacity: float = 1.0) -> None:
        """A rectangle from its top left ``corner``."""
        extra = f' fill-opacity="{fill_opacity:g}"' if fill_opacity != 1.0 else ""
        if stroke is not None:
            extra += " " + stroke.attributes()
        self._parts.append(f'<rect x="{number(corner[0])}" y="{number(corner[1])}" '
                           f'width="{number(width)}" height="{number(height)}" '
                           f'fill="{escape(fill)}"{extra}/>')

    def text(self, at: Point, content: str, *, size: float, anchor: Anchor = "start",
             vertical: bool = False, color: str = "#222222") -> None:
        """``content`` (escaped here) with its baseline at ``at``; ``vertical`` turns it
        a quarter to the left, reading upwards."""
        x, y = number(at[0]), number(at[1])
        extra = f' text-anchor="{anchor}"' if anchor != "start" else ""
        if vertical:
            extra += f' transform="rotate(-90 {x} {y})"'
        self._parts.append(f'<text x="{x}" y="{y}" font-size="{size:g}" fill="{escape(color)}"'
                           f"{extra}>{escape(content)}</text>")

    def document(self) -> bytes:
        """The whole SVG document, ASCII (other characters as character references)."""
        width, height = number(self.width), number(self.height)
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
                f'viewBox="0 0 {width} {height}" font-family="{escape(FONT)}">'
                f'<rect width="{width}" height="{height}" fill="#ffffff"/>')
        body = "\n".join([head, *self._parts, "</svg>"]) + "\n"
        return body.encode("ascii", "xmlcharrefreplace")
