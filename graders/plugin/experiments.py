"""The diagnosis's lab in a grading: the oracle's expected values, and the student's
answers at the experiments' inputs, asked of the visible worker.

A diagnosis runs only once a visible case has failed, so a correct submission pays
nothing for it. Its calls never cost the grading a point: they run as a trial of the
runner (:meth:`graders.sandbox.runner.StudentRunner.trial`), so a probe that hangs or
crashes leaves every function's strikes and the hang budget as they were, and they stop
at the first call that hangs or crashes, or once :data:`PROBE_ALLOWANCE_S` is spent. The
calls are charged to the total budget, and made only while most of it is left.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from graders.grading.cases import Case
from graders.grading.compare import Tolerance
from graders.grading.diagnosis import error_name
from graders.grading.finders import MISSING, NOT_ASKED, Failed
from graders.sandbox.runner import CallOutcome, CallRequest, StudentRunner

#: Wall time one batch of experiments may take, at most (they stop at the next answer).
PROBE_ALLOWANCE_S = 2.0
#: The share of the total time budget that must be left for experiments to be run.
PROBE_BUDGET_SHARE = 0.5


def answer_of(outcome: CallOutcome) -> Any:
    """A call's outcome as the diagnosis reads it: the plain value, or :class:`Failed`
    with the exception's name and message (a failure of another kind is no exception:
    ``<status>``)."""
    if outcome.ok:
        return outcome.value
    if outcome.status == "raised":
        return Failed(error_name(outcome.message) or "<raised>", outcome.message)
    return Failed(f"<{outcome.status}>")


def probe_answers(runner: StudentRunner, cases: Sequence[Case]) -> list[Any]:
    """The student's answers at ``cases`` (see the module): :data:`NOT_ASKED` for each
    call not made."""
    answers: list[Any] = [NOT_ASKED] * len(cases)
    budget = runner.budget
    if not cases or budget.refusal() is not None or \
            budget.spent_s > (1 - PROBE_BUDGET_SHARE) * budget.total_s:
        return answers
    started = time.monotonic()
    with runner.trial():
        calls = runner.call_many([CallRequest(case.function, case.args, case.kwargs,
                                              case.fields) for case in cases])
        try:
            for index, outcome in enumerate(calls):
                answers[index] = answer_of(outcome)
                if (not outcome.ok and outcome.status != "raised") or \
                        time.monotonic() - started > PROBE_ALLOWANCE_S:
                    break
        finally:
            calls.close()
    return answers


@dataclass(frozen=True)
class WorkerLab:
    """:class:`graders.grading.finders.Lab` in a grading: ``expected`` is the grading's
    oracle (the reference, or the bundle's golden files), ``ask`` the visible worker's
    experiments (None once it has stopped: then nothing is asked)."""

    tolerance: Tolerance
    oracle_value: Callable[[Case], Any]
    ask: Callable[[Sequence[Case]], list[Any]] | None

    def expected(self, case: Case) -> Any:
        try:
            return self.oracle_value(case)
        except Exception:  # noqa: BLE001 - outside the lab's domain, or not in the golden
            return MISSING  # probes: no value there, and the diagnosis makes no claim

    def answers(self, cases: Sequence[Case]) -> list[Any]:
        if self.ask is None:
            return [NOT_ASKED] * len(cases)
        return self.ask(cases)
