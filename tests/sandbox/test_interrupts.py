"""SIGTERM and SIGINT interrupt a grading once, and never cut a clean-up short."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from graders.sandbox.interrupts import (
    GradingInterrupted,
    deferred_signals,
    interrupted_by,
    interruptible,
)


@pytest.mark.parametrize(("number", "name", "code"), [(signal.SIGTERM, "SIGTERM", 143),
                                                       (signal.SIGINT, "SIGINT", 130)])
def test_a_signal_interrupts_once_and_names_itself(number: int, name: str, code: int) -> None:
    before = signal.getsignal(number)
    with pytest.raises(GradingInterrupted) as raised, interruptible() as interruption:
        os.kill(os.getpid(), number)
    assert isinstance(raised.value, KeyboardInterrupt)  # pytest ends its run as for Ctrl-C
    assert (raised.value.signal_name, raised.value.exit_code) == (name, code)
    assert interruption.signal_number == number
    assert (interruption.name(raised.value), interruption.exit_code(raised.value)) == (name, code)
    assert signal.getsignal(number) == before  # restored after the block


def interrupted_in_clean_up(steps: list[str]) -> None:
    try:
        os.kill(os.getpid(), signal.SIGTERM)
    finally:
        os.kill(os.getpid(), signal.SIGINT)  # would cut this clean-up short
        os.kill(os.getpid(), signal.SIGTERM)
        steps.append("clean-up finished")


def test_a_second_signal_during_the_clean_up_is_ignored() -> None:
    steps: list[str] = []
    with pytest.raises(GradingInterrupted), interruptible():
        interrupted_in_clean_up(steps)
    assert steps == ["clean-up finished"]


def deferred_clean_up(steps: list[str]) -> None:
    with deferred_signals():
        os.kill(os.getpid(), signal.SIGTERM)
        steps.append("after the signal")
        steps.append("clean-up finished")
    steps.append("not reached")  # the signal is raised as the block ends


def test_a_signal_waits_for_a_deferred_clean_up_to_finish() -> None:
    steps: list[str] = []
    with pytest.raises(GradingInterrupted, match="SIGTERM"), interruptible():
        deferred_clean_up(steps)
    assert steps == ["after the signal", "clean-up finished"]


def test_a_signal_waits_for_a_deferred_clean_up_with_threads_running() -> None:
    """With other threads (the portable runner's), a blocked signal would be delivered to
    one of them and handled at once: the deferral must not depend on it."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, daemon=True)
    thread.start()
    try:
        test_a_signal_waits_for_a_deferred_clean_up_to_finish()
    finally:
        stop.set()


def test_outside_a_grading_deferring_changes_nothing() -> None:
    steps: list[str] = []
    with deferred_signals():
        steps.append("ran")
    assert steps == ["ran"]


def test_a_plain_keyboard_interrupt_is_sigint() -> None:
    assert interrupted_by(KeyboardInterrupt()) == "SIGINT"
    assert interrupted_by(GradingInterrupted(signal.SIGTERM)) == "SIGTERM"
