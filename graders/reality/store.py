"""The reality curves' cache: built once (``graders reality build``, an export), read while
grading without running anything.

A document holds, per track, the SHA-256 of the track file it was built from; a track
whose file has changed since gets no reality curve (never a stale one). It is found, in
order, beside the grader's package (a student bundle or a Gradescope zip, written by the
export) or in the grader's trusted cache folder (owned by the grader's user, checked
against its manifest, never writable by a sandbox user).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graders.errors import GraderError
from graders.reality import curves, simulate
from graders.reality.curves import RealityCurve, RealityPoint

if TYPE_CHECKING:
    from graders.trackfiles.tracks import Track

SCHEMA_VERSION = 1
#: The document's name, in a bundle beside ``golden.json`` and in the cache folder.
REALITY_NAME = "reality.json"
CACHE_KIND = "reality"

Reality = Mapping[str, tuple[RealityCurve, ...]]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def method_key() -> str:
    """Changes when the way the curves are computed changes (this package's source)."""
    digest = hashlib.sha256()
    for module in (curves, simulate):
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()[:20]


def cache_key(tracks: Sequence[Track]) -> str:
    """The cache folder's key: the method and every track file's bytes."""
    digest = hashlib.sha256(method_key().encode())
    for track in tracks:
        digest.update(f"{track.track_id}:{_digest(track.path)}".encode())
    return digest.hexdigest()[:20]


def _number(value: float) -> float | str:
    return value if math.isfinite(value) else repr(value)


def _point_data(point: RealityPoint) -> dict[str, Any]:
    return {key: _number(value) if isinstance(value, float) else value
            for key, value in asdict(point).items()}


def build_document(tracks: Iterable[Track]) -> dict[str, Any]:
    """The document for ``tracks``: runs the simulation (seconds per track)."""
    import numpy

    entries = {}
    for track in tracks:
        built = curves.track_reality(track)
        entries[track.track_id] = {
            "track_sha256": _digest(track.path),
            "curves": [{**{k: v for k, v in asdict(curve).items()
                           if k not in ("points", "default")},
                        "points": [_point_data(p) for p in curve.points],
                        "default": _point_data(curve.default)} for curve in built]}
    return {"schema_version": SCHEMA_VERSION, "method": method_key(),
            "simulation": {"requests": simulate.REQUESTS, "seeds": simulate.SEEDS,
                           "warmup_fraction": simulate.WARMUP_FRACTION,
                           "numpy": numpy.__version__},
            "tracks": entries}


def document_text(document: Mapping[str, Any]) -> str:
    """The document as written: strict JSON, keys sorted, so equal runs give equal bytes."""
    return json.dumps(document, indent=1, sort_keys=True, allow_nan=False) + "\n"


def _point(data: Mapping[str, Any]) -> RealityPoint:
    source = data["source"]
    if source not in ("exact", "simulated", "unstable"):
        raise ValueError(f"reality curves: unknown source {source!r}")
    return RealityPoint(float(data["x"]), float(data["formula_p99_ms"]), float(data["p99_ms"]),
                        float(data["half_ms"]), source)


def parse_document(document: Mapping[str, Any], tracks: Iterable[Track]) -> dict[
        str, tuple[RealityCurve, ...]]:
    """The curves of every track in ``tracks`` whose file the document was built from."""
    if document.get("schema_version") != SCHEMA_VERSION:
        raise GraderError(f"reality curves: schema_version {document.get('schema_version')!r}"
                          f" is not {SCHEMA_VERSION}; rebuild them with 'graders reality "
                          "build'")
    entries = document.get("tracks", {})
    found = {}
    for track in tracks:
        entry = entries.get(track.track_id)
        if not isinstance(entry, Mapping) or entry.get("track_sha256") != _digest(track.path):
            continue
        found[track.track_id] = tuple(
            RealityCurve(**{k: v for k, v in curve.items() if k not in ("points", "default")},
                         points=tuple(_point(p) for p in curve["points"]),
                         default=_point(curve["default"]))
            for curve in entry["curves"])
    return found


def bundled_file() -> Path:
    """Where a student bundle or a Gradescope zip keeps the document: in ``graders/``."""
    return Path(__file__).parents[1] / REALITY_NAME


def cached_file(tracks: Sequence[Track]) -> Path | None:
    """The document in the grader's trusted cache folder, if one was built for ``tracks``."""
    from graders.sandbox.runtime import trusted_cached_folder

    folder = trusted_cached_folder(CACHE_KIND, cache_key(tracks))
    return None if folder is None else folder / REALITY_NAME


def build_cache(tracks: Sequence[Track], private_parent: Path) -> Path:
    """Build the document into the trusted cache folder (unless there already) and return
    its path."""
    from graders.sandbox.runtime import cached_folder

    def build(staging: Path) -> None:
        (staging / REALITY_NAME).write_text(document_text(build_document(tracks)),
                                            encoding="utf-8")

    return cached_folder(CACHE_KIND, cache_key(tracks), build, private_parent) / REALITY_NAME


def load_reality(tracks: Sequence[Track]) -> dict[str, tuple[RealityCurve, ...]]:
    """The reality curves of ``tracks`` that a bundle or the cache holds; runs nothing.

    Tracks without curves are missing from the result (the page then says how to build
    them); an unreadable document counts as none.
    """
    found: dict[str, tuple[RealityCurve, ...]] = {}
    for path in (bundled_file(), cached_file(tracks)):
        if path is None or not path.is_file():
            continue
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
            more = parse_document(document, [t for t in tracks if t.track_id not in found])
        except (OSError, ValueError, TypeError, KeyError, GraderError):
            continue
        found.update(more)
    return found


def built_reality(tracks: Sequence[Track]) -> dict[str, tuple[RealityCurve, ...]]:
    """The curves of every track: read, or built into the cache first (instructor commands
    only; a grading reads with :func:`load_reality`)."""
    import tempfile

    found = load_reality(tracks)
    if len(found) == len(tracks):
        return found
    with tempfile.TemporaryDirectory() as private:
        path = build_cache(tracks, Path(private))
        return parse_document(json.loads(path.read_text(encoding="utf-8")), tracks)


def exported_text(tracks: Sequence[Track]) -> str:
    """The document an export ships beside the grader: the cached one, built if missing."""
    import tempfile

    cached = cached_file(tracks)
    if cached is not None:
        return cached.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory() as private:
        return build_cache(tracks, Path(private)).read_text(encoding="utf-8")
