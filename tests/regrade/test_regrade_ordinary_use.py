"""``graders regrade`` as instructors run it (issue 36): Gradescope's export as it unzips,
a submission rejected after its page was written, a file name that is not UTF-8, the
summary's words for a rejection, the note on a closed folder said once, and a student
(SID) in two submissions.

The fast tests use submissions that are rejected before any grading (no serving.py); the
slow ones grade corpus submissions for real.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import CORPUS, CORPUS_EXPECTED

from graders.errors import SubmissionError
from graders.regrade.report import GradedSubmission
from graders.regrade.roster import (
    ClassSubmission,
    Submitter,
    discover,
    duplicate_sid_warnings,
    export_inside,
)

AS_ROOT = os.geteuid() == 0
#: Seconds a regrade of a few submissions may take.
TIMEOUT_S = 600
#: A Latin-1 archive's "Résumé", as a Linux file name: not UTF-8.
LATIN1_NAME = b"R\xe9sum\xe9"


def run_cli(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    environment.update(env or {})
    if cwd is not None:
        environment["TMPDIR"] = str(cwd / "tmp")
    return subprocess.run([sys.executable, "-m", "graders", *map(str, args)], cwd=cwd,
                          env=environment, capture_output=True, text=True,
                          errors="backslashreplace", timeout=TIMEOUT_S, check=False)


@pytest.fixture
def home() -> Iterator[Path]:
    """A folder the sandbox users can traverse (pytest's tmp_path is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="regrade-use-", dir="/tmp"))
    folder.chmod(0o755)
    (folder / "tmp").mkdir(mode=0o755)
    (folder / "tmp").chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def rows_of(out: Path) -> dict[str, dict[str, str]]:
    text = (out / "grades.csv").read_text(encoding="utf-8")
    return {row["submission"]: row for row in csv.DictReader(io.StringIO(text))}


def metadata(*folders: tuple[str, str, str]) -> str:
    """submission_metadata.yml for (folder, name, sid) entries."""
    return "".join(f"{folder}:\n  :submitters:\n  - :name: {name}\n    :sid: '{sid}'\n"
                   for folder, name, sid in folders)


# --- 1. the export as "Export Submissions" unzips it ---------------------------------------


def unzipped_export(parent: Path, *, correct: bool = False) -> Path:
    """``parent/assignment_7_export/``: two submissions and submission_metadata.yml."""
    export = parent / "assignment_7_export"
    for folder in ("submission_1", "submission_2"):
        (export / folder).mkdir(parents=True)
    if correct:
        shutil.copy(CORPUS / "correct" / "serving.py", export / "submission_1" / "serving.py")
    (export / "submission_metadata.yml").write_text(
        metadata(("submission_1", "Ada Lovelace", "101"), ("submission_2", "Alan Turing", "102")),
        encoding="utf-8")
    return export


def test_the_one_gradescope_export_inside_a_folder_is_found(tmp_path: Path) -> None:
    export = unzipped_export(tmp_path / "downloads")
    (tmp_path / "downloads" / "assignment_7_export.zip").write_bytes(b"PK")
    assert export_inside(tmp_path / "downloads") == export
    assert export_inside(export) is None  # the export itself: nothing to descend into
    (tmp_path / "plain" / "alice").mkdir(parents=True)
    assert export_inside(tmp_path / "plain") is None


def test_an_export_beside_other_submissions_is_one_line_naming_both(tmp_path: Path) -> None:
    unzipped_export(tmp_path / "downloads")
    (tmp_path / "downloads" / "alice").mkdir()
    with pytest.raises(SubmissionError) as raised:
        export_inside(tmp_path / "downloads")
    assert "assignment_7_export" in str(raised.value)
    assert "alice" in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_regrade_of_the_folder_holding_the_export_grades_each_submission_and_says_so(
        tmp_path: Path) -> None:
    unzipped_export(tmp_path / "downloads")
    run = run_cli("regrade", tmp_path / "downloads", "--out", tmp_path / "out",
                  "--no-histogram")
    assert run.returncode == 0, run.stderr
    rows = rows_of(tmp_path / "out")
    assert set(rows) == {"submission_1", "submission_2"}
    assert rows["submission_1"]["name"] == "Ada Lovelace"
    notes = [line for line in run.stderr.splitlines() if "assignment_7_export" in line]
    assert len(notes) == 1, run.stderr
    assert notes[0].startswith("graders: note: ")
    assert "Gradescope export" in notes[0]


@pytest.mark.parametrize("inside", ["assignment_7_export/out", "out"],
                         ids=["in-the-export", "beside-the-export"])
def test_an_out_inside_the_submissions_folder_is_refused_before_anything(
        tmp_path: Path, inside: str) -> None:
    unzipped_export(tmp_path / "downloads")
    out = tmp_path / "downloads" / inside
    for given in (tmp_path / "downloads", tmp_path / "downloads" / "assignment_7_export"):
        if not out.is_relative_to(given):
            continue
        run = run_cli("regrade", given, "--out", out, "--no-histogram")
        assert run.returncode == 2, run.stderr
        assert run.stderr.startswith(f"graders: error: --out {str(out)!r} lies inside the "
                                     f"submissions folder {str(given)!r}"), run.stderr
        assert run.stderr.count("\n") == 1, run.stderr
        assert not out.exists()


def test_an_earlier_regrades_output_inside_the_class_is_left_out_and_said(
        tmp_path: Path) -> None:
    export = unzipped_export(tmp_path / "downloads")
    for earlier in (export / "out", tmp_path / "downloads" / "old-grades"):
        earlier.mkdir()
        for name in ("run.json", "grades.csv", "report.md"):
            (earlier / name).write_text("", encoding="utf-8")
    for given in (tmp_path / "downloads", export):
        run = run_cli("regrade", given, "--out", tmp_path / f"out-{given.name}",
                      "--no-histogram")
        assert run.returncode == 0, run.stderr
        assert set(rows_of(tmp_path / f"out-{given.name}")) == {"submission_1", "submission_2"}
        warnings = [line for line in run.stderr.splitlines() if "earlier regrade" in line]
        assert warnings == ["graders: warning: out is an earlier regrade's output (run.json "
                            "and grades.csv in it), not a submission: left out; move it out "
                            "of the submissions folder"], run.stderr


@pytest.mark.slow
def test_the_unzipped_export_is_graded_as_its_submissions_not_as_one(home: Path) -> None:
    unzipped_export(home / "downloads", correct=True)
    run = run_cli("regrade", home / "downloads", "--out", home / "out", "--no-histogram",
                  cwd=home)
    assert run.returncode == 0, run.stderr[-3000:]
    rows = rows_of(home / "out")
    assert {ident: (row["status"], row["score"]) for ident, row in rows.items()} == {
        "submission_1": ("graded", "100.0"), "submission_2": ("rejected", "0.0")}


# --- 5. the summary, the closed-folder note, duplicate SIDs --------------------------------


def test_the_summary_calls_a_rejected_submission_rejected_not_not_graded(
        tmp_path: Path) -> None:
    (tmp_path / "class" / "empty").mkdir(parents=True)
    run = run_cli("regrade", tmp_path / "class", "--out", tmp_path / "out", "--no-histogram")
    assert run.returncode == 0, run.stderr
    first = run.stdout.splitlines()[0]
    assert "1 rejected (0 points), 0 not graded" in first
    assert "not graded:" not in run.stdout
    bar = run.stderr.splitlines()[-1]  # the progress bar, in the summary's words
    assert bar.startswith("[########################] 1/1, 1 rejected, 0 not graded, "), bar
    assert "failed" not in run.stderr
    assert "  rejected: empty: serving.py not found" in run.stdout


@pytest.mark.skipif(not AS_ROOT, reason="only a regrade as root closes the class's folders")
def test_the_note_that_a_folder_was_closed_is_said_once(tmp_path: Path) -> None:
    klass = tmp_path / "class"
    (klass / "empty").mkdir(parents=True)
    klass.chmod(0o755)
    run = run_cli("regrade", klass, "--out", tmp_path / "out", "--no-histogram")
    assert run.returncode == 0, run.stderr
    said = (run.stdout + run.stderr).count(f"closed {str(klass)!r} to other users")
    assert said == 1, run.stdout + run.stderr
    assert klass.stat().st_mode & 0o007 == 0


def test_a_student_in_two_submissions_is_one_warning_naming_the_sid_and_both() -> None:
    ada = Submitter("Ada Lovelace", "101", "ada@example.edu")
    entries = [GradedSubmission("submission_1", (ada,), "graded", "", {}),
               GradedSubmission("submission_2", (ada, Submitter("Bob", "102")), "graded", "",
                                {}),
               GradedSubmission("submission_3", (Submitter("Carol", ""),), "graded", "", {}),
               GradedSubmission("submission_4", (Submitter("Dan", ""),), "graded", "", {})]
    [warning] = duplicate_sid_warnings(entries)
    assert "\n" not in warning
    assert "SID 101" in warning
    assert "submission_1" in warning
    assert "submission_2" in warning
    assert "Ada Lovelace" in warning


def test_a_regrade_warns_of_a_duplicate_sid_and_keeps_each_submissions_row(
        tmp_path: Path) -> None:
    klass = tmp_path / "class"
    for folder in ("submission_1", "submission_2"):
        (klass / folder).mkdir(parents=True)
    (klass / "submission_metadata.yml").write_text(
        metadata(("submission_1", "Ada", "101"), ("submission_2", "Ada L.", "101")),
        encoding="utf-8")
    run = run_cli("regrade", klass, "--out", tmp_path / "out", "--no-histogram")
    assert run.returncode == 0, run.stderr
    warnings = [line for line in run.stderr.splitlines() if "SID 101" in line]
    assert len(warnings) == 1, run.stderr
    assert warnings[0].startswith("graders: warning: ")
    assert "submission_1" in warnings[0]
    assert "submission_2" in warnings[0]
    assert set(rows_of(tmp_path / "out")) == {"submission_1", "submission_2"}


def test_the_guides_regrade_example_leaves_the_repositorys_corpus_alone() -> None:
    guide = (Path(__file__).parents[2] / "docs" / "instructor-guide.md").read_text("utf-8")
    regrades = [line for line in guide.splitlines() if line.startswith("graders regrade ")]
    assert regrades
    assert all("tests/corpus" not in line for line in regrades), regrades


# --- 4. a file name that is not UTF-8 ------------------------------------------------------


def test_a_name_that_is_not_utf8_is_shown_with_its_bytes_escaped(tmp_path: Path) -> None:
    klass = tmp_path / "class"
    klass.mkdir()
    os.mkdir(os.fsencode(klass) + b"/" + LATIN1_NAME)
    [submission], _ = discover(klass)
    assert submission.id == "R\\xe9sum\\xe9"
    assert submission.path.exists()  # still the folder on disk, by its own bytes


def test_a_rejected_submission_with_a_latin1_name_is_reported_everywhere(
        tmp_path: Path) -> None:
    klass = tmp_path / "class"
    klass.mkdir()
    os.mkdir(os.fsencode(klass) + b"/" + LATIN1_NAME)
    out = tmp_path / "out"
    run = run_cli("regrade", klass, "--out", out, "--no-histogram", "--names", "--pages")
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    assert "R\\xe9sum\\xe9" in run.stdout
    for name in ("grades.csv", "report.json", "class.html", "report.md"):
        text = (out / name).read_text(encoding="utf-8")  # valid UTF-8, the name escaped
        assert "R\\xe9sum\\xe9" in text.replace("\\\\", "\\"), name


@pytest.mark.slow
def test_a_graded_latin1_name_with_names_and_pages_writes_every_output(home: Path) -> None:
    klass = home / "class"
    klass.mkdir()
    shutil.copy(CORPUS / "gib_for_gb" / "serving.py",
                os.fsdecode(os.fsencode(klass) + b"/" + LATIN1_NAME + b".py"))
    shutil.copytree(CORPUS / "gib_for_gb", klass / "plain")
    out = home / "out"
    run = run_cli("regrade", klass, "--out", out, "--no-histogram", "--names", "--pages",
                  cwd=home)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    rows = rows_of(out)
    assert {ident: float(row["score"]) for ident, row in rows.items()} == {
        "R\\xe9sum\\xe9": CORPUS_EXPECTED["gib_for_gb"].score,
        "plain": CORPUS_EXPECTED["gib_for_gb"].score}
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert {row["submission"] for row in report["students"]} == {"R\\xe9sum\\xe9", "plain"}
    page = (out / "class.html").read_text(encoding="utf-8")
    assert "R\\xe9sum\\xe9" in page
    assert (out / "submissions" / "R\\xe9sum\\xe9" / "feedback.html").is_file()
    assert (out / "report.md").is_file()


# --- 3. a stale page after a rejection -----------------------------------------------------


@pytest.mark.slow
def test_a_submission_rejected_after_its_page_was_written_keeps_no_page_and_no_link(
        home: Path) -> None:
    klass = home / "class"
    shutil.copytree(CORPUS / "gib_for_gb", klass / "ann")
    out = home / "out"
    first = run_cli("regrade", klass, "--out", out, "--no-histogram", "--names", "--pages",
                    cwd=home)
    assert first.returncode == 0, first.stderr[-3000:]
    page = out / "submissions" / "ann" / "feedback.html"
    assert page.is_file()
    assert "submissions/ann/feedback.html" in (out / "class.html").read_text(encoding="utf-8")
    (klass / "ann" / "serving.py").unlink()  # serving.py became a notebook
    (klass / "ann" / "serving.ipynb").write_text("{}", encoding="utf-8")
    second = run_cli("regrade", klass, "--out", out, "--no-histogram", "--names", "--pages",
                     cwd=home)
    assert second.returncode == 0, second.stderr[-3000:]
    assert (rows_of(out)["ann"]["status"], rows_of(out)["ann"]["score"]) == ("rejected", "0.0")
    assert not page.exists()
    assert "feedback.html" not in (out / "class.html").read_text(encoding="utf-8")
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert all("page" not in row for row in report["students"])


def test_a_rejection_removes_the_page_an_earlier_grading_left(tmp_path: Path) -> None:
    from graders.regrade.job import PAGE_NAME, JobContext, run_job

    out = tmp_path / "out"
    stale = out / "submissions" / "ann" / PAGE_NAME
    stale.parent.mkdir(parents=True)
    stale.write_text("<p>93.89 points</p>", encoding="utf-8")
    (tmp_path / "class" / "ann").mkdir(parents=True)
    submission = ClassSubmission("ann", tmp_path / "class" / "ann")
    record = run_job(submission, slot=None,  # type: ignore[arg-type]  # never reached
                     context=JobContext(out=out, grader_sha256="x", timeout_s=1.0, pages=True))
    assert record is not None
    assert record.status == "rejected"
    assert not stale.exists()


def test_one_output_that_fails_is_one_line_and_the_others_are_still_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from graders.regrade import command

    def broken(report: object, *, names: bool) -> str:
        raise UnicodeEncodeError("utf-8", "R\udce9", 1, 2, "surrogates not allowed")

    monkeypatch.setattr(command, "build_class_page", broken)
    entries = [GradedSubmission("R\\xe9sum\\xe9", (), "rejected", "no serving.py", {"score": 0})]
    written, failures = command.write_outputs(tmp_path, entries, histogram=False, names=True)
    assert [path.name for path in written] == ["grades.csv", "report.json", "report.md"]
    [failure] = failures
    assert failure.startswith(f"writing {tmp_path / 'class.html'} failed: UnicodeEncodeError")
    assert "\n" not in failure


def test_a_regrade_without_tracks_to_grade_stops_before_grading(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """As from an installed grader (the Gradescope zip's set-up) with no --tracks: no
    job could grade, so the regrade stops at once, as graders grade does, and writes
    nothing: never a class of grader failures."""
    import graders.trackfiles.tracks as tracks
    from graders.cli import main
    from graders.errors import TrackError

    def no_folder() -> Path:
        raise TrackError("no tracks folder at /site-packages/tracks; pass --tracks DIR with "
                         "the folder of track TOML files")

    monkeypatch.setattr(tracks, "default_tracks_dir", no_folder)
    for student in ("ann", "bob"):
        (tmp_path / "class" / student).mkdir(parents=True)
        shutil.copy(CORPUS / "correct" / "serving.py", tmp_path / "class" / student)
    assert main(["regrade", str(tmp_path / "class"), "--out", str(tmp_path / "out"),
                 "--no-histogram"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("graders: error: no tracks folder at ")
    assert not (tmp_path / "out").exists()


def test_a_flat_folder_of_files_gives_every_student_a_row(tmp_path: Path) -> None:
    """One file per student, as LMS downloads are: each is graded or rejected with its
    reason, and none is dropped without a word."""
    klass = tmp_path / "class"
    klass.mkdir()
    shutil.copy(CORPUS / "correct" / "serving.py", klass / "alice.py")
    (klass / "bob.ipynb").write_text('{"cells": []}', encoding="utf-8")
    (klass / "carol.zip").write_bytes(b"PK\x05\x06" + b"\0" * 18)
    shutil.copy(CORPUS / "correct" / "serving.py", klass / "erin.PY")
    shutil.copy(CORPUS / "correct" / "serving.py", klass / "frank.py.txt")
    run = run_cli("regrade", klass, "--out", tmp_path / "out", "--no-histogram")
    assert run.returncode == 0, run.stderr
    rows = rows_of(tmp_path / "out")
    assert set(rows) == {"alice", "bob", "carol", "erin", "frank.py"}
    assert rows["alice"]["status"] == "graded"
    reasons = {"bob": "is a Jupyter notebook", "carol": "is an archive",
               "erin": "'erin.PY' is not a .py file", "frank.py": "'frank.py.txt' is not a .py"}
    for student, reason in reasons.items():
        assert rows[student]["status"] == "rejected", rows[student]
        assert float(rows[student]["score"]) == 0.0, rows[student]
        document = json.loads((tmp_path / "out" / "submissions" / student / "results.json")
                              .read_text(encoding="utf-8"))
        assert document["output"].startswith("Your submission was not graded: "), document
        assert reason in document["output"], document["output"]


#: A function of each phase of a regrade: the checks, the class's discovery, the
#: gradings, the report, and the summary.
PHASES = ("needs_linux", "discover", "_grade_all", "write_outputs", "_summary")


@pytest.mark.parametrize("phase", PHASES)
def test_ctrl_c_in_any_phase_of_a_regrade_is_one_line_and_exit_130(
        phase: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from graders.cli import main
    from graders.regrade import command

    real = getattr(command, phase)

    def interrupted(*args: object, **kwargs: object) -> object:
        real(*args, **kwargs)  # the phase does its work, then Ctrl-C arrives
        raise KeyboardInterrupt

    monkeypatch.setattr(command, phase, interrupted)
    (tmp_path / "class" / "ann").mkdir(parents=True)
    shutil.copy(CORPUS / "correct" / "serving.py", tmp_path / "class" / "ann")
    code = main(["regrade", str(tmp_path / "class"), "--out", str(tmp_path / "out"),
                 "--no-histogram"])
    assert code == 130
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1] == "graders: regrade interrupted; run the same command again to resume"
    assert not [line for line in lines if "Traceback" in line or "KeyboardInterrupt" in line]


@pytest.mark.parametrize("phase", PHASES)
def test_sigterm_in_any_phase_of_a_regrade_exits_143_as_a_grading_does(
        phase: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from graders.cli import main
    from graders.cli.grade import INTERRUPTED_SIGTERM
    from graders.regrade import command

    real = getattr(command, phase)

    def terminated(*args: object, **kwargs: object) -> object:
        real(*args, **kwargs)  # the phase does its work, then SIGTERM arrives
        signal.raise_signal(signal.SIGTERM)
        raise AssertionError("SIGTERM did not interrupt the regrade")

    monkeypatch.setattr(command, phase, terminated)
    (tmp_path / "class" / "ann").mkdir(parents=True)
    shutil.copy(CORPUS / "correct" / "serving.py", tmp_path / "class" / "ann")
    code = main(["regrade", str(tmp_path / "class"), "--out", str(tmp_path / "out"),
                 "--no-histogram"])
    assert code == INTERRUPTED_SIGTERM == 143
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1] == "graders: regrade interrupted; run the same command again to resume"
    assert not [line for line in lines if "Traceback" in line]


def test_ctrl_c_while_a_command_starts_is_one_line_and_exit_130(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import graders.cli as cli

    def interrupted() -> object:
        raise KeyboardInterrupt  # as while the command's modules import

    monkeypatch.setattr(cli, "build_parser", interrupted)
    monkeypatch.setattr(sys, "argv", ["graders", "regrade", "class"])
    assert cli.console_main() == 130
    assert capsys.readouterr().err == "graders: interrupted\n"


@pytest.fixture(scope="module")
def latin_1_locale(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a Latin-1 locale (made with localedef where it is not installed),
    in which Python's file names are Latin-1."""
    folder = tmp_path_factory.mktemp("locales")
    made = subprocess.run(["localedef", "-i", "en_US", "-f", "ISO-8859-1",
                           str(folder / "en_US.ISO-8859-1")], capture_output=True, check=False) \
        if shutil.which("localedef") else None
    env = {"LOCPATH": str(folder), "LC_ALL": "en_US.ISO-8859-1", "LANG": "en_US.ISO-8859-1",
           "PYTHONUTF8": "0"}
    probe = subprocess.run([sys.executable, "-c", "import sys; print(sys.getfilesystemencoding())"],
                           env={**os.environ, **env}, capture_output=True, text=True, check=False)
    if made is None or probe.stdout.strip() != "iso8859-1":
        pytest.skip("no Latin-1 locale can be made here (localedef and its sources)")
    return env


def test_utf_8_names_are_the_same_students_in_a_latin_1_locale(
        tmp_path: Path, latin_1_locale: dict[str, str]) -> None:
    klass = tmp_path / "class"
    for student in ("gina lópez", "zoë", "ann"):
        (klass / student).mkdir(parents=True)
        shutil.copy(CORPUS / "correct" / "serving.py", klass / student / "serving.py")
    first = run_cli("regrade", klass, "--out", tmp_path / "out", "--no-histogram")
    assert first.returncode == 0, first.stderr
    again = run_cli("regrade", klass, "--out", tmp_path / "out", "--no-histogram", "--force",
                    env=latin_1_locale)
    assert again.returncode == 0, again.stderr
    assert set(rows_of(tmp_path / "out")) == {"gina lópez", "zoë", "ann"}
    changes = (tmp_path / "out" / "changes.csv").read_text(encoding="utf-8")
    assert "added" not in changes
    assert "gone" not in changes
    # one output folder per student, named in UTF-8 whatever the locale
    assert sorted(os.listdir(os.fsencode(tmp_path / "out" / "submissions"))) == \
        sorted(name.encode("utf-8") for name in ("gina lópez", "zoë", "ann"))


@pytest.mark.skipif(os.geteuid() != 0, reason="a read-only bind mount needs root")
def test_a_class_on_a_read_only_mount_is_graded_and_says_what_it_could_not_close(
        home: Path) -> None:
    klass = home / "class"
    (klass / "ann").mkdir(parents=True)
    shutil.copy(CORPUS / "correct" / "serving.py", klass / "ann")
    klass.chmod(0o755)
    for command in (["mount", "--bind", str(klass), str(klass)],
                    ["mount", "-o", "remount,bind,ro", str(klass)]):
        if subprocess.run(command, capture_output=True, check=False).returncode != 0:
            subprocess.run(["umount", str(klass)], capture_output=True, check=False)
            pytest.skip("no read-only bind mount can be made here")
    try:
        run = run_cli("regrade", klass, "--out", home / "out", "--no-histogram", cwd=home)
    finally:
        subprocess.run(["umount", str(klass)], capture_output=True, check=False)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    assert rows_of(home / "out")["ann"]["status"] == "graded"
    assert f"could not close {str(klass)!r} to other users (mode 755: Read-only file " \
           "system)" in run.stdout  # in the summary, beside what it did close
