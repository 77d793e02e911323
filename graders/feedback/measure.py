"""The report's curves measured: reference values from the oracle, student values from the runner.

A function that is not implemented, crashes, hangs or cannot be called is not called
again, and every one of its curves carries a message instead of student values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from graders.feedback.checks import Row, Violation, real, violations
from graders.feedback.curves import Sweep
from graders.grading.cases import Case
from graders.grading.checks import failed_call_message
from graders.sandbox.runner import CallOutcome

#: Notes about single failed points shown under one plot; the rest are counted.
MAX_NOTES = 5


@dataclass(frozen=True)
class MeasuredSweep:
    """One sweep with the reference's and the student's rows (None where there is none)."""

    sweep: Sweep
    reference: tuple[Row, ...]
    student: tuple[Row, ...]
    notes: tuple[str, ...] = ()
    message: str | None = None
    violations: tuple[Violation, ...] = ()

    @property
    def plotted(self) -> bool:
        """Whether the student has a curve to draw (else :attr:`message` says why)."""
        return self.message is None


def _fatal(outcome: CallOutcome) -> bool:
    """A failure that ends the function's curves: anything but an ordinary exception."""
    return outcome.status != "raised" or outcome.message.startswith("NotImplementedError")


def _point(sweep: Sweep, index: int) -> str:
    return f"{sweep.x_label} = {sweep.xs[index]:g}"


def _describe(value: Any) -> str:
    if isinstance(value, dict) and len(value) == 1:
        key, detail = next(iter(value.items()))
        return {"$missing": "missing", "$unsupported": f"an unsupported {detail}"}.get(
            key, repr(value))
    return "NaN" if isinstance(value, float) else repr(value)[:80]


def _reference(sweep: Sweep, expected: Callable[[Case], Any]) -> tuple[Row, ...]:
    rows: list[Row] = []
    for case in sweep.cases:
        try:
            value = expected(case)
        except Exception:  # a golden file without curve cases: draw the student alone
            value = None
        rows.append(value if isinstance(value, dict) else None)
    return tuple(rows)


def measure(sweeps: Iterable[Sweep], call: Callable[[Case], CallOutcome],
            expected: Callable[[Case], Any]) -> list[MeasuredSweep]:
    """Measure every sweep; ``call`` runs a case against the student."""
    dead: dict[str, str] = {}
    measured = []
    for sweep in sweeps:
        rows: list[Row] = []
        notes: list[str] = []
        for index, case in enumerate(sweep.cases):
            if sweep.function in dead:
                rows.append(None)
                continue
            outcome = call(case)
            if not outcome.ok:
                if _fatal(outcome):
                    dead[sweep.function] = f"{sweep.function}: {failed_call_message(outcome)}"
                else:
                    notes.append(f"{_point(sweep, index)}: {failed_call_message(outcome)}")
                rows.append(None)
                continue
            row = outcome.value if isinstance(outcome.value, dict) else None
            rows.append(row)
            for field in sweep.fields:
                if real(row, field) is None:
                    shown = row.get(field) if row is not None else outcome.value
                    notes.append(f"{_point(sweep, index)}: {field} is {_describe(shown)}, "
                                 "not a number")
        measured.append(_finish(sweep, _reference(sweep, expected), rows, notes))
    return [replace(m, message=dead[m.sweep.function], notes=(), violations=())
            if m.sweep.function in dead else m for m in measured]


def _finish(sweep: Sweep, reference: tuple[Row, ...], rows: list[Row],
            notes: list[str]) -> MeasuredSweep:
    if not any(real(row, field) is not None for row in rows for field in sweep.fields):
        reason = notes[0].split(": ", 1)[-1] if notes else "no values"
        return MeasuredSweep(sweep, reference, tuple(rows),
                             message=f"{sweep.function}: no point of this curve could be "
                                     f"drawn ({reason})")
    shown = notes[:MAX_NOTES]
    if len(notes) > MAX_NOTES:
        shown.append(f"... and {len(notes) - MAX_NOTES} more points without a value")
    return MeasuredSweep(sweep, reference, tuple(rows), tuple(shown), None,
                         tuple(violations(sweep, rows)))
