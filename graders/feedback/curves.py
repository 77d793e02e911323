"""The curves of the feedback report: per track, one input swept and the fields to plot.

Sweeps are built only from a track's public data and the lab's defaults, never from
hidden case generators, so every point of every curve may be shown to the student.
Case ids are unique across tracks and functions (``curve-<track>-<sweep>-<x>``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from graders.grading.cases import Case
from graders.reality.curves import BATCHES
from graders.reality.curves import LOADS as STABLE_LOADS

if TYPE_CHECKING:
    from graders.trackfiles.tracks import Track

Scale: TypeAlias = Literal["linear", "log", "symlog"]

#: Loads, as fractions of the fleet's capacity, up to and past saturation (the stable ones
#: are the reality curves' loads, so that both are drawn at the same inputs).
LOADS = (*STABLE_LOADS, 1.0, 1.1, 1.25)
CONTEXTS = tuple(2**power for power in range(7, 19))  # 128 to 262,144 tokens
BANDWIDTHS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0)
#: Scale-out of the warm-pool sweep, unless the track's own is larger.
WARM_POOL_SCALE_OUT = 4
#: The lab's pass mark for the throughput gain of batching by 32 (lab spec section 2).
GAIN_PASS_MARK = 2.0
GAIN_PASS_BATCH = 32
#: The pass mark's entry in the legend of the throughput-gain plot (the page explains it).
PASS_MARK_LABEL = f"lab pass mark: gain above {GAIN_PASS_MARK:g}x"
#: What the pass mark is, said under the plots.
PASS_MARK_TEXT = (f"The dash-dot line of the throughput-gain plot, “{PASS_MARK_LABEL}”, "
                  f"is the lab's pass mark: from a batch of {GAIN_PASS_BATCH} on, batching "
                  f"must more than double throughput ({GAIN_PASS_MARK:g}x the unbatched "
                  "rate); a point of yours at or under it is marked as an invariant broken.")


@dataclass(frozen=True)
class Guide:
    """A reference line on a panel: ``axis`` "x" is vertical, "y" horizontal."""

    axis: Literal["x", "y"]
    value: float
    label: str


@dataclass(frozen=True)
class Panel:
    """One plot area: result fields drawn against the sweep's input."""

    fields: tuple[str, ...]
    y_label: str
    y_scale: Scale = "linear"
    guides: tuple[Guide, ...] = ()


@dataclass(frozen=True)
class Sweep:
    """One input of one function swept on one track, one case per x value."""

    track_id: str
    function: str
    name: str
    x_label: str
    xs: tuple[float, ...]
    cases: tuple[Case, ...]
    panels: tuple[Panel, ...]
    x_scale: Scale = "linear"
    #: The track's service time, the floor of every latency (0 where it does not apply).
    service_ms: float = 0.0

    @property
    def fields(self) -> tuple[str, ...]:
        """Every plotted field, each once."""
        return tuple(dict.fromkeys(f for panel in self.panels for f in panel.fields))


#: The plotted functions, in the order the report shows them (one-panel figures first).
PLOTTED_FUNCTIONS = ("queueing_latency", "cache_capacity", "batching_tax", "cold_start_latency")


def _case(track: Track, sweep: str, x: float | str, function: str, args: tuple[Any, ...],
          kwargs: dict[str, Any]) -> Case:
    shown = f"{x:g}" if isinstance(x, float) else x
    return Case(f"curve-{track.track_id}-{sweep}-{shown}", function, args, kwargs,
                track_id=track.track_id)


def load_sweep(track: Track) -> Sweep:
    """queueing_latency from light load to past saturation: p99 and p999."""
    p = track.reference_profile()
    capacity = p.replicas * 1000.0 / p.service_ms
    base = {"service_ms": p.service_ms, "replicas": p.replicas, "service_cv": p.service_cv,
            "slo_ms": p.slo_ms}
    xs = tuple(rho * capacity for rho in LOADS)
    cases = tuple(_case(track, "load", rho, "queueing_latency", (), {"arrival_qps": x, **base})
                  for rho, x in zip(LOADS, xs, strict=True))
    guides = (Guide("x", capacity, f"saturation ({capacity:.4g} req/s)"),
              Guide("y", p.slo_ms, f"SLO {p.slo_ms:g} ms"))
    panel = Panel(("p99_latency_ms", "p999_latency_ms"), "latency (ms)", "log", guides)
    return Sweep(track.track_id, "queueing_latency", "load", "arrival rate (req/s)", xs, cases,
                 (panel,), service_ms=p.service_ms)


def batch_sweep(track: Track) -> Sweep:
    """batching_tax at batch sizes 1 to 128: total p99 and throughput gain."""
    p = track.reference_profile()
    base = {"arrival_qps": p.arrival_qps, "service_ms": p.service_ms, "slo_ms": p.slo_ms,
            "efficiency_gain": p.batch_efficiency_gain, "replicas": p.replicas,
            "service_cv": p.service_cv}
    cases = tuple(_case(track, "batch", str(batch), "batching_tax", (),
                        {"batch_size": batch, **base}) for batch in BATCHES)
    panels = (Panel(("total_p99_ms",), "total p99 (ms)", "log",
                    (Guide("y", p.slo_ms, f"SLO {p.slo_ms:g} ms"),)),
              Panel(("throughput_gain",), "throughput gain (x)", "log",
                    (Guide("y", GAIN_PASS_MARK, PASS_MARK_LABEL),)))
    return Sweep(track.track_id, "batching_tax", "batch", "batch size",
                 tuple(float(b) for b in BATCHES), cases, panels, "log")


def context_sweep(track: Track) -> Sweep:
    """cache_capacity at context lengths 128 to 262,144 tokens: max_concurrent."""
    p = track.reference_profile()
    kwargs: dict[str, Any] = {"precision_bytes": p.precision_bytes,
                              "devices_per_replica": p.default_devices_per_replica,
                              "kv_precision_bytes": p.kv_precision_bytes}
    cases = tuple(_case(track, "context", str(tokens), "cache_capacity", (p, track.model),
                        {"context_tokens": tokens, **kwargs}) for tokens in CONTEXTS)
    panel = Panel(("max_concurrent",), "max concurrent requests", "symlog")
    return Sweep(track.track_id, "cache_capacity", "context", "context length (tokens)",
                 tuple(float(t) for t in CONTEXTS), cases, (panel,), "log")


def bandwidth_sweep(track: Track) -> Sweep:
    """cold_start_latency at storage bandwidths 0.25 to 256 GB/s: cold and exposed."""
    p = track.reference_profile()
    kwargs = {"precision_bytes": p.precision_bytes, "warm_pool_replicas": p.warm_pool_replicas,
              "scale_out_replicas": p.scale_out_replicas}
    cases = tuple(_case(track, "bandwidth", bandwidth, "cold_start_latency", (p,),
                        {"storage_bandwidth_gbs": bandwidth, **kwargs})
                  for bandwidth in BANDWIDTHS)
    guides = (Guide("y", p.service_ms, f"service time {p.service_ms:g} ms"),)
    panel = Panel(("cold_start_ms", "exposed_first_request_ms"), "latency (ms)", "log", guides)
    return Sweep(track.track_id, "cold_start_latency", "bandwidth",
                 "storage bandwidth (GB/s)", BANDWIDTHS, cases, (panel,), "log", p.service_ms)


def warm_pool_sweep(track: Track) -> Sweep:
    """cold_start_latency with warm pools of 0 to past the scale-out: exposed latency."""
    p = track.reference_profile()
    scale_out = max(WARM_POOL_SCALE_OUT, p.scale_out_replicas)
    pools = tuple(range(scale_out + 2))
    cases = tuple(_case(track, "warm-pool", f"{pool}-of-{scale_out}", "cold_start_latency",
                        (p,), {"precision_bytes": p.precision_bytes, "warm_pool_replicas": pool,
                               "scale_out_replicas": scale_out}) for pool in pools)
    guides = (Guide("y", p.service_ms, f"service time {p.service_ms:g} ms"),
              Guide("x", float(scale_out), f"scale-out {scale_out}"))
    panel = Panel(("exposed_first_request_ms",), "exposed latency (ms)", "log", guides)
    return Sweep(track.track_id, "cold_start_latency", "warm-pool",
                 f"warm pool (replicas, of a scale-out of {scale_out})",
                 tuple(float(pool) for pool in pools), cases, (panel,), service_ms=p.service_ms)


def track_sweeps(track: Track) -> list[Sweep]:
    """Every sweep of one track, grouped by function in :data:`PLOTTED_FUNCTIONS` order."""
    return [load_sweep(track), context_sweep(track), batch_sweep(track),
            bandwidth_sweep(track), warm_pool_sweep(track)]


def curve_cases(track: Track) -> list[Case]:
    """Every case of the report's curves for one track (all visible by construction)."""
    return [case for sweep in track_sweeps(track) for case in sweep.cases]
