"""The lab notebook's predict-then-check: the choices each question offers, the choice a
measured curve bears out, and the verdict on the student's prediction ("You predicted
that p99 grows more than 5 times: not so. It grows 4.4 times ...").

A question is judged by the lab's model (the repository's expected values) where the
curve has them, else by the student's own curve, and says which one it used.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from graders.feedback import curves
from graders.feedback.measure import MeasuredSweep
from graders.reality.curves import BATCHES

#: What p99 does from 50 % to 90 % of the fleet's capacity, by its growth factor's range.
TAIL_CHOICES = ("less than doubles", "grows 2 to 5 times", "grows more than 5 times")
TAIL_LOADS = (0.5, 0.9)
#: The total p99 with batches of 32 against B = 1, at the track's arrival rate.
BATCH_CHOICES = ("lower", "about the same", "higher")
BATCH_SIZES = (1, 32)
#: Within this factor either way, two p99s are "about the same".
SAME_WITHIN = 1.1
#: What doubling the context does to the number of concurrent requests that fit.
MEMORY_CHOICES = ("halves", "falls by less than half", "does not change")
#: At or under this ratio (after doubling the context), the count has halved: a count is
#: whole, so 5 requests becoming 2 has halved too.
HALVED_AT_MOST = 0.6


@dataclass(frozen=True)
class Check:
    """What one curve says to one question: the choice it bears out (None: it cannot
    tell, e.g. no value yet) and the figures behind it, in words."""

    answer: str | None
    figures: str


def _number(row: Any, field: str) -> float | None:
    got = row.get(field) if isinstance(row, dict) else None
    return float(got) if isinstance(got, int | float) and not isinstance(got, bool) else None


def _rows(sweep: MeasuredSweep, reference: bool) -> Sequence[Any]:
    return sweep.reference if reference else sweep.student


def _ms(value: float) -> str:
    return "unbounded (an unstable queue)" if math.isinf(value) else f"{value:.3g} ms"


def tail(sweep: MeasuredSweep, reference: bool) -> Check:
    """How p99 grows from 50 % to 90 % load on the load sweep."""
    rows = _rows(sweep, reference)
    low, high = (_number(rows[curves.LOADS.index(load)], "p99_latency_ms")
                 for load in TAIL_LOADS)
    if low is None or high is None or low <= 0 or math.isinf(low):
        return Check(None, "no p99 at 50 % and 90 % load to compare")
    ratio = high / low
    answer = TAIL_CHOICES[0] if ratio < 2 else TAIL_CHOICES[1] if ratio <= 5 else TAIL_CHOICES[2]
    return Check(answer, f"p99 goes from {_ms(low)} at 50 % load to {_ms(high)} at 90 %: "
                         f"{ratio:.3g} times")


def batching(sweep: MeasuredSweep, reference: bool) -> Check:
    """How the total p99 with batches of 32 compares with B = 1, on the batch sweep."""
    rows = _rows(sweep, reference)
    one, many = (_number(rows[BATCHES.index(size)], "total_p99_ms") for size in BATCH_SIZES)
    if one is None or many is None:
        return Check(None, "no total p99 at B = 1 and B = 32 to compare")
    figures = f"total p99 {_ms(one)} at B = 1, {_ms(many)} at B = 32"
    if math.isinf(one) and math.isinf(many):
        return Check(None, figures + ": both unstable")
    if math.isinf(one) or math.isinf(many):
        return Check(BATCH_CHOICES[0] if math.isinf(one) else BATCH_CHOICES[2], figures)
    if one <= 0 or many <= 0:
        return Check(None, figures)
    ratio = many / one
    answer = BATCH_CHOICES[1] if 1 / SAME_WITHIN <= ratio <= SAME_WITHIN \
        else BATCH_CHOICES[0] if ratio < 1 else BATCH_CHOICES[2]
    return Check(answer, f"{figures} ({ratio:.3g} times)")


def memory(sweep: MeasuredSweep, reference: bool, context_tokens: int) -> Check:
    """What doubling the context does to max_concurrent on the context sweep: from the
    sweep's last length at most ``context_tokens`` (the first one below it) to its double."""
    rows = _rows(sweep, reference)
    lengths = curves.CONTEXTS
    start = max((i for i, n in enumerate(lengths[:-1]) if n <= context_tokens), default=0)
    before, after = (_number(rows[i], "max_concurrent") for i in (start, start + 1))
    if before is None or after is None:
        return Check(None, "no max_concurrent to compare")
    figures = (f"{before:.6g} concurrent requests at {lengths[start]:,} tokens, "
               f"{after:.6g} at {lengths[start + 1]:,}")
    if after == before:
        return Check(MEMORY_CHOICES[2], figures)
    if before <= 0 or after > before:
        return Check(None, figures)
    ratio = after / before
    return Check(MEMORY_CHOICES[0] if ratio <= HALVED_AT_MOST else MEMORY_CHOICES[1], figures)


def verdict(prediction: str | None, sweep: MeasuredSweep,
            check: Callable[[MeasuredSweep, bool], Check], claim: str, yours: str) -> str:
    """Markdown: the verdict on ``prediction`` (None: none was asked, as with
    ``--reveal``) by the lab's model where the sweep has reference values, else by the
    student's curve, then what the student's function says beside it. ``claim`` words a
    choice ("p99 {}"); ``yours`` names the student's function ("Your queueing_latency")."""
    lab, student = check(sweep, True), check(sweep, False)
    judge, whose = (lab, "The lab's model") if lab.answer is not None else (student, yours)
    said = []
    if prediction is not None:
        said.append(f"You predicted that {claim.format(prediction)}: " + (
            f"there is nothing to check it against yet ({judge.figures})."
            if judge.answer is None else
            "**right**." if prediction == judge.answer else "**not so**."))
    if judge.answer is not None:
        said.append(f"{whose}: {judge.figures}, so {claim.format(f'**{judge.answer}**')}.")
    if judge is lab:
        said.append(f"{yours}: " + ("the same." if student.figures == lab.figures
                                    else f"{student.figures}."))
    return " ".join(said)
