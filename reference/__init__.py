"""Reference implementation of the serving lab: pure functions and frozen results."""

from reference.batching import batching_tax, serve
from reference.capacity import cache_capacity, transformer_state_gb
from reference.coldstart import cold_start_latency
from reference.profile import quantity_to_float, serving_track_profile
from reference.queueing import erlang_c, queueing_latency
from reference.results import (
    BatchingTaxResult,
    CacheCapacityResult,
    ColdStartResult,
    QueueingResult,
    ServeResult,
    ServingTrackProfile,
)
from reference.tails import mmc_p99_ms as exact_p99_ms

__all__ = [
    "BatchingTaxResult",
    "CacheCapacityResult",
    "ColdStartResult",
    "QueueingResult",
    "ServeResult",
    "ServingTrackProfile",
    "batching_tax",
    "cache_capacity",
    "cold_start_latency",
    "erlang_c",
    "exact_p99_ms",
    "queueing_latency",
    "quantity_to_float",
    "serve",
    "serving_track_profile",
    "transformer_state_gb",
]
