"""The feedback page without its colours: every test's state is a word, and the box that
says where the student stands is a live region (``role="status"``), read in headless
Chromium's accessibility tree."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

import pytest
from helpers import offline_page

from graders.feedback.render import build_page


def a_test(name: str, score: float, *, status: str = "", outcome: str = "",
           visibility: str = "visible") -> dict[str, Any]:
    test: dict[str, Any] = {
        "name": name, "score": score, "max_score": 3.0,
        "status": status or ("passed" if score == 3.0 else "failed"),
        "output": "" if score == 3.0 else f"{name}: 1 of 2 cases failed, on this track",
        "tags": ["serve"], "visibility": visibility}
    if outcome:
        test["extra_data"] = {"outcome": outcome}
    return test


def page_of(tests: list[dict[str, Any]], tmp_path: Path) -> Path:
    document = {"score": sum(test["score"] for test in tests), "output": "Graded.",
                "extra_data": {"max_score": 3.0 * len(tests)}, "tests": tests}
    path = tmp_path / "page.html"
    path.write_text(build_page(document, []), encoding="utf-8")
    return path


@pytest.mark.slow  # a browser starts: about 2 s
def test_each_state_is_a_word_and_the_status_box_is_a_live_region(tmp_path: Path) -> None:
    tests = [a_test("serve passes", 3.0), a_test("serve fails", 1.0),
             a_test("serve not run", 0.0, outcome="not run"),
             a_test("serve hidden", 0.0, visibility="after_published")]
    with offline_page(page_of(tests, tmp_path)) as opened:
        page = opened.page
        rows = [" ".join(text.split()) for text in page.locator("li.test").all_inner_texts()]
        assert [row.split(" serve ", 1)[0] for row in rows] == [
            "passed", "failed", "not run", "hidden"]
        status = page.get_by_role("status")
        assert status.count() == 1  # one live region: where the student stands
        tree = status.aria_snapshot()
        assert "What to fix first" in tree
        assert "serve" in tree
        assert opened.problems == []


@pytest.mark.slow  # a browser starts: about 2 s
def test_a_page_where_every_test_passes_says_so_in_its_live_region(tmp_path: Path) -> None:
    with offline_page(page_of([a_test("serve passes", 3.0)], tmp_path)) as opened:
        status = opened.page.get_by_role("status")
        assert status.count() == 1
        assert "Every test passes" in status.inner_text()


def test_the_pass_mark_in_the_gain_plot_legend_is_explained_under_the_plots(
        tmp_path: Path) -> None:
    from graders.feedback.curves import GAIN_PASS_MARK, batch_sweep
    from graders.trackfiles.tracks import default_tracks_dir, load_tracks

    track = load_tracks(default_tracks_dir())[0]
    labels = [guide.label for panel in batch_sweep(track).panels for guide in panel.guides]
    mark = next(label for label in labels if "pass mark" in label)
    page = page_of([a_test("serve passes", 3.0)], tmp_path).read_text(encoding="utf-8")
    curves = page.split('<section id="curves">', 1)[1]
    assert escape(f"\u201c{mark}\u201d, is the lab's pass mark: from a batch of 32 on") \
        in curves
    assert escape(f"must more than double throughput ({GAIN_PASS_MARK:g}x the unbatched") \
        in curves
