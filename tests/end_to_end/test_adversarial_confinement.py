"""The disk search: a world-readable copy of the grader earns a confined worker nothing.

``search_disk_for_grader`` walks the whole disk for any ``reference/__init__.py`` it can
read (an instructor's checkout in a home folder of mode 755, an install in /opt or /srv)
and answers ``serve`` with it. The test leaves such a copy in a world-readable folder
outside the temporary folder, checks that an ordinary process of another user could
import it there, and grades the case with the CLI: the worker sees only its runtime and
its box (bubblewrap's allowlist), so the theft finds nothing and the case scores the
honest baseline, 88.0 (serve's 12 points lost).
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import ADVERSARIAL, AS_ROOT, REPO, grade_case

from graders.sandbox.confinement import bubblewrap_support
from graders.sandbox.privileges import worker_python

pytestmark = pytest.mark.slow

CASE = "search_disk_for_grader"
BASELINE_WITHOUT_SERVE = 88.0
NOBODY = 65534


def confined_here() -> str | None:
    """Why the disk search cannot be contained on this machine (None: it can)."""
    if not AS_ROOT:
        return "the readable copy is planted in /srv, which needs root"
    return bubblewrap_support(NOBODY, NOBODY, True)


@pytest.fixture
def readable_copy() -> Iterator[Path]:
    """A copy of the grader's reference/ in a folder of mode 755 under /srv."""
    folder = Path("/srv") / f"serving-grader-copy-{secrets.token_hex(4)}"
    shutil.copytree(REPO / "reference", folder / "reference",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.skipif(confined_here() is not None, reason=str(confined_here()))
def test_the_copy_is_importable_by_another_user_outside_the_sandbox(
        readable_copy: Path) -> None:
    """The premise: without the allowlist, any user's process could use the copy."""
    python = worker_python()  # the interpreter (or its copy) a sandbox user can run
    completed = subprocess.run(
        [str(python.executable), "-I", "-S", "-c", "import sys; sys.path.insert(0, "
         "sys.argv[1]); import reference; print(callable(reference.serve))",
         str(readable_copy)],
        capture_output=True, text=True, user=NOBODY, group=NOBODY, extra_groups=[],
        env={"PATH": "/usr/bin:/bin", **python.environment}, cwd="/", timeout=60,
        check=False)
    assert completed.stdout.strip() == "True", completed.stderr


@pytest.mark.skipif(confined_here() is not None, reason=str(confined_here()))
def test_a_disk_search_for_a_readable_grader_copy_earns_nothing(readable_copy: Path) -> None:
    base = Path(tempfile.mkdtemp(prefix="adversarial-confinement-", dir="/tmp"))
    base.chmod(0o755)
    try:
        case = grade_case(CASE, ADVERSARIAL / CASE, base)
        assert case.returncode == 0, case.stderr
        results = json.loads(case.text)
        assert results["score"] == BASELINE_WITHOUT_SERVE, results.get("output")
        assert results["extra_data"]["protections"]["allowlist"] is True
        assert not case.survivors
    finally:
        shutil.rmtree(base, ignore_errors=True)
