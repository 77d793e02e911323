"""The regrade's preview shows what changed: a submission changed only when its score moved
beyond the grid, a test flipped only between passed and failed, rescaled points are one
line per cause for the class, changed_tests.csv keeps every test's change whatever its
name, and the page shows the movers first, within one screen for a class of 40."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from helpers import offline_page

from graders.regrade.changes import (
    FLIPPED,
    POINTS,
    changed_tests_table,
    compare,
    point_changes,
)
from graders.regrade.changespage import SHOWN_MOVES
from graders.regrade.classpage import build_class_page
from graders.regrade.report import class_report

SETTINGS = {"grader_version": "1.0", "code_sha256": "c", "tracks": {"iphone": "a",
                                                                   "robotaxi": "b"},
            "options": {}, "secret_sha256": ""}
TRACKS = ("iphone", "robotaxi")


def outcome(function: str, track: str, score: float, maximum: float,
            status: str | None = None) -> dict[str, Any]:
    return {"name": f"{function} matches [{track}]" if track else f"{function} holds",
            "status": status or ("passed" if score == maximum else "failed"),
            "score": score, "max_score": maximum, "track": track, "function": function,
            "tolerance": ""}


def submission(tests: dict[str, dict[str, Any]], score: float) -> dict[str, Any]:
    return {"status": "graded", "score": score, "sha256": "f", "tests": tests}


def rescaled_class(*, queueing: float, batching: float, noise: float) -> dict[str, Any]:
    """Three students graded with queueing_latency and batching_tax worth ``queueing``
    and ``batching`` on each track (5 together), and an invariant worth 90 that one
    fails by half and one by a fifth. ``noise``: one unit of the grid that a share can
    move by when it is shared again."""
    students = {}
    for name, invariant in (("ann", 90.0), ("bob", 45.0), ("cy", 72.0)):
        tests = {f"q[{track}]": outcome("queueing_latency", track, queueing, queueing)
                 for track in TRACKS}
        tests |= {f"b[{track}]": outcome("batching_tax", track, batching, batching)
                  for track in TRACKS}
        tests["inv"] = outcome("invariants", "", invariant + (noise if name == "cy" else 0.0),
                               90.0)
        students[name] = submission(tests, round(10.0 + invariant
                                                 + (noise if name == "bob" else 0.0), 6))
    return {"settings": SETTINGS, "submissions": students}


def test_a_class_whose_points_were_only_rescaled_has_no_changed_student() -> None:
    before = rescaled_class(queueing=3.0, batching=2.0, noise=0.0)
    after = rescaled_class(queueing=2.4, batching=2.6, noise=1e-6)
    moves = compare(before, after)
    assert [move.changed for move in moves] == [False] * 3
    assert all(move.flips == () for move in moves)
    # the noise of one grid unit, on cy's invariant and bob's total, is no change at all
    assert {move.submission: {test.kind for test in move.tests} for move in moves} == {
        "ann": {"rescaled"}, "bob": {"rescaled"}, "cy": {"rescaled"}}
    assert point_changes(before, after) == [
        "points of every test on the iphone and robotaxi tracks: batching_tax 2 -> 2.6, "
        "queueing_latency 3 -> 2.4 each"]


def test_a_track_added_is_one_line_for_the_new_tests_and_one_for_the_others() -> None:
    four = {"settings": SETTINGS, "submissions": {"ann": submission({
        f"q[{track}]": outcome("queueing_latency", track, 3.0, 3.0)
        for track in ("cloud", "iphone")}, 6.0)}}
    five = {"settings": SETTINGS, "submissions": {"ann": submission({
        f"q[{track}]": outcome("queueing_latency", track, 2.0, 2.0)
        for track in ("cloud", "iphone", "jetson")}, 6.0)}}
    assert point_changes(four, five) == [
        "tests added: 1 on the jetson track (2 points)",
        "points of every test on the cloud and iphone tracks: 3 -> 2 each (1 test each)"]
    [move] = compare(four, five)
    assert not move.changed
    assert [test.kind for test in move.tests] == ["rescaled", "rescaled", "added"]


def test_only_passed_to_failed_or_back_is_a_flip() -> None:
    before = {"settings": SETTINGS, "submissions": {"ann": submission({
        "a": outcome("a", "iphone", 1.0, 3.0), "b": outcome("b", "iphone", 2.0, 2.0),
        "c": outcome("c", "iphone", 0.5, 3.0)}, 3.5)}}
    after = {"settings": SETTINGS, "submissions": {"ann": submission({
        "a": outcome("a", "iphone", 2.5, 3.0), "b": outcome("b", "iphone", 1.0, 2.0),
        "c": outcome("c", "iphone", 0.5, 3.0)}, 4.0)}}
    [move] = compare(before, after)
    assert move.changed
    assert [(test.name, test.kind) for test in move.tests] == [
        ("a matches [iphone]", POINTS), ("b matches [iphone]", FLIPPED)]


def test_changed_tests_csv_keeps_a_test_name_with_separators_whole() -> None:
    name = 'queueing; "p99", at q=0.95 [iphone]'
    failed = outcome("queueing_latency", "iphone", 1.0, 3.0) | {"name": name}
    passed = outcome("queueing_latency", "iphone", 3.0, 3.0) | {"name": name}
    before = {"settings": SETTINGS, "submissions": {"ann; bo": submission({"k": failed}, 1.0)}}
    after = {"settings": SETTINGS, "submissions": {"ann; bo": submission({"k": passed}, 3.0)}}
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(changed_tests_table(compare(before,
                                                                                 after)))
    [row] = list(csv.DictReader(io.StringIO(buffer.getvalue())))
    assert (row["submission"], row["test"], row["track"], row["change"]) == (
        "ann; bo", name, "iphone", "flipped")
    assert (row["score_before"], row["max_before"], row["score_after"], row["max_after"]) == (
        "1.0", "3.0", "3.0", "3.0")


def forty_movers() -> dict[str, Any]:
    flips = [{"test": f"function_{index} matches the reference on every case [track_{index}]",
              "before": "passed (2.4/2.4)", "after": "failed (0.5/2.4)"} for index in range(40)]
    return {"compared_with": {"folder": "regrade", "finished_at": "2024-03-01T12:00:00+00:00"},
            "settings": ["track iphone: changed"], "submissions": 40,
            "points": ["points of every test on the cloud_fleet, iphone, oura_ring and "
                       "robotaxi tracks: 12.5 -> 10 each (6 tests each)"],
            "unchanged_with_test_changes": 0,
            "moves": [{"submission": f"student-{index:02d}", "status_before": "graded",
                       "status_after": "graded", "score_before": 90.0,
                       "score_after": 80.0 - index / 10, "change": -10.0 - index / 10,
                       "tests_flipped": flips, "tests_points": flips[:5],
                       "why": ["track iphone"]} for index in range(40)]}


def test_forty_movers_fit_one_screen_with_the_rest_one_click_away(tmp_path: Path) -> None:
    page = tmp_path / "class.html"
    page.write_text(build_class_page({**class_report([]), "changes": forty_movers()},
                                     names=True), encoding="utf-8")
    with offline_page(page) as opened:
        box = opened.page.locator("#changes").bounding_box()
        shown = opened.page.locator("#moves tr[data-submission]")
        assert shown.count() == SHOWN_MOVES
        assert shown.first.is_visible()
        assert opened.page.locator("#more-moves tr[data-submission]").count() == 40 - SHOWN_MOVES
        assert not opened.page.locator("#more-moves tr[data-submission]").first.is_visible()
        # each test list is one click away, closed
        assert not opened.page.locator("#moves li").first.is_visible()
        opened.page.locator("#more-moves > summary").click()
        assert opened.page.locator("#more-moves tr[data-submission]").first.is_visible()
        assert opened.problems == []
    assert box is not None
    assert box["y"] + box["height"] <= 1080  # a screen: the whole section, at the top
