"""A student call as data: the request line the runner writes, the reply line it reads
(no line can break the protocol: :func:`parse_reply`), the outcome it gives."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from graders.sandbox.wire import encode_argument

Status: TypeAlias = Literal["ok", "raised", "timeout", "crashed", "garbage", "unimportable",
                            "abandoned"]

#: The deepest nesting of lists and objects a reply may hold (the worker cuts at depth 3).
MAX_REPLY_DEPTH = 16


@dataclass(frozen=True)
class CallOutcome:
    """What one student call produced: plain data, or why there is none."""

    status: Status
    value: Any = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class CallRequest:
    """One student call to make: the function, its arguments and its result's fields."""

    function: str
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] | None = None
    fields: Sequence[str] | None = None
    #: ``args`` and ``kwargs`` already encoded (:func:`graders.sandbox.wire.encode_argument`
    #: of each), when the caller has them: they are sent as they are.
    encoded: tuple[list[Any], dict[str, Any]] | None = None

    def message(self) -> dict[str, Any]:
        """The request the worker reads, without its id."""
        args, kwargs = self.encoded if self.encoded is not None else (
            [encode_argument(arg) for arg in self.args],
            {key: encode_argument(value) for key, value in (self.kwargs or {}).items()})
        return {"op": "call", "fn": self.function, "args": args, "kwargs": kwargs,
                "fields": list(self.fields) if self.fields is not None else None}


class WorkerGone(Exception):
    """The worker gave no reply to a request: it timed out, died or sent a bad one."""

    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def request_line(request: dict[str, Any]) -> bytes:
    """One request as the line the worker reads."""
    return (json.dumps(request, allow_nan=True, separators=(",", ":")) + "\n").encode()


def parse_reply(raw: bytes) -> Any:
    """One reply line as JSON data; :class:`WorkerGone` for any other line, whatever it is."""
    if _nesting_exceeds(raw, MAX_REPLY_DEPTH):
        raise WorkerGone("garbage", f"the worker sent a reply nested deeper than "
                         f"{MAX_REPLY_DEPTH} levels")
    try:
        return json.loads(raw)
    except Exception:  # noqa: BLE001 - no reply may break the grader: this call fails alone
        raise WorkerGone("garbage", "the worker sent a reply that is not JSON") from None


def _nesting_exceeds(raw: bytes, limit: int) -> bool:
    """Whether the brackets of ``raw``, outside its strings, nest deeper than ``limit`` (or
    do not pair up), at C speed: innermost pairs are removed, once per level."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    brackets = _JSON_STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    for _ in range(limit):
        if not brackets:
            return False
        brackets = brackets.replace(b"[]", b"").replace(b"{}", b"")
    return bool(brackets)


#: A JSON string, escapes included (what the bracket count leaves out).
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
#: Every byte but the four brackets (deleted before their nesting is measured).
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"[]{}")


def earlier(reply: Any, ident: int | None) -> bool:
    """Whether ``reply`` answers a request before ``ident`` (a late or forged reply)."""
    reply_id = reply.get("id") if isinstance(reply, dict) else None
    return ident is not None and isinstance(reply_id, int) and \
        not isinstance(reply_id, bool) and reply_id < ident
