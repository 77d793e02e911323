"""Invariants of the lab (lab spec section 4), checked on the student's code alone.

Each test draws its examples from :mod:`graders.grading.examples`: a fixed generator
seeded by the test's name, so every install meets the same examples. An invariant pays
only for real answers: its function must first pass a case that needs a real
computation (see :mod:`graders.grading.credit`), and every test holds at least one strict
condition that a constant, NaN or an echo of the inputs fails.

PYTEST_DONT_REWRITE: the suite asserts with messages of its own, and reads the same under
``graders grade`` (which runs pytest with ``--assert=plain``) and a student's ``pytest``.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from graders.grading import examples as st
from graders.grading.cases import UNIT_VARIANTS, with_units
from graders.grading.checks import Answer, Explanation, Student
from graders.grading.compare import Tolerance, compare
from graders.trackfiles.tracks import Track

grader = pytest.mark.grader
#: Relative slack for "never rises"/"never falls": float noise, not a tolerance for bugs.
SLACK = 1e-9
LATENCIES = ("p50_latency_ms", "p95_latency_ms", "p99_latency_ms", "p999_latency_ms")
#: Loads (fractions of capacity) of the strict conditions of the queueing invariants: at
#: every fleet of 1 to 64 replicas, p99 at HEAVY is above the service time and above p99
#: at LIGHT, and p999 is above p50.
LIGHT, HEAVY = 0.5, 0.9


#: A check of one example: it asks its calls (:meth:`Student.ask`), yields once, then reads
#: the answers and asserts.
Check = Callable[..., Iterator[None]]


def run_property(student: Student, examples: int, *inputs: st.Inputs) -> Callable[
        [Check], None]:
    """Check ``check`` on ``examples`` fixed examples, right away; stop at the first failure.

    Every example's calls are asked first (each check runs up to its ``yield``), so they
    reach the worker in one pipeline, in the order a one-at-a-time run would make them;
    then the examples are checked in order, each as soon as its answers arrive, while the
    worker computes the next ones. The function under test must first have earned
    its invariants (real answers to its reference cases); :class:`Student` also fails the
    test when the same input gets two different answers.
    """

    def decorate(check: Check) -> None:
        student.require_real_answers()
        names = list(inspect.signature(check).parameters)
        drawn = list(st.draw(student.test_name, examples, inputs))
        asked = []
        try:
            for example in drawn:
                steps = check(*example)
                with student.collecting() as answers:
                    _step(steps, names, example, last=False)
                asked.append((steps, example, answers))
            for steps, example, answers in asked:
                _step(steps, names, example, last=True,
                      explain=functools.partial(student.explanation, answers))
        finally:
            student.settle()  # the worker is left idle for the next test

    return decorate


def _step(steps: Iterator[None], names: list[str], example: tuple[Any, ...], *,
          last: bool, explain: Callable[[], Explanation] = Explanation) -> None:
    """Run one check's next part: its asks (to its ``yield``), or (``last``) its checks; a
    failed assertion names the falsifying example, then what ``explain`` knows of it."""
    try:
        next(steps)
    except StopIteration:
        if not last:
            raise TypeError("an invariant check must yield once, after its asks") from None
        return
    except AssertionError as error:
        shown = ", ".join(f"{name}={_shown(value)}"
                          for name, value in zip(names, example, strict=True))
        known = explain()
        lines = [f"{error} (falsifying example: {shown}){known.suffix}", *known.lines]
        raise type(error)("\n  ".join(lines)) from None
    if last:
        raise TypeError("an invariant check must yield exactly once")


def _shown(value: Any) -> str:
    track_id = getattr(value, "track_id", None)
    if isinstance(track_id, str):
        return track_id
    if isinstance(value, float):
        return f"{value:.6g}"
    return repr(value)


def at_most(low: float, high: float) -> bool:
    """``low <= high`` up to float noise; infinities compare exactly."""
    if math.isinf(low) or math.isinf(high):
        return low <= high
    return low <= high + SLACK * max(abs(low), abs(high), 1.0)


def below(low: float, high: float) -> bool:
    """``low < high`` by more than float noise."""
    return not at_most(high, low)


def queue(student: Student, arrival: float, service: float, replicas: int,
          cv: float = 1.0) -> Answer:
    return student.ask("queueing_latency", arrival_qps=arrival, service_ms=service,
                       replicas=replicas, service_cv=cv, slo_ms=100.0)


def p99_at(student: Student, load: float, service: float, replicas: int,
           cv: float = 1.0, fleet: int | None = None) -> Answer:
    """Asks for the queue at ``load`` of the capacity of ``replicas``, served by ``fleet``
    (default the same); read its p99 with ``.real(P99)``."""
    arrival = load * replicas * 1000.0 / service
    return queue(student, arrival, service, fleet or replicas, cv)


P99 = "p99_latency_ms"
services = st.floats(0.5, 200.0)
#: Service times that divide 1000 ms exactly, so a load of exactly 100 % is representable.
exact_services = st.sampled_from([1.0, 2.0, 4.0, 5.0, 8.0, 10.0, 20.0, 25.0, 40.0, 50.0,
                                  100.0, 125.0, 200.0])
fleets = st.integers(1, 64)
cvs = st.floats(0.0, 3.0)
loads = st.floats(0.0, 1.3)


# --- serve --------------------------------------------------------------------------------


@grader(points=2, function="serve")
def test_batching_gains_more_than_twofold(student: Student, invariant_examples: int) -> None:
    """Batching by 32 more than doubles throughput for lab-sized workloads"""

    @run_property(student, invariant_examples, st.integers(32, 4096))
    def check(n: int) -> Iterator[None]:
        asked_one, asked_batched = student.ask("serve", n, 1), student.ask("serve", n, 32)
        yield
        one = asked_one.real("throughput_rps")
        batched = asked_batched.real("throughput_rps")
        assert batched > 2.0 * one, \
            f"serve({n}, 32) gives {batched:.6g} req/s, not above twice B=1's {one:.6g}"


@grader(points=1, function="serve")
def test_passes_round_up(student: Student, invariant_examples: int) -> None:
    """serve makes ceil(n / B) passes"""

    @run_property(student, invariant_examples, st.integers(1, 5000), st.integers(1, 128))
    def check(n: int, batch: int) -> Iterator[None]:
        served = student.ask("serve", n, batch)
        yield
        passes = served.value["passes"]
        assert passes == -(-n // batch), f"serve({n}, {batch}).passes is {passes!r}"


@grader(points=1, function="serve")
def test_throughput_never_falls_with_batch_size(student: Student,
                                                invariant_examples: int) -> None:
    """Throughput never falls as the batch grows while overhead > 0, and rises when it
    saves passes"""

    @run_property(student, invariant_examples, st.integers(1, 2000), st.integers(1, 64),
                  st.integers(1, 64), st.floats(0.1, 100.0), st.floats(0.0, 10.0))
    def check(n: int, b1: int, b2: int, overhead: float, marginal: float) -> Iterator[None]:
        small, large = sorted((b1, b2))
        costs = {"overhead_ms": overhead, "marginal_ms": marginal}
        at_small = student.ask("serve", n, small, **costs)
        at_large = student.ask("serve", n, large, **costs)
        yield
        low, high = at_small.real("throughput_rps"), at_large.real("throughput_rps")
        assert at_most(low, high), f"throughput falls from B={small} to B={large}"
        if -(-n // small) > -(-n // large):  # fewer passes, each with its overhead
            assert below(low, high), \
                f"throughput does not rise from B={small} to B={large}, which saves passes"


# --- queueing -----------------------------------------------------------------------------


@grader(points=2, function="queueing_latency")
def test_p99_never_falls_as_load_rises(student: Student, invariant_examples: int) -> None:
    """p99 never falls as arrival_qps rises at fixed service time and fleet, rises from
    light to heavy load, and is the service time with no arrivals"""

    @run_property(student, invariant_examples, services, fleets, cvs, loads, loads)
    def check(service: float, c: int, cv: float, rho1: float, rho2: float) -> Iterator[None]:
        low, high = sorted((rho1, rho2))
        at_low, at_high = p99_at(student, low, service, c, cv), p99_at(student, high, service,
                                                                       c, cv)
        at_light = p99_at(student, LIGHT, service, c, cv)
        at_heavy = p99_at(student, HEAVY, service, c, cv)
        idle = p99_at(student, 0.0, service, c, cv)
        yield
        p_low, p_high = at_low.real(P99), at_high.real(P99)
        assert at_most(p_low, p_high), f"p99 falls from {p_low} to {p_high} as load rises"
        light, heavy = at_light.real(P99), at_heavy.real(P99)
        assert below(light, heavy), \
            f"p99 does not rise from {LIGHT:.0%} load ({light}) to {HEAVY:.0%} ({heavy})"
        _idle_p99_is_the_service_time(idle, service)


def _idle_p99_is_the_service_time(idle_queue: Answer, service: float) -> None:
    """With no arrivals nothing waits: p99 is the service time itself."""
    idle = idle_queue.real(P99)
    message = f"with no arrivals p99 is {idle}, not the service time {service}"
    assert at_most(idle, service), message
    assert at_most(service, idle), message


@grader(points=1, function="queueing_latency")
def test_percentiles_are_ordered(student: Student, invariant_examples: int) -> None:
    """p50 <= p95 <= p99 <= p999, with p999 above p50 under heavy load"""

    @run_property(student, invariant_examples, services, fleets, cvs, loads)
    def check(service: float, c: int, cv: float, rho: float) -> Iterator[None]:
        at_rho = queue(student, rho * c * 1000.0 / service, service, c, cv)
        at_heavy = queue(student, HEAVY * c * 1000.0 / service, service, c, cv)
        yield
        values = [at_rho.real(name) for name in LATENCIES]
        for (name_a, a), (name_b, b) in zip(zip(LATENCIES, values, strict=True),
                                            zip(LATENCIES[1:], values[1:], strict=True),
                                            strict=False):
            assert at_most(a, b), f"{name_a} = {a} exceeds {name_b} = {b}"
        heavy = [at_heavy.real(name) for name in LATENCIES]
        assert below(heavy[0], heavy[-1]), \
            f"at {HEAVY:.0%} load p999 ({heavy[-1]}) is not above p50 ({heavy[0]})"


@grader(points=1, function="queueing_latency")
def test_p99_is_at_least_the_service_time(student: Student, invariant_examples: int) -> None:
    """p99 >= service_ms, above it under heavy load, and equal to it with no arrivals"""

    @run_property(student, invariant_examples, services, fleets, cvs, loads)
    def check(service: float, c: int, cv: float, rho: float) -> Iterator[None]:
        at_rho = p99_at(student, rho, service, c, cv)
        at_heavy = p99_at(student, HEAVY, service, c, cv)
        idle = p99_at(student, 0.0, service, c, cv)
        yield
        p99 = at_rho.real(P99)
        assert at_most(service, p99), f"p99 {p99} is below the service time {service}"
        heavy = at_heavy.real(P99)
        assert below(service, heavy), \
            f"at {HEAVY:.0%} load p99 ({heavy}) is not above the service time {service}"
        _idle_p99_is_the_service_time(idle, service)


@grader(points=2, function="queueing_latency")
def test_more_replicas_never_raise_p99(student: Student, invariant_examples: int) -> None:
    """Adding replicas never raises p99, and lowers it under heavy load"""

    @run_property(student, invariant_examples, services, fleets, st.integers(0, 64), cvs,
                  loads)
    def check(service: float, c: int, extra: int, cv: float, rho: float) -> Iterator[None]:
        at_fewer = p99_at(student, rho, service, c, cv)
        at_more = p99_at(student, rho, service, c, cv, fleet=c + extra)
        at_heavy = p99_at(student, HEAVY, service, c, cv)
        at_helped = p99_at(student, HEAVY, service, c, cv, fleet=c + 1)
        yield
        fewer, more = at_fewer.real(P99), at_more.real(P99)
        assert at_most(more, fewer), f"p99 rises from {fewer} to {more} with {extra} replicas"
        heavy, helped = at_heavy.real(P99), at_helped.real(P99)
        assert below(helped, heavy), \
            f"one more replica does not lower p99 ({heavy}) at {HEAVY:.0%} load of {c}"


@grader(points=1, function="queueing_latency")
def test_utilization_is_load_over_capacity(student: Student, invariant_examples: int) -> None:
    """utilization = arrival_qps / (replicas * 1000 / service_ms)"""

    @run_property(student, invariant_examples, services, fleets, loads)
    def check(service: float, c: int, rho: float) -> Iterator[None]:
        arrival = rho * c * 1000.0 / service
        result = queue(student, arrival, service, c)
        yield
        utilization = result.real("utilization")
        expected = arrival / (c * 1000.0 / service)
        assert math.isclose(utilization, expected, rel_tol=1e-9, abs_tol=1e-12), \
            f"utilization {utilization} is not {expected}"


@grader(points=1, function="queueing_latency")
def test_unstable_exactly_at_full_utilization(student: Student,
                                              invariant_examples: int) -> None:
    """Unstable exactly when utilization >= 1, and then every latency is inf and slo_ok False"""

    @run_property(student, invariant_examples, exact_services, fleets, cvs,
                  st.one_of(st.sampled_from([1.0, 0.5, 1.5]), loads))
    def check(service: float, c: int, cv: float, rho: float) -> Iterator[None]:
        arrival = rho * c * 1000.0 / service
        asked = queue(student, arrival, service, c, cv)
        yield
        result = asked.value
        utilization = asked.real("utilization")
        expected = arrival / (c * 1000.0 / service)
        assert math.isclose(utilization, expected, rel_tol=1e-9, abs_tol=1e-12), \
            f"utilization {utilization} is not {expected}"
        stable = result.get("stable")
        assert stable is (utilization < 1.0), f"stable is {stable!r} at utilization {utilization}"
        if not stable:
            for name in (*LATENCIES, "mean_latency_ms"):
                value = asked.real(name)
                assert value == math.inf, f"{name} is {value} in an unstable queue"
            assert result.get("slo_ok") is False, "slo_ok must be False in an unstable queue"
        else:
            p99 = asked.real(P99)
            assert math.isfinite(p99), f"p99 is {p99} in a stable queue"


@grader(points=1, function="queueing_latency")
def test_wait_probability_is_a_probability(student: Student, invariant_examples: int) -> None:
    """0 <= wait probability <= 1, from erlang_c and from queueing_latency, and it rises
    with load"""

    def ask_wait(service: float, c: int, rho: float) -> tuple[Answer, Answer]:
        arrival = rho * c * 1000.0 / service
        return queue(student, arrival, service, c), student.ask("erlang_c", arrival, service, c)

    def wait_probabilities(asked: tuple[Answer, Answer]) -> tuple[float, float]:
        from_queue, from_erlang = asked
        return (from_queue.real("queue_wait_probability"),
                from_erlang.real("wait_probability"))

    @run_property(student, invariant_examples, services, fleets, loads)
    def check(service: float, c: int, rho: float) -> Iterator[None]:
        at_rho = ask_wait(service, c, rho)
        at_light, at_heavy = ask_wait(service, c, LIGHT), ask_wait(service, c, HEAVY)
        yield
        for value in wait_probabilities(at_rho):
            assert 0.0 <= value <= 1.0, f"wait probability {value} is outside [0, 1]"
        light = wait_probabilities(at_light)
        heavy = wait_probabilities(at_heavy)
        for source, low, high in zip(("queueing_latency", "erlang_c"), light, heavy,
                                     strict=True):
            assert below(low, high), (f"{source}: the wait probability does not rise from "
                                      f"{LIGHT:.0%} load ({low}) to {HEAVY:.0%} ({high})")


# --- batching tax -------------------------------------------------------------------------

FORMATION = "formation_delay_ms"


@grader(points=1, function="batching_tax")
def test_formation_delay_grows_with_batch_and_falls_with_rate(
        student: Student, invariant_examples: int) -> None:
    """Formation delay grows with batch size and falls with arrival rate"""

    def formation(batch: int, arrival: float) -> Answer:
        return student.ask("batching_tax", batch_size=batch, arrival_qps=arrival,
                           service_ms=10.0, slo_ms=100.0)

    @run_property(student, invariant_examples, st.integers(1, 64), st.integers(1, 64),
                  st.floats(0.1, 5000.0), st.floats(0.1, 5000.0))
    def check(b1: int, b2: int, r1: float, r2: float) -> Iterator[None]:
        small, large = sorted((b1, b2))
        slow, fast = sorted((r1, r2))
        asked_small, asked_large = formation(small, slow), formation(large, slow)
        asked_fast = formation(large, fast)
        yield
        at_small, at_large = asked_small.real(FORMATION), asked_large.real(FORMATION)
        assert at_most(at_small, at_large), f"formation delay falls from B={small} to B={large}"
        if small < large:
            assert below(at_small, at_large), \
                f"formation delay does not grow from B={small} to B={large}"
        at_fast = asked_fast.real(FORMATION)
        assert at_most(at_fast, at_large), f"formation delay rises from {slow} to {fast} qps"
        if large > 1 and below(slow, fast):
            assert below(at_fast, at_large), \
                f"formation delay of B={large} does not fall from {slow} to {fast} qps"


@grader(points=1, function="batching_tax")
def test_total_p99_covers_formation_and_service(student: Student,
                                                invariant_examples: int) -> None:
    """total_p99 >= formation delay + batched service time; no formation delay at B=1"""

    @run_property(student, invariant_examples, st.integers(1, 64), st.floats(1.0, 2000.0),
                  services, st.floats(1.0, 8.0), st.integers(1, 16))
    def check(batch: int, arrival: float, service: float, gain: float, c: int
              ) -> Iterator[None]:
        def tax(size: int) -> Answer:
            return student.ask("batching_tax", batch_size=size, arrival_qps=arrival,
                               service_ms=service, slo_ms=100.0, efficiency_gain=gain,
                               replicas=c)

        result, single = tax(batch), tax(1)
        yield
        total = result.real("total_p99_ms")
        formation = result.real(FORMATION)
        floor = formation + result.real("batched_service_ms")
        assert at_most(floor, total), f"total_p99 {total} is below formation + service {floor}"
        unbatched = single.real(FORMATION)
        assert unbatched == 0.0, f"a batch of 1 waits {unbatched} ms to form"
        if batch > 1:
            assert formation > 0.0, f"a batch of {batch} forms with no delay"


# --- cache capacity and cold start --------------------------------------------------------

#: A one-layer, one-wide transformer: its state is tiny and grows with every token, so on
#: any track with memory to spare, capacity strictly falls with context and rises with
#: devices.
TINY_TRANSFORMER = SimpleNamespace(name="tiny transformer", layers=1, hidden_dim=1)


def _ask_capacity(student: Student, track: Track, tokens: int, devices: int,
                  model: Any = None) -> Answer:
    profile = track.reference_profile()
    return student.ask("cache_capacity", profile, track.model if model is None else model,
                       context_tokens=tokens, precision_bytes=profile.precision_bytes,
                       devices_per_replica=devices)


def _capacity(asked: Answer) -> int:
    value = asked.value.get("max_concurrent")
    assert type(value) is int, f"max_concurrent must be an int, got {value!r}"
    return value


def _room(track: Track, devices: int) -> bool:
    """Whether the weights leave memory to spare on ``devices`` devices of the track."""
    profile = track.reference_profile()
    weights = profile.model_params_b * profile.precision_bytes
    return devices * profile.memory_capacity_gb - weights > 0.001


@grader(points=1, function="cache_capacity")
def test_max_concurrent_never_rises_with_context(student: Student, tracks: tuple[Track, ...],
                                                 invariant_examples: int) -> None:
    """max_concurrent never rises with context length, and falls for a growing state"""

    # From 1 token: at 0 tokens a transformer's state is 0 GB and the spec fits 0 requests.
    @run_property(student, invariant_examples, st.sampled_from(tracks),
                  st.integers(1, 262144), st.integers(1, 262144))
    def check(track: Track, t1: int, t2: int) -> Iterator[None]:
        short, long = sorted((t1, t2))
        devices = track.reference_profile().default_devices_per_replica
        at_long = _ask_capacity(student, track, long, devices)
        at_short = _ask_capacity(student, track, short, devices)
        room = _room(track, devices)
        if room:
            asked_few = _ask_capacity(student, track, 1, devices, TINY_TRANSFORMER)
            asked_many = _ask_capacity(student, track, 262144, devices, TINY_TRANSFORMER)
        yield
        assert _capacity(at_long) <= _capacity(at_short), \
            f"{track.track_id}: more requests fit at {long} tokens than at {short}"
        if room:
            few, many = _capacity(asked_few), _capacity(asked_many)
            assert many < few, (f"{track.track_id}: a one-layer transformer fits {many} "
                                f"requests at 262,144 tokens and {few} at 1 token")


@grader(points=1, function="cache_capacity")
def test_max_concurrent_never_falls_with_devices(student: Student, tracks: tuple[Track, ...],
                                                 invariant_examples: int) -> None:
    """max_concurrent never falls with more devices, and rises for a small state"""

    @run_property(student, invariant_examples, st.sampled_from(tracks), st.integers(1, 32),
                  st.integers(1, 32), st.integers(256, 131072))
    def check(track: Track, d1: int, d2: int, tokens: int) -> Iterator[None]:
        few, many = sorted((d1, d2))
        on_few = _ask_capacity(student, track, tokens, few)
        on_many = _ask_capacity(student, track, tokens, many)
        tiny = few < many and _room(track, few)
        if tiny:
            asked_low = _ask_capacity(student, track, 1, few, TINY_TRANSFORMER)
            asked_high = _ask_capacity(student, track, 1, many, TINY_TRANSFORMER)
        yield
        assert _capacity(on_few) <= _capacity(on_many), \
            f"{track.track_id}: fewer requests fit on {many} devices than on {few}"
        if tiny:
            low, high = _capacity(asked_low), _capacity(asked_high)
            assert low < high, (f"{track.track_id}: a one-layer transformer fits {high} "
                                f"requests on {many} devices and {low} on {few}")


@grader(points=1, function="cache_capacity")
def test_oom_exactly_when_nothing_fits(student: Student, tracks: tuple[Track, ...],
                                       invariant_examples: int) -> None:
    """oom holds exactly when max_concurrent < 1, and holds when the weights fill memory"""

    @run_property(student, invariant_examples, st.sampled_from(tracks),
                  st.integers(0, 1 << 20), st.integers(1, 16))
    def check(track: Track, tokens: int, devices: int) -> Iterator[None]:
        profile = track.reference_profile()
        models = [_ask_capacity(student, track, tokens, devices, model)
                  for model in (track.model, TINY_TRANSFORMER)]
        room = _room(track, devices)
        if room:
            tiny = _ask_capacity(student, track, 1, devices, TINY_TRANSFORMER)
        filled = profile.model_params_b > 0
        if filled:
            # weights of twice the memory of the devices: nothing is left for any request
            precision = 2.0 * devices * profile.memory_capacity_gb / profile.model_params_b
            asked_full = student.ask("cache_capacity", profile, track.model,
                                     context_tokens=tokens, precision_bytes=precision,
                                     devices_per_replica=devices)
        yield
        for asked in models:
            result = asked.value
            fits = result.get("max_concurrent")
            assert type(fits) is int, f"max_concurrent must be an int, got {fits!r}"
            assert result.get("oom") is (fits < 1), \
                f"oom is {result.get('oom')!r} with max_concurrent {fits!r}"
        if room:
            fits = _capacity(tiny)
            assert fits >= 1, (f"{track.track_id}: a one-layer transformer at 1 token does "
                               f"not fit once on {devices} devices")
        if filled:
            full = asked_full.value
            message = (f"{track.track_id}: weights of twice the memory of {devices} devices "
                       f"give max_concurrent {full.get('max_concurrent')!r} and oom "
                       f"{full.get('oom')!r}")
            assert full.get("max_concurrent") == 0, message
            assert full.get("oom") is True, message


def _cold(student: Student, track: Track, **overrides: float) -> Answer:
    profile = track.reference_profile()
    return student.ask("cold_start_latency", profile,
                       **{"precision_bytes": profile.precision_bytes, **overrides})


COLD = "cold_start_ms"
EXPOSED = "exposed_first_request_ms"


@grader(points=1, function="cold_start_latency")
def test_cold_start_never_rises_with_bandwidth(student: Student, tracks: tuple[Track, ...],
                                               invariant_examples: int) -> None:
    """Cold start never rises with more storage or interconnect bandwidth, and falls when
    both links speed up"""
    bandwidths = st.floats(0.01, 1000.0)
    both = ("storage_bandwidth_gbs", "interconnect_bandwidth_gbs")

    @run_property(student, invariant_examples, st.sampled_from(tracks), bandwidths, bandwidths,
                  st.sampled_from(["storage_bandwidth_gbs", "interconnect_bandwidth_gbs"]))
    def check(track: Track, w1: float, w2: float, link: str) -> Iterator[None]:
        slow, fast = sorted((w1, w2))
        on_slow = _cold(student, track, **{link: slow})
        on_fast = _cold(student, track, **{link: fast})
        twice = fast >= 2.0 * slow
        if twice:
            slow_links = _cold(student, track, **dict.fromkeys(both, slow))
            fast_links = _cold(student, track, **dict.fromkeys(both, fast))
        yield
        at_slow, at_fast = on_slow.real(COLD), on_fast.real(COLD)
        assert at_most(at_fast, at_slow), \
            f"{track.track_id}: cold start rises from {slow} to {fast} GB/s of {link}"
        if twice:
            assert below(fast_links.real(COLD), slow_links.real(COLD)), (
                f"{track.track_id}: cold start does not fall when both links go from "
                f"{slow} to {fast} GB/s")


def _exposed(student: Student, track: Track, pool: int, scale: int) -> Answer:
    return _cold(student, track, warm_pool_replicas=pool, scale_out_replicas=scale)


@grader(points=1, function="cold_start_latency")
def test_warm_pool_never_raises_exposed_latency(student: Student, tracks: tuple[Track, ...],
                                                invariant_examples: int) -> None:
    """A larger warm pool never raises the exposed latency, and a full one lowers it"""

    @run_property(student, invariant_examples, st.sampled_from(tracks), st.integers(0, 16),
                  st.integers(0, 16), st.integers(1, 16))
    def check(track: Track, w1: int, w2: int, scale: int) -> Iterator[None]:
        small, large = sorted((w1, w2))
        with_large = _exposed(student, track, large, scale)
        with_small = _exposed(student, track, small, scale)
        with_none = _exposed(student, track, 0, scale)
        with_all = _exposed(student, track, scale, scale)
        yield
        assert at_most(with_large.real(EXPOSED), with_small.real(EXPOSED)), \
            f"{track.track_id}: a warm pool of {large} exposes more than one of {small}"
        cold, warm = with_none.real(EXPOSED), with_all.real(EXPOSED)
        assert below(warm, cold), (f"{track.track_id}: a warm pool of all {scale} replicas "
                                   f"exposes {warm} ms, no less than none ({cold} ms)")


@grader(points=1, function="cold_start_latency")
def test_exposed_latency_is_at_least_the_service_time(
        student: Student, tracks: tuple[Track, ...], invariant_examples: int) -> None:
    """exposed_first_request_ms >= the track's service time, above it with no warm pool, and
    rising with the bytes of the weights"""

    @run_property(student, invariant_examples, st.sampled_from(tracks), st.integers(0, 16),
                  st.integers(1, 16))
    def check(track: Track, pool: int, scale: int) -> Iterator[None]:
        service = track.reference_profile().service_ms
        precision = track.reference_profile().precision_bytes
        with_pool = _exposed(student, track, pool, scale)
        with_none = _exposed(student, track, 0, scale)
        heavier_weights = _cold(student, track, precision_bytes=2 * precision,
                                scale_out_replicas=scale)
        yield
        exposed = with_pool.real(EXPOSED)
        assert at_most(service, exposed), \
            f"{track.track_id}: exposed latency {exposed} is below the service time {service}"
        unprotected = with_none.real(EXPOSED)
        assert below(service, unprotected), (
            f"{track.track_id}: with no warm pool the exposed latency {unprotected} is not "
            f"above the service time {service}")
        heavier = heavier_weights.real(EXPOSED)
        assert below(unprotected, heavier), (
            f"{track.track_id}: with no warm pool the exposed latency does not rise from "
            f"{unprotected} when the weights take twice the bytes ({heavier})")


# --- units --------------------------------------------------------------------------------


@grader(points=4, function="serving_track_profile")
def test_profile_is_the_same_in_other_units(student: Student, tracks: tuple[Track, ...],
                                            invariant_examples: int) -> None:
    """The same hardware in other units (GiB or MB, TB/s or GB/s) gives the same profile,
    and twice the memory gives twice memory_capacity_gb"""

    @run_property(student, min(invariant_examples, 8), st.sampled_from(tracks),
                  st.sampled_from(sorted(UNIT_VARIANTS)))
    def check(track: Track, variant_name: str) -> Iterator[None]:
        profile, variant, hardware, model = track.registry_objects()
        units = UNIT_VARIANTS[variant_name]
        asked_written = student.ask("serving_track_profile", profile, variant, hardware, model)
        asked_converted = student.ask("serving_track_profile", profile, variant,
                                      with_units(hardware, units), with_units(model, units))
        asked_doubled = student.ask("serving_track_profile", profile, variant,
                                    _with_memory_doubled(hardware), model)
        yield
        written, converted = asked_written.value, asked_converted.value
        differences = compare(written, converted, Tolerance(rel=1e-9, abs=1e-12))
        assert not differences, f"{track.track_id} in {variant_name}: " + "; ".join(
            f"{d.field} {d.expected!r} becomes {d.actual!r}" for d in differences)
        memory = asked_written.real("memory_capacity_gb")
        assert memory > 0.0, f"{track.track_id}: memory_capacity_gb is {memory}"
        doubled = asked_doubled.real("memory_capacity_gb")
        assert math.isclose(doubled, 2.0 * memory, rel_tol=1e-9), (
            f"{track.track_id}: twice the memory gives memory_capacity_gb {doubled}, not "
            f"twice {memory}")


def _with_memory_doubled(hardware: Any) -> SimpleNamespace:
    """A namespace copy of ``hardware`` with twice its memory capacity."""
    copied = with_units(hardware, {})
    copied.memory = SimpleNamespace(capacity=2 * hardware.memory.capacity,
                                    bandwidth=hardware.memory.bandwidth)
    return copied  # type: ignore[no-any-return]
