"""Which failed cases a student reads first, and how many fit, with nothing cut inside one.

A test's feedback lists its failed cases. Many of them fail for one reason (the same wrong
fields with the same hints, or the same error): their :func:`cause_of` is the same, whatever
their numbers. The first case of each cause is the informative one; the others repeat it.
So the cases are shown distinct causes first, duplicates last (:func:`informative_order`),
and when they do not all fit, the list is cut, never a case: a hint or an expected-versus-got
line is always whole (:func:`cases_that_fit`). Pure functions, tested directly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: A number as the feedback writes one (``12``, ``-0.5``, ``1e-06``, ``3.2e+04``).
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def without_numbers(text: str) -> str:
    """``text`` with every number replaced by ``#``: two failures that differ only in their
    values read the same."""
    return _NUMBER.sub("#", text)


#: How a failed call's message starts when the function hangs: a call stopped at the
#: per-call deadline, or not made since. All of them are one cause (:func:`cause_of`).
HANGS = "hangs: "


def cause_of(function: str, message: str, fields: Iterable[tuple[str, str, str]]
          ) -> tuple[str, ...]:
    """What makes two failed cases of ``function`` fail the same way, numbers aside: the
    error of a failed call (``message``; every hang is one), else each wrong field as
    ``(name, reason, text)`` — its name, why it is wrong, and the lines under its
    expected-versus-got line (its hints), the first line of ``text`` being that line
    itself."""
    if message.startswith(HANGS):
        return (function, "error", HANGS)
    if message:
        return (function, "error", without_numbers(message))
    return (function, *(without_numbers("\n".join([name, reason,
                                                   *text.split("\n")[1:]]))
                        for name, reason, text in fields))


@dataclass(frozen=True)
class FailedCase:
    """One failed case as a student reads it: its heading (the case and its call), why the
    call failed (``message``, "" for a wrong answer) or one entry per wrong field (its
    expected-versus-got line and its hints, never cut), and its :func:`cause_of`."""

    heading: str
    message: str
    fields: tuple[str, ...]
    cause: tuple[str, ...]

    def lines(self, where: str = "") -> list[str]:
        """The case's lines; ``where`` (e.g. ``on iphone``) follows the heading."""
        heading = f"{self.heading} {where}" if where else self.heading
        return [heading, *([f"  {self.message}"] if self.message else []),
                *(line for field in self.fields for line in field.split("\n"))]

    def text(self, where: str = "") -> str:
        return "\n".join(self.lines(where))

    @property
    def body(self) -> str:
        """Everything but the heading: equal bodies mean the same failure, values and all."""
        return "\n".join(self.lines()[1:])


def informative_order(cases: Sequence[FailedCase]) -> list[FailedCase]:
    """``cases`` with the first case of each cause first (in their order), then the cases
    whose cause came before (in theirs): distinct errors and wrong-field sets lead."""
    seen: set[tuple[str, ...]] = set()
    first: list[FailedCase] = []
    again: list[FailedCase] = []
    for case in cases:
        (again if case.cause in seen else first).append(case)
        seen.add(case.cause)
    return [*first, *again]


def distinct_causes(cases: Iterable[FailedCase]) -> int:
    return len({case.cause for case in cases})


def cases_that_fit(texts: Sequence[str], room: int, *, most: int) -> int:
    """How many of ``texts`` (one per case, in order, joined by newlines) fit in ``room``
    characters, at most ``most``; always at least one, which is shown whole even when it
    alone does not fit (its values are already shortened; nothing inside it is cut)."""
    used = 0
    for count, text in enumerate(texts[:most]):
        used += len(text) + (1 if count else 0)
        if used > room and count:
            return count
    return min(len(texts), most)


@dataclass(frozen=True)
class CaseCounts:
    """A test's cases: how many failed, how many in all, and how many are right but do not
    count yet (held back: see :mod:`graders.grading.credit`)."""

    failed: int
    total: int
    held: int = 0

    def __add__(self, other: CaseCounts) -> CaseCounts:
        return CaseCounts(self.failed + other.failed, self.total + other.total,
                          self.held + other.held)

    def text(self, tracks: int = 0) -> str:
        """``3 of 13 cases failed``, with the right answers that do not count yet apart:
        ``10 of 10 cases right but not counted yet``, never called failed. The cases of a
        per-track test say whose they are, so that the terminal's sum over ``tracks``
        tracks and the page's one track read alike: ``16 of 16 cases failed, on this
        track``, ``48 of 48 cases failed, on 3 tracks together`` (no ``tracks``: none)."""
        held = f"{self.held} right but not counted yet" if self.held else ""
        scope = ("" if tracks <= 0 else ", on this track" if tracks == 1
                 else f", on {tracks} tracks together")
        if not self.failed and held:
            return f"{self.held} of {self.total} cases {held.split(' ', 1)[1]}{scope}"
        return (f"{self.failed} of {self.total} cases failed" + (f", {held}" if held else "")
                + scope)


@dataclass(frozen=True)
class FeedbackParts:
    """A failed visible test's feedback in parts, for a reader that puts the feedback of
    several tests together (the terminal groups a test function's tracks): its counts,
    tolerance, notes (said before the cases) and failed cases, in the order they ran."""

    counts: CaseCounts
    tolerance: str
    notes: tuple[str, ...]
    cases: tuple[FailedCase, ...]


def more_cases_line(rest: int) -> list[str]:
    """The line that counts the failed cases not shown (none when all are)."""
    return [f"... and {rest} more failed cases"] if rest else []
