"""The project's packaging: pyproject.toml builds without setuptools' deprecation warnings."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from helpers import REPO

#: The first setuptools that reads an SPDX ``project.license`` and ``license-files``.
SPDX_SETUPTOOLS = (77,)
STUDENT_TEMPLATE = REPO / "graders" / "export" / "templates" / "student_pyproject.toml"


def _least_setuptools(requires: list[str]) -> tuple[int, ...]:
    (requirement,) = [item for item in requires if item.startswith("setuptools")]
    found = re.fullmatch(r"setuptools\s*>=\s*([\d.]+)", requirement)
    assert found is not None, requirement
    return tuple(int(part) for part in found.group(1).split("."))


def test_the_license_is_an_spdx_expression_with_a_setuptools_that_reads_it() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["license"] == "MIT"  # a string, not a {text = ...} table
    assert "license-files" in project["project"]
    assert _least_setuptools(project["build-system"]["requires"]) >= SPDX_SETUPTOOLS


def test_the_student_bundle_builds_with_the_same_setuptools() -> None:
    text = STUDENT_TEMPLATE.read_text(encoding="utf-8")
    build_system = tomllib.loads(text.split("[project]", 1)[0])["build-system"]
    assert _least_setuptools(build_system["requires"]) >= SPDX_SETUPTOOLS
    assert "license = {" not in text  # never the deprecated table


def test_the_project_metadata_builds_without_a_deprecation_warning(tmp_path: Path) -> None:
    copy = tmp_path / "project"
    copy.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, copy / name)
    for name in ("graders", "reference"):
        shutil.copytree(REPO / name, copy / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "meta").mkdir()
    built = subprocess.run(
        [sys.executable, "-W", "always", "-c",
         "import sys; from setuptools import build_meta; "
         "print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))",
         str(tmp_path / "meta")],
        cwd=copy, capture_output=True, text=True, timeout=120, check=False)
    assert built.returncode == 0, built.stderr
    assert "deprecated" not in built.stderr.lower(), built.stderr
    metadata = (tmp_path / "meta" / built.stdout.strip().splitlines()[-1] / "METADATA")
    assert "License-Expression: MIT" in metadata.read_text(encoding="utf-8").splitlines()
