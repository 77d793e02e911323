"""The instructor guide's preview of a fix is what its commands print: every shell command
of docs/instructor-guide.md, in order, on a fresh clone (its track added in section 3,
its class regraded and published in section 7, the fix previewed and re-exported), up to
the end of the fix's section, with the clone's grader installed without a download;
then the ```text block that follows the preview's ``cat`` must be that output, byte for
byte, and the fix's re-exports must ship the fixed track."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest
from test_docs_commands import GUIDE, environment, fenced_blocks, fresh_clone, script_of

#: The guide's commands that set up a Python environment: the grader is installed here.
SETUP = ("python3 -m venv", ". .venv/bin/activate", "pip install")
PREVIEW = "cat dist/preview/changes.csv dist/preview/changed_tests.csv"
#: The last command of the fix's section: the guide is followed up to it.
LAST = "graders export student dist/serving-lab-student-fixed"


def installed_in(clone: Path) -> Path:
    """The clone's own grader, installed as the guide's section 1 does (editable, so that
    its tracks/ is the clone's), in a virtual environment that takes the grader's
    dependencies from this test run's: no download. Returns the environment's bin/."""
    venv.EnvBuilder(with_pip=False).create(clone / ".venv")  # pip and setuptools: ours
    python = clone / ".venv" / "bin" / "python"
    found = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                            "['purelib'])"], capture_output=True, text=True, check=True)
    ours = sysconfig.get_paths()["purelib"]  # its .pth files (this checkout's) not read
    (Path(found.stdout.strip()) / "dependencies.pth").write_text(ours + "\n", "utf-8")
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "--no-index", "-e", str(clone)],
                   cwd=clone, capture_output=True, text=True, check=True, timeout=600)
    where = subprocess.run([str(python), "-c", "import graders; print(graders.__file__)"],
                           cwd=clone.parent, capture_output=True, text=True, check=True)
    assert Path(where.stdout.strip()).is_relative_to(clone), where.stdout
    return python.parent


def shown_preview() -> str:
    """The ```text block the guide shows right after the block that prints the preview."""
    blocks = fenced_blocks(GUIDE.read_text(encoding="utf-8"))
    [index] = [i for i, block in enumerate(blocks) if PREVIEW in block.text]
    assert blocks[index + 1].language == "text"
    return blocks[index + 1].text


def test_the_guide_shows_the_output_of_its_own_preview_command() -> None:
    shown = shown_preview().splitlines()
    assert shown[0].startswith("submission,names,")
    assert "flipped" in shown[0]
    assert any(line.startswith("submission,test,track,change,") for line in shown)


@pytest.mark.slow
@pytest.mark.needs_mlsysim
def test_the_guides_preview_is_reproduced_by_following_the_guide(tmp_path: Path) -> None:
    pytest.importorskip("mlsysim")
    script, ran = script_of(GUIDE)
    lines = script.splitlines()
    [end] = [index for index, line in enumerate(lines) if line.startswith(LAST)]
    kept = "\n".join(line for line in lines[:end + 1] if not line.startswith(SETUP)) + "\n"
    assert PREVIEW in ran
    clone = fresh_clone(tmp_path / "clone")
    env = environment(ours_on_path=False)
    env["PATH"] = f"{installed_in(clone)}{os.pathsep}{env['PATH']}"
    done = subprocess.run(["bash", "-c", kept], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=2400, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    printed = ((clone / "dist" / "preview" / "changes.csv").read_text(encoding="utf-8")
               + (clone / "dist" / "preview" / "changed_tests.csv").read_text(encoding="utf-8"))
    assert printed in done.stdout
    assert printed == shown_preview()
    # the published folder was not touched by the preview
    with (clone / "dist" / "regrade" / "grades.csv").open(encoding="utf-8") as handle:
        published = {row["submission"]: row["score"] for row in csv.DictReader(handle)}
    assert published["variability_linear_cv"] == "90.167521"
    # the page counts one submission changed, and nothing rescaled
    report = json.loads((clone / "dist" / "preview" / "report.json").read_text("utf-8"))
    assert len(report["changes"]["moves"]) == 1
    assert report["changes"]["points"] == []
    # the fix reaches Gradescope and the students' bundle
    fixed = (clone / "dist" / "tracks-fixed" / "iphone.toml").read_bytes()
    with zipfile.ZipFile(clone / "dist" / "serving-lab-autograder.zip") as archive:
        assert archive.read("tracks/iphone.toml") == fixed
    assert (clone / "dist" / "serving-lab-student-fixed" / "tracks" / "iphone.toml"
            ).read_bytes() == fixed
