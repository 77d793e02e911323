"""The reality curves on the feedback page: the exact or simulated p99 with its band in the
queueing_latency and batching_tax figures, the explanation, and each track's small table."""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import CHROMIUM_ARGS, CORPUS, chromium, graders

from graders.expected.reference import reference_expected
from graders.feedback.curves import BATCHES, LOADS, track_sweeps
from graders.feedback.measure import measure
from graders.feedback.page import FeedbackReport
from graders.feedback.plots import FLIP_COLOR, REALITY
from graders.reality.curves import RealityCurve, RealityPoint
from graders.sandbox.runner import CallOutcome
from graders.trackfiles.tracks import Track, default_tracks_dir, load_track, load_tracks

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def iphone() -> Track:
    return load_track(default_tracks_dir() / "iphone.toml")


def _reality(track: Track) -> tuple[RealityCurve, RealityCurve]:
    """Made-up curves: reality twice the formula's p99 and a 10 % band, so the formula
    meets the SLO where reality does not at some inputs."""
    p = track.reference_profile()
    capacity = p.replicas * 1000.0 / p.service_ms
    loads = tuple(RealityPoint(rho * capacity, 60.0 + 100 * rho, 2 * (60.0 + 100 * rho),
                               0.1 * (60.0 + 100 * rho), "simulated")
                  for rho in LOADS if rho < 1)
    batches = tuple(RealityPoint(float(b), 50.0 + b, 3 * (50.0 + b), 5.0, "simulated")
                    for b in BATCHES)
    return (RealityCurve(track.track_id, "queueing_latency", "load", p.slo_ms, p.service_cv,
                         p.replicas, loads, loads[3]),
            RealityCurve(track.track_id, "batching_tax", "batch", p.slo_ms, p.service_cv,
                         p.replicas, batches, batches[1]))


def _report(track: Track, with_reality: bool) -> FeedbackReport:
    measured = measure(track_sweeps(track),
                       lambda case: CallOutcome("ok", value=reference_expected(case)),
                       reference_expected)
    reality = {track.track_id: _reality(track)} if with_reality else {}
    return FeedbackReport({track.track_id: track.label}, tuple(measured), reality=reality)


def _figures(report: FeedbackReport) -> dict[str, ET.Element]:
    return {view.function: ET.fromstring(base64.b64decode(str(view.image).split(",")[1]))
            for view in report.views() if view.image is not None}


def _drawn(figure: ET.Element, color: str) -> list[ET.Element]:
    return [e for e in figure.iter(f"{SVG}path")
            if color in (e.get("stroke"), e.get("fill"))]


def test_the_queueing_and_batching_figures_draw_the_real_p99_its_band_and_the_flips(
        iphone: Track) -> None:
    figures = _figures(_report(iphone, with_reality=True))
    for function in ("queueing_latency", "batching_tax"):
        drawn = _drawn(figures[function], REALITY)
        assert any(e.get("stroke") == REALITY for e in drawn), function  # the line
        assert any(e.get("fill") == REALITY for e in drawn), function  # the band
        texts = [t.text for t in figures[function].iter(f"{SVG}text")]
        assert "simulated p99 (95 % band)" in texts
        assert "SLO verdict flips" in texts
        assert _drawn(figures[function], FLIP_COLOR)
    for function in ("cache_capacity", "cold_start_latency"):
        assert not _drawn(figures[function], REALITY)


def test_without_reality_curves_the_figures_are_as_before(iphone: Track) -> None:
    plain, real = _report(iphone, with_reality=False), _report(iphone, with_reality=True)
    plain_figures, real_figures = _figures(plain), _figures(real)
    assert not _drawn(plain_figures["queueing_latency"], REALITY)
    for function in ("cache_capacity", "cold_start_latency"):
        assert ET.tostring(plain_figures[function]) == ET.tostring(real_figures[function])


def test_the_page_explains_the_difference_and_tables_each_tracks_numbers(
        iphone: Track) -> None:
    page = _report(iphone, with_reality=True).page({"score": 1.0, "tests": []})
    assert "Where the formulas meet reality (not graded)." in page
    for reason in ("The service tail.", "A mean added to a quantile.",
                   "The distribution's shape."):
        assert reason in page
    table = re.search(r'<table class="reality" data-track="iphone">.*?</table>', page)
    assert table is not None
    rows = re.findall(r'<tr data-function="([^"]+)">(.*?)</tr>', table.group(0))
    assert [function for function, _ in rows] == ["queueing_latency", "batching_tax"]
    batching = rows[1][1]
    assert "<td>B = 2</td>" in batching
    assert "156 ms ± 5 ms (simulated)" in batching
    assert "-67 %" in batching


def test_a_page_without_reality_curves_has_no_table_and_no_explanation(
        iphone: Track) -> None:
    page = _report(iphone, with_reality=False).page({"score": 1.0, "tests": []})
    assert '<table class="reality"' not in page
    assert '<div class="reality-note">' not in page



def _missing_lines(page: str) -> list[tuple[str, str]]:
    return re.findall(r'<p class="reality-missing" data-reason="([^"]+)">([^<]*)</p>', page)


def test_a_track_without_curves_says_why_when_others_have_them(iphone: Track) -> None:
    report = _report(iphone, with_reality=True)
    shifted = FeedbackReport(report.track_labels, report.measured,
                             reality={"another_track": report.reality["iphone"]},
                             reality_missing={"iphone": "changed"})
    page = shifted.page({"score": 1.0, "tests": []})
    assert _missing_lines(page) == [(
        "changed", "The real p99 of this track is not shown: its track file (or the grader) "
        "changed after its curves were built: run &#x27;graders reality build&#x27; again.")]
    assert '<table class="reality"' not in page


def test_a_page_without_any_curves_says_in_one_line_they_were_not_built(
        iphone: Track) -> None:
    """No track has curves (an install that never built them, or a deleted cache): each
    track still says why, and what to run."""
    page = _report(iphone, with_reality=False).page({"score": 1.0, "tests": []})
    [(reason, line)] = _missing_lines(page)
    assert reason == "not built"
    assert "never built here, or their cache was deleted" in line
    assert "graders reality build" in line

# --- a real grading's page, in a real browser ----------------------------------------------


@pytest.mark.slow
def test_every_tracks_reality_curves_show_in_headless_chromium(tmp_path: Path) -> None:
    """Graded as a user grades (the curves built first, as an install does), the page
    shows each track's table and both reality figures, and the explanation."""
    executable = chromium()
    from playwright.sync_api import sync_playwright

    assert graders("reality", "build").returncode == 0
    run = graders("grade", CORPUS / "correct", "--results", tmp_path / "results.json",
                  "--html", tmp_path / "page.html", "-q")
    assert run.returncode == 0, run.stderr[-2000:]
    page_text = (tmp_path / "page.html").read_text(encoding="utf-8")
    tracks = load_tracks(default_tracks_dir())
    for view in re.findall(r'<img data-function="(queueing_latency|batching_tax)" '
                           r'data-track="[^"]+" src="data:image/svg\+xml;base64,([^"]+)"',
                           page_text):
        figure = ET.fromstring(base64.b64decode(view[1]))
        assert _drawn(figure, REALITY), view[0]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto((tmp_path / "page.html").as_uri(), wait_until="load")
            note_visible = page.locator("div.reality-note").is_visible()
            tables = page.eval_on_selector_all(
                "table.reality", "els => els.map(e => [e.dataset.track, "
                "e.querySelectorAll('tbody tr').length, e.getBoundingClientRect().height])")
            loaded = page.eval_on_selector_all(
                "img[data-function]", "els => els.filter(e => ['queueing_latency', "
                "'batching_tax'].includes(e.dataset.function)).map(e => e.complete && "
                "e.naturalWidth > 0)")
        finally:
            browser.close()
    assert note_visible
    assert sorted(track for track, _, _ in tables) == sorted(t.track_id for t in tracks)
    assert all(rows == 2 and height > 0 for _, rows, height in tables)
    assert len(loaded) == 2 * len(tracks)
    assert all(loaded)
