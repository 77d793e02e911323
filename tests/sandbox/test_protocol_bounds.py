"""No reply can break the protocol, and every read and write has a deadline.

A reply that cannot be parsed, for whatever reason (30,000 nested brackets exhausted the
parser's recursion and crashed the grader), fails its one call as garbage; a worker that
shrinks its request pipe and hangs cannot block the grader in a write; any deadline, however
long, is waited for without overflowing the selector.
"""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from graders.sandbox import platforms as platform_support
from graders.sandbox.calls import MAX_REPLY_DEPTH, _nesting_exceeds, parse_reply
from graders.sandbox.calls import WorkerGone as _WorkerGone
from graders.sandbox.runner import CallRequest, Limits, StudentRunner

QUICK = Limits(call_timeout_s=1.0, import_timeout_s=10.0, hang_budget_s=10.0)

#: Writes a reply line of its own into the worker's reply pipe (found in the worker's
#: frames), answering the call it is in with ``line(ident)``.
FORGER = """
    import sys

    def forge(line):
        frame = sys._getframe(1)
        while frame is not None:
            replies = frame.f_locals.get("replies")
            request = frame.f_locals.get("request")
            if replies is not None and isinstance(request, dict):
                replies.write(line(request["id"]) + "\\n")
                replies.flush()
                return
            frame = frame.f_back

    def ok():
        return 1
"""


@pytest.fixture(params=["hardened", "portable"])
def runner_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
                tmp_path: Path) -> str:
    """Each runner path: the portable one is taken where there is no /proc."""
    if request.param == "portable":
        monkeypatch.setattr(platform_support, "PROC", tmp_path / "no-proc")
    return str(request.param)


def source(text: str) -> bytes:
    return textwrap.dedent(text).encode()


def nested_reply(depth: int) -> str:
    return (f'forge(lambda ident: \'{{"id": %d, "ok": true, "value": \' % ident '
            f'+ "[" * {depth} + "]" * {depth} + "}}")')


# --- parsing ---------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [
    b"[" * 30_000 + b"]" * 30_000,
    b'{"id": 1, "value": ' + b"[" * 30_000,
    b"[" * (MAX_REPLY_DEPTH + 1) + b"]" * (MAX_REPLY_DEPTH + 1),
    b'{"id": 1, "ok": true, "value": "\xff\xfe"}',
    b'{"id": 1, "ok": true, "value": "\\ud800"' + b"}" * 3,
    b"\x00" * 1000,
    b"",
    b'{"id": 1e999999}' + b"]" * 500,
], ids=["deep", "deep-unclosed", "just-too-deep", "bad-utf8", "unbalanced", "nul", "empty",
        "closing-brackets"])
def test_an_unreadable_reply_is_garbage_never_an_error_of_the_grader(raw: bytes) -> None:
    with pytest.raises(_WorkerGone) as gone:
        parse_reply(raw)
    assert gone.value.status == "garbage"


def test_brackets_inside_strings_do_not_count_toward_the_nesting() -> None:
    text = '"' + "[{" * 5000 + '\\"]' + '"'
    assert parse_reply(f'{{"id": 1, "ok": true, "value": [{text}, "x"]}}'.encode()) == {
        "id": 1, "ok": True, "value": [text.strip('"').replace('\\"', '"'), "x"]}


def test_a_reply_as_deep_as_allowed_is_read() -> None:
    depth = MAX_REPLY_DEPTH
    assert not _nesting_exceeds(b"[" * depth + b"]" * depth, MAX_REPLY_DEPTH)
    assert _nesting_exceeds(b"[" * (depth + 1) + b"]" * (depth + 1), MAX_REPLY_DEPTH)
    assert parse_reply(b"[" * depth + b"]" * depth) is not None


@pytest.mark.parametrize("depth", [MAX_REPLY_DEPTH + 1, 900, 30_000])
def test_a_deeply_nested_reply_fails_its_call_alone(depth: int, runner_path: str) -> None:
    code = source(FORGER + f"""
    def deep():
        {nested_reply(depth)}
        return 2
    """)
    with StudentRunner(code, limits=QUICK) as runner:
        outcome = runner.call("deep")
        assert outcome.status == "garbage"
        assert "not JSON" in outcome.message or "nested deeper" in outcome.message
        assert runner.call("ok").value == 1  # a fresh worker serves the next call


def test_a_deeply_nested_reply_in_a_pipeline_fails_that_call_and_no_other(
        runner_path: str) -> None:
    code = source(FORGER + f"""
    def deep(n):
        if n == 3:
            {nested_reply(30_000)}
        return n
    """)
    with StudentRunner(code, limits=QUICK) as runner:
        outcomes = list(runner.call_many([CallRequest("deep", (n,)) for n in range(6)]))
    assert [o.status for o in outcomes] == ["ok", "ok", "ok", "garbage", "ok", "ok"]
    assert [o.value for o in outcomes if o.ok] == [0, 1, 2, 4, 5]


# --- writes ----------------------------------------------------------------------------------

#: Shrinks the request pipe (found in the worker's frames) to one page at import, then
#: hangs in the first call: the grader has written later requests ahead of its reply.
SHRINKER = """
    import fcntl, sys

    frame = sys._getframe(0)
    while frame is not None:
        if frame.f_locals.get("requests") is not None:
            fcntl.fcntl(frame.f_locals["requests"].fileno(), fcntl.F_SETPIPE_SZ, 4096)
            break
        frame = frame.f_back

    def shrink_and_hang(n, pad=""):
        if n == 0:
            while True:
                pass
        return n
"""


def test_a_worker_that_shrinks_its_request_pipe_and_hangs_never_blocks_a_write(
        runner_path: str) -> None:
    calls = [CallRequest("shrink_and_hang", (n,), {"pad": "p" * 900}) for n in range(200)]
    code = source(SHRINKER)
    started = time.monotonic()
    with StudentRunner(code, limits=QUICK) as runner:
        assert runner.portable == (runner_path == "portable")
        outcomes = list(runner.call_many(calls))
    elapsed = time.monotonic() - started
    assert outcomes[0].status == "timeout"
    # the rest is made one call at a time in fresh workers, within the time budget
    assert {o.status for o in outcomes[1:]} <= {"ok", "timeout", "abandoned"}
    assert elapsed < QUICK.worst_case_s


def test_requests_the_pipe_cannot_take_now_are_written_while_the_reply_is_awaited(
        runner_path: str) -> None:
    """Requests far larger than the pipe: written in parts, each call still answered."""
    code = source("def echo(text):\n    return len(text)\n")
    calls = [CallRequest("echo", ("z" * 20_000,)) for _ in range(5)]
    with StudentRunner(code, limits=QUICK) as runner:
        assert [o.value for o in runner.call_many(calls)] == [20_000] * 5
        assert runner.call("echo", ("y" * 300_000,)).value == 300_000


# --- deadlines -------------------------------------------------------------------------------


def test_a_deadline_longer_than_the_selector_can_wait_is_accepted(runner_path: str) -> None:
    huge = 2_147_484.0  # in ms, past the 2**31 - 1 of an epoll timeout
    limits = Limits(call_timeout_s=huge, import_timeout_s=huge, total_budget_s=1e300)
    with StudentRunner(b"def ok():\n    return 1\n", limits=limits) as runner:
        assert runner.call("ok").value == 1
        assert [o.value for o in runner.call_many([CallRequest("ok")] * 3)] == [1, 1, 1]
