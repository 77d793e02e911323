"""Refresh graders/constraints.txt: the grading dependencies at their newest versions.

Run ``python tools/refresh_constraints.py`` from the checkout. It installs the project's
grading dependencies (``[project] dependencies`` and the ``report`` extra of
pyproject.toml) into a fresh virtual environment and writes what pip installed, exactly,
to graders/constraints.txt. Then run the tests (``python tasks.py test``) and commit.
"""

from __future__ import annotations

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


def main() -> int:
    header = [line for line in TARGET.read_text(encoding="utf-8").splitlines()
              if line.startswith("#")]
    with tempfile.TemporaryDirectory() as folder:
        venv.EnvBuilder(with_pip=True).create(folder)
        python = Path(folder) / "bin" / "python"
        subprocess.run([python, "-m", "pip", "install", "--quiet", *requirements()],
                       check=True)
        frozen = subprocess.run([python, "-m", "pip", "freeze", "--all",
                                 "--exclude", "pip", "--exclude", "setuptools"],
                                check=True, capture_output=True, text=True).stdout
    pins = sorted(line for line in frozen.splitlines() if "==" in line)
    TARGET.write_text("\n".join([*header, *pins]) + "\n", encoding="utf-8")
    sys.stdout.write(f"wrote {len(pins)} pins to {TARGET.relative_to(ROOT)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
