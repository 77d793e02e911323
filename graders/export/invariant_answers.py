"""The lab's own calls at the invariant suite's examples: what the student bundle's probes
file holds so that a falsified example shows the lab's answer beside the student's."""

from __future__ import annotations

import inspect
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from graders.expected.invariant_examples import example_case
from graders.expected.reference import reference_expected
from graders.grading.cases import Case
from graders.grading.checks import Answer, Student
from graders.sandbox.calls import CallOutcome, CallRequest

if TYPE_CHECKING:
    from graders.trackfiles.tracks import Track


class _LabStudent(Student):
    """The lab itself as the student: the reference answers, in this process, and every
    call asked is kept as its case."""

    def __init__(self, test_name: str) -> None:
        super().__init__(runner=None, test_name=test_name)  # type: ignore[arg-type]
        self.cases: list[Case] = []

    def _call_many(self, requests: list[CallRequest]) -> Generator[CallOutcome, None, None]:
        for request in requests:
            case = Case("lab", request.function, tuple(request.args), dict(request.kwargs or {}))
            yield CallOutcome("ok", value=reference_expected(case))

    def ask(self, function: str, *args: Any, **kwargs: Any) -> Answer:
        answer = super().ask(function, *args, **kwargs)
        self.cases.append(example_case(function, args, kwargs, answer.asked))
        return answer


def lab_cases(tracks: tuple[Track, ...], examples: int) -> list[Case]:
    """Every call the visible invariant tests ask of a submission that answers as the lab
    does, at ``examples`` examples per test, on ``tracks`` (as the bundle binds them)."""
    from graders.suite import test_invariants as suite

    cases: dict[str, Case] = {}
    for name, test in inspect.getmembers(suite, inspect.isfunction):
        if not name.startswith("test_") or test.__module__ != suite.__name__:
            continue
        student = _LabStudent(name)
        arguments: dict[str, Any] = {"student": student, "invariant_examples": examples}
        if "tracks" in inspect.signature(test).parameters:
            arguments["tracks"] = tracks
        test(**arguments)
        cases.update((case.key, case) for case in student.cases)
    return list(cases.values())
