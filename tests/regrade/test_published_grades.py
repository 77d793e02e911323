"""A regrade never replaces published grades made with other settings unasked: into a folder
whose recorded run had other tracks, points or secret, it says what differs and stops
before grading, unless ``--new-settings``; a preview into a new folder (``--compare``)
is never stopped."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

from graders.regrade.changes import RUN_NAME, SCHEMA_VERSION, run_settings


def regrade(root: Path, out: Path, *extra: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "graders", "regrade", str(root), "--out",
                           str(out), "--no-histogram", "--allow-unconfined",
                           *map(str, extra)],
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture
def published(tmp_path: Path) -> Path:
    """A class of one file that is not Python (rejected, never run), and an OUT holding
    the grades of a run made with the checkout's tracks and default points."""
    tmp_path.chmod(0o700)
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "ann.txt").write_text("no code\n", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    (out / RUN_NAME).write_text(json.dumps({
        "schema_version": SCHEMA_VERSION, "finished_at": "2024-03-01T12:00:00+00:00",
        "settings": run_settings(tracks=None, options=[], secret=None),
        "submissions": {}}), encoding="utf-8")
    (out / "grades.csv").write_text("submission,score\nann,93.2\n", encoding="utf-8")
    return tmp_path


def other_tracks(folder: Path) -> Path:
    shutil.copytree(REPO / "tracks", folder)
    iphone = folder / "iphone.toml"
    iphone.write_text(iphone.read_text(encoding="utf-8").replace(
        "service_cv = 0.8\n", "service_cv = 1.0\n"), encoding="utf-8")
    return folder


@pytest.mark.parametrize(("fixed_published", "extra", "named"), [
    (False, ("--max-score", "50"), "--max-score default -> 50"),
    # published with the fixed tracks, regraded without --tracks
    (True, (), "track iphone: changed"),
])
def test_other_settings_stop_before_the_published_grades_are_touched(
        published: Path, fixed_published: bool, extra: tuple[str, ...], named: str) -> None:
    out = published / "out"
    if fixed_published:
        run = json.loads((out / RUN_NAME).read_text(encoding="utf-8"))
        run["settings"] = run_settings(tracks=other_tracks(published / "tracks"), options=[],
                                       secret=None)
        (out / RUN_NAME).write_text(json.dumps(run), encoding="utf-8")
    done = regrade(published / "class", out, *extra)
    assert done.returncode == 2, done.stderr
    assert named in done.stderr
    assert "--new-settings" in done.stderr
    assert "--compare" in done.stderr
    assert (out / "grades.csv").read_text(encoding="utf-8") == "submission,score\nann,93.2\n"
    assert not (out / "submissions").exists()  # nothing graded


def test_new_settings_replace_the_grades_and_say_what_differed(published: Path) -> None:
    out = published / "out"
    done = regrade(published / "class", out, "--max-score", "50", "--new-settings")
    assert done.returncode == 0, done.stderr
    assert "settings differ" in done.stderr
    assert "--max-score default -> 50" in done.stderr
    assert "ann" in (out / "grades.csv").read_text(encoding="utf-8")
    assert "93.2" not in (out / "grades.csv").read_text(encoding="utf-8")


def test_a_preview_into_a_new_folder_is_not_stopped(published: Path) -> None:
    done = regrade(published / "class", published / "preview", "--max-score", "50",
                   "--compare", published / "out")
    assert done.returncode == 0, done.stderr
    assert (published / "preview" / "changes.csv").is_file()


def test_the_same_settings_regrade_without_a_flag(published: Path) -> None:
    done = regrade(published / "class", published / "out")
    assert done.returncode == 0, done.stderr
    assert "settings differ" not in done.stderr
