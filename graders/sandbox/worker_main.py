"""The student worker: imports one ``serving.py`` and answers one JSON line per call. Run
from its runtime folder, never imported by the grader: the standard library only (pint
lazily). Protocol, one JSON object per line:

- ``{"op": "init", ...}``: limits, then (when asked) Landlock and the syscall filter, said
  in a first line ``{"syscall_filter", "landlock", "failed", "error"}`` before any student
  code runs; then ``{"ready": true|false, ...}`` once the submission is imported or not;
- ``{"op": "call", "id": N, "fn", "args", "kwargs", "fields"}``: ``{"id": N, "ok": true,
  "value": ...}`` or ``{"id": N, "ok": false, "error": "..."}``;
- ``{"op": "pint", "id": N}`` imports pint ahead of calls that pass quantities.

Values are reduced to plain data (:mod:`graders.sandbox.wire`'s tags, texts cut to
MAX_TEXT characters, sequences to MAX_SEQUENCE items); output is flushed before a reply."""

import contextlib
import importlib.util
import json
import os
import signal
import sys
import traceback
import types
from typing import Any, TextIO

MAX_SEQUENCE = 1000
MAX_TEXT = 500
REGISTRY: list[Any] = []
#: The folder of pint's parsed definitions, when the grader gave one (init "definitions").
DEFINITIONS: list[str] = []
#: The grader's limit on one reply line, in bytes (from the init request).
REPLY_LIMIT: list[int] = []


class ReplyTooLarge(Exception):
    """The reply would be longer than the grader reads: it is not built further."""


class Budget:
    """Bytes a reply may still take; a lower bound of its JSON size is charged."""

    def __init__(self, limit: float) -> None:
        self.left = limit

    def spend(self, size: int) -> None:
        self.left -= size
        if self.left < 0:
            raise ReplyTooLarge


def set_limits(limits: dict[str, int]) -> bool:
    """Lower this process's resource limits; whether it could (not without ``resource``)."""
    try:
        import resource  # POSIX-only: the worker must start anywhere
    except ImportError:
        return False
    names = {"cpu_s": resource.RLIMIT_CPU, "address_space_bytes": resource.RLIMIT_AS,
             "processes": resource.RLIMIT_NPROC, "file_size_bytes": resource.RLIMIT_FSIZE,
             "open_files": resource.RLIMIT_NOFILE, "core_bytes": resource.RLIMIT_CORE}
    for key, which in names.items():
        value = limits.get(key)
        if value is None:
            continue
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            resource.setrlimit(which, (min(value, hard), hard))
    if hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    return True


def confine(landlock_paths: Any, filter_syscalls: bool, *, no_processes: bool = False
            ) -> dict[str, Any]:
    """Apply Landlock to ``landlock_paths`` when given, then the syscall filter when asked
    (with ``no_processes``, refusing new processes too); the line saying what holds."""
    line: dict[str, Any] = {"syscall_filter": False, "landlock": 0, "failed": None,
                            "error": None}
    layer = "Landlock"
    try:
        if isinstance(landlock_paths, dict):
            import landlock  # type: ignore[import-not-found,unused-ignore]

            line["landlock"] = landlock.restrict(landlock_paths["read"],
                                                 landlock_paths["write"])
        layer = "syscall filter"
        if filter_syscalls:
            import syscall_filter  # type: ignore[import-not-found,unused-ignore]

            syscall_filter.install(**({"no_processes": True} if no_processes else {}))
            line["syscall_filter"] = True
    except Exception as error:
        line.update(failed=layer, error=describe(error))
    return line


def unit_registry() -> Any:
    """The pint registry of the lab (``param = 1 * count``), imported on first use."""
    if not REGISTRY:
        import pint

        registry: Any = None
        if DEFINITIONS:  # parsed once for this runtime (graders.sandbox.runtime)
            with contextlib.suppress(Exception):  # an unreadable cache costs time only
                registry = pint.UnitRegistry(cache_folder=DEFINITIONS[0])
        if registry is None:
            registry = pint.UnitRegistry()
        registry.define("param = 1 * count")
        registry.define("Gbps = gigabit / second")
        REGISTRY.append(registry)
    return REGISTRY[0]


def decode(value: Any) -> Any:
    """Turn the grader's tagged JSON into the objects a submission expects."""
    if isinstance(value, list):
        return [decode(item) for item in value]
    if not isinstance(value, dict):
        return value
    if "$q" in value:
        magnitude, unit = value["$q"]
        return unit_registry().Quantity(magnitude, unit)
    if "$ns" in value:
        return types.SimpleNamespace(**{k: decode(v) for k, v in value["$ns"].items()})
    if "$tuple" in value:
        return tuple(decode(item) for item in value["$tuple"])
    if "$map" in value:
        return {k: decode(v) for k, v in value["$map"].items()}
    return {k: decode(v) for k, v in value.items()}


def plain(value: Any, depth: int, budget: Budget) -> Any:
    """Reduce a student value to plain JSON data, reading numbers through their base
    types; ``budget`` stops the work (ReplyTooLarge) past the grader's line limit."""
    budget.spend(1)
    kind = type(value)
    if value is None or kind is bool or kind is int or kind is float:
        return value
    if isinstance(value, str):
        text = bounded_text(value if kind is str else str.__str__(value))
        budget.spend(len(text))
        return text
    if isinstance(value, bool):
        return bool.__bool__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if any(kind is getattr(sys.modules.get(module), name, None)  # an imported Decimal or
           for module, name in (("decimal", "Decimal"), ("fractions", "Fraction"))):
        return float(value)  # Fraction: its value as a float
    if getattr(kind, "__module__", "") == "numpy" and hasattr(value, "item"):
        try:
            item = value.item()
        except Exception:
            return {"$unsupported": "numpy array"}
        if type(item) in (bool, int, float):
            return item
    if isinstance(value, (list, tuple)) and depth < 3:
        items = list.__iter__(value) if isinstance(value, list) else tuple.__iter__(value)
        out: list[Any] = []
        for item in items:
            if len(out) >= MAX_SEQUENCE:
                break
            out.append(plain(item, depth + 1, budget))
        return out
    return {"$unsupported": str(getattr(kind, "__qualname__", "object"))[:80]}


def bounded_text(text: str) -> str:
    """``text`` (a plain str), cut to MAX_TEXT characters with a marker naming its length."""
    if len(text) <= MAX_TEXT:
        return text
    return f"{text[:MAX_TEXT]}\u2026 [truncated, {len(text)} chars]"


def read_fields(result: Any, fields: list[str] | None, budget: Budget) -> Any:
    """Read ``fields`` from a result: by key, by attribute, or by position in a sequence."""
    if fields is None:
        return plain(result, 0, budget)
    base = tuple if isinstance(result, tuple) else list if isinstance(result, list) else None
    items = base is not None and base.__len__(result) == len(fields) \
        and list(base.__iter__(result))
    keyed = isinstance(result, dict)
    values: dict[str, Any] = {}
    for index, field in enumerate(fields):
        try:
            if keyed and dict.__contains__(result, field):
                values[field] = plain(dict.__getitem__(result, field), 0, budget)
            elif hasattr(result, field):
                values[field] = plain(getattr(result, field), 0, budget)
            elif items:
                values[field] = plain(items[index], 0, budget)
            else:
                values[field] = {"$missing": field}
        except ReplyTooLarge:
            raise
        except Exception as error:
            values[field] = {"$error": describe(error)}
    return values


def describe(error: BaseException) -> str:
    """``Type: message``, bounded, even for an exception whose ``__str__`` raises."""
    try:
        message = str(error)
    except BaseException:
        message = "<message could not be read>"
    name = getattr(type(error), "__name__", "Exception")
    return bounded_text(f"{name}: {message}" if message else str(name))


def encode(reply: dict[str, Any]) -> str:
    """One compact JSON line; a value that cannot be encoded becomes an error reply."""
    try:
        return json.dumps(reply, separators=(",", ":"), allow_nan=True)
    except (TypeError, ValueError) as error:
        return json.dumps({"id": reply.get("id"), "ok": False,
                           "error": "unencodable result: " + describe(error)})


def import_submission(path: str) -> types.ModuleType:
    """Import the submission as module ``serving``; return it or raise."""
    spec = importlib.util.spec_from_file_location("serving", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["serving"] = module
    spec.loader.exec_module(module)
    return module


def import_failure(error: BaseException, path: str) -> str:
    """The import error, with its line in the submission (a syntax error's source and
    caret), and for a module outside the standard library the rule that forbids it."""
    if isinstance(error, SyntaxError):
        return describe(error) + source_pointer(error)
    frames = [frame for frame in traceback.extract_tb(error.__traceback__)
              if frame.filename == path]
    text = describe(error)
    if frames:
        text += f" (serving.py line {frames[-1].lineno})"
    missing = getattr(error, "name", None) if isinstance(error, ModuleNotFoundError) else None
    if isinstance(missing, str) and missing.split(".")[0] not in AVAILABLE_MODULES:
        text += (f"; serving.py may import only Python's standard library and pint: "
                 f"{missing.split('.')[0]} is not available to it, even where it is installed")
    return text


#: Top-level modules a submission may import besides the standard library.
AVAILABLE_MODULES = frozenset({*sys.stdlib_module_names, "pint", "serving"})
#: Characters of a syntax error's source line that are shown.
MAX_SOURCE_CHARS = 160


def source_pointer(error: SyntaxError) -> str:
    """The offending source line and a caret under it, as Python prints them, or ``""``."""
    text = error.text if isinstance(error.text, str) else ""
    line = text.rstrip("\r\n")
    if not line.strip():
        return ""
    indent = len(line) - len(line.lstrip())
    shown = line.strip()[:MAX_SOURCE_CHARS]
    offset = error.offset if isinstance(error.offset, int) else 0
    start = min(max(offset - 1 - indent, 0), len(shown))
    end = error.end_offset if isinstance(error.end_offset, int) \
        and error.end_lineno in (None, error.lineno) else offset + 1
    width = max(1, min(end - 1 - indent, len(shown) + 1) - start)
    return f"\n    {shown}\n    {' ' * start}{'^' * width}"


def answer(module: types.ModuleType, request: dict[str, Any]) -> dict[str, Any]:
    """Run one request and build its reply."""
    ident = request.get("id")
    if request.get("op") == "pint":
        unit_registry()
        return {"id": ident, "ok": True, "value": None}
    function = getattr(module, request["fn"], None)
    if not callable(function):
        return {"id": ident, "ok": False,
                "error": f"serving.py does not define a function {request['fn']}()"}
    result = function(*decode(request.get("args", [])), **decode(request.get("kwargs", {})))
    budget = Budget(REPLY_LIMIT[0] if REPLY_LIMIT else float("inf"))
    try:
        value = read_fields(result, request.get("fields"), budget)
    except ReplyTooLarge:  # the grader would refuse the line: say so in a short one
        return {"id": ident, "ok": False, "oversize": True}
    return {"id": ident, "ok": True, "value": value}


def send(replies: TextIO, reply: dict[str, Any]) -> None:
    """Flush the submission's output into its pipe, then write one reply line."""
    for name in ("stdout", "stderr"):  # replaced, closed or hostile: the submission's business
        with contextlib.suppress(BaseException):
            getattr(sys, name).flush()
    replies.write(encode(reply) + "\n")
    replies.flush()


def die_with_parent() -> None:
    """On Linux, be killed when the process that started this worker ends: nothing of the
    submission outlives its grading, whoever ends the grader (the syscall filter refuses
    clearing it). Set after any change of user, which clears it."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(1, int(signal.SIGKILL), 0, 0, 0) == 0 and os.getppid() != parent:
        os._exit(1)  # the parent ended before the signal was set: nobody reads the replies


def main() -> None:
    """Move the protocol off fds 0/1 (1 becomes 2, the output), limit, confine, import, serve."""
    die_with_parent()
    requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8", newline="\n")
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)
    init = json.loads(requests.readline())
    sys.path[:0] = list(init.get("path", []))
    if isinstance(init.get("definitions"), str):
        DEFINITIONS.append(init["definitions"])
    limits = init.get("limits", {})
    if isinstance(limits.get("reply_bytes"), int):
        REPLY_LIMIT.append(limits["reply_bytes"])
    limited = set_limits(limits)
    sys.setrecursionlimit(int(init.get("recursion_limit", 3000)))
    if init.get("syscall_filter") or init.get("landlock"):  # before any student code, or none
        line = confine(init.get("landlock"), bool(init.get("syscall_filter")),
                       no_processes=bool(init.get("no_processes")))
        send(replies, line)
        if line["failed"] is not None:
            return
    path = init["submission"]
    try:
        module = import_submission(path)
    except BaseException as error:
        send(replies, {"ready": False, "error": import_failure(error, path)})
        return
    pint_loaded = False
    if init.get("preload_pint"):
        with contextlib.suppress(Exception):  # a call that needs pint imports it again
            unit_registry()
            pint_loaded = True
    send(replies, {"ready": True, "pint": pint_loaded, "rlimits": limited})
    for text in requests:  # until the grader closes the pipe
        try:
            request = json.loads(text)
        except ValueError:
            return
        try:
            reply = answer(module, request)
        except BaseException as error:  # the submission's exception fails this call only
            reply = {"id": request.get("id"), "ok": False, "error": describe(error)}
        send(replies, reply)


if __name__ == "__main__":
    main()
