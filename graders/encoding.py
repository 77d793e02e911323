"""Tagged JSON for arguments sent to the worker: quantities, namespaces, mappings, tuples."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any


def encode_argument(value: Any) -> Any:
    """Encode ``value`` as JSON data the worker decodes back into equivalent objects.

    Pint quantities become ``{"$q": [magnitude, unit]}``, objects with attributes
    ``{"$ns": {...}}``, mappings ``{"$map": {...}}`` and tuples ``{"$tuple": [...]}``.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            raise ValueError("NaN is never sent to a submission")
        return value
    if hasattr(value, "m_as") and hasattr(value, "units"):
        return {"$q": [encode_argument(value.magnitude), str(value.units)]}
    if isinstance(value, Mapping):
        return {"$map": {str(key): encode_argument(item) for key, item in value.items()}}
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return {"$tuple": [encode_argument(item) for item in value]}
    if isinstance(value, list):
        return [encode_argument(item) for item in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return {"$ns": {name: encode_argument(item) for name, item in fields.items()}}
    if hasattr(value, "__dict__"):
        return {"$ns": {name: encode_argument(item) for name, item in vars(value).items()}}
    raise TypeError(f"cannot send a {type(value).__name__} to the worker")
