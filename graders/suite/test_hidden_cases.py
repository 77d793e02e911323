"""Hidden tests: graded on Gradescope, shown after the due date, never in the student bundle.

Every test whose visibility is not ``visible`` lives in a ``test_hidden*.py`` module with
its cases, so that ``graders export student`` can leave the whole file out (it checks).

PYTEST_DONT_REWRITE: the suite asserts with messages of its own, and reads the same under
``graders grade`` (which runs pytest with ``--assert=plain``) and a student's ``pytest``.
"""

from __future__ import annotations

import pytest

from graders.grading.cases import Case
from graders.grading.checks import Grading

grader = pytest.mark.grader

#: Fleet sizes of the large-fleet cases, where the textbook formula overflows.
LARGE_FLEETS = (170, 171, 1000, 4096, 10000)


def large_fleet_cases() -> list[Case]:
    """erlang_c and queueing_latency on fleets of 170 to 10,000 replicas."""
    cases = []
    for replicas in LARGE_FLEETS:
        for rho in (0.5, 0.95, 0.999):
            arrival = rho * replicas * 1000.0 / 25.0
            cases.append(Case(f"c={replicas} rho={rho}", "erlang_c", (arrival, 25.0, replicas)))
            cases.append(Case(f"c={replicas} rho={rho}", "queueing_latency", (), {
                "arrival_qps": arrival, "service_ms": 25.0, "replicas": replicas,
                "service_cv": 1.0, "slo_ms": 200.0}))
    return cases


@grader(points=3, function="erlang_c", visibility="after_due_date")
def test_erlang_c_large_fleet(grading: Grading) -> None:
    """erlang_c stays accurate on fleets of 170 to 10,000 replicas"""
    grading.check(c for c in large_fleet_cases() if c.function == "erlang_c")


@grader(points=2, function="queueing_latency", visibility="after_due_date")
def test_queueing_latency_large_fleet(grading: Grading) -> None:
    """queueing_latency stays accurate on fleets of 170 to 10,000 replicas"""
    grading.check(c for c in large_fleet_cases() if c.function == "queueing_latency")
