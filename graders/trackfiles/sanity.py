"""Warnings about a valid track whose own defaults cannot serve: an unstable queue, a model
that does not fit in memory, or an SLO that even a lone request misses. Each says the fix."""

from __future__ import annotations

import math

from graders.trackfiles.tracks import Track, display_path

#: The arrival rate, as a share of one replica's capacity, at which "light load" is judged.
LIGHT_LOAD_SHARE = 1e-6


def default_warnings(track: Track) -> list[str]:
    """One line per way the track's defaults cannot work, each with its fix; none for a
    track that serves at its defaults (raises like :meth:`Track.default_outputs`)."""
    import reference

    where = f"{display_path(track.path)}: at its [variant.defaults]"
    profile = track.reference_profile()
    outputs = track.default_outputs()
    warnings = []
    queue = outputs.queueing
    if not queue.stable:
        offered = profile.arrival_qps * profile.service_ms / 1000.0
        warnings.append(
            f"{where} the queue is unstable (utilization {queue.utilization:.4g} >= 1: "
            f"arrival_qps {profile.arrival_qps:g} x service_ms {profile.service_ms:g} / 1000 "
            f"/ replicas {profile.replicas}), so every latency is inf; set replicas = "
            f"{math.floor(offered) + 1} or more, or arrival_qps below "
            f"{1000.0 * profile.replicas / profile.service_ms:.4g} (unless the overload is "
            "the track's lesson, as in the lab's tail-latency trap)")
    cache = outputs.cache
    if cache.oom:
        per_device = profile.memory_capacity_gb
        needed = math.ceil((cache.weight_gb + cache.state_per_request_gb) / per_device) \
            if per_device > 0 else math.inf
        warnings.append(
            f"{where} the model is out of memory (max_concurrent {cache.max_concurrent}: "
            f"weights {cache.weight_gb:.4g} GB at precision_bytes {profile.precision_bytes:g} "
            f"and {cache.state_per_request_gb:.4g} GB of state per request do not fit in "
            f"{cache.total_memory_gb:.4g} GB); set devices_per_replica = {needed} or more, "
            "or lower precision_bytes, kv_precision_bytes or context_tokens")
    light = reference.queueing_latency(
        arrival_qps=LIGHT_LOAD_SHARE * 1000.0 / profile.service_ms if profile.service_ms > 0
        else 0.0, service_ms=profile.service_ms, replicas=profile.replicas,
        service_cv=profile.service_cv, slo_ms=profile.slo_ms)
    if not light.slo_ok:
        warnings.append(
            f"{where} p99 exceeds slo_ms {profile.slo_ms:g} at every load (even a lone "
            f"request's p99 is {light.p99_latency_ms:.4g} ms, its service_ms "
            f"{profile.service_ms:g}); set slo_ms above {light.p99_latency_ms:.4g}, or lower "
            "service_ms")
    return warnings
