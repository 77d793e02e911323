"""``graders regrade`` refuses a class it cannot confine, unless the risk is named.

Where no namespaces can be had (no bubblewrap, no user namespaces, not Linux), a hostile
submission in a class would run as the instructor: the regrade stops with one error that
says what could happen and what to do, and goes on only with ``--allow-unconfined``, then
saying so in one warning line. ``graders grade`` goes on, with one warning line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import CORPUS
from helpers import graders as run_graders

import graders.regrade.command
from graders.errors import GraderError
from graders.sandbox import syscall_filter
from graders.sandbox.confinement import confinement_gap

GAP = "no confinement (bubblewrap is not installed) and no privilege drop"
#: Runs ``graders grade`` with every confinement switched off, as on a machine without it.
UNCONFINED_GRADE = """
import sys
from pathlib import Path
import graders.sandbox.confinement as confinement
confinement.bubblewrap_support = lambda uid, gid, drop: "switched off by the test"
import graders.sandbox.landlock as landlock
landlock.unavailable = lambda: "switched off by the test"
from graders.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_without_confinement_the_regrade_refuses_and_says_what_to_do(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graders.regrade.command, "confinement_gap", lambda as_root: GAP)
    with pytest.raises(GraderError) as refused:
        graders.regrade.command._check_confinement(allow_unconfined=False)  # noqa: SLF001
    message = str(refused.value)
    assert GAP in message
    assert "--allow-unconfined" in message
    assert "read your files" in message


def test_the_flag_that_names_the_risk_lets_it_grade_with_one_warning(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(graders.regrade.command, "confinement_gap", lambda as_root: GAP)
    graders.regrade.command._check_confinement(allow_unconfined=True)  # noqa: SLF001
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"graders: warning: grading without confinement (--allow-unconfined): "
                     f"{GAP}"]


def test_where_workers_are_confined_no_flag_is_needed(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(graders.regrade.command, "confinement_gap", lambda as_root: None)
    graders.regrade.command._check_confinement(allow_unconfined=False)  # noqa: SLF001
    assert capsys.readouterr().err == ""


def test_the_regrade_lists_the_flag() -> None:
    completed = run_graders("regrade", "--help")
    assert completed.returncode == 0
    assert "--allow-unconfined" in completed.stdout


@pytest.mark.skipif(confinement_gap(os.geteuid() == 0) is not None,
                    reason="this machine cannot confine workers")
def test_an_unconfined_grading_prints_one_warning_line_and_a_confined_one_none(
        tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir(mode=0o700)
    unconfined = subprocess.run(
        [sys.executable, "-c", UNCONFINED_GRADE, "grade", str(CORPUS / "correct"),
         "--results", str(out / "results.json"), "-q"],
        capture_output=True, text=True, timeout=300, check=False)
    confined = run_graders("grade", CORPUS / "correct", "--results", out / "confined.json", "-q")
    assert unconfined.returncode == 0, unconfined.stderr
    # the syscall filter still refuses IP sockets: the warning does not claim the network
    reach = "" if syscall_filter.unavailable() is None else " and reach the network"
    assert [line for line in unconfined.stderr.splitlines() if "confinement" in line] == \
        ["graders: warning: the student's code runs without confinement (no namespaces "
         f"here): it can read and write this user's files{reach}; see "
         "extra_data.protections in the results"]
    assert confined.returncode == 0, confined.stderr
    assert "confinement" not in confined.stderr
