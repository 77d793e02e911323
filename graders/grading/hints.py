"""General hints: where to look, shown beside a wrong root field (or a raised error) that
no finding explains (:mod:`graders.grading.function_diagnosis`). Each restates the
handout's rule for the field; none says what the student did."""

from __future__ import annotations

#: Where to look, by (function, field): the handout's rule for the field, shown after
#: "where to look:" when no finding names the cause (never said as the cause). A ``None``
#: field applies to every field of the function.
HINTS: dict[tuple[str, str | None], str] = {
    ("serve", "passes"): "passes = ceil(n / B): a partly filled last pass is a pass",
    ("serve", "total_ms"): "total_ms adds, for each pass, overhead_ms + (its requests) · "
                           "marginal_ms",
    ("serve", "throughput_rps"): "throughput_rps = n / (total_ms / 1000)",
    ("erlang_c", "wait_probability"): "C(c, a) from the Erlang B recursion; (inf, 1.0) when "
                                      "a >= c",
    ("erlang_c", "wait_rate_per_s"): "wait_rate_per_s = c·mu - lambda, mu = 1000 / service_ms",
    ("queueing_latency", "utilization"): "utilization = lambda / (c·mu), mu = 1000 / "
                                         "service_ms per second",
    ("queueing_latency", "mean_latency_ms"): "mean = service_ms + P / r · 1000 · v, v = "
                                             "max(0.1, (1 + cv²)/2)",
    ("queueing_latency", "p50_latency_ms"): "a percentile q is service_ms when q <= 1 - P, "
                                            "else service_ms + v · -ln((1-q)/P) / r · 1000",
    ("queueing_latency", "p95_latency_ms"): "a percentile q is service_ms when q <= 1 - P, "
                                            "else service_ms + v · -ln((1-q)/P) / r · 1000",
    ("queueing_latency", "p99_latency_ms"): "a percentile q is service_ms when q <= 1 - P, "
                                            "else service_ms + v · -ln((1-q)/P) / r · 1000",
    ("queueing_latency", "p999_latency_ms"): "a percentile q is service_ms when q <= 1 - P, "
                                             "else service_ms + v · -ln((1-q)/P) / r · 1000",
    ("queueing_latency", "queue_wait_probability"): "P from erlang_c; 1.0 when the queue is "
                                                    "unstable",
    ("queueing_latency", "stable"): "stable = utilization < 1",
    ("queueing_latency", "slo_ok"): "slo_ok = p99 <= slo_ms",
    ("queueing_latency", "queue_amplifier"): "queue_amplifier = p99 / service_ms",
    ("batching_tax", "formation_delay_ms"): "formation_delay_ms = (B - 1) / (2 lambda) · 1000",
    ("batching_tax", "batched_service_ms"): "batched_service_ms = service_ms · (1 + 0.08 · "
                                            "log2 B) / max(1, gain)",
    ("batching_tax", "queue_p99_ms"): "queue_p99_ms = max(0, p99 of the queue of batches "
                                      "(lambda / B, the batched service) - batched service)",
    ("batching_tax", "total_p99_ms"): "total_p99_ms = formation + batched service + "
                                      "queue_p99_ms (inf when the queue is unstable)",
    ("batching_tax", "formation_slo_pct"): "formation_slo_pct = formation / slo_ms · 100",
    ("batching_tax", "throughput_gain"): "throughput_gain = B · service_ms / "
                                         "batched_service_ms",
    ("batching_tax", "effective_batch_qps"): "effective_batch_qps = lambda / B",
    ("batching_tax", "utilization"): "utilization is the queue of batches' (lambda / B at "
                                     "the batched service)",
    ("transformer_state_gb", None): "2 · layers · hidden_dim · tokens · kv_bytes / 1e9; "
                                    "None when layers or hidden_dim is missing or 0",
    ("cache_capacity", "total_memory_gb"): "total_memory_gb = devices_per_replica · the "
                                           "profile's memory_capacity_gb",
    ("cache_capacity", "weight_gb"): "weight_gb = the profile's model_params_b · "
                                     "precision_bytes",
    ("cache_capacity", "state_per_request_gb"): "transformer_state_gb, else "
                                                "state_mb_per_request / 1024, else "
                                                "max(0.001, 0.1 · weight_gb)",
    ("cache_capacity", "available_gb"): "available_gb = max(0, total - weight)",
    ("cache_capacity", "max_concurrent"): "max_concurrent = floor(available / state), 0 "
                                          "when the state is 0",
    ("cache_capacity", "oom"): "oom = max_concurrent < 1",
    ("cold_start_latency", "model_weight_gb"): "model_weight_gb = params_b · precision_bytes",
    ("cold_start_latency", "storage_bandwidth_gbs"): "the given bandwidth, or the profile's "
                                                     "when None or 0; at least 0.001",
    ("cold_start_latency", "interconnect_bandwidth_gbs"): "the given bandwidth, or the "
                                                          "profile's when None or 0; at "
                                                          "least 0.001",
    ("cold_start_latency", "effective_bandwidth_gbs"): "the min of storage and interconnect",
    ("cold_start_latency", "read_ms"): "read_ms = weight / effective bandwidth · 1000",
    ("cold_start_latency", "deserialize_ms"): "deserialize_ms = weight / deserialize_gbs · "
                                              "1000",
    ("cold_start_latency", "runtime_init_ms"): "the given value when not None (0 counts), "
                                               "else the profile's",
    ("cold_start_latency", "warmup_ms"): "the given value when not None (0 counts), else the "
                                         "profile's",
    ("cold_start_latency", "cold_start_ms"): "cold_start_ms = read + deserialize + init + "
                                             "warmup",
    ("cold_start_latency", "exposed_first_request_ms"): "exposed = the profile's service_ms "
                                                        "+ cold_start_ms · (1 - "
                                                        "protected_fraction)",
    ("cold_start_latency", "protected_fraction"): "min(1, warm_pool / max(1, scale_out))",
    ("cold_start_latency", "exceeds_slo"): "exceeds_slo = exposed > the profile's slo_ms",
    ("quantity_to_float", None): "None gives the default; a quantity is converted to the "
                                 "unit asked; anything else goes through float(); a "
                                 "failure gives the default",
    ("serving_track_profile", "memory_capacity_gb"): "the capacity converted to \"GB\", "
                                                     "default 0",
    ("serving_track_profile", "memory_bandwidth_gbs"): "the bandwidth converted to "
                                                       "\"GB/s\", default 0",
    ("serving_track_profile", "interconnect_bandwidth_gbs"): "defaults' value when the key is "
                                                             "there, else the hardware's, in "
                                                             "\"GB/s\"; else the memory "
                                                             "bandwidth (1.0 without one)",
    ("serving_track_profile", "storage_bandwidth_gbs"): "defaults' value when the key is "
                                                        "there, else the hardware's, in "
                                                        "\"GB/s\"; else the memory "
                                                        "bandwidth (1.0 without one)",
    ("serving_track_profile", "battery_wh"): "the battery in \"Wh\"; None without a battery",
    ("serving_track_profile", "model_params_b"): "the parameters in \"param\" / 1e9",
    ("serving_track_profile", "tdp_w"): "the TDP in \"W\", default 0",
    ("serving_track_profile", None): "the field's rule in serving_track_profile's docstring",
}


#: Hints by (function, exception name) for a call that raised; a ``None`` name applies to
#: every exception of the function (NotImplementedError never gets one).
ERROR_HINTS: dict[tuple[str, str | None], str] = {
    ("serve", "ZeroDivisionError"): "a partly filled last pass is still a pass: at least "
                                    "one pass for n >= 1 (round up)",
    ("erlang_c", "OverflowError"): "large fleets overflow the textbook factorials; use the "
                                   "Erlang B recursion",
    ("erlang_c", "ZeroDivisionError"): "an overloaded queue (a >= c) returns (inf, 1.0) "
                                       "before dividing by c - a",
    ("queueing_latency", "ZeroDivisionError"): "an unstable queue (utilization >= 1) returns "
                                               "infinite latencies before dividing by the "
                                               "wait rate",
    ("queueing_latency", "OverflowError"): "large fleets overflow the textbook factorials; "
                                           "use the Erlang B recursion in erlang_c",
    ("batching_tax", "ZeroDivisionError"): "an unstable queue of batches gives an infinite "
                                           "total_p99_ms, not a division by zero",
    ("cache_capacity", "ZeroDivisionError"): "a state of 0 GB (0 context tokens) fits no "
                                             "request limit: max_concurrent is 0 there",
    ("cold_start_latency", "ZeroDivisionError"): "bandwidths are at least 0.001 GB/s; a "
                                                 "given 0 or None falls back to the profile's",
    ("quantity_to_float", None): "fall back to the default whenever a value cannot be "
                                 "converted",
}


def error_hint_for(function: str, error: str) -> str | None:
    """The hint for ``function`` raising ``error``, if there is one."""
    if not error or error == "NotImplementedError":
        return None
    return ERROR_HINTS.get((function, error)) or ERROR_HINTS.get((function, None))


def hint_for(function: str, field: str) -> str | None:
    """The hint for a wrong ``field`` of ``function``, if there is one."""
    base = field.split("[", 1)[0]
    return HINTS.get((function, base)) or HINTS.get((function, None))
