"""An in-process lab for the diagnosis's tests: a trusted submission (the project's own
slips and mutants, never a student's) called directly, with the reference as the oracle.

Shared by the tests of the diagnosis (``tests/grading/``) and the mutant sweep
(``bench/diagnosis.py``), as ``helpers.py`` is: it is not a test module.
"""

from __future__ import annotations

import importlib.util
import math
import sys
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from graders.expected.reference import reference_expected
from graders.grading.cases import Case, visible_cases
from graders.grading.compare import Tolerance
from graders.grading.diagnosis import case_inputs
from graders.grading.finders import MISSING, Failed, Observed
from graders.grading.function_diagnosis import FunctionDiagnosis, diagnose_function
from graders.trackfiles.tracks import Track, load_tracks

ROOT = Path(__file__).resolve().parents[1]


def load_module(path: Path, name: str) -> types.ModuleType:
    """``path`` imported under ``name`` (a fresh module each time)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _plain(value: Any, depth: int = 0) -> Any:
    """A result as plain data, read as the worker reads it: fields by name."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple) and depth:
        return [_plain(item, depth + 1) for item in value]
    return value


def plain_answer(result: Any, fields: Sequence[str] | None) -> Any:
    if fields is None:
        return _plain(result, 1)
    if isinstance(result, tuple) and not hasattr(result, "_fields") \
            and len(result) == len(fields):
        return {name: _plain(item, 1) for name, item in zip(fields, result, strict=True)}
    found = {}
    for name in fields:
        item = result.get(name, MISSING) if isinstance(result, dict) else \
            getattr(result, name, MISSING)
        if isinstance(item, tuple):
            item = list(item)
        found[name] = {"$missing": name} if item is MISSING else _plain(item, 1)
    return found


class InProcessLab:
    """The reference as the oracle and a trusted module as the student."""

    def __init__(self, module: types.ModuleType, tolerance: Tolerance | None = None) -> None:
        self.module = module
        self.tolerance = tolerance or Tolerance()
        self.calls = 0

    def expected(self, case: Case) -> Any:
        try:
            return reference_expected(case)
        except (ValueError, TypeError, ArithmeticError):
            return MISSING

    def answer(self, case: Case) -> Any:
        self.calls += 1
        try:
            result = getattr(self.module, case.function)(*case.args, **dict(case.kwargs))
            value = plain_answer(result, case.fields)
        except Exception as error:  # noqa: BLE001 - a student's code may raise anything
            return Failed(type(error).__name__, f"{type(error).__name__}: {error}")
        if isinstance(value, float) and math.isnan(value):
            return value
        return value

    def answers(self, cases: Sequence[Case]) -> list[Any]:
        return [self.answer(case) for case in cases]


def tracks() -> tuple[Track, ...]:
    return load_tracks(ROOT / "tracks")


def diagnose(module: types.ModuleType, function: str,
             loaded: tuple[Track, ...] | None = None,
             tolerance: Tolerance | None = None) -> tuple[FunctionDiagnosis, InProcessLab]:
    """The diagnosis of ``function`` of ``module`` on every visible case of the tracks."""
    lab = InProcessLab(module, tolerance)
    observed = []
    for case in visible_cases(loaded or tracks()):
        if case.function != function:
            continue
        observed.append(Observed(case, case_inputs(case.function, case.args, case.kwargs),
                                 reference_expected(case), lab.answer(case)))
    return diagnose_function(function, observed, lab), lab


def observe(module: types.ModuleType, cases: Sequence[Case], lab: InProcessLab
            ) -> list[Observed]:
    """Each case of ``cases`` with the reference's answer and the module's."""
    return [Observed(case, case_inputs(case.function, case.args, case.kwargs),
                     reference_expected(case), lab.answer(case)) for case in cases]


def twins(function: str, loaded: tuple[Track, ...], count: int = 40) -> list[Case]:
    """``count`` unseen inputs of ``function``: its visible cases with their numbers moved
    (as an official grading draws them), for checking a finding on inputs it never saw."""
    from graders.grading.unseen import unseen_cases

    visible = [case for case in visible_cases(loaded) if case.function == function]
    return list(unseen_cases("diagnosis-check", visible, count, visible).cases)


def falsified(function: str, name: str, key: str, observed: Sequence[Observed],
              lab: InProcessLab) -> bool | None:
    """Whether the finding ``key`` about the root field ``name`` is false on ``observed``
    (more cases than it was found on, with more experiments): its rule, region or
    experiment no longer holds there. None: the key cannot be checked (an observation)."""
    from graders.grading import finders
    from graders.grading.diagnosis import catalogue

    if key.startswith("observed:"):
        return None
    answered = [o for o in observed if not isinstance(o.got, Failed)
                and o.expected is not MISSING]
    probe = finders.FieldEvidence(function, name, [], [], lab)
    failing = [o for o in answered if probe.wrong(o) and name not in _knock_ons(o, lab)]
    failing = [o for o in failing if name not in _from_callee(o, lab)]
    passing = [o for o in answered if not probe.wrong(o)]
    saved = finders.PROBED_CASES, finders.PROBES_PER_CASE
    finders.PROBED_CASES, finders.PROBES_PER_CASE = 12, 64
    try:
        ev = finders.FieldEvidence(function, name, failing, passing, lab, catalogue())
        parts = key.split("|")
        if parts[0].startswith("region:"):
            region = parts[0].removeprefix("region:")
            predicate = _predicate(ev, region)
            if predicate is None:
                return None
            if not finders._separates(ev, predicate):
                return True
            if len(parts) == 1:
                return False
            local = [c for finder in finders.FINDERS for c in finder(ev) if c.key == parts[1]]
            return not any(finders.survives(ev, c, where=predicate) for c in local)
        found = [c for finder in (*finders.FINDERS, *finders.EXPERIMENTS) for c in finder(ev)
                 if c.key == key]
        return not any(finders.survives(ev, c) for c in found)
    finally:
        finders.PROBED_CASES, finders.PROBES_PER_CASE = saved


def _knock_ons(o: Observed, lab: InProcessLab) -> dict[str, str]:
    """The wrong fields of a case that follow from another wrong field of its answer."""
    from graders.grading.compare import compare
    from graders.grading.diagnosis import base_field, knock_ons

    if not isinstance(o.got, Mapping):
        return {}
    wrong = {base_field(d.field) for d in compare(o.expected, o.got, lab.tolerance)}
    return knock_ons(o.case.function, wrong, o.got, o.inputs)


def _from_callee(o: Observed, lab: InProcessLab) -> dict[str, str]:
    """The wrong fields of a case that follow from the callee the lab makes it call."""
    from graders.grading.compare import compare
    from graders.grading.diagnosis import base_field
    from graders.grading.function_diagnosis import _callee_follows

    wrong = list(dict.fromkeys(base_field(d.field)
                               for d in compare(o.expected, o.got, lab.tolerance)))
    return _callee_follows(o.case.function, [(o, wrong)], lab).get(o.case.key, {})


def _predicate(ev: Any, region: str) -> Any:
    """The region library's predicate of ``region`` (with its ``and p != 0`` part)."""
    from graders.grading import finders

    every = [*ev.failing, *ev.passing]
    library = {key: predicate for key, _, predicate in finders.predicates(every, ev.function)}
    base, _, zero = region.partition(" and ")
    if base not in library:
        return None
    if not zero:
        return library[base]
    zero_key = zero.replace("!=", "==")
    if zero_key not in library:
        return None
    inside, outside = library[base], library[zero_key]
    return lambda o: bool(inside(o)) and not outside(o)


SLIPS = ROOT / "tests" / "slips"


def apply_diff(text: str, diff: str) -> str:
    """``text`` with a unified diff of no context lines applied (the slips' diffs)."""
    import re

    lines = text.splitlines(keepends=True)
    hunks = re.findall(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@\n((?:[-+].*\n)*)", diff,
                       flags=re.MULTILINE)
    for start, count, body in reversed(hunks):
        old = [line[1:] for line in body.splitlines(keepends=True) if line.startswith("-")]
        new = [line[1:] for line in body.splitlines(keepends=True) if line.startswith("+")]
        length = 1 if count == "" else int(count)
        first = int(start) - (1 if length else 0)
        assert lines[first:first + length] == old, f"the diff does not apply at line {start}"
        lines[first:first + length] = new
    return "".join(lines)


def slip_source(name: str) -> str:
    """The source of the slip ``name`` (a folder of ``tests/slips``)."""
    correct = (SLIPS / "correct" / "serving.py").read_text(encoding="utf-8")
    return apply_diff(correct, (SLIPS / name / "serving.diff").read_text(encoding="utf-8"))


def slip_names() -> list[str]:
    """Every visible slip of ``tests/slips``: single bugs, then the two-bug ones."""
    return sorted(path.parent.name for path in SLIPS.glob("*/truth.toml"))


def slip_truth(name: str) -> list[dict[str, Any]]:
    import tomllib

    return list(tomllib.loads((SLIPS / name / "truth.toml").read_text("utf-8"))["bug"])


def load_source(source: str, name: str, folder: Path) -> types.ModuleType:
    path = folder / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    return load_module(path, name)
