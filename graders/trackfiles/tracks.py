"""Track files: load ``tracks/*.toml`` into MLSysIM-shaped objects, checking every field.

A track file has four tables: ``[track]`` (id, label, category), ``[hardware]`` and
``[model]`` (MLSysIM facts; quantities are strings with units, such as ``"80 GiB"``) and
``[variant]`` (metrics, ``[variant.assumptions]`` and the lab's ``[variant.defaults]``).
Every error is a :class:`~graders.errors.TrackError` naming the file, the field, the rule
and the fix.
"""

from __future__ import annotations

import difflib
import functools
import json
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from graders.errors import TrackError
from graders.units import registry

if TYPE_CHECKING:
    import pint

    import reference

#: A quantity of the grader's registry (``graders.units.registry()``).
Quantity: TypeAlias = "pint.Quantity[Any]"
QuantityKind = Literal["data size", "bandwidth", "power", "energy", "parameter count"]
FieldKind = Literal["text", "text list", "whole number", "number", "table"] | QuantityKind
Bound = Literal["any", "positive", "non-negative"]

#: A leading byte-order mark, as some editors save UTF-8 (TOML does not allow one).
BYTE_ORDER_MARK = "\ufeff"
TRACK_ID_PATTERN = re.compile(r"[a-z][a-z0-9_]*")
TRACK_ID_RULE = "a lowercase identifier (a letter, then letters, digits or _), such as cloud_fleet"


@dataclass(frozen=True)
class _Kind:
    """What a quantity kind means: an article phrase, an example, root units and a fix."""

    phrase: str
    example: str
    root: str
    units_hint: str


QUANTITY_KINDS: Mapping[str, _Kind] = MappingProxyType({
    "data size": _Kind("a data size", "80 GiB", "byte", "a byte or bit unit: B, kB, MB, GB, "
                       "TB or KiB, MiB, GiB, TiB (bytes), or bit, kbit, Mbit, Gbit, also "
                       "written b, kb, Mb, Gb (bits)"),
    "bandwidth": _Kind("a bandwidth", "3.35 TB/s", "byte/s",
                       "a data rate unit: a byte or bit unit (GB, GiB, Gbit or Gb, ...) per "
                       "time unit (/s, /ms, ...), or Gbps, Mbps, GBps"),
    "power": _Kind("a power", "700 W", "W", "a power unit such as W, mW or kW"),
    "energy": _Kind("an energy", "15 Wh", "Wh", "an energy unit such as Wh, mWh or J"),
    "parameter count": _Kind("a parameter count", "7e10 param", "param",
                             "a bare number or the unit param"),
})


@dataclass(frozen=True)
class _Field:
    """One key of a track file: its kind, an example, whether it is required, its bound."""

    kind: FieldKind
    example: str = ""
    required: bool = False
    bound: Bound = "any"
    table: Mapping[str, _Field] | None = None


def _text(example: str, required: bool = True) -> _Field:
    return _Field("text", json.dumps(example), required)


def _whole(example: int, bound: Bound = "positive") -> _Field:
    return _Field("whole number", str(example), False, bound)


def _number(example: float, bound: Bound = "positive") -> _Field:
    return _Field("number", str(example), False, bound)


def _quantity(kind: QuantityKind, required: bool = True) -> _Field:
    return _Field(kind, json.dumps(QUANTITY_KINDS[kind].example), required, "positive")


def _table(fields: Mapping[str, _Field], required: bool = True) -> _Field:
    return _Field("table", "", required, table=MappingProxyType(dict(fields)))


#: ``[variant.defaults]`` keys: the lab defaults the reference reads, plus three more.
DEFAULT_KEYS: Mapping[str, _Field] = MappingProxyType({
    "arrival_qps": _number(500, "non-negative"),
    "service_ms": _number(25),
    "replicas": _whole(8),
    "slo_ms": _Field("number", "200", True, "positive"),  # a track's own: no lab default
    "service_cv": _number(1.0, "non-negative"),
    "batch_size": _whole(32),
    "batch_efficiency_gain": _number(6.4),
    "context_tokens": _whole(4096, "non-negative"),
    "state_kind": _text("KV cache", required=False),
    "state_mb_per_request": _number(64),
    "precision_bytes": _number(2),
    "kv_precision_bytes": _number(2),
    "devices_per_replica": _whole(8),
    "deserialize_gbs": _number(20),
    "runtime_init_ms": _number(800, "non-negative"),
    "warmup_ms": _number(500, "non-negative"),
    "warm_pool_replicas": _whole(2, "non-negative"),
    "scale_out_replicas": _whole(4),
    "storage_bandwidth_gbs": _number(7.0),
    "interconnect_bandwidth_gbs": _number(64.0),
    "validation_tests": _Field("text list", '["load test", "p99 SLA canary"]'),
})

#: The whole file format, table by table.
SCHEMA: Mapping[str, _Field] = MappingProxyType({
    "track": _table({
        "id": _text("cloud_fleet"),
        "label": _text("Cloud Fleet"),
        "category": _text("Cloud"),
    }),
    "hardware": _table({
        "ref": _text("Hardware.Cloud.H100"),
        "name": _text("NVIDIA H100"),
        "tdp": _quantity("power", required=False),
        "battery_capacity": _quantity("energy", required=False),
        "memory": _table({"capacity": _quantity("data size"),
                          "bandwidth": _quantity("bandwidth")}),
        "storage": _table({"bandwidth": _quantity("bandwidth")}, required=False),
        "interconnect": _table({"bandwidth": _quantity("bandwidth")}, required=False),
    }),
    "model": _table({
        "ref": _text("Models.Language.Llama2_70B"),
        "name": _text("Llama-2-70B"),
        "parameters": _quantity("parameter count"),
        "layers": _whole(80),
        "hidden_dim": _whole(8192),
    }),
    "variant": _table({
        "primary_metric": _text("p99 latency"),
        "guardrail_metric": _text("cost per request"),
        "assumptions": _table({"serving_policy": _text("continuous batching", False)}, False),
        "defaults": _table(DEFAULT_KEYS),
    }),
})


@dataclass(frozen=True)
class TrackProfile:
    """MLSysIM-shaped profile: the track's id and label."""

    track_id: str
    label: str


@dataclass(frozen=True)
class TrackVariant:
    """MLSysIM-shaped variant: refs, read-only lab defaults and assumptions, metrics."""

    hardware_ref: str
    model_ref: str
    defaults: Mapping[str, Any]
    assumptions: Mapping[str, Any]
    primary_metric: str
    guardrail_metric: str


@dataclass(frozen=True)
class MemorySpec:
    """Device memory: capacity (a data size) and bandwidth."""

    capacity: Quantity
    bandwidth: Quantity


@dataclass(frozen=True)
class LinkSpec:
    """A storage or interconnect link: its bandwidth."""

    bandwidth: Quantity


@dataclass(frozen=True)
class HardwareSpec:
    """MLSysIM-shaped hardware node; storage, interconnect, tdp and battery may be None."""

    ref: str
    name: str
    memory: MemorySpec
    storage: LinkSpec | None
    interconnect: LinkSpec | None
    tdp: Quantity | None
    battery_capacity: Quantity | None


@dataclass(frozen=True)
class ModelSpec:
    """MLSysIM-shaped model: parameters in ``param``; layers and hidden_dim may be None."""

    ref: str
    name: str
    parameters: Quantity
    layers: int | None
    hidden_dim: int | None


@dataclass(frozen=True)
class DefaultOutputs:
    """The reference's outputs at a track's defaults (lab-spec section 3)."""

    queueing: reference.QueueingResult
    batching: reference.BatchingTaxResult
    cache: reference.CacheCapacityResult
    cold_start: reference.ColdStartResult


@dataclass(frozen=True)
class Track:
    """One validated track file, as MLSysIM-shaped objects plus the file's read-only data."""

    track_id: str
    label: str
    category: str
    path: Path
    profile: TrackProfile
    variant: TrackVariant
    hardware: HardwareSpec
    model: ModelSpec
    raw: Mapping[str, Any]
    #: The flat profile given by a golden file (the student bundle has no reference).
    given_profile: Any = field(default=None, compare=False, repr=False)

    def registry_objects(self) -> tuple[TrackProfile, TrackVariant, HardwareSpec, ModelSpec]:
        """The four inputs of ``serving_track_profile``: profile, variant, hardware, model."""
        return self.profile, self.variant, self.hardware, self.model

    def reference_profile(self) -> reference.ServingTrackProfile:
        """The reference's flat profile of this track: from the golden file when one was
        given, else computed by the reference (once; it is immutable)."""
        if self.given_profile is not None:
            return self.given_profile  # type: ignore[no-any-return]
        return self._flat_profile

    @functools.cached_property
    def _flat_profile(self) -> reference.ServingTrackProfile:
        import reference

        return reference.serving_track_profile(*self.registry_objects())

    def with_profile(self, profile: Any) -> Track:
        """This track with its flat profile given (by a golden file)."""
        return replace(self, given_profile=profile)

    def raw_dict(self) -> dict[str, Any]:
        """A mutable deep copy of ``raw`` with plain dicts and lists, e.g. for JSON."""
        return _thaw(self.raw)  # type: ignore[no-any-return]

    def default_outputs(self) -> DefaultOutputs:
        """Queueing, batching, cache and cold start computed by the reference at the defaults."""
        profile = self.reference_profile()
        try:
            return _outputs(profile, self.model)
        except ValueError as error:
            raise TrackError(f"{display_path(self.path)}: the lab defaults are outside the "
                             f"reference's domain: {error}; fix [variant.defaults]") from error


def _outputs(p: reference.ServingTrackProfile, model: ModelSpec) -> DefaultOutputs:
    import reference

    return DefaultOutputs(
        queueing=reference.queueing_latency(
            arrival_qps=p.arrival_qps, service_ms=p.service_ms, replicas=p.replicas,
            service_cv=p.service_cv, slo_ms=p.slo_ms),
        batching=reference.batching_tax(
            batch_size=p.batch_size, arrival_qps=p.arrival_qps, service_ms=p.service_ms,
            slo_ms=p.slo_ms, efficiency_gain=p.batch_efficiency_gain, replicas=p.replicas,
            service_cv=p.service_cv),
        cache=reference.cache_capacity(
            p, model, context_tokens=p.context_tokens, precision_bytes=p.precision_bytes,
            devices_per_replica=p.default_devices_per_replica,
            kv_precision_bytes=p.kv_precision_bytes),
        cold_start=reference.cold_start_latency(
            p, precision_bytes=p.precision_bytes, warm_pool_replicas=p.warm_pool_replicas,
            scale_out_replicas=p.scale_out_replicas),
    )


# --- public loading API -----------------------------------------------------------------


def default_tracks_dir() -> Path:
    """The ``tracks/`` folder beside the ``graders`` package (a source checkout)."""
    directory = Path(__file__).resolve().parents[2] / "tracks"
    if not directory.is_dir():
        raise TrackError(f"no tracks folder at {directory}; pass --tracks DIR with the folder "
                         "of track TOML files")
    return directory


def load_tracks(directory: Path | str) -> tuple[Track, ...]:
    """Every ``*.toml`` track in ``directory``, sorted by track id; ids must be unique."""
    folder = Path(directory)
    if not folder.is_dir():
        raise TrackError(f"tracks folder {display_path(folder)} does not exist or is not a "
                         "folder; pass --tracks DIR with the folder of track TOML files")
    files = sorted(folder.glob("*.toml"))
    if not files:
        raise TrackError(f"tracks folder {display_path(folder)} holds no *.toml track files; "
                         "add one with 'graders tracks new'")
    by_id: dict[str, Track] = {}
    for path in files:
        track = load_track(path)
        if track.track_id in by_id:
            first = display_path(by_id[track.track_id].path)
            raise TrackError(f"{display_path(path)}: track.id {track.track_id!r} is already "
                             f"used by {first}; track ids must be unique, rename one of them")
        by_id[track.track_id] = track
    return tuple(by_id[track_id] for track_id in sorted(by_id))


def load_track(path: Path | str) -> Track:
    """Read and validate one track file."""
    file = Path(path)
    return load_track_text(_read(file), file)


def _read(file: Path) -> str:
    """The text of a track file; a leading byte-order mark is dropped."""
    try:
        return file.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as error:
        raise TrackError(f"{display_path(file)}: not UTF-8 text ({error.reason} at byte "
                         f"{error.start}); save the file as UTF-8") from error
    except OSError as error:
        raise TrackError(f"{display_path(file)}: cannot read the track file "
                         f"({error.strerror or error}); check the path") from error


def load_track_text(text: str, path: Path | str) -> Track:
    """Validate the TOML ``text`` of a track; ``path`` names it in messages and ``Track.path``.
    A :class:`TrackError` names the first problem (:func:`track_problems` lists them all)."""
    track, problems = _validated(text, Path(path))
    if track is None:
        raise TrackError(problems[0])
    return track


def track_problems(path: Path | str) -> tuple[Track | None, list[str]]:
    """The track in the file ``path`` and every problem of it, each one line naming the
    file, the field, the rule and the fix (no track when there is one)."""
    file = Path(path)
    try:
        text = _read(file)
    except TrackError as error:
        return None, [str(error)]
    return _validated(text, file)


def _validated(text: str, file: Path) -> tuple[Track | None, list[str]]:
    source = display_path(file)
    try:
        data = tomllib.loads(text.removeprefix(BYTE_ORDER_MARK))
    except tomllib.TOMLDecodeError as error:
        return None, [f"{source}: not valid TOML: {error}; fix the syntax there"]
    problems: list[str] = []
    values = _check_table(data, SCHEMA, "", source, problems)
    track_id = values.get("track", {}).get("id")
    if isinstance(track_id, str) and not TRACK_ID_PATTERN.fullmatch(track_id):
        problems.append(f"{source}: track.id must be {TRACK_ID_RULE}, got {_show(track_id)}; "
                        f"rename it, e.g. {_show(_suggest_id(track_id))}")
    if problems:
        return None, problems
    return _build(values, _freeze(data), file), []


def parse_quantity(
    text: object, kind: QuantityKind, where: str, *, positive: bool = True
) -> Quantity:
    """``text`` as a quantity of ``kind`` from the shared registry, or a :class:`TrackError`.

    ``where`` prefixes the message, e.g. ``"tracks/x.toml: hardware.memory.capacity"``.
    Units are checked by name, since pint treats bytes, bits and params as dimensionless:
    a data size is in bytes or bits, a bandwidth in those per time (or baud, e.g. Gbps),
    a parameter count is a bare number or in ``param``/``count``.
    """
    meaning = QUANTITY_KINDS[kind]
    wanted = f"{where} must be {meaning.phrase} such as {json.dumps(meaning.example)}"
    shown = _show(text)
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise TrackError(f"{wanted}, got {shown}; write it as a quoted string")
    if kind in ("data size", "bandwidth") and isinstance(text, str):
        text = conventional_data_units(text)
    try:
        quantity = registry().Quantity(text)
    except Exception as error:  # pint raises many kinds of errors for unreadable text
        detail = str(error) or type(error).__name__
        raise TrackError(f"{wanted}, got {shown}, which pint cannot read ({detail}); write a "
                         f"number, a space and {meaning.units_hint}") from error
    if not _has_kind(quantity, kind):
        fix = ("add a unit" if _is_bare(quantity) else "use " + meaning.units_hint)
        raise TrackError(f"{wanted}, got {shown}; {fix}, e.g. {json.dumps(meaning.example)}")
    magnitude = quantity.magnitude
    if not isinstance(magnitude, int | float) or not math.isfinite(magnitude):
        raise TrackError(f"{wanted}, got {shown}; write a finite number")
    if positive and magnitude <= 0:
        raise TrackError(f"{where} must be greater than 0, got {shown}; use the real, "
                         "positive value")
    if kind == "parameter count" and _is_bare(quantity):
        return registry().Quantity(magnitude, "param")
    return quantity


#: A data unit as people write it: an optional prefix (``K`` for ``k`` too), then ``b``
#: (bits: pint reads ``Gb`` as gilbert and ``Mb`` as megabarn), ``Bps`` or ``B``.
_DATA_UNIT = re.compile(r"(?<![A-Za-z_])(K(?!i)|Ki|[kMGTPE]i?)?(Bps|b|B)(?![A-Za-z_])")


def conventional_data_units(text: str) -> str:
    """``text`` with data units spelled as people write them made pint's: ``Gb`` (and
    ``b``, ``kb``, ``Mb``, ...) is gigabits, ``GBps`` is GB/s, ``KB`` a kilobyte. Other
    spellings (``Gbps``, ``Gbit/s``, ``gigabyte/second``, ...) are left for pint to read."""

    def spelled(match: re.Match[str]) -> str:
        prefix = "k" if match[1] == "K" else match[1] or ""
        return prefix + {"b": "bit", "Bps": "B/s", "B": "B"}[match[2]]

    return _DATA_UNIT.sub(spelled, text)


def display_path(path: Path) -> str:
    """``path`` relative to the working directory when it lies inside it, else as given."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


# --- checking ------------------------------------------------------------------------


def _has_kind(quantity: Quantity, kind: QuantityKind) -> bool:
    if kind == "parameter count" and _is_bare(quantity):
        return True
    if _is_bare(quantity):
        return False
    _, root = registry().get_root_units(quantity.units)
    _, wanted = registry().get_root_units(registry().Unit(QUANTITY_KINDS[kind].root))
    return bool(root == wanted)


def _is_bare(quantity: Quantity) -> bool:
    return not dict(quantity.unit_items())


def _show(value: object) -> str:
    """A value as it would look in TOML: strings in double quotes."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_show(item) for item in value) + "]"
    if isinstance(value, Mapping):
        return "a table"
    return repr(value)


def _check_table(table: Mapping[str, Any], spec: Mapping[str, _Field], dotted: str,
                 source: str, problems: list[str]) -> dict[str, Any]:
    """Check every key of ``table`` (unknown, missing, each value), adding each problem
    to ``problems``; return the values that are right."""
    section = f"[{dotted}]" if dotted else "the top level"
    problems += [_unknown_key(key, spec, dotted, section, source)
                 for key in table if key not in spec]
    values: dict[str, Any] = {}
    for key, rule in spec.items():
        name = f"{dotted}.{key}" if dotted else key
        if key in table:
            try:
                values[key] = _check_value(table[key], rule, name, source, problems)
            except TrackError as error:
                problems.append(str(error))
        elif rule.required:
            problems.append(f"{source}: missing required key {name} "
                            f"({_describe(rule, name)}); add it to {section}")
    return values


def _describe(rule: _Field, name: str) -> str:
    if rule.kind == "table":
        return f"the table [{name}]"
    if rule.kind in QUANTITY_KINDS:
        phrase = QUANTITY_KINDS[rule.kind].phrase
    else:
        phrase = {"text": "a string", "text list": "a list of strings",
                  "whole number": "a whole number"}.get(rule.kind, "a number")
    return f"{phrase} such as {rule.example}"


def _unknown_key(key: str, spec: Mapping[str, _Field], dotted: str, section: str,
                 source: str) -> str:
    name = f"{dotted}.{key}" if dotted else key
    close = difflib.get_close_matches(key, list(spec), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    known = ", ".join(spec)
    return (f"{source}: unknown key {name}; {hint}the keys of {section} are: {known}; "
            "rename or remove it")


def _check_value(value: Any, rule: _Field, name: str, source: str,
                 problems: list[str]) -> Any:
    where = f"{source}: {name}"
    if rule.kind == "table":
        if not isinstance(value, Mapping):
            raise TrackError(f"{where} must be a table [{name}], got {_show(value)}; write "
                             f"it as a [{name}] section with its own keys")
        assert rule.table is not None
        return _check_table(value, rule.table, name, source, problems)
    if rule.kind in QUANTITY_KINDS:
        return parse_quantity(value, rule.kind, where)  # type: ignore[arg-type]
    if rule.kind == "text":
        return _check_text(value, rule, where)
    if rule.kind == "text list":
        return _check_text_list(value, rule, where)
    return _check_number(value, rule, where)


def _check_text(value: Any, rule: _Field, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise TrackError(f"{where} must be a non-empty string such as {rule.example}, "
                         f"got {_show(value)}; write it in double quotes")
    return value


def _check_text_list(value: Any, rule: _Field, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise TrackError(f"{where} must be a list of non-empty strings such as "
                         f"{rule.example}, got {_show(value)}; write a TOML array of strings")
    return tuple(value)


def _check_number(value: Any, rule: _Field, where: str) -> int | float:
    whole = rule.kind == "whole number"
    wanted = f"{where} must be {'a whole number' if whole else 'a number'} such as {rule.example}"
    number_types = int if whole else int | float
    if isinstance(value, bool) or not isinstance(value, number_types):
        if isinstance(value, str):
            fix = "write it without quotes"
        elif isinstance(value, float):
            fix = "drop the fractional part"
        else:
            fix = "write a plain number"
        raise TrackError(f"{wanted}, got {_show(value)}; {fix}")
    if not math.isfinite(value):
        raise TrackError(f"{wanted}, got {_show(value)}; write a finite number")
    if rule.bound == "positive" and value <= 0:
        raise TrackError(f"{where} must be greater than 0, got {_show(value)}; use a "
                         "positive value")
    if rule.bound == "non-negative" and value < 0:
        raise TrackError(f"{where} must be at least 0, got {_show(value)}; use 0 or more")
    return value


# --- building ------------------------------------------------------------------------


def _build(values: Mapping[str, Any], raw: Mapping[str, Any], path: Path) -> Track:
    track, hw, mdl, var = (values[k] for k in ("track", "hardware", "model", "variant"))
    track_id = track["id"]  # checked by _validated
    hardware = HardwareSpec(
        ref=hw["ref"], name=hw["name"],
        memory=MemorySpec(hw["memory"]["capacity"], hw["memory"]["bandwidth"]),
        storage=_link(hw.get("storage")), interconnect=_link(hw.get("interconnect")),
        tdp=hw.get("tdp"), battery_capacity=hw.get("battery_capacity"),
    )
    model = ModelSpec(ref=mdl["ref"], name=mdl["name"], parameters=mdl["parameters"],
                      layers=mdl.get("layers"), hidden_dim=mdl.get("hidden_dim"))
    variant = TrackVariant(
        hardware_ref=hardware.ref, model_ref=model.ref,
        defaults=MappingProxyType(dict(var.get("defaults", {}))),
        assumptions=MappingProxyType(dict(var.get("assumptions", {}))),
        primary_metric=var["primary_metric"], guardrail_metric=var["guardrail_metric"],
    )
    return Track(track_id=track_id, label=track["label"], category=track["category"],
                 path=path, profile=TrackProfile(track_id, track["label"]), variant=variant,
                 hardware=hardware, model=model, raw=raw)


def _link(values: Mapping[str, Any] | None) -> LinkSpec | None:
    return None if values is None else LinkSpec(values["bandwidth"])


def _suggest_id(text: str) -> str:
    words = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")
    return words if TRACK_ID_PATTERN.fullmatch(words) else f"track_{words}".rstrip("_")


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({key: _freeze(item) for key, item in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(item) for item in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _thaw(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [_thaw(item) for item in value]
    return value
