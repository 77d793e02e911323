"""The page's bound on test feedback: every failed test's feedback, HTML-escaped, together
at most :data:`MAX_FEEDBACK_BYTES`, and the first failed case shown at the top at most
:data:`MAX_FIRST_CASE_BYTES`.

Each test's feedback is shown whole while they all fit; otherwise the space is shared out
fairly (a test that needs less than its share leaves the rest to the others) and a test
cut to its share ends with a marker saying how much was left out. Whatever the submission
returns (every value is at most a few hundred characters, see
:func:`graders.sandbox.wire.bounded`, but there are many), the page stays small.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

#: Bytes (UTF-8, after HTML escaping) of all the tests' feedback on one page.
MAX_FEEDBACK_BYTES = 1024**2
#: Bytes of the first failed case that "What to fix first" shows.
MAX_FIRST_CASE_BYTES = 64 * 1024


def shares(sizes: Mapping[int, int], budget: int) -> dict[int, int]:
    """Bytes allotted to each key of ``sizes`` (bytes it needs) out of ``budget``: what
    it needs when that is at most a fair share of what is left, else that share."""
    allotted: dict[int, int] = {}
    left = budget
    order = sorted(sizes, key=lambda key: (sizes[key], key))
    for position, key in enumerate(order):
        allotted[key] = min(sizes[key], left // (len(order) - position))
        left -= allotted[key]
    return allotted


def fitted(text: str, budget: int, escape: Callable[[str], str]) -> str:
    """``escape(text)``, or of its longest start whose escaped form, with a marker saying
    how much was cut, takes at most ``budget`` bytes (at least the marker)."""
    whole = escape(text)
    if _size(whole) <= budget:
        return whole
    low, high = 0, len(text)  # the longest start that fits lies in [low, high)
    while high - low > 1:
        middle = (low + high) // 2
        if _size(_cut(text, middle, escape)) <= budget:
            low = middle
        else:
            high = middle
    return _cut(text, low, escape)


def _cut(text: str, kept: int, escape: Callable[[str], str]) -> str:
    return escape(f"{text[:kept]}\n\u2026 [cut: {len(text) - kept:,} more characters]")


def _size(html: str) -> int:
    return len(html.encode("utf-8", "surrogatepass"))


def feedback_budget(outputs: Mapping[int, str], escape: Callable[[str], str],
                    budget: int = MAX_FEEDBACK_BYTES) -> dict[int, str]:
    """Each test's feedback in ``outputs`` (by its number), escaped, cut to its share."""
    escaped = {number: escape(text) for number, text in outputs.items()}
    allotted = shares({number: _size(html) for number, html in escaped.items()}, budget)
    return {number: html if _size(html) <= allotted[number]
            else fitted(outputs[number], allotted[number], escape)
            for number, html in escaped.items()}
