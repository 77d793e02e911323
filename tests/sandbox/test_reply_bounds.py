"""Replies are bounded: texts and sequences are cut in the worker, lines are capped in the grader.

A hostile submission once returned ~1 MB plain strings in every field, which made a 100 MB
results.json and ~1 GB of grader memory.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from graders.sandbox import worker_main
from graders.sandbox.runner import CallOutcome, Limits, StudentRunner
from graders.sandbox.worker_command import REPLY_CHUNK_BYTES

MAX_TEXT = worker_main.MAX_TEXT


def source(text: str) -> bytes:
    return textwrap.dedent(text).encode()


def ok_value(outcome: CallOutcome) -> Any:
    assert outcome.status == "ok", outcome
    return outcome.value


def cut(length: int, fill: str = "x") -> str:
    """What the worker sends for a text of ``length`` copies of ``fill``."""
    return fill * MAX_TEXT + f"\u2026 [truncated, {length} chars]"


HUGE = source("""
    import os
    from typing import NamedTuple

    MEGA = 1024 * 1024

    class Text(str):
        pass

    class Result(NamedTuple):
        total_ms: object
        throughput_rps: object
        passes: object

    def plain():
        return "x" * MEGA
    def subclass():
        return Text("x" * MEGA)
    def fields():
        return Result("x" * MEGA, Text("x" * MEGA), ["x" * MEGA] * 3)
    def exact():
        return "y" * MAX_TEXT
    def error():
        raise ValueError("e" * MEGA)
    def nested():
        return [["x" * MEGA] * 5000] * 5000
    def escaped():
        # 12 bytes of JSON for each character: ~108 kB in all
        return ["\\U0001F600" * MAX_TEXT] * 18
    def pid():
        return os.getpid()
""".replace("MAX_TEXT", str(MAX_TEXT)))


@pytest.fixture(scope="module")
def runner() -> Iterator[StudentRunner]:
    with StudentRunner(HUGE) as shared:
        yield shared


def test_a_plain_string_is_cut_with_a_marker_naming_its_length(runner: StudentRunner) -> None:
    assert ok_value(runner.call("plain")) == cut(1024**2)


def test_a_string_subclass_is_cut_the_same_way(runner: StudentRunner) -> None:
    assert ok_value(runner.call("subclass")) == cut(1024**2)


def test_a_string_at_the_limit_is_sent_whole(runner: StudentRunner) -> None:
    assert ok_value(runner.call("exact")) == "y" * MAX_TEXT


def test_every_result_field_is_cut(runner: StudentRunner) -> None:
    value = ok_value(runner.call("fields", fields=["total_ms", "throughput_rps", "passes"]))
    assert value == {"total_ms": cut(1024**2), "throughput_rps": cut(1024**2),
                     "passes": [cut(1024**2)] * 3}


def test_an_exception_message_is_cut(runner: StudentRunner) -> None:
    outcome = runner.call("error")
    assert outcome.status == "raised"
    assert outcome.message == cut(len("ValueError: ") + 1024**2, "e").replace(
        "e" * 12, "ValueError: ", 1)


@pytest.mark.parametrize(
    ("function", "limits"),
    # the worker stops building a reply it knows to be too long
    [("nested", Limits()),
     # JSON escapes make a reply longer than the worker's estimate: the grader's read
     # stops at the limit
     ("escaped", Limits(max_reply_bytes=10_000))],
)
def test_a_reply_still_too_long_is_garbage_and_a_fresh_worker_serves_the_next_call(
        function: str, limits: Limits) -> None:
    with StudentRunner(HUGE, limits=limits) as runner:
        before = ok_value(runner.call("pid"))
        outcome = runner.call(function)
        assert outcome.status == "garbage"
        assert outcome.message == f"the reply exceeded {limits.max_reply_bytes} bytes"
        assert ok_value(runner.call("pid")) != before


class RecordingBuffer(bytearray):
    """A reply buffer that remembers the most it ever held."""

    most = 0

    def __iadd__(self, chunk: Any) -> RecordingBuffer:  # type: ignore[override]
        super().__iadd__(chunk)
        RecordingBuffer.most = max(RecordingBuffer.most, len(self))
        return self


def test_the_reply_buffer_never_holds_more_than_the_limit_and_one_chunk(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from graders.sandbox import runner as runner_module

    monkeypatch.setattr(runner_module._Worker, "__init__", _recording_init(
        runner_module._Worker.__init__))
    limits = Limits(max_reply_bytes=10_000)
    with StudentRunner(HUGE, limits=limits) as runner:
        assert runner.call("escaped").status == "garbage"
        ok_value(runner.call("pid"))
    assert limits.max_reply_bytes < RecordingBuffer.most
    assert RecordingBuffer.most <= limits.max_reply_bytes + REPLY_CHUNK_BYTES


def _recording_init(original: Any) -> Any:
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.buffer = RecordingBuffer()

    return init


def test_the_default_reply_limit_is_small() -> None:
    assert Limits().max_reply_bytes == 64 * 1024


def test_a_function_whose_replies_are_garbage_is_abandoned_after_the_crash_limit() -> None:
    submission = source("""
        def big():
            return ["z" * 400] * 1000
        def small():
            return 1
    """)
    with StudentRunner(submission, limits=Limits(crashes_per_function=2)) as runner:
        statuses = [runner.call("big").status for _ in range(3)]
        assert statuses == ["garbage", "garbage", "abandoned"]
        assert runner.call("big").message == (
            "big() is not called again: it made the worker send unreadable replies 2 times")
        assert ok_value(runner.call("small")) == 1
