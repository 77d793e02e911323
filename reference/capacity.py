"""KV/state cache capacity: how many requests fit in memory beside the weights."""

from __future__ import annotations

import math

from reference.domain import at_least, finite
from reference.results import CacheCapacityResult, ServingTrackProfile

#: The lab divides MB by 1024 to get GB; kept on purpose.
MB_PER_GB = 1024.0


def transformer_state_gb(model: object, context_tokens: int, kv_bytes: float) -> float | None:
    """KV-cache size of one request in decimal GB, or ``None`` for a non-transformer model.

    ``2 * layers * hidden_dim * context_tokens * kv_bytes / 1e9``; grouped-query
    attention is ignored.
    """
    layers = getattr(model, "layers", None)
    hidden_dim = getattr(model, "hidden_dim", None)
    if not layers or not hidden_dim:
        return None
    tokens = at_least("context_tokens", context_tokens, 0)
    kv = at_least("kv_bytes", kv_bytes, 0.0)
    return 2.0 * float(layers) * float(hidden_dim) * tokens * kv / 1e9


def cache_capacity(
    profile: ServingTrackProfile,
    model: object,
    *,
    context_tokens: int,
    precision_bytes: float,
    devices_per_replica: int = 1,
    kv_precision_bytes: float | None = None,
) -> CacheCapacityResult:
    """Concurrent requests whose state fits beside the weights on one replica."""
    tokens = at_least("context_tokens", context_tokens, 0)
    precision = at_least("precision_bytes", precision_bytes, 0.0)
    devices = finite("devices_per_replica", devices_per_replica)
    total_gb = max(0.0, devices * profile.memory_capacity_gb)
    weight_gb = max(0.0, profile.model_params_b * precision)
    kv_bytes = profile.kv_precision_bytes if kv_precision_bytes is None else kv_precision_bytes
    state_gb = transformer_state_gb(model, context_tokens, kv_bytes)
    if state_gb is None:
        if profile.state_mb_per_request is not None:
            state_gb = profile.state_mb_per_request / MB_PER_GB
        else:
            state_gb = max(0.001, 0.1 * weight_gb)
    available_gb = max(0.0, total_gb - weight_gb)
    max_concurrent = math.floor(available_gb / state_gb) if state_gb > 0 else 0
    return CacheCapacityResult(
        total_memory_gb=total_gb,
        weight_gb=weight_gb,
        state_per_request_gb=state_gb,
        available_gb=available_gb,
        max_concurrent=max_concurrent,
        oom=max_concurrent < 1,
        state_kind=profile.state_kind,
        context_tokens=int(tokens),
    )
