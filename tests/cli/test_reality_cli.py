"""``graders reality build|table`` as an instructor runs them, ``graders tracks show``'s
real p99, and the instructor guide's table, which must be the command's output."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from helpers import CORPUS, REPO, graders

from graders.reality import store
from graders.reality.store import trusted_cached_folder
from graders.trackfiles.tracks import load_track

GUIDE = REPO / "docs" / "instructor-guide.md"
TABLE_START, TABLE_END = "<!-- reality-table:start -->", "<!-- reality-table:end -->"


def test_the_reality_command_offers_build_and_table() -> None:
    run = graders("reality", "--help")
    assert run.returncode == 0
    assert "build" in run.stdout
    assert "table" in run.stdout


def test_an_unknown_reality_command_is_a_one_line_usage_error() -> None:
    run = graders("reality", "simulate")
    assert run.returncode == 2
    assert len(run.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_build_then_tracks_show_prints_the_real_p99_beside_each_formula_p99() -> None:
    built = graders("reality", "build")
    assert built.returncode == 0, built.stderr
    assert "reality curves ready for 4 of 4 tracks" in built.stdout
    shown = graders("tracks", "show", "iphone")
    assert shown.returncode == 0, shown.stderr
    queueing = next(line for line in shown.stdout.splitlines() if "queueing " in line)
    batching = next(line for line in shown.stdout.splitlines() if "batching " in line)
    assert re.search(r"p99 132\.869 ms, .*real p99 147 ms \(exact\), formula error -10 %",
                     queueing), queueing  # one replica, no batching: M/G/1, exact
    assert re.search(r"total_p99 132\.183 ms, .*real p99 5\d\d ms ± [\d.]+ ms \(simulated\)",
                     batching), batching


@pytest.mark.slow
def test_the_table_explains_itself_with_a_legend_before_each_table() -> None:
    run = graders("reality", "table")
    assert run.returncode == 0, run.stderr
    blocks = run.stdout.strip().split("\n\n")
    assert len(blocks) == 4
    load_legend, load_table, default_legend, default_table = blocks
    for word in ("*Load*: the arrival rate as a fraction of the fleet's capacity",
                 "negative when the formula is optimistic"):
        assert word in load_legend
    for word in ("*Formula within 10 %*", "*SLO verdicts differ*",
                 "the nearest ones where they agree; each change lies between the two"):
        assert word in default_legend
    assert load_table.startswith("| track (replicas, service cv) | load 0.3 |")
    assert "| load 0.99 |" in load_table.splitlines()[0]
    rows = {tuple(line.split(" | ")[:2]): line for line in default_table.splitlines()[2:]}
    fleet = rows[("| cloud_fleet", "queueing_latency")]
    assert "(load 0.5; default 500 req/s is unstable)" in fleet
    assert re.search(r"\| -\d\d % \|", fleet), fleet  # its large gap shows
    assert "from B = 96 on (not at B = 64)" in rows[("| cloud_fleet", "batching_tax")]


def _forget(track_file: Path) -> None:
    """Remove the cached curves built for ``track_file`` as it is now, if any."""
    folder = trusted_cached_folder(store.CACHE_KIND, store.cache_key(load_track(track_file)))
    if folder is not None:
        shutil.rmtree(folder)


@pytest.mark.slow
def test_editing_one_track_rebuilds_its_curves_only_and_the_page_says_why_until_then(
        tmp_path: Path) -> None:
    tracks = tmp_path / "tracks"
    shutil.copytree(REPO / "tracks", tracks)
    assert graders("reality", "build", "--tracks", tracks).returncode == 0
    iphone = tracks / "iphone.toml"
    iphone.write_text(iphone.read_text(encoding="utf-8").replace(
        "slo_ms = 100", "slo_ms = 101"), encoding="utf-8")
    _forget(iphone)  # left by an interrupted run of this test
    try:
        graded = graders("grade", CORPUS / "correct", "--tracks", tracks, "--results",
                         tmp_path / "results.json", "--html", tmp_path / "page.html", "-q")
        assert graded.returncode == 0, graded.stderr[-2000:]
        page = (tmp_path / "page.html").read_text(encoding="utf-8")
        assert re.findall(r'<table class="reality" data-track="([^"]+)"', page) == [
            "cloud_fleet", "oura_ring", "robotaxi"]
        assert re.findall(r'<p class="reality-missing" data-reason="([^"]+)"', page) == [
            "changed"]
        built = graders("reality", "build", "--tracks", tracks)
        assert built.returncode == 0, built.stderr
        assert built.stdout.strip().endswith(
            "built now: iphone, already built: cloud_fleet, oura_ring, robotaxi")
    finally:
        _forget(iphone)


@pytest.mark.slow
def test_the_instructor_guides_table_is_the_commands_output() -> None:
    run = graders("reality", "table")
    assert run.returncode == 0, run.stderr
    text = GUIDE.read_text(encoding="utf-8")
    block = text.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0].strip()
    assert block == run.stdout.strip(), (
        "docs/instructor-guide.md's table is stale: paste 'graders reality table' between "
        f"{TABLE_START} and {TABLE_END}")
