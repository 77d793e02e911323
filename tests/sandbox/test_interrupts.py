"""SIGTERM and SIGINT interrupt a grading once, and never cut a clean-up short."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import weakref

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


class Collected:
    """An object whose collection runs a weakref callback."""


def collected_with_a_signal(number: int, steps: list[str], *, wait_s: float) -> None:
    """Collect an object whose weakref callback receives signal ``number`` (so its handler
    raises inside the callback, where Python only prints the exception, as it does in
    importlib's), then wait up to ``wait_s``."""
    def callback(_: object) -> None:
        os.kill(os.getpid(), number)
        steps.append("in the callback")  # the handler has run by now, and raised here

    thing = Collected()
    reference = weakref.ref(thing, callback)
    del thing
    assert reference() is None
    steps.append("after the collection")
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:  # raised again within milliseconds, in here
        time.sleep(0.001)
    steps.append("waited")


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT])
def test_an_interrupt_raised_where_python_cannot_propagate_it_is_raised_again(
        number: int, capsys: pytest.CaptureFixture[str]) -> None:
    steps: list[str] = []
    hook = sys.unraisablehook
    with pytest.raises(GradingInterrupted) as raised, interruptible():
        collected_with_a_signal(number, steps, wait_s=10.0)
    assert raised.value.signal_number == number
    assert steps == ["after the collection"]
    assert "Exception ignored" not in capsys.readouterr().err
    assert sys.unraisablehook is hook  # restored after the block


def test_an_interrupt_python_could_not_propagate_is_raised_as_its_block_ends() -> None:
    steps: list[str] = []
    with pytest.raises(GradingInterrupted, match="SIGTERM"), interruptible():
        collected_with_a_signal(signal.SIGTERM, steps, wait_s=0.0)
    assert steps == ["after the collection", "waited"]  # it ended before the signal came again


def test_an_interrupt_swallowed_while_another_thread_runs_is_still_raised_in_its_block(
        capsys: pytest.CaptureFixture[str]) -> None:
    # another thread holding the interpreter (as the grader's watches do) delays the main
    # thread: the interrupt must still be sent again until it is raised in the block
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            pass

    contender = threading.Thread(target=busy, daemon=True)
    contender.start()
    late = []
    try:
        for attempt in range(100):
            steps: list[str] = []
            with pytest.raises(GradingInterrupted), interruptible():
                collected_with_a_signal(signal.SIGTERM, steps, wait_s=10.0)
            if steps != ["after the collection"]:
                late.append(attempt)
    finally:
        stop.set()
        contender.join()
    assert late == []
    assert "Exception ignored" not in capsys.readouterr().err
