"""The catalogue of known mistakes: each one a transformation of the reference's answer that
a student's wrong answer can be matched against, to name its cause in the student's
feedback (:mod:`graders.grading.diagnosis`) and to label a cluster of a class's wrong
answers (:mod:`graders.regrade.clusters`). It lives here, beside the grading, because the
student bundle grades with it too (without ``reference/`` and without the regrade).

A catalogue is a TOML file of ``[[mistake]]`` tables (the grader's own is
``graders/grading/mistakes.toml``; an instructor adds one with ``graders regrade
--mistakes FILE``, whose entries are tried first)::

    [[mistake]]
    id = "natural-log"                       # unique; letters, digits, - and _
    label = "a natural log where the lab uses log2"
    function = "batching_tax"                # a contract function
    field = "batched_service_ms"             # a result field (omit for plain results)
    got = "expected * (1 + 0.08 * log(batch_size)) / (1 + 0.08 * log2(batch_size))"
    rel = 1e-6                               # optional tolerance (default 1e-6)
    hint = "the batched service grows 8 % per doubling of the batch: log2(B), not log"

``got`` is an arithmetic expression of the student's answer in terms of ``expected`` (the
reference's value of the field), the reference's other fields of the same answer by
name (where they are known: in grading; in a class report, which keeps the wrong fields,
only the ones they are computed from and the ones the grader's own entries for a wrong
field name, the kept case's ``sources``) and the case's
numeric inputs by parameter name (positional ones also as ``arg0``, ``arg1``, ...; an
input and a field of the same name hold the field's value),
with ``+ - * / // % **``, numbers, ``inf``, ``pi``, ``e`` and the functions
:data:`FUNCTIONS`. Instead of ``got``, ``error`` names the exception the mistaken code
raises (``error = "OverflowError"``).

``hint`` is what a student is told when the entry fits their answer: it names the cause
(in the handout's terms, never the expected value). The grader's own entries all have one;
an entry without one names nothing in feedback and only labels clusters.

A cluster's cause fits an entry when every kept failed case of its function where the
field is a root (it does not follow from another wrong field) agrees with the entry (or,
for ``error``, every one that raised does), and there is at least one.
"""

from __future__ import annotations

import ast
import functools
import math
import operator
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graders.errors import GraderError
from graders.grading.contract import PARAMETERS, RESULT_FIELDS


def sojourn_quantile(q: float, arrival_qps: float, service_ms: float, replicas: float,
                     wait_probability: float) -> float:
    """The ``q`` quantile of an M/M/c request's whole latency (service and wait) in ms,
    with Erlang C value ``wait_probability``: the exact tail some students compute instead
    of the lab's formula (a mean service time plus the waiting time's quantile). Bisection
    on the survival (1 - C) e^(-mu t) + C e^(-mu t) (1 + mu (1 - e^(-(r - mu) t)) / (r - mu))."""
    mu = 1.0 / service_ms
    r = max(1.0, float(int(replicas))) / service_ms - arrival_qps / 1000.0
    if not (0 < q < 1 and mu > 0 and r > 0 and 0 <= wait_probability <= 1):
        raise ValueError("outside the formula's domain")

    def survival(t: float) -> float:
        served = math.exp(-mu * t)
        d = r - mu
        spread = t if abs(d * t) < 1e-12 else -math.expm1(-d * t) / d
        return (1 - wait_probability) * served + wait_probability * served * (1 + mu * spread)

    low, high = 0.0, -math.log(1 - q) * (1 / mu + 1 / r)
    while survival(high) > 1 - q:
        low, high = high, 2 * high
    for _ in range(200):
        middle = (low + high) / 2
        if middle in (low, high):
            break
        low, high = (middle, high) if survival(middle) > 1 - q else (low, middle)
    return (low + high) / 2


BUILTIN = Path(__file__).with_name("mistakes.toml")
DEFAULT_REL = 1e-6
#: The functions an expression may call.
FUNCTIONS: dict[str, Callable[..., float]] = {
    "log": math.log, "log2": math.log2, "log10": math.log10, "exp": math.exp,
    "sqrt": math.sqrt, "floor": math.floor, "ceil": math.ceil, "abs": abs,
    "min": min, "max": max,
    "at_most": lambda a, b: float(a <= b),  # 1 when a <= b, else 0 (a bool answer)
    "sojourn_quantile": sojourn_quantile,
}
CONSTANTS = {"inf": math.inf, "pi": math.pi, "e": math.e}
_OPERATORS: dict[type[ast.AST], Callable[..., Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.USub: operator.neg, ast.UAdd: operator.pos,
}
_KEYS = {"id", "label", "function", "field", "got", "error", "rel", "hint"}
#: A leading byte-order mark, as some editors save UTF-8 (TOML does not allow one).
BYTE_ORDER_MARK = "\ufeff"
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
MAX_EXPRESSION_CHARS = 400


class MistakeError(GraderError, ValueError):
    """A catalogue file that cannot be used; the message says where and how to fix it."""


@dataclass(frozen=True)
class Mistake:
    """One known mistake: which answers it produces, and its name for people."""

    id: str
    label: str
    function: str
    field: str
    got: str
    error: str
    rel: float = DEFAULT_REL
    #: What a student whose answer fits is told ("" for none).
    hint: str = ""

    def predicts(self, expected: Any, inputs: Mapping[str, float],
                 fields: Mapping[str, Any] | None = None) -> float | None:
        """The answer this mistake gives, or None when it cannot be computed here (an
        input or field it needs is missing, or the arithmetic fails). ``fields``: the
        reference's whole answer, when known."""
        names: dict[str, float] = {**CONSTANTS, **inputs}
        for name, value in (fields or {}).items():
            number = _number(value)
            if number is not None:
                names[name] = number
        number = _number(expected)
        if number is not None:  # else an expression that uses it cannot be computed
            names["expected"] = number
        try:
            return float(_evaluate(_expression(self.got), names))
        except (KeyError, ArithmeticError, ValueError, TypeError):
            return None

    def fields_used(self) -> frozenset[str]:
        """The result fields of its function that ``got`` names: a class report keeps the
        reference's values of these with every kept case where :attr:`field` is wrong
        (:func:`graders.grading.checks.kept_case`), so that the entry can be matched."""
        fields = RESULT_FIELDS.get(self.function) or ()
        return frozenset(node.id for node in ast.walk(_expression(self.got))
                         if isinstance(node, ast.Name) and node.id in fields) \
            if self.got else frozenset()

    def agrees(self, expected: Any, got: Any, inputs: Mapping[str, float],
               fields: Mapping[str, Any] | None = None) -> bool:
        """Whether ``got`` is this mistake's answer for a case (within ``rel``)."""
        predicted = self.predicts(expected, inputs, fields)
        actual = _number(got)
        if predicted is None or actual is None:
            return False
        if math.isinf(predicted) or math.isinf(actual):
            return predicted == actual
        return abs(actual - predicted) <= max(self.rel * max(abs(actual), abs(predicted)),
                                              1e-12)


@functools.cache
def _expression(text: str) -> ast.expr:
    """The parsed ``got`` expression (parsed once per process: it is checked on loading)."""
    return ast.parse(text, mode="eval").body


def _number(value: Any) -> float | None:
    """A kept value as a number: ``"inf"`` as infinity; None when it is not a number."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:  # an int too large for a float fits no expression
            return None
    if value in ("inf", "-inf"):
        return float(value)
    return None


def _evaluate(node: ast.AST, names: Mapping[str, float]) -> Any:
    """Arithmetic only: the nodes :func:`_check_expression` lets through."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return names[node.id]
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left, names), _evaluate(node.right, names)
        if isinstance(node.op, ast.Pow) and abs(right) > 64:
            raise ValueError("exponent too large")
        return _OPERATORS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp):
        return _OPERATORS[type(node.op)](_evaluate(node.operand, names))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return FUNCTIONS[node.func.id](*(_evaluate(arg, names) for arg in node.args))
    raise ValueError("not arithmetic")


def _check_expression(text: str, names: set[str] | None, where: str) -> None:
    """Refuse anything but arithmetic on known names, with the reason."""
    if len(text) > MAX_EXPRESSION_CHARS:
        raise MistakeError(f"{where}: got is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as error:
        raise MistakeError(f"{where}: got is not an expression ({error.msg}): {text!r}") \
            from None
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Call,
               ast.Load, *_OPERATORS)
    for node in ast.walk(tree):
        if not isinstance(node, allowed):
            raise MistakeError(f"{where}: got may hold only numbers, names, + - * / // % **, "
                               f"and calls of {', '.join(FUNCTIONS)}; found "
                               f"{ast.unparse(node) if isinstance(node, ast.expr) else node}")
        if isinstance(node, ast.Constant) and (
                isinstance(node.value, bool) or not isinstance(node.value, int | float)):
            raise MistakeError(f"{where}: got may hold only numbers, found {node.value!r}")
        if isinstance(node, ast.Call) and (not isinstance(node.func, ast.Name)
                                           or node.func.id not in FUNCTIONS or node.keywords):
            raise MistakeError(f"{where}: got calls {ast.unparse(node.func)}; the functions "
                               f"are {', '.join(FUNCTIONS)} (positional arguments only)")
        if isinstance(node, ast.Name) and names is not None \
                and node.id not in names | set(FUNCTIONS):
            raise MistakeError(f"{where}: got uses {node.id!r}, which is not one of "
                               f"{', '.join(sorted(names))}")


def input_names(function: str) -> set[str]:
    """The names an expression of ``function`` may use: ``expected``, the constants, the
    contract's parameter names and positions, and the function's result fields."""
    parameters = parameter_names(function)
    return {"expected", *CONSTANTS, *parameters, *(RESULT_FIELDS[function] or ()),
            *(f"arg{index}" for index in range(len(parameters)))}


def parameter_names(function: str) -> list[str]:
    """The contract's parameter names of ``function``, in order."""
    return [name for name, _ in PARAMETERS[function]]



def parse_catalogue(text: str, source: str) -> list[Mistake]:
    """The entries of one catalogue file; :class:`MistakeError` says what is wrong, where."""
    try:
        document = tomllib.loads(text.removeprefix(BYTE_ORDER_MARK))
    except tomllib.TOMLDecodeError as error:
        raise MistakeError(f"{source}: not valid TOML: {error}; fix the syntax there") \
            from None
    unknown = set(document) - {"mistake"}
    if unknown:
        raise MistakeError(f"{source}: unknown top-level key(s) {', '.join(sorted(unknown))}; "
                           "a catalogue holds only [[mistake]] tables")
    entries = document.get("mistake", [])
    if not isinstance(entries, list):
        raise MistakeError(f"{source}: mistake must be a list of [[mistake]] tables, got "
                           f"{entries!r}; write each entry as a [[mistake]] table")
    if not entries:
        raise MistakeError(f"{source}: no [[mistake]] tables; see the format in "
                           "docs/instructor-guide.md")
    mistakes: list[Mistake] = []
    for index, entry in enumerate(entries, start=1):
        mistakes.append(_mistake(entry, f"{source}: mistake {index}"))
    _unique(mistakes, source)
    return mistakes


def _mistake(entry: Any, where: str) -> Mistake:
    if not isinstance(entry, Mapping):
        raise MistakeError(f"{where} must be a table ([[mistake]]), got {entry!r}; write it "
                           "as a [[mistake]] table with id, label, function and got or error")
    unknown = set(entry) - _KEYS
    if unknown:
        raise MistakeError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; the keys "
                           f"are {', '.join(sorted(_KEYS))}")
    for key in ("id", "label", "function"):
        if not isinstance(entry.get(key), str) or not entry[key].strip():
            raise MistakeError(f"{where}: {key} must be a non-empty string")
    where = f"{where} ({entry['id']})"
    if not _ID.match(entry["id"]):
        raise MistakeError(f"{where}: id may hold only letters, digits, - and _ (64 at most)")
    function = entry["function"]
    if function not in RESULT_FIELDS:
        raise MistakeError(f"{where}: function {function!r} is not a contract function; "
                           f"one of {', '.join(RESULT_FIELDS)}")
    fields = RESULT_FIELDS[function]
    field = entry.get("field", "")
    if not isinstance(field, str) or (fields is None and field) \
            or (fields is not None and field not in fields and (field or "error" not in entry)):
        expected = ("no field: its result is a plain value" if fields is None
                    else f"one of {', '.join(fields)}")
        raise MistakeError(f"{where}: field {field!r} is not a field of {function}; "
                           f"give {expected}")
    got, error = entry.get("got", ""), entry.get("error", "")
    if not isinstance(got, str):
        example = got if isinstance(got, int | float) and not isinstance(got, bool) \
            else "expected / 2"
        raise MistakeError(f"{where}: got must be a string expression, e.g. "
                           f"got = \"{example}\"")
    if not isinstance(error, str):
        raise MistakeError(f"{where}: error must be a string, the exception's name, e.g. "
                           "error = \"OverflowError\"")
    if bool(got) == bool(error):
        raise MistakeError(f"{where}: give exactly one of got (an expression of the "
                           "student's answer) and error (the exception's name)")
    if error and not error.isidentifier():
        raise MistakeError(f"{where}: error must be an exception's name, e.g. OverflowError")
    if got:
        _check_expression(got, input_names(function), where)
    rel = entry.get("rel", DEFAULT_REL)
    if isinstance(rel, bool) or not isinstance(rel, int | float) or not 0 <= rel < 1:
        raise MistakeError(f"{where}: rel must be a number in [0, 1), got {rel!r}")
    hint = entry.get("hint", "")
    if not isinstance(hint, str):
        raise MistakeError(f"{where}: hint must be a string (what a student is told)")
    return Mistake(entry["id"], " ".join(entry["label"].split()), function, field, got,
                   error, float(rel), " ".join(hint.split()))


def _unique(mistakes: Iterable[Mistake], source: str) -> None:
    seen: set[str] = set()
    for mistake in mistakes:
        if mistake.id in seen:
            raise MistakeError(f"{source}: two mistakes have the id {mistake.id!r}; "
                               "rename one")
        seen.add(mistake.id)


def load_catalogue(extra: Path | None = None) -> list[Mistake]:
    """The instructor's entries (``extra``, tried first), then the grader's own."""
    mistakes: list[Mistake] = []
    if extra is not None:
        try:
            text = extra.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as error:
            raise MistakeError(f"--mistakes {str(extra)!r} cannot be read: {error}") from None
        mistakes += parse_catalogue(text, str(extra))
    own = {m.id for m in mistakes}
    mistakes += [m for m in parse_catalogue(BUILTIN.read_text(encoding="utf-8"), BUILTIN.name)
                 if m.id not in own]
    return mistakes
