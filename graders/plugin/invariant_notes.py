"""What a falsified invariant example shows: each wrong answer beside the lab's, and why.

An answer of a function whose own visible cases fail follows from them, and the message
says so in a few words (the cases' hints above name the cause); one of a function whose
cases all pass is shown beside the lab's, and gets the single-case diagnosis of the visible
cases (the catalogue, and the rules its values alone bear out: no experiments, so an
official grading and the student bundle say the same).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from graders.expected.invariant_examples import example_case
from graders.grading.checks import Answer, Explanation, case_lines
from graders.grading.compare import compare
from graders.grading.diagnosis import base_field, case_inputs
from graders.grading.finders import MISSING, Observed
from graders.grading.function_diagnosis import diagnose_function
from graders.plugin.experiments import WorkerLab

if TYPE_CHECKING:
    from graders.plugin.session import GradingSession

#: Wrong answers shown of one falsifying example (the first; most examples ask one or two).
MAX_ANSWERS_SHOWN = 2


def explain_example(session: GradingSession, answers: Sequence[Answer]) -> Explanation:
    """What a falsified example's answers show (nothing when the lab's values at its calls
    are unknown, or every answer made is the lab's)."""
    lab = WorkerLab(session.settings.tolerance, session.expected_value, None)
    lines: list[str] = []
    shown = 0
    seen: set[str] = set()
    follows: dict[str, None] = {}  # the functions whose failing cases it follows from
    for answer in answers:
        if answer.outcome is None or not answer.outcome.ok or shown == MAX_ANSWERS_SHOWN \
                or answer.asked in seen:
            continue
        seen.add(answer.asked)
        case = example_case(answer.function, answer.args, answer.kwargs, answer.asked)
        expected = lab.expected(case)
        if expected is MISSING:
            continue
        got = answer.outcome.value
        order = {name: index for index, name in enumerate(case.fields or ())}
        # in the contract's order of fields, whichever order the oracle's value has (a
        # golden file's are sorted)
        differences = sorted(compare(expected, got, lab.tolerance),
                             key=lambda d: order.get(base_field(d.field), len(order)))
        if not differences:
            continue
        shown += 1
        evidence = session.evidence(answer.function)
        failing = evidence.cases - evidence.passed
        if failing:
            # no line of its own: the cases' own hints, above, name the cause
            follows.setdefault(answer.function, None)
            continue
        observed = Observed(case, case_inputs(answer.function, answer.args, answer.kwargs),
                            expected, got)
        diagnosis = diagnose_function(answer.function, [observed], lab).case(case.key)
        lines.append(f"{case.describe_inputs()}, beside the lab's answer:")
        lines += [line.replace("\n", "\n  ") for line in case_lines("", differences, diagnosis)]
    suffix = "".join(f"; this follows from {function}'s failing cases: fix those first"
                     for function in follows)
    return Explanation(suffix, tuple(lines))
