"""Paths as people type them, outputs that never destroy an input, and bounded numbers:
every command run as a user runs it (a separate process, from a working folder of its
own)."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import AS_ROOT, CORPUS, CORPUS_EXPECTED, REPO, assert_usage_error, graders, load

CORRECT = CORPUS / "correct" / "serving.py"
#: A name with a space and non-ASCII letters, as people name folders.
ODD = "my ré sumé"
#: Usage errors end before any grading: well within this many seconds, even on a busy machine.
BEFORE_GRADING_S = 20.0


def submission_folder(folder: Path, source: Path = CORRECT) -> Path:
    folder.mkdir(parents=True)
    shutil.copy(source, folder / "serving.py")
    return folder


def unwritable_folder(base: Path) -> Path:
    """A folder this user cannot create files in: mode 555 for an ordinary user; as root
    (who writes through modes), /sys, which takes no new files."""
    if not AS_ROOT:
        folder = base / "read-only"
        folder.mkdir(mode=0o555)
        return folder
    try:
        (Path("/sys") / ".probe").touch()
    except OSError:
        return Path("/sys")
    pytest.skip("no folder here refuses root's new files")


# --- paths as people type them ------------------------------------------------------------


def test_every_path_argument_of_every_command_is_made_absolute() -> None:
    from graders.cli import build_parser
    from graders.cli.paths import path_destinations

    assert path_destinations(build_parser()) >= {
        "submission", "results", "tracks", "golden", "classroom", "submission_metadata",
        "html", "json_report", "junit_xml", "submissions", "out", "mistakes", "target"}


def test_a_regrade_with_relative_paths_grades_every_submission(tmp_path: Path) -> None:
    """The instructor guide's form: a relative --out that does not exist yet."""
    members = {"correct": 100.0, "cache_ceil": CORPUS_EXPECTED["cache_ceil"].score}
    for name in members:
        submission_folder(tmp_path / ODD / name, CORPUS / name / "serving.py")
    run = graders("regrade", ODD, "--jobs", "2", "--out", f"dist/{ODD}/regrade",
                  "--no-histogram", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    with (tmp_path / "dist" / ODD / "regrade" / "grades.csv").open(encoding="utf-8") as handle:
        rows = {row["submission"]: row for row in csv.DictReader(handle)}
    assert {name: row["status"] for name, row in rows.items()} == dict.fromkeys(members,
                                                                                 "graded")
    assert {name: float(row["score"]) for name, row in rows.items()} == members


def test_a_grading_through_a_link_into_missing_folders_from_elsewhere(tmp_path: Path) -> None:
    submission_folder(tmp_path / "real" / ODD)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "elsewhere").mkdir()
    run = graders("grade", f"../link/{ODD}", "--results", f"new/{ODD}/results.json",
                  "--junit-xml", "../link/junit é.xml", "--html", "new/feedback.html", "-q",
                  cwd=tmp_path / "elsewhere")
    assert run.returncode == 0, run.stderr[-3000:]
    assert load(tmp_path / "elsewhere" / "new" / ODD / "results.json")["score"] == 100.0
    assert (tmp_path / "real" / "junit é.xml").read_text(encoding="utf-8").count(
        "<testcase") == 48  # the graded tests on the four tracks
    assert (tmp_path / "elsewhere" / "new" / "feedback.html").stat().st_size > 0


def test_tracks_commands_take_a_relative_tracks_folder(tmp_path: Path) -> None:
    shutil.copytree(REPO / "tracks", tmp_path / ODD)
    (tmp_path / "elsewhere").mkdir()
    run = graders("tracks", "check", "--tracks", f"../{ODD}", cwd=tmp_path / "elsewhere")
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("ok") == len(list((REPO / "tracks").glob("*.toml")))


def test_tasks_grade_reads_every_path_from_the_callers_folder(tmp_path: Path) -> None:
    submission_folder(tmp_path / ODD)
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    run = subprocess.run([sys.executable, str(REPO / "tasks.py"), "grade", ODD,
                          "--html", "feedback é.html", "-q"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    assert (tmp_path / "feedback é.html").stat().st_size > 0
    assert load(REPO / "results" / "results.json")["score"] == 100.0


# --- no option can destroy an input --------------------------------------------------------

OUTPUT_FLAGS = ("--results", "--html", "--junit-xml", "--classroom", "--json-report")


@pytest.mark.parametrize("flag", OUTPUT_FLAGS)
@pytest.mark.parametrize("given", ["file", "folder"])
def test_an_output_that_names_the_submission_is_refused_and_the_submission_kept(
        tmp_path: Path, flag: str, given: str) -> None:
    folder = submission_folder(tmp_path / "d")
    before = (folder / "serving.py").read_bytes()
    submission = "d/serving.py" if given == "file" else "d"
    run = graders("grade", submission, flag, "d/serving.py", "--timeout", "-1", cwd=tmp_path)
    assert run.returncode == 2
    run = graders("grade", submission, flag, "d/serving.py", cwd=tmp_path)
    assert_usage_error(run, flag, "is the submission")
    assert (folder / "serving.py").read_bytes() == before


@pytest.mark.parametrize(("what", "arguments", "fragment"), [
    ("a track file", ["--tracks", "t", "--results", "t/iphone.toml"], "is in the tracks folder"),
    ("the golden file", ["--golden", "golden.json", "--html", "golden.json"],
     "is the golden file"),
    ("the metadata", ["--submission-metadata", "m.json", "--classroom", "m.json"],
     "is the submission metadata"),
    ("the grader's code", ["--results", str(REPO / "graders" / "x.json")],
     "is in the grader's code"),
])
def test_an_output_that_names_another_input_or_output_is_refused_untouched(
        tmp_path: Path, what: str, arguments: list[str], fragment: str) -> None:
    submission_folder(tmp_path / "d")
    shutil.copytree(REPO / "tracks", tmp_path / "t")
    for name in ("golden.json", "m.json"):
        (tmp_path / name).write_text("{}", encoding="utf-8")
    inputs = {path: path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()}
    run = graders("grade", "d", *arguments, cwd=tmp_path)
    assert_usage_error(run, fragment)
    assert {path: path.read_bytes() for path in inputs} == inputs, what


@pytest.mark.parametrize("arguments", [
    ["export", "gradescope", str(REPO / "tracks" / "x.zip")],
    ["export", "gradescope", str(REPO / "README.md")],
    ["export", "student", str(REPO / "graders" / "bundle")],
])
def test_an_export_into_the_graders_own_sources_is_refused(arguments: list[str]) -> None:
    target = Path(arguments[-1]).name  # not the whole path: a checkout may be called bundle
    assert_usage_error(graders(*arguments), "outputs never" if target in ("bundle", "x.zip")
                       else "never overwrites")
    assert not (REPO / "tracks" / "x.zip").exists()
    assert not (REPO / "graders" / "bundle").exists()


@pytest.mark.parametrize("out", [".", "class"])
def test_a_regrade_out_that_holds_the_class_is_refused(tmp_path: Path, out: str) -> None:
    submission_folder(tmp_path / "class" / "alice")
    assert_usage_error(graders("regrade", "class", "--out", out, cwd=tmp_path),
                       "holds the submissions")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["alice", "class", "serving.py"]


@pytest.mark.parametrize("flag", OUTPUT_FLAGS)
def test_an_unwritable_output_is_one_line_before_grading_and_nothing_is_left(
        tmp_path: Path, flag: str) -> None:
    submission_folder(tmp_path / "d")
    blocked = unwritable_folder(tmp_path)
    (tmp_path / "results.json").write_text('{"score": 100}', encoding="utf-8")
    outputs = {"--results": "results.json", flag: str(blocked / "out.file")}
    started = time.monotonic()
    run = graders("grade", "d", *[part for pair in outputs.items() for part in pair],
                  cwd=tmp_path)
    assert_usage_error(run, flag, "cannot be written")
    assert time.monotonic() - started < BEFORE_GRADING_S
    assert not (tmp_path / "results.json").exists() or flag == "--results"


@pytest.mark.parametrize("arguments", [
    ["regrade", "class", "--out", "{blocked}/regrade"],
    ["export", "gradescope", "{blocked}/a.zip"],
    ["export", "student", "{blocked}/bundle"],
])
def test_every_command_refuses_an_unwritable_output_in_one_line(
        tmp_path: Path, arguments: list[str]) -> None:
    submission_folder(tmp_path / "class" / "alice")
    blocked = unwritable_folder(tmp_path)
    run = graders(*[part.format(blocked=blocked) for part in arguments], cwd=tmp_path)
    assert_usage_error(run)


# --- every usage error leaves the same thing behind ----------------------------------------


def duplicate_tracks(folder: Path) -> None:
    shutil.copytree(REPO / "tracks", folder)
    shutil.copy(folder / "iphone.toml", folder / "iphone_copy.toml")


@pytest.mark.parametrize(("arguments", "fragment"), [
    (["d", "--tracks", "missing"], "does not exist"),
    (["d", "--tracks", "dup"], "already used"),
    (["nowhere"], "not found"),
    (["d", "--timeout", "2147484"], "--timeout must lie in"),
    (["d", "--html", "r.html", "--junit-xml", "r.html"], "also the path of"),
    (["d", "--html", "hard.json"], "also the path of"),  # a hard link to results.json
])
def test_a_usage_error_leaves_no_earlier_results(tmp_path: Path, arguments: list[str],
                                                 fragment: str) -> None:
    submission_folder(tmp_path / "d")
    duplicate_tracks(tmp_path / "dup")
    (tmp_path / "results.json").write_text('{"score": 100.0}', encoding="utf-8")
    os.link(tmp_path / "results.json", tmp_path / "hard.json")
    run = graders("grade", *arguments, "--results", "results.json", cwd=tmp_path)
    assert_usage_error(run, fragment)
    assert not (tmp_path / "results.json").exists()


def test_a_submission_without_serving_py_replaces_earlier_results_with_0_and_the_reason(
        tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "results.json").write_text('{"score": 100.0}', encoding="utf-8")
    run = graders("grade", "empty", "--results", "results.json", cwd=tmp_path)
    assert_usage_error(run, "serving.py not found")
    document = load(tmp_path / "results.json")
    assert document["score"] == 0.0
    assert "serving.py not found" in document["output"]


# --- bounds are bounded --------------------------------------------------------------------


@pytest.mark.parametrize(("arguments", "fragment"), [
    (["grade", "d", "--timeout", "2147484"], "--timeout must lie in (0, 86400]"),
    (["grade", "d", "--timeout", "0"], "--timeout must lie in (0, 86400]"),
    (["grade", "d", "--time-budget", "1e9"], "--time-budget must lie in (0, 86400]"),
    (["grade", "d", "--examples", "0"], "--examples must lie in [1, 10000]"),
    (["grade", "d", "--examples", "1e3"], "--examples expected a whole number"),
    (["grade", "d", "--rel-tol", "2"], "--rel-tol must lie in [0, 1]"),
    (["grade", "d", "--abs-tol", "-1"], "--abs-tol must lie in [0, 1]"),
    (["grade", "d", "--fail-under", "101"], "--fail-under must lie in [0, 100]"),
    (["grade", "d", "--max-score", "50", "--fail-under", "60"],
     "--fail-under must lie in [0, 50]"),
    (["grade", "d", "--exact-p99-points", "1e6"], "--exact-p99-points must lie in [0, 1000]"),
    (["export", "gradescope", "o/a.zip", "--exact-p99-points", "-1"],
     "--exact-p99-points must lie in [0, 1000]"),
    (["regrade", "class", "--out", "o", "--jobs", "65"], "--jobs: must lie in [1, 64]"),
    (["regrade", "class", "--out", "o", "--timeout", "1e9"], "--timeout: must lie in (0, 86400]"),
])
def test_every_numeric_option_is_checked_against_its_range(
        tmp_path: Path, arguments: list[str], fragment: str) -> None:
    submission_folder(tmp_path / "d")
    submission_folder(tmp_path / "class" / "alice")
    started = time.monotonic()
    run = graders(*arguments, cwd=tmp_path)
    assert run.returncode == 2
    assert len(run.stderr.splitlines()) == 1, run.stderr
    assert fragment in run.stderr
    assert time.monotonic() - started < BEFORE_GRADING_S
    assert not (tmp_path / "o").exists()
