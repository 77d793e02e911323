"""Values worked out once per object, for objects a grading passes thousands of times (a
track's profile, a case): kept by the object's identity, with the object itself, so that
its id is not reused while the value is kept. Only for objects nobody changes."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class IdentityMemo(Generic[T]):
    """At most ``capacity`` values, by object identity (and an optional extra key); all are
    dropped at once when it is full."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._kept: dict[tuple[int, Hashable], tuple[Any, T]] = {}

    def get(self, obj: Any, compute: Callable[[], T], extra: Hashable = None) -> T:
        """The value kept for ``obj`` (and ``extra``), or ``compute()``, then kept."""
        key = (id(obj), extra)
        kept = self._kept.get(key)
        if kept is not None and kept[0] is obj:
            return kept[1]
        value = compute()
        if len(self._kept) >= self._capacity:
            self._kept.clear()
        self._kept[key] = (obj, value)
        return value
