"""One total time budget per grading: past it, every further call is refused without running.

The budget covers the wall time of every call, import and worker restart together, so
that ``Limits.worst_case_s`` bounds a whole grading, not one call. The tests below never
assert how long something took: they rely on sleeps in the submission being lower bounds.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from graders.regrade.command import DEFAULT_TIMEOUT_S
from graders.sandbox.budget import TimeBudget, budget_message
from graders.sandbox.runner import Limits, StudentRunner

#: Calls one grading of the whole suite makes (all tests, cases and invariant examples).
CALLS_PER_GRADING = 1653
#: Gradescope's default autograder timeout.
GRADESCOPE_DEFAULT_TIMEOUT_S = 600


def source(text: str) -> bytes:
    return textwrap.dedent(text).encode()


def sleeping(log: Path, seconds: float, *, at_import: float = 0.0) -> bytes:
    """A submission whose ``f`` logs each call and sleeps ``seconds``."""
    return source(f"""
        import time

        time.sleep({at_import})

        def f(index):
            with open({str(log)!r}, "a") as handle:
                handle.write(f"{{index}}\\n")
            time.sleep({seconds})
            return index
    """)


# --- the stated bounds ----------------------------------------------------------------


def test_the_worst_case_is_the_budget_plus_one_call_that_starts_just_before_it_ends() -> None:
    limits = Limits()
    assert limits.worst_case_s == (limits.total_budget_s + 2 * limits.import_timeout_s
                                   + limits.call_timeout_s)
    assert limits.hang_budget_s < limits.total_budget_s  # hangs are part of the budget


def test_a_submission_that_only_hangs_still_ends_within_the_hang_bound() -> None:
    limits = Limits()
    assert limits.hang_worst_case_s == (2 * limits.import_timeout_s + limits.hang_budget_s
                                        + limits.call_timeout_s)
    assert limits.hang_worst_case_s < limits.worst_case_s


def test_an_honest_but_slow_submission_fits_the_default_budget_with_room_to_spare() -> None:
    # 0.05 s per call over a whole grading, with half as much again for overheads
    assert Limits().total_budget_s >= 1.5 * CALLS_PER_GRADING * 0.05


def test_a_grading_always_ends_before_the_regrade_and_gradescope_timeouts() -> None:
    worst = Limits().worst_case_s
    assert worst + 120 <= DEFAULT_TIMEOUT_S  # the regrade's margin for the grader itself
    assert worst + 120 < GRADESCOPE_DEFAULT_TIMEOUT_S


def test_the_cpu_limit_never_ends_a_worker_that_keeps_within_the_time_budget() -> None:
    limits = Limits()
    assert limits.worker_limits()["cpu_s"] >= limits.worst_case_s
    assert Limits(cpu_s=5).worker_limits()["cpu_s"] == 5


def test_the_refusal_says_the_time_budget_is_exhausted() -> None:
    assert budget_message(120.0).startswith("time budget exhausted: ")
    assert "120 s" in budget_message(120.0)


# --- the runner enforces it -------------------------------------------------------------


def test_calls_after_a_tiny_budget_are_refused_without_running(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    limits = Limits(total_budget_s=0.01)
    with StudentRunner(sleeping(log, 0.05), limits=limits) as runner:
        outcomes = [runner.call("f", [index]) for index in range(4)]
        assert runner.calls == 1  # refused calls are not counted
        assert runner.time_spent_s >= 0.05
    assert [outcome.status for outcome in outcomes] == ["ok"] + ["abandoned"] * 3
    assert outcomes[0].value == 0  # the call that started within the budget completed
    assert {outcome.message for outcome in outcomes[1:]} == {budget_message(0.01)}
    assert log.read_text().splitlines() == ["0"]


def test_calls_before_the_budget_runs_out_succeed_and_every_later_one_is_refused(
        tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    with StudentRunner(sleeping(log, 0.3), limits=Limits(total_budget_s=1.0)) as runner:
        outcomes = [runner.call("f", [index]) for index in range(8)]
    statuses = [outcome.status for outcome in outcomes]
    done = statuses.count("ok")
    assert 1 <= done <= 4  # each call takes at least 0.3 s: a fifth cannot start
    assert statuses == ["ok"] * done + ["abandoned"] * (8 - done)
    assert [outcome.value for outcome in outcomes[:done]] == list(range(done))
    assert all(outcome.message.startswith("time budget exhausted: ")
               for outcome in outcomes[done:])
    assert log.read_text().splitlines() == [str(index) for index in range(done)]


def test_the_import_of_the_submission_is_charged_to_the_budget(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    submission = sleeping(log, 0.0, at_import=0.5)
    with StudentRunner(submission, limits=Limits(total_budget_s=0.4)) as runner:
        runner.start()
        statuses = [runner.call("f", [index]).status for index in range(3)]
    assert statuses == ["ok", "abandoned", "abandoned"]


def test_timeouts_and_restarts_are_charged_to_the_budget(tmp_path: Path) -> None:
    submission = source("""
        def spin():
            while True:
                pass
        spin2 = spin3 = spin4 = spin
    """)
    limits = Limits(call_timeout_s=0.3, hang_budget_s=100.0, total_budget_s=0.5)
    with StudentRunner(submission, limits=limits) as runner:
        outcomes = [runner.call(name) for name in ("spin", "spin2", "spin3", "spin4")]
    statuses = [outcome.status for outcome in outcomes]
    timeouts = statuses.count("timeout")
    assert 1 <= timeouts <= 2  # each costs at least 0.3 s of the 0.5 s
    assert statuses == ["timeout"] * timeouts + ["abandoned"] * (4 - timeouts)
    assert outcomes[-1].message == budget_message(0.5)


def test_an_unimportable_submission_says_so_rather_than_blaming_the_budget() -> None:
    limits = Limits(total_budget_s=0.01)
    with StudentRunner(b"raise ImportError('no')\n", limits=limits) as runner:
        outcomes = [runner.call("f") for _ in range(3)]
    assert {outcome.status for outcome in outcomes} == {"unimportable"}


def test_runners_of_one_grading_share_one_budget(tmp_path: Path) -> None:
    # the hidden tests' fresh worker must not bring a fresh budget with it
    log = tmp_path / "calls.log"
    limits = Limits(total_budget_s=0.2)
    budget = TimeBudget.of(limits)
    with StudentRunner(sleeping(log, 0.3), limits=limits, budget=budget) as visible:
        assert visible.call("f", [0]).status == "ok"
    with StudentRunner(sleeping(log, 0.3), limits=limits, budget=budget) as hidden:
        refusal = hidden.call("f", [1])
        assert hidden.time_spent_s == budget.spent_s >= 0.3
    assert refusal.status == "abandoned"
    assert refusal.message == budget_message(0.2)
    assert log.read_text().splitlines() == ["0"]


def test_runners_of_one_grading_share_one_hang_budget() -> None:
    submission = source("""
        def spin():
            while True:
                pass
    """)
    limits = Limits(call_timeout_s=0.3, hang_budget_s=0.2)
    budget = TimeBudget.of(limits)
    with StudentRunner(submission, limits=limits, budget=budget) as visible:
        assert visible.call("spin").status == "timeout"
    with StudentRunner(submission, limits=limits, budget=budget) as hidden:
        refusal = hidden.call("spin")
    assert refusal.status == "abandoned"
    assert "0.2 s budget for hanging calls" in refusal.message


def test_a_runner_without_a_budget_given_has_its_own_from_its_limits() -> None:
    runner = StudentRunner(b"", limits=Limits(total_budget_s=7.0, hang_budget_s=3.0))
    with runner:
        assert runner.budget == TimeBudget(total_s=7.0, hang_s=3.0)
