"""``graders tracks new`` without ``--set slo_ms`` (issue 36): every track needs its own SLO,
so taking the lab's 100 ms is said in one warning line naming the default and the fix."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from graders.cli.tracks import slo_warning

HAS_MLSYSIM = importlib.util.find_spec("mlsysim") is not None


def test_a_track_without_its_slo_gets_one_warning_naming_the_default_and_the_fix() -> None:
    warning = slo_warning({"label": "Jetson", "arrival_qps": "30"}, "tracks/jetson.toml")
    assert warning is not None
    assert "\n" not in warning
    assert "no --set slo_ms" in warning
    assert "slo_ms = 100 ms" in warning
    assert "--set slo_ms=MS" in warning
    assert "tracks/jetson.toml" in warning


def test_a_track_with_its_slo_gets_no_warning() -> None:
    assert slo_warning({"slo_ms": "150"}, "tracks/jetson.toml") is None


@pytest.mark.slow
@pytest.mark.needs_mlsysim
@pytest.mark.skipif(not HAS_MLSYSIM, reason="needs the optional mlsysim package")
def test_tracks_new_without_slo_ms_warns_once_on_stderr_and_still_writes_the_track() -> None:
    refs = ["--id", "jetson", "--hardware", "Hardware.Edge.JetsonOrinNX", "--model",
            "Models.Vision.YOLOv8_Nano", "--stdout"]
    made = subprocess.run([sys.executable, "-m", "graders", "tracks", "new", *refs],
                          capture_output=True, text=True, timeout=300, check=False)
    assert made.returncode == 0, made.stderr
    assert "slo_ms = 100" in made.stdout
    [warning] = [line for line in made.stderr.splitlines() if "slo_ms" in line]
    assert warning.startswith("graders: warning: no --set slo_ms")
    given = subprocess.run([sys.executable, "-m", "graders", "tracks", "new", *refs,
                            "--set", "slo_ms=150"],
                           capture_output=True, text=True, timeout=300, check=False)
    assert given.returncode == 0, given.stderr
    assert "slo_ms" not in given.stderr
