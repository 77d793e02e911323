"""General hints, shown beside a wrong root field (or a raised error) that no catalogued
mistake explains (:mod:`graders.grading.diagnosis`): where the usual mistake hides, not the
answer."""

from __future__ import annotations

#: Hints by (function, field); a ``None`` field applies to every field of the function.
HINTS: dict[tuple[str, str | None], str] = {
    ("serve", "passes"): "a partly filled last pass is still a pass (round up, not down)",
    ("serve", "total_ms"): "every pass pays the overhead once plus the marginal cost per request",
    ("serve", "throughput_rps"): "requests per second: divide by total time in seconds",
    ("erlang_c", "wait_probability"): "C(c, a) from the Erlang B recursion; an overloaded "
                                      "queue (a >= c) always waits (1.0)",
    ("erlang_c", "wait_rate_per_s"): "the rate at which the queue drains: c*mu - lambda",
    ("queueing_latency", "utilization"): "utilization is lambda / (c * mu), with mu per second",
    ("queueing_latency", "mean_latency_ms"): "check the variability factor max(0.1, (1+cv^2)/2)",
    ("queueing_latency", "p50_latency_ms"): "below the 1-P quantile a request does not wait",
    ("queueing_latency", "p95_latency_ms"): "each percentile uses its own q (0.95 here)",
    ("queueing_latency", "p99_latency_ms"): "p99 is the q = 0.99 quantile, scaled by the "
                                            "variability factor",
    ("queueing_latency", "p999_latency_ms"): "p999 is the q = 0.999 quantile",
    ("queueing_latency", "queue_wait_probability"): "an unstable queue always waits (1.0)",
    ("queueing_latency", "stable"): "stable means utilization strictly below 1",
    ("queueing_latency", "slo_ok"): "compare p99 (not the mean) against the SLO",
    ("batching_tax", "formation_delay_ms"): "on average a request waits for half of the "
                                            "other B-1 arrivals",
    ("batching_tax", "batched_service_ms"): "8 % more per doubling of the batch, divided by "
                                            "the efficiency gain",
    ("batching_tax", "queue_p99_ms"): "batches, not requests, arrive at the queue (lambda/B)",
    ("batching_tax", "total_p99_ms"): "formation + batched service + queueing tail",
    ("transformer_state_gb", None): "keys and values: 2 * layers * hidden * tokens * bytes, "
                                    "in decimal GB",
    ("cache_capacity", "total_memory_gb"): "capacities are binary (GiB); results are decimal GB",
    ("cache_capacity", "state_per_request_gb"): "the lab converts MB to GB by dividing by 1024",
    ("cache_capacity", "max_concurrent"): "whole requests only: round down",
    ("cold_start_latency", "exposed_first_request_ms"): "a warm pool protects a fraction "
                                                        "warm/scale-out of first requests",
    ("cold_start_latency", "effective_bandwidth_gbs"): "the slower of storage and interconnect",
    ("cold_start_latency", "protected_fraction"): "warm pool over scale-out, capped at 1",
    ("quantity_to_float", None): "convert with the quantity's own units; fall back to the "
                                 "default when that fails",
    ("serving_track_profile", "memory_capacity_gb"): "GiB and GB differ by 7.4 %",
    ("serving_track_profile", "interconnect_bandwidth_gbs"): "Gbps is bits per second, "
                                                             "GB/s is bytes",
    ("serving_track_profile", "storage_bandwidth_gbs"): "fall back to memory bandwidth when "
                                                        "the hardware has no storage",
    ("serving_track_profile", "battery_wh"): "no battery is None, not 0",
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
