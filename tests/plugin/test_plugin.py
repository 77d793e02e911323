"""The pytest plugin, tested the way pytest plugins are: with ``pytester``."""

from __future__ import annotations

import glob
import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import CORPUS, REPO

from graders.grading.scoring import SCORE_DECIMALS

CORRECT = CORPUS / "correct" / "serving.py"
TEMPLATE = REPO / "student_template" / "serving.py"
TRACKS = REPO / "tracks"
#: A fast slice of the suite: serve's cases and one per-track test.
FAST = ["-k", "test_serve or test_transformer_state_gb"]


def strict_json(path: Path) -> Any:
    def reject(constant: str) -> None:
        raise ValueError(f"non-standard JSON constant {constant}")

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=reject)


def bugged(pytester: pytest.Pytester, old: str, new: str, name: str = "serving.py") -> Path:
    """A copy of the correct submission with one edit."""
    source = CORRECT.read_text(encoding="utf-8")
    assert old in source
    path = pytester.path / name
    path.write_text(source.replace(old, new), encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def correct_submission(pytester: pytest.Pytester) -> Path:
    """The correct submission as ``serving.py`` in the test folder (paths stay relative,
    so the folder is pytest's rootdir and its ini file is read)."""
    path = pytester.path / "serving.py"
    shutil.copy(CORRECT, path)
    return path


def test_without_a_student_the_plugin_adds_no_tests(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_plain():\n    assert True\n")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*serving-lab score*")
    result.stdout.no_fnmatch_line("INTERNALERROR*")


def test_a_correct_submission_scores_exactly_the_maximum(pytester: pytest.Pytester) -> None:
    results = pytester.path / "results.json"
    result = pytester.runpytest("--student", "serving.py", "--grader-results", str(results))
    result.assert_outcomes(passed=48)
    result.stdout.fnmatch_lines(["*serving-lab score*", "TOTAL 100.00 / 100.00"])
    document = strict_json(results)
    assert document["score"] == 100.0
    assert len(document["tests"]) == 48
    assert all(test["score"] == test["max_score"] for test in document["tests"])
    assert math.isclose(sum(test["max_score"] for test in document["tests"]), 100.0,
                        abs_tol=1e-3)


def test_the_template_scores_zero_and_still_gets_every_test(pytester: pytest.Pytester) -> None:
    shutil.copy(TEMPLATE, pytester.path / "template.py")
    result = pytester.runpytest("--student", "template.py", "--grader-results", "results.json")
    results = pytester.path / "results.json"
    result.assert_outcomes(failed=48)
    document = strict_json(results)
    assert document["score"] == 0.0
    assert len(document["tests"]) == 48
    outputs = [test["output"] for test in document["tests"] if test["visibility"] == "visible"]
    assert all("not implemented" in output.lower() for output in outputs)
    result.stdout.no_fnmatch_line("INTERNALERROR*")


def test_tags_name_the_function_and_the_track(pytester: pytest.Pytester) -> None:
    results = pytester.path / "results.json"
    pytester.runpytest("--student", "serving.py", "--grader-results", str(results), *FAST)
    tags = {tuple(test["tags"]) for test in strict_json(results)["tests"]}
    assert ("serve",) in tags
    assert {("transformer_state_gb", track) for track in
            ("cloud_fleet", "iphone", "oura_ring", "robotaxi")} <= tags


def test_student_may_name_a_folder_holding_serving_py(pytester: pytest.Pytester) -> None:
    folder = pytester.mkdir("submission")
    shutil.copy(CORRECT, folder / "serving.py")
    result = pytester.runpytest("--student", "submission", *FAST)
    result.assert_outcomes(passed=5)


def test_a_missing_student_file_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--student", "nowhere/serving.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*submission '*/nowhere/serving.py' not found*"])
    result.stdout.no_fnmatch_line("INTERNALERROR*")


def test_the_student_ini_key_is_relative_to_the_ini_file(pytester: pytest.Pytester) -> None:
    folder = pytester.mkdir("lab")
    shutil.copy(CORRECT, folder / "serving.py")
    pytester.makeini("[pytest]\ngrader_student = lab/serving.py\n"
                     "grader_results = out/results.json\n")
    sub = pytester.mkdir("elsewhere")
    result = pytester.runpytest(*FAST, "--rootdir", str(pytester.path),
                                "-c", str(pytester.path / "tox.ini"), str(sub))
    result.assert_outcomes(passed=5)
    document = strict_json(pytester.path / "out" / "results.json")
    # a selection: serve (8 points) and transformer_state_gb (4) ran, out of the 100
    assert document["score"] == 12.0
    assert document["extra_data"]["max_score"] == 100.0
    assert document["extra_data"]["partial_run"].startswith("partial run: 5 of 48 graded")


def test_max_score_scales_every_test(pytester: pytest.Pytester) -> None:
    results = pytester.path / "results.json"
    pytester.runpytest("--student", "serving.py", "--grader-results", str(results),
                       "--grader-max-score", "40")
    document = strict_json(results)
    assert document["score"] == 40.0
    assert document["extra_data"]["max_score"] == 40.0


def test_the_max_score_ini_key_scales_every_test(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ngrader_max_score = 10\n")
    results = pytester.path / "results.json"
    pytester.runpytest("--student", "serving.py", "--grader-results", str(results), *FAST)
    document = strict_json(results)
    # serve (8 points) and transformer_state_gb (4 points) of the 100-point suite, scaled to 10
    assert document["extra_data"]["max_score"] == 10.0
    assert document["score"] == 1.2


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--grader-max-score", "-5", "must be a number > 0 and <= 1,000,000"),
        ("--grader-max-score", "many", "expected a number"),
        ("--grader-max-score", "33.3333333", "must have at most 6 decimals"),
        ("--grader-rel-tol", "-1e-3", "must lie in [0, 1], got '-1e-3'"),
        ("--grader-rel-tol", "2", "must lie in [0, 1], got '2'"),
        ("--grader-abs-tol", "nan", "must lie in [0, 1], got 'nan'"),
        ("--grader-timeout", "0", "must lie in (0, 86400], got '0'"),
        ("--grader-timeout", "2147484", "must lie in (0, 86400], got '2147484'"),
        ("--grader-time-budget", "1e9", "must lie in (0, 86400], got '1e9'"),
        ("--grader-examples", "0", "must lie in [1, 10000], got '0'"),
        ("--grader-examples", "10001", "must lie in [1, 10000], got '10001'"),
    ],
)
def test_invalid_flag_values_are_usage_errors(pytester: pytest.Pytester, flag: str,
                                              value: str, message: str) -> None:
    result = pytester.runpytest("--student", "serving.py", f"{flag}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{glob.escape(message)}*"])  # [ is a pattern
    result.stdout.no_fnmatch_line("INTERNALERROR*")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("grader_max_score", "zero", "ini key grader_max_score: expected a number"),
        ("grader_rel_tol", "-1", "ini key grader_rel_tol: must lie in [0, 1]"),
        ("grader_abs_tol", "inf", "ini key grader_abs_tol: must lie in [0, 1]"),
        ("grader_timeout", "-2", "ini key grader_timeout: must lie in (0, 86400]"),
        ("grader_timeout", "2147484", "ini key grader_timeout: must lie in (0, 86400]"),
        ("grader_examples", "2.5", "ini key grader_examples: expected a whole number"),
    ],
)
def test_invalid_ini_values_are_usage_errors(pytester: pytest.Pytester, key: str, value: str,
                                             message: str) -> None:
    pytester.makeini(f"[pytest]\n{key} = {value}\n")
    result = pytester.runpytest("--student", "serving.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{glob.escape(message)}*"])  # [ is a pattern
    result.stdout.no_fnmatch_line("INTERNALERROR*")


def test_the_header_reports_the_settings_in_force(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ngrader_examples = 7\ngrader_abs_tol = 1e-6\n")
    result = pytester.runpytest("--student", "serving.py", "--grader-rel-tol", "0.01",
                                "--grader-timeout", "1.5", "--collect-only", "-v")
    result.stdout.fnmatch_lines([
        "serving-grader: grading *serving.py on tracks cloud_fleet, iphone, oura_ring, robotaxi",
        "serving-grader: tolerance rel 0.01, abs 1e-06, 1.5 s per call, max score 100, "
        "7 examples per invariant",
        # the row of graders.sandbox.modes, its layers, then what they mean
        "serving-grader: root * (*): the student's code runs as an unprivileged sandbox "
        "user of its own* (serving-sandbox*, uid *)"
        if os.geteuid() == 0 else "serving-grader: * (*): *the student's code runs as this user*",
    ])


def test_the_header_names_the_protections_only_under_v(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--student", "serving.py", "--collect-only")
    result.stdout.fnmatch_lines(["serving-grader: grading *serving.py on tracks *",
                                 "serving-grader: tolerance *"])
    result.stdout.no_fnmatch_line("*the student's code runs as*")
    result.stdout.no_fnmatch_line("*bubblewrap*")


def test_a_wider_relative_tolerance_accepts_small_errors(pytester: pytest.Pytester) -> None:
    student = bugged(pytester, "return ServeResult(total, n_requests / (total / 1000), passes)",
                     "return ServeResult(total * 1.0001, n_requests / (total / 1000), passes)")
    strict = pytester.runpytest("--student", str(student), "-k", "test_serve")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(["*total_ms: expected 5632, got 5632.5632*"])
    loose = pytester.runpytest("--student", str(student), "-k", "test_serve",
                               "--grader-rel-tol", "1e-3")
    loose.assert_outcomes(passed=1)


def test_the_absolute_tolerance_ini_key_accepts_small_errors(pytester: pytest.Pytester) -> None:
    student = bugged(pytester, "return ServeResult(total, n_requests / (total / 1000), passes)",
                     "return ServeResult(total + 0.01, n_requests / (total / 1000), passes)")
    pytester.makeini("[pytest]\ngrader_abs_tol = 0.02\n")
    result = pytester.runpytest("--student", str(student), "-k", "test_serve")
    result.assert_outcomes(passed=1)


def test_a_hanging_function_fails_within_the_timeout(pytester: pytest.Pytester) -> None:
    student = bugged(pytester, "def serve(n_requests, batch_size, *, overhead_ms=20.0, "
                     "marginal_ms=2.0):\n", "def serve(n_requests, batch_size, *, "
                     "overhead_ms=20.0, marginal_ms=2.0):\n    while True:\n        pass\n")
    result = pytester.runpytest("--student", str(student), "--grader-timeout", "0.3",
                                "-k", "test_serve")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*hangs: stopped at the per-call deadline, after 0.3 s*"])
    assert result.duration < 30


def test_the_tracks_option_grades_the_tracks_of_that_folder(pytester: pytest.Pytester) -> None:
    tracks = pytester.mkdir("tracks")
    shutil.copy(TRACKS / "iphone.toml", tracks / "iphone.toml")
    result = pytester.runpytest("--student", "serving.py", "--grader-tracks", "tracks",
                                "-k", "test_transformer_state_gb", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_transformer_state_gb?iphone? PASSED*"])


def test_the_tracks_ini_key_grades_the_tracks_of_that_folder(pytester: pytest.Pytester) -> None:
    tracks = pytester.mkdir("mytracks")
    shutil.copy(TRACKS / "robotaxi.toml", tracks / "robotaxi.toml")
    pytester.makeini("[pytest]\ngrader_tracks = mytracks\n")
    result = pytester.runpytest("--student", "serving.py", "-k", "test_transformer_state_gb")
    result.assert_outcomes(passed=1)


def test_a_bad_track_file_stops_the_run_with_one_clear_line(pytester: pytest.Pytester) -> None:
    tracks = pytester.mkdir("tracks")
    (tracks / "broken.toml").write_text("[track\nid = 'x'\n", encoding="utf-8")
    result = pytester.runpytest("--student", "serving.py", "--grader-tracks", "tracks")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    [line] = [line for line in result.stderr.lines if line.strip()]
    assert line.startswith("graders: error: "), line  # as every graders command says it
    assert "broken.toml" in line
    result.stdout.no_fnmatch_line("INTERNALERROR*")
    assert "Traceback" not in result.stderr.str()


def test_an_unimportable_submission_fails_every_test_with_one_message(
        pytester: pytest.Pytester) -> None:
    student = pytester.path / "serving.py"
    student.write_text("def serve(:\n", encoding="utf-8")
    results = pytester.path / "results.json"
    result = pytester.runpytest("--student", str(student), "--grader-results", str(results))
    result.assert_outcomes(failed=48)
    result.stdout.fnmatch_lines(["*serving.py could not be imported: SyntaxError*"])
    document = strict_json(results)
    assert document["score"] == 0.0
    assert len(document["tests"]) == 48
    assert "could not be imported" in document["output"]


def test_json_report_metadata_carries_score_and_max_score(pytester: pytest.Pytester) -> None:
    report = pytester.path / "report.json"
    student = bugged(pytester, "passes = math.ceil(n_requests / batch_size)",
                     "passes = n_requests // batch_size or 1")
    pytester.runpytest("--student", str(student), "--json-report", "--json-report-file",
                       str(report), *FAST)
    tests = {test["nodeid"]: test for test in strict_json(report)["tests"]}
    serve = tests["graders/suite/test_cases.py::test_serve"]["metadata"]
    assert 0 < serve["score"] < serve["max_score"]
    assert serve["function"] == "serve"
    state = tests["graders/suite/test_cases.py::test_transformer_state_gb[iphone]"]["metadata"]
    assert state["score"] == state["max_score"] > 0
    assert state["track"] == "iphone"


def test_partial_credit_is_the_fraction_of_passing_cases(pytester: pytest.Pytester) -> None:
    student = bugged(pytester, "passes = math.ceil(n_requests / batch_size)",
                     "passes = n_requests // batch_size or 1")
    results = pytester.path / "results.json"
    pytester.runpytest("--student", str(student), "--grader-results", str(results),
                       "-k", "test_serve")
    (serve,) = [test for test in strict_json(results)["tests"]
                if test["extra_data"]["nodeid"] == "graders/suite/test_cases.py::test_serve"]
    cases = serve["extra_data"]
    assert 0 < cases["passed_cases"] < cases["total_cases"]
    fraction = cases["passed_cases"] / cases["total_cases"]
    assert serve["score"] == round(serve["max_score"] * fraction, SCORE_DECIMALS)
    assert "passes: expected" in serve["output"]
    assert "hint: a partly filled last pass is still a pass" in serve["output"]


GRADED_TESTS = """
import pytest

from graders.grading.scoring import SCORE_DECIMALS

@pytest.mark.grader(points=3, function="serve")
def test_batched_total(student):
    \"\"\"Batched total is 672 ms\"\"\"
    assert student.call("serve", 256, 32)["total_ms"] == 672.0

@pytest.mark.grader(points=1, function="serve")
def test_skipped(student):
    pytest.skip("not today")

@pytest.mark.grader(points=1, function="serve")
@pytest.mark.xfail(reason="expected to fail")
def test_xfailed(student):
    assert False

@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")

@pytest.mark.grader(points=1, function="serve")
def test_setup_error(broken):
    pass

@pytest.mark.grader(points=2, function="serve", visibility="after_due_date")
def test_secret(student):
    assert student.call("serve", 256, 1)["total_ms"] == 1.0, "secret inputs 256, 1"
"""


def test_instructor_tests_are_scored_by_their_marker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_extra=GRADED_TESTS)
    results = pytester.path / "results.json"
    result = pytester.runpytest("--student", "serving.py", "--grader-results", str(results),
                                "-k", "test_extra")
    result.assert_outcomes(passed=1, skipped=1, xfailed=1, errors=1, failed=1)
    tests = {test["name"]: test for test in strict_json(results)["tests"]
             if "test_extra" in test["extra_data"]["nodeid"]}
    assert tests["Batched total is 672 ms"]["score"] == tests["Batched total is 672 ms"][
        "max_score"] > 0
    for name in ("test_skipped", "test_xfailed", "test_setup_error", "test_secret"):
        assert tests[name]["score"] == 0.0
        assert tests[name]["status"] == "failed"
    assert tests["test_secret"]["visibility"] == "after_due_date"
    assert "256" not in tests["test_secret"]["output"]


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("grader(5, function='serve')", "grader marker takes keywords only"),
        ("grader(points=-1, function='serve')", "grader points must be a finite number >= 0"),
        ("grader(points=True, function='serve')", "grader points must be a finite number >= 0"),
        ("grader(points=1)", "grader function must name a contract function"),
        ("grader(points=1, function='serve', visibility='secret')",
         "grader visibility must be one of visible, hidden, after_due_date, after_published"),
        ("grader(points=1, function='serve', weight=2)", "unknown grader marker keyword"),
    ],
)
def test_an_invalid_grader_marker_is_a_usage_error(pytester: pytest.Pytester, marker: str,
                                                   message: str) -> None:
    pytester.makepyfile(f"import pytest\n\n@pytest.mark.{marker}\ndef test_x():\n    pass\n")
    result = pytester.runpytest("--student", "serving.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{glob.escape(message)}*"])  # [ is a pattern
    result.stdout.no_fnmatch_line("INTERNALERROR*")


def test_the_grader_marker_is_registered_with_its_signature(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.grader(points, function, visibility='visible', "
                                 "unseen=None)*"])


def test_every_flag_is_documented_in_one_option_group(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines([
        "serving-lab grader:",
        "*--student=PATH*",
        "*--grader-results=PATH*",
        "*--grader-tracks=DIR*",
        "*--grader-max-score=POINTS*",
        "*--grader-rel-tol=REL*",
        "*--grader-abs-tol=ABS*",
        "*--grader-timeout=SECONDS*",
        "*--grader-examples=N*",
        "*--grader-sandbox-user=NAME*",
    ])
    for key in ("grader_student", "grader_results", "grader_tracks", "grader_max_score",
                "grader_rel_tol", "grader_abs_tol", "grader_timeout", "grader_examples",
                "grader_sandbox_user"):
        result.stdout.fnmatch_lines([f"*{key} *"])


def test_grading_twice_gives_identical_results(pytester: pytest.Pytester) -> None:
    student = bugged(pytester, "v = max(0.1, (1 + service_cv**2) / 2)",
                     "v = (1 + service_cv) / 2")
    documents = []
    for run in range(2):
        results = pytester.path / f"results{run}.json"
        pytester.runpytest("--student", str(student), "--grader-results", str(results))
        document = strict_json(results)
        del document["execution_time"]
        documents.append(document)
    assert documents[0] == documents[1]
    assert 0 < documents[0]["score"] < 100


@pytest.mark.skipif(os.geteuid() != 0, reason="the privilege drop needs root (CI runs as root)")
def test_a_sandbox_user_with_uid_0_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ngrader_sandbox_user = root\n")
    result = pytester.runpytest("--student", "serving.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*sandbox user 'root' has uid or gid 0*"])
    result.stdout.no_fnmatch_line("INTERNALERROR*")


def test_a_syntax_error_is_said_once_at_the_top(pytester: pytest.Pytester) -> None:
    (pytester.path / "serving.py").write_text("def serve(:\n", encoding="utf-8")
    result = pytester.runpytest("--student", "serving.py", "--tb=no", "-rf")
    text = result.stdout.str()
    assert text.count("SyntaxError") == 1
    feedback = text.index("serving-lab feedback")
    assert text.index("SyntaxError") < text.index("serving-lab score")
    assert text.index("SyntaxError") > feedback
    result.stdout.fnmatch_lines(["FAILED *serve* - serving.py does not import*"])
    result.stdout.no_fnmatch_line("INTERNALERROR*")


def test_with_x_what_did_not_run_is_one_line(pytester: pytest.Pytester) -> None:
    bugged(pytester, "def serve(", "def serve_unused(")
    result = pytester.runpytest("--student", "serving.py", "--tb=no", "-x")
    text = result.stdout.str()
    assert ": not run" not in text
    not_run = [line for line in text.splitlines() if line.startswith("not run: ")]
    assert len(not_run) == 1
    assert "graded tests (of " in not_run[0]
    result.stdout.no_fnmatch_line("INTERNALERROR*")


def test_the_short_summary_and_invariant_feedback_start_with_the_reason(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")  # pytest cuts summary lines at the terminal's width
    shutil.copy(TEMPLATE, pytester.path / "serving.py")
    result = pytester.runpytest("--student", "serving.py", "--tb=no", "-rf",
                                "--grader-results", "results.json",
                                "-k", "test_cases or cache_capacity")
    result.stdout.fnmatch_lines([
        "FAILED *test_serve* - serve is not implemented yet"])
    result.stdout.no_fnmatch_line("*graders.grading.checks.*")
    outputs = [test["output"] for test in strict_json(pytester.path / "results.json")["tests"]
               if test["status"] == "failed"]
    assert outputs
    for output in outputs:
        assert not output.startswith("graders."), output
        assert "namespace(" not in output
        assert "mappingproxy" not in output
        assert str(pytester.path) not in output
        assert len(output) < 600, output


def test_a_dependent_function_s_feedback_starts_at_its_root_cause(
    pytester: pytest.Pytester,
) -> None:
    shutil.copy(CORPUS / "p99_at_q095" / "serving.py",
                pytester.path / "serving.py")
    result = pytester.runpytest("--student", "serving.py", "--tb=no", "-k", "batching_tax",
                                "--grader-results", "results.json")
    outputs = [test["output"] for test in strict_json(pytester.path / "results.json")["tests"]
               if test["status"] == "failed" and test["visibility"] == "visible"
               and "batching_tax" in test["name"]]
    assert outputs
    for output in outputs:
        assert output.splitlines()[1] == (
            "your batching_tax uses your queueing_latency, which is wrong for these inputs: "
            "fix queueing_latency first")
        assert "lambda/B" not in output
    result.stdout.no_fnmatch_line("INTERNALERROR*")
