"""Ordinary student file habits are graded like any other file, on both runners.

CRLF line endings, a UTF-8 byte-order mark, a path with spaces and non-ASCII characters,
and a serving.py in a folder that OneDrive or iCloud syncs: each is the correct solution
and must score exactly 100, on the hardened runner and on the portable one (a system
without the POSIX-only modules and /proc, played by ``tests/posix_blocked``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import CORPUS, grade_submission

CORRECT = (CORPUS / "correct" / "serving.py").read_bytes()


def crlf(folder: Path) -> Path:
    path = folder / "serving.py"
    path.write_bytes(CORRECT.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
    return path


def bom(folder: Path) -> Path:
    path = folder / "serving.py"
    path.write_bytes(b"\xef\xbb\xbf" + CORRECT)
    return path


def spaces_and_non_ascii(folder: Path) -> Path:
    path = folder / "Mes devoirs" / "Laboratoire n°2 – ñandú 服务" / "serving.py"
    path.parent.mkdir(parents=True)
    path.write_bytes(CORRECT)
    return path


def onedrive(folder: Path) -> Path:
    path = folder / "OneDrive - Université de Montréal" / "Documents" / "serving lab" / \
        "serving.py"
    path.parent.mkdir(parents=True)
    path.write_bytes(CORRECT)
    return path


def icloud(folder: Path) -> Path:
    path = folder / "Library" / "Mobile Documents" / "com~apple~CloudDocs" / "Lab 2" / \
        "serving.py"
    path.parent.mkdir(parents=True)
    path.write_bytes(CORRECT)
    return path


HABITS: dict[str, Callable[[Path], Path]] = {
    "crlf": crlf, "bom": bom, "spaces_and_non_ascii": spaces_and_non_ascii,
    "onedrive": onedrive, "icloud": icloud,
}


def test_the_habit_files_are_what_they_claim(tmp_path: Path) -> None:
    folders = {name: tmp_path / name for name in HABITS}
    for folder in folders.values():
        folder.mkdir()
    data = crlf(folders["crlf"]).read_bytes()
    assert data.count(b"\r\n") == data.count(b"\n")
    assert bom(folders["bom"]).read_bytes().startswith(b"\xef\xbb\xbf")
    assert " " in str(spaces_and_non_ascii(folders["spaces_and_non_ascii"]))
    assert not str(spaces_and_non_ascii(tmp_path)).isascii()
    assert "OneDrive - " in str(onedrive(folders["onedrive"]))
    assert "com~apple~CloudDocs" in str(icloud(folders["icloud"]))


@pytest.mark.slow
@pytest.mark.parametrize("runner", ["hardened", "portable"])
@pytest.mark.parametrize("habit", sorted(HABITS))
def test_a_correct_submission_with_a_student_file_habit_scores_100(
        tmp_path: Path, habit: str, runner: str) -> None:
    submission = HABITS[habit](tmp_path)
    results_folder = tmp_path / "results"
    results_folder.mkdir(mode=0o700)
    results = grade_submission(submission, results_folder / "results.json",
                               blocked=runner == "portable")
    assert results["extra_data"]["protections"]["runner"] == runner
    assert results["score"] == 100
    assert all(test["score"] == test["max_score"] for test in results["tests"])


@pytest.mark.slow
@pytest.mark.parametrize("runner", ["hardened", "portable"])
def test_the_folder_of_a_habit_submission_is_graded_too(tmp_path: Path, runner: str) -> None:
    """SUBMISSION may be the folder holding serving.py: a synced folder with spaces."""
    submission = onedrive(tmp_path)
    results_folder = tmp_path / "results"
    results_folder.mkdir(mode=0o700)
    results = grade_submission(submission.parent, results_folder / "results.json",
                               blocked=runner == "portable")
    assert results["score"] == 100
