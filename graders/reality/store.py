"""The reality curves' cache: built once (``graders reality build``, an export), read while
grading without running anything.

A document holds, per track, the SHA-256 of the track file it was built from; a track
whose file has changed since gets no reality curve (never a stale one), and the page says
why (:func:`missing_reasons`). It is found, in order, beside the grader's package (a
student bundle or a Gradescope zip, written by the export: every track in one document)
or in the grader's trusted cache folder (one folder per track, keyed by the track's id,
its file's bytes and the method, so editing one track rebuilds that track only; owned by
the grader's user, checked against its manifest, never writable by a sandbox user).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graders.errors import GraderError
from graders.reality import curves, md1, mg1, simulate
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


@functools.cache
def method_key() -> str:
    """Changes when the way the curves are computed changes: this package's source, the
    reference's (the formula's p99 and the exact M/M/c points) and the track loader's."""
    digest = hashlib.sha256()
    for path in _method_sources():
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:20]


def _method_sources() -> list[Path]:
    from graders.trackfiles import tracks  # noqa: PLC0415 - the loader, for its path only

    reference = importlib.util.find_spec("reference")
    folders = [] if reference is None else list(reference.submodule_search_locations or [])
    return [*(Path(str(module.__file__)) for module in (curves, md1, mg1, simulate, tracks)),
            *sorted(path for folder in folders for path in Path(folder).glob("*.py"))]


def cache_key(track: Track) -> str:
    """One track's cache folder key: its id, then a digest of the method and its file's
    bytes (so editing one track file rebuilds that track's curves only)."""
    digest = hashlib.sha256(f"{method_key()}:{track.track_id}:{_digest(track.path)}".encode())
    return f"{track.track_id}-{digest.hexdigest()[:20]}"


def _number(value: float) -> float | str:
    return value if math.isfinite(value) else repr(value)


def _point_data(point: RealityPoint) -> dict[str, Any]:
    return {key: _number(value) if isinstance(value, float) else value
            for key, value in asdict(point).items()}


def track_entry(track: Track) -> dict[str, Any]:
    """One track's entry of a document: runs the simulation (seconds)."""
    built = curves.track_reality(track)
    return {"track_sha256": _digest(track.path),
            "curves": [{**{k: v for k, v in asdict(curve).items()
                           if k not in ("points", "default")},
                        "points": [_point_data(p) for p in curve.points],
                        "default": _point_data(curve.default)} for curve in built]}


def document(entries: Mapping[str, Any]) -> dict[str, Any]:
    """A document holding ``entries`` (track id to :func:`track_entry`)."""
    import numpy

    return {"schema_version": SCHEMA_VERSION, "method": method_key(),
            "simulation": {"requests": simulate.REQUESTS, "seeds": simulate.SEEDS,
                           "warmup_fraction": simulate.WARMUP_FRACTION,
                           "run_relaxations": simulate.RUN_RELAXATIONS,
                           "warmup_relaxations": simulate.WARMUP_RELAXATIONS,
                           "max_requests": simulate.MAX_REQUESTS,
                           "numpy": numpy.__version__},
            "tracks": dict(entries)}


def build_document(tracks: Iterable[Track]) -> dict[str, Any]:
    """The document for ``tracks``: runs the simulation (seconds per track)."""
    return document({track.track_id: track_entry(track) for track in tracks})


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


def cached_file(track: Track) -> Path | None:
    """The document in the grader's trusted cache folder, if one was built for ``track``
    as its file is now."""
    folder = trusted_cached_folder(CACHE_KIND, cache_key(track))
    return None if folder is None else folder / REALITY_NAME


def trusted_cached_folder(kind: str, key: str) -> Path | None:
    """The trusted shared folder of ``kind`` and ``key``, if there; builds nothing."""
    from graders.sandbox import runtime

    shared = runtime.cache_folder()
    folder = runtime.cached_path(shared, kind, key) if shared is not None else None
    return folder if folder is not None and runtime.is_trusted(folder) else None


def trusted_cached_folders(kind: str, key_prefix: str) -> list[Path]:
    """Every trusted shared folder of ``kind`` whose key starts with ``key_prefix``."""
    import glob

    from graders.sandbox import runtime

    shared = runtime.cache_folder()
    if shared is None:
        return []
    pattern = runtime.cached_path(shared, kind, key_prefix).name
    return sorted(folder for folder in shared.glob(glob.escape(pattern) + "*")
                  if runtime.is_trusted(folder))


def build_cache(track: Track, private_parent: Path) -> Path:
    """Build ``track``'s document into the trusted cache folder (unless there already) and
    return its path."""
    from graders.sandbox.runtime import cached_folder

    def build(staging: Path) -> None:
        (staging / REALITY_NAME).write_text(document_text(build_document([track])),
                                            encoding="utf-8")

    return cached_folder(CACHE_KIND, cache_key(track), build, private_parent) / REALITY_NAME


def _read(path: Path | None, tracks: Sequence[Track]) -> dict[str, tuple[RealityCurve, ...]]:
    """The curves of ``tracks`` in the document at ``path``; none when unreadable."""
    if path is None or not path.is_file():
        return {}
    try:
        return parse_document(json.loads(path.read_text(encoding="utf-8")), tracks)
    except (OSError, ValueError, TypeError, KeyError, GraderError):
        return {}


def load_reality(tracks: Sequence[Track]) -> dict[str, tuple[RealityCurve, ...]]:
    """The reality curves of ``tracks`` that a bundle or the cache holds; runs nothing.

    Tracks without curves are missing from the result (:func:`missing_reasons` says why);
    an unreadable document counts as none.
    """
    found = _read(bundled_file(), tracks)
    for track in tracks:
        if track.track_id not in found:
            found.update(_read(cached_file(track), [track]))
    return found


#: Why a track has no reality curve: one line each, with what to run.
MISSING_TEXT = {
    "not built": "its curves were never built here, or their cache was deleted: run "
                 "'graders reality build'",
    "changed": "its track file (or the grader) changed after its curves were built: run "
               "'graders reality build' again",
}


def _built_before(track: Track) -> bool:
    """True when a bundle or a cache folder holds curves of ``track``'s id built from
    another version of its file or of the grader."""
    paths = [bundled_file(), *(folder / REALITY_NAME for folder in
                               trusted_cached_folders(CACHE_KIND, f"{track.track_id}-"))]
    for path in paths:
        try:
            entries = json.loads(path.read_text(encoding="utf-8")).get("tracks", {})
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(entries, Mapping) and track.track_id in entries:
            return True
    return False


def missing_reasons(tracks: Sequence[Track], found: Mapping[str, object]) -> dict[str, str]:
    """Each track without curves in ``found``: a key of :data:`MISSING_TEXT`."""
    return {track.track_id: "changed" if _built_before(track) else "not built"
            for track in tracks if track.track_id not in found}


def built_reality(tracks: Sequence[Track]) -> dict[str, tuple[RealityCurve, ...]]:
    """The curves of every track: read, or built into the cache first, one track at a
    time (instructor commands only; a grading reads with :func:`load_reality`)."""
    import tempfile

    found = load_reality(tracks)
    missing = [track for track in tracks if track.track_id not in found]
    if not missing:
        return found
    with tempfile.TemporaryDirectory() as private:
        for track in missing:
            built = build_cache(track, Path(private))
            found.update(_read(built, [track]))
            _remove_stale(track, keep=built.parent)
    return {track.track_id: found[track.track_id] for track in tracks
            if track.track_id in found}


def _remove_stale(track: Track, keep: Path) -> None:
    """Remove the cache folders of ``track``'s id built from other versions of its file or
    of the grader (track ids hold no ``-``, so the prefix is the track's own)."""
    from graders.sandbox.cleanup import remove_tree
    for folder in trusted_cached_folders(CACHE_KIND, f"{track.track_id}-"):
        if folder != keep:
            remove_tree(folder)


def exported_text(tracks: Sequence[Track]) -> str:
    """The document an export ships beside the grader: every track's cached entry (built
    if missing), in one document."""
    import tempfile

    entries: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as private:
        for track in tracks:
            path = cached_file(track) or build_cache(track, Path(private))
            entries.update(json.loads(path.read_text(encoding="utf-8"))["tracks"])
    return document_text(document(entries))
