"""Invariants of the lab (lab spec section 4), checked on the student's code alone.

Hypothesis drives them deterministically: ``derandomize=True``, no database, no
deadline, and ``--grader-examples`` examples per test.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Flaky

from graders.cases import UNIT_VARIANTS, with_units
from graders.compare import Tolerance, compare
from graders.grading import Student
from graders.tracks import Track

grader = pytest.mark.grader
#: Relative slack for "never rises"/"never falls": float noise, not a tolerance for bugs.
SLACK = 1e-9
LATENCIES = ("p50_latency_ms", "p95_latency_ms", "p99_latency_ms", "p999_latency_ms")


def run_property(examples: int, *strategies: st.SearchStrategy[Any]) -> Callable[
        [Callable[..., None]], None]:
    """Run ``check`` as a deterministic Hypothesis property, right away.

    Shrinking is off: the first failing example is reported as found, so a submission
    that fails everywhere costs one call per invariant, not a search for a minimal input.
    """

    def decorate(check: Callable[..., None]) -> None:
        @functools.wraps(check)
        def with_example(*args: Any, **kwargs: Any) -> None:
            try:
                check(*args, **kwargs)
            except AssertionError as error:
                bound = inspect.signature(check).bind(*args, **kwargs)
                example = ", ".join(f"{n}={a!r}" for n, a in bound.arguments.items())
                raise type(error)(f"{error} (falsifying example: {example})") from None

        configured = settings(max_examples=examples, derandomize=True, database=None,
                              deadline=None, suppress_health_check=list(HealthCheck),
                              phases=(Phase.explicit, Phase.generate),
                              report_multiple_bugs=False)
        try:
            configured(given(*strategies)(with_example))()
        except Flaky:
            raise AssertionError("the submission gave different answers for the same input "
                                 "(its results must depend on its inputs only)") from None

    return decorate


def at_most(low: float, high: float) -> bool:
    """``low <= high`` up to float noise; infinities compare exactly."""
    if math.isinf(low) or math.isinf(high):
        return low <= high
    return low <= high + SLACK * max(abs(low), abs(high), 1.0)


def queue(student: Student, arrival: float, service: float, replicas: int,
          cv: float = 1.0) -> dict[str, Any]:
    result: dict[str, Any] = student.call("queueing_latency", arrival_qps=arrival,
                                          service_ms=service, replicas=replicas,
                                          service_cv=cv, slo_ms=100.0)
    return result


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

    @run_property(invariant_examples, st.integers(32, 4096))
    def check(n: int) -> None:
        one = student.real("serve", "throughput_rps", student.call("serve", n, 1))
        batched = student.real("serve", "throughput_rps", student.call("serve", n, 32))
        assert batched > 2.0 * one, f"serve({n}, 32) gains only {batched / one:.3g}x over B=1"


@grader(points=1, function="serve")
def test_passes_round_up(student: Student, invariant_examples: int) -> None:
    """serve makes ceil(n / B) passes"""

    @run_property(invariant_examples, st.integers(1, 5000), st.integers(1, 128))
    def check(n: int, batch: int) -> None:
        passes = student.call("serve", n, batch)["passes"]
        assert passes == -(-n // batch), f"serve({n}, {batch}).passes is {passes!r}"


@grader(points=1, function="serve")
def test_throughput_never_falls_with_batch_size(student: Student,
                                                invariant_examples: int) -> None:
    """Throughput never falls as the batch grows while overhead > 0"""

    @run_property(invariant_examples, st.integers(1, 2000), st.integers(1, 64),
                  st.integers(1, 64), st.floats(0.1, 100.0), st.floats(0.0, 10.0))
    def check(n: int, b1: int, b2: int, overhead: float, marginal: float) -> None:
        small, large = sorted((b1, b2))
        costs = {"overhead_ms": overhead, "marginal_ms": marginal}
        low = student.real("serve", "throughput_rps", student.call("serve", n, small, **costs))
        high = student.real("serve", "throughput_rps", student.call("serve", n, large, **costs))
        assert at_most(low, high), f"throughput falls from B={small} to B={large}"


# --- queueing -----------------------------------------------------------------------------


@grader(points=2, function="queueing_latency")
def test_p99_never_falls_as_load_rises(student: Student, invariant_examples: int) -> None:
    """p99 never falls as arrival_qps rises at fixed service time and fleet"""

    @run_property(invariant_examples, services, fleets, cvs, loads, loads)
    def check(service: float, c: int, cv: float, rho1: float, rho2: float) -> None:
        low, high = sorted((rho1, rho2))
        capacity = c * 1000.0 / service
        p_low = student.real("queueing_latency", "p99_latency_ms",
                             queue(student, low * capacity, service, c, cv))
        p_high = student.real("queueing_latency", "p99_latency_ms",
                              queue(student, high * capacity, service, c, cv))
        assert at_most(p_low, p_high), f"p99 falls from {p_low} to {p_high} as load rises"


@grader(points=1, function="queueing_latency")
def test_percentiles_are_ordered(student: Student, invariant_examples: int) -> None:
    """p50 <= p95 <= p99 <= p999"""

    @run_property(invariant_examples, services, fleets, cvs, loads)
    def check(service: float, c: int, cv: float, rho: float) -> None:
        result = queue(student, rho * c * 1000.0 / service, service, c, cv)
        values = [student.real("queueing_latency", name, result) for name in LATENCIES]
        for (name_a, a), (name_b, b) in zip(zip(LATENCIES, values, strict=True),
                                            zip(LATENCIES[1:], values[1:], strict=True),
                                            strict=False):
            assert at_most(a, b), f"{name_a} = {a} exceeds {name_b} = {b}"


@grader(points=1, function="queueing_latency")
def test_p99_is_at_least_the_service_time(student: Student, invariant_examples: int) -> None:
    """p99 >= service_ms"""

    @run_property(invariant_examples, services, fleets, cvs, loads)
    def check(service: float, c: int, cv: float, rho: float) -> None:
        result = queue(student, rho * c * 1000.0 / service, service, c, cv)
        p99 = student.real("queueing_latency", "p99_latency_ms", result)
        assert at_most(service, p99), f"p99 {p99} is below the service time {service}"


@grader(points=2, function="queueing_latency")
def test_more_replicas_never_raise_p99(student: Student, invariant_examples: int) -> None:
    """Adding replicas never raises p99"""

    @run_property(invariant_examples, services, fleets, st.integers(0, 64), cvs, loads)
    def check(service: float, c: int, extra: int, cv: float, rho: float) -> None:
        arrival = rho * c * 1000.0 / service
        fewer = student.real("queueing_latency", "p99_latency_ms",
                             queue(student, arrival, service, c, cv))
        more = student.real("queueing_latency", "p99_latency_ms",
                            queue(student, arrival, service, c + extra, cv))
        assert at_most(more, fewer), f"p99 rises from {fewer} to {more} with {extra} replicas"


@grader(points=1, function="queueing_latency")
def test_utilization_is_load_over_capacity(student: Student, invariant_examples: int) -> None:
    """utilization = arrival_qps / (replicas * 1000 / service_ms)"""

    @run_property(invariant_examples, services, fleets, loads)
    def check(service: float, c: int, rho: float) -> None:
        arrival = rho * c * 1000.0 / service
        utilization = student.real("queueing_latency", "utilization",
                                   queue(student, arrival, service, c))
        expected = arrival / (c * 1000.0 / service)
        assert math.isclose(utilization, expected, rel_tol=1e-9, abs_tol=1e-12), \
            f"utilization {utilization} is not {expected}"


@grader(points=1, function="queueing_latency")
def test_unstable_exactly_at_full_utilization(student: Student,
                                              invariant_examples: int) -> None:
    """Unstable exactly when utilization >= 1, and then every latency is inf and slo_ok False"""

    @run_property(invariant_examples, exact_services, fleets, cvs,
                  st.sampled_from([1.0, 0.5, 1.5]) | loads)
    def check(service: float, c: int, cv: float, rho: float) -> None:
        result = queue(student, rho * c * 1000.0 / service, service, c, cv)
        utilization = student.real("queueing_latency", "utilization", result)
        stable = result.get("stable")
        assert stable is (utilization < 1.0), f"stable is {stable!r} at utilization {utilization}"
        if not stable:
            for name in (*LATENCIES, "mean_latency_ms"):
                value = student.real("queueing_latency", name, result)
                assert value == math.inf, f"{name} is {value} in an unstable queue"
            assert result.get("slo_ok") is False, "slo_ok must be False in an unstable queue"


@grader(points=1, function="queueing_latency")
def test_wait_probability_is_a_probability(student: Student, invariant_examples: int) -> None:
    """0 <= wait probability <= 1, from erlang_c and from queueing_latency"""

    @run_property(invariant_examples, services, fleets, loads)
    def check(service: float, c: int, rho: float) -> None:
        arrival = rho * c * 1000.0 / service
        from_queue = student.real("queueing_latency", "queue_wait_probability",
                                  queue(student, arrival, service, c))
        from_erlang = student.real("erlang_c", "wait_probability",
                                   student.call("erlang_c", arrival, service, c))
        for value in (from_queue, from_erlang):
            assert 0.0 <= value <= 1.0, f"wait probability {value} is outside [0, 1]"


# --- batching tax -------------------------------------------------------------------------


@grader(points=1, function="batching_tax")
def test_formation_delay_grows_with_batch_and_falls_with_rate(
        student: Student, invariant_examples: int) -> None:
    """Formation delay grows with batch size and falls with arrival rate"""

    def formation(batch: int, arrival: float) -> float:
        result = student.call("batching_tax", batch_size=batch, arrival_qps=arrival,
                              service_ms=10.0, slo_ms=100.0)
        return student.real("batching_tax", "formation_delay_ms", result)

    @run_property(invariant_examples, st.integers(1, 64), st.integers(1, 64),
                  st.floats(0.1, 5000.0), st.floats(0.1, 5000.0))
    def check(b1: int, b2: int, r1: float, r2: float) -> None:
        small, large = sorted((b1, b2))
        slow, fast = sorted((r1, r2))
        assert at_most(formation(small, slow), formation(large, slow)), \
            f"formation delay falls from B={small} to B={large}"
        assert at_most(formation(large, fast), formation(large, slow)), \
            f"formation delay rises from {slow} to {fast} qps"


@grader(points=1, function="batching_tax")
def test_total_p99_covers_formation_and_service(student: Student,
                                                invariant_examples: int) -> None:
    """total_p99 >= formation delay + batched service time"""

    @run_property(invariant_examples, st.integers(1, 64), st.floats(1.0, 2000.0), services,
                  st.floats(1.0, 8.0), st.integers(1, 16))
    def check(batch: int, arrival: float, service: float, gain: float, c: int) -> None:
        result = student.call("batching_tax", batch_size=batch, arrival_qps=arrival,
                              service_ms=service, slo_ms=100.0, efficiency_gain=gain,
                              replicas=c)
        total = student.real("batching_tax", "total_p99_ms", result)
        floor = (student.real("batching_tax", "formation_delay_ms", result)
                 + student.real("batching_tax", "batched_service_ms", result))
        assert at_most(floor, total), f"total_p99 {total} is below formation + service {floor}"


# --- cache capacity and cold start --------------------------------------------------------


def _capacity(student: Student, track: Track, tokens: int, devices: int) -> int:
    profile = track.reference_profile()
    result = student.call("cache_capacity", profile, track.model, context_tokens=tokens,
                          precision_bytes=profile.precision_bytes, devices_per_replica=devices)
    value = result.get("max_concurrent")
    assert type(value) is int, f"max_concurrent must be an int, got {value!r}"
    return value


@grader(points=1, function="cache_capacity")
def test_max_concurrent_never_rises_with_context(student: Student, tracks: tuple[Track, ...],
                                                 invariant_examples: int) -> None:
    """max_concurrent never rises with context length"""

    # From 1 token: at 0 tokens a transformer's state is 0 GB and the spec fits 0 requests.
    @run_property(invariant_examples, st.sampled_from(tracks), st.integers(1, 262144),
                  st.integers(1, 262144))
    def check(track: Track, t1: int, t2: int) -> None:
        short, long = sorted((t1, t2))
        devices = track.reference_profile().default_devices_per_replica
        assert _capacity(student, track, long, devices) <= _capacity(student, track, short,
                                                                     devices), \
            f"{track.track_id}: more requests fit at {long} tokens than at {short}"


@grader(points=1, function="cache_capacity")
def test_max_concurrent_never_falls_with_devices(student: Student, tracks: tuple[Track, ...],
                                                 invariant_examples: int) -> None:
    """max_concurrent never falls with more devices"""

    @run_property(invariant_examples, st.sampled_from(tracks), st.integers(1, 32),
                  st.integers(1, 32), st.integers(256, 131072))
    def check(track: Track, d1: int, d2: int, tokens: int) -> None:
        few, many = sorted((d1, d2))
        assert _capacity(student, track, tokens, few) <= _capacity(student, track, tokens,
                                                                   many), \
            f"{track.track_id}: fewer requests fit on {many} devices than on {few}"


@grader(points=1, function="cache_capacity")
def test_oom_exactly_when_nothing_fits(student: Student, tracks: tuple[Track, ...],
                                       invariant_examples: int) -> None:
    """oom holds exactly when max_concurrent < 1"""

    @run_property(invariant_examples, st.sampled_from(tracks), st.integers(0, 1 << 20),
                  st.integers(1, 16))
    def check(track: Track, tokens: int, devices: int) -> None:
        profile = track.reference_profile()
        result = student.call("cache_capacity", profile, track.model, context_tokens=tokens,
                              precision_bytes=profile.precision_bytes,
                              devices_per_replica=devices)
        fits = result.get("max_concurrent")
        assert result.get("oom") is (isinstance(fits, int) and fits < 1), \
            f"oom is {result.get('oom')!r} with max_concurrent {fits!r}"


def _cold(student: Student, track: Track, **overrides: float) -> dict[str, Any]:
    profile = track.reference_profile()
    result: dict[str, Any] = student.call("cold_start_latency", profile,
                                          precision_bytes=profile.precision_bytes, **overrides)
    return result


@grader(points=1, function="cold_start_latency")
def test_cold_start_never_rises_with_bandwidth(student: Student, tracks: tuple[Track, ...],
                                               invariant_examples: int) -> None:
    """Cold start never rises with more storage or interconnect bandwidth"""
    bandwidths = st.floats(0.01, 1000.0)

    @run_property(invariant_examples, st.sampled_from(tracks), bandwidths, bandwidths,
                  st.sampled_from(["storage_bandwidth_gbs", "interconnect_bandwidth_gbs"]))
    def check(track: Track, w1: float, w2: float, link: str) -> None:
        slow, fast = sorted((w1, w2))
        at_slow = student.real("cold_start_latency", "cold_start_ms",
                               _cold(student, track, **{link: slow}))
        at_fast = student.real("cold_start_latency", "cold_start_ms",
                               _cold(student, track, **{link: fast}))
        assert at_most(at_fast, at_slow), \
            f"{track.track_id}: cold start rises from {slow} to {fast} GB/s of {link}"


@grader(points=1, function="cold_start_latency")
def test_warm_pool_never_raises_exposed_latency(student: Student, tracks: tuple[Track, ...],
                                                invariant_examples: int) -> None:
    """A larger warm pool never raises the exposed latency"""

    @run_property(invariant_examples, st.sampled_from(tracks), st.integers(0, 16),
                  st.integers(0, 16), st.integers(1, 16))
    def check(track: Track, w1: int, w2: int, scale: int) -> None:
        small, large = sorted((w1, w2))

        def exposed(pool: int) -> float:
            return student.real("cold_start_latency", "exposed_first_request_ms",
                                _cold(student, track, warm_pool_replicas=pool,
                                      scale_out_replicas=scale))

        assert at_most(exposed(large), exposed(small)), \
            f"{track.track_id}: a warm pool of {large} exposes more than one of {small}"


@grader(points=1, function="cold_start_latency")
def test_exposed_latency_is_at_least_the_service_time(
        student: Student, tracks: tuple[Track, ...], invariant_examples: int) -> None:
    """exposed_first_request_ms >= the track's service time"""

    @run_property(invariant_examples, st.sampled_from(tracks), st.integers(0, 16),
                  st.integers(1, 16))
    def check(track: Track, pool: int, scale: int) -> None:
        exposed = student.real("cold_start_latency", "exposed_first_request_ms",
                               _cold(student, track, warm_pool_replicas=pool,
                                     scale_out_replicas=scale))
        service = track.reference_profile().service_ms
        assert at_most(service, exposed), \
            f"{track.track_id}: exposed latency {exposed} is below the service time {service}"


# --- units --------------------------------------------------------------------------------


@grader(points=4, function="serving_track_profile")
def test_profile_is_the_same_in_other_units(student: Student, tracks: tuple[Track, ...],
                                            invariant_examples: int) -> None:
    """The same hardware in other units (GiB or MB, TB/s or GB/s) gives the same profile"""

    @run_property(min(invariant_examples, 8), st.sampled_from(tracks),
                  st.sampled_from(sorted(UNIT_VARIANTS)))
    def check(track: Track, variant_name: str) -> None:
        profile, variant, hardware, model = track.registry_objects()
        units = UNIT_VARIANTS[variant_name]
        written = student.call("serving_track_profile", profile, variant, hardware, model)
        converted = student.call("serving_track_profile", profile, variant,
                                 with_units(hardware, units), with_units(model, units))
        differences = compare(written, converted, Tolerance(rel=1e-9, abs=1e-12))
        assert not differences, f"{track.track_id} in {variant_name}: " + "; ".join(
            f"{d.field} {d.expected!r} becomes {d.actual!r}" for d in differences)
