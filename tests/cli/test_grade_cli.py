"""``graders grade`` run as a user runs it: a separate process, its exit code, its files."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    AS_ROOT,
    CORPUS,
    GRADERS_SCRIPT,
    INSTRUCTOR,
    REPO,
    assert_usage_error,
    graders,
    load,
    ordinary_user,
)

from graders import __version__
from graders.versions import grading_versions

CORRECT = CORPUS / "correct" / "serving.py"


def assert_clean_run(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    assert "INTERNALERROR" not in output


# --- full gradings (each costs a few seconds; keep them few) ------------------------------


@pytest.fixture(scope="module")
def correct_results(tmp_path_factory: pytest.TempPathFactory) -> tuple[
        subprocess.CompletedProcess[str], Any]:
    results = tmp_path_factory.mktemp("correct") / "results.json"
    run = graders("grade", CORRECT.parent, "--results", results)
    return run, load(results) if results.exists() else None


def test_grading_the_correct_submission_exits_0_with_full_marks(
        correct_results: tuple[subprocess.CompletedProcess[str], Any]) -> None:
    run, document = correct_results
    assert_clean_run(run)
    assert document["score"] == 100.0
    assert document["extra_data"]["max_score"] == 100.0
    assert document["tests"]
    assert all(test["status"] == "passed" for test in document["tests"])
    assert all(test["score"] == test["max_score"] for test in document["tests"])
    assert "TOTAL 100.00 / 100.00" in run.stdout


def test_the_results_file_follows_the_gradescope_format(
        correct_results: tuple[subprocess.CompletedProcess[str], Any]) -> None:
    _, document = correct_results
    assert {"score", "execution_time", "output", "stdout_visibility", "tests"} <= set(document)
    assert document["extra_data"]["schema_version"] == 1
    assert document["execution_time"] > 0
    numbers = [test["number"] for test in document["tests"]]
    assert numbers == [str(index) for index in range(1, len(numbers) + 1)]
    for test in document["tests"]:
        assert {"name", "number", "score", "max_score", "status", "output", "tags",
                "visibility", "extra_data"} <= set(test)
        assert test["tags"]
        assert test["tags"][0] in {
            "serve", "erlang_c", "queueing_latency", "batching_tax", "transformer_state_gb",
            "cache_capacity", "cold_start_latency", "quantity_to_float",
            "serving_track_profile"}
    assert round(sum(test["max_score"] for test in document["tests"]), 2) == 100.0


@pytest.fixture(scope="module")
def buggy_results(tmp_path_factory: pytest.TempPathFactory) -> tuple[
        subprocess.CompletedProcess[str], Any]:
    """The correct submission with one bug: passes rounded down instead of up."""
    folder = tmp_path_factory.mktemp("buggy")
    source = CORRECT.read_text(encoding="utf-8")
    right = "passes = math.ceil(n_requests / batch_size)"
    assert right in source
    (folder / "serving.py").write_text(source.replace(right, "passes = n_requests // batch_size"),
                                       encoding="utf-8")
    results = folder / "results.json"
    run = graders("grade", folder / "serving.py", "--results", results)
    return run, load(results) if results.exists() else None


def test_a_submission_with_one_bug_exits_0_with_a_lower_score(
        buggy_results: tuple[subprocess.CompletedProcess[str], Any]) -> None:
    run, document = buggy_results
    assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-3000:])
    assert "INTERNALERROR" not in run.stdout + run.stderr
    assert 50.0 < document["score"] < 100.0
    failed = [test for test in document["tests"] if test["status"] == "failed"]
    assert failed
    assert {test["tags"][0] for test in failed} == {"serve"}
    assert "TOTAL 100.00" not in run.stdout


def test_the_feedback_on_a_buggy_submission_shows_no_grader_tracebacks(
        buggy_results: tuple[subprocess.CompletedProcess[str], Any]) -> None:
    # Students get function, case, field, expected and got; not the grader's own frames.
    run, document = buggy_results
    outputs = [test["output"] for test in document["tests"]]
    for text in [run.stdout, run.stderr, *outputs]:
        assert "Traceback" not in text
        assert "graders/grading/checks.py" not in text


def test_a_submission_that_exits_at_import_is_graded_0_with_a_valid_results_file(
        tmp_path: Path) -> None:
    (tmp_path / "serving.py").write_text("import os\nos._exit(0)\n", encoding="utf-8")
    results = tmp_path / "results.json"
    run = graders("grade", tmp_path, "--results", results)
    assert_clean_run(run)
    document = load(results)
    assert document["score"] == 0.0
    assert document["tests"]
    assert all(test["status"] == "failed" for test in document["tests"])
    visible = [test["output"] for test in document["tests"] if test["visibility"] == "visible"]
    assert any("could not be imported" in output for output in visible)


def test_a_helper_module_beside_serving_py_is_not_graded_and_the_message_says_so(
        tmp_path: Path) -> None:
    """The chosen rule (student README, "Rules of the road"): only serving.py is graded."""
    submission = tmp_path / "submission"
    submission.mkdir()
    source = CORRECT.read_text(encoding="utf-8")
    future = "from __future__ import annotations\n"
    assert future in source
    (submission / "serving.py").write_text(source.replace(future, future + "import helpers\n"),
                                           encoding="utf-8")
    (submission / "helpers.py").write_text("ANSWER = 42\n", encoding="utf-8")
    results = tmp_path / "results.json"
    run = graders("grade", submission, "--results", results, "-q")
    assert run.returncode == 0, run.stderr[-3000:]
    document = load(results)
    assert document["score"] == 0.0
    first = document["output"].splitlines()[0]
    assert "No module named 'helpers'" in first
    assert "only serving.py is graded" in first
    assert "only serving.py is graded" in run.stdout


def test_the_console_script_ignores_everything_in_the_submission_folder_but_serving_py(
        tmp_path: Path) -> None:
    submission = tmp_path / "submission"
    markers = tmp_path / "markers"
    submission.mkdir()
    markers.mkdir()
    shutil.copy(CORRECT, submission / "serving.py")
    results = tmp_path / "results.json"

    def writes_marker(name: str, then: str = "") -> str:
        return (f"open({str(markers / name)!r}, 'w').close()\n"
                f"{then}\n")

    (submission / "conftest.py").write_text(
        writes_marker("conftest", "import sys\nsys.exit(3)"), encoding="utf-8")
    (submission / "sitecustomize.py").write_text(writes_marker("sitecustomize"),
                                                 encoding="utf-8")
    (submission / "usercustomize.py").write_text(writes_marker("usercustomize"),
                                                 encoding="utf-8")
    (submission / "pytest.ini").write_text(
        "[pytest]\naddopts = --grader-max-score 1 -p no:graders.plugin\n", encoding="utf-8")
    (submission / "test_serving.py").write_text(
        writes_marker("test_module",
                      "import json\n"
                      f"json.dump({{'score': 999}}, open({str(results)!r}, 'w'))\n"
                      "import os\nos._exit(0)"),
        encoding="utf-8")
    (submission / "reference").mkdir()
    (submission / "reference" / "__init__.py").write_text(
        writes_marker("reference", "raise ImportError('shadowed')"), encoding="utf-8")

    assert GRADERS_SCRIPT.is_file()
    run = graders("grade", ".", "--results", results, script=True, cwd=submission)
    assert_clean_run(run)
    assert load(results)["score"] == 100.0
    assert sorted(path.name for path in markers.iterdir()) == []


def test_max_score_and_json_report_options_reach_the_run(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    report = tmp_path / "report.json"
    run = graders("grade", CORRECT, "--results", results, "--max-score", "20",
                  "--json-report", report, "--quiet")
    assert_clean_run(run)
    document = load(results)
    assert document["score"] == 20.0
    assert document["extra_data"]["max_score"] == 20.0
    assert load(report)["exitcode"] == 0


# --- usage and configuration errors: exit 2, one line, no traceback -----------------------


def test_a_missing_submission_path_is_a_usage_error(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    result = graders("grade", missing, "--results", tmp_path / "results.json")
    assert_usage_error(result, str(missing), "not found")
    assert not (tmp_path / "results.json").exists()


def test_a_folder_without_serving_py_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "solution.py").write_text("x = 1\n", encoding="utf-8")
    assert_usage_error(graders("grade", tmp_path), str(tmp_path), "not found")


@pytest.mark.parametrize("name_the_link", [True, False], ids=["file", "folder"])
def test_a_symlinked_serving_py_is_a_usage_error(tmp_path: Path, name_the_link: bool) -> None:
    (tmp_path / "serving.py").symlink_to(CORRECT)
    target = tmp_path / "serving.py" if name_the_link else tmp_path
    assert_usage_error(graders("grade", target), "symbolic link")


@pytest.mark.parametrize(
    ("value", "fragment"),
    [("-3", "must be a number > 0 and <= 1,000,000, got '-3'"),
     ("abc", "expected a number, got 'abc'"), ("0", "> 0"), ("nan", "expected a number"),
     ("inf", "expected a number"), ("12.1234567", "must have at most 6 decimals")],
)
def test_a_bad_max_score_is_a_usage_error(value: str, fragment: str) -> None:
    assert_usage_error(graders("grade", CORRECT, f"--max-score={value}"), "--max-score",
                       fragment)


def test_a_negative_max_score_given_as_a_separate_argument_is_a_usage_error() -> None:
    assert_usage_error(graders("grade", CORRECT, "--max-score", "-3"), "--max-score")


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [(["grdae", "serving.py"], "invalid choice: 'grdae'"),
     (["grade", str(CORRECT), "--bogus"], "unrecognized arguments: --bogus"),
     (["--bogus", "grade", str(CORRECT)], "unrecognized arguments: --bogus"),
     ([], "required")],
    ids=["subcommand", "grade-flag", "top-flag", "nothing"],
)
def test_an_unknown_subcommand_or_flag_is_a_usage_error(arguments: list[str],
                                                        fragment: str) -> None:
    assert_usage_error(graders(*arguments), fragment)


def test_a_grade_without_a_submission_is_a_one_line_usage_error() -> None:
    result = graders("grade")
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(("graders: error: ", "graders grade: error: "))
    assert "submission" in line
    assert "Traceback" not in result.stderr


def test_a_tracks_folder_with_a_broken_toml_is_a_usage_error_naming_the_file(
        tmp_path: Path) -> None:
    tracks = tmp_path / "tracks"
    tracks.mkdir()
    (tracks / "broken.toml").write_text("[track\nid = 'x'\n", encoding="utf-8")
    results = tmp_path / "results.json"
    result = graders("grade", CORRECT, "--tracks", tracks, "--results", results)
    assert_usage_error(result, "broken.toml")
    assert not results.exists()


def test_a_bad_track_in_the_default_folder_is_a_graders_error_line(tmp_path: Path) -> None:
    """The grader's own tracks/ is read by the plugin, not by ``graders grade``: its error
    still reads ``graders: error:``, never pytest's ``ERROR:``."""
    checkout = tmp_path / "checkout"
    for name in ("graders", "reference", "tracks"):
        shutil.copytree(REPO / name, checkout / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    (checkout / "tracks" / "zz_broken.toml").write_text("[track\nid = 'x'\n", encoding="utf-8")
    assert_usage_error(graders("grade", CORRECT, "-q", cwd=checkout), "zz_broken.toml")


@pytest.mark.parametrize("kind", ["missing", "empty"])
def test_a_tracks_folder_that_is_missing_or_empty_is_a_usage_error(tmp_path: Path,
                                                                   kind: str) -> None:
    tracks = tmp_path / "tracks"
    if kind == "empty":
        tracks.mkdir()
    assert_usage_error(graders("grade", CORRECT, "--tracks", tracks), "tracks folder")


def test_the_console_script_reports_usage_errors_the_same_way(tmp_path: Path) -> None:
    assert_usage_error(graders("grade", tmp_path / "nowhere", script=True), "not found")


def test_grade_has_every_grading_option_of_the_plugin() -> None:
    from graders.plugin.settings import OPTIONS, grade_flag

    result = graders("grade", "--help")
    assert result.returncode == 0
    for option in OPTIONS:
        if option.name != "student":
            assert f"{grade_flag(option)} {option.metavar}" in result.stdout
            assert option.flag in result.stdout.replace("-\n", "-").replace(" ", "")
    assert "--timeout SECONDS" in result.stdout
    assert "--examples N" in result.stdout


def test_grade_passes_its_grading_options_to_the_run(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    result = graders("grade", CORRECT, "--results", results, "--timeout", "5",
                     "--rel-tol", "0.001", "--abs-tol", "0.0001", "--examples", "3",
                     "--time-budget", "60")
    assert result.returncode == 0, result.stderr
    assert load(results)["score"] == 100.0
    bad = graders("grade", CORRECT, "--timeout", "0")
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1
    assert "--timeout" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_grade_quiet_prints_only_the_score_table_and_the_counts(tmp_path: Path) -> None:
    result = graders("grade", CORRECT, "-q", "--results", tmp_path / "results.json")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert lines[-1] == "48 passed"
    assert any(line.startswith("TOTAL 100.00") for line in lines)
    assert "results written" not in result.stdout
    assert not any(set(line.split("[")[0].strip()) <= set(".F") and line.strip("[]% 0123456789")
                   for line in lines)
    assert not any(line.strip().startswith("[") and line.strip().endswith("%]")
                   for line in lines), "no bare progress line"


def test_the_top_level_help_has_no_raw_markup_and_tracks_has_no_list() -> None:
    top = graders("--help")
    assert "``" not in top.stdout
    tracks = graders("tracks", "--help")
    assert "list" not in tracks.stdout


@pytest.mark.parametrize("columns", ["20", "200"])
def test_graders_version_prints_each_version_on_its_own_line_at_any_width(
        columns: str) -> None:
    run = graders("--version", script=True, env={"COLUMNS": columns})
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    assert run.stdout.splitlines() == [f"{name} {version}" for name, version in
                                       grading_versions().items()]
    assert [line.split()[0] for line in run.stdout.splitlines()] == [
        "serving-lab-grader", "pytest", "hypothesis", "pint", "python"]
    assert run.stdout.splitlines()[0] == f"serving-lab-grader {__version__}"


GC_PROBE = """
import gc, sys
from graders.cli import main
code = main(["grade", sys.argv[1], "--results", sys.argv[2]], one_shot=sys.argv[3] == "yes")
print(code, gc.isenabled())
"""


@pytest.mark.parametrize("one_shot", [True, False])
def test_only_a_one_shot_grading_collects_no_garbage(tmp_path: Path, one_shot: bool) -> None:
    """The ``graders`` command ends after its grading: it runs without automatic garbage
    collection. A long-lived caller (the regrade's grading process) keeps it: its garbage
    would pile up grading after grading."""
    run = subprocess.run([sys.executable, "-c", GC_PROBE, str(CORRECT),
                          str(tmp_path / "results.json"), "yes" if one_shot else "no"],
                         capture_output=True, text=True, check=True, cwd=REPO)
    code, enabled = run.stdout.split()[-2:]
    assert code == "0"
    assert enabled == str(not one_shot)


@pytest.mark.skipif(not AS_ROOT, reason="the account is made as root (CI runs as root)")
def test_a_persons_account_named_as_the_sandbox_user_is_refused_before_grading(
        tmp_path: Path) -> None:
    """An instructor's own account: a grading would kill its processes and delete its
    files in /tmp; refused in one line, and nothing of it is touched."""
    person = ordinary_user(INSTRUCTOR)
    run = graders("grade", CORPUS / "correct", "--sandbox-user", person.pw_name,
                  "--results", tmp_path / "results.json")
    assert_usage_error(run, f"sandbox user {person.pw_name!r} is not an account the grader "
                            "made", "its home folder")
    assert not (tmp_path / "results.json").exists()
