"""The terminal's feedback section, laid out by pure functions: each thing said once.

A bug fails a per-track test on several tracks, and most of a test's failed cases fail the
same way. So the failed per-track tests of one test function that say the same before their
cases (the same root cause and notes) make one block, named with their tracks; in it, each
cause of failure (see :func:`graders.grading.feedback_layout.cause_of`) is shown once, by its
first case, with the tracks where it happens; and the blocks share a budget of lines
(:data:`FEEDBACK_LINES`): every block shows its first cause, then the others take turns
while they fit. A case is shown whole or not at all: its hints and expected-versus-got lines
are never cut. Gradescope's results.json keeps one output per test (see
:meth:`graders.grading.checks.Grading.feedback`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import reduce

from graders.grading.feedback_layout import CaseCounts, FailedCase, FeedbackParts

#: Lines of the feedback section, about a screen with the score table under it. Each block
#: shows its first failed case even beyond it; further cases only within it.
FEEDBACK_LINES = 36


@dataclass
class Block:
    """One block of the feedback section: an optional bold ``title``, its ``lines``, the
    cases it may show (each a list of lines, most informative first) out of ``failed``
    failed cases in all, and ``printed``: what the submission printed (gutter lines, under a
    rule), if shown here."""

    title: str | None
    lines: list[str]
    cases: list[list[str]] = field(default_factory=list)
    failed: int = 0
    #: Failed cases whose failure is not shown by a case of ``cases`` (other causes).
    causes: int = 0
    printed: list[str] = field(default_factory=list)
    #: The function whose tests ``printed`` comes from.
    function: str = ""

    def height(self, shown: int) -> int:
        """The block's lines, its blank line included, with ``shown`` cases."""
        return (int(self.title is not None) + len(self.lines)
                + sum(len(case) for case in self.cases[:shown])
                + len(self.more(shown)) + (1 + len(self.printed) if self.printed else 0) + 1)

    def more(self, shown: int) -> list[str]:
        """The line that counts the failed cases not shown, if any."""
        rest = self.failed - sum(1 for _ in self.cases[:shown])
        if rest <= 0:
            return []
        other = self.causes - shown
        kinds = "another kind" if other == 1 else f"{other} other kinds"
        how = (f", {kinds} of failure among them" if other > 0
               else ", each failing as one shown above")
        return [f"... and {rest} more failed cases{how}"]

    def body(self, shown: int) -> list[str]:
        """The lines under the title, down to the cases' count (not the printed output)."""
        return [*self.lines, *(line for case in self.cases[:shown] for line in case),
                *self.more(shown)]


def plain_block(name: str, status: str, output: str) -> Block:
    """A failed test said as it is (an invariant, an error): its output, under its name
    and status unless the output starts with its name."""
    title = None if output.startswith(name) else f"{name}: {status}"
    return Block(title, output.split("\n"))


def group_key(nodeid: str, parts: FeedbackParts) -> tuple[str, ...]:
    """Failed tests with equal keys make one block: the same test function (its node id
    without the track parameter), tolerance and notes."""
    return (nodeid.split("[", 1)[0], parts.tolerance, *parts.notes)


def grouped_block(name: str, tests: Sequence[tuple[str | None, FeedbackParts]]) -> Block:
    """One block for the failed tests of one test function named ``name`` (without its
    track) that share a :func:`group_key`, each as (its track, its parts): their summed
    counts, their notes once, and each cause of failure once, most informative first, with
    the tracks where it happens when the block has more than one."""
    tracks = [track for track, _ in tests if track]
    counts = reduce(CaseCounts.__add__, (parts.counts for _, parts in tests))
    tolerance = tests[0][1].tolerance
    where = f" [{', '.join(tracks)}]" if tracks else ""
    header = f"{name}{where}: {counts.text(len(tracks))} (tolerance {tolerance})"
    notes = list(dict.fromkeys(note for _, parts in tests for note in parts.notes))
    cases = [(track, case) for track, parts in tests for case in parts.cases]
    if len(cases) > 1 and len({case.body for _, case in cases}) == 1:
        return Block(None, [header, *notes, f"every failed case: {cases[0][1].body.strip()}"])
    shown = said_once([case.lines(_where(track, others) if len(tracks) > 1 else "")
                       for track, case, others in by_cause(cases)])
    return Block(None, [header, *notes], shown, failed=len(cases), causes=len(shown))


def said_once(cases: Sequence[list[str]]) -> list[list[str]]:
    """The cases' lines with a hint that an earlier case of the block already gave left
    out: one bug, one hint, however many of its cases are shown."""
    said: set[str] = set()
    kept = []
    for lines in cases:
        kept.append([line for line in lines if not _hint_again(line, said)])
    return kept


def _hint_again(line: str, said: set[str]) -> bool:
    if not line.lstrip().startswith("hint: "):
        return False
    again = line.strip() in said
    said.add(line.strip())
    return again


def by_cause(cases: Sequence[tuple[str | None, FailedCase]]
             ) -> list[tuple[str | None, FailedCase, list[str]]]:
    """The first case of each cause, in order, with its track and the other tracks where
    a case fails the same way."""
    first: dict[tuple[str, ...], tuple[str | None, FailedCase, list[str]]] = {}
    for track, case in cases:
        if case.cause not in first:
            first[case.cause] = (track, case, [])
        elif track and track != first[case.cause][0] and track not in first[case.cause][2]:
            first[case.cause][2].append(track)
    return list(first.values())


def _where(track: str | None, others: Sequence[str]) -> str:
    if not track:
        return ""
    # "cases", not "the same case": the case shown may pass on those tracks
    return f"on {track}" + (f"; cases on {', '.join(others)} fail the same way" if others
                            else "")


def cases_shown(blocks: Sequence[Block], budget: int = FEEDBACK_LINES) -> list[int]:
    """How many cases each block shows: its first one whatever the budget, then one more
    per block in turn, while the section stays within ``budget`` lines."""
    shown = [min(1, len(block.cases)) for block in blocks]
    used = sum(block.height(count) for block, count in zip(blocks, shown, strict=True))
    grew = True
    while grew:
        grew = False
        for index, block in enumerate(blocks):
            count = shown[index]
            if count >= len(block.cases):
                continue
            taller = used - block.height(count) + block.height(count + 1)
            if taller <= budget:
                shown[index], used, grew = count + 1, taller, True
    return shown
