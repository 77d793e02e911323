"""What a submission prints goes into a bounded sink: it never fails a call or costs a point.

The worker's fds 1 and 2 are one pipe that the runner drains while it waits for replies
(and when asked for the summary), keeping the first ``Limits.output_keep_bytes`` and
counting the rest.
"""

from __future__ import annotations

import textwrap
import time

import pytest

from graders.sandbox.output import OutputSink, binary_size, decimal_size, output_sentence
from graders.sandbox.runner import CallOutcome, Limits, StudentRunner

KEEP = Limits().output_keep_bytes


def source(text: str) -> bytes:
    return textwrap.dedent(text).encode()


def ok_value(outcome: CallOutcome) -> object:
    assert outcome.status == "ok", outcome
    return outcome.value


# --- the sink and its sentence ------------------------------------------------------------


def test_the_sink_keeps_the_first_bytes_and_counts_all_of_them() -> None:
    sink = OutputSink(keep_bytes=10)
    sink.feed(b"0123")
    sink.feed(b"456789abcdef")
    sink.count(1000)
    summary = sink.summary()
    assert summary.text == "0123456789"
    assert (summary.kept_bytes, summary.total_bytes) == (10, 1016)
    assert summary.truncated


def test_the_kept_text_is_decoded_with_undecodable_bytes_replaced() -> None:
    sink = OutputSink(keep_bytes=100)
    sink.feed(b"ok \xff\xfe done")
    assert sink.summary().text == "ok \ufffd\ufffd done"


@pytest.mark.parametrize(
    ("size", "decimal", "binary"),
    [(0, "0 B", "0 B"), (1, "1 byte", "1 byte"), (999, "999 B", "999 B"),
     (1000, "1 kB", "1000 B"), (1536, "1.54 kB", "1.5 KiB"), (65_536, "65.5 kB", "64 KiB"),
     (999_999, "1 MB", "977 KiB"), (2_300_000_000, "2.3 GB", "2.14 GiB")],
)
def test_sizes_read_in_human_units(size: int, decimal: str, binary: str) -> None:
    assert decimal_size(size) == decimal
    assert binary_size(size) == binary


def test_the_output_sentence_says_how_much_was_printed_and_how_much_is_kept() -> None:
    assert output_sentence(2_300_000_000, 64 * 1024) == \
        "your code printed 2.3 GB; the first 64 KiB are kept"
    assert output_sentence(120, 64 * 1024) == "your code printed 120 B"


# --- the worker's output pipe -------------------------------------------------------------

CHATTY = source("""
    import os
    import stat
    import sys

    def streams():
        return [stat.S_ISFIFO(os.fstat(fd).st_mode) for fd in (1, 2)]
    def chat():
        print("one")
        sys.stdout.flush()
        print("two", file=sys.stderr)
        sys.stderr.flush()
        os.write(1, b"three\\n")
        os.write(2, b"four\\n")
        return 1
    def unflushed():
        print("still in the buffer when the reply is written")
        return 2
    def undecodable():
        os.write(1, b"\\xff\\xfe")
        return 3
    def pid():
        return os.getpid()
""")


def test_stdout_and_stderr_of_the_submission_are_a_pipe_not_a_file() -> None:
    with StudentRunner(CHATTY) as runner:
        assert ok_value(runner.call("streams")) == [True, True]


def test_print_stderr_and_raw_writes_to_fds_1_and_2_are_kept_in_order() -> None:
    with StudentRunner(CHATTY) as runner:
        assert ok_value(runner.call("chat")) == 1
        summary = runner.output_summary()
    assert summary.text == "one\ntwo\nthree\nfour\n"
    assert summary.total_bytes == len(summary.text)
    assert not summary.truncated


def test_output_still_in_the_submissions_buffer_is_flushed_before_the_reply() -> None:
    with StudentRunner(CHATTY) as runner:
        assert ok_value(runner.call("unflushed")) == 2
        assert runner.output_summary().text == "still in the buffer when the reply is written\n"


def test_the_output_pipe_leaves_no_file_behind_in_the_runners_folder() -> None:
    with StudentRunner(CHATTY) as runner:
        runner.start()
        ok_value(runner.call("pid"))
        left = [path.name for path in runner.root.rglob("*") if path.is_fifo()]
        assert left == []


FLOOD = source("""
    import os
    import sys

    HEAD = b"BEGIN" + b"-" * 100
    TEXT = "p" * (1024 * 1024)
    RAW = b"r" * (1024 * 1024)

    os.write(1, HEAD)
    for _ in range(8):  # 8 MB at import, before the grader reads anything
        os.write(2, RAW)

    def flood(megabytes):
        for _ in range(megabytes):
            sys.stdout.write(TEXT)
            sys.stderr.write(TEXT)
            os.write(1, RAW)
            os.write(2, RAW)
        return os.getpid()
""")
#: Bytes FLOOD writes at import, and per megabyte asked of flood().
FLOOD_IMPORT_BYTES = 105 + 8 * 1024**2
FLOOD_BYTES_PER_MB = 4 * 1024**2


def test_a_flood_of_output_fails_no_call_and_the_worker_keeps_serving() -> None:
    # The file-size limit is tiny: output that went into a file would fail at once.
    limits = Limits(file_size_bytes=4096)
    with StudentRunner(FLOOD, limits=limits) as runner:
        pids = {ok_value(runner.call("flood", [5])) for _ in range(4)}
        assert len(pids) == 1  # one worker served every call: nothing crashed it
        summary = runner.output_summary()
    assert summary.total_bytes == FLOOD_IMPORT_BYTES + 4 * 5 * FLOOD_BYTES_PER_MB
    assert summary.kept_bytes == KEEP
    assert summary.text.startswith("BEGIN" + "-" * 100 + "r")
    assert len(summary.text) == KEEP
    assert summary.sentence() == "your code printed 92.3 MB; the first 64 KiB are kept"


def test_the_amount_of_output_kept_is_a_limit() -> None:
    with StudentRunner(FLOOD, limits=Limits(output_keep_bytes=5)) as runner:
        ok_value(runner.call("flood", [1]))
        summary = runner.output_summary()
    assert summary.text == "BEGIN"
    assert summary.total_bytes == FLOOD_IMPORT_BYTES + FLOOD_BYTES_PER_MB
    assert summary.sentence().endswith("; the first 5 B are kept")


def test_output_is_counted_across_worker_restarts() -> None:
    submission = FLOOD + source("""
        def hang():
            os.write(1, b"x" * 1000)
            while True:
                pass
    """)
    with StudentRunner(submission, limits=Limits(call_timeout_s=0.5)) as runner:
        first = ok_value(runner.call("flood", [1]))
        assert runner.call("hang").status == "timeout"
        assert ok_value(runner.call("flood", [1])) != first
        summary = runner.output_summary()
    assert summary.total_bytes == 2 * (FLOOD_IMPORT_BYTES + FLOOD_BYTES_PER_MB) + 1000


def test_undecodable_output_is_kept_with_replacement_characters() -> None:
    with StudentRunner(CHATTY) as runner:
        ok_value(runner.call("undecodable"))
        assert runner.output_summary().text == "\ufffd\ufffd"


def test_output_written_between_calls_cannot_deadlock_the_grader() -> None:
    # A timer writes 64 kB every 5 ms, also while the worker waits for the next request:
    # its pipe fills up between calls and the worker blocks in the handler. The grader
    # must drain the pipe while it waits for a reply, or the call would time out.
    submission = source("""
        import os
        import signal

        def chatter(signum, frame):
            os.write(1, b"t" * 65536)

        signal.signal(signal.SIGALRM, chatter)
        signal.setitimer(signal.ITIMER_REAL, 0.005, 0.005)

        def add(a, b):
            return a + b
    """)
    with StudentRunner(submission, limits=Limits(call_timeout_s=2.0)) as runner:
        outcomes = []
        for index in range(6):
            outcomes.append(runner.call("add", [index, 1]))
            time.sleep(0.2)  # long enough for the timer to fill the pipe
        summary = runner.output_summary()
    assert [outcome.status for outcome in outcomes] == ["ok"] * 6
    assert [outcome.value for outcome in outcomes] == [1, 2, 3, 4, 5, 6]
    assert summary.total_bytes > Limits().output_keep_bytes


def test_a_worker_that_closes_fds_1_and_2_keeps_answering() -> None:
    submission = source("""
        import os

        def close_output():
            os.write(1, b"last words\\n")
            os.close(1)
            os.close(2)
            return 1
        def add(a, b):
            print("printed to a closed fd")
            return a + b
    """)
    with StudentRunner(submission) as runner:
        assert ok_value(runner.call("close_output")) == 1
        values = [ok_value(runner.call("add", [index, 1])) for index in range(20)]
        assert values == list(range(1, 21))
        assert runner.output_summary().text == "last words\n"


def test_a_submission_printed_from_gives_the_same_values_as_a_quiet_one() -> None:
    quiet = source("""
        def serve(n, b):
            return [n * b, n / b]
    """)
    noisy = quiet + source("""
        import os
        import sys
        honest = serve
        def serve(n, b):
            print("x" * 300_000)
            print("y" * 300_000, file=sys.stderr)
            os.write(1, b"z" * 300_000)
            return honest(n, b)
    """)
    arguments = [[n, b] for n in (1, 7, 256) for b in (1, 3, 32)]
    with StudentRunner(quiet) as runner:
        expected = [runner.call("serve", args) for args in arguments]
    with StudentRunner(noisy) as runner:
        got = [runner.call("serve", args) for args in arguments]
        assert runner.output_summary().total_bytes == len(arguments) * 900_002
    assert got == expected


# --- results in every shape the student README allows (issue 21) ---------------------------

SHAPES = source("""
    import dataclasses, decimal, fractions
    from collections import namedtuple
    from types import SimpleNamespace

    Pair = namedtuple("Pair", "wait_rate_per_s wait_probability")

    @dataclasses.dataclass(frozen=True)
    class Result:
        wait_rate_per_s: float
        wait_probability: float

    def shaped(kind):
        rate, probability = 2.5, 0.25
        return {
            "namedtuple": Pair(rate, probability),
            "dataclass": Result(rate, probability),
            "namespace": SimpleNamespace(wait_rate_per_s=rate, wait_probability=probability),
            "tuple": (rate, probability),
            "list": [rate, probability],
            "asdict": dataclasses.asdict(Result(rate, probability)),
            "decimal": (decimal.Decimal("2.5"), decimal.Decimal("0.25")),
            "fraction": [fractions.Fraction(5, 2), fractions.Fraction(1, 4)],
            "float": probability,
            "three items": [rate, probability, 1.0],
        }[kind]
""")
FIELDS = ("wait_rate_per_s", "wait_probability")


@pytest.mark.parametrize("kind", ["namedtuple", "dataclass", "namespace", "tuple", "list",
                                  "asdict", "decimal", "fraction"])
def test_a_result_in_any_readable_shape_gives_its_fields(kind: str) -> None:
    with StudentRunner(SHAPES) as runner:
        value = ok_value(runner.call("shaped", (kind,), {}, FIELDS))
    assert value == {"wait_rate_per_s": 2.5, "wait_probability": 0.25}


@pytest.mark.parametrize("kind", ["float", "three items"])
def test_a_result_of_another_shape_has_every_field_missing(kind: str) -> None:
    with StudentRunner(SHAPES) as runner:
        value = ok_value(runner.call("shaped", (kind,), {}, FIELDS))
    assert value == {name: {"$missing": name} for name in FIELDS}
