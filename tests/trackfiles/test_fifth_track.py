"""Adding a track is adding a file: a fifth track generated from MLSysIM is graded, no code changed.

The track is a Jetson-class edge device written by ``graders tracks new`` into a copy of
``tracks/``; grading with ``--tracks`` on that copy must add one test per track-level
function for it, score the correct solution 100, and take points from a bug on it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import CORPUS, graders, load

from graders.trackfiles.tracks import default_tracks_dir

pytestmark = [pytest.mark.needs_mlsysim, pytest.mark.slow]
JETSON = ("--id", "jetson_orin_nx", "--hardware", "Hardware.Edge.JetsonOrinNX",
          "--model", "Models.Language.Llama2_7B", "--set", "label=Jetson Orin NX",
          "--set", "arrival_qps=30", "--set", "service_ms=25", "--set", "slo_ms=150",
          "--set", "batch_size=4", "--set", "batch_efficiency_gain=2.5",
          "--set", "context_tokens=2048", "--set", "state_kind=KV cache",
          "--set", "precision_bytes=1", "--set", "kv_precision_bytes=1")


@pytest.fixture(scope="module")
def five_tracks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mlsysim")
    folder = tmp_path_factory.mktemp("tracks") / "tracks"
    shutil.copytree(default_tracks_dir(), folder)
    made = graders("tracks", "new", *JETSON, "--tracks", folder)
    assert made.returncode == 0, made.stderr
    checked = graders("tracks", "check", "--tracks", folder)
    assert checked.returncode == 0, checked.stderr
    return folder


def grade(tmp_path: Path, submission: str, tracks: Path) -> dict[str, Any]:
    results = tmp_path / f"{submission}.json"
    run = graders("grade", CORPUS / submission, "--results", results, "--tracks", tracks, "-q")
    assert run.returncode == 0, run.stderr
    return load(results)  # type: ignore[no-any-return]


def jetson_tests(results: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in results["tests"] if "jetson_orin_nx" in t["tags"]]


def test_a_generated_fifth_track_is_graded_like_the_others(five_tracks: Path,
                                                           tmp_path: Path) -> None:
    results = grade(tmp_path, "correct", five_tracks)
    assert results["score"] == 100.0
    assert len(results["tests"]) == 48 + 6  # six per-track test functions
    tests = jetson_tests(results)
    assert sorted(t["tags"][0] for t in tests) == sorted([
        "queueing_latency", "batching_tax", "transformer_state_gb", "cache_capacity",
        "cold_start_latency", "serving_track_profile"])
    assert all(t["score"] == t["max_score"] > 0 for t in tests)
    assert all("[jetson_orin_nx]" in t["name"] for t in tests)


def test_a_bug_loses_points_on_the_fifth_track_too(five_tracks: Path, tmp_path: Path) -> None:
    results = grade(tmp_path, "gib_for_gb", five_tracks)
    lost = [t["tags"] for t in results["tests"] if t["score"] < t["max_score"]]
    assert ["serving_track_profile", "jetson_orin_nx"] in lost
    assert len(lost) == 5  # the four book tracks and the new one
    assert results["score"] < 100.0
