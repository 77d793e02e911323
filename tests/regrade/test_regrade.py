"""``graders regrade``: a class graded in parallel, resumably, with a class report.

The fast tests check the pure parts (finding submissions, reading Gradescope's metadata,
the grade sheet, pass rates, failure grouping, the progress bar) and the usage errors.
The slow ones regrade a small class from ``tests/corpus`` the way an instructor does, as a
Gradescope export, and check the scores against those ``helpers.CORPUS_EXPECTED`` states,
the pass rates against the tests each bug is known to fail, resuming, and that a hostile
submission (and one that hangs past ``--timeout``) is contained.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import ADVERSARIAL, CORPUS, CORPUS_EXPECTED, REPO, processes_marked

from graders import cli
from graders.errors import GRADER_FAILED_EXIT, SubmissionError
from graders.regrade.job import child_environment, grade_arguments, passed_fds
from graders.regrade.progress import Progress
from graders.regrade.report import (
    GradedSubmission,
    class_report,
    failure_groups,
    grade_table,
    histogram,
    markdown,
    normalize_message,
    pass_rates,
)
from graders.regrade.roster import (
    ClassSubmission,
    Submitter,
    discover,
    parse_submission_metadata,
    submission_file,
    submission_times,
)
from graders.regrade.slots import claim_slots, kill_marked, release_slots
from graders.regrade.state import BATCH_PACKAGE, grader_fingerprint
from graders.sandbox.privileges import LOCK_VARIABLE

AS_ROOT = os.geteuid() == 0
#: Seconds a whole regrade of the small class may take before the test gives up.
REGRADE_TIMEOUT_S = 900

# --- Gradescope's submission_metadata.yml ------------------------------------------------

METADATA = """\
---
submission_1001:
  :submitters:
  - :name: Alice Liddell
    :sid: '1001'
    :email: alice@example.edu
  :created_at: 2024-03-01 12:00:00.000000000 -08:00
  :score: 100.0
  :results:
    :tests:
    - :name: not a submitter
submission_1002:
  :submitters:
    - :name: "Bob \\"the Builder\\""
      :sid: 1002
      :email: bob@example.edu
    - :name: 'Carol O''Hara'
      :sid: '1003'
  :status: processed
submission_1004:
  :submitters: []
"""


def test_gradescope_metadata_maps_each_folder_to_its_submitters() -> None:
    people = parse_submission_metadata(METADATA)
    assert people == {
        "submission_1001": (Submitter("Alice Liddell", "1001", "alice@example.edu"),),
        "submission_1002": (Submitter('Bob "the Builder"', "1002", "bob@example.edu"),
                            Submitter("Carol O'Hara", "1003", "")),
        "submission_1004": (),
    }


def test_ids_and_names_are_read_as_written_whatever_their_yaml_type() -> None:
    text = ("submission_1:\n  :submitters:\n  - :name: 0x1F\n    :sid: 0012346\n"
            "    :email: yes\n  :created_at: 2024-03-01 12:00:00.000000000 -08:00\n"
            "  :assignment:\n    :due_date: 2024-03-02 00:00:00 -08:00\n")
    assert parse_submission_metadata(text) == {
        "submission_1": (Submitter("0x1F", "0012346", "yes"),)}
    assert submission_times(text) == {
        "submission_1": ("2024-03-01 12:00:00.000000000 -08:00", "2024-03-02 00:00:00 -08:00")}


def test_metadata_without_any_folder_is_rejected() -> None:
    with pytest.raises(ValueError, match="no submission folders"):
        parse_submission_metadata("- just\n- a list\n")


def make_folder(path: Path, source: str = "x = 1\n") -> Path:
    path.mkdir(parents=True)
    (path / "serving.py").write_text(source, encoding="utf-8")
    return path


def test_an_export_is_read_with_its_submitters_and_warns_of_listed_folders_that_are_missing(
        tmp_path: Path) -> None:
    make_folder(tmp_path / "submission_1001")
    make_folder(tmp_path / "submission_1002")
    make_folder(tmp_path / "submission_9999")  # not in the metadata: graded, no names
    (tmp_path / "submission_metadata.yml").write_text(METADATA, encoding="utf-8")
    found, warnings = discover(tmp_path)
    assert [s.id for s in found] == ["submission_1001", "submission_1002", "submission_9999"]
    assert found[0].submitters[0].name == "Alice Liddell"
    assert found[2].submitters == ()
    assert warnings == ["submission_metadata.yml lists 1 folder(s) that do not exist: "
                        "submission_1004"]


def test_unreadable_metadata_leaves_folder_names_as_ids_with_a_warning(tmp_path: Path) -> None:
    make_folder(tmp_path / "submission_1")
    (tmp_path / "submission_metadata.yml").write_bytes(b"\xff\xfe not text")
    found, warnings = discover(tmp_path)
    assert [(s.id, s.submitters) for s in found] == [("submission_1", ())]
    assert len(warnings) == 1
    assert "folder names are the submission ids" in warnings[0]


def test_a_plain_folder_mixes_folders_and_files_and_skips_hidden_output_and_macos_residue(
        tmp_path: Path) -> None:
    make_folder(tmp_path / "alice")
    (tmp_path / "bob.py").write_text("x = 1\n", encoding="utf-8")
    make_folder(tmp_path / ".hidden")
    (tmp_path / ".DS_Store").write_bytes(b"\0")
    make_folder(tmp_path / "__MACOSX")
    # any other file is a student's too, as an LMS download holds them: listed, and
    # rejected with its reason when read (never dropped without a word)
    (tmp_path / "carol.ipynb").write_text("{}", encoding="utf-8")
    (tmp_path / "README.md").write_text("the class's notes", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    found, warnings = discover(tmp_path, exclude=out)
    assert [(s.id, s.path.name) for s in found] == [
        ("alice", "alice"), ("bob", "bob.py"), ("carol", "carol.ipynb")]
    assert warnings == ["README.md is taken as the folder's notes, not a submission"]


def test_two_submissions_with_one_id_are_an_error(tmp_path: Path) -> None:
    make_folder(tmp_path / "alice")
    (tmp_path / "alice.py").write_text("x = 1\n", encoding="utf-8")
    with pytest.raises(SubmissionError, match="two submissions have the id 'alice'"):
        discover(tmp_path)


def test_serving_py_is_found_at_the_top_or_alone_in_a_subfolder(tmp_path: Path) -> None:
    top = make_folder(tmp_path / "top")
    make_folder(top / "old")  # the top one wins over a nested copy
    assert submission_file(ClassSubmission("top", top)) == top / "serving.py"
    nested = tmp_path / "nested"
    make_folder(nested / "lab" / "src")
    assert submission_file(ClassSubmission("n", nested)) == nested / "lab" / "src" / "serving.py"


@pytest.mark.parametrize(("layout", "message"), [
    ((), "serving.py not found in submission folder .* or its subfolders"),
    (("a", "b"), r"2 serving.py files in submission folder .* \(a/serving.py, b/serving.py\)"),
])
def test_a_folder_with_no_or_several_nested_serving_py_is_rejected(
        tmp_path: Path, layout: tuple[str, ...], message: str) -> None:
    folder = tmp_path / "s"
    folder.mkdir()
    for name in layout:
        make_folder(folder / name)
    with pytest.raises(SubmissionError, match=message):
        submission_file(ClassSubmission("s", folder))


# --- the class report, on made-up results ------------------------------------------------


def result_test(name: str, function: str, score: float, max_score: float, output: str = "",
                track: str | None = None) -> dict[str, Any]:
    return {"name": name, "score": score, "max_score": max_score,
            "status": "passed" if score == max_score else "failed", "output": output,
            "tags": [function, *([track] if track else [])], "visibility": "visible",
            "extra_data": {"nodeid": f"suite::{name}"}}


def graded(ident: str, *tests: dict[str, Any], status: str = "graded") -> GradedSubmission:
    score = round(sum(test["score"] for test in tests), 6)
    results = {"score": score, "tests": list(tests),
               "extra_data": {"max_score": sum(test["max_score"] for test in tests)}}
    return GradedSubmission(ident, (Submitter(ident.title(), ident[:1], ""),), status, "",
                            results)


def field_failure(test: str, got: float) -> str:
    return (f"{test}: 1 of 2 cases failed (tolerance rel 1e-06, abs 1e-09)\n"
            "case 'defaults': queueing_latency(arrival_qps=8.0)\n"
            f"  p99_latency_ms: expected 2.0, got {got} - outside tolerance (rel 1e-06, abs "
            f"1e-09); abs error {abs(got - 2):.3g}, rel error {abs(got - 2) / 2:.3g}\n"
            "    hint: p99 is the q = 0.99 quantile")


CLASS = [
    graded("ann", result_test("t_queue", "queueing_latency", 3.0, 3.0),
           result_test("t_serve", "serve", 2.0, 2.0)),
    graded("ben", result_test("t_queue", "queueing_latency", 1.5, 3.0,
                              field_failure("t_queue", 3.1)),
           result_test("t_serve", "serve", 2.0, 2.0)),
    graded("cat", result_test("t_queue", "queueing_latency", 0.0, 3.0,
                              field_failure("t_queue", 7.25)),
           result_test("t_serve", "serve", 0.0, 2.0, "AssertionError: serve is slow "
                       "(falsifying example: n=3)")),
    GradedSubmission("dan", (), "timed_out", "grading took longer than 9 s and was stopped",
                     {"score": 0.0, "tests": []}),
]


def test_the_grade_sheet_has_the_score_and_points_per_function_of_everyone() -> None:
    rows = grade_table(CLASS)
    assert rows == [
        ["submission", "name", "sid", "email", "status", "score", "max_score", "group",
         "late", "days_late", "queueing_latency", "serve"],
        ["ann", "Ann", "a", "", "graded", "5.0", "5.0", "", "", "", "3.0", "2.0"],
        ["ben", "Ben", "b", "", "graded", "3.5", "5.0", "", "", "", "1.5", "2.0"],
        ["cat", "Cat", "c", "", "graded", "0.0", "5.0", "", "", "", "0.0", "0.0"],
        # a grading that did not complete has no score: an empty cell, never a 0
        ["dan", "", "", "", "timed_out", "", "5.0", "", "", "", "", ""],
    ]


def test_a_group_gives_each_member_a_row_with_the_same_score_and_a_group_id() -> None:
    pair = GradedSubmission("submission_7", (Submitter("Ann", "01", "a@x"),
                                             Submitter("Ben", "02", "b@x")), "graded", "",
                            CLASS[1].results)
    rows = grade_table([pair, CLASS[0]])
    assert [row[:10] for row in rows[1:]] == [
        ["submission_7", "Ann", "01", "a@x", "graded", "3.5", "5.0", "submission_7", "", ""],
        ["submission_7", "Ben", "02", "b@x", "graded", "3.5", "5.0", "submission_7", "", ""],
        ["ann", "Ann", "a", "", "graded", "5.0", "5.0", "", "", ""],
    ]


@pytest.mark.parametrize(("created_at", "due", "late", "days"), [
    ("2024-03-01 12:00:00.000000000 -08:00", "2024-03-01 12:00:00 -08:00", "no", "0"),
    ("2024-03-01 12:00:01.5 -08:00", "2024-03-01T12:00:00-08:00", "yes", "1"),
    ("2024-03-03 20:00:00 +00:00", "2024-03-01 12:00 -08:00", "yes", "2"),
    ("2024-03-01 19:59:00 +00:00", "2024-03-01 12:00 -08:00", "no", "0"),
    ("2024-03-01 12:00:00", "", "", ""),
    ("yesterday", "2024-03-01 12:00", "", ""),
])
def test_late_and_days_late_come_from_the_submission_and_due_times(
        created_at: str, due: str, late: str, days: str) -> None:
    entry = GradedSubmission("s", (Submitter("Ann"),), "graded", "", CLASS[0].results,
                             created_at=created_at, due=due)
    header, row = grade_table([entry])
    assert (row[header.index("late")], row[header.index("days_late")]) == (late, days)


def test_pass_rates_count_full_marks_over_graded_submissions_lowest_first() -> None:
    rates = {rate.name: rate for rate in pass_rates(CLASS)}
    assert [rate.name for rate in pass_rates(CLASS)] == ["t_queue", "t_serve"]
    assert (rates["t_queue"].passed, rates["t_queue"].graded) == (1, 3)
    assert rates["t_queue"].mean_fraction == pytest.approx(0.5)
    assert (rates["t_serve"].passed, rates["t_serve"].graded) == (2, 3)
    assert rates["t_serve"].pass_rate == pytest.approx(2 / 3)


def test_numbers_are_normalized_out_of_failure_messages_but_names_keep_theirs() -> None:
    assert normalize_message("p99_latency_ms: expected 2.0, got -3.1e+02 (rel 1e-06)") == \
        "p99_latency_ms: expected #, got # (rel #)"


def test_failures_that_differ_only_in_numbers_group_together_once_per_submission() -> None:
    groups = failure_groups(CLASS)
    assert [(g.message, g.submissions) for g in groups] == [
        ("p99_latency_ms: expected #, got # - outside tolerance (rel #, abs #); abs error #, "
         "rel error #", 2),
        ("AssertionError: serve is slow", 1),
    ]
    assert groups[0].hint == "p99 is the q = 0.99 quantile"
    assert groups[0].functions == ("queueing_latency",)
    assert groups[0].example.startswith("p99_latency_ms: expected 2.0, got 3.1")


def test_a_failed_student_call_is_grouped_by_its_cause_not_by_the_call() -> None:
    outputs = ["graders.grading.checks.StudentCallFailed: serve(1, 2): serving.py could not be "
               "imported: SystemExit: 0 (falsifying example: n=1, b=2)",
               "graders.grading.checks.StudentCallFailed: erlang_c(f(1), 2): serving.py could "
               "not be "
               "imported: SystemExit: 0 (falsifying example: tr",
               "erlang_c matches: 2 of 2 cases failed\nevery failed case: serving.py could not "
               "be imported: SystemExit: 0",
               "serving.py could not be imported: SystemExit: 0, in serve(<profile x>, 2) "
               "(falsifying example: n=1)"]
    entry = graded("eve", *(result_test(f"t{i}", "serve", 0.0, 1.0, output)
                            for i, output in enumerate(outputs)))
    [group] = failure_groups([entry])
    assert (group.message, group.submissions, len(group.tests)) == (
        "serving.py could not be imported: SystemExit: #", 1, 4)


def test_the_histogram_has_equal_bins_with_the_maximum_in_the_last() -> None:
    assert histogram([0.0, 5.0, 49.9, 50.0, 100.0], 100.0, bins=4) == (
        [0.0, 25.0, 50.0, 75.0, 100.0], [2, 1, 1, 1])


def test_the_report_is_strict_json_and_its_markdown_lists_everything() -> None:
    report = class_report(CLASS)
    json.dumps(report, allow_nan=False)
    assert (report["submissions"], report["graded"], report["max_score"]) == (4, 3, 5.0)
    assert report["scores"]["mean"] == pytest.approx(8.5 / 3)
    assert report["not_graded"] == [{"submission": "dan", "status": "timed_out",
                                     "reason": "grading took longer than 9 s and was stopped"}]
    text = markdown(report, histogram_file="histogram.png")
    assert "![score histogram](histogram.png)" in text
    assert "| 33% | 1/3 | 50% | queueing_latency | t_queue | visible |" in text
    assert "| dan | timed_out | grading took longer than 9 s and was stopped |" in text


# --- progress, fingerprint, process clean-up ---------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_progress_bar_prints_lines_with_an_eta_when_not_on_a_terminal() -> None:
    stream, clock = io.StringIO(), FakeClock()
    progress = Progress(4, stream, skipped=1, clock=clock)
    clock.now = 10.0
    progress.advance("graded")
    clock.now = 20.0
    progress.advance("timed_out")
    progress.close()
    lines = stream.getvalue().splitlines()
    assert lines[0] == ("[############............] 2/4, 1 up to date, 0 not graded, "
                        "00:10 elapsed, ETA 00:20")
    assert lines[1].startswith("[##################......] 3/4, 1 up to date, 1 not graded, "
                               "00:20")
    assert "\r" not in stream.getvalue()


def test_the_progress_bar_redraws_in_place_on_a_terminal() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    progress = Progress(2, stream, clock=FakeClock())
    progress.advance("graded")
    progress.advance("graded")
    progress.close()
    assert stream.getvalue().count("\r") == 3
    assert stream.getvalue().endswith("2/2, 0 not graded, 00:00 elapsed, ETA --:--\x1b[K\n")


def test_the_progress_bar_counts_in_the_summarys_words() -> None:
    stream = io.StringIO()
    progress = Progress(4, stream, clock=FakeClock())
    for status in ("rejected", "grader_failed", None, "graded"):
        progress.advance(status)
    progress.close()
    last = stream.getvalue().splitlines()[-1]
    assert last.startswith("[########################] 4/4, 1 rejected, 2 not graded, ")
    assert "failed" not in stream.getvalue()


def test_the_grader_fingerprint_is_stable_follows_the_options_and_spares_only_batch_modules(
) -> None:
    batch = REPO / "graders" / BATCH_PACKAGE
    assert (batch / "__init__.py").is_file()
    # only the batch around the gradings is spared: the plugin, runner and grade command
    # are not in it
    assert not {"plugin", "runner", "grade"} & {p.stem for p in batch.glob("*.py")}
    assert grader_fingerprint(tracks=None) == grader_fingerprint(tracks=None)
    assert grader_fingerprint(tracks=None, options=["--max-score", "50"]) != \
        grader_fingerprint(tracks=None)


def test_processes_marked_with_a_slot_folder_are_killed(tmp_path: Path) -> None:
    marked = tmp_path / "slot-1"
    marked.mkdir()
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                               cwd=marked, start_new_session=True)
    try:
        time.sleep(0.2)
        assert kill_marked(f"{marked}/") == [process.pid]
        assert process.wait(timeout=5) == -signal.SIGKILL
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()


def deep_folders(top: Path, depth: int = 3000) -> None:
    """``depth`` nested folders below ``top``, deeper than the recursion limit and with
    paths longer than PATH_MAX (made through descriptors)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.close(os.open(b"odd\nname\xff", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
        os.fchmod(fd, 0)
    finally:
        os.close(fd)


def test_a_slot_holding_trees_deeper_than_the_recursion_limit_is_emptied_without_raising(
        tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    slot, = claim_slots(1, tmp_path / "work", tmp_path / "private")
    try:
        for folder in (slot.temp, slot.private, slot.folder):
            (folder / "deep").mkdir()
            deep_folders(folder / "deep")
        assert slot.clean() == []
        assert os.listdir(slot.folder) == ["tmp"]
        assert os.listdir(slot.temp) == []
        assert os.listdir(slot.private) == []
    finally:
        release_slots([slot])


def test_a_jobs_grading_is_handed_the_slots_sandbox_user_and_its_lock(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    slot, = claim_slots(1, tmp_path / "work", tmp_path / "private")
    try:
        command = grade_arguments(slot.private / "serving.py", slot.private / "results.json",
                                   slot, [])
        environment = child_environment(slot)
        assert environment["TMPDIR"] == str(slot.temp)
        if slot.user is None:  # without root: no sandbox user to hand down
            assert "--sandbox-user" not in command
            assert LOCK_VARIABLE not in environment
            assert passed_fds(slot) == ()
            return
        assert slot.user.claim is not None
        assert command[command.index("--sandbox-user") + 1] == slot.user.name
        assert environment[LOCK_VARIABLE] == f"{slot.user.name}:{slot.user.claim.fd}"
        assert passed_fds(slot) == (slot.user.claim.fd,)
    finally:
        release_slots([slot])
    assert slot.user is None or not slot.user.exclusive


# --- usage errors --------------------------------------------------------------------------


def run_cli(*args: str | Path, cwd: Path | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = env or {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run([sys.executable, "-m", "graders", *map(str, args)], cwd=cwd,
                          env=environment, capture_output=True, text=True,
                          timeout=REGRADE_TIMEOUT_S, check=False)


@pytest.mark.parametrize(("arguments", "fragment"), [
    (["--jobs", "0"], "argument --jobs: must lie in [1, 64], got '0'"),
    (["--jobs", "65"], "argument --jobs: must lie in [1, 64], got '65'"),
    (["--timeout", "-1"], "argument --timeout: must lie in (0, 86400], got '-1'"),
    (["--timeout", "2147484"], "argument --timeout: must lie in (0, 86400], got '2147484'"),
    (["--max-score", "nan"], "--max-score expected a number"),
    (["--max-score", "1.0000001"], "--max-score must have at most 6 decimals"),
    (["--due", "tomorrow"], "--due 'tomorrow' is not a time: give e.g."),
    (["--mistakes", "/nonexistent/course.toml"], "--mistakes '/nonexistent/course.toml' "
                                                 "cannot be read"),
])
def test_bad_regrade_options_are_one_line_usage_errors(tmp_path: Path, arguments: list[str],
                                                       fragment: str) -> None:
    make_folder(tmp_path / "class" / "alice")
    result = run_cli("regrade", tmp_path / "class", "--out", tmp_path / "out", *arguments)
    assert result.returncode == 2
    assert fragment in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("make", "fragment"), [
    (lambda path: None, "is not a folder"),
    (lambda path: path.mkdir(), "no submissions in"),
])
def test_a_missing_or_empty_class_folder_is_a_usage_error(
        tmp_path: Path, make: Any, fragment: str) -> None:
    make(tmp_path / "class")
    result = run_cli("regrade", tmp_path / "class", "--out", tmp_path / "out",
                     "--no-histogram")
    assert (result.returncode, result.stdout) == (2, "")
    assert fragment in result.stderr
    assert "Traceback" not in result.stderr


def test_without_matplotlib_the_histogram_is_refused_up_front_naming_the_report_extra(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))
    make_folder(tmp_path / "class" / "alice")
    code = cli.main(["regrade", str(tmp_path / "class"), "--out", str(tmp_path / "out")])
    assert code == 2
    error = capsys.readouterr().err
    assert "'report' extra" in error
    assert "--no-histogram" in error
    assert not (tmp_path / "out").exists()


def test_an_out_path_that_is_a_file_is_a_usage_error(tmp_path: Path) -> None:
    make_folder(tmp_path / "class" / "alice")
    (tmp_path / "out").write_text("", encoding="utf-8")
    result = run_cli("regrade", tmp_path / "class", "--out", tmp_path / "out")
    assert result.returncode == 2
    assert "is not a folder" in result.stderr


def test_submissions_that_cannot_be_read_are_listed_as_rejected_with_no_points(
        tmp_path: Path) -> None:
    klass = tmp_path / "class"
    (klass / "empty").mkdir(parents=True)
    make_folder(klass / "two" / "a")
    make_folder(klass / "two" / "b")
    make_folder(tmp_path / "elsewhere")
    (klass / "linked").symlink_to(tmp_path / "elsewhere")
    (klass / "huge.py").write_bytes(b"#" * 1_000_001)
    result = run_cli("regrade", klass, "--out", tmp_path / "out", "--no-histogram", "--names")
    assert result.returncode == 0, result.stderr
    assert "4 submissions: 4 processed now, 0 up to date, 4 rejected (0 points), 0 not " \
           "graded" in result.stdout
    text = (tmp_path / "out" / "grades.csv").read_text(encoding="utf-8")
    rows = {row["submission"]: row for row in csv.DictReader(io.StringIO(text))}
    assert {(row["status"], row["score"], row["max_score"]) for row in rows.values()} == {
        ("rejected", "0.0", "")}
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    reasons = {row["submission"]: row["reason"] for row in report["not_graded"]}
    assert reasons == {
        "empty": "serving.py not found in submission folder 'empty' or its subfolders "
                 "(found no .py file); submit one file named serving.py, or one .py file "
                 "whose name starts with 'serving'",
        "huge": "submission 'huge.py' is 1000001 bytes; the limit is 1000000 bytes",
        "linked": "submission 'linked' is a symbolic link; submit serving.py itself",
        "two": "2 serving.py files in submission folder 'two' (a/serving.py, b/serving.py); "
               "keep one",
    }
    results = json.loads((tmp_path / "out" / "submissions" / "linked" / "results.json")
                         .read_text(encoding="utf-8"))
    assert results["score"] == 0
    assert "symbolic link" in results["output"]


def test_without_names_the_reports_name_no_submission_that_was_not_graded(
        tmp_path: Path) -> None:
    klass = tmp_path / "class"
    (klass / "ada-lovelace").mkdir(parents=True)
    (klass / "grace-hopper.ipynb").write_text("{}", encoding="utf-8")
    (klass / "alan-turing").mkdir()  # a reason that quotes a path inside the folder
    (klass / "alan-turing" / "serving.py").write_bytes(b"#" * 1_000_001)
    result = run_cli("regrade", klass, "--out", tmp_path / "out", "--no-histogram")
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    labels = [row["submission"] for row in report["not_graded"]]
    assert len(labels) == 3
    assert any(f"submission '{label}/serving.py' is 1000001 bytes" in row["reason"]
               for label, row in zip(labels, report["not_graded"], strict=True))
    assert all(re.fullmatch(r"anon-[0-9a-f]{6}", label) for label in labels), labels
    assert any(f"submission folder '{label}'" in row["reason"]
               for label, row in zip(labels, report["not_graded"], strict=True))
    for name in ("report.json", "report.md", "class.html"):
        text = (tmp_path / "out" / name).read_text(encoding="utf-8")
        assert "ada-lovelace" not in text, (name, text)
        assert "grace-hopper" not in text, (name, text)
        assert "alan-turing" not in text, (name, text)
    assert all(label in (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
               for label in labels)


# --- a class, regraded for real ------------------------------------------------------------

#: The Gradescope folder of each corpus submission, and who submitted it.
CLASS_MEMBERS = {
    "submission_101": ("correct", "Ada Lovelace"),
    "submission_102": ("gib_for_gb", "Grace Hopper"),
    "submission_103": ("battery_zero_not_none", "Alan Turing"),
    "submission_104": ("formation_delay_no_half", "Edsger Dijkstra"),
}
#: A plain *.py file beside the folders.
LOOSE_FILE = ("loose", "battery_zero_not_none")
#: Under root, a submission that SIGKILLs every process its user may signal, for 30 s from
#: its import, and leaves a file in /tmp: with one sandbox user per job slot it can only
#: hurt itself. (Without root there is no sandbox user: it would kill the test run.)
HOSTILE = "submission_100"
HOSTILE_SOURCE = '''"""Attack: SIGKILL all this user may signal; leave a file in /tmp."""
import os, signal, time

with open("/tmp/regrade-hostile-{marker}-%d" % os.getuid(), "w") as handle:
    handle.write("left behind")
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass
    time.sleep(0.02)
'''


@dataclass(frozen=True)
class Regrade:
    """One ``graders regrade`` run and what it wrote."""

    returncode: int
    stdout: str
    stderr: str
    rows: dict[str, dict[str, str]]
    report: dict[str, Any]
    elapsed_s: float


def regrade(base: Path, *options: str) -> Regrade:
    """Regrade ``base/class`` into ``base/out`` as an instructor does (TMPDIR marked)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["TMPDIR"] = str(base / "tmp")
    started = time.monotonic()
    result = run_cli("regrade", base / "class", "--out", base / "out", "--jobs", "2",
                     *options, cwd=base, env=env)
    elapsed = time.monotonic() - started
    out = base / "out"
    rows: dict[str, dict[str, str]] = {}
    report: dict[str, Any] = {}
    if (out / "grades.csv").exists():
        text = (out / "grades.csv").read_text(encoding="utf-8")
        rows = {row["submission"]: row for row in csv.DictReader(io.StringIO(text))}
        report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    return Regrade(result.returncode, result.stdout, result.stderr, rows, report, elapsed)


def survivors(marker: str) -> list[str]:
    """Processes still running with ``marker`` in their working folder or environment."""
    return processes_marked(marker, command_line=False)


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    """A folder the sandbox users can traverse (pytest's tmp_path is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="regrade-test-", dir="/tmp"))
    folder.chmod(0o755)
    (folder / "tmp").mkdir(mode=0o755)
    (folder / "tmp").chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def expected_scores() -> dict[str, float]:
    scores = {folder: 100.0 if name == "correct" else CORPUS_EXPECTED[name].score
              for folder, (name, _) in CLASS_MEMBERS.items()}
    scores[LOOSE_FILE[0]] = CORPUS_EXPECTED[LOOSE_FILE[1]].score
    if AS_ROOT:
        scores[HOSTILE] = 0.0  # it never finishes importing
    return scores


@pytest.fixture(scope="module")
def first_run(base: Path) -> Regrade:
    """The class as a Gradescope export, plus a loose *.py file, regraded once."""
    klass = base / "class"
    metadata = []
    for folder, (name, person) in CLASS_MEMBERS.items():
        target = klass / folder
        if name == "gib_for_gb":  # zipped in a folder: serving.py one level down
            target = target / "lab"
        target.mkdir(parents=True)
        shutil.copy(CORPUS / name / "serving.py", target / "serving.py")
        metadata.append(f"{folder}:\n  :submitters:\n  - :name: {person}\n"
                        f"    :sid: '{folder[-3:]}'\n    :email: {folder}@example.edu\n")
    if AS_ROOT:
        (klass / HOSTILE).mkdir()
        (klass / HOSTILE / "serving.py").write_text(
            HOSTILE_SOURCE.replace("{marker}", base.name), encoding="utf-8")
    shutil.copy(CORPUS / LOOSE_FILE[1] / "serving.py", klass / f"{LOOSE_FILE[0]}.py")
    (klass / "submission_metadata.yml").write_text("".join(metadata), encoding="utf-8")
    run = regrade(base)
    assert run.returncode == 0, run.stderr[-3000:]
    return run


@pytest.mark.slow
def test_every_submission_gets_its_exact_score_and_its_submitters_in_grades_csv(
        first_run: Regrade) -> None:
    scores = {ident: float(row["score"]) for ident, row in first_run.rows.items()}
    assert scores == expected_scores()
    assert {row["status"] for row in first_run.rows.values()} == {"graded"}
    ada = first_run.rows["submission_101"]
    assert (ada["name"], ada["sid"], ada["email"]) == (
        "Ada Lovelace", "101", "submission_101@example.edu")
    assert first_run.rows[LOOSE_FILE[0]]["name"] == ""


@pytest.mark.slow
def test_per_function_points_are_full_except_in_the_functions_a_bug_reaches(
        first_run: Regrade) -> None:
    maxima = {row["function"]: row["max_score"] for row in first_run.report["functions"]}
    assert len(maxima) == 9
    for folder, (name, _) in CLASS_MEMBERS.items():
        row = first_run.rows[folder]
        reaches = set() if name == "correct" else CORPUS_EXPECTED[name].reaches
        points = {function: float(row[function]) for function in maxima}
        assert sum(points.values()) == pytest.approx(float(row["score"]), abs=1e-5)
        for function, maximum in maxima.items():
            if function in reaches:
                assert points[function] < maximum, (folder, function)
            else:
                assert points[function] == pytest.approx(maximum), (folder, function)


@pytest.mark.slow
def test_each_test_passes_in_exactly_the_submissions_whose_bug_does_not_reach_it(
        first_run: Regrade) -> None:
    buggy = [name for name, _ in CLASS_MEMBERS.values() if name != "correct"]
    buggy.append(LOOSE_FILE[1])
    graded_count = len(expected_scores())
    tests = first_run.report["tests"]
    assert tests, "the report lists no tests"
    for row in tests:
        failing = sum(row["test"] in CORPUS_EXPECTED[name].loses for name in buggy)
        failing += AS_ROOT  # the hostile submission fails every test
        assert (row["passed"], row["graded"]) == (graded_count - failing, graded_count), row
        assert row["pass_rate"] == pytest.approx((graded_count - failing) / graded_count)
    rates = [row["pass_rate"] for row in tests]
    assert rates == sorted(rates)


@pytest.mark.slow
def test_the_class_report_ranks_failures_and_draws_the_histogram(
        base: Path, first_run: Regrade) -> None:
    failures = {row["message"]: row for row in first_run.report["failures"]}
    battery = failures["battery_wh: expected None, got # - expected None, got float"]
    assert battery["submissions"] == 2  # submission_103 and the loose file
    assert battery["functions"] == ["serving_track_profile"]
    assert battery["hint"]
    assert first_run.report["failures"][0]["submissions"] >= 2
    assert sum(first_run.report["histogram"]["counts"]) == len(expected_scores())
    assert (base / "out" / "histogram.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = (base / "out" / "report.md").read_text(encoding="utf-8")
    assert "## Pass rate of every test" in text
    assert "![score histogram](histogram.png)" in text
    for folder in expected_scores():
        results = json.loads((base / "out" / "submissions" / folder / "results.json")
                             .read_text(encoding="utf-8"))
        assert results["score"] == pytest.approx(expected_scores()[folder])


@pytest.mark.slow
@pytest.mark.skipif(not AS_ROOT, reason="per-slot sandbox users need root")
def test_a_hostile_submission_hurts_no_other_and_leaves_nothing_behind(
        base: Path, first_run: Regrade) -> None:
    assert first_run.rows[HOSTILE]["score"] == "0.0"
    results = json.loads((base / "out" / "submissions" / HOSTILE / "results.json")
                         .read_text(encoding="utf-8"))
    assert "importing it took longer than the deadline" in results["output"]
    assert not list(Path("/tmp").glob(f"regrade-hostile-{base.name}-*"))
    assert survivors(str(base)) == []


@pytest.mark.slow
def test_as_root_the_class_and_its_results_are_closed_to_other_users(
        base: Path, first_run: Regrade) -> None:
    if os.geteuid() != 0:
        pytest.skip("the sandbox users, and the need to close folders to them, exist only "
                    "when the regrade runs as root")
    for folder in (base / "class", base / "out"):
        assert folder.stat().st_mode & 0o007 == 0, folder
    # said once, in the summary: what changed, why, and how to undo it
    assert f"closed {str(base / 'class')!r} to other users" not in first_run.stderr
    summary = first_run.stdout
    assert f"  closed {str(base / 'class')!r} to other users (mode " in summary
    assert "so that student code, run as a sandbox user, cannot read the class's " \
           "submissions or results" in summary
    assert f"chmod o+rx {base / 'class'}" in summary


@pytest.mark.slow
def test_a_second_run_skips_everything_and_a_changed_submission_or_force_regrades(
        base: Path, first_run: Regrade) -> None:
    meta = {folder: base / "out" / "submissions" / folder / "meta.json"
            for folder in expected_scores()}
    before = {folder: path.read_text(encoding="utf-8") for folder, path in meta.items()}
    again = regrade(base)
    assert again.returncode == 0, again.stderr[-3000:]
    count = len(expected_scores())
    assert f"{count} submissions: 0 processed now, {count} up to date" in again.stdout
    assert {f: p.read_text(encoding="utf-8") for f, p in meta.items()} == before
    assert again.rows == first_run.rows

    changed = base / "class" / "submission_104" / "serving.py"
    changed.write_text(changed.read_text(encoding="utf-8") + "\n# resubmitted\n",
                       encoding="utf-8")
    third = regrade(base)
    assert f"{count} submissions: 1 processed now, {count - 1} up to date" in third.stdout
    after = {f: p.read_text(encoding="utf-8") for f, p in meta.items()}
    assert [f for f in meta if after[f] != before[f]] == ["submission_104"]
    assert third.rows["submission_104"]["score"] == first_run.rows["submission_104"]["score"]

    forced = regrade(base, "--force")
    assert f"{count} submissions: {count} processed now, 0 up to date" in forced.stdout
    assert forced.rows == first_run.rows


@pytest.mark.slow
def test_a_submission_past_the_timeout_is_stopped_with_no_score_and_retried(base: Path) -> None:
    home = base / "timeout"
    (home / "class").mkdir(parents=True)
    (home / "tmp").mkdir()
    for folder in (home, home / "tmp"):
        folder.chmod(0o755)
    shutil.copytree(ADVERSARIAL / "hang_everywhere", home / "class" / "hangs")
    run = regrade(home, "--timeout", "10", "--no-histogram")
    assert run.returncode == GRADER_FAILED_EXIT, run.stderr[-3000:]
    assert "1 of 1 submissions have no score" in run.stderr
    assert run.elapsed_s < 10 + 30
    assert run.rows["hangs"]["status"] == "timed_out"
    assert run.rows["hangs"]["score"] == ""  # no score, never a 0
    results = json.loads((home / "out" / "submissions" / "hangs" / "results.json")
                         .read_text(encoding="utf-8"))
    assert results["grader_failed"] is True
    assert "score" not in results
    assert "grading took longer than 10 s and was stopped" in results["reason"]
    assert "not graded: hangs (timed_out)" in run.stdout
    assert survivors(str(home)) == []


#: A ``sitecustomize`` that breaks the grader while FLAG exists: every results document it
#: builds is found invalid (a bug of the grader, as far as a grading can tell).
BROKEN_GRADER = """
import os
import graders.results.reports as reports

_problems = reports.gradescope_problems


def gradescope_problems(document):
    if os.path.exists({flag!r}) and isinstance(document, dict) and "tests" in document:
        return ["injected: the grader is broken"]
    return _problems(document)


reports.gradescope_problems = gradescope_problems
"""


@pytest.mark.slow
def test_a_grader_failure_is_never_a_score_and_the_next_run_grades_it_again(
        base: Path) -> None:
    home = base / "broken"
    (home / "class" / "ann").mkdir(parents=True)
    (home / "tmp").mkdir()
    for folder in (home, home / "tmp"):
        folder.chmod(0o755)
    shutil.copy(CORPUS / "correct" / "serving.py", home / "class" / "ann" / "serving.py")
    flag, site = home / "broken.flag", home / "site"
    flag.touch()
    site.mkdir()
    (site / "sitecustomize.py").write_text(BROKEN_GRADER.format(flag=str(flag)),
                                           encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(TMPDIR=str(home / "tmp"), PYTHONPATH=str(site))

    def run() -> subprocess.CompletedProcess[str]:
        return run_cli("regrade", home / "class", "--out", home / "out", "--no-histogram",
                       cwd=home, env=env)

    broken = run()
    assert broken.returncode == GRADER_FAILED_EXIT, broken.stderr[-3000:]
    rows = list(csv.DictReader(io.StringIO((home / "out" / "grades.csv").read_text("utf-8"))))
    assert [(row["status"], row["score"]) for row in rows] == [("grader_failed", "")]
    results = json.loads((home / "out" / "submissions" / "ann" / "results.json")
                         .read_text(encoding="utf-8"))
    assert results["grader_failed"] is True
    assert "score" not in results
    assert "injected: the grader is broken" in results["reason"]
    flag.unlink()  # the grader is fixed: the same command grades it again, not "up to date"
    fixed = run()
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    assert "1 processed now, 0 up to date" in fixed.stdout
    rows = list(csv.DictReader(io.StringIO((home / "out" / "grades.csv").read_text("utf-8"))))
    assert [(row["status"], row["score"]) for row in rows] == [("graded", "100.0")]


def test_the_same_failure_of_two_functions_makes_two_groups_each_with_its_hint() -> None:
    output = ("t: 1 of 1 cases failed (tolerance rel 1e-06, abs 1e-09)\n"
              "every failed case: not implemented yet (NotImplementedError)")
    entry = graded("fay", result_test("t_state", "transformer_state_gb", 0.0, 1.0, output),
                   result_test("t_quantity", "quantity_to_float", 0.0, 1.0, output))
    groups = failure_groups([entry])
    assert sorted(group.functions for group in groups) == [("quantity_to_float",),
                                                           ("transformer_state_gb",)]


@pytest.mark.slow
def test_a_regrade_with_the_course_secret_is_single_gradings_and_a_new_secret_redoes_all(
        base: Path) -> None:
    home = base / "secret"
    (home / "class").mkdir(parents=True)
    (home / "tmp").mkdir()
    for folder in (home, home / "tmp"):
        folder.chmod(0o755)
    for name in ("correct", "passes_floor"):
        shutil.copytree(CORPUS / name, home / "class" / name)
    secret = home / "course.zip.secret"
    secret.write_text("this term\n", encoding="ascii")
    run = regrade(home, "--secret-file", str(secret), "--no-histogram")
    assert run.returncode == 0, run.stderr[-3000:]
    for name in ("correct", "passes_floor"):
        single = run_cli("grade", CORPUS / name, "--results", home / f"{name}.json", "-q",
                         "--secret-file", secret)
        assert single.returncode == 0, single.stderr
        documents = [json.loads(path.read_text(encoding="utf-8")) for path in
                     (home / f"{name}.json", home / "out" / "submissions" / name / "results.json")]
        for document in documents:
            document.pop("execution_time")
        assert documents[0]["extra_data"]["unseen_inputs_sha256"] == \
            documents[1]["extra_data"]["unseen_inputs_sha256"]
        assert documents[0]["tests"] == documents[1]["tests"]
        assert documents[0]["score"] == documents[1]["score"]
    secret.write_text("next term\n", encoding="ascii")
    refused = regrade(home, "--secret-file", str(secret), "--no-histogram")
    assert refused.returncode == 2
    assert "the course secret" in refused.stderr
    rotated = regrade(home, "--secret-file", str(secret), "--no-histogram", "--new-settings")
    assert "2 submissions: 2 processed now, 0 up to date" in rotated.stdout
