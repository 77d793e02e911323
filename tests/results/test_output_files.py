"""Output files: refused up front unless their folder is private, written atomically from a
temp file the grader creates, and never written through a link or into a FIFO."""

from __future__ import annotations

import argparse
import json
import os
import pwd
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import CORPUS

from graders.cli import build_parser
from graders.cli import grade as grade_cli
from graders.results import files as output_files
from graders.results.files import (
    OutputPathError,
    check_output_file,
    check_output_folder,
    write_bytes_atomically,
    write_text_atomically,
)
from graders.results.reports import interrupted_by_signal

CORRECT = CORPUS / "correct"
AS_ROOT = os.geteuid() == 0
DECOY = b"root's own file: never to be overwritten\n"
needs_root = pytest.mark.skipif(not AS_ROOT, reason="files of another user need root")


def other_user() -> int:
    return pwd.getpwnam("nobody").pw_uid


def decoy(path: Path) -> Path:
    path.write_bytes(DECOY)
    return path


def graders(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("PYTEST_", "COV_"))}
    return subprocess.run([sys.executable, "-m", "graders", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, env=environment,
                          timeout=120, check=False)


def assert_one_line_refusal(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("graders: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stdout == ""


# --- the folder check -------------------------------------------------------------------------


def test_a_private_folder_is_accepted_and_missing_folders_are_created(tmp_path: Path) -> None:
    target = check_output_file(tmp_path / "a" / "b" / "results.json", "--results")
    assert target == tmp_path / "a" / "b" / "results.json"
    assert target.parent.is_dir()
    assert target.parent.stat().st_uid == os.geteuid()


def test_a_relative_path_comes_back_absolute(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert check_output_file("results.json", "--results") == tmp_path / "results.json"


@pytest.mark.parametrize("mode", [0o777, 0o757, 0o1777, 0o1757], ids=oct)
def test_a_folder_others_can_write_is_refused_even_if_sticky(tmp_path: Path,
                                                             mode: int) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    with pytest.raises(OutputPathError) as refusal:
        check_output_file(shared / "results.json", "--results")
    message = str(refusal.value)
    assert message.startswith(f"--results {str(shared / 'results.json')!r}: other users can "
                              f"write to its folder {str(shared)!r}")
    assert "private folder" in message
    assert "\n" not in message


def test_a_private_folder_inside_a_sticky_shared_one_is_accepted(tmp_path: Path) -> None:
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    assert check_output_file(shared / "mine" / "results.json", "--results").parent \
        == shared / "mine"


def test_a_folder_on_the_way_that_others_can_write_and_is_not_sticky_is_refused(
        tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    (shared / "mine").mkdir(parents=True)
    shared.chmod(0o777)
    with pytest.raises(OutputPathError, match="on its way can be changed by other users"):
        check_output_file(shared / "mine" / "results.json", "--results")


@needs_root
def test_a_group_writable_folder_of_a_shared_group_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chown(shared, -1, 100)  # the "users" group
    shared.chmod(0o770)
    with pytest.raises(OutputPathError, match="other users can write"):
        check_output_folder(shared, "--out")


@needs_root
def test_a_folder_of_another_user_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, other_user(), -1)
    with pytest.raises(OutputPathError, match="belongs to another user"):
        check_output_file(theirs / "results.json", "--results")


@needs_root
def test_a_path_through_another_users_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "real")
    os.lchown(link, other_user(), -1)
    with pytest.raises(OutputPathError, match="symbolic link .* of another user"):
        check_output_file(link / "results.json", "--results")


@pytest.mark.parametrize(("make", "kind"), [
    (lambda path, target: path.symlink_to(target), "a symbolic link"),
    (lambda path, target: os.mkfifo(path), "a FIFO"),
    (lambda path, target: path.mkdir(), "a folder"),
], ids=["link", "fifo", "folder"])
def test_an_output_path_that_is_not_a_regular_file_is_refused(tmp_path: Path, make: Any,
                                                              kind: str) -> None:
    target = decoy(tmp_path / "decoy")
    path = tmp_path / "junit.xml"
    make(path, target)
    with pytest.raises(OutputPathError, match=f"is {kind}: the grader writes only regular"):
        check_output_file(path, "--junit-xml")
    assert target.read_bytes() == DECOY


def test_an_existing_regular_file_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text("{}", encoding="utf-8")
    assert check_output_file(tmp_path / "results.json", "--results") == \
        tmp_path / "results.json"


def test_a_folder_that_is_a_link_is_refused_where_links_are_not_allowed(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "out").symlink_to(tmp_path / "real")
    assert check_output_folder(tmp_path / "out", "--out") == tmp_path / "real"
    with pytest.raises(OutputPathError, match="it is a symbolic link"):
        check_output_folder(tmp_path / "out", "--out", allow_link=False)


def test_without_create_a_missing_folder_is_checked_but_not_made(tmp_path: Path) -> None:
    assert check_output_folder(tmp_path / "new" / "out", "--out", create=False) == \
        tmp_path / "new" / "out"
    assert not (tmp_path / "new").exists()


# --- writing: a temp file of the grader's own, then a rename ----------------------------------


def test_a_link_at_the_target_is_replaced_not_written_through(tmp_path: Path) -> None:
    target = decoy(tmp_path / "decoy")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "results.json").symlink_to(target)
    write_text_atomically(tmp_path / "out" / "results.json", "{}\n")
    assert target.read_bytes() == DECOY
    written = tmp_path / "out" / "results.json"
    assert stat.S_ISREG(written.lstat().st_mode)
    assert written.read_text(encoding="utf-8") == "{}\n"


def test_a_fifo_at_the_target_is_replaced_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "junit.xml")
    write_bytes_atomically(tmp_path / "junit.xml", b"<xml/>")  # would block if opened
    assert stat.S_ISREG((tmp_path / "junit.xml").lstat().st_mode)
    assert (tmp_path / "junit.xml").read_bytes() == b"<xml/>"


def test_links_and_fifos_at_guessed_temp_names_are_never_used(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = decoy(tmp_path / "decoy")
    out = tmp_path / "out"
    out.mkdir()
    (out / ".results.json.aaaa.tmp").symlink_to(target)
    os.mkfifo(out / ".results.json.bbbb.tmp")
    names = iter(["aaaa", "bbbb", "cccc"])
    monkeypatch.setattr(output_files.secrets, "token_hex", lambda size: next(names))
    write_text_atomically(out / "results.json", "ok")
    assert target.read_bytes() == DECOY
    assert (out / "results.json").read_text(encoding="utf-8") == "ok"
    assert sorted(p.name for p in out.iterdir()) == [
        ".results.json.aaaa.tmp", ".results.json.bbbb.tmp", "results.json"]


def test_a_folder_swapped_for_a_link_after_it_was_resolved_is_not_followed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out").symlink_to(tmp_path / "elsewhere")
    monkeypatch.setattr(output_files.os.path, "realpath", lambda path: str(path))
    with pytest.raises(OSError, match="Too many levels of symbolic links|Not a directory"):
        write_text_atomically(tmp_path / "out" / "results.json", "x")
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_text_that_utf8_cannot_encode_is_written_as_its_escape(tmp_path: Path) -> None:
    write_text_atomically(tmp_path / "page.html", "bad \ud800 here")
    assert (tmp_path / "page.html").read_text(encoding="utf-8") == "bad \\ud800 here"


def test_a_written_file_has_the_mode_asked_for_and_no_temp_file_is_left(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        write_bytes_atomically(tmp_path / "histogram.png", b"png", mode=0o640)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "histogram.png").stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["histogram.png"]


# --- graders grade: refusals before grading ---------------------------------------------------


def test_grade_refuses_a_results_folder_others_can_write_in_one_line(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    result = graders("grade", CORRECT, "--results", shared / "results.json")
    assert_one_line_refusal(result, "--results", "other users can write", "private folder")
    assert list(shared.iterdir()) == []


@pytest.mark.parametrize(("flag", "make", "kind"), [
    ("--junit-xml", lambda path, target: os.mkfifo(path), "a FIFO"),
    ("--json-report", lambda path, target: path.symlink_to(target), "a symbolic link"),
    ("--results", lambda path, target: path.symlink_to(target), "a symbolic link"),
    ("--html", lambda path, target: path.mkdir(), "a folder"),
], ids=["junit-fifo", "json-report-link", "results-link", "html-folder"])
def test_grade_refuses_an_output_path_that_is_not_a_regular_file(
        tmp_path: Path, flag: str, make: Any, kind: str) -> None:
    target = decoy(tmp_path / "decoy")
    path = tmp_path / "out" / "output"
    path.parent.mkdir()
    make(path, target)
    result = graders("grade", CORRECT, "--results", tmp_path / "out" / "results.json",
                     flag, path) if flag != "--results" else \
        graders("grade", CORRECT, flag, path)
    assert_one_line_refusal(result, flag, kind)
    assert target.read_bytes() == DECOY
    assert not (tmp_path / "out" / "results.json").exists()


def test_grade_refuses_two_outputs_at_one_path(tmp_path: Path) -> None:
    result = graders("grade", CORRECT, "--results", tmp_path / "x", "--junit-xml",
                     tmp_path / "x")
    assert_one_line_refusal(result, "--junit-xml", "is also the path of --results")


def fake_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: pytest.ExitCode,
             seen: dict[str, list[str]]) -> None:
    """pytest.main replaced: it records its arguments and writes the JUnit XML and json
    report where it is told to, as pytest does."""
    def fake_main(arguments: list[str], **kwargs: Any) -> pytest.ExitCode:
        seen["arguments"] = arguments
        if code == pytest.ExitCode.OK:
            for flag in ("--junitxml", "--json-report-file"):
                Path(arguments[arguments.index(flag) + 1]).write_text(flag, encoding="utf-8")
        return code

    monkeypatch.setattr(grade_cli.pytest, "main", fake_main)


def grade_args(tmp_path: Path) -> argparse.Namespace:
    out = tmp_path / "out"
    return build_parser().parse_args([
        "grade", str(CORRECT), "--junit-xml", str(out / "junit.xml"),
        "--json-report", str(out / "report.json"), "-q"])


def test_junit_xml_and_the_json_report_are_written_privately_then_installed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, list[str]] = {}
    fake_run(tmp_path, monkeypatch, pytest.ExitCode.OK, seen)
    assert grade_cli.run_grade(grade_args(tmp_path)) == 0
    arguments = seen["arguments"]
    for flag, name in (("--junitxml", "junit.xml"), ("--json-report-file", "report.json")):
        written = Path(arguments[arguments.index(flag) + 1])
        assert written.parent != tmp_path / "out"  # pytest wrote into the scratch folder
        assert not written.exists()  # which is gone
        assert (tmp_path / "out" / name).read_text(encoding="utf-8") == flag
        assert stat.S_IMODE((tmp_path / "out" / name).stat().st_mode) == 0o644


def test_earlier_junit_xml_and_json_reports_are_removed_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "out").mkdir()
    for name in ("junit.xml", "report.json"):
        (tmp_path / "out" / name).write_text("stale", encoding="utf-8")
    fake_run(tmp_path, monkeypatch, pytest.ExitCode.INTERNAL_ERROR, {})
    assert grade_cli.run_grade(grade_args(tmp_path)) == grade_cli.GRADER_FAILED
    # no stale file survives: the JUnit file now says the grader failed, and pytest's json
    # report, which this run never wrote, is gone
    assert [path.name for path in (tmp_path / "out").iterdir()] == ["junit.xml"]
    junit = (tmp_path / "out" / "junit.xml").read_text(encoding="utf-8")
    assert 'errors="1"' in junit
    assert "the grader failed: the grader stopped with pytest exit code 3" in junit


# --- graders regrade --out --------------------------------------------------------------------


def a_class(tmp_path: Path) -> Path:
    klass = tmp_path / "class" / "alice"
    klass.mkdir(parents=True)
    (klass / "serving.py").write_bytes((CORRECT / "serving.py").read_bytes())
    return klass.parent


def test_regrade_refuses_an_out_folder_that_is_a_link(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out").symlink_to(tmp_path / "elsewhere")
    result = graders("regrade", a_class(tmp_path), "--out", tmp_path / "out",
                     "--no-histogram")
    assert_one_line_refusal(result, "--out", "symbolic link")
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_regrade_refuses_an_out_folder_others_can_write(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out").chmod(0o777)
    result = graders("regrade", a_class(tmp_path), "--out", tmp_path / "out",
                     "--no-histogram")
    assert_one_line_refusal(result, "--out", "other users can write", "private folder")
    assert list((tmp_path / "out").iterdir()) == []
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o777  # and says nothing else


@needs_root
def test_regrade_refuses_an_out_folder_of_another_user(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    os.chown(tmp_path / "out", other_user(), -1)
    result = graders("regrade", a_class(tmp_path), "--out", tmp_path / "out",
                     "--no-histogram")
    assert_one_line_refusal(result, "--out", "belongs to another user")
    assert list((tmp_path / "out").iterdir()) == []


def test_installing_never_blocks_on_a_fifo_planted_in_place_of_the_source(
        tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "junit.xml")
    with pytest.raises(OSError, match="is not a regular file"):
        output_files.install_file(tmp_path / "junit.xml", tmp_path / "out.xml")
    assert not (tmp_path / "out.xml").exists()


def test_a_signal_during_the_run_is_an_interruption_whatever_pytest_returns(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # pytest's own report of a Ctrl-C can fail (an internal error while it formats the
    # traceback): the grading was still interrupted, never a grader failure
    def interrupted_run(arguments: list[str], plugins: object = None) -> int:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # Python runs the handler at once
        except KeyboardInterrupt:
            return pytest.ExitCode.INTERNAL_ERROR
        raise AssertionError("the grader's handler did not interrupt the run")

    monkeypatch.setattr(grade_cli.pytest, "main", interrupted_run)
    results = tmp_path / "out" / "results.json"
    args = build_parser().parse_args(["grade", str(CORRECT), "--results", str(results)])
    assert grade_cli.run_grade(args) == 128 + signal.SIGINT
    assert capsys.readouterr().err.splitlines()[-1] == \
        "graders: the grading was interrupted by SIGINT: no score"
    assert interrupted_by_signal(json.loads(results.read_text(encoding="utf-8"))) == "SIGINT"


def test_a_signal_during_the_run_is_an_interruption_whatever_pytest_raises(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # pytest's report of the interrupt can raise out of pytest.main itself (a traceback entry
    # without a line number): still the interruption, never "the grader failed"
    def interrupted_run(arguments: list[str], plugins: object = None) -> int:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        except KeyboardInterrupt:
            raise TypeError("unsupported operand type(s) for -: 'NoneType' and 'int'") \
                from None
        raise AssertionError("the grader's handler did not interrupt the run")

    monkeypatch.setattr(grade_cli.pytest, "main", interrupted_run)
    results = tmp_path / "out" / "results.json"
    args = build_parser().parse_args(["grade", str(CORRECT), "--results", str(results)])
    assert grade_cli.run_grade(args) == 128 + signal.SIGTERM
    assert capsys.readouterr().err.splitlines()[-1] == \
        "graders: the grading was interrupted by SIGTERM: no score"
    assert interrupted_by_signal(json.loads(results.read_text(encoding="utf-8"))) == "SIGTERM"
