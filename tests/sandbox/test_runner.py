"""The student runner: a separate, limited worker that answers calls with plain data."""

from __future__ import annotations

import contextlib
import math
import os
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from graders.sandbox.privileges import TOKEN_VARIABLE
from graders.sandbox.runner import CallOutcome, Limits, StudentRunner
from reference.units import ureg

#: Small limits for the tests that hang on purpose.
QUICK = Limits(call_timeout_s=0.5, import_timeout_s=5.0)


def source(text: str) -> bytes:
    """A submission from an indented triple-quoted string."""
    return textwrap.dedent(text).encode()


def live_processes(*, marker: str | None = None, pgid: int | None = None) -> list[int]:
    """Pids of processes (zombies excluded) whose command line or working folder holds
    ``marker``, or whose process group is ``pgid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        with contextlib.suppress(OSError):
            cmdline += b"\0" + os.readlink(entry / "cwd").encode()
        state, _ppid, group = stat.rpartition(")")[2].split()[:3]
        if state == "Z":
            continue
        if (marker is not None and marker.encode() in cmdline) or (
                pgid is not None and int(group) == pgid):
            found.append(int(entry.name))
    return found


def wait_until_gone(*, marker: str | None = None, pgid: int | None = None) -> list[int]:
    """The processes still alive once SIGKILL has had a moment to be delivered."""
    deadline = time.monotonic() + 3.0
    while (alive := live_processes(marker=marker, pgid=pgid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


# --- results read by field ----------------------------------------------------------------

RESULTS = source("""
    import math
    import os
    from dataclasses import dataclass
    from typing import NamedTuple

    class ServeResult(NamedTuple):
        total_ms: float
        throughput_rps: float
        passes: int

    @dataclass(frozen=True)
    class Cache:
        weight_gb: float
        oom: bool
        state_kind: str

    class Sneaky(float):
        def __eq__(self, other):
            return True
        __hash__ = float.__hash__
        def __float__(self):
            return 99.0
        def __repr__(self):
            return "99.0"
        def __str__(self):
            return "99.0"

    class Count(int):
        def __int__(self):
            return 7
        def __index__(self):
            return 7
        def __repr__(self):
            return "7"

    class Thing:
        pass

    class Partial:
        weight_gb = 140.0

    class Raising:
        weight_gb = 140.0
        @property
        def oom(self):
            raise ZeroDivisionError("no memory to divide")

    def serve(n, b):
        return ServeResult(672.0, 380.95238095238096, 8)
    def cache():
        return Cache(140.0, False, "KV cache")
    def pair():
        return (math.inf, 1.0)
    def sneaky():
        return Sneaky(1.5)
    def count():
        return Count(3)
    def flag():
        return True
    def specials():
        return [math.nan, math.inf, -math.inf, -0.0]
    def thing():
        return Thing()
    def thing_field():
        return Cache(Thing(), False, "KV cache")
    def partial():
        return Partial()
    def raising():
        return Raising()
    def long_list():
        return list(range(5000))
    def pid():
        return os.getpid()
    def unit(x, unit):
        return [type(x).__name__, x.m_as(unit)]
    def model(m):
        return [type(m).__name__, m.name, m.parameters.m_as("param"), m.layers]
    def mapping(d):
        return [type(d).__name__, sorted(d.items())]
    def kinds(t, l, n):
        return [type(t).__name__, list(t), type(l).__name__, l, n]
    def echo(*args, **kwargs):
        return [list(args), sorted(kwargs.items())]
    def environment():
        return sorted(os.environ)
    def folder():
        return sorted(os.listdir("."))
    def fork():
        try:
            child = os.fork()
        except OSError as error:
            return type(error).__name__
        if child == 0:
            os._exit(0)
        os.waitpid(child, 0)
        return "forked"
    def uid():
        return os.getuid()
    def read(path):
        try:
            with open(path, "rb") as handle:
                return len(handle.read())
        except OSError as error:
            return type(error).__name__
""")


@pytest.fixture(scope="module")
def runner() -> Iterator[StudentRunner]:
    """One worker for the tests that only read values (none of them breaks it)."""
    with StudentRunner(RESULTS) as shared:
        yield shared


def ok_value(outcome: CallOutcome) -> Any:
    assert outcome.status == "ok", outcome
    assert outcome.ok
    return outcome.value


SERVE_FIELDS = ["total_ms", "throughput_rps", "passes"]


def test_a_named_tuple_result_is_read_by_field_names(runner: StudentRunner) -> None:
    value = ok_value(runner.call("serve", [256, 32], fields=SERVE_FIELDS))
    assert value == {"total_ms": 672.0, "throughput_rps": 380.95238095238096, "passes": 8}
    assert type(value["passes"]) is int


def test_named_tuple_fields_are_read_by_name_not_by_position(runner: StudentRunner) -> None:
    value = ok_value(runner.call("serve", [256, 32], fields=["passes", "total_ms"]))
    assert value == {"passes": 8, "total_ms": 672.0}


def test_a_dataclass_result_is_read_by_attribute(runner: StudentRunner) -> None:
    value = ok_value(runner.call("cache", fields=["state_kind", "oom", "weight_gb"]))
    assert value == {"state_kind": "KV cache", "oom": False, "weight_gb": 140.0}


def test_a_plain_tuple_is_read_by_position(runner: StudentRunner) -> None:
    value = ok_value(runner.call("pair", fields=["wait_rate_per_s", "wait_probability"]))
    assert value == {"wait_rate_per_s": math.inf, "wait_probability": 1.0}


def test_a_plain_tuple_of_another_length_has_missing_fields(runner: StudentRunner) -> None:
    value = ok_value(runner.call("pair", fields=["a", "b", "c"]))
    assert value == {"a": {"$missing": "a"}, "b": {"$missing": "b"}, "c": {"$missing": "c"}}


def test_without_fields_a_tuple_arrives_as_a_list(runner: StudentRunner) -> None:
    assert ok_value(runner.call("pair")) == [math.inf, 1.0]


def test_a_float_subclass_is_read_through_floats_own_value(runner: StudentRunner) -> None:
    value = ok_value(runner.call("sneaky"))
    assert type(value) is float
    assert value == 1.5


def test_an_int_subclass_is_read_through_ints_own_value(runner: StudentRunner) -> None:
    value = ok_value(runner.call("count"))
    assert type(value) is int
    assert value == 3


def test_a_bool_stays_a_bool_so_the_comparison_can_reject_it(runner: StudentRunner) -> None:
    assert ok_value(runner.call("flag")) is True


def test_nan_infinities_and_negative_zero_travel_through(runner: StudentRunner) -> None:
    nan, inf, minus_inf, minus_zero = ok_value(runner.call("specials"))
    assert math.isnan(nan)
    assert (inf, minus_inf) == (math.inf, -math.inf)
    assert minus_zero == 0.0
    assert math.copysign(1.0, minus_zero) == -1.0


def test_a_custom_object_becomes_an_unsupported_tag_naming_its_type(
        runner: StudentRunner) -> None:
    assert ok_value(runner.call("thing")) == {"$unsupported": "Thing"}
    value = ok_value(runner.call("thing_field", fields=["weight_gb", "oom"]))
    assert value == {"weight_gb": {"$unsupported": "Thing"}, "oom": False}


def test_a_field_the_result_lacks_becomes_a_missing_tag(runner: StudentRunner) -> None:
    value = ok_value(runner.call("partial", fields=["weight_gb", "oom"]))
    assert value == {"weight_gb": 140.0, "oom": {"$missing": "oom"}}


def test_a_property_that_raises_becomes_an_error_tag(runner: StudentRunner) -> None:
    value = ok_value(runner.call("raising", fields=["weight_gb", "oom"]))
    assert value == {"weight_gb": 140.0,
                     "oom": {"$error": "ZeroDivisionError: no memory to divide"}}


def test_a_long_sequence_is_cut_to_a_bounded_length(runner: StudentRunner) -> None:
    value = ok_value(runner.call("long_list"))
    assert value == list(range(1000))


def test_a_missing_function_fails_the_call_with_its_name(runner: StudentRunner) -> None:
    outcome = runner.call("not_there")
    assert outcome.status == "raised"
    assert "does not define a function not_there()" in outcome.message


# --- arguments ----------------------------------------------------------------------------


def test_a_pint_quantity_argument_arrives_as_a_pint_quantity(runner: StudentRunner) -> None:
    kind, gigabytes = ok_value(runner.call("unit", [ureg.Quantity(80, "GiB"), "GB"]))
    assert kind == "Quantity"
    assert gigabytes == pytest.approx(85.89934592, rel=1e-12)


def test_a_quantity_in_the_lab_param_unit_arrives_converted(runner: StudentRunner) -> None:
    kind, gigaparams = ok_value(runner.call("unit", [ureg.Quantity(7e10, "param"), "Gparam"]))
    assert kind == "Quantity"
    assert gigaparams == pytest.approx(70.0, rel=1e-12)


def test_a_namespace_argument_arrives_with_its_attributes(runner: StudentRunner) -> None:
    model = SimpleNamespace(name="Llama-2-70B", parameters=ureg.Quantity(7e10, "param"),
                            layers=80)
    value = ok_value(runner.call("model", [model]))
    assert value == ["SimpleNamespace", "Llama-2-70B", 7e10, 80]


def test_a_dataclass_argument_arrives_with_its_attributes(runner: StudentRunner) -> None:
    @dataclass(frozen=True)
    class Model:
        name: str
        parameters: object
        layers: int

    value = ok_value(runner.call("model", [Model("m", ureg.Quantity(3.5e9, "param"), 32)]))
    assert value == ["SimpleNamespace", "m", 3.5e9, 32]


def test_a_dict_argument_arrives_as_a_dict(runner: StudentRunner) -> None:
    value = ok_value(runner.call("mapping", [{"arrival_qps": 500.0, "slo_ms": 200}]))
    assert value == ["dict", [["arrival_qps", 500.0], ["slo_ms", 200]]]


def test_tuples_and_lists_keep_their_kind(runner: StudentRunner) -> None:
    value = ok_value(runner.call("kinds", [(1, 2.5), [3, None], "x"]))
    assert value == ["tuple", [1, 2.5], "list", [3, None], "x"]


def test_keyword_arguments_arrive_by_name(runner: StudentRunner) -> None:
    value = ok_value(runner.call("echo", [1], {"overhead_ms": 20.0, "flag": True}))
    assert value == [[1], [["flag", True], ["overhead_ms", 20.0]]]


def test_a_nan_argument_is_refused_before_it_is_sent(runner: StudentRunner) -> None:
    with pytest.raises(ValueError, match="NaN is never sent"):
        runner.call("echo", [math.nan])


# --- the worker's surroundings --------------------------------------------------------------


def test_the_worker_gets_a_minimal_environment(runner: StudentRunner) -> None:
    names = ok_value(runner.call("environment"))
    # the sweep's marker is the one variable added on purpose
    assert set(names) <= {"PATH", "LANG", "HOME", "TMPDIR", "PYTHONHASHSEED", "LC_CTYPE",
                          TOKEN_VARIABLE}


def test_the_worker_runs_in_a_folder_that_holds_only_the_submission(
        runner: StudentRunner) -> None:
    assert ok_value(runner.call("folder")) == ["serving.py"]


@pytest.mark.parametrize("package", ["reference", "graders"])
def test_the_submission_cannot_import_the_graders_own_packages(package: str) -> None:
    with StudentRunner(source(f"import {package}\ndef f():\n    return 1\n")) as runner:
        outcome = runner.call("f")
    assert outcome.status == "unimportable"
    assert f"ModuleNotFoundError: No module named '{package}'" in outcome.message


# --- exceptions, exits and crashes --------------------------------------------------------

FAILING = source("""
    import os
    import signal
    import sys

    class Escape(BaseException):
        pass

    def pid():
        return os.getpid()
    def value_error():
        raise ValueError("batch_size must be >= 1, got 0")
    def keyboard():
        raise KeyboardInterrupt
    def escape():
        raise Escape("out of here")
    def exits():
        sys.exit(3)
    def hard_exit():
        os._exit(4)
    def killed():
        os.kill(os.getpid(), signal.SIGKILL)
    def recursion():
        return recursion()
""")


@pytest.fixture(scope="module")
def failing() -> Iterator[StudentRunner]:
    """One worker for the calls that raise (a raise must leave the worker running)."""
    with StudentRunner(FAILING) as shared:
        yield shared


@pytest.mark.parametrize(
    ("function", "message"),
    [("value_error", "ValueError: batch_size must be >= 1, got 0"),
     ("keyboard", "KeyboardInterrupt"),
     ("escape", "Escape: out of here"),
     ("exits", "SystemExit: 3"),
     ("recursion", "RecursionError: maximum recursion depth exceeded")],
)
def test_an_exception_fails_only_its_call_and_the_worker_survives(
        failing: StudentRunner, function: str, message: str) -> None:
    before = ok_value(failing.call("pid"))
    outcome = failing.call(function)
    assert outcome.status == "raised"
    assert outcome.message.startswith(message)
    assert ok_value(failing.call("pid")) == before  # no restart


@pytest.mark.parametrize(
    ("function", "message"),
    [("hard_exit", "the worker exited with code 4"),
     ("killed", "the worker was killed by SIGKILL")],
)
def test_a_crash_inside_a_call_is_reported_and_a_fresh_worker_serves_the_next_call(
        function: str, message: str) -> None:
    with StudentRunner(FAILING) as runner:
        before = ok_value(runner.call("pid"))
        outcome = runner.call(function)
        assert outcome.status == "crashed"
        assert message in outcome.message
        after = ok_value(runner.call("pid"))
        assert after != before
        assert wait_until_gone(pgid=before) == []


def test_a_function_that_keeps_crashing_is_abandoned_after_the_crash_limit() -> None:
    limits = Limits(crashes_per_function=2)
    with StudentRunner(FAILING, limits=limits) as runner:
        statuses = [runner.call("hard_exit").status for _ in range(3)]
        assert statuses == ["crashed", "crashed", "abandoned"]
        assert "crashed the worker too often" in runner.call("hard_exit").message
        ok_value(runner.call("pid"))


# --- hangs -------------------------------------------------------------------------------


def hanging_source(log: Path, names: int = 1) -> bytes:
    """A submission whose functions f0..f{names-1} log each start, fork a sleeping child if
    they can, and spin forever."""
    aliases = "".join(f"f{index} = f0\n" for index in range(1, names))
    return source(f"""
        import os
        import time

        def pid():
            return [os.getpid(), os.getpgid(0)]

        def ok():
            return 1

        def f0():
            with open({str(log)!r}, "a") as handle:
                handle.write("called\\n")
            try:
                if os.fork() == 0:
                    time.sleep(600)
                    os._exit(0)
            except OSError:
                pass
            while True:
                pass
    """) + aliases.encode()


def test_an_infinite_loop_times_out_and_its_whole_process_group_is_killed(
        tmp_path: Path) -> None:
    with StudentRunner(hanging_source(tmp_path / "calls.log"), limits=QUICK) as runner:
        pid, pgid = ok_value(runner.call("pid"))
        assert pid == pgid  # the worker leads its own process group
        assert live_processes(marker=str(runner.root)) == [pid]
        outcome = runner.call("f0")
        assert outcome.status == "timeout"
        assert outcome.message == "timed out after 0.5 s"
        assert wait_until_gone(pgid=pgid) == []
        assert wait_until_gone(marker=str(runner.root)) == []
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        fresh, _ = ok_value(runner.call("pid"))
        assert fresh != pid


def test_a_function_that_timed_out_twice_is_abandoned_without_running(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    with StudentRunner(hanging_source(log), limits=QUICK) as runner:
        statuses = [runner.call("f0").status for _ in range(4)]
        assert statuses == ["timeout", "timeout", "abandoned", "abandoned"]
        refusal = runner.call("f0")
        assert refusal.message == ("f0() is not called again: it exceeded the per-call "
                                   "deadline 2 times")
        assert log.read_text().splitlines() == ["called", "called"]
        assert ok_value(runner.call("ok")) == 1  # other functions still run
        assert runner.calls == 3  # the refused calls are not counted as calls


def test_hanging_calls_share_one_budget_across_functions(tmp_path: Path) -> None:
    limits = Limits(call_timeout_s=0.3, import_timeout_s=5.0, hang_budget_s=0.8)
    with StudentRunner(hanging_source(tmp_path / "calls.log", names=9), limits=limits) as runner:
        statuses = [runner.call(f"f{index}").status for index in range(9)]
        assert statuses == ["timeout"] * 3 + ["abandoned"] * 6
        assert "budget for hanging calls" in runner.call("f8").message
        assert "budget for hanging calls" in runner.call("ok").message


def test_a_submission_that_hangs_everywhere_is_graded_within_the_worst_case_bound(
        tmp_path: Path) -> None:
    limits = Limits(call_timeout_s=0.5, import_timeout_s=1.0, hang_budget_s=1.0)
    started = time.monotonic()
    with StudentRunner(hanging_source(tmp_path / "calls.log", names=9), limits=limits) as runner:
        statuses = [runner.call(f"f{index % 9}").status for index in range(30)]
    elapsed = time.monotonic() - started
    assert set(statuses) == {"timeout", "abandoned"}
    assert elapsed < limits.hang_worst_case_s


def test_a_slow_import_does_not_escape_the_hang_budget(tmp_path: Path) -> None:
    # Every timeout kills the worker; the next call re-imports the submission. That time is
    # spent because of the hangs, so it must count against the stated bound too.
    limits = Limits(call_timeout_s=0.3, import_timeout_s=1.0, hang_budget_s=1.5)
    submission = source("""
        import time
        time.sleep(0.6)
    """) + hanging_source(tmp_path / "calls.log", names=9)
    started = time.monotonic()
    with StudentRunner(submission, limits=limits) as runner:
        statuses = [runner.call(f"f{index % 9}").status for index in range(30)]
    elapsed = time.monotonic() - started
    assert set(statuses) <= {"timeout", "abandoned", "unimportable"}
    assert elapsed < limits.hang_worst_case_s


@pytest.mark.slow
def test_with_default_limits_a_submission_that_hangs_everywhere_stays_within_the_bound(
        tmp_path: Path) -> None:
    limits = Limits()
    started = time.monotonic()
    with StudentRunner(hanging_source(tmp_path / "calls.log", names=9), limits=limits) as runner:
        statuses = [runner.call(f"f{index % 9}").status for index in range(30)]
    elapsed = time.monotonic() - started
    assert set(statuses) == {"timeout", "abandoned"}
    assert elapsed < limits.hang_worst_case_s


# --- unimportable submissions -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [("def f(:\n    return 1\n", "SyntaxError"),
     ("import numpy_is_not_here\ndef f():\n    return 1\n",
      "ModuleNotFoundError: No module named 'numpy_is_not_here' (serving.py line 1)"),
     ("x = 1\nraise RuntimeError('broken at import')\ndef f():\n    return 1\n",
      "RuntimeError: broken at import (serving.py line 2)"),
     ("import sys\nsys.exit(5)\ndef f():\n    return 1\n", "SystemExit: 5"),
     ("import os\nos._exit(6)\ndef f():\n    return 1\n", "the worker exited with code 6"),
     ("while True:\n    pass\n", "importing it took longer than the deadline")],
    ids=["syntax-error", "missing-import", "exception", "sys-exit", "os-exit", "hang"],
)
def test_a_submission_that_cannot_be_imported_is_unimportable_for_every_call(
        text: str, message: str) -> None:
    limits = Limits(import_timeout_s=1.0)
    with StudentRunner(text.encode(), limits=limits) as runner:
        outcomes = [runner.call("f"), runner.call("f"), runner.call("g")]
        assert {outcome.status for outcome in outcomes} == {"unimportable"}
        for outcome in outcomes:
            assert outcome.message.startswith("serving.py could not be imported: ")
            assert message in outcome.message
        assert runner.import_error == outcomes[0].message
        assert live_processes(marker=str(runner.root)) == []


def test_a_failing_import_is_attempted_only_once(tmp_path: Path) -> None:
    log = tmp_path / "imports.log"
    submission = source(f"""
        with open({str(log)!r}, "a") as handle:
            handle.write("imported\\n")
        raise ImportError("cannot import name 'serve'")
    """)
    with StudentRunner(submission) as runner:
        statuses = [runner.call(name).status for name in ("serve", "serve", "erlang_c")]
        assert statuses == ["unimportable"] * 3
    assert log.read_text().splitlines() == ["imported"]


# --- the protocol under abuse -------------------------------------------------------------


def test_printing_to_stdout_and_stderr_does_not_corrupt_the_protocol() -> None:
    submission = source("""
        import sys
        print("{\\"id\\": 1, \\"ok\\": true, \\"value\\": 0}")
        def chatty():
            for index in range(10_000):
                print("line", index, '{"ok": true}')
                print("error", index, file=sys.stderr)
            sys.stdout.flush()
            return 42.0
    """)
    with StudentRunner(submission) as runner:
        assert ok_value(runner.call("chatty")) == 42.0
        assert ok_value(runner.call("chatty")) == 42.0


@pytest.mark.parametrize(
    ("limits", "body"),
    [(Limits(), "return ['x' * 900] * 1000"),
     (Limits(max_reply_bytes=1000), "return ['y' * 100] * 20")],
    ids=["default-limit", "small-limit"],
)
def test_a_reply_larger_than_the_limit_is_garbage_and_the_worker_is_replaced(
        limits: Limits, body: str) -> None:
    submission = source(f"""
        import os
        def big():
            {body}
        def pid():
            return os.getpid()
    """)
    with StudentRunner(submission, limits=limits) as runner:
        before = ok_value(runner.call("pid"))
        outcome = runner.call("big")
        assert outcome.status == "garbage"
        assert f"the reply exceeded {limits.max_reply_bytes} bytes" in outcome.message
        assert ok_value(runner.call("pid")) != before


def test_a_result_that_cannot_be_encoded_fails_only_its_call() -> None:
    submission = source("""
        def huge():
            return 10 ** 5000
        def fine():
            return 1
    """)
    with StudentRunner(submission) as runner:
        outcome = runner.call("huge")
        assert outcome.status == "raised"
        assert "unencodable result" in outcome.message
        assert ok_value(runner.call("fine")) == 1


# --- life cycle and throughput ------------------------------------------------------------


def test_an_eager_start_serves_the_first_call() -> None:
    with StudentRunner(source("def f(x):\n    return x.m_as('MB')\n")) as runner:
        runner.start()
        runner.start()  # idempotent
        value = ok_value(runner.call("f", [ureg.Quantity(2, "GB")]))
    assert value == pytest.approx(2000.0)


def test_closing_the_runner_stops_the_worker_and_removes_its_folder() -> None:
    runner = StudentRunner(source("def f():\n    return 1\n"))
    with runner:
        ok_value(runner.call("f"))
        assert live_processes(marker=str(runner.root)) != []
    assert not runner.root.exists()
    assert wait_until_gone(marker=str(runner.root)) == []


def test_two_thousand_sequential_calls_complete() -> None:
    with StudentRunner(source("def add(a, b):\n    return a + b\n")) as runner:
        values = [runner.call("add", [index, 0.5]).value for index in range(2000)]
        assert runner.calls == 2000
    assert values == [index + 0.5 for index in range(2000)]


def test_a_tampered_runtime_cache_is_never_used(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from graders.sandbox import runtime

    # the shared cache must be this test's own: tampering with the machine's would slow
    # down every later grading on it
    monkeypatch.setattr(runtime.tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(runtime, "cache_folder", lambda: tmp_path, raising=False)
    run_folder = tmp_path / "run"
    run_folder.mkdir()
    built = runtime.cached_runtime(run_folder)
    assert runtime.cached_runtime(run_folder) == built
    assert built.parent == tmp_path
    (built / "pint" / "__init__.py").chmod(0o644)
    with open(built / "pint" / "__init__.py", "a", encoding="utf-8") as handle:
        handle.write("\nraise SystemExit('tampered')\n")
    replacement = runtime.cached_runtime(run_folder)
    assert replacement == run_folder / "runtime"  # private to the run, removed with it
    assert b"tampered" not in (replacement / "pint" / "__init__.py").read_bytes()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "no leftovers"


def test_a_runner_removes_its_private_runtime_when_the_cache_is_tampered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from graders.sandbox import runtime

    # the shared cache must be this test's own: tampering with the machine's would slow
    # down every later grading on it
    monkeypatch.setattr(runtime.tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(runtime, "cache_folder", lambda: tmp_path, raising=False)
    shared = runtime.cached_runtime(tmp_path)
    (shared / "pint" / "__init__.py").chmod(0o644)
    (shared / "pint" / "__init__.py").write_text("raise SystemExit('tampered')\n")
    with StudentRunner(source("def add(a, b):\n    return a + b\n")) as runner:
        assert runner.call("add", [1, 2]).value == 3
        private_root = runner.root
        assert (private_root / "runtime" / "pint").is_dir()
    assert not private_root.exists()
