"""``graders tracks new|show|check``: create, print and validate track files."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import math
import os
import sys
import tempfile
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from types import MappingProxyType

from graders.errors import GraderError, TrackError
from graders.reality.curves import RealityCurve
from graders.reality.table import error_text, real_text
from graders.trackfiles.sanity import default_warnings
from graders.trackfiles.tracks import (
    Track,
    default_tracks_dir,
    display_path,
    load_track,
    load_tracks,
    track_problems,
)

USAGE_ERROR = 2

#: Unit printed after each profile field that has one.
PROFILE_UNITS: Mapping[str, str] = MappingProxyType({
    "model_params_b": "B params", "memory_capacity_gb": "GB", "memory_bandwidth_gbs": "GB/s",
    "storage_bandwidth_gbs": "GB/s", "interconnect_bandwidth_gbs": "GB/s", "tdp_w": "W",
    "battery_wh": "Wh", "arrival_qps": "req/s", "service_ms": "ms", "slo_ms": "ms",
    "context_tokens": "tokens", "state_mb_per_request": "MB", "precision_bytes": "bytes",
    "kv_precision_bytes": "bytes", "deserialize_gbs": "GB/s", "runtime_init_ms": "ms",
    "warmup_ms": "ms",
})


def run_new(args: argparse.Namespace) -> int:
    """Write ``<tracks>/<id>.toml`` from MLSysIM refs, or print it with ``--stdout``."""
    from graders.trackfiles.generate import generate_track_toml

    if args.list_refs:
        print_accepted_refs()
        return 0
    missing = [flag for flag, value in (("--id", args.track_id), ("--hardware", args.hardware),
                                        ("--model", args.model)) if not value]
    if missing:
        raise TrackError(f"'graders tracks new' needs {', '.join(missing)}; "
                         "'graders tracks new --list' prints the MLSysIM refs it accepts")
    settings = parse_settings(args.settings)
    if args.stdout:
        sys.stdout.write(generate_track_toml(args.track_id, args.hardware, args.model, settings))
        _warn(slo_warning(settings, f"{args.track_id}.toml"))
        return 0
    folder = _folder(args.tracks)
    if not folder.is_dir():
        raise TrackError(f"tracks folder {display_path(folder)} does not exist; create it "
                         "or pass --tracks DIR with an existing folder")
    target = folder / f"{args.track_id}.toml"
    if target.exists() and not args.force:
        raise TrackError(f"{display_path(target)} already exists; pass --force to overwrite it "
                         "or pick another --id")
    _check_id_unused(folder, args.track_id, target)
    text = generate_track_toml(args.track_id, args.hardware, args.model, settings)
    _write_atomically(target, text)
    print(f"wrote {display_path(target)}; see it with 'graders tracks show {args.track_id}'")
    _warn(slo_warning(settings, display_path(target)))
    for warning in default_warnings(load_track(target)):
        print(f"graders: warning: {warning}", file=sys.stderr)
    return 0


def slo_warning(settings: Mapping[str, str], name: str) -> str | None:
    """The warning for a new track written without its own SLO (``--set slo_ms``): it
    takes the lab's default, which is no track's own; None when slo_ms was given."""
    if "slo_ms" in settings:
        return None
    from reference.profile import DEFAULT_FIELDS

    default = DEFAULT_FIELDS["slo_ms"][1]
    return (f"no --set slo_ms: {name} takes the lab's default slo_ms = {default:g} ms, but "
            "every track needs its own SLO; pass --set slo_ms=MS (or edit "
            f"variant.defaults.slo_ms in {name})")


def _warn(warning: str | None) -> None:
    if warning is not None:
        print(f"graders: warning: {warning}", file=sys.stderr)


def print_accepted_refs() -> None:
    """Print the MLSysIM refs ``graders tracks new`` accepts, one per line with its name."""
    from graders.trackfiles.generate import accepted_refs

    for what, refs in accepted_refs().items():
        print(f"--{what} (MLSysIM {what} refs accepted):")
        width = max((len(ref) for ref, _ in refs), default=0)
        for ref, name in refs:
            print(f"  {ref.ljust(width)}  {name}")
    print("\nExample: graders tracks new --id my_track --hardware Hardware.Cloud.H100 "
          "--model Models.Language.Llama2_70B --set slo_ms=200")


def run_show(args: argparse.Namespace) -> int:
    """Print each track's profile and the reference's outputs at its defaults."""
    from graders.reality.store import MISSING_TEXT, load_reality, missing_reasons

    tracks = load_tracks(_folder(args.tracks))
    reality = load_reality(tracks)
    if args.track_id is not None:
        tracks = (_find(tracks, args.track_id),)
    missing = missing_reasons(tracks, reality)
    print("\n\n".join("\n".join(show_lines(track, reality.get(track.track_id),
                                            MISSING_TEXT.get(missing.get(track.track_id, ""))))
                       for track in tracks))
    return 0


def run_check(args: argparse.Namespace) -> int:
    """Validate every track file and compute its outputs: one ``ok`` line per good file on
    stdout, one ``graders: error:`` line per problem on stderr (every file is checked), and
    one ``graders: warning:`` line, with its fix, per way a good file's defaults cannot
    serve (:func:`graders.trackfiles.sanity.default_warnings`; the exit code stays 0)."""
    folder = _folder(args.tracks)
    files = sorted(folder.glob("*.toml")) if folder.is_dir() else []
    if not files:
        load_tracks(folder)  # raises the folder's one-line error
    problems = 0
    seen: dict[str, Path] = {}
    for path in files:
        track, found = track_problems(path)
        if track is not None:
            try:
                track.default_outputs()
            except (GraderError, ValueError, ArithmeticError) as error:
                found = [str(error)]
        for problem in found:
            print(f"graders: error: {problem}", file=sys.stderr)
        problems += len(found)
        if track is None or found:
            continue
        if track.track_id in seen:
            print(f"graders: error: {display_path(path)}: track.id {track.track_id!r} is "
                  f"already used by {display_path(seen[track.track_id])}; track ids must be "
                  "unique, rename one of them", file=sys.stderr)
            problems += 1
            continue
        seen[track.track_id] = path
        print(f"ok  {track.track_id}  {display_path(path)}")
        for warning in default_warnings(track):
            print(f"graders: warning: {warning}", file=sys.stderr)
    return USAGE_ERROR if problems else 0


def parse_settings(items: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` texts from ``--set`` as a mapping; each key at most once."""
    settings: dict[str, str] = {}
    for item in items:
        key, equals, value = item.partition("=")
        key = key.strip()
        if not equals or not key:
            raise TrackError(f"--set {item!r} must be KEY=VALUE, e.g. --set arrival_qps=40")
        if key in settings:
            raise TrackError(f"--set {key} is given twice; keep one of them")
        settings[key] = value
    return settings


def show_lines(track: Track, reality: Sequence[RealityCurve] | None = None,
               why_missing: str | None = None) -> list[str]:
    """The lines ``graders tracks show`` prints for one track; beside each formula p99 the
    exact or simulated one from ``reality`` (the track's reality curves), when built, else
    ``why_missing`` (see ``reality.store.MISSING_TEXT``)."""
    profile = track.reference_profile()
    rows = [("hardware", f"{profile.hardware_name} ({profile.hardware_ref})"),
            ("model", f"{profile.model_name} ({profile.model_ref})")]
    skip = {"track_id", "label", "hardware_ref", "model_ref", "hardware_name", "model_name",
            "source_refs"}
    from reference.profile import DEFAULT_FIELDS

    given = track.variant.defaults
    fallbacks = {  # profile fields the hardware may leave out, and what stands in for them
        "storage_bandwidth_gbs": ("storage", "memory bandwidth"),
        "interconnect_bandwidth_gbs": ("interconnect", "memory bandwidth"),
        "tdp_w": ("tdp", "0")}

    def defaulted(name: str) -> str:
        key = DEFAULT_FIELDS.get(name, (None, None))[0]
        if key is not None and key not in given:
            return "  (lab default)"
        if name in fallbacks and name not in given:
            part, stand_in = fallbacks[name]
            if getattr(track.hardware, part) is None:
                return f"  (lab default: {stand_in}, the track has no hardware.{part})"
        return ""

    rows += [(f.name, _with_unit(f.name, getattr(profile, f.name)) + defaulted(f.name))
             for f in fields(profile) if f.name not in skip]
    out = track.default_outputs()
    q, b, c, s = out.queueing, out.batching, out.cache, out.cold_start
    real = {curve.function: curve.default for curve in reality or ()}

    def beside(function: str) -> str:
        point = real.get(function)
        if point is None:
            from graders.reality.store import MISSING_TEXT

            return f"; no real p99: {why_missing or MISSING_TEXT['not built']}"
        return f"; real p99 {real_text(point)}, formula error {error_text(point)}"

    outputs = [
        ("queueing", f"utilization {_ratio(q.utilization)}, p99 {_amount(q.p99_latency_ms)} ms, "
                     f"slo_ok {q.slo_ok}" + ("" if q.stable else " (unstable)")
                     + beside("queueing_latency")),
        ("batching", f"total_p99 {_amount(b.total_p99_ms)} ms, slo_ok {b.slo_ok}"
                     + beside("batching_tax")),
        ("cache", f"state {_amount(c.state_per_request_gb)} GB/request, "
                  f"max_concurrent {c.max_concurrent}, oom {c.oom}"),
        ("cold start", f"cold {_amount(s.cold_start_ms)} ms, exposed "
                       f"{_amount(s.exposed_first_request_ms)} ms, exceeds_slo {s.exceeds_slo}"),
    ]
    width = max(len(name) for name, _ in rows)
    return [f"{track.track_id}: {track.label} ({track.category}), {display_path(track.path)}",
            "  profile", *_table(rows, width),
            "  outputs at the track's defaults", *_table(outputs, width)]


# --- helpers -------------------------------------------------------------------------


def _folder(tracks: str | None) -> Path:
    return Path(tracks) if tracks else default_tracks_dir()


def _find(tracks: Sequence[Track], track_id: str) -> Track:
    for track in tracks:
        if track.track_id == track_id:
            return track
    known = [track.track_id for track in tracks]
    close = difflib.get_close_matches(track_id, known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise TrackError(f"unknown track id {track_id!r}; {hint}known ids: {', '.join(known)}")


def _table(rows: Sequence[tuple[str, str]], width: int) -> Iterator[str]:
    return (f"    {name.ljust(width)}  {value}" for name, value in rows)


def _with_unit(name: str, value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, tuple):
        return ", ".join(str(item) for item in value) or "none"
    text = _amount(value) if isinstance(value, float) else str(value)
    unit = PROFILE_UNITS.get(name)
    return f"{text} {unit}" if unit else text


def _amount(value: float) -> str:
    """At most 3 decimals from 1 up, 4 significant digits below 1: 132.869, 0.0625, inf."""
    if not math.isfinite(value):
        return str(value)
    if value == 0 or abs(value) >= 1:
        return f"{value:.3f}".rstrip("0").rstrip(".")
    return f"{value:.4g}"


def _ratio(value: float) -> str:
    return f"{value:.5g}"


def _check_id_unused(folder: Path, track_id: str, target: Path) -> None:
    """Refuse an id that another file in ``folder`` already defines."""
    for other in sorted(folder.glob("*.toml")):
        if other.name == target.name:
            continue
        try:
            data = tomllib.loads(other.read_text(encoding="utf-8-sig"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue
        track = data.get("track")
        if isinstance(track, dict) and track.get("id") == track_id:
            raise TrackError(f"{display_path(other)} already defines track id {track_id!r}; "
                             "pick another --id")


def _write_atomically(target: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``target``, then rename it into place."""
    temporary: str | None = None
    try:
        descriptor, temporary = tempfile.mkstemp(prefix=f".{target.stem}.", suffix=".tmp",
                                                 dir=target.parent)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, target)
    except OSError as error:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        raise TrackError(f"cannot write {display_path(target)} ({error.strerror or error}); "
                         "check the folder's permissions") from error
