"""Golden files: the reference's expected values for the visible cases, as plain JSON.

The student bundle has no ``reference/``; its grading suite reads expected values and
each track's flat profile from a golden file instead. Each case is keyed by
:attr:`Case.key` and carries a fingerprint of its inputs, and each track the SHA-256 of
its file, so a golden file never grades against inputs it was not built from.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import math
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from graders.errors import GoldenError
from graders.grading.cases import Case
from graders.grading.probes import PROBE_MARK
from graders.sandbox.wire import FLOAT, NAMESPACE, TUPLE, encode_argument

if TYPE_CHECKING:
    from graders.trackfiles.tracks import Track

SCHEMA_VERSION = 1
#: The golden file's name in a student bundle, beside ``graders/`` and ``tracks/``.
GOLDEN_NAME = "golden.json"
#: Beside it, the expected values at the diagnosis's experiments (the probes of every
#: visible case, :func:`graders.grading.probes.probe_cases`): read only when a visible
#: case fails, and tied to the golden file by the digest of its cases.
PROBES_NAME = "golden-probes.json.gz"


def fingerprint(case: Case) -> str:
    """A digest of the case's inputs exactly as the worker receives them."""
    encoded = encode_argument({"args": list(case.args), "kwargs": dict(case.kwargs)})
    text = json.dumps(encoded, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_digest(path: Path) -> str:
    """The SHA-256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def to_json_data(value: Any) -> Any:
    """Plain data as strict JSON: non-finite floats, tuples and namespaces tagged."""
    if isinstance(value, float) and not math.isfinite(value):
        return {FLOAT: repr(value)}
    if isinstance(value, tuple):
        return {TUPLE: [to_json_data(item) for item in value]}
    if isinstance(value, list):
        return [to_json_data(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): to_json_data(item) for key, item in value.items()}
    if isinstance(value, types.SimpleNamespace):
        return {NAMESPACE: {key: to_json_data(item) for key, item in vars(value).items()}}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"a golden file cannot hold a {type(value).__name__}")


def from_json_data(value: Any) -> Any:
    """The inverse of :func:`to_json_data`."""
    if isinstance(value, list):
        return [from_json_data(item) for item in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {FLOAT}:
        return float(value[FLOAT])
    if set(value) == {TUPLE}:
        return tuple(from_json_data(item) for item in value[TUPLE])
    if set(value) == {NAMESPACE}:
        return types.SimpleNamespace(**{k: from_json_data(v) for k, v in value[NAMESPACE].items()})
    return {key: from_json_data(item) for key, item in value.items()}


def profile_namespace(profile: Any) -> types.SimpleNamespace:
    """A flat profile (the reference's dataclass) as a namespace with the same fields."""
    from graders.grading.contract import PROFILE_FIELDS

    return types.SimpleNamespace(**{name: getattr(profile, name) for name in PROFILE_FIELDS})


def build_golden(tracks: Iterable[Track], cases: Iterable[Case], expected: Any, *,
                 visible_max_score: float = 100.0) -> dict[str, Any]:
    """The golden document for ``cases`` on ``tracks``; ``expected(case)`` gives values.

    ``visible_max_score`` is what the visible tests are worth: the bundle's total.
    """
    entries: dict[str, Any] = {}
    for case in cases:
        if case.key in entries:
            raise GoldenError(f"two cases share the key {case.key!r}; case ids must be unique "
                              "per track and function")
        entries[case.key] = {"inputs": fingerprint(case),
                             "expected": to_json_data(expected(case))}
    return {
        "schema_version": SCHEMA_VERSION,
        "visible_max_score": visible_max_score,
        "tracks": {track.track_id: {"file_sha256": file_digest(track.path),
                                    "profile": to_json_data(
                                        profile_namespace(track.reference_profile()))}
                   for track in tracks},
        "cases": entries,
    }


def cases_digest(inputs: Mapping[str, str]) -> str:
    """A digest of a golden file's cases: each key with its inputs' fingerprint."""
    lines = "".join(f"{key}\t{inputs[key]}\n" for key in sorted(inputs))
    return hashlib.sha256(lines.encode("utf-8")).hexdigest()


def build_probes(golden: Mapping[str, Any], cases: Iterable[Case], expected: Any,
                 withheld: Iterable[Case] = (), examples: Iterable[Case] = ()) -> bytes:
    """The probes file for ``golden`` (a :func:`build_golden` document): the expected value
    at each probe of each of ``cases`` (its visible cases), and at each of ``examples``
    (the invariant tests' calls), that ``expected`` computes, as gzipped JSON. A probe
    outside the lab's domain (the reference raises) is left out: the diagnosis then has no
    value there, as an official grading has none. So is one at the inputs of a case of
    ``withheld`` (the hidden tests'), whose answer the bundle never tells."""
    from graders.grading.probes import probe_cases  # the probes' inputs, only when built

    hidden = {fingerprint(case) for case in withheld}
    values: dict[str, Any] = {}
    asked = [probe_cases(case, expected(case)) for case in cases]
    for probes in [*asked, *([example] for example in examples)]:
        for probe in probes:
            if probe.key in values or fingerprint(probe) in hidden:
                continue
            try:
                value = expected(probe)
            except (ValueError, TypeError, ArithmeticError):
                continue
            values[probe.key] = to_json_data(value)
    document = {"schema_version": SCHEMA_VERSION,
                "cases_sha256": cases_digest({key: entry["inputs"]
                                              for key, entry in golden["cases"].items()}),
                "expected": values}
    text = json.dumps(document, separators=(",", ":"), allow_nan=False, sort_keys=True)
    return gzip.compress(text.encode("utf-8"), mtime=0)


@dataclass(frozen=True)
class GoldenEntry:
    """One case's input fingerprint and expected plain value."""

    inputs: str
    expected: Any


@dataclass(frozen=True)
class GoldenOracle:
    """Expected values and track profiles read from a golden file."""

    path: Path
    entries: Mapping[str, GoldenEntry]
    tracks: Mapping[str, tuple[str, Any]]
    visible_max_score: float = 100.0
    #: Values come from a file, so hidden tests (not in it) cannot be graded.
    golden: ClassVar[bool] = True

    @property
    def default_max_score(self) -> float:
        """The suite's total unless set: the visible points the file records."""
        return self.visible_max_score

    @classmethod
    def load(cls, path: Path) -> GoldenOracle:
        """Read and check a golden file; raises GoldenError naming the file and the problem."""
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except OSError as error:
            raise GoldenError(f"cannot read golden file {path}: {error.strerror}; pass "
                              "--grader-golden FILE with the bundle's golden.json") from None
        except ValueError as error:
            raise GoldenError(f"golden file {path} is not valid JSON ({error}); rebuild it "
                              "with 'graders export student'") from None
        if not isinstance(document, dict) or \
                document.get("schema_version") != SCHEMA_VERSION:
            raise GoldenError(f"golden file {path} is not schema version {SCHEMA_VERSION}; "
                              "rebuild it with 'graders export student'")
        try:
            entries = {key: GoldenEntry(str(entry["inputs"]), from_json_data(entry["expected"]))
                       for key, entry in document["cases"].items()}
            tracks = {track_id: (str(entry["file_sha256"]), from_json_data(entry["profile"]))
                      for track_id, entry in document["tracks"].items()}
            visible_max_score = float(document["visible_max_score"])
        except (KeyError, TypeError, AttributeError, ValueError) as error:
            raise GoldenError(f"golden file {path} is missing or garbles {error}; rebuild it "
                              "with 'graders export student'") from None
        if not math.isfinite(visible_max_score) or visible_max_score <= 0:
            raise GoldenError(f"golden file {path}: visible_max_score must be a positive "
                              "number; rebuild it with 'graders export student'")
        return cls(path, entries, tracks, visible_max_score)

    def bind(self, tracks: tuple[Track, ...]) -> tuple[Track, ...]:
        """The tracks with their golden profiles, once each file is checked unchanged and
        none is missing (per-track points would spread over fewer tracks)."""
        missing = sorted(set(self.tracks) - {track.track_id for track in tracks})
        if missing:
            raise GoldenError(f"track {', '.join(missing)} of {self.path.name} is missing from "
                              "the tracks folder; restore it (git checkout -- tracks/)")
        bound = []
        for track in tracks:
            if track.track_id not in self.tracks:
                known = ", ".join(sorted(self.tracks)) or "none"
                raise GoldenError(f"track {track.track_id!r} ({track.path.name}) has no golden "
                                  f"values in {self.path.name}; this bundle grades the tracks "
                                  f"it was built with ({known})")
            digest, profile = self.tracks[track.track_id]
            if file_digest(track.path) != digest:
                raise GoldenError(f"{track.path.name} differs from the file {self.path.name} "
                                  "was built from; restore it (git checkout -- tracks/)")
            bound.append(track.with_profile(profile))
        return tuple(bound)

    def expected(self, case: Case) -> Any:
        """The golden value of ``case``; raises GoldenError if it is absent or stale."""
        entry = self.entries.get(case.key)
        if entry is None and PROBE_MARK in case.case_id:
            return self._probe_expected(case)
        if entry is None:
            raise GoldenError(f"{self.path.name} has no value for case {case.key}; the bundle "
                              "carries the visible cases only")
        if entry.inputs != fingerprint(case):
            raise GoldenError(f"case {case.key} has other inputs than {self.path.name} was "
                              "built from; rebuild it with 'graders export student'")
        return entry.expected

    def _probe_expected(self, case: Case) -> Any:
        """The expected value at a diagnosis probe, from the probes file."""
        if case.key not in self.probe_values:
            raise GoldenError(f"{PROBES_NAME} has no value for probe {case.key}")
        return self.probe_values[case.key]

    @functools.cached_property
    def probe_values(self) -> Mapping[str, Any]:
        """The probes file's values, read once, when the first probe is asked; none when the
        file is absent or was not built with this golden file's cases."""
        path = self.path.with_name(PROBES_NAME)
        try:
            document = json.loads(gzip.decompress(path.read_bytes()).decode("utf-8"))
        except (OSError, EOFError, ValueError):
            return {}
        digest = cases_digest({key: entry.inputs for key, entry in self.entries.items()})
        if not isinstance(document, dict) or document.get("cases_sha256") != digest or \
                not isinstance(document.get("expected"), dict):
            return {}
        return {key: from_json_data(value) for key, value in document["expected"].items()}
