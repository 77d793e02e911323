"""Unseen inputs: each function checked on inputs no student bundle holds.

The official grading (the reference installed) draws, for every visible test, inputs
like its visible cases (a visible case of the same function and track, with its numbers
and the quantities of its hardware moved by a random factor of 2/3 to 3/2; see
:func:`moved`) from a seed the student cannot know: an HMAC
of the submitted file's SHA-256 under the course secret. The same file with the same
secret always meets the same inputs; any change to the file draws new ones. A twin counts
only if it moves the answer (:func:`moves_answer`, judged by the caller against every
visible case of its function and track): copying a visible answer passes none.

A function's visible points then pay in proportion to how it does on its unseen inputs
(:func:`confirmation`): a table of the golden file's answers earns what constants earn,
and an honest bug, which fails about as often on unseen inputs as on visible ones, costs
what it costs without them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import math
import random
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from graders.grading.cases import Case
from graders.grading.compare import Tolerance, differs
from graders.grading.credit import field_of, nontrivial_fields
from graders.identity import IdentityMemo
from graders.sandbox.wire import encode_argument

#: Change whenever a change to this module changes any draw.
SCHEME_VERSION = 2
#: Unseen inputs per function (split over the tracks) unless its test's marker says.
DEFAULT_UNSEEN = 40
#: A number moves by a factor of 1/SPREAD to SPREAD.
SPREAD = 1.5
#: The share of its unseen inputs a function must pass to keep all its visible points;
#: below it the visible points shrink in proportion, to 0 for one that passes none.
CONFIRMING_SHARE = Fraction(1, 4)
#: Draws in a row from one template that give no twin (its inputs were already asked, or
#: its answer did not move) before the template is left out.
MAX_MISSES = 16
#: Characters of one failed unseen input shown in feedback.
MAX_INPUT_CHARS = 240
#: The secret of a grading that was given none (the inputs still change with the file).
NO_SECRET = b"serving-grader: no course secret"


def seed(secret: bytes, submission: bytes) -> str:
    """The seed of a grading's unseen inputs: HMAC-SHA256(secret, SHA-256 of the file)."""
    digest = hashlib.sha256(submission).digest()
    return hmac.new(secret or NO_SECRET, b"unseen v%d\0" % SCHEME_VERSION + digest,
                    hashlib.sha256).hexdigest()


def _moved_int(value: int, rng: random.Random) -> int:
    if value <= 1:
        return value
    low, high = max(2, math.ceil(value / SPREAD)), max(2, math.floor(value * SPREAD))
    choices = [n for n in (rng.randint(low, high) for _ in range(4)) if n != value]
    return choices[0] if choices else value + 1


def _moved_float(value: float, rng: random.Random) -> float:
    if value == 0.0 or not math.isfinite(value):
        return value
    if value.is_integer() and 1.0 <= value <= 1e6:  # a count or a precision: still whole
        return float(_moved_int(int(value), rng))
    return value * float(SPREAD ** rng.uniform(-1.0, 1.0))


def moved(value: Any, rng: random.Random, *, inside_object: bool = False,
          objects: bool = True) -> Any:
    """``value`` with its numbers moved (0, 1, flags, text and None kept).

    Inside an object (a track's profile, hardware or model) only quantities move, and only
    when ``objects``: the track stays the same deployment, while what a case varies
    (loads, batch sizes, context lengths, precisions, bandwidths, a hardware fact in its
    units) changes.
    """
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int | float):
        if inside_object:
            return value
        return _moved_int(value, rng) if isinstance(value, int) else _moved_float(value, rng)
    if hasattr(value, "m_as") and hasattr(value, "units"):  # a fact in units: any magnitude
        return type(value)(float(value.magnitude) * float(SPREAD ** rng.uniform(-1.0, 1.0)),
                           value.units)
    if isinstance(value, Mapping):
        return {key: moved(item, rng, inside_object=inside_object, objects=objects)
                for key, item in value.items()}
    if isinstance(value, tuple | list):
        items = [moved(item, rng, inside_object=inside_object, objects=objects)
                 for item in value]
        return tuple(items) if isinstance(value, tuple) else items
    if not objects:
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        attributes = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    elif hasattr(value, "__dict__"):
        attributes = dict(vars(value))
    else:
        return value
    if not _holds_quantity(attributes):
        return value  # nothing moves: the same object (its wire encoding is reused)
    return types.SimpleNamespace(**{name: moved(item, rng, inside_object=True)
                                    for name, item in attributes.items()})


def _has_numbers(values: list[Any]) -> bool:
    """Whether ``values`` hold a number or a quantity of their own (not in an object)."""
    for value in values:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return True
        if hasattr(value, "m_as") or (isinstance(value, tuple | list)
                                      and _has_numbers(list(value))):
            return True
    return False


def _holds_quantity(value: Any, depth: int = 0) -> bool:
    if depth > 6:
        return False
    if hasattr(value, "m_as"):
        return True
    if isinstance(value, Mapping):
        return any(_holds_quantity(item, depth + 1) for item in value.values())
    if isinstance(value, tuple | list):
        return any(_holds_quantity(item, depth + 1) for item in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return any(_holds_quantity(getattr(value, f.name), depth + 1)
                   for f in dataclasses.fields(value))
    if hasattr(value, "__dict__"):
        return any(_holds_quantity(item, depth + 1) for item in vars(value).values())
    return False


#: Each case's :func:`inputs_key`: a case's key is asked when it is drawn, kept and
#: digested.
_KEYS: IdentityMemo[str] = IdentityMemo(4096)


def inputs_key(case: Case) -> str:
    """A case's inputs as canonical text: equal inputs give equal keys."""
    return _KEYS.get(case, lambda: json.dumps(
        encode_argument([case.function, case.args, dict(case.kwargs)]), sort_keys=True))


#: Whether a twin moves the answer of the visible case it was drawn from:
#: ``moves(template, twin)``.
Moves = Callable[[Case, Case], bool]


def moves_answer(sources: Iterable[Any], twin: Any, twin_inputs: Iterable[Any],
                 tolerance: Tolerance) -> bool:
    """Whether a twin's expected value ``twin`` moved from each of ``sources`` (the expected
    values of its visible case and of the other visible cases of its function and track):
    some field (an item of a tuple) of it differs beyond ``tolerance`` from the source's
    and holds a value that computing nothing cannot give (not None, a flag, 0, 1, an
    infinity, nor an echo of one of ``twin_inputs``). A twin that moves only echoes of its
    inputs, flags or inputs its answer does not depend on is passed by a copy of a visible
    answer."""
    return fields_move(sources, nontrivial_fields(twin, twin_inputs), tolerance)


def fields_move(sources: Iterable[Any], fields: list[tuple[tuple[str, Any], Any]],
                tolerance: Tolerance) -> bool:
    """:func:`moves_answer` of a twin whose non-trivial fields are ``fields`` (see
    :func:`graders.grading.credit.nontrivial_fields`)."""
    return all(any(differs(wanted, field_of(source, where), tolerance)
                   for where, wanted in fields) for source in sources)


@dataclass
class Twins:
    """One function's unseen cases, and how many it was meant to get."""

    cases: list[Case]
    wanted: int

    @property
    def short(self) -> bool:
        """Fewer twins that move the answer could be drawn than wanted."""
        return len(self.cases) < self.wanted


def unseen_cases(seed_text: str, templates: Iterable[Case], count: int,
                 visible: Iterable[Case], moves: Moves | None = None,
                 spare: Iterable[Case] = ()) -> Twins:
    """``count`` unseen cases of one function, split evenly over the tracks of its
    ``templates`` (rounded up), never the inputs of a case in ``visible``.

    Each is a template of its track with its numbers moved (:func:`moved`), the templates
    taken in turn in an order shuffled by the seed, so that every template gives its
    share of twins. A twin is kept only when ``moves(template, twin)`` (by default every
    twin moves): a template whose MAX_MISSES draws in a row gave no such twin is left out
    (its answer does not move with what moves). When every template of a track is left
    out, the ``spare`` templates of the track take their turn (the visible cases a
    function fails, whose twins it would fail too: passing only cases that no twin can
    move confirms nothing); when those are left out too, the track has fewer twins than
    its share, which :attr:`Twins.short` says."""
    by_track: dict[str, list[Case]] = {}
    for case in templates:
        by_track.setdefault(case.track_id, []).append(case)
    spares: dict[str, list[Case]] = {}
    for case in spare:
        spares.setdefault(case.track_id, []).append(case)
    seen = {inputs_key(case) for case in visible}
    drawn: list[Case] = []
    per_track = -(-count // max(1, len(by_track)))
    for track_id, choices in sorted(by_track.items()):
        rng = random.Random(f"{seed_text}/{choices[0].function}/{track_id}")
        for pool in (choices, spares.get(track_id, [])):
            drawn += _twins_of(pool, per_track - sum(c.track_id == track_id for c in drawn),
                               rng, seen, moves, first=len(drawn))
    return Twins(drawn, per_track * len(by_track))


def _twins_of(choices: list[Case], wanted: int, rng: random.Random, seen: set[str],
              moves: Moves | None, first: int) -> list[Case]:
    """Up to ``wanted`` twins of ``choices``, taken in turn (see :func:`unseen_cases`)."""
    live = list(choices)
    rng.shuffle(live)
    misses = [0] * len(live)
    drawn: list[Case] = []
    while len(drawn) < wanted and live:
        slot = len(drawn) % len(live)
        template = live[slot]
        # a case with numbers of its own moves them; one made of a track's objects only
        # (a profile from its hardware and model) moves their quantities
        objects = not _has_numbers([*template.args, *template.kwargs.values()])
        case = Case(f"unseen {first + len(drawn) + 1}", template.function,
                    moved(template.args, rng, objects=objects),
                    moved(dict(template.kwargs), rng, objects=objects), template.track_id)
        key = inputs_key(case)
        if key not in seen and (moves is None or moves(template, case)):
            seen.add(key)
            drawn.append(case)
            misses[slot] = 0
            continue
        misses[slot] += 1
        if misses[slot] >= MAX_MISSES:
            del live[slot], misses[slot]
    return drawn


@dataclass
class UnseenEvidence:
    """How one function did on its unseen inputs (only cases with non-trivial answers
    count: a constant could pass the others)."""

    nontrivial: int = 0
    nontrivial_passed: int = 0
    #: The twins the function was meant to get (0: none drawn) and the ones asked.
    wanted: int = 0
    asked: int = 0
    #: Non-trivial values (fields) right, in passed and failed cases alike.
    values_right: int = 0
    #: The inputs of the failed non-trivial cases, as a reader would type them.
    failed_inputs: list[str] = field(default_factory=list)

    @property
    def short(self) -> bool:
        """Fewer twins that move the answer could be drawn than the function's count."""
        return self.asked < self.wanted

    def record(self, case: Case, *, trivial: bool, passed: bool, values_right: int) -> None:
        self.asked += 1
        if trivial:
            return
        self.nontrivial += 1
        self.nontrivial_passed += passed
        self.values_right += values_right
        if not passed:
            self.failed_inputs.append(case.describe_inputs())


def confirmation(unseen: UnseenEvidence) -> Fraction:
    """The share of a function's visible points its unseen inputs confirm.

    The unseen inputs are twins of the visible cases the function passes; with u the share
    of them it passes: 1 when u >= CONFIRMING_SHARE, else u / CONFIRMING_SHARE (1 when it
    has no unseen input with a non-trivial answer: nothing to confirm).
    """
    if unseen.nontrivial == 0:
        return Fraction(1)
    rate = Fraction(unseen.nontrivial_passed, unseen.nontrivial)
    return min(Fraction(1), rate / CONFIRMING_SHARE)


def confirmation_note(function: str, unseen: UnseenEvidence, share: Fraction,
                      shown: int = 2) -> str:
    """What the student reads when unseen inputs cut a test: counts and a few of the failed
    inputs (their arguments only: never an expected value)."""
    failed = unseen.nontrivial - unseen.nontrivial_passed
    examples = "; ".join(text if len(text) <= MAX_INPUT_CHARS else
                         f"{text[:MAX_INPUT_CHARS]}…" for text in unseen.failed_inputs[:shown])
    short = (f" (only {unseen.asked} of its {unseen.wanted} twins move the answer)"
             if unseen.short else "")
    return (f"{function} failed {failed} of its {unseen.nontrivial} unseen inputs (drawn "
            f"afresh for every submission){short}, so its visible cases count "
            f"{float(share):.0%}" + (f"; e.g. {examples}" if examples else ""))


def unseen_refusal(function: str, unseen: UnseenEvidence) -> str | None:
    """Why the invariants of ``function`` pay nothing: no value of its unseen inputs right
    (or no unseen input to get right: the cases it passes have nothing that can move)."""
    if unseen.values_right > 0:
        return None
    return (f"{function} computes none of the values of its unseen inputs right, so its "
            "invariants pay nothing")
