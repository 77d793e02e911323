"""The Gradescope zip's setup.sh installs bubblewrap where the image's package manager
allows (apt-get, apk, dnf, yum), and goes on with a warning where it cannot.

The bubblewrap part of the generated setup.sh is run on its own, with stand-ins for the
package managers on its PATH (they record how they were called, and "install" a bwrap
stand-in), so nothing is installed on this machine.
"""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

import pytest
from helpers import graders

START = "# --- bubblewrap ---"
END = "# --- end of bubblewrap ---"
#: A package manager stand-in: records its arguments; "installs" bwrap unless told to fail.
MANAGER = """#!/bin/sh
echo "${0##*/} $*" >> "$CALLS"
[ -n "$FAIL" ] && exit 1
printf '#!/bin/sh\\n' > "$BIN/bwrap" && /bin/chmod +x "$BIN/bwrap"
"""


@pytest.fixture(scope="module")
def setup_script(tmp_path_factory: pytest.TempPathFactory) -> str:
    target = tmp_path_factory.mktemp("export") / "autograder.zip"
    run = graders("export", "gradescope", target)
    assert run.returncode == 0, run.stderr
    with zipfile.ZipFile(target) as archive:
        return archive.read("setup.sh").decode()


def bubblewrap_part(script: str) -> str:
    start, end = script.index(START), script.index(END)
    return script[start:end]


def run_part(script: str, folder: Path, managers: tuple[str, ...], *, fail: bool = False
             ) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """The bubblewrap part of ``script`` under ``set -euo pipefail``, with only
    ``managers`` (stand-ins) on PATH; its run and the managers' calls."""
    bin_folder = folder / "bin"
    bin_folder.mkdir()
    for manager in managers:
        (bin_folder / manager).write_text(MANAGER, encoding="utf-8")
        (bin_folder / manager).chmod(0o755)
    calls = folder / "calls"
    shell = f"set -euo pipefail\n{bubblewrap_part(script)}\necho SETUP-WENT-ON\n"
    done = subprocess.run(
        ["/bin/bash", "-c", shell], capture_output=True, text=True, timeout=60, check=False,
        env={"PATH": f"{bin_folder}:/nonexistent", "CALLS": str(calls),
             "BIN": str(bin_folder), **({"FAIL": "1"} if fail else {}),
             "HOME": os.environ.get("HOME", "/")})
    recorded = calls.read_text(encoding="utf-8").splitlines() if calls.exists() else []
    return done, recorded


def test_setup_installs_bubblewrap_before_the_grader(setup_script: str) -> None:
    part = bubblewrap_part(setup_script)
    assert setup_script.index(END) < setup_script.index('"$PYTHON" -m venv "$VENV"')
    for command in ("apt-get install -y -qq bubblewrap", "apk add --no-cache bubblewrap",
                    "dnf install -y -q bubblewrap", "yum install -y -q bubblewrap"):
        assert command in part, command


@pytest.mark.parametrize(("managers", "expected"), [
    (("apt-get",), ["apt-get update -qq", "apt-get install -y -qq bubblewrap"]),
    (("apk",), ["apk add --no-cache bubblewrap"]),
    (("dnf", "yum"), ["dnf install -y -q bubblewrap"]),
    (("yum",), ["yum install -y -q bubblewrap"]),
])
def test_each_package_manager_installs_bubblewrap(
        setup_script: str, tmp_path: Path, managers: tuple[str, ...],
        expected: list[str]) -> None:
    done, calls = run_part(setup_script, tmp_path, managers)
    assert done.returncode == 0, done.stderr
    assert calls == expected
    assert f"setup.sh: bubblewrap: {tmp_path / 'bin' / 'bwrap'}" in done.stdout
    assert "SETUP-WENT-ON" in done.stdout


def test_a_bwrap_already_there_is_kept(setup_script: str, tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "bwrap").write_text("#!/bin/sh\n", encoding="utf-8")
    (tmp_path / "bin" / "bwrap").chmod(0o755)
    done = subprocess.run(
        ["/bin/bash", "-c", f"set -euo pipefail\n{bubblewrap_part(setup_script)}"],
        capture_output=True, text=True, timeout=60, check=False,
        env={"PATH": f"{tmp_path / 'bin'}:/nonexistent"})
    assert done.returncode == 0, done.stderr
    assert "setup.sh: bubblewrap: " in done.stdout


@pytest.mark.parametrize(("managers", "fail", "reason"), [
    ((), False, "no apt-get, apk, dnf or yum to install bubblewrap with"),
    (("apt-get",), True, ""),
])
def test_setup_goes_on_with_a_warning_where_bubblewrap_cannot_be_installed(
        setup_script: str, tmp_path: Path, managers: tuple[str, ...], fail: bool,
        reason: str) -> None:
    done, _ = run_part(setup_script, tmp_path, managers, fail=fail)
    assert done.returncode == 0, done.stderr
    assert "SETUP-WENT-ON" in done.stdout
    assert "setup.sh: warning: bubblewrap could not be installed" in done.stderr
    assert reason in done.stderr
