"""A fixed track reaches Gradescope: ``graders export gradescope|student --tracks DIR`` ships
DIR's track files, and the zip, set up and run in an autograder root, grades a submission
exactly as ``graders regrade --tracks DIR`` does with the same secret."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from helpers import CORPUS, REPO

#: The guide's fix: the iPhone's service-time variability, 0.8 -> 1.0, which gives the
#: linear-variability bug points on the iPhone.
FIX = ("service_cv = 0.8\n", "service_cv = 1.0\n")
SUBMISSION = "variability_linear_cv"


def graders(*arguments: str | Path, cwd: Path | None = None,
            env: dict[str, str] | None = None, timeout: float = 900
            ) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    environment.pop("VIRTUAL_ENV", None)
    environment.update(env or {})
    return subprocess.run([sys.executable, "-m", "graders", *map(str, arguments)], cwd=cwd,
                          env=environment, capture_output=True, text=True, timeout=timeout,
                          check=False)


def fixed_tracks(folder: Path) -> Path:
    shutil.copytree(REPO / "tracks", folder)
    iphone = folder / "iphone.toml"
    text = iphone.read_text(encoding="utf-8")
    assert text.count(FIX[0]) == 1
    iphone.write_text(text.replace(*FIX), encoding="utf-8")
    return folder


def test_the_zip_ships_the_tracks_it_was_exported_with(tmp_path: Path) -> None:
    tracks = fixed_tracks(tmp_path / "tracks-fixed")
    (tracks / "jetson.toml").write_bytes((tracks / "iphone.toml").read_bytes().replace(
        b'id = "iphone"', b'id = "jetson"'))
    secret = tmp_path / "secret"
    secret.write_text("a course secret\n", encoding="ascii")
    done = graders("export", "gradescope", tmp_path / "fixed.zip", "--tracks", tracks,
                   "--secret-file", secret)
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(tmp_path / "fixed.zip") as archive:
        shipped = {name: archive.read(name) for name in archive.namelist()
                   if name.startswith("tracks/")}
    assert shipped == {f"tracks/{path.name}": path.read_bytes()
                       for path in tracks.glob("*.toml")}
    assert FIX[1].encode() in shipped["tracks/iphone.toml"]


def test_an_export_refuses_a_tracks_folder_that_does_not_load(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "iphone.toml").write_text("[track]\nid = 3\n", encoding="utf-8")
    for command in (("gradescope", tmp_path / "out.zip"), ("student", tmp_path / "bundle")):
        done = graders("export", *command, "--tracks", broken)
        assert done.returncode == 2, done.stderr
        assert "iphone.toml" in done.stderr
        assert not command[1].exists()


def results_of(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


@pytest.mark.slow
def test_the_zip_with_fixed_tracks_grades_as_the_regrade_with_them(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    tracks = fixed_tracks(tmp_path / "tracks-fixed")
    secret = tmp_path / "course.zip.secret"
    secret.write_text("the course secret of this test\n", encoding="ascii")
    secret.chmod(0o600)
    zipped = tmp_path / "autograder.zip"
    done = graders("export", "gradescope", zipped, "--tracks", tracks, "--secret-file", secret)
    assert done.returncode == 0, done.stderr

    root = tmp_path / "autograder"
    with zipfile.ZipFile(zipped) as archive:
        archive.extractall(root / "source")
    for name in ("setup.sh", "run_autograder"):  # zipfile does not restore modes
        (root / "source" / name).chmod(0o755)
    env = {"SERVING_GRADER_AUTOGRADER_ROOT": str(root)}
    setup = subprocess.run(["bash", str(root / "source" / "setup.sh")], cwd=root / "source",
                           env={**os.environ, **env}, capture_output=True, text=True,
                           timeout=900, check=False)
    assert setup.returncode == 0, setup.stdout[-3000:] + setup.stderr[-3000:]
    shutil.copytree(CORPUS / SUBMISSION, root / "submission")
    (root / "submission_metadata.json").write_text(
        json.dumps({"id": 4501, "assignment": {"id": 7}}), encoding="utf-8")
    graded = subprocess.run(["bash", str(root / "source" / "run_autograder")], cwd=root,
                            env={**os.environ, **env}, capture_output=True, text=True,
                            timeout=900, check=False)
    assert graded.returncode == 0, graded.stdout[-3000:] + graded.stderr[-3000:]
    gradescope = results_of(root / "results" / "results.json")

    (tmp_path / "class").mkdir(mode=0o700)
    shutil.copytree(CORPUS / SUBMISSION, tmp_path / "class" / SUBMISSION)
    regraded = graders("regrade", tmp_path / "class", "--out", tmp_path / "out", "--jobs", "1",
                       "--no-histogram", "--tracks", tracks, "--secret-file", secret)
    assert regraded.returncode == 0, regraded.stderr[-3000:]
    regrade = results_of(tmp_path / "out" / "submissions" / SUBMISSION / "results.json")

    assert gradescope["score"] == regrade["score"] == 91.961538  # the fix's points included
    assert [(test["name"], test["score"], test["max_score"], test["status"])
            for test in gradescope["tests"]] == [
        (test["name"], test["score"], test["max_score"], test["status"])
        for test in regrade["tests"]]
    assert gradescope["extra_data"]["unseen_inputs_sha256"] == \
        regrade["extra_data"]["unseen_inputs_sha256"]
