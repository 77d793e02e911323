"""The student contract as the graders read it: result fields by function (lab spec section 1).

This is data, not the reference: the student bundle carries it without ``reference/``.
A test checks that the reference's result types have exactly these fields, in this order.
"""

from __future__ import annotations

QUEUEING_FIELDS = (
    "arrival_qps", "service_ms", "replicas", "utilization", "stable", "mean_latency_ms",
    "p50_latency_ms", "p95_latency_ms", "p99_latency_ms", "p999_latency_ms", "slo_ms",
    "slo_ok", "queue_wait_probability", "queue_amplifier",
)
BATCHING_TAX_FIELDS = (
    "batch_size", "arrival_qps", "formation_delay_ms", "batched_service_ms", "queue_p99_ms",
    "total_p99_ms", "formation_slo_pct", "throughput_gain", "effective_batch_qps",
    "utilization", "slo_ok",
)
CACHE_CAPACITY_FIELDS = (
    "total_memory_gb", "weight_gb", "state_per_request_gb", "available_gb", "max_concurrent",
    "oom", "state_kind", "context_tokens",
)
COLD_START_FIELDS = (
    "model_weight_gb", "storage_bandwidth_gbs", "interconnect_bandwidth_gbs",
    "effective_bandwidth_gbs", "read_ms", "deserialize_ms", "runtime_init_ms", "warmup_ms",
    "cold_start_ms", "exposed_first_request_ms", "protected_fraction", "exceeds_slo",
)
PROFILE_FIELDS = (
    "track_id", "label", "hardware_ref", "model_ref", "hardware_name", "model_name",
    "model_params_b", "memory_capacity_gb", "memory_bandwidth_gbs", "storage_bandwidth_gbs",
    "interconnect_bandwidth_gbs", "tdp_w", "battery_wh", "arrival_qps", "service_ms",
    "replicas", "slo_ms", "service_cv", "batch_size", "batch_efficiency_gain",
    "context_tokens", "state_kind", "state_mb_per_request", "precision_bytes",
    "kv_precision_bytes", "default_devices_per_replica", "deserialize_gbs", "runtime_init_ms",
    "warmup_ms", "warm_pool_replicas", "scale_out_replicas", "validation_tests",
    "serving_policy", "primary_metric", "guardrail_metric", "source_refs",
)

#: Result fields the graders read, by contract function (None: a plain value).
RESULT_FIELDS: dict[str, tuple[str, ...] | None] = {
    "serve": ("total_ms", "throughput_rps", "passes"),
    "erlang_c": ("wait_rate_per_s", "wait_probability"),
    "queueing_latency": QUEUEING_FIELDS,
    "batching_tax": BATCHING_TAX_FIELDS,
    "transformer_state_gb": None,
    "cache_capacity": CACHE_CAPACITY_FIELDS,
    "cold_start_latency": COLD_START_FIELDS,
    "quantity_to_float": None,
    "serving_track_profile": PROFILE_FIELDS,
}
CONTRACT_FUNCTIONS = tuple(RESULT_FIELDS)

#: Graded extensions, off by default: not in the contract every student implements, graded
#: only when a course gives them points (``--grader-exact-p99-points``).
EXTENSION_FIELDS: dict[str, tuple[str, ...] | None] = {
    "exact_p99_ms": None,  # (*, arrival_qps, service_ms, replicas=1): the exact M/M/c p99
}

#: Each contract function's parameters in order, with the lab's defaults (``REQUIRED``: none),
#: as the handout's signatures give them (lab spec section 1): the names a case's
#: positional inputs go by, where the reference is absent too.
REQUIRED = object()
PARAMETERS: dict[str, tuple[tuple[str, object], ...]] = {
    "serve": (("n_requests", REQUIRED), ("batch_size", REQUIRED), ("overhead_ms", 20.0),
              ("marginal_ms", 2.0)),
    "erlang_c": (("arrival_qps", REQUIRED), ("service_ms", REQUIRED), ("replicas", REQUIRED)),
    "queueing_latency": (("arrival_qps", REQUIRED), ("service_ms", REQUIRED), ("replicas", 1),
                         ("service_cv", 1.0), ("slo_ms", 100.0)),
    "batching_tax": (("batch_size", REQUIRED), ("arrival_qps", REQUIRED),
                     ("service_ms", REQUIRED), ("slo_ms", REQUIRED), ("efficiency_gain", 1.0),
                     ("replicas", 1), ("service_cv", 1.0)),
    "transformer_state_gb": (("model", REQUIRED), ("context_tokens", REQUIRED),
                             ("kv_bytes", REQUIRED)),
    "cache_capacity": (("profile", REQUIRED), ("model", REQUIRED), ("context_tokens", REQUIRED),
                       ("precision_bytes", REQUIRED), ("devices_per_replica", 1),
                       ("kv_precision_bytes", None)),
    "cold_start_latency": (("profile", REQUIRED), ("precision_bytes", REQUIRED),
                           ("storage_bandwidth_gbs", None),
                           ("interconnect_bandwidth_gbs", None), ("deserialize_gbs", None),
                           ("runtime_init_ms", None), ("warmup_ms", None),
                           ("warm_pool_replicas", 0), ("scale_out_replicas", 1)),
    "quantity_to_float": (("value", REQUIRED), ("unit", REQUIRED), ("default", REQUIRED)),
    "serving_track_profile": (("profile", REQUIRED), ("variant", REQUIRED),
                              ("hardware", REQUIRED), ("model", REQUIRED)),
}

#: The profile's lab settings read from ``variant.defaults``: each field's key there and
#: the lab's default when the key is absent (lab spec section 3). The diagnosis names a
#: field left at its default; a test checks it against the reference's table.
PROFILE_DEFAULTS: dict[str, tuple[str, object]] = {
    "arrival_qps": ("arrival_qps", 100.0),
    "service_ms": ("service_ms", 20.0),
    "replicas": ("replicas", 1),
    "slo_ms": ("slo_ms", 100.0),
    "service_cv": ("service_cv", 1.0),
    "batch_size": ("batch_size", 1),
    "batch_efficiency_gain": ("batch_efficiency_gain", 1.0),
    "context_tokens": ("context_tokens", 4096),
    "state_kind": ("state_kind", "state/cache"),
    "state_mb_per_request": ("state_mb_per_request", None),
    "precision_bytes": ("precision_bytes", 2.0),
    "kv_precision_bytes": ("kv_precision_bytes", 2.0),
    "default_devices_per_replica": ("devices_per_replica", 1),
    "deserialize_gbs": ("deserialize_gbs", 20.0),
    "runtime_init_ms": ("runtime_init_ms", 800.0),
    "warmup_ms": ("warmup_ms", 500.0),
    "warm_pool_replicas": ("warm_pool_replicas", 0),
    "scale_out_replicas": ("scale_out_replicas", 1),
}
