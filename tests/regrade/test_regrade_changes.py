"""A regrade shows what it changes (issue 34): a track's default fixed between two
regrades, previewed in a new folder with --compare (the published grades untouched), then
published in the class's folder; and each reason read from what the runs recorded."""

from __future__ import annotations

import csv
import html.parser
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import CORPUS, REPO

from graders.regrade.changes import compare, setting_changes

CLASS = ("correct", "variability_linear_cv", "mb_over_1000")
#: The fix: the iPhone's service-time variability, 0.8 -> 1.0. At cv = 1 the linear factor
#: (1 + cv) / 2 equals the lab's (1 + cv²) / 2, so that bug no longer shows at the iPhone's
#: defaults: its queueing and batching tests on the iPhone gain points.
FIX = ("service_cv = 0.8\n", "service_cv = 1.0\n")


def regrade(root: Path, out: Path, *extra: str) -> None:
    run = subprocess.run([sys.executable, "-m", "graders", "regrade", str(root), "--out",
                          str(out), "--jobs", "2", "--names", "--no-histogram", *extra],
                         capture_output=True, text=True, timeout=900, check=False)
    assert run.returncode == 0, run.stderr


def changes(out: Path) -> list[dict[str, str]]:
    with (out / "changes.csv").open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def changed_tests(out: Path) -> list[dict[str, str]]:
    with (out / "changed_tests.csv").open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


class _Moves(html.parser.HTMLParser):
    """The rows of the "What changed" table, and where the section sits on the page."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.order: list[str] = []
        self._cell: list[str] | None = None
        self._moved = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "h2" or (tag == "div" and dict(attrs).get("id") == "changes"):
            self.order.append(dict(attrs).get("id") or tag)
        if tag == "tr":
            self._moved = any(key == "data-submission" for key, _ in attrs)
            if self._moved:
                self.rows.append([])
        if tag == "td" and self._moved:
            self._cell = []

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None


@pytest.mark.slow
def test_a_track_default_fixed_between_two_regrades_is_previewed_then_published(
        tmp_path: Path) -> None:
    tmp_path.chmod(0o700)
    root = tmp_path / "class"
    root.mkdir(mode=0o700)
    for name in CLASS:
        (root / name).mkdir()
        shutil.copy(CORPUS / name / "serving.py", root / name / "serving.py")
    published = tmp_path / "regrade"
    regrade(root, published)
    assert not (published / "changes.csv").exists()  # nothing to compare with yet
    page = (published / "class.html").read_text(encoding="utf-8")
    assert "Nothing to compare with" in page
    grades = (published / "grades.csv").read_bytes()

    tracks = tmp_path / "tracks"
    shutil.copytree(REPO / "tracks", tracks)
    iphone = tracks / "iphone.toml"
    text = iphone.read_text(encoding="utf-8")
    assert text.count(FIX[0]) == 1
    iphone.write_text(text.replace(*FIX), encoding="utf-8")

    preview = tmp_path / "preview"
    regrade(root, preview, "--tracks", str(tracks), "--compare", str(published))
    assert (published / "grades.csv").read_bytes() == grades  # the published grades untouched
    [row] = changes(preview)
    assert (row["submission"], row["status_before"], row["status_after"], row["score_before"],
            row["score_after"], row["why"]) == (
        "variability_linear_cv", "graded", "graded", "88.17094", "91.961538", "track iphone")
    assert float(row["change"]) == pytest.approx(91.961538 - 88.17094)
    assert row["flipped"] == "1"  # batching_tax on the iPhone; queueing_latency gains points
    tests = changed_tests(preview)
    assert [(test["submission"], test["track"], test["change"]) for test in tests] == [
        ("variability_linear_cv", "iphone", "points"),
        ("variability_linear_cv", "iphone", "flipped")]
    assert tests[1]["test"].startswith("batching_tax")
    assert (tests[1]["status_after"], tests[1]["score_after"], tests[1]["max_after"]) == (
        "passed", "2.5", "2.5")

    page = (preview / "class.html").read_text(encoding="utf-8")
    moves = _Moves()
    moves.feed(page)
    assert moves.order[:2] == ["changes", "h2"]  # at the top of the page
    assert [row[:4] + row[5:] for row in moves.rows] == [
        ["variability_linear_cv", "88.17", "91.96", "+3.79", "track iphone"]]
    assert "Settings that differ: <code>track iphone: changed</code>." in page
    report: dict[str, Any] = json.loads((preview / "report.json").read_text(encoding="utf-8"))
    assert report["changes"]["compared_with"]["folder"] == "regrade"
    assert [move["why"] for move in report["changes"]["moves"]] == [["track iphone"]]

    # publish: the class's own folder, its grades replaced on purpose
    regrade(root, published, "--tracks", str(tracks), "--new-settings")
    assert changes(published) == changes(preview)
    assert changed_tests(published) == changed_tests(preview)
    assert (published / "grades.csv").read_bytes() != grades


def test_compare_needs_a_folder_with_a_recorded_run(tmp_path: Path) -> None:
    (tmp_path / "class").mkdir(mode=0o700)
    (tmp_path / "class" / "a.py").write_text("x = 1\n", encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "graders", "regrade", str(tmp_path / "class"),
                          "--out", str(tmp_path / "out"), "--no-histogram", "--compare",
                          str(tmp_path / "nothing")],
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 2, run.stderr
    assert "--compare" in run.stderr
    assert "holds no run.json" in run.stderr
    assert not (tmp_path / "out" / "grades.csv").exists()


SETTINGS = {"grader_version": "1.0", "code_sha256": "c", "tracks": {"iphone": "a",
                                                                   "robotaxi": "b"},
            "options": {}, "secret_sha256": ""}


def outcome(status: str, score: float, maximum: float = 2.0, track: str = "iphone",
            tolerance: str = "rel 1e-06") -> dict[str, Any]:
    return {"name": f"t [{track}]", "status": status, "score": score, "max_score": maximum,
            "track": track, "tolerance": tolerance}


def run(settings: dict[str, Any], **tests: dict[str, Any]) -> dict[str, Any]:
    score = sum(test["score"] for test in tests.values())
    return {"settings": settings, "submissions": {"ann": {
        "status": "graded", "score": score, "sha256": settings.get("file", "f"),
        "tests": tests}}}


@pytest.mark.parametrize(("after", "tests", "why"), [
    ({"tracks": {"iphone": "a2", "robotaxi": "b"}}, {}, ["track iphone"]),
    ({"file": "g"}, {}, ["the submission file"]),
    ({"grader_version": "1.1"}, {}, ["grader version 1.0 -> 1.1"]),
    ({"code_sha256": "d"}, {}, ["the grader's code"]),
    ({}, {"maximum": 4.0}, ["the points"]),
    ({"options": {"--max-score": "50"}}, {}, ["the points"]),
    ({}, {"tolerance": "rel 1e-04"}, ["the tolerance"]),
    ({"secret_sha256": "s"}, {}, ["the secret"]),
    ({}, {}, ["no recorded cause"]),
    ({"tracks": {"iphone": "a", "robotaxi": "b2"}}, {}, ["track robotaxi"]),
])
def test_each_reason_is_read_from_what_the_runs_recorded(
        after: dict[str, Any], tests: dict[str, Any], why: list[str]) -> None:
    before = run({**SETTINGS, "file": "f"}, t=outcome("failed", 1.0))
    now = run({**SETTINGS, "file": "f", **after}, t=outcome("passed", 2.0, **tests))
    [move] = compare(before, now)
    assert (move.submission, move.before, move.after, move.change) == ("ann", 1.0, 2.0, 1.0)
    maximum = tests.get("maximum", 2.0)
    assert [flip.text() for flip in move.flips] == [
        f"t [iphone]: failed (1/2) -> passed (2/{maximum:g})"]
    assert list(move.reasons) == why


def test_a_track_that_changed_is_blamed_only_for_its_own_tests() -> None:
    before = run(SETTINGS, t=outcome("failed", 1.0))
    now = run({**SETTINGS, "tracks": {"iphone": "a", "robotaxi": "b2"}, "file": "g"},
              t=outcome("passed", 2.0))
    [move] = compare(before, now)
    assert list(move.reasons) == ["the submission file"]
    assert setting_changes(before["settings"], now["settings"]) == ["track robotaxi: changed"]


def test_an_unchanged_run_moves_nobody() -> None:
    before = run(SETTINGS, t=outcome("failed", 1.0))
    assert compare(before, before) == []


@pytest.mark.parametrize("changes", [
    {"compared_with": None, "settings": [], "moves": []},
    {"compared_with": {"folder": "<b>old</b>", "finished_at": "2024"}, "settings": [],
     "moves": []},
    {"compared_with": {"folder": "old", "finished_at": "2024"},
     "settings": ["track iphone: changed"],
     "moves": [{"submission": "<i>ann</i>", "status_before": "graded",
                "status_after": "graded", "score_before": 1.0, "score_after": 2.0,
                "change": 1.0, "tests_flipped": [{"test": "t", "before": "failed (1/2)",
                                                  "after": "passed (2/2)"}],
                "why": ["track iphone"]}]},
])
def test_the_what_changed_block_is_balanced_and_escaped(changes: dict[str, Any]) -> None:
    from graders.regrade.classpage import build_class_page
    from graders.regrade.report import class_report

    page = build_class_page({**class_report([]), "changes": changes}, names=True)
    start = page.index('<div id="changes">')
    block = page[start:page.index("<h2>Score distribution</h2>")]
    assert block.count("<div") == block.count("</div>") == 1
    assert "<b>old</b>" not in block
    assert "<i>ann</i>" not in block


@pytest.mark.parametrize("damage", [
    {"submissions": []},
    {"submissions": {"ann": {"status": "graded", "score": "ten", "tests": {}}}},
    {"submissions": {"ann": {"status": "graded", "score": 1.0, "tests": {"t": "passed"}}}},
    {"submissions": {"ann": {"status": "graded", "score": 1.0,
                             "tests": {"t": {"status": "passed", "score": "2"}}}}},
    {"settings": []},
])
def test_a_damaged_run_json_is_no_baseline_rather_than_a_crash(
        tmp_path: Path, damage: dict[str, Any]) -> None:
    from graders.regrade.changes import RUN_NAME, SCHEMA_VERSION, read_run

    (tmp_path / RUN_NAME).write_text(json.dumps(
        {**run(SETTINGS, t=outcome("failed", 1.0)), "schema_version": SCHEMA_VERSION,
         **damage}), encoding="utf-8")
    assert read_run(tmp_path) is None


def test_a_run_with_nothing_to_compare_with_leaves_no_earlier_changes_csv(
        tmp_path: Path) -> None:
    from graders.regrade import command

    (tmp_path / "changes.csv").write_text("submission\nann\n", encoding="utf-8")
    current = {**run(SETTINGS, t=outcome("failed", 1.0)), "schema_version": 1}
    written, failures = command.write_outputs(tmp_path, [], histogram=False,
                                              run=(current, None, ""))
    assert failures == []
    assert not (tmp_path / "changes.csv").exists()
    assert "changes.csv" not in {path.name for path in written}


def test_a_submission_in_one_run_only_says_so() -> None:
    one = run(SETTINGS, t=outcome("failed", 1.0))
    nobody: dict[str, Any] = {"settings": SETTINGS, "submissions": {}}
    [added] = compare(nobody, one)
    [removed] = compare(one, nobody)
    assert (added.before_status, added.after_status, list(added.reasons)) == \
        ("absent", "graded", ["a new submission"])
    assert (removed.before_status, removed.after_status, list(removed.reasons)) == \
        ("graded", "absent", ["the submission is gone"])
    # a rejected submission that now has its file: its file is the reason
    rejected = {"settings": SETTINGS, "submissions": {"ann": {"status": "rejected",
                                                              "score": 0.0, "tests": {}}}}
    [fixed] = compare(rejected, one)
    assert list(fixed.reasons) == ["the submission file"]
