"""The invariant tests' Student: calls asked first go to the worker in one pipeline, in the
order asked; a batch stops at its first failed call; answers read are checked as before."""

from __future__ import annotations

import inspect
from collections.abc import Generator, Iterator
from typing import Any

import pytest
from helpers import REPO

from graders.expected.reference import to_plain
from graders.grading.cases import RESULT_FIELDS
from graders.grading.checks import Student, StudentCallFailed
from graders.sandbox.runner import CallOutcome, CallRequest
from graders.suite import test_invariants as suite
from graders.trackfiles.tracks import Track, load_tracks


class ScriptedRunner:
    """A runner whose ``call_many`` answers from ``answer`` and logs every batch and call
    it actually makes (a batch's rest is never made once its consumer stops)."""

    def __init__(self, answer: Any) -> None:
        self._answer = answer
        self.batches: list[int] = []
        self.made: list[tuple[str, tuple[Any, ...]]] = []

    def call_many(self, requests: list[CallRequest]) -> Generator[CallOutcome, None, None]:
        self.batches.append(len(requests))
        for request in requests:
            self.made.append((request.function, tuple(request.args)))
            yield self._answer(request)


def _ok(value: Any) -> CallOutcome:
    return CallOutcome("ok", value=value)


def test_calls_asked_first_go_in_one_batch_in_the_order_asked() -> None:
    runner = ScriptedRunner(lambda request: _ok(request.args[0] * 10))
    student = Student(runner)  # type: ignore[arg-type]
    answers = [student.ask("erlang_c", n) for n in (1, 2, 3)]
    assert runner.batches == []  # nothing is sent before an answer is read
    assert answers[1].value == 20
    assert runner.batches == [3]  # all three sent at once...
    assert runner.made == [("erlang_c", (1,)), ("erlang_c", (2,))]  # ...read as needed
    assert [answer.value for answer in answers] == [10, 20, 30]
    assert runner.made == [("erlang_c", (1,)), ("erlang_c", (2,)), ("erlang_c", (3,))]
    assert runner.batches == [3]  # read again: never asked again


def test_a_batch_stops_at_its_first_failed_call() -> None:
    def answer(request: CallRequest) -> CallOutcome:
        if request.args[0] == 2:
            return CallOutcome("raised", message="ValueError: two")
        return _ok(request.args[0])

    runner = ScriptedRunner(answer)
    student = Student(runner)  # type: ignore[arg-type]
    one, two, three = (student.ask("erlang_c", n) for n in (1, 2, 3))
    assert one.value == 1
    with pytest.raises(StudentCallFailed, match=r"raised ValueError: two, in erlang_c\(2\)"):
        _ = two.value
    assert runner.made == [("erlang_c", (1,)), ("erlang_c", (2,))]  # 3 is not read
    assert three.value == 3  # sent again when read, in a batch of its own
    assert runner.batches == [3, 1]


def test_settling_ends_the_pipeline_and_keeps_what_was_not_answered() -> None:
    runner = ScriptedRunner(lambda request: _ok(request.args[0]))
    student = Student(runner)  # type: ignore[arg-type]
    one, two = student.ask("erlang_c", 1), student.ask("erlang_c", 2)
    assert one.value == 1
    student.settle()  # the test is done: the worker must be left idle
    assert runner.made == [("erlang_c", (1,))]
    assert two.value == 2  # still answered if read later, in a pipeline of its own
    assert runner.batches == [2, 1]


def test_two_answers_to_the_same_input_fail_the_check() -> None:
    answers = iter([1.0, 2.0])
    runner = ScriptedRunner(lambda request: _ok(next(answers)))
    student = Student(runner)  # type: ignore[arg-type]
    first, second = student.ask("erlang_c", 5), student.ask("erlang_c", 5)
    assert first.value == 1.0
    with pytest.raises(StudentCallFailed, match="different answers to the same input"):
        _ = second.value


def test_every_input_asked_is_recorded_in_order() -> None:
    recorded: list[str] = []
    runner = ScriptedRunner(lambda request: _ok(0))
    student = Student(runner, test_name="t", record=recorded.append)  # type: ignore[arg-type]
    student.ask("serve", 10, 1)
    student.ask("serve", 10, 32)
    assert [line.splitlines()[1] for line in recorded] == [
        '["serve", {"$tuple": [10, 1]}, {"$map": {}}]',
        '["serve", {"$tuple": [10, 32]}, {"$map": {}}]']


def _reference(request: CallRequest) -> CallOutcome:
    import reference

    function = getattr(reference, request.function)
    return _ok(to_plain(function(*request.args, **dict(request.kwargs or {})),
                        RESULT_FIELDS[request.function]))


INVARIANTS = sorted(name for name, function in vars(suite).items()
                    if name.startswith("test_") and inspect.isfunction(function))


@pytest.fixture(scope="module")
def tracks() -> tuple[Track, ...]:
    return load_tracks(REPO / "tracks")


@pytest.mark.parametrize("name", INVARIANTS)
def test_each_invariant_test_asks_all_its_examples_in_one_batch(
        name: str, tracks: tuple[Track, ...]) -> None:
    """Against a correct student, every invariant test costs one pipeline of all its
    examples' calls: no check reads an answer before every call is asked."""
    runner = ScriptedRunner(_reference)
    test = getattr(suite, name)
    arguments: dict[str, Any] = {"student": Student(runner, test_name=name),  # type: ignore[arg-type]
                                 "invariant_examples": 25}
    if "tracks" in inspect.signature(test).parameters:
        arguments["tracks"] = tracks
    test(**arguments)
    assert len(runner.batches) == 1
    assert runner.batches[0] == len(runner.made) >= 8  # at least a call per example (8 at least)


def test_a_check_must_yield_once() -> None:
    student = Student(ScriptedRunner(lambda request: _ok(0)))  # type: ignore[arg-type]

    def never_yields(n: int) -> Iterator[None]:
        if n < 0:
            yield

    def yields_twice(n: int) -> Iterator[None]:
        yield
        yield

    with pytest.raises(TypeError, match="must yield once"):
        suite.run_property(student, 2, suite.st.integers(1, 3))(never_yields)
    with pytest.raises(TypeError, match="exactly once"):
        suite.run_property(student, 2, suite.st.integers(1, 3))(yields_twice)


def test_a_failed_assertion_names_its_example_and_stops_the_test() -> None:
    student = Student(ScriptedRunner(lambda request: _ok(request.args[0])))  # type: ignore[arg-type]
    checked: list[int] = []

    def check(n: int) -> Iterator[None]:
        asked = student.ask("erlang_c", n)
        yield
        checked.append(n)
        if asked.value >= 0:
            raise AssertionError("not negative")

    with pytest.raises(AssertionError, match=r"not negative \(falsifying example: n=1\)"):
        suite.run_property(student, 5, suite.st.integers(1, 9))(check)
    assert checked == [1]
