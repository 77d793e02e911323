"""The architecture of ``graders/``, enforced: sub-packages in layers, no import cycles.

Every import between modules of the package counts, function-level and TYPE_CHECKING
imports included. A module may import its own sub-package, any sub-package of a lower
layer, and the base modules; never a higher layer. ``docs/architecture.md`` draws the
same map.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import graders

PACKAGE = Path(graders.__file__).parent
#: From the top down; sub-packages on one line may not import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__main__",),
    ("cli",),
    ("regrade", "export"),
    ("plugin",),
    ("feedback", "suite"),
    ("results", "expected", "reality"),
    ("grading",),
    ("trackfiles", "sandbox"),
    ("base",),
)
#: The shared base modules at the top of the package, importable from anywhere.
BASE = ("__init__", "errors", "units", "versions", "escaping", "identity")
MAX_TOP_LEVEL_MODULES = 8


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports(path: Path, known: dict[str, Path]) -> Iterator[str]:
    """Every module of the package ``path`` imports, anywhere in it."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] != "graders":
                continue
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                yield full if full in known else node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "graders":
                    yield alias.name


def part(module: str) -> str:
    """The sub-package a module belongs to, or "base"/"__main__"."""
    pieces = module.split(".")
    if len(pieces) == 1:
        return "base"
    if (PACKAGE / pieces[1]).is_dir():
        return pieces[1]
    return "__main__" if pieces[1] == "__main__" else "base"


def layer(name: str) -> int:
    for index, members in enumerate(LAYERS):
        if name in members:
            return index
    raise AssertionError(f"sub-package {name!r} is in no layer of LAYERS")


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: {target for target in imports(path, known) if target in known
                   and target != name}
            for name, path in known.items()}


def test_graders_has_few_modules_at_its_top_level() -> None:
    top = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top
    assert set(top) <= {*BASE, "__main__"}


def test_every_sub_package_says_what_it_owns() -> None:
    for folder in sorted(p for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()):
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text(encoding="utf-8")))
        assert doc, f"{folder.name}/__init__.py has no docstring"
        layer(folder.name)


def test_imports_go_down_the_layers_only() -> None:
    wrong = []
    for source, targets in graph().items():
        for target in targets:
            upward = layer(part(target)) < layer(part(source))
            sideways = part(target) != part(source) \
                and layer(part(target)) == layer(part(source))
            if upward or sideways:
                wrong.append(f"{source} imports {target}")
    assert not wrong, "\n".join(sorted(wrong))


def test_no_module_imports_itself_through_others() -> None:
    edges = graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(edges[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    assert not cycles, cycles


def test_the_reference_never_imports_the_grader() -> None:
    reference = PACKAGE.parent / "reference"
    if not reference.is_dir():
        return  # a student bundle has no reference
    for path in sorted(reference.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            assert not any(n.split(".")[0] == "graders" for n in names), path.name


def test_the_reference_and_the_grader_define_the_same_units() -> None:
    from graders import units
    from reference import units as reference_units

    assert units.DEFINITIONS == reference_units.DEFINITIONS
    # the worker stands alone too (standard library only): it defines them itself
    worker = (PACKAGE / "sandbox" / "worker_main.py").read_text(encoding="utf-8")
    defined = tuple(re.findall(r'registry\.define\("([^"]+)"\)', worker))
    assert defined == units.DEFINITIONS


def test_the_worker_uses_exactly_the_tags_of_the_wire_format() -> None:
    import re

    from graders.sandbox import wire

    source = (PACKAGE / "sandbox" / "worker_main.py").read_text(encoding="utf-8")
    assert set(re.findall(r'"(\$[a-z]+)"', source)) == wire.WORKER_TAGS
    assert wire.WORKER_TAGS <= wire.TAGS
