"""The serving lab: latency, throughput, tail latency, memory and cold starts.

Implement every function below. Keep the names, the parameters and the result types exactly
as they are: the autograder calls them by name and reads results by field name.

Each docstring is the complete specification of its function: the model the lab uses, in
formulas, with every convention and every edge case. Implement exactly what it says, even
where you know a more exact model (the lab's queueing tail, for one, is an approximation on
purpose): the grader compares with the lab's model to a relative tolerance of 1e-6.

Units used throughout (a function that departs from them says so):
- times in milliseconds (ms);
- rates in requests per second (qps, req/s);
- memory in decimal gigabytes (GB, 1 GB = 10**9 bytes), with one exception that
  ``cache_capacity`` states: a profile's per-request state in MB becomes GB by / 1024;
- bandwidths in GB per second (GB/s);
- numeric precisions in bytes per value (2 for fp16, 1 for int8).

Notation: ``ceil``, ``floor``, ``ln`` (natural log), ``log2``, ``min`` and ``max`` are
the functions of Python's ``math`` module and builtins; ``x**2`` is x squared.

This file must stay standalone: import only from Python's standard library (pint is
installed too, but no function needs it: quantities arrive as objects whose own methods
convert them).
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from collections.abc import Mapping
from typing import Any, NamedTuple


# --- small private helpers ------------------------------------------------------------------


def _has(obj: Any, name: str) -> bool:
    """True when ``obj`` has attribute ``name`` (any error while looking counts as no)."""
    try:
        return hasattr(obj, name)
    except Exception:
        return False


def _field(obj: Any, name: str) -> Any:
    """``obj.name``, or ``obj[name]`` for a mapping; None when it is missing (or obj is None)."""
    if obj is None:
        return None
    try:
        return getattr(obj, name)
    except AttributeError:
        pass
    except Exception:
        return None
    if isinstance(obj, Mapping):
        try:
            return obj.get(name)
        except Exception:
            return None
    return None

# --- result types (do not rename or reorder fields) -----------------------------------------


class ServeResult(NamedTuple):
    """Outcome of serving a workload in batches."""

    total_ms: float
    """Time to serve every request, in ms."""
    throughput_rps: float
    """Requests served per second over the whole run, in req/s."""
    passes: int
    """Number of passes (batches) run."""


@dataclass(frozen=True)
class QueueingResult:
    """Latency of a fleet of identical replicas fed by random arrivals."""

    arrival_qps: float
    """The arrival rate you were given, in qps."""
    service_ms: float
    """The service time you were given, in ms."""
    replicas: int
    """The whole number of replicas actually used (at least 1)."""
    utilization: float
    """Fraction of the fleet's capacity in use (1.0 = fully busy); math.inf with no capacity."""
    stable: bool
    """True when the fleet keeps up with the arrivals."""
    mean_latency_ms: float
    """Mean time from arrival to response, in ms (math.inf when unstable)."""
    p50_latency_ms: float
    """Median latency, in ms (math.inf when unstable)."""
    p95_latency_ms: float
    """95th-percentile latency, in ms (math.inf when unstable)."""
    p99_latency_ms: float
    """99th-percentile latency, in ms (math.inf when unstable)."""
    p999_latency_ms: float
    """99.9th-percentile latency, in ms (math.inf when unstable)."""
    slo_ms: float
    """The latency objective you were given, in ms."""
    slo_ok: bool
    """True when the p99 latency meets the objective."""
    queue_wait_probability: float
    """Probability that a request has to wait for a free replica (0 to 1)."""
    queue_amplifier: float
    """How many times the bare service time the p99 latency is (dimensionless)."""


@dataclass(frozen=True)
class BatchingTaxResult:
    """What batching costs in latency and buys in throughput."""

    batch_size: int
    """The whole batch size actually used (at least 1)."""
    arrival_qps: float
    """The arrival rate actually used, in qps."""
    formation_delay_ms: float
    """Mean time a request waits for its batch to fill, in ms."""
    batched_service_ms: float
    """Time to serve one whole batch, in ms."""
    queue_p99_ms: float
    """p99 time a batch waits for a replica, beyond its own service, in ms."""
    total_p99_ms: float
    """p99 latency of a request: forming, queueing and service, in ms."""
    formation_slo_pct: float
    """Formation delay as a percentage of the latency objective, in %."""
    throughput_gain: float
    """How many times more requests per unit of service time batching gives."""
    effective_batch_qps: float
    """Rate at which batches reach the replicas, in batches per second."""
    utilization: float
    """Fraction of the fleet's capacity the batches use."""
    slo_ok: bool
    """True when total_p99_ms meets the latency objective."""


@dataclass(frozen=True)
class CacheCapacityResult:
    """How many requests' state fits in memory beside the model weights."""

    total_memory_gb: float
    """Memory of one replica across its devices, in GB."""
    weight_gb: float
    """Memory taken by the model weights, in GB."""
    state_per_request_gb: float
    """Memory one in-flight request needs (KV cache or other state), in GB."""
    available_gb: float
    """Memory left for request state, in GB."""
    max_concurrent: int
    """How many requests fit at once."""
    oom: bool
    """True when not even one request fits."""
    state_kind: str
    """The profile's name for the per-request state, echoed."""
    context_tokens: int
    """The context length you were given, in tokens."""


@dataclass(frozen=True)
class ColdStartResult:
    """Time to bring a new replica up, and what the first request sees."""

    model_weight_gb: float
    """Size of the weights to load, in GB."""
    storage_bandwidth_gbs: float
    """Storage read bandwidth used, in GB/s."""
    interconnect_bandwidth_gbs: float
    """Interconnect bandwidth used, in GB/s."""
    effective_bandwidth_gbs: float
    """The bandwidth the weights actually load at, in GB/s."""
    read_ms: float
    """Time to move the weights, in ms."""
    deserialize_ms: float
    """Time to deserialize the weights, in ms."""
    runtime_init_ms: float
    """Time to start the runtime, in ms."""
    warmup_ms: float
    """Time to warm the model up, in ms."""
    cold_start_ms: float
    """Total time to start one replica, in ms."""
    exposed_first_request_ms: float
    """Expected latency of the first request during a scale-out, in ms."""
    protected_fraction: float
    """Share of the new replicas a warm pool covers (0 to 1)."""
    exceeds_slo: bool
    """True when the exposed latency is over the profile's objective."""


@dataclass(frozen=True)
class ServingTrackProfile:
    """A track's hardware and model facts in plain units, with the lab's default settings."""

    track_id: str
    label: str
    hardware_ref: str
    model_ref: str
    hardware_name: str
    model_name: str
    model_params_b: float
    """Model parameters, in billions."""
    memory_capacity_gb: float
    """Device memory, in GB."""
    memory_bandwidth_gbs: float
    """Device memory bandwidth, in GB/s."""
    storage_bandwidth_gbs: float
    """Storage read bandwidth, in GB/s."""
    interconnect_bandwidth_gbs: float
    """Interconnect bandwidth, in GB/s."""
    tdp_w: float
    """Thermal design power, in W."""
    battery_wh: float | None
    """Battery capacity, in Wh, or None without a battery."""
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
    """(hardware_ref, model_ref)."""


# --- part 1: batching -----------------------------------------------------------------------


def serve(
    n_requests: int,
    batch_size: int,
    *,
    overhead_ms: float = 20.0,
    marginal_ms: float = 2.0,
) -> ServeResult:
    """Serve ``n_requests`` requests in passes (batches) of at most ``batch_size`` requests.

    The model: requests are served in passes of at most B = ``batch_size`` requests, every
    pass full except perhaps the last, which holds the rest. A pass of b requests takes
    ``overhead_ms + b * marginal_ms``.

    - ``passes = ceil(n_requests / batch_size)``: a partly filled last pass is a pass;
    - ``total_ms`` is the sum of every pass's time, which is
      ``passes * overhead_ms + n_requests * marginal_ms``;
    - ``throughput_rps = n_requests / (total_ms / 1000)``.

    Example: 256 requests at the defaults take 256 passes and 5632 ms one by one
    (45.45 req/s), and 8 passes and 672 ms in batches of 32 (380.95 req/s).

    Args:
        n_requests: how many requests to serve (a whole number, at least 1).
        batch_size: the most requests one pass may hold (a whole number, at least 1; it may
            exceed ``n_requests``).
        overhead_ms: fixed cost of running one pass, whatever its size, in ms (at least 0).
        marginal_ms: extra cost of each request in a pass, in ms (at least 0; never 0
            together with ``overhead_ms``).

    Returns:
        ServeResult(total_ms, throughput_rps, passes): total time in ms, throughput in
        requests per second, and the number of passes (an int).
    """
    n = n_requests
    b = batch_size
    if isinstance(n, int) and isinstance(b, int) and not isinstance(n, bool) and b > 0:
        passes = -(-n // b)
    else:
        passes = int(math.ceil(n / b))
    total_ms = passes * overhead_ms + n * marginal_ms
    if total_ms > 0:
        throughput_rps = n / (total_ms / 1000)
    else:
        throughput_rps = math.inf if n > 0 else 0.0
    return ServeResult(total_ms=total_ms, throughput_rps=throughput_rps, passes=int(passes))


# --- part 2: queueing and the tail ----------------------------------------------------------


def erlang_c(arrival_qps: float, service_ms: float, replicas: int) -> tuple[float, float]:
    """Erlang C for ``replicas`` identical servers fed by random (Poisson) arrivals.

    Let lambda = ``arrival_qps``, c = ``replicas``, mu = 1000 / ``service_ms`` (requests per
    second one replica serves) and a = lambda / mu (the offered load, in replicas' worth).

    - Degenerate: ``service_ms <= 0`` or ``replicas <= 0`` returns ``(math.inf, 1.0)``.
    - Overloaded: ``a >= c`` returns ``(math.inf, 1.0)``.
    - Otherwise ``wait_probability`` is the Erlang C value C(c, a), the probability that an
      arriving request finds every replica busy:
      ``C = T / (sum(a**n / n! for n = 0 .. c-1) + T)`` with ``T = a**c / c! * c / (c - a)``;
      and ``wait_rate_per_s = c * mu - lambda`` (equal to ``(c - a) * mu``).

    The textbook form above overflows floats from about c = 170. Compute C through the
    Erlang B recursion instead, which is finite and accurate for any fleet (at least 10,000
    replicas are tested): ``B = 1``; for k = 1 .. c, ``B = a * B / (k + a * B)``; then
    ``C = c * B / (c - a * (1 - B))``.

    Args:
        arrival_qps: arrival rate, in requests per second (at least 0).
        service_ms: mean time one replica takes per request, in ms.
        replicas: number of replicas (servers), a whole number.

    Returns:
        ``(wait_rate_per_s, wait_probability)``: the rate, per second, at which a queued
        request's wait decays, and the probability that a request has to wait (0 to 1).
    """
    if service_ms <= 0 or replicas <= 0:
        return (math.inf, 1.0)
    lam = arrival_qps
    c = int(replicas)
    mu = 1000 / service_ms
    a = lam / mu
    if c <= 0 or a >= c:
        return (math.inf, 1.0)
    # Erlang B by recursion (stable for any c), then Erlang C from it.
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    wait_probability = c * b / (c - a * (1 - b))
    wait_probability = min(1.0, max(0.0, wait_probability))
    wait_rate_per_s = c * mu - lam
    return (wait_rate_per_s, wait_probability)


def queueing_latency(
    *,
    arrival_qps: float,
    service_ms: float,
    replicas: int = 1,
    service_cv: float = 1.0,
    slo_ms: float = 100.0,
) -> QueueingResult:
    """Mean and tail latency of a fleet of replicas: the lab's M/G/c approximation.

    The lab's model (an approximation, used on purpose; implement it as written):

    - c = ``max(1, int(replicas))``; mu = 1000 / ``service_ms``, or 0 when
      ``service_ms <= 0``.
    - ``utilization = (lambda / mu) / c``, or ``math.inf`` when mu is 0.
    - ``stable = utilization < 1`` (exactly 1 is unstable).
    - Unstable (or mu = 0): ``stable`` False, ``utilization`` as computed, every latency
      field and ``queue_amplifier`` are ``math.inf``, ``slo_ok`` False and
      ``queue_wait_probability`` 1.0.
    - Stable: ``(r, P) = erlang_c(arrival_qps, service_ms, c)`` and the variability factor
      ``v = max(0.1, (1 + service_cv**2) / 2)`` (cv squared: 1 for exponential service).

      - ``mean_latency_ms = service_ms + P / r * 1000 * v``.
      - The latency at percentile q (a fraction, e.g. 0.99) is the *mean* service time plus
        a scaled quantile of the wait: ``service_ms`` when ``P <= 0`` or ``q <= 1 - P``
        (that share of requests never waits), else
        ``service_ms + v * ln(P / (1 - q)) / r * 1000``.
      - ``p50_latency_ms``, ``p95_latency_ms``, ``p99_latency_ms`` and
        ``p999_latency_ms`` use q = 0.50, 0.95, 0.99 and 0.999.
      - ``slo_ok = p99_latency_ms <= slo_ms`` (the p99, not the mean).
      - ``queue_wait_probability = P``; ``queue_amplifier = p99_latency_ms / service_ms``.
    - ``replicas`` is c (an int); ``arrival_qps``, ``service_ms`` and ``slo_ms`` echo the
      inputs.

    Example: 160 qps, 5 ms, 1 replica, cv 1, SLO 50 ms gives utilization 0.8, mean 25.0 ms,
    p99 114.5507 ms and slo_ok False.

    Args:
        arrival_qps: arrival rate lambda, in requests per second (at least 0).
        service_ms: mean service time of one request on one replica, in ms.
        replicas: number of replicas (at least 1 is used).
        service_cv: coefficient of variation of the service time (standard deviation over
            mean; 1.0 for exponential service, 0 for constant service).
        slo_ms: the p99 latency objective, in ms.

    Returns:
        A QueueingResult; every latency field is in ms.
    """
    c = max(1, int(replicas))
    mu = 1000 / service_ms if service_ms > 0 else 0.0
    utilization = (arrival_qps / mu) / c if mu != 0 else math.inf
    stable = mu != 0 and utilization < 1
    r, p = (math.inf, 1.0)
    if stable:
        r, p = erlang_c(arrival_qps, service_ms, c)
        if math.isinf(r):  # cannot happen when utilization < 1, but stay safe
            stable = False
    if not stable:
        inf = math.inf
        return QueueingResult(
            arrival_qps=arrival_qps,
            service_ms=service_ms,
            replicas=c,
            utilization=utilization,
            stable=False,
            mean_latency_ms=inf,
            p50_latency_ms=inf,
            p95_latency_ms=inf,
            p99_latency_ms=inf,
            p999_latency_ms=inf,
            slo_ms=slo_ms,
            slo_ok=False,
            queue_wait_probability=1.0,
            queue_amplifier=inf,
        )
    v = max(0.1, (1 + service_cv**2) / 2)
    mean_latency_ms = service_ms + p / r * 1000 * v

    def latency_at(q: float) -> float:
        if p <= 0 or q <= 1 - p:
            return service_ms
        return service_ms + v * math.log(p / (1 - q)) / r * 1000

    p50 = latency_at(0.50)
    p95 = latency_at(0.95)
    p99 = latency_at(0.99)
    p999 = latency_at(0.999)
    return QueueingResult(
        arrival_qps=arrival_qps,
        service_ms=service_ms,
        replicas=c,
        utilization=utilization,
        stable=True,
        mean_latency_ms=mean_latency_ms,
        p50_latency_ms=p50,
        p95_latency_ms=p95,
        p99_latency_ms=p99,
        p999_latency_ms=p999,
        slo_ms=slo_ms,
        slo_ok=p99 <= slo_ms,
        queue_wait_probability=p,
        queue_amplifier=p99 / service_ms,
    )


def batching_tax(
    *,
    batch_size: int,
    arrival_qps: float,
    service_ms: float,
    slo_ms: float,
    efficiency_gain: float = 1.0,
    replicas: int = 1,
    service_cv: float = 1.0,
) -> BatchingTaxResult:
    """The latency a batching policy adds, and the throughput it buys.

    The model: requests arrive one by one at rate lambda and wait until B of them form a
    batch; batches then queue for the replicas as in ``queueing_latency``.

    - B = ``max(1, int(batch_size))``; lambda = ``max(0.0001, arrival_qps)``;
      g = ``max(1, efficiency_gain)``.
    - ``formation_delay_ms = (B - 1) / (2 * lambda) * 1000``: the *mean* time a request
      waits for the others of its batch (used as it is, not as a percentile).
    - ``batched_service_ms = service_ms * (1 + 0.08 * log2(B)) / g``: one batch takes 8 %
      more per doubling of its size (continuous in B: log2, not rounded), divided by the
      hardware's efficiency gain. It is *not* B times the single-request time.
    - ``effective_batch_qps = lambda / B``.
    - ``Q = queueing_latency(arrival_qps=lambda / B, service_ms=batched_service_ms,
      replicas=replicas, service_cv=service_cv, slo_ms=max(0.001, slo_ms -
      formation_delay_ms))``: batches, not requests, are what queue.
    - ``queue_p99_ms = max(0, Q.p99_latency_ms - batched_service_ms)`` (``math.inf`` when
      Q is unstable).
    - ``total_p99_ms = formation_delay_ms + batched_service_ms + queue_p99_ms``, and
      ``math.inf`` when Q is unstable.
    - ``formation_slo_pct = formation_delay_ms / slo_ms * 100``, or ``math.inf`` when
      ``slo_ms <= 0``.
    - ``throughput_gain = B * service_ms / batched_service_ms``, or ``math.inf`` when
      ``batched_service_ms <= 0``.
    - ``utilization = Q.utilization``; ``slo_ok = total_p99_ms <= slo_ms`` (the request's
      own ``slo_ms``, not the one given to Q; False when total_p99_ms is infinite).
    - ``batch_size`` is B (an int) and ``arrival_qps`` is lambda.

    Example: B = 32, 500 qps, 5 ms, SLO 50 ms, gain 6.4 gives formation 31.0 ms (62.0 % of
    the SLO), throughput_gain 146.29 and total_p99 32.690 ms.

    Args:
        batch_size: requests per batch.
        arrival_qps: arrival rate of single requests, in requests per second.
        service_ms: service time of one unbatched request, in ms.
        slo_ms: the p99 latency objective for a request, in ms.
        efficiency_gain: the hardware's batching efficiency g: the batch time of the model
            above is divided by it (values below 1 count as 1).
        replicas: number of replicas serving batches.
        service_cv: coefficient of variation of the batch service time.

    Returns:
        A BatchingTaxResult; times in ms, formation_slo_pct in percent.
    """
    b = max(1, int(batch_size))
    lam = max(0.0001, arrival_qps)
    g = max(1, efficiency_gain)
    formation_delay_ms = (b - 1) / (2 * lam) * 1000
    batched_service_ms = service_ms * (1 + 0.08 * math.log2(b)) / g
    effective_batch_qps = lam / b
    q = queueing_latency(
        arrival_qps=lam / b,
        service_ms=batched_service_ms,
        replicas=replicas,
        service_cv=service_cv,
        slo_ms=max(0.001, slo_ms - formation_delay_ms),
    )
    if q.stable:
        queue_p99_ms = max(0, q.p99_latency_ms - batched_service_ms)
        total_p99_ms = formation_delay_ms + batched_service_ms + queue_p99_ms
    else:
        queue_p99_ms = math.inf
        total_p99_ms = math.inf
    formation_slo_pct = formation_delay_ms / slo_ms * 100 if slo_ms > 0 else math.inf
    throughput_gain = (
        b * service_ms / batched_service_ms if batched_service_ms > 0 else math.inf
    )
    slo_ok = (not math.isinf(total_p99_ms)) and total_p99_ms <= slo_ms
    return BatchingTaxResult(
        batch_size=b,
        arrival_qps=lam,
        formation_delay_ms=formation_delay_ms,
        batched_service_ms=batched_service_ms,
        queue_p99_ms=queue_p99_ms,
        total_p99_ms=total_p99_ms,
        formation_slo_pct=formation_slo_pct,
        throughput_gain=throughput_gain,
        effective_batch_qps=effective_batch_qps,
        utilization=q.utilization,
        slo_ok=bool(slo_ok),
    )


# --- part 3: memory -------------------------------------------------------------------------


def transformer_state_gb(model: object, context_tokens: int, kv_bytes: float) -> float | None:
    """KV-cache size of one request of a transformer model, in decimal GB.

    Every layer keeps a key and a value vector of ``hidden_dim`` elements for each token of
    context: ``2 * layers * hidden_dim * context_tokens * kv_bytes / 10**9`` GB (the lab
    ignores grouped-query attention). A model whose ``layers`` or ``hidden_dim`` attribute
    is missing, None or 0 is not a transformer: the result is None.

    Args:
        model: an object with ``layers`` (number of layers) and ``hidden_dim`` (hidden size).
        context_tokens: tokens of context the request keeps, a whole number (0 gives 0.0).
        kv_bytes: bytes per stored key or value element.

    Returns:
        The size in decimal GB (a float), or None when the model is not a transformer.
    """
    layers = getattr(model, "layers", None)
    hidden_dim = getattr(model, "hidden_dim", None)
    if layers is None or hidden_dim is None or layers == 0 or hidden_dim == 0:
        return None
    return float(2 * layers * hidden_dim * context_tokens * kv_bytes / 10**9)


def cache_capacity(
    profile: ServingTrackProfile,
    model: object,
    *,
    context_tokens: int,
    precision_bytes: float,
    devices_per_replica: int = 1,
    kv_precision_bytes: float | None = None,
) -> CacheCapacityResult:
    """How many concurrent requests' state fits on one replica beside the weights.

    - ``total_memory_gb = max(0, devices_per_replica * profile.memory_capacity_gb)``.
    - ``weight_gb = max(0, profile.model_params_b * precision_bytes)`` (billions of
      parameters times bytes each is GB).
    - The KV bytes are ``kv_precision_bytes``, or ``profile.kv_precision_bytes`` when it is
      None.
    - ``state_per_request_gb`` is the first of these that applies:
      1. ``transformer_state_gb(model, context_tokens, kv bytes)``, when it is not None;
      2. ``profile.state_mb_per_request / 1024``, when that is not None: the lab converts
         this MB figure to GB by dividing by 1024 (the one exception to decimal GB; keep it);
      3. otherwise ``max(0.001, 0.1 * weight_gb)``.
    - ``available_gb = max(0, total_memory_gb - weight_gb)``.
    - ``max_concurrent = floor(available_gb / state_per_request_gb)`` (whole requests), or 0
      when the state is 0 or less (for example at 0 context tokens).
    - ``oom = max_concurrent < 1``.
    - ``state_kind`` echoes ``profile.state_kind``; ``context_tokens`` echoes the input as
      an int.

    Example: cloud_fleet (Llama-2-70B on devices_per_replica=8 H100s of 80 GiB, which its
    profile holds as 85.899 GB each) at 131,072 tokens and 2 bytes gives total 687.19 GB,
    weight 140.0 GB, state 343.597 GB and max_concurrent 1.

    Args:
        profile: the track profile (memory per device in GB, model size in billions of
            parameters, per-request state in MB, default KV precision in bytes).
        model: the model object (see ``transformer_state_gb``).
        context_tokens: tokens of context per request.
        precision_bytes: bytes per weight.
        devices_per_replica: devices whose memory one replica pools.
        kv_precision_bytes: bytes per KV-cache element; None means the profile's.

    Returns:
        A CacheCapacityResult; memory in GB.
    """
    total_memory_gb = max(0, devices_per_replica * _field(profile, "memory_capacity_gb"))
    weight_gb = max(0, _field(profile, "model_params_b") * precision_bytes)
    kv_bytes = (
        kv_precision_bytes
        if kv_precision_bytes is not None
        else _field(profile, "kv_precision_bytes")
    )
    state = transformer_state_gb(model, context_tokens, kv_bytes)
    if state is None:
        state_mb = _field(profile, "state_mb_per_request")
        if state_mb is not None:
            state = state_mb / 1024
        else:
            state = max(0.001, 0.1 * weight_gb)
    available_gb = max(0, total_memory_gb - weight_gb)
    if state <= 0:
        max_concurrent = 0
    else:
        max_concurrent = int(math.floor(available_gb / state))
    return CacheCapacityResult(
        total_memory_gb=total_memory_gb,
        weight_gb=weight_gb,
        state_per_request_gb=state,
        available_gb=available_gb,
        max_concurrent=max_concurrent,
        oom=max_concurrent < 1,
        state_kind=_field(profile, "state_kind"),
        context_tokens=int(context_tokens),
    )


# --- part 4: cold starts --------------------------------------------------------------------


def cold_start_latency(
    profile: ServingTrackProfile,
    *,
    precision_bytes: float,
    storage_bandwidth_gbs: float | None = None,
    interconnect_bandwidth_gbs: float | None = None,
    deserialize_gbs: float | None = None,
    runtime_init_ms: float | None = None,
    warmup_ms: float | None = None,
    warm_pool_replicas: int = 0,
    scale_out_replicas: int = 1,
) -> ColdStartResult:
    """Time to start a new replica, and the latency the first request is exposed to.

    - ``model_weight_gb = max(0, profile.model_params_b * precision_bytes)``.
    - Bandwidths: ``storage_bandwidth_gbs`` is the given value, or
      ``profile.storage_bandwidth_gbs`` when the given one is None or 0, then raised to at
      least 0.001; ``interconnect_bandwidth_gbs`` and the deserialization speed
      (``deserialize_gbs``, else ``profile.deserialize_gbs``) are taken the same way.
      (A profile whose hardware has no storage or interconnect already holds its memory
      bandwidth there: ``serving_track_profile`` makes that fallback.)
    - ``effective_bandwidth_gbs = min(storage, interconnect)``: the weights stream from
      storage over the interconnect, so the slower of the two sets the pace.
    - ``runtime_init_ms`` and ``warmup_ms`` are the given values when not None (0 is a
      value), else the profile's.
    - ``read_ms = model_weight_gb / effective_bandwidth_gbs * 1000``;
      ``deserialize_ms = model_weight_gb / deserialization speed * 1000``.
    - ``cold_start_ms = read_ms + deserialize_ms + runtime_init_ms + warmup_ms``.
    - ``protected_fraction = min(1.0, max(0, warm_pool_replicas) / max(1,
      scale_out_replicas))``: the share of a scale-out's new replicas that a warm pool
      already covers.
    - ``exposed_first_request_ms = profile.service_ms + cold_start_ms * (1 -
      protected_fraction)``: the first request's service time plus the expected cold start
      it waits for.
    - ``exceeds_slo = exposed_first_request_ms > profile.slo_ms``.

    Example: cloud_fleet at 2 bytes with no warm pool and a scale-out of 4 gives weight
    140 GB, cold start 28,300 ms and exceeds_slo True; with its warm pool of 2 of 4 the
    exposed latency is 14,175 ms.

    Args:
        profile: the track profile (model size, bandwidths, start-up times, service time and
            latency objective).
        precision_bytes: bytes per weight.
        storage_bandwidth_gbs: storage read bandwidth in GB/s; None or 0 means the profile's.
        interconnect_bandwidth_gbs: interconnect bandwidth in GB/s; None or 0 means the
            profile's.
        deserialize_gbs: deserialization speed in GB/s; None or 0 means the profile's.
        runtime_init_ms: runtime start-up time in ms; None means the profile's (0 is a value).
        warmup_ms: warm-up time in ms; None means the profile's (0 is a value).
        warm_pool_replicas: replicas kept warm, ready to take traffic at once.
        scale_out_replicas: replicas a scale-out event adds.

    Returns:
        A ColdStartResult; times in ms, bandwidths in GB/s, weights in GB.
    """
    model_weight_gb = max(0, _field(profile, "model_params_b") * precision_bytes)

    def pick_rate(given: float | None, name: str) -> float:
        value = given
        if value is None or value == 0:
            value = _field(profile, name)
        return max(0.001, value)

    storage = pick_rate(storage_bandwidth_gbs, "storage_bandwidth_gbs")
    interconnect = pick_rate(interconnect_bandwidth_gbs, "interconnect_bandwidth_gbs")
    deserialize = pick_rate(deserialize_gbs, "deserialize_gbs")
    effective = min(storage, interconnect)
    init_ms = runtime_init_ms if runtime_init_ms is not None else _field(profile, "runtime_init_ms")
    warm_ms = warmup_ms if warmup_ms is not None else _field(profile, "warmup_ms")
    read_ms = model_weight_gb / effective * 1000
    deserialize_ms = model_weight_gb / deserialize * 1000
    cold_start_ms = read_ms + deserialize_ms + init_ms + warm_ms
    protected_fraction = min(1.0, max(0, warm_pool_replicas) / max(1, scale_out_replicas))
    exposed = _field(profile, "service_ms") + cold_start_ms * (1 - protected_fraction)
    return ColdStartResult(
        model_weight_gb=model_weight_gb,
        storage_bandwidth_gbs=storage,
        interconnect_bandwidth_gbs=interconnect,
        effective_bandwidth_gbs=effective,
        read_ms=read_ms,
        deserialize_ms=deserialize_ms,
        runtime_init_ms=init_ms,
        warmup_ms=warm_ms,
        cold_start_ms=cold_start_ms,
        exposed_first_request_ms=exposed,
        protected_fraction=protected_fraction,
        exceeds_slo=bool(exposed > _field(profile, "slo_ms")),
    )


# --- part 5: track profiles -----------------------------------------------------------------


def quantity_to_float(value: Any, unit: str, default: float) -> float:
    """A quantity as a plain float in ``unit``.

    The first rule that applies:
    - None gives ``default``;
    - a value with an ``m_as`` method (a pint Quantity) gives ``float(value.m_as(unit))``,
      or ``default`` if that raises any exception (e.g. incompatible units);
    - a value with a ``to`` method gives ``float(value.to(unit).magnitude)``, or
      ``default`` if that raises any exception;
    - anything else gives ``float(value)`` (a plain number is taken as already in
      ``unit``), or ``default`` if that raises TypeError or ValueError.

    Args:
        value: a pint Quantity (or any object with ``m_as`` or ``to``), a plain number,
            or None.
        unit: the unit to express it in, as pint spells it (for example "GB/s").
        default: what to return for None, or when the value cannot be converted.

    Returns:
        The magnitude in ``unit``, as a float.
    """
    if value is None:
        return default
    if _has(value, "m_as"):
        try:
            return float(value.m_as(unit))
        except Exception:
            return default
    if _has(value, "to"):
        try:
            return float(value.to(unit).magnitude)
        except Exception:
            return default
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def serving_track_profile(
    profile: Any, variant: Any, hardware: Any, model: Any
) -> ServingTrackProfile:
    """Flatten MLSysIM-style registry objects into one ServingTrackProfile in plain units.

    Every conversion goes through ``quantity_to_float(value, unit, default)``; "GB" is
    decimal (10**9 bytes), so a capacity in GiB or MiB changes number.

    - ``track_id`` and ``label``: ``str`` of ``profile.track_id`` and ``profile.label``.
    - ``hardware_ref`` and ``model_ref``: ``str`` of the variant's; ``hardware_name`` and
      ``model_name``: ``hardware.name`` and ``model.name``, or the ref when the name is
      missing, None or empty.
    - ``model_params_b``: ``model.parameters`` in "param", default 0, divided by 1e9.
    - ``memory_capacity_gb``: ``hardware.memory.capacity`` in "GB", default 0;
      ``memory_bandwidth_gbs``: ``hardware.memory.bandwidth`` in "GB/s", default 0;
      ``tdp_w``: ``hardware.tdp`` in "W", default 0.
    - ``battery_wh``: None when ``hardware.battery_capacity`` is missing or None (no
      battery: None, not 0), else it in "Wh", default 0.
    - ``storage_bandwidth_gbs``: ``variant.defaults["storage_bandwidth_gbs"]`` when that key
      is present, else ``hardware.storage.bandwidth``; in "GB/s", and when that is missing,
      None or cannot be converted, the fallback instead: ``hardware.memory.bandwidth`` in
      "GB/s" with default 1.0 (1.0 only when the memory bandwidth itself is missing, None or
      cannot be converted; a memory bandwidth of 0 stays 0). ``interconnect_bandwidth_gbs``
      the same way, from the key "interconnect_bandwidth_gbs" or
      ``hardware.interconnect.bandwidth``. (Gbps is
      gigabits per second: 8 Gbps is 1 GB/s; let the quantity convert itself.)
    - The lab's settings come from the mapping ``variant.defaults`` (None counts as an empty
      mapping), each field from the key of the same name with this default when the key is
      absent: arrival_qps 100, service_ms 20, replicas 1, slo_ms 100, service_cv 1,
      batch_size 1, batch_efficiency_gain 1, context_tokens 4096, state_kind
      "state/cache", state_mb_per_request None, precision_bytes 2, kv_precision_bytes 2,
      deserialize_gbs 20, runtime_init_ms 800, warmup_ms 500, warm_pool_replicas 0,
      scale_out_replicas 1; and ``default_devices_per_replica`` from the key
      "devices_per_replica", default 1. A value that is None or a string is kept as it is;
      otherwise replicas, batch_size, context_tokens, default_devices_per_replica,
      warm_pool_replicas and scale_out_replicas become ``int`` and the rest ``float``.
    - ``validation_tests``: a tuple of the ``str`` of each item of
      ``defaults["validation_tests"]``, () when absent.
    - ``serving_policy``: ``variant.assumptions["serving_policy"]`` as a str (None counts as
      an empty mapping), default "track-specific serving policy".
    - ``primary_metric`` and ``guardrail_metric``: ``str`` of the variant's.
    - ``source_refs = (hardware_ref, model_ref)``.

    Args:
        profile: has ``track_id`` and ``label``.
        variant: has ``hardware_ref``, ``model_ref``, ``defaults`` (a mapping of lab
            settings), ``assumptions`` (a mapping), ``primary_metric``, ``guardrail_metric``.
        hardware: has ``name``, ``memory.capacity``, ``memory.bandwidth``,
            ``storage.bandwidth``, ``interconnect.bandwidth``, ``tdp`` and
            ``battery_capacity`` as pint quantities; storage, interconnect and battery may
            be missing or None.
        model: has ``name``, ``parameters`` (a pint quantity in ``param``), ``layers`` and
            ``hidden_dim``.

    Returns:
        A ServingTrackProfile with GB, GB/s, W, Wh and billions of parameters.
    """
    track_id = str(_field(profile, "track_id"))
    label = str(_field(profile, "label"))
    hardware_ref = str(_field(variant, "hardware_ref"))
    model_ref = str(_field(variant, "model_ref"))
    hw_name = _field(hardware, "name")
    hardware_name = str(hw_name) if hw_name is not None and hw_name != "" else hardware_ref
    m_name = _field(model, "name")
    model_name = str(m_name) if m_name is not None and m_name != "" else model_ref

    model_params_b = quantity_to_float(_field(model, "parameters"), "param", 0) / 1e9
    memory = _field(hardware, "memory")
    memory_capacity_gb = quantity_to_float(_field(memory, "capacity"), "GB", 0)
    memory_bandwidth_gbs = quantity_to_float(_field(memory, "bandwidth"), "GB/s", 0)
    tdp_w = quantity_to_float(_field(hardware, "tdp"), "W", 0)
    battery = _field(hardware, "battery_capacity")
    battery_wh = None if battery is None else quantity_to_float(battery, "Wh", 0)

    defaults = _field(variant, "defaults")
    if defaults is None:
        defaults = {}
    assumptions = _field(variant, "assumptions")
    if assumptions is None:
        assumptions = {}

    missing = object()

    def bandwidth(key: str, part: str) -> float:
        if key in defaults:
            raw = defaults[key]
        else:
            raw = _field(_field(hardware, part), "bandwidth")
        value = quantity_to_float(raw, "GB/s", missing)
        if value is missing:
            return quantity_to_float(_field(memory, "bandwidth"), "GB/s", 1.0)
        return value

    storage_bandwidth_gbs = bandwidth("storage_bandwidth_gbs", "storage")
    interconnect_bandwidth_gbs = bandwidth("interconnect_bandwidth_gbs", "interconnect")

    def setting(key: str, default: Any, kind: type) -> Any:
        value = defaults[key] if key in defaults else default
        if value is None or isinstance(value, str):
            return value
        return kind(value)

    raw_tests = defaults["validation_tests"] if "validation_tests" in defaults else None
    validation_tests = tuple(str(t) for t in raw_tests) if raw_tests is not None else ()
    if "serving_policy" in assumptions:
        serving_policy = str(assumptions["serving_policy"])
    else:
        serving_policy = "track-specific serving policy"

    return ServingTrackProfile(
        track_id=track_id,
        label=label,
        hardware_ref=hardware_ref,
        model_ref=model_ref,
        hardware_name=hardware_name,
        model_name=model_name,
        model_params_b=model_params_b,
        memory_capacity_gb=memory_capacity_gb,
        memory_bandwidth_gbs=memory_bandwidth_gbs,
        storage_bandwidth_gbs=storage_bandwidth_gbs,
        interconnect_bandwidth_gbs=interconnect_bandwidth_gbs,
        tdp_w=tdp_w,
        battery_wh=battery_wh,
        arrival_qps=setting("arrival_qps", 100, float),
        service_ms=setting("service_ms", 20, float),
        replicas=setting("replicas", 1, int),
        slo_ms=setting("slo_ms", 100, float),
        service_cv=setting("service_cv", 1, float),
        batch_size=setting("batch_size", 1, int),
        batch_efficiency_gain=setting("batch_efficiency_gain", 1, float),
        context_tokens=setting("context_tokens", 4096, int),
        state_kind=setting("state_kind", "state/cache", float),
        state_mb_per_request=setting("state_mb_per_request", None, float),
        precision_bytes=setting("precision_bytes", 2, float),
        kv_precision_bytes=setting("kv_precision_bytes", 2, float),
        default_devices_per_replica=setting("devices_per_replica", 1, int),
        deserialize_gbs=setting("deserialize_gbs", 20, float),
        runtime_init_ms=setting("runtime_init_ms", 800, float),
        warmup_ms=setting("warmup_ms", 500, float),
        warm_pool_replicas=setting("warm_pool_replicas", 0, int),
        scale_out_replicas=setting("scale_out_replicas", 1, int),
        validation_tests=validation_tests,
        serving_policy=serving_policy,
        primary_metric=str(_field(variant, "primary_metric")),
        guardrail_metric=str(_field(variant, "guardrail_metric")),
        source_refs=(hardware_ref, model_ref),
    )


# --- optional extension: the exact tail --------------------------------------------------


def exact_p99_ms(*, arrival_qps: float, service_ms: float, replicas: int = 1) -> float:
    """Optional: graded only when your course enables it (it says so; the score table then
    has an exact_p99_ms row). The exact p99 latency of an M/M/c queue, in ms.

    Not the lab's formula of ``queueing_latency``: here a request's latency is its own
    exponential service time S (mean ``service_ms``) plus its wait W, independent of S. With
    mu = 1 / ``service_ms`` (per ms), ``(r_per_s, P) = erlang_c(arrival_qps, service_ms,
    replicas)`` and r = r_per_s / 1000 (per ms): W = 0 with probability 1 - P, else W is
    exponential with rate r. So, for t >= 0,

        P(latency > t) = (1 - P) * exp(-mu * t)
                         + P * exp(-mu * t) * (1 + mu * (1 - exp(-(r - mu) * t)) / (r - mu))

    where the bracket is ``1 + mu * t`` when r = mu. The p99 is the t at which this equals
    0.01; it has no closed form: find it numerically (the survival function falls as t
    grows; bisection to a relative accuracy of 1e-9 or better). An unstable queue
    (``erlang_c`` gives an infinite rate) has p99 ``math.inf``.

    Args:
        arrival_qps: arrival rate, in requests per second.
        service_ms: mean service time, in ms (more than 0).
        replicas: number of replicas, a whole number.

    Returns:
        The p99 latency in ms.
    """
    r_per_s, p = erlang_c(arrival_qps, service_ms, replicas)
    if math.isinf(r_per_s) or service_ms <= 0:
        return math.inf
    mu = 1.0 / service_ms
    r = r_per_s / 1000.0
    d = r - mu
    target = 0.01

    def survival(t: float) -> float:
        e_mu = math.exp(-mu * t)
        if d == 0:
            bracket_term = t
        elif -d * t > 700:  # r < mu and large t: avoid overflow, use the expanded form
            return e_mu + p * mu * (e_mu - math.exp(-r * t)) / d
        else:
            bracket_term = -math.expm1(-d * t) / d
        return e_mu * (1 + p * mu * bracket_term)

    lo, hi = 0.0, max(service_ms, 1e-12)
    for _ in range(4000):
        if survival(hi) <= target:
            break
        lo, hi = hi, hi * 2
    for _ in range(400):
        mid = (lo + hi) / 2
        if mid <= lo or mid >= hi:
            break
        if survival(mid) > target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * hi:
            break
    return (lo + hi) / 2
