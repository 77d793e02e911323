"""The graded cases: inputs for every contract function, per track and beyond.

Cases are pure data. Their expected values come from :mod:`reference` (or from a
golden file where the reference is absent); see :mod:`graders.expected.reference`.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from graders.grading.contract import CONTRACT_FUNCTIONS, EXTENSION_FIELDS, RESULT_FIELDS

if TYPE_CHECKING:
    from graders.trackfiles.tracks import Track

__all__ = ["CONTRACT_FUNCTIONS", "RESULT_FIELDS", "Case"]


@dataclass(frozen=True)
class Case:
    """One call of a contract function with its inputs, identified for feedback."""

    case_id: str
    function: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    #: The track a per-track case belongs to ("" for cases without a track).
    track_id: str = ""

    @property
    def key(self) -> str:
        """Unique across the suite: the track, the function and the case id."""
        return f"{self.track_id or '-'}/{self.function}/{self.case_id}"

    @property
    def fields(self) -> tuple[str, ...] | None:
        if self.function in EXTENSION_FIELDS:
            return EXTENSION_FIELDS[self.function]
        return RESULT_FIELDS[self.function]

    def describe_inputs(self) -> str:
        """The inputs as a reader would type them (objects by kind, not by content)."""
        parts = [_short(arg) for arg in self.args]
        parts += [f"{key}={_short(value)}" for key, value in self.kwargs.items()]
        return f"{self.function}({', '.join(parts)})"


def _short(value: Any) -> str:
    if hasattr(value, "track_id") and hasattr(value, "service_ms"):
        return f"<profile {value.track_id}>"
    if isinstance(value, types.SimpleNamespace) or hasattr(value, "__dataclass_fields__"):
        track_id, name = getattr(value, "track_id", None), getattr(value, "name", None)
        if track_id:
            return f"<track {track_id}>"
        if name:
            return f"<model {name}>" if "model" in type(value).__name__.lower() \
                else f"<{type(value).__name__} {name}>"
        return f"<{type(value).__name__}>"
    if hasattr(value, "m_as"):
        return f"Q({value:~P})"
    return repr(value)


# --- cases without tracks ---------------------------------------------------------------


def serve_cases() -> list[Case]:
    """The lab workload, then sizes and batch sizes around it, and other pass costs."""
    cases = [Case("lab unbatched", "serve", (256, 1)), Case("lab batched", "serve", (256, 32))]
    for n in (1, 7, 100, 256, 1000):
        for batch in (1, 2, 3, 8, 33, 64):
            cases.append(Case(f"n={n} B={batch}", "serve", (n, batch)))
    for overhead, marginal in ((0.0, 2.0), (20.0, 0.0), (5.5, 0.25), (100.0, 10.0)):
        kwargs = {"overhead_ms": overhead, "marginal_ms": marginal}
        cases.append(Case(f"n=100 B=16 overhead={overhead} marginal={marginal}", "serve",
                          (100, 16), kwargs))
    return cases


def erlang_c_cases() -> list[Case]:
    """Small fleets across loads, overload and degenerate inputs."""
    cases = []
    for replicas in (1, 2, 4, 16, 64):
        for rho in (0.0, 0.3, 0.7, 0.9, 0.99):
            arrival = rho * replicas * 1000.0 / 20.0
            cases.append(Case(f"c={replicas} rho={rho}", "erlang_c", (arrival, 20.0, replicas)))
    cases += [
        Case("overloaded", "erlang_c", (300.0, 20.0, 4)),
        Case("exactly saturated", "erlang_c", (200.0, 20.0, 4)),
        Case("zero service time", "erlang_c", (10.0, 0.0, 2)),
        Case("zero replicas", "erlang_c", (10.0, 20.0, 0)),
    ]
    return cases


def quantity_cases() -> list[Case]:
    """Quantities in several units, plain numbers, None, and unconvertible values."""
    from graders.units import registry

    q = registry().Quantity
    conversions = [
        (q(80, "GiB"), "GB"), (q(2, "MiB"), "GB"), (q(85899.34592, "MB"), "GB"),
        (q(3.35, "TB/s"), "GB/s"), (q(30, "Gbps"), "GB/s"), (q(64, "GB/s"), "GB/s"),
        (q(700, "W"), "W"), (q(20, "mW"), "W"), (q(15, "Wh"), "Wh"), (q(216, "J"), "Wh"),
        (q(7e10, "param"), "param"), (q(3.504872, "Mparam"), "param"), (q(1, "hour"), "ms"),
    ]
    cases = [Case(f"{value:~P} in {unit}", "quantity_to_float", (value, unit, 0.0))
             for value, unit in conversions]
    cases += [
        Case("None gives the default", "quantity_to_float", (None, "GB", 7.5)),
        Case("a plain int", "quantity_to_float", (12, "GB", 0.0)),
        Case("a plain float", "quantity_to_float", (2.5, "W", 0.0)),
        Case("a numeric string", "quantity_to_float", ("42", "GB", 0.0)),
        Case("a non-numeric string", "quantity_to_float", ("fast", "GB", -1.0)),
        Case("a list", "quantity_to_float", ([1, 2], "GB", 3.0)),
        Case("watts asked as bytes", "quantity_to_float", (q(5, "W"), "GB", -2.0)),
        Case("GB/s asked as seconds", "quantity_to_float", (q(1, "GB/s"), "s", 9.0)),
    ]
    return cases


# --- per-track cases ---------------------------------------------------------------------


def per_track(make: Callable[[Track], list[Case]]) -> Callable[[Track], list[Case]]:
    """Stamp the track's id on every case ``make`` returns (it keys golden values)."""

    @functools.wraps(make)
    def stamped(track: Track) -> list[Case]:
        return [dataclasses.replace(case, track_id=track.track_id) for case in make(track)]

    return stamped


#: Loads, as fractions of the fleet's capacity, from light to past saturation.
LOAD_SWEEP = (0.05, 0.25, 0.5, 0.8, 0.9, 0.95, 0.99, 1.0, 1.25)
BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
CONTEXT_LENGTHS = (256, 1024, 4096, 32768, 131072)


@per_track
def queueing_cases(track: Track) -> list[Case]:
    """The track's defaults, then a load sweep at its service time and fleet."""
    p = track.reference_profile()
    base = {"service_ms": p.service_ms, "replicas": p.replicas, "service_cv": p.service_cv,
            "slo_ms": p.slo_ms}
    cases = [Case("defaults", "queueing_latency", (), {"arrival_qps": p.arrival_qps, **base})]
    capacity_qps = p.replicas * 1000.0 / p.service_ms
    for rho in LOAD_SWEEP:
        cases.append(Case(f"load {rho:.0%} of capacity", "queueing_latency", (),
                          {"arrival_qps": rho * capacity_qps, **base}))
    for cv in (0.0, 0.5, 2.0):
        cases.append(Case(f"service cv {cv} at 80% load", "queueing_latency", (),
                          {"arrival_qps": 0.8 * capacity_qps, **base, "service_cv": cv}))
    return cases


@per_track
def batching_cases(track: Track) -> list[Case]:
    """The track's defaults, then batch sizes 1 to 64 at its load and efficiency."""
    p = track.reference_profile()
    base = {"arrival_qps": p.arrival_qps, "service_ms": p.service_ms, "slo_ms": p.slo_ms,
            "efficiency_gain": p.batch_efficiency_gain, "replicas": p.replicas,
            "service_cv": p.service_cv}
    cases = [Case("defaults", "batching_tax", (), {"batch_size": p.batch_size, **base})]
    for batch in BATCH_SIZES:
        cases.append(Case(f"batch {batch}", "batching_tax", (), {"batch_size": batch, **base}))
    cases.append(Case("batch 8 with no efficiency gain", "batching_tax", (),
                      {"batch_size": 8, **base, "efficiency_gain": 1.0}))
    return cases


@per_track
def transformer_state_cases(track: Track) -> list[Case]:
    """KV state per request at context lengths 256 to 131,072, at 1 and 2 bytes."""
    return [
        Case(f"{tokens} tokens at {kv} bytes", "transformer_state_gb", (track.model, tokens, kv))
        for tokens in CONTEXT_LENGTHS for kv in (1, 2)
    ]


@per_track
def cache_cases(track: Track) -> list[Case]:
    """The track's defaults, context lengths at 1 and 2 bytes, and device counts."""
    p = track.reference_profile()
    model = track.model
    devices = p.default_devices_per_replica

    def case(case_id: str, **kwargs: Any) -> Case:
        return Case(case_id, "cache_capacity", (p, model), kwargs)

    cases = [case("defaults", context_tokens=p.context_tokens, precision_bytes=p.precision_bytes,
                  devices_per_replica=devices, kv_precision_bytes=p.kv_precision_bytes)]
    for tokens in CONTEXT_LENGTHS:
        for precision in (1, 2):
            cases.append(case(f"{tokens} tokens at {precision} bytes", context_tokens=tokens,
                              precision_bytes=precision, devices_per_replica=devices,
                              kv_precision_bytes=precision))
    cases.append(case("profile's kv bytes", context_tokens=p.context_tokens,
                      precision_bytes=p.precision_bytes, devices_per_replica=devices))
    for count in (1, 2, 16):
        cases.append(case(f"{count} devices", context_tokens=p.context_tokens,
                          precision_bytes=p.precision_bytes, devices_per_replica=count))
    cases.append(case("0 tokens", context_tokens=0, precision_bytes=p.precision_bytes,
                      devices_per_replica=devices))
    return cases


@per_track
def cold_start_cases(track: Track) -> list[Case]:
    """Defaults, precisions, warm pools, and storage/interconnect/runtime overrides."""
    p = track.reference_profile()

    def case(case_id: str, **kwargs: Any) -> Case:
        return Case(case_id, "cold_start_latency", (p,), kwargs)

    cases = [case("defaults", precision_bytes=p.precision_bytes,
                  warm_pool_replicas=p.warm_pool_replicas,
                  scale_out_replicas=p.scale_out_replicas),
             case("no warm pool", precision_bytes=p.precision_bytes)]
    for precision in (1, 2, 4):
        cases.append(case(f"{precision} bytes", precision_bytes=precision,
                          scale_out_replicas=4))
    for warm, scale in ((0, 4), (1, 4), (2, 4), (4, 4), (6, 4), (1, 1)):
        cases.append(case(f"warm pool {warm} of {scale}", precision_bytes=p.precision_bytes,
                          warm_pool_replicas=warm, scale_out_replicas=scale))
    overrides: list[tuple[str, dict[str, float]]] = [
        ("slow storage", {"storage_bandwidth_gbs": 0.5}),
        ("fast storage", {"storage_bandwidth_gbs": 100.0}),
        ("slow interconnect", {"interconnect_bandwidth_gbs": 0.25}),
        ("zero storage means the profile's", {"storage_bandwidth_gbs": 0.0}),
        ("fast deserialize", {"deserialize_gbs": 80.0}),
        ("no runtime init", {"runtime_init_ms": 0.0}),
        ("no warmup", {"warmup_ms": 0.0}),
        ("all overridden", {"storage_bandwidth_gbs": 3.0, "interconnect_bandwidth_gbs": 12.0,
                            "deserialize_gbs": 9.0, "runtime_init_ms": 120.0,
                            "warmup_ms": 30.0}),
    ]
    for name, values in overrides:
        cases.append(case(name, precision_bytes=p.precision_bytes, **values))
    return cases


#: Other units for the same hardware and model facts, by attribute path.
UNIT_VARIANTS: dict[str, dict[str, str]] = {
    "decimal units": {"memory.capacity": "MB", "memory.bandwidth": "GB/s",
                      "storage.bandwidth": "MB/s", "interconnect.bandwidth": "Gbit/s",
                      "tdp": "mW", "battery_capacity": "J", "parameters": "count"},
    "binary and large units": {"memory.capacity": "KiB", "memory.bandwidth": "TB/s",
                               "storage.bandwidth": "GiB/s", "interconnect.bandwidth": "TB/s",
                               "tdp": "kW", "battery_capacity": "mWh",
                               "parameters": "Mparam"},
}


def with_units(obj: Any, units: Mapping[str, str], prefix: str = "") -> Any:
    """A namespace copy of ``obj`` with the quantities at ``units``' paths converted."""
    if obj is None or not hasattr(obj, "__dict__"):
        return obj
    copied = {}
    for name, value in vars(obj).items():
        path = f"{prefix}{name}"
        if hasattr(value, "m_as") and path in units:
            copied[name] = value.to(units[path])
        elif hasattr(value, "__dict__") and not hasattr(value, "m_as"):
            copied[name] = with_units(value, units, f"{path}.")
        else:
            copied[name] = value
    return types.SimpleNamespace(**copied)


@per_track
def profile_cases(track: Track) -> list[Case]:
    """The track's registry objects as written, then the same facts in other units."""
    profile, variant, hardware, model = track.registry_objects()
    cases = [Case("as written", "serving_track_profile", (profile, variant, hardware, model))]
    for name, units in UNIT_VARIANTS.items():
        cases.append(Case(name, "serving_track_profile",
                          (profile, variant, with_units(hardware, units),
                           with_units(model, units))))
    return cases


@per_track
def exact_p99_cases(track: Track) -> list[Case]:
    """The extension exact_p99_ms: the track's service time and fleet from light load to
    near saturation (stable loads only: the answer there is a real computation)."""
    p = track.reference_profile()
    capacity_qps = p.replicas * 1000.0 / p.service_ms
    return [Case(f"load {rho:.0%} of capacity", "exact_p99_ms", (),
                 {"arrival_qps": rho * capacity_qps, "service_ms": p.service_ms,
                  "replicas": p.replicas})
            for rho in LOAD_SWEEP if rho < 1.0]


#: The visible per-track case generators, in suite order.
PER_TRACK = (queueing_cases, batching_cases, transformer_state_cases, cache_cases,
             cold_start_cases, profile_cases)


def visible_cases(tracks: tuple[Track, ...]) -> Iterator[Case]:
    """Every case of the visible tests (the ones a golden file carries)."""
    yield from serve_cases()
    yield from erlang_c_cases()
    yield from quantity_cases()
    for track in tracks:
        for make in PER_TRACK:
            yield from make(track)
