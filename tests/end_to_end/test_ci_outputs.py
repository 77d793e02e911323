"""CI outputs of ``graders grade``: GitHub Classroom, JUnit XML, exit codes, Gradescope metadata."""

from __future__ import annotations

import base64
import json
import re
import shutil
import xml.etree.ElementTree as ET
import zipfile
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from helpers import CORPUS, REPO, assert_usage_error, graders, load

from graders.cli.grade import EXIT_CODES
from graders.expected.golden import build_golden
from graders.expected.oracle import ReferenceOracle
from graders.grading.cases import visible_cases
from graders.grading.scoring import TestScore
from graders.plugin.hooks import PREVIEW_LINE
from graders.results.classroom import (
    PREVIEW_MESSAGE,
    VISIBLE_PREVIEW_MESSAGE,
    classroom_results,
    github_output_line,
    preview_notice,
)
from graders.results.metadata import submission_extra
from graders.trackfiles.tracks import default_tracks_dir, load_tracks

CORRECT = CORPUS / "correct" / "serving.py"
BUGGY = CORPUS / "slo_ok_uses_mean"


def score(name: str, earned: int, status: str = "failed", visibility: str = "visible",
          output: str = "expected 1, got 2") -> TestScore:
    return TestScore(nodeid=f"graders/suite/test_x.py::{name}", name=name, function="serve",
                     track=None, visibility=visibility,  # type: ignore[arg-type]
                     max_score=Fraction(4), earned=Fraction(earned),
                     status=status, output=output)  # type: ignore[arg-type]


# --- GitHub Classroom ------------------------------------------------------------------------


def test_classroom_results_follow_the_reporter_format() -> None:
    document = classroom_results([score("a", 4, "passed", output="All cases passed."),
                                  score("b", 1), score("c", 0, "error")])
    assert document["version"] == 1
    assert document["status"] == "fail"
    assert document["max_score"] == 12.0
    assert [t["status"] for t in document["tests"]] == ["pass", "fail", "error"]
    assert [t["score"] for t in document["tests"]] == [4.0, 1.0, 0.0]
    assert document["tests"][0]["message"] == ""
    assert document["tests"][1]["message"] == "expected 1, got 2"


def test_classroom_results_pass_only_when_every_test_passes() -> None:
    assert classroom_results([score("a", 4, "passed")])["status"] == "pass"
    assert classroom_results([score("a", 4, "passed")],
                             import_error="serving.py failed to import")["status"] == "error"


def test_classroom_results_never_show_a_hidden_tests_output() -> None:
    document = classroom_results([score("h", 0, visibility="after_due_date",
                                        output="c=4096: expected 0.25, got 0.5")])
    assert document["tests"][0]["message"] == "Hidden test."
    assert "4096" not in json.dumps(document)


def test_the_github_output_line_is_base64_of_strict_json() -> None:
    document = classroom_results([score("a", 4, "passed")])
    line = github_output_line(document)
    assert line.startswith("result=")
    assert line.endswith("\n")
    assert json.loads(base64.b64decode(line[len("result="):])) == document


def test_github_output_mode_appends_what_the_reporter_reads(tmp_path: Path) -> None:
    output = tmp_path / "github_output"
    output.write_text("earlier=1\n", encoding="utf-8")
    summary = tmp_path / "step_summary"
    run = graders("grade", BUGGY, "--github-output", "-q", cwd=tmp_path,
                  env={"GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary)})
    assert run.returncode == 0, run.stderr
    lines = output.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "earlier=1"
    assert lines[1].startswith("result=")
    document = json.loads(base64.b64decode(lines[1][len("result="):]))
    assert document["status"] == "fail"
    assert document["max_score"] == 100.0
    total = sum(test["score"] for test in document["tests"])
    assert total == pytest.approx(96.733333, abs=1e-4)  # helpers.CORPUS_EXPECTED's exact score
    assert len(document["tests"]) == 48
    # graded with the reference, yet still a preview: the workflow is the student's
    assert document["message"] == PREVIEW_MESSAGE
    notices = [line for line in run.stdout.splitlines() if line.startswith("::")]
    assert notices == [preview_notice(document).rstrip("\n")]
    # wherever GitHub shows the points, "preview" is beside them: the notice's title and
    # the job summary's heading
    points = f"{total:.2f} / 100.00 points"
    assert notices[0].startswith(f"::notice title=Preview {points}%2C not the final grade::")
    assert summary.read_text(encoding="utf-8").startswith(
        f"### Preview {points}, not the final grade\n\n{PREVIEW_MESSAGE}")
    assert PREVIEW_LINE not in run.stdout  # the local preview line is the bundle's alone


def test_every_classroom_report_says_it_is_a_preview_and_how_the_final_grade_is_made(
        ) -> None:
    local = classroom_results([score("a", 4, "passed")], visible_only=True)
    assert local["message"] == VISIBLE_PREVIEW_MESSAGE
    reference = classroom_results([score("a", 4, "passed")])
    assert reference["message"] == PREVIEW_MESSAGE
    for message in (VISIBLE_PREVIEW_MESSAGE, PREVIEW_MESSAGE):
        assert "preview" in message
        assert "own repository" in message
        assert "made by the course staff" in message
        # no staff command a student would try in vain (the bundle has only graders grade)
        assert "graders regrade" not in message
    assert "preview of the visible tests" in VISIBLE_PREVIEW_MESSAGE
    assert "inputs you have not seen" in VISIBLE_PREVIEW_MESSAGE
    # the reporter adds up the tests alone: the message changes no status and no point
    assert (local["status"], local["max_score"], local["tests"]) == (
        reference["status"], reference["max_score"], reference["tests"])


def test_the_preview_notice_is_one_workflow_command_with_its_values_escaped() -> None:
    line = preview_notice({"message": "50% done\r\nnext: a, b"})
    assert line == "::notice title=Preview%2C not the final grade::50%25 done%0D%0Anext: a, b\n"
    assert preview_notice(classroom_results([], visible_only=True)).startswith(
        "::notice title=Preview%2C not the final grade::This score is a preview of the "
        "visible tests, not your grade")
    scored = classroom_results([score("a", 4, "passed"), score("b", 0)], visible_only=True)
    assert preview_notice(scored).startswith(
        f"::notice title=Preview {sum(t['score'] for t in scored['tests']):.2f} / "
        f"{scored['max_score']:.2f} points%2C not the final grade::This score is a preview")


@pytest.fixture(scope="module")
def golden_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The golden file of the shipped tracks, as the student bundle holds it."""
    tracks = load_tracks(default_tracks_dir())
    document = build_golden(tracks, visible_cases(tracks), ReferenceOracle().expected,
                            visible_max_score=95.0)
    path = tmp_path_factory.mktemp("golden") / "golden.json"
    path.write_text(json.dumps(document, allow_nan=False), encoding="utf-8")
    return path


def test_github_output_from_a_golden_file_is_a_preview_of_the_visible_tests(
        tmp_path: Path, golden_file: Path) -> None:
    output = tmp_path / "github_output"
    run = graders("grade", BUGGY, "--golden", golden_file, "--github-output", cwd=tmp_path,
                  env={"GITHUB_OUTPUT": str(output)})
    assert run.returncode == 0, run.stderr
    (line,) = output.read_text(encoding="utf-8").splitlines()
    document = json.loads(base64.b64decode(line[len("result="):]))
    assert document["max_score"] == 95.0
    assert len(document["tests"]) == 46  # no hidden test
    assert document["message"] == VISIBLE_PREVIEW_MESSAGE
    lines = run.stdout.splitlines()
    assert lines[-1] == preview_notice(document).rstrip("\n")  # on the run's page
    assert lines.count(PREVIEW_LINE) == 1  # and in the log, under the score table
    assert lines.index(PREVIEW_LINE) > next(index for index, text in enumerate(lines)
                                            if text.startswith("TOTAL "))


def test_github_output_mode_without_the_variable_is_a_usage_error(tmp_path: Path) -> None:
    run = graders("grade", CORRECT, "--github-output", cwd=tmp_path, env={"GITHUB_OUTPUT": ""})
    assert_usage_error(run, "--github-output needs the GITHUB_OUTPUT environment variable")


@pytest.mark.parametrize(("where", "problem"), [
    ("missing/folder/output", "its folder"),
    ("a-folder", "it is not a regular file"),
    ("a-link", "it is not a regular file"),
])
def test_a_github_output_that_cannot_take_the_result_is_refused_before_grading(
        tmp_path: Path, where: str, problem: str) -> None:
    (tmp_path / "a-folder").mkdir()
    (tmp_path / "a-link").symlink_to(tmp_path / "elsewhere")
    run = graders("grade", CORRECT, "--github-output", "--results", tmp_path / "r.json",
                  cwd=tmp_path, env={"GITHUB_OUTPUT": str(tmp_path / where)})
    assert_usage_error(run, "--github-output: GITHUB_OUTPUT", problem)
    assert not (tmp_path / "r.json").exists()  # refused before grading: no record at all


def test_the_classroom_file_matches_results_json(tmp_path: Path) -> None:
    results, classroom = tmp_path / "results.json", tmp_path / "classroom.json"
    run = graders("grade", BUGGY, "--results", results, "--classroom", classroom, "-q")
    assert run.returncode == 0, run.stderr
    by_name = {t["name"]: t["score"] for t in load(results)["tests"]}
    assert {t["name"]: t["score"] for t in load(classroom)["tests"]} == by_name


# --- Gradescope's top-level output -------------------------------------------------------------


def test_gradescope_students_see_the_table_and_first_failed_case_as_html(
        tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    run = graders("grade", BUGGY, "--results", results, "-q")
    assert run.returncode == 0, run.stderr
    document = load(results)
    assert (document["output_format"], document["test_output_format"]) == ("html", "text")
    output = document["output"]
    assert "<strong>Score by function</strong>" in output
    assert re.search(r"\nqueueing_latency +18\.00 +21\.00  11\n", output), output
    assert "<strong>First failed case</strong> (queueing_latency matches" in output
    assert "case 'load 95% of capacity': queueing_latency(arrival_qps=304.0" in output
    assert "slo_ok: expected False, got True - wrong value" in output


# --- JUnit XML -------------------------------------------------------------------------------


def test_junit_xml_carries_every_test_with_its_score(tmp_path: Path) -> None:
    results, junit = tmp_path / "results.json", tmp_path / "junit.xml"
    run = graders("grade", BUGGY, "--results", results, "--junit-xml", junit, "-q")
    assert run.returncode == 0, run.stderr
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert suite.get("name") == "serving-lab"
    cases = suite.findall("testcase")
    assert len(cases) == 48
    failed = [case for case in cases if case.find("failure") is not None]
    assert int(suite.get("failures", "-1")) == len(failed) == 5
    scores: dict[str, float] = {}
    for case in cases:
        properties = {p.get("name"): p.get("value") for p in case.iter("property")}
        scores[f"{case.get('classname')}::{case.get('name')}"] = float(
            properties["grader_score"] or "nan")
        assert float(properties["grader_max_score"] or "nan") > 0
    assert sum(scores.values()) == pytest.approx(load(results)["score"], abs=1e-4)
    # the names CI pages show students are results.json's, under the contract function
    named = {(case.get("classname"), case.get("name")) for case in cases}
    assert named == {(test["tags"][0], test["name"]) for test in load(results)["tests"]}


# --- the same points in every output ------------------------------------------------------


def _points_everywhere(submission: Path, folder: Path) -> dict[str, dict[str, Any]]:
    """Each output's (score, max_score) per test, keyed by the test's results.json name,
    after one grading of ``submission`` with every output on."""
    folder.mkdir(mode=0o700)
    paths = {name: folder / name for name in ("results.json", "junit.xml", "report.json",
                                              "classroom.json", "page.html")}
    run = graders("grade", submission, "--results", paths["results.json"],
                  "--junit-xml", paths["junit.xml"], "--json-report", paths["report.json"],
                  "--classroom", paths["classroom.json"], "--html", paths["page.html"], "-q")
    assert run.returncode == 0, run.stderr
    results = load(paths["results.json"])
    names = {test["extra_data"]["nodeid"]: test["name"] for test in results["tests"]}
    outputs: dict[str, dict[str, Any]] = {
        "results.json": {test["name"]: (test["score"], test["max_score"])
                         for test in results["tests"]}}
    junit: dict[str, Any] = {}
    for case in ET.parse(paths["junit.xml"]).getroot().iter("testcase"):
        properties = {p.get("name"): p.get("value") for p in case.iter("property")}
        junit[str(case.get("name"))] = (float(properties["grader_score"] or "nan"),
                                        float(properties["grader_max_score"] or "nan"))
    outputs["junit.xml"] = junit
    report = load(paths["report.json"])
    outputs["report.json"] = {
        names[test["nodeid"]]: (test["metadata"]["score"], test["metadata"]["max_score"])
        for test in report["tests"] if test["nodeid"] in names}
    classroom = load(paths["classroom.json"])
    outputs["classroom.json"] = {  # it writes no maximum per test
        test["name"]: (test["score"], outputs["results.json"][test["name"]][1])
        for test in classroom["tests"]}
    outputs["total"] = {"results.json": results["score"],
                        "junit.xml": round(sum(score for score, _ in junit.values()), 6),
                        "classroom.json": round(sum(t["score"] for t in classroom["tests"]),
                                                6)}
    return outputs


def _assert_the_same_points(outputs: dict[str, dict[str, Any]]) -> None:
    written = outputs["results.json"]
    for name in ("junit.xml", "report.json", "classroom.json"):
        differing = {test: (points, outputs[name].get(test)) for test, points in written.items()
                     if outputs[name].get(test) != points}
        assert differing == {}, name
    assert len(set(outputs["total"].values())) == 1, outputs["total"]


def test_every_output_writes_the_points_results_json_writes(tmp_path: Path) -> None:
    # batching_tax [robotaxi] earns 5/9 of 2.5 points: 0.555556 rounded plainly, 0.555555
    # in results.json, where the largest remainder gives the unit to another test
    _assert_the_same_points(_points_everywhere(CORPUS / "batching_natural_log",
                                               tmp_path / "out"))


@pytest.mark.slow
@pytest.mark.parametrize("submission", sorted(path.name for path in CORPUS.iterdir()
                                              if path.is_dir()))
def test_every_output_writes_the_same_points_for_every_corpus_submission(
        tmp_path: Path, submission: str) -> None:
    _assert_the_same_points(_points_everywhere(CORPUS / submission, tmp_path / "out"))


# --- exit codes ------------------------------------------------------------------------------


@pytest.mark.parametrize(("bar", "code"), [("96", 0), ("96.733333", 0), ("97", 3)])
def test_fail_under_sets_exit_code_3_below_the_bar(tmp_path: Path, bar: str, code: int) -> None:
    run = graders("grade", BUGGY, "--fail-under", bar, "-q", cwd=tmp_path)
    assert run.returncode == code, run.stderr
    if code == 3:
        assert run.stderr.strip() == f"graders: score 96.7333 is below --fail-under {bar}"
    assert not list(tmp_path.iterdir()), "no stray results file in the working folder"


def test_fail_under_refuses_a_bad_number(tmp_path: Path) -> None:
    assert_usage_error(graders("grade", CORRECT, "--fail-under", "lots"),
                       "--fail-under expected a number")


def test_the_course_staff_docs_document_every_exit_code() -> None:
    docs = (REPO / "docs" / "course-staff.md").read_text(encoding="utf-8")
    table = docs.split("Exit codes, for CI pipelines:", 1)[1].split("\n\n", 2)[1]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    codes = [row.split("|")[1].strip() for row in rows[1:]]
    assert codes == [str(code) for code in EXIT_CODES]


# --- Gradescope submission metadata ---------------------------------------------------------


def test_the_submission_id_goes_into_extra_data(tmp_path: Path) -> None:
    metadata = tmp_path / "submission_metadata.json"
    metadata.write_text(json.dumps({"id": 123456, "assignment": {"id": 42},
                                    "users": [{"email": "s@example.edu"}]}), encoding="utf-8")
    results = tmp_path / "results.json"
    run = graders("grade", CORRECT, "--results", results, "--submission-metadata", metadata,
                  "-q")
    assert run.returncode == 0, run.stderr
    extra: dict[str, Any] = load(results)["extra_data"]
    assert extra["submission_id"] == 123456
    assert extra["assignment_id"] == 42
    assert "s@example.edu" not in results.read_text(encoding="utf-8")


def test_submission_metadata_that_is_absent_or_broken_never_stops_grading(
        tmp_path: Path) -> None:
    assert submission_extra(None) == {}
    assert submission_extra(tmp_path / "absent.json") == {}
    broken = tmp_path / "broken.json"
    broken.write_text("{", encoding="utf-8")
    assert "broken.json" in submission_extra(broken)["submission_metadata_error"]
    broken.write_text('{"id": true}', encoding="utf-8")
    assert submission_extra(broken) == {"submission_metadata_error":
                                        "broken.json: no submission id"}


# --- a submission with nothing to grade -------------------------------------------------------


def test_a_browser_renamed_serving_py_is_graded(tmp_path: Path) -> None:
    submission = tmp_path / "submission"
    submission.mkdir()
    shutil.copy(CORRECT, submission / "serving (1).py")
    results = tmp_path / "results.json"
    run = graders("grade", submission, "--results", results, "-q")
    assert run.returncode == 0, run.stderr
    assert load(results)["score"] == 100.0


def test_a_folder_without_serving_py_still_gets_a_results_file(tmp_path: Path) -> None:
    submission = tmp_path / "submission"
    submission.mkdir()
    (submission / "main.py").write_text("x = 1\n", encoding="utf-8")
    results = tmp_path / "results.json"
    run = graders("grade", submission, "--results", results)
    assert_usage_error(run, "serving.py not found in submission folder", "found 'main.py'")
    document = load(results)
    assert document["score"] == 0
    assert document["tests"] == []
    assert "Your submission was not graded: serving.py not found" in document["output"]
    assert "serving.py not found" in document["extra_data"]["submission_error"]


@pytest.mark.parametrize("name", ["serving.ipynb", "submission.zip"])
def test_a_notebook_or_zip_given_as_a_file_is_refused_as_in_a_folder(tmp_path: Path,
                                                                     name: str) -> None:
    folder = tmp_path / "submission"
    folder.mkdir()
    if name.endswith(".zip"):
        with zipfile.ZipFile(folder / name, "w") as archive:
            archive.write(CORRECT, "serving.py")
    else:
        (folder / name).write_text('{"cells": [], "metadata": null, "nbformat": 4}',
                                   encoding="utf-8")
    outcomes = []
    for given in (folder / name, folder):
        results = tmp_path / f"results-{given.name}.json"
        run = graders("grade", given, "--results", results)
        assert_usage_error(run, "submit one file named serving.py")
        assert "null" not in run.stderr
        assert "could not be imported" not in run.stderr
        document = load(results)
        assert (document["score"], document["tests"]) == (0, [])
        reason = document["extra_data"]["submission_error"]
        # the staff's line names the path; the student's reason is the same without it
        assert str(tmp_path) in run.stderr
        assert str(tmp_path) not in json.dumps(document)
        assert reason == run.stderr.strip().removeprefix("graders: error: ").replace(
            f" {str(given)!r}", "")
        outcomes.append(reason.split("; ")[-2:])
    assert outcomes[0] == outcomes[1]  # the same reason, file or folder


def test_a_serving_py_in_a_zipped_folder_is_graded(tmp_path: Path) -> None:
    nested = tmp_path / "submission" / "my-lab"
    nested.mkdir(parents=True)
    (nested / "serving.py").write_bytes(CORRECT.read_bytes())
    results = tmp_path / "results.json"
    run = graders("grade", tmp_path / "submission", "--results", results, "-q")
    assert run.returncode == 0, run.stderr
    assert load(results)["score"] == 100.0
