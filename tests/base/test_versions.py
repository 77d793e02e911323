"""The grader's versions: the pins, what differs from them, and where they are reported."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import CORPUS, REPO

from graders import __version__, versions

CORRECT = CORPUS / "correct" / "serving.py"


def test_the_pins_name_every_grading_dependency_exactly() -> None:
    pins = versions.pinned()
    for name in ("pytest", "pytest-json-report", "hypothesis", "pint", "matplotlib"):
        assert name in pins, name
    assert all(version[0].isdigit() for version in pins.values())


def test_the_installed_grading_dependencies_are_the_pinned_ones() -> None:
    # this checkout is installed from the pins (tasks.py, .ci/run)
    assert versions.drift() == []
    assert versions.drift_warning() is None


def test_a_version_that_differs_from_its_pin_gives_one_warning_line() -> None:
    pins = {"pytest": "0.0.1", "pint": versions.installed("pint") or "", "absent-pkg": "1.0"}
    assert versions.drift(pins) == [("pytest", versions.installed("pytest"), "0.0.1")]
    warning = versions.drift_warning(pins)
    assert warning is not None
    assert "\n" not in warning
    assert warning.startswith(f"WARNING: pytest {versions.installed('pytest')} (official: "
                              "0.0.1): your local score may differ from the official one")
    assert "pip install -r " in warning


def test_graders_version_prints_the_grader_and_its_dependencies() -> None:
    done = subprocess.run([sys.executable, "-m", "graders", "--version"], capture_output=True,
                          text=True, check=True, cwd=REPO)
    for name in ("serving-lab-grader", "pytest", "hypothesis", "pint", "python"):
        assert name in done.stdout
    assert __version__ in done.stdout


def test_the_header_warns_when_a_dependency_differs_from_its_pin(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = pytester.path / "constraints.txt"
    fake.write_text("pint==0.0.1\n", encoding="utf-8")
    monkeypatch.setattr(versions, "CONSTRAINTS", fake)
    (pytester.path / "serving.py").write_bytes(CORRECT.read_bytes())
    result = pytester.runpytest("--student", "serving.py", "--collect-only")
    result.stdout.fnmatch_lines(["serving-grader: WARNING: pint * (official: 0.0.1): your "
                                 "local score may differ from the official one; *"])


def test_results_carry_the_versions(pytester: pytest.Pytester) -> None:
    (pytester.path / "serving.py").write_bytes(CORRECT.read_bytes())
    pytester.runpytest("--student", "serving.py", "--grader-results", "out.json", "-k",
                       "test_serve")
    document = json.loads((pytester.path / "out.json").read_text(encoding="utf-8"))
    assert document["extra_data"]["versions"] == versions.grading_versions()
