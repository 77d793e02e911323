"""A grading dependency that differs from its pin (graders/constraints.txt) is said once per
grading: by ``graders grade`` on stderr (its header is not shown), and by ``graders regrade``
once for the class, on stderr, in report.md and on the class page.

The commands run as a user runs them, in a process whose pins name a version of pint that
is not installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers import CORPUS

from graders import versions

#: ``graders ARGS...`` with the pins read from the file named first.
WITH_PINS = """
import sys
from pathlib import Path
from graders import versions
versions.CONSTRAINTS = Path(sys.argv[1])
sys.argv = ["graders", *sys.argv[2:]]
from graders.cli import console_main
sys.exit(console_main())
"""


def graders(pins: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run([sys.executable, "-c", WITH_PINS, str(pins), *map(str, args)],
                          capture_output=True, text=True, env=environment, timeout=600,
                          check=False)


def drifted_pins(folder: Path) -> Path:
    pins = folder / "constraints.txt"
    pins.write_text("pint==0.0.1\n", encoding="utf-8")
    return pins


def test_a_grade_says_a_drift_once(tmp_path: Path) -> None:
    run = graders(drifted_pins(tmp_path), "grade", CORPUS / "correct", "-q")
    assert run.returncode == 0, run.stderr
    said = f"pint {versions.installed('pint')} (official: 0.0.1)"
    assert (run.stdout + run.stderr).count(said) == 1, run.stdout + run.stderr
    assert f"graders: WARNING: {said}: your local score may differ" in run.stderr


def test_a_grade_with_the_pinned_versions_says_nothing_of_them(tmp_path: Path) -> None:
    pins = tmp_path / "constraints.txt"
    pins.write_text(f"pint=={versions.installed('pint')}\n", encoding="utf-8")
    run = graders(pins, "grade", CORPUS / "correct", "-q")
    assert run.returncode == 0, run.stderr
    assert "official:" not in run.stdout + run.stderr


def test_a_regrade_says_a_drift_once_and_in_its_reports(tmp_path: Path) -> None:
    for student in ("ann", "bob"):  # rejected, never graded: the drift is the class's
        (tmp_path / "class" / student).mkdir(parents=True)
    out = tmp_path / "out"
    run = graders(drifted_pins(tmp_path), "regrade", tmp_path / "class", "--out", out,
                  "--no-histogram")
    assert run.returncode == 0, run.stderr
    said = f"pint {versions.installed('pint')} (official: 0.0.1)"
    assert (run.stdout + run.stderr).count(said) == 1, run.stdout + run.stderr
    assert f"graders: warning: {said}: these scores may differ from Gradescope's" in run.stderr
    assert f"**Warning:** {said}: these scores" in (out / "report.md").read_text(
        encoding="utf-8")
    page = (out / "class.html").read_text(encoding="utf-8")
    assert '<p id="version-drift">' in page
    assert said in page
