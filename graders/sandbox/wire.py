"""The tagged JSON of the grader: every tag, documented here, in one place.

Plain JSON carries bool, int, float, str, None, lists and objects with string keys. What
it cannot carry is an object with one ``$tag`` key:

- ``$q``: ``[magnitude, unit]``, a pint quantity; written by :func:`encode_argument`,
  read by the worker.
- ``$ns``: ``{attribute: value}``, an object with attributes; written by
  :func:`encode_argument` and golden files, read by the worker and golden files.
- ``$map``: ``{key: value}``, a mapping argument; :func:`encode_argument` to the worker.
- ``$tuple``: ``[items]``, a tuple; like ``$ns``.
- ``$float``: the ``repr`` of a float JSON cannot hold (inf, nan); golden files only.
- ``$unsupported``: a type's name, for a student value that is not plain data; written by
  the worker, read by comparison and feedback.
- ``$missing``: a field's name, for a result field the student's object lacks; likewise.
- ``$error``: ``Type: message``, reading the field raised; likewise.

The worker (``worker_main.py``) runs alone, from the standard library, so it spells its
tags out; ``tests/test_architecture.py`` checks that it uses these and no others.
"""

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
    """Encode ``value`` as JSON data the worker decodes back into equivalent objects.

    Pint quantities become ``{"$q": [magnitude, unit]}``, objects with attributes
    ``{"$ns": {...}}``, mappings ``{"$map": {...}}`` and tuples ``{"$tuple": [...]}``.
    A frozen dataclass instance is encoded once and its encoding reused (treat the
    encoding as read-only).
    """
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
