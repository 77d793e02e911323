"""The tagged JSON of the grader: every tag, in one place. What plain JSON cannot carry is
an object with one ``$tag`` key:

- ``$q``: ``[magnitude, unit]``, a pint quantity (:func:`encode_argument` to the worker);
- ``$ns``: ``{attribute: value}``, an object with attributes (also golden files);
- ``$map``: ``{key: value}``, a mapping argument; ``$tuple``: ``[items]``, a tuple;
- ``$float``: the ``repr`` of a float JSON cannot hold (inf, nan); golden files only;
- ``$unsupported``: a type's name, for a student value that is not plain data; ``$missing``:
  a result field the student's object lacks; ``$error``: ``Type: message``, reading the
  field raised (written by the worker, read by comparison and feedback).

The worker spells its tags out (``tests/test_architecture.py`` checks them); a reply's
value is bounded again where it enters the grader (:func:`bounded`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from graders.identity import IdentityMemo

QUANTITY = "$q"
NAMESPACE = "$ns"
MAPPING = "$map"
TUPLE = "$tuple"
FLOAT = "$float"
UNSUPPORTED = "$unsupported"
MISSING = "$missing"
ERROR = "$error"
#: Every tag, and the ones the worker reads or writes.
TAGS = frozenset({QUANTITY, NAMESPACE, MAPPING, TUPLE, FLOAT, UNSUPPORTED, MISSING, ERROR})
WORKER_TAGS = frozenset({QUANTITY, NAMESPACE, MAPPING, TUPLE, UNSUPPORTED, MISSING, ERROR})

#: Characters of one text in a reply's value that the grader keeps (the worker's own cut,
#: ``worker_main.MAX_TEXT``), and the room left for the worker's marker after them: a text
#: the worker cut passes unchanged, a longer one is cut again here.
MAX_TEXT = 500
MARKER_ROOM = 40
#: Items of one list or object in a reply's value the grader keeps (the worker's too).
MAX_ITEMS = 1000
#: The least int ``float()`` overflows on (it rounds up to 2**1024), in absolute value.
_FLOAT_OVERFLOW = 2**1024 - 2**970


#: Encodings of frozen dataclass instances (a track's profile is sent thousands of times
#: in a grading).
_FROZEN_ENCODINGS: IdentityMemo[Any] = IdentityMemo(256)


def has_quantity(encoded: Any) -> bool:
    """Whether encoded data holds a pint quantity (the worker must import pint for it)."""
    if isinstance(encoded, dict):
        return QUANTITY in encoded or any(has_quantity(item) for item in encoded.values())
    if isinstance(encoded, list):
        return any(has_quantity(item) for item in encoded)
    return False


def encode_argument(value: Any) -> Any:
    """Encode ``value`` as JSON data the worker decodes back into equivalent objects; a
    frozen dataclass instance is encoded once (treat the encoding as read-only)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            raise ValueError("NaN is never sent to a submission")
        return value
    if hasattr(value, "m_as") and hasattr(value, "units"):
        return {QUANTITY: [encode_argument(value.magnitude), str(value.units)]}
    if isinstance(value, Mapping):
        return {MAPPING: {str(key): encode_argument(item) for key, item in value.items()}}
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return {TUPLE: [encode_argument(item) for item in value]}
    if isinstance(value, list):
        return [encode_argument(item) for item in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        def encoded() -> Any:
            return {NAMESPACE: {f.name: encode_argument(getattr(value, f.name))
                                for f in dataclasses.fields(value)}}

        if type(value).__dataclass_params__.frozen:  # type: ignore[attr-defined]
            return _FROZEN_ENCODINGS.get(value, encoded)
        return encoded()
    if hasattr(value, "__dict__"):
        return {NAMESPACE: {name: encode_argument(item) for name, item in vars(value).items()}}
    raise TypeError(f"cannot send a {type(value).__name__} to the worker")


def bounded(value: Any) -> Any:
    """A reply's value as the grader keeps it: texts cut to :data:`MAX_TEXT` characters,
    lists and objects to :data:`MAX_ITEMS` items, an int too large for a float a short text."""
    if value is None or isinstance(value, bool | float):
        return value
    if isinstance(value, int):
        return value if abs(value) < _FLOAT_OVERFLOW else huge_integer_text(value)
    if isinstance(value, str):
        return bounded_text(value)
    if isinstance(value, list):
        return [bounded(item) for item in value[:MAX_ITEMS]]
    if isinstance(value, dict):
        return {bounded_text(str(key)): bounded(item)
                for key, item in list(value.items())[:MAX_ITEMS]}
    return bounded_text(str(value))  # json.loads makes nothing else: never reached


def bounded_text(text: str) -> str:
    """``text``, cut to :data:`MAX_TEXT` characters and the worker's marker when longer than
    that and :data:`MARKER_ROOM`."""
    if len(text) <= MAX_TEXT + MARKER_ROOM:
        return text
    return f"{text[:MAX_TEXT]}\u2026 [truncated, {len(text)} chars]"


def huge_integer_text(value: int) -> str:
    """An int too large for a float, in a few words: "a 4,299-digit integer"."""
    sign = "negative " if value < 0 else ""
    return f"a {sign}{len(str(abs(value))):,}-digit integer"
