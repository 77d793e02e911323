"""``python3 tasks.py grade``, the README's first command, as a user runs it."""

from __future__ import annotations

import subprocess
import sys

from helpers import REPO


def test_tasks_grade_announces_the_results_path_once() -> None:
    run = subprocess.run([sys.executable, "tasks.py", "grade"], cwd=REPO,
                         capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    output = run.stdout + run.stderr
    assert "TOTAL 100.00 / 100.00" in output
    assert output.count("results.json") == 1, output
