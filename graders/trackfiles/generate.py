"""Write a track file from MLSysIM registry refs (``graders tracks new``).

mlsysim is imported only inside :func:`generate_track_toml`; it is an optional extra.
"""

from __future__ import annotations

import difflib
import math
import tomllib
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from graders.errors import TrackError
from graders.trackfiles.tracks import DEFAULT_KEYS, TRACK_ID_PATTERN, TRACK_ID_RULE, load_track_text
from graders.units import registry
from reference.profile import DEFAULT_FIELDS

INSTALL_HINT = "pip install 'serving-lab-grader[mlsysim]'"

#: ``--set`` keys outside ``[variant.defaults]``, all text.
TEXT_SETTINGS = ("label", "category", "primary_metric", "guardrail_metric", "serving_policy")
DEFAULT_PRIMARY_METRIC = "p99 latency"
DEFAULT_GUARDRAIL_METRIC = "SLO attainment"

#: Canonical unit of each quantity written, used to check our registry reads it alike.
CANONICAL_UNITS: Mapping[str, str] = MappingProxyType({
    "data size": "GB", "bandwidth": "GB/s", "power": "W", "energy": "Wh",
    "parameter count": "param"})


def generate_track_toml(
    track_id: str, hardware_ref: str, model_ref: str, settings: Mapping[str, str]
) -> str:
    """The TOML text of a new track, validated; ``settings`` are ``--set`` key/value texts.

    Keys: label, category, primary_metric, guardrail_metric, serving_policy and any
    ``[variant.defaults]`` key. Unset lab defaults are written with the reference's
    fallbacks so the file shows every knob.
    """
    if not TRACK_ID_PATTERN.fullmatch(track_id):
        raise TrackError(f"--id {track_id!r}: a track id must be {TRACK_ID_RULE}")
    values = {key: _setting(key, text) for key, text in settings.items()}
    mlsysim = _import_mlsysim()
    hardware = _resolve(mlsysim, hardware_ref, "Hardware", "Hardware.Cloud.H100")
    model = _resolve(mlsysim, model_ref, "Models", "Models.Language.Llama2_70B")
    sections = [
        _header(hardware, model, values, _mlsysim_version()),
        _track_table(track_id, hardware_ref, hardware, values),
        *_hardware_tables(hardware_ref, hardware),
        _model_table(model_ref, model),
        *_variant_tables(values),
    ]
    text = "\n".join(sections)
    load_track_text(text, Path(f"{track_id}.toml"))
    return text


# --- settings ------------------------------------------------------------------------


def _setting(key: str, text: str) -> object:
    """One ``--set`` value, typed by its key: text stays text, numbers are TOML scalars."""
    if key in TEXT_SETTINGS:
        return _text_value(text)
    if key not in DEFAULT_KEYS:
        known = [*TEXT_SETTINGS, *DEFAULT_KEYS]
        close = difflib.get_close_matches(key, known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise TrackError(f"--set {key}={text}: unknown key {key!r}; {hint}known keys are: "
                         f"{', '.join(known)}")
    kind = DEFAULT_KEYS[key].kind
    if kind == "text":
        return _text_value(text)
    if kind == "text list":
        return _list_value(text)
    value = _toml_scalar(text)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TrackError(f"--set {key}={text}: {key} must be a number such as "
                         f"{DEFAULT_KEYS[key].example}; write digits, e.g. "
                         f"{key}={DEFAULT_KEYS[key].example}")
    return value


def _toml_scalar(text: str) -> object:
    """``text`` read as one TOML value, or ``None`` when it is not one."""
    try:
        return tomllib.loads(f"value = {text.strip()}")["value"]
    except tomllib.TOMLDecodeError:
        return None


def _text_value(text: str) -> str:
    if text.strip()[:1] in {'"', "'"}:
        value = _toml_scalar(text)
        if isinstance(value, str):
            return value
    return text


def _list_value(text: str) -> list[str]:
    if text.strip().startswith("["):
        value = _toml_scalar(text)
        if isinstance(value, list):
            return [str(item) for item in value]
    return [item.strip() for item in text.split(",") if item.strip()]


# --- mlsysim -------------------------------------------------------------------------


def _import_mlsysim() -> Any:
    try:
        import mlsysim
    except ImportError as error:
        raise TrackError(f"'graders tracks new' reads MLSysIM, which is not installed "
                         f"({error}); {INSTALL_HINT}") from error
    return mlsysim


def accepted_refs() -> dict[str, list[tuple[str, str]]]:
    """Every MLSysIM ref ``graders tracks new`` accepts, with its display name: the
    hardware nodes (``--hardware``) and the models (``--model``) of the installed MLSysIM."""
    mlsysim = _import_mlsysim()
    return {"hardware": _refs_under(mlsysim.Hardware, "Hardware", "memory"),
            "model": _refs_under(mlsysim.Models, "Models", "parameters")}


def _refs_under(registry_class: object, ref: str, needed: str) -> list[tuple[str, str]]:
    """The dotted refs below ``registry_class`` whose object has ``needed``, in order;
    nested registries (classes) are walked."""
    found: list[tuple[str, str]] = []
    for name in _public_names(registry_class):
        obj = getattr(registry_class, name)
        if isinstance(obj, type):
            found += _refs_under(obj, f"{ref}.{name}", needed)
        elif getattr(obj, needed, None) is not None:
            found.append((f"{ref}.{name}", str(getattr(obj, "name", "") or name)))
    return found


def _mlsysim_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mlsysim")
    except PackageNotFoundError:
        return "unknown version"


def _public_names(obj: object) -> list[str]:
    return [name for name in dir(obj) if not name.startswith("_") and name != "list"]


def _resolve(root: object, ref: str, prefix: str, example: str) -> Any:
    """The MLSysIM object named by a dotted ``ref`` such as ``Hardware.Cloud.H100``."""
    what = "hardware" if prefix == "Hardware" else "model"
    parts = ref.split(".")
    if len(parts) < 2 or parts[0] != prefix or not all(
        part.isidentifier() and not part.startswith("_") for part in parts
    ):
        raise TrackError(f"{what} ref {ref!r} must be a dotted MLSysIM name starting with "
                         f"{prefix}., such as {example}")
    obj = root
    for depth, part in enumerate(parts):
        if part not in _public_names(obj):
            raise TrackError(_unknown_ref(what, ref, parts[:depth], part, _public_names(obj)))
        obj = getattr(obj, part)
    needed, noun = ("memory", "hardware node") if what == "hardware" else ("parameters", what)
    if getattr(obj, needed, None) is None:
        raise TrackError(f"{what} ref {ref!r} is not an MLSysIM {noun} (it has no {needed}); "
                         f"pick one such as {example}")
    return obj


def _unknown_ref(what: str, ref: str, parents: list[str], part: str, known: list[str]) -> str:
    parent = ".".join(parents)
    close = difflib.get_close_matches(part, known, n=3, cutoff=0.5)
    if close:
        hint = "did you mean " + " or ".join(f"{parent}.{name}" for name in close) + "?"
    else:
        hint = f"{parent} holds: {', '.join(known)}"
    return (f"unknown MLSysIM {what} ref {ref!r}: {parent} has no {part!r}; {hint} "
            "('graders tracks new --list' prints every ref accepted)")


# --- rendering -----------------------------------------------------------------------


def format_number(value: float) -> str:
    """A short exact text of ``value``: ``7e10``, ``3504872``, ``3.35``, ``7.0``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    number = float(value)
    if math.isfinite(number) and number.is_integer() and abs(number) >= 1e4:
        digits = str(abs(int(number)))
        sign = "-" if number < 0 else ""
        if abs(number) < 1e9:
            return sign + digits
        mantissa = digits.rstrip("0")
        point = f".{mantissa[1:]}" if len(mantissa) > 1 else ""
        return f"{sign}{mantissa[0]}{point}e{len(digits) - 1}"
    return repr(number).replace("e+", "e").replace("e-0", "e-")


def format_quantity(quantity: Any, kind: str) -> str:
    """An MLSysIM quantity as a string in its own units that our registry reads alike."""
    canonical = CANONICAL_UNITS[kind]
    theirs = float(quantity.m_as(canonical))
    text = f"{format_number(quantity.magnitude)} {format(quantity.units, '~C')}"
    try:
        ours = float(registry().Quantity(text).m_as(canonical))
    except Exception:  # an MLSysIM-only unit: fall back to the canonical one
        ours = math.nan
    if not math.isclose(ours, theirs, rel_tol=1e-12):
        text = f"{format_number(theirs)} {canonical}"
    return text


def toml_value(value: object) -> str:
    """A Python scalar, string or list as TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value) if isinstance(value, float) else str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    return _toml_string(str(value))


def _toml_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "".join(
        f"\\u{ord(char):04x}" if ord(char) < 0x20 or ord(char) == 0x7F else char
        for char in escaped
    ) + '"'


def _lines(title: str, pairs: list[tuple[str, object]]) -> str:
    body = "".join(f"{key} = {toml_value(value)}\n" for key, value in pairs)
    return f"[{title}]\n{body}"


def _header(hardware: Any, model: Any, values: Mapping[str, object], version: str) -> str:
    label = " ".join(str(values.get("label", hardware.name)).split())
    return (f"# {label}: {hardware.name} serving {model.name}.\n"
            f"# Written by 'graders tracks new' from MLSysIM {version}; quantities are strings "
            "with units that pint parses.\n")


def _track_table(track_id: str, ref: str, hardware: Any, values: Mapping[str, object]) -> str:
    return _lines("track", [
        ("id", track_id),
        ("label", values.get("label", str(hardware.name))),
        ("category", values.get("category", ref.split(".")[1])),
    ])


def _quantity_attr(obj: Any, *names: str) -> Any:
    for name in names:
        obj = getattr(obj, name, None)
        if obj is None:
            return None
    return obj


def _hardware_tables(ref: str, hardware: Any) -> list[str]:
    pairs: list[tuple[str, object]] = [("ref", ref), ("name", str(hardware.name))]
    for key, kind in (("tdp", "power"), ("battery_capacity", "energy")):
        value = getattr(hardware, key, None)
        if value is not None:
            pairs.append((key, format_quantity(value, kind)))
    tables = [_lines("hardware", pairs), _lines("hardware.memory", [
        ("capacity", format_quantity(hardware.memory.capacity, "data size")),
        ("bandwidth", format_quantity(hardware.memory.bandwidth, "bandwidth")),
    ])]
    for link in ("storage", "interconnect"):
        bandwidth = _quantity_attr(hardware, link, "bandwidth")
        if bandwidth is not None:
            tables.append(_lines(f"hardware.{link}",
                                 [("bandwidth", format_quantity(bandwidth, "bandwidth"))]))
    return tables


def _model_table(ref: str, model: Any) -> str:
    pairs: list[tuple[str, object]] = [
        ("ref", ref), ("name", str(model.name)),
        ("parameters", format_quantity(model.parameters, "parameter count")),
    ]
    for key in ("layers", "hidden_dim"):
        value = getattr(model, key, None)
        if value:
            pairs.append((key, int(value)))
    return _lines("model", pairs)


def _variant_tables(values: Mapping[str, object]) -> list[str]:
    tables = [_lines("variant", [
        ("primary_metric", values.get("primary_metric", DEFAULT_PRIMARY_METRIC)),
        ("guardrail_metric", values.get("guardrail_metric", DEFAULT_GUARDRAIL_METRIC)),
    ])]
    if "serving_policy" in values:
        tables.append(_lines("variant.assumptions",
                             [("serving_policy", values["serving_policy"])]))
    fallbacks = dict(DEFAULT_FIELDS.values())
    defaults = [
        (key, values[key] if key in values else fallbacks.get(key))
        for key in DEFAULT_KEYS
        if key in values or fallbacks.get(key) is not None
    ]
    tables.append(_lines("variant.defaults", defaults))
    return tables
