"""``StudentRunner.call_many``: requests written ahead of replies, outcomes exactly as one
call at a time gives them, whatever the submission does between them."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import pytest
from helpers import CORPUS

from graders.grading.cases import CONTRACT_FUNCTIONS, RESULT_FIELDS, visible_cases
from graders.sandbox.runner import (
    PIPELINE_BYTES,
    CallOutcome,
    CallRequest,
    Limits,
    StudentRunner,
)
from graders.trackfiles.tracks import default_tracks_dir, load_tracks

QUICK = Limits(call_timeout_s=0.5, import_timeout_s=5.0)

#: Every call changes what later calls answer: a worker that saw the calls in another
#: order, or saw one more or one fewer, answers differently.
STATEFUL = """
import os, time
CALLS = []

def erlang_c(arrival_qps, service_ms, replicas):
    CALLS.append(replicas)
    if replicas == 13:
        time.sleep(5)  # past the call deadline
    if replicas == 17:
        os._exit(3)  # the worker dies
    if replicas == 19:
        raise ValueError("no fleet of 19")
    return float(len(CALLS) * 1_000_000 + sum(CALLS))
"""


def source(text: str) -> bytes:
    return textwrap.dedent(text).encode()


def erlang_calls(replicas: Sequence[int]) -> list[CallRequest]:
    return [CallRequest("erlang_c", (10.0, 20.0, c)) for c in replicas]


def one_by_one(submission: bytes, calls: Sequence[CallRequest],
               limits: Limits = QUICK) -> list[CallOutcome]:
    with StudentRunner(submission, limits=limits) as runner:
        return [runner.call(c.function, c.args, c.kwargs, c.fields) for c in calls]


def pipelined(submission: bytes, calls: Sequence[CallRequest],
              limits: Limits = QUICK) -> list[CallOutcome]:
    with StudentRunner(submission, limits=limits) as runner:
        return list(runner.call_many(calls))


def test_a_stateful_submission_sees_the_same_calls_in_the_same_order() -> None:
    calls = erlang_calls(range(1, 12))
    expected = one_by_one(source(STATEFUL), calls)
    assert [o.value for o in expected] == [k * 1_000_000 + sum(range(1, k + 1))
                                           for k in range(1, 12)]
    assert pipelined(source(STATEFUL), calls) == expected


@pytest.mark.parametrize("failing", [13, 17, 19], ids=["timeout", "crash", "raises"])
def test_a_failing_call_in_the_middle_gives_what_one_call_at_a_time_gives(failing: int) -> None:
    calls = erlang_calls([1, 2, 3, failing, 4, 5, 6, 7])
    expected = one_by_one(source(STATEFUL), calls)
    assert expected[3].status == {13: "timeout", 17: "crashed", 19: "raised"}[failing]
    assert pipelined(source(STATEFUL), calls) == expected


def test_a_function_abandoned_after_its_timeouts_is_refused_in_the_same_places() -> None:
    calls = erlang_calls([1, 13, 2, 13, 3, 4])
    expected = one_by_one(source(STATEFUL), calls)
    assert [o.status for o in expected] == ["ok", "timeout", "ok", "timeout", "abandoned",
                                            "abandoned"]
    assert pipelined(source(STATEFUL), calls) == expected


def test_once_the_time_budget_is_spent_the_rest_is_refused_without_running() -> None:
    slow = source("""
        import time
        def erlang_c(arrival_qps, service_ms, replicas):
            time.sleep(0.2)
            return 0.5
    """)
    limits = Limits(call_timeout_s=2.0, import_timeout_s=5.0, total_budget_s=0.9)
    outcomes = pipelined(slow, erlang_calls(range(1, 15)), limits)
    statuses = [o.status for o in outcomes]
    assert statuses[0] == "ok"
    assert statuses[-1] == "abandoned"
    assert "time budget exhausted" in outcomes[-1].message
    refused = statuses.index("abandoned")
    assert set(statuses[refused:]) == {"abandoned"}  # never an answer after a refusal
    assert 2 <= refused <= 8  # about 0.9 s of 0.2 s calls, import included


def test_the_correct_solution_answers_every_visible_case_alike_both_ways() -> None:
    """Track profiles (quantities: pint is imported mid-pipeline), big requests, every
    function of the contract."""
    tracks = load_tracks(default_tracks_dir())
    cases = list(visible_cases(tracks))
    assert {case.function for case in cases} == set(CONTRACT_FUNCTIONS)
    calls = [CallRequest(c.function, c.args, c.kwargs, RESULT_FIELDS[c.function]) for c in cases]
    correct = (CORPUS / "correct" / "serving.py").read_bytes()
    expected = one_by_one(correct, calls, Limits())
    assert all(outcome.ok for outcome in expected)
    assert pipelined(correct, calls, Limits()) == expected


def test_a_caller_that_stops_early_leaves_the_worker_ready_for_the_next_call() -> None:
    with StudentRunner(source(STATEFUL), limits=QUICK) as runner:
        answers = runner.call_many(erlang_calls(range(20, 59)))
        first = next(answers)
        answers.close()  # 38 requests may still be in flight
        after = runner.call("erlang_c", (10.0, 20.0, 100))
    assert first.value == 1_000_020
    # the worker ran some of the requests written ahead (the first included); the next
    # call still gets its own answer, never a reply meant for one of them
    assert after.ok
    ran = int(after.value) // 1_000_000 - 1
    assert 1 <= ran <= 39
    assert after.value == (ran + 1) * 1_000_000 + sum(range(20, 20 + ran)) + 100


def test_requests_written_ahead_stay_within_the_pipe() -> None:
    """Requests larger than the window go one at a time, and nothing blocks."""
    big = "x" * (PIPELINE_BYTES // 3)
    echo = source("""
        def quantity_to_float(value, unit, default):
            return float(len(value))
    """)
    calls = [CallRequest("quantity_to_float", (big + str(i), "GB", 0.0)) for i in range(12)]
    outcomes = pipelined(echo, calls, Limits())
    assert [o.value for o in outcomes] == [float(len(big) + len(str(i))) for i in range(12)]
