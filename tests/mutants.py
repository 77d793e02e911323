"""Mutants of ``reference/``: one small change each, the kind a student's slip makes,
with its truth (operator, line, function). The diagnosis is measured on them
(``bench/diagnosis.py``, ``tests/grading/test_mutant_diagnosis.py``): bugs nobody wrote a
hint for.

Operators (:data:`OPERATORS`): a constant moved by one, a unit factor dropped or added,
``*`` and ``/`` swapped, a parameter replaced by its default, ``floor`` and ``ceil``
swapped, a comparison's boundary moved, an intermediate value returned in a result field.

A mutant is a copy of the ``reference`` package under another name, with one module's
source changed, imported from a temporary folder: the reference itself, the oracle, is
never touched. Shared by the sweep and its test, as ``helpers.py`` is: not a test module.
"""

from __future__ import annotations

import ast
import copy
import importlib
import re
import sys
import tempfile
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from graders.grading.cases import CONTRACT_FUNCTIONS

REFERENCE = Path(__file__).resolve().parents[1] / "reference"
#: The modules whose functions the lab's contract names (the others hold the domain's
#: checks, the results' types and the extension).
MUTATED_MODULES = ("batching", "queueing", "capacity", "coldstart", "profile")
#: Factors a unit conversion multiplies or divides by.
UNIT_FACTORS = (1000, 1000.0, 1e3, 1e6, 1e9, 1024, 1024.0, 8, 2**30, 60)


@dataclass(frozen=True)
class Mutant:
    """One mutant: ``operator`` applied at ``line`` of ``module`` (in ``function``, and the
    contract functions whose own code reaches it), with the changed ``source``."""

    operator: str
    module: str
    line: int
    function: str
    functions: frozenset[str]
    description: str
    source: str

    @property
    def name(self) -> str:
        return f"{self.module}:{self.line}:{self.operator}:{self.description}"


Rewrite = tuple[ast.AST, ast.AST, str]  # (node, replacement, description)


def _constant_moves(function: ast.FunctionDef) -> Iterator[Rewrite]:
    for node in _body_nodes(function):
        if isinstance(node, ast.Constant) and type(node.value) in (int, float) \
                and not isinstance(node.value, bool):
            for step in (1, -1):
                moved = ast.Constant(node.value + step)
                yield node, moved, f"{node.value!r} -> {moved.value!r}"


def _unit_factors(function: ast.FunctionDef) -> Iterator[Rewrite]:
    for node in _body_nodes(function):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Div):
            for side, other in ((node.right, node.left), (node.left, node.right)):
                if isinstance(side, ast.Constant) and side.value in UNIT_FACTORS:
                    yield node, other, f"factor {side.value!r} dropped"
    for node in _body_nodes(function):
        if isinstance(node, ast.keyword) and node.arg and \
                node.arg.endswith(("_ms", "_gb", "_gbs")):
            for op, words in ((ast.Mult(), "times"), (ast.Div(), "divided by")):
                scaled = ast.keyword(node.arg, ast.BinOp(node.value, op, ast.Constant(1000)))
                yield node, scaled, f"{node.arg} {words} 1000"


def _mult_div_swaps(function: ast.FunctionDef) -> Iterator[Rewrite]:
    for node in _body_nodes(function):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Div):
            swapped = ast.BinOp(node.left, ast.Div() if isinstance(node.op, ast.Mult)
                                else ast.Mult(), node.right)
            yield node, swapped, f"{ast.unparse(node)} -> {ast.unparse(swapped)}"


def _default_parameters(function: ast.FunctionDef) -> Iterator[Rewrite]:
    arguments = function.args
    positional = arguments.args[len(arguments.args) - len(arguments.defaults):]
    defaults = dict(zip((a.arg for a in positional), arguments.defaults, strict=True))
    defaults.update({a.arg: d for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults,
                                               strict=True) if d is not None})
    for node in _body_nodes(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) \
                and node.id in defaults:
            yield node, copy.deepcopy(defaults[node.id]), \
                f"{node.id} -> its default {ast.unparse(defaults[node.id])}"


def _floor_ceil_swaps(function: ast.FunctionDef) -> Iterator[Rewrite]:
    for node in _body_nodes(function):
        if isinstance(node, ast.Attribute) and node.attr in ("floor", "ceil") \
                and isinstance(node.value, ast.Name) and node.value.id == "math":
            other = "ceil" if node.attr == "floor" else "floor"
            yield node, ast.Attribute(node.value, other, node.ctx), f"{node.attr} -> {other}"
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv):
            ceil = ast.UnaryOp(ast.USub(), ast.BinOp(ast.UnaryOp(ast.USub(), node.left),
                                                     ast.FloorDiv(), node.right))
            yield node, ceil, f"{ast.unparse(node)} -> ceiling division"


BOUNDARIES: dict[type[ast.cmpop], ast.cmpop] = {
    ast.Lt: ast.LtE(), ast.LtE: ast.Lt(), ast.Gt: ast.GtE(), ast.GtE: ast.Gt()}


def _comparison_boundaries(function: ast.FunctionDef) -> Iterator[Rewrite]:
    for node in _body_nodes(function):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 \
                and type(node.ops[0]) in BOUNDARIES:
            moved = ast.Compare(node.left, [BOUNDARIES[type(node.ops[0])]], node.comparators)
            yield node, moved, f"{ast.unparse(node)} -> {ast.unparse(moved)}"


def _intermediates_returned(function: ast.FunctionDef) -> Iterator[Rewrite]:
    assigned = [node.targets[0].id for node in ast.walk(function)
                if isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)]
    for node in _body_nodes(function):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Call):
            for keyword in node.value.keywords:
                if not isinstance(keyword.value, ast.Name):
                    continue
                others = [name for name in assigned if name != keyword.value.id]
                for other in others[-2:]:  # the nearest intermediates
                    yield keyword, ast.keyword(keyword.arg, ast.Name(other, ast.Load())), \
                        f"{keyword.arg}={other}"


OPERATORS: dict[str, Callable[[ast.FunctionDef], Iterator[Rewrite]]] = {
    "constant ±1": _constant_moves,
    "unit factor": _unit_factors,
    "* / swapped": _mult_div_swaps,
    "parameter -> default": _default_parameters,
    "floor / ceil": _floor_ceil_swaps,
    "comparison boundary": _comparison_boundaries,
    "intermediate returned": _intermediates_returned,
}


def _body_nodes(function: ast.FunctionDef) -> Iterator[ast.AST]:
    """The nodes of a function's body, not of its signature or docstring, nor of the
    domain checks' arguments (``at_least("x", x, 0.0)``: a name and a bound, not the lab's
    arithmetic)."""
    skipped: set[int] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("at_least", "whole_at_least", "finite"):
            skipped.update(id(child) for argument in node.args[:1] + node.args[2:]
                           for child in ast.walk(argument))
        if isinstance(node, ast.Raise):
            skipped.update(id(child) for child in ast.walk(node))
    for statement in function.body:
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue  # the docstring
        for node in ast.walk(statement):
            if id(node) not in skipped:
                yield node


def _callers(tree: ast.Module) -> dict[str, set[str]]:
    """Each function of a module with the names it calls."""
    return {node.name: {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            for node in tree.body if isinstance(node, ast.FunctionDef)}


def _reaching(function: str, calls: dict[str, set[str]]) -> frozenset[str]:
    """The contract functions of the module whose own code runs ``function`` (themselves,
    or through the module's private helpers)."""
    if function in CONTRACT_FUNCTIONS:
        return frozenset({function})
    found: set[str] = set()
    for caller, names in calls.items():
        if function in names and caller != function:
            found |= _reaching(caller, calls)
    return frozenset(found)


class _Replace(ast.NodeTransformer):
    def __init__(self, target: ast.AST, replacement: ast.AST) -> None:
        self.target, self.replacement = target, replacement

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if node is self.target:
            return self.replacement
        return super().generic_visit(node)


def mutants(modules: tuple[str, ...] = MUTATED_MODULES) -> Iterator[Mutant]:
    """Every mutant of ``modules``, each a distinct source, in a stable order."""
    for module in modules:
        text = (REFERENCE / f"{module}.py").read_text(encoding="utf-8")
        tree = ast.parse(text)
        calls = _callers(tree)
        seen = {ast.unparse(tree)}
        for function in (node for node in tree.body if isinstance(node, ast.FunctionDef)):
            for operator, rewrites in OPERATORS.items():
                for node, replacement, description in rewrites(function):
                    changed = _Replace(node, replacement).visit(tree)
                    source = ast.unparse(ast.fix_missing_locations(changed))
                    _Replace(replacement, node).visit(tree)  # undo, for the next
                    if source in seen:
                        continue
                    seen.add(source)
                    yield Mutant(operator, module, getattr(node, "lineno", function.lineno),
                                 function.name, _reaching(function.name, calls), description,
                                 source)


_IMPORT = re.compile(r"\breference\b")


@dataclass
class Loaded:
    """A mutant imported as a package (``module``), and its folder, removed by close()."""

    module: types.ModuleType
    folder: tempfile.TemporaryDirectory[str]
    package: str

    def close(self) -> None:
        for name in [name for name in sys.modules if name.split(".")[0] == self.package]:
            del sys.modules[name]
        if self.folder.name in sys.path:
            sys.path.remove(self.folder.name)
        self.folder.cleanup()


_COUNT = [0]


def load(mutant: Mutant) -> Loaded:
    """Import ``mutant`` as a fresh package beside nothing else (see the module)."""
    _COUNT[0] += 1
    package = f"mutant_reference_{_COUNT[0]}"
    folder = tempfile.TemporaryDirectory(prefix="mutant-")
    root = Path(folder.name) / package
    root.mkdir()
    for path in REFERENCE.glob("*.py"):
        text = mutant.source if path.stem == mutant.module else \
            path.read_text(encoding="utf-8")
        (root / path.name).write_text(_IMPORT.sub(package, text), encoding="utf-8")
    sys.path.insert(0, folder.name)
    try:
        module = importlib.import_module(package)
    except BaseException:
        sys.path.remove(folder.name)
        folder.cleanup()
        raise
    return Loaded(module, folder, package)
