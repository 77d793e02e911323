"""The HTML feedback report: its curves, its checks, its page, and the page in a real browser."""

from __future__ import annotations

import base64
import html
import importlib.abc
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import CHROMIUM_ARGS, CORPUS, REPO, chromium

from graders import cli
from graders.expected.reference import reference_expected
from graders.feedback.checks import violations
from graders.feedback.curves import PLOTTED_FUNCTIONS, Sweep, curve_cases, track_sweeps
from graders.feedback.measure import measure
from graders.feedback.page import FeedbackReport
from graders.feedback.plots import figure_uri
from graders.feedback.render import CSP, PlotView, build_page, number
from graders.grading.cases import Case
from graders.results.essentials import PAGE_HINT
from graders.results.reports import grader_failure_results, gradescope_problems
from graders.sandbox.runner import CallOutcome, StudentRunner
from graders.trackfiles.tracks import Track, default_tracks_dir, load_tracks

TEMPLATE = REPO / "student_template" / "serving.py"
#: A submission whose p99 is taken at q = 0.95: its p99 curve sits below the reference.
BUGGY = CORPUS / "p99_at_q095" / "serving.py"


@pytest.fixture(scope="module")
def tracks() -> tuple[Track, ...]:
    return load_tracks(default_tracks_dir())


def results_document(tests: list[dict[str, Any]], score: float) -> dict[str, Any]:
    return {"score": score, "execution_time": 1.0, "output": "Graded.",
            "stdout_visibility": "hidden", "extra_data": {"max_score": 100.0}, "tests": tests}


def students_score(document: dict[str, Any]) -> float:
    """The score the student's page shows before release: its visible tests' points."""
    return float(number(sum(float(test["score"]) for test in document["tests"]
                            if test["visibility"] == "visible")))


def a_test(name: str, function: str, score: float, max_score: float, output: str,
           visibility: str = "visible", track: str | None = None) -> dict[str, Any]:
    return {"name": name, "score": score, "max_score": max_score,
            "status": "passed" if score == max_score else "failed", "output": output,
            "tags": [function] + ([track] if track else []), "visibility": visibility}


# --- the curves -------------------------------------------------------------------------


def test_curve_case_ids_are_unique_across_tracks_and_functions(
        tracks: tuple[Track, ...]) -> None:
    cases = [case for track in tracks for case in curve_cases(track)]
    assert len({case.case_id for case in cases}) == len(cases)
    assert len({case.key for case in cases}) == len(cases)
    for track in tracks:
        for case in curve_cases(track):
            assert case.case_id.startswith(f"curve-{track.track_id}-")
            assert case.track_id == track.track_id


def test_every_track_has_a_modest_sweep_for_every_plotted_function(
        tracks: tuple[Track, ...]) -> None:
    for track in tracks:
        sweeps = track_sweeps(track)
        assert {sweep.function for sweep in sweeps} == set(PLOTTED_FUNCTIONS)
        for sweep in sweeps:
            assert 5 <= len(sweep.cases) == len(sweep.xs) <= 30
            assert all(case.function == sweep.function for case in sweep.cases)


def test_the_load_sweep_runs_at_the_tracks_own_service_time_and_fleet(
        tracks: tuple[Track, ...]) -> None:
    for track in tracks:
        profile = track.reference_profile()
        load = track_sweeps(track)[0]
        assert load.name == "load"
        for case in load.cases:
            assert case.kwargs["service_ms"] == profile.service_ms
            assert case.kwargs["replicas"] == profile.replicas
        capacity = profile.replicas * 1000.0 / profile.service_ms
        assert min(load.xs) < capacity < max(load.xs)  # the saturation point is inside


def test_the_reference_breaks_no_invariant_on_any_curve(tracks: tuple[Track, ...]) -> None:
    for track in tracks:
        for sweep in track_sweeps(track):
            rows = [reference_expected(case) for case in sweep.cases]
            assert violations(sweep, rows) == [], (track.track_id, sweep.name)


def test_a_p99_that_falls_as_load_rises_is_a_violation_at_that_point(
        tracks: tuple[Track, ...]) -> None:
    sweep = track_sweeps(tracks[0])[0]
    rows = [reference_expected(case) for case in sweep.cases]
    rows[5] = {**rows[5], "p99_latency_ms": rows[1]["p99_latency_ms"] / 2}
    found = violations(sweep, rows)
    assert {(v.index, v.rule) for v in found} >= {(5, "p99 falls as the load rises")}
    assert all(v.index == 5 for v in found)


def test_a_max_concurrent_that_rises_with_context_and_a_wrong_oom_are_violations(
        tracks: tuple[Track, ...]) -> None:
    sweep = next(s for s in track_sweeps(tracks[0]) if s.name == "context")
    rows = [reference_expected(case) for case in sweep.cases]
    rows[3] = {**rows[3], "max_concurrent": rows[2]["max_concurrent"] + 5}
    rows[4] = {**rows[4], "oom": not rows[4]["oom"]}
    rules = {(v.index, v.rule) for v in violations(sweep, rows)}
    assert (3, "max_concurrent rises with context length") in rules
    assert (4, "oom does not match max_concurrent < 1") in rules


# --- measuring the curves ---------------------------------------------------------------


def fake_student(answer: Callable[[Case], CallOutcome]) -> tuple[
        Callable[[Case], CallOutcome], list[Case]]:
    calls: list[Case] = []

    def call(case: Case) -> CallOutcome:
        calls.append(case)
        return answer(case)

    return call, calls


def test_a_function_that_is_not_implemented_is_called_once_and_has_a_message(
        tracks: tuple[Track, ...]) -> None:
    call, calls = fake_student(lambda case: CallOutcome(
        "raised", message=f"NotImplementedError: {case.function}: implement me"))
    sweeps = [sweep for track in tracks for sweep in track_sweeps(track)]
    measured = measure(sweeps, call, reference_expected)
    assert len(calls) == len(PLOTTED_FUNCTIONS)
    for item in measured:
        assert not item.plotted
        assert item.message == (f"{item.sweep.function}: not implemented yet "
                                f"(NotImplementedError: {item.sweep.function}: implement me)")


def test_a_crash_anywhere_replaces_every_curve_of_that_function_by_a_message(
        tracks: tuple[Track, ...]) -> None:
    def answer(case: Case) -> CallOutcome:
        if case.function == "batching_tax" and case.kwargs["batch_size"] == 64:
            return CallOutcome("crashed", message="the worker was killed by SIGSEGV")
        return CallOutcome("ok", value=reference_expected(case))

    call, _ = fake_student(answer)
    sweeps = [sweep for track in tracks for sweep in track_sweeps(track)]
    measured = measure(sweeps, call, reference_expected)
    for item in measured:
        if item.sweep.function == "batching_tax":
            assert item.message == "batching_tax: the worker was killed by SIGSEGV"
        else:
            assert item.plotted
            assert item.notes == ()
            assert item.violations == ()


def test_a_point_that_raises_is_a_note_and_the_rest_is_still_plotted(
        tracks: tuple[Track, ...]) -> None:
    sweep = track_sweeps(tracks[0])[0]

    def answer(case: Case) -> CallOutcome:
        if case is sweep.cases[2]:
            return CallOutcome("raised", message="ZeroDivisionError: float division by zero")
        return CallOutcome("ok", value=reference_expected(case))

    [item] = measure([sweep], fake_student(answer)[0], reference_expected)
    assert item.plotted
    assert item.student[2] is None
    assert item.notes == (f"arrival rate (req/s) = {sweep.xs[2]:g}: raised ZeroDivisionError: "
                          "float division by zero",)


def test_a_field_that_is_not_a_number_is_a_note(tracks: tuple[Track, ...]) -> None:
    sweep: Sweep = next(s for s in track_sweeps(tracks[0]) if s.name == "context")

    def answer(case: Case) -> CallOutcome:
        value = reference_expected(case)
        return CallOutcome("ok", value={**value, "max_concurrent": {"$missing": "x"}}
                           if case is sweep.cases[0] else value)

    [item] = measure([sweep], fake_student(answer)[0], reference_expected)
    assert item.notes == (f"context length (tokens) = {sweep.xs[0]:g}: max_concurrent is "
                          "missing, not a number",)


def test_the_buggy_submissions_p99_curve_is_below_the_reference_and_its_p999_is_not(
        tracks: tuple[Track, ...]) -> None:
    sweeps = [track_sweeps(track)[0] for track in tracks]
    with StudentRunner(BUGGY.read_bytes()) as runner:
        measured = measure(sweeps, lambda case: runner.call(
            case.function, case.args, case.kwargs, case.fields), reference_expected)
    for item in measured:
        stable = [(mine, ref) for mine, ref in zip(item.student, item.reference, strict=True)
                  if ref is not None and ref["stable"] and ref["queue_wait_probability"] > 0.05]
        assert stable, item.sweep.track_id
        for mine, ref in stable:
            assert mine is not None
            assert mine["p99_latency_ms"] < ref["p99_latency_ms"]
            assert mine["p999_latency_ms"] == pytest.approx(ref["p999_latency_ms"])


# --- the page -----------------------------------------------------------------------------


def test_scores_are_shown_as_results_json_holds_them() -> None:
    assert number(100.0) == "100"
    assert number(85.25812) == "85.25812"
    assert number(0.0) == "0"
    assert number(12.5) == "12.5"


def test_the_page_heading_shows_two_decimals_like_every_other_score() -> None:
    page = build_page({"score": 80.251282, "tests": [], "extra_data": {"max_score": 95}}, [])
    assert '>80.25</span> / <span id="max-score">95.00</span>' in page
    assert "80.251282 /" not in page


@pytest.mark.parametrize(("score", "maximum", "shown"), [
    (0.000003, 0.000003, "0.000003</span> / <span id=\"max-score\">0.000003"),
    (99.999999, 100, "99.999999</span> / <span id=\"max-score\">100.000000"),
    (91.666667, 100, "91.67</span> / <span id=\"max-score\">100.00")])
def test_the_page_shows_points_as_the_terminal_does_never_misread(
        score: float, maximum: float, shown: str) -> None:
    page = build_page({"score": score, "tests": [], "extra_data": {"max_score": maximum}}, [])
    assert f'>{shown}</span></p>' in page


def test_the_page_shows_the_results_score_by_function_and_track() -> None:
    tests = [a_test("serve matches", "serve", 8.0, 8.0, "All cases passed."),
             a_test("queueing [iphone]", "queueing_latency", 1.25, 3.0, "p99 wrong",
                    track="iphone"),
             a_test("queueing [robotaxi]", "queueing_latency", 3.0, 3.0, "ok",
                    track="robotaxi")]
    page = build_page(results_document(tests, 12.25), [])
    assert 'data-score="12.25">12.25</span> / <span id="max-score">100.00</span>' in page
    assert ('<tr data-function="queueing_latency"><td>queueing_latency</td>'
            '<td class="num">4.25</td><td class="num">6.00</td><td class="num">2</td>') in page
    assert '<tr data-track="iphone"><td>iphone</td><td class="num">1.25</td>' in page
    assert "<pre>p99 wrong</pre>" in page


def test_a_hidden_test_shows_its_name_and_that_it_is_hidden_and_nothing_else() -> None:
    secret = ("case 'c=4096 rho=0.999': erlang_c(102297.6, 25.0, 4096)\n"
              "  wait_probability: expected 0.961303, got 0.51234")
    tests = [a_test("erlang_c small fleets", "erlang_c", 8.0, 8.0, ""),
             a_test("erlang_c stays accurate on large fleets", "erlang_c", 1.234567, 3.0,
                    secret, visibility="after_due_date")]
    page = build_page(results_document(tests, 9.234567), [])
    assert "erlang_c stays accurate on large fleets" in page
    assert "hidden until after the due date" in page
    for fragment in ("102297.6", "0.961303", "0.51234", "c=4096", "1.23 / 3.00", "1.234567"):
        assert fragment not in page


def test_the_students_page_counts_the_visible_tests_and_names_the_hidden_points() -> None:
    tests = [a_test("erlang_c small fleets", "erlang_c", 8.0, 8.0, ""),
             a_test("erlang_c large fleets", "erlang_c", 1.0, 3.0, "", "after_due_date"),
             a_test("queueing large fleets", "queueing_latency", 0.5, 2.0, "", "hidden")]
    page = build_page({**results_document(tests, 9.5), "extra_data": {"max_score": 13.0}},
                      [])
    assert 'data-score="8">8.00</span> / <span id="max-score">8.00</span>' in page
    assert "<title>Serving lab feedback: 8.00 / 8.00</title>" in page
    assert ("Not counted here: 2 hidden tests, worth 5.00 points (hidden until after the "
            "due date; hidden: its details are not shown).") in page
    assert ('<tr data-function="erlang_c"><td>erlang_c</td><td class="num">8.00</td>'
            '<td class="num">8.00</td><td class="num">1</td>'
            '<td class="num">3.00 of 11.00</td></tr>') in page
    assert ('<tr data-function="queueing_latency"><td>queueing_latency</td>'
            '<td class="num">0.00</td><td class="num">0.00</td><td class="num">0</td>'
            '<td class="num">2.00 of 2.00</td></tr>') in page
    for fragment in ("9.5", "1.50", "0.50", "1.00 / 3.00", "(hidden tests)"):
        assert fragment not in page
    assert section(page, "next") == ("<p>Every visible test passes. The hidden tests&#x27; "
                                     "results are not shown before they are released.</p>")


def test_the_staff_page_shows_every_result_and_says_it_is_for_staff() -> None:
    tests = [a_test("erlang_c small fleets", "erlang_c", 8.0, 8.0, ""),
             a_test("erlang_c large fleets", "erlang_c", 1.0, 3.0, "4 of 9 cases failed",
                    "after_due_date")]
    page = build_page({**results_document(tests, 9.0), "extra_data": {"max_score": 11.0}},
                      [], audience="staff")
    assert 'id="staff-page">Staff page:' in page
    assert 'data-score="9">9.00</span> / <span id="max-score">11.00</span>' in page
    assert ('<tr data-function="erlang_c"><td>erlang_c</td><td class="num">9.00</td>'
            '<td class="num">11.00</td><td class="num">2</td></tr>') in page
    assert ('<span class="status">failed</span> erlang_c large fleets <em>(1.00 / 3.00)</em>'
            ' <strong class="staff-only">[hidden from students: hidden until after the due '
            "date]</strong><pre>4 of 9 cases failed</pre>") in page
    assert "Not counted here" not in page
    student = build_page({**results_document(tests, 9.0), "extra_data": {"max_score": 11.0}},
                         [])
    assert "Staff page" not in student
    assert "4 of 9 cases failed" not in student
    with pytest.raises(ValueError, match="audience"):
        build_page(results_document(tests, 9.0), [], audience="everyone")  # type: ignore[arg-type]


def test_every_text_is_escaped() -> None:
    evil = '<script>alert("x")</script>'
    tests = [a_test(evil, "serve", 0.0, 8.0, f"</pre>{evil}")]
    plot = PlotView("t<1>", "<b>label</b>", "queueing_latency", None, messages=(evil,),
                    notes=(evil,), violations=(evil,))
    page = build_page(results_document(tests, 0.0), [plot])
    assert "<script" not in page
    assert "<b>label" not in page
    # the name, the output twice (what to fix first, the feedback), and the plot's 3 texts
    assert page.count("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;") == 6


def test_the_page_needs_no_network() -> None:
    plot = PlotView("iphone", "iPhone", "queueing_latency", "data:image/svg+xml;base64,AAAA")
    page = build_page(results_document([], 0.0), [plot])
    assert f'http-equiv="Content-Security-Policy" content="{html_escape(CSP)}"' in page
    assert not re.search(r"(?:https?:)?//", page)
    assert re.findall(r'src="([^"]*)"', page) == ["data:image/svg+xml;base64,AAAA"]
    assert "<script" not in page


def test_a_function_without_values_shows_its_message_instead_of_a_plot() -> None:
    plot = PlotView("iphone", "iPhone", "batching_tax", None,
                    messages=("batching_tax: not implemented yet (NotImplementedError)",))
    page = build_page(results_document([], 0.0), [plot])
    assert '<div class="no-plot" data-function="batching_tax" data-track="iphone">' in page
    assert "batching_tax: not implemented yet (NotImplementedError)" in page
    assert "<img" not in page


def test_if_the_plots_fail_the_page_still_shows_the_score_and_why(
        tracks: tuple[Track, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    import graders.feedback.plots

    def broken(sweeps: object) -> str:
        raise RuntimeError("no fonts")

    monkeypatch.setattr(graders.feedback.plots, "figure_uri", broken)
    sweep = track_sweeps(tracks[0])[0]
    measured = measure([sweep], lambda case: CallOutcome("ok", value=reference_expected(case)),
                       reference_expected)
    report = FeedbackReport({tracks[0].track_id: tracks[0].label}, tuple(measured))
    page = report.page(results_document([], 42.5))
    assert 'data-score="42.5">42.50</span>' in page
    assert "(feedback report: the plots could not be drawn: RuntimeError: no fonts)" in page


#: The Gradescope essentials of a grading as ``essentials_html`` writes them: markup for
#: Gradescope, which the page must never show.
ESSENTIALS = ("<pre>Graded by the serving-lab grader.</pre>\n<p><strong>First failed case"
              "</strong> (a &#91;iphone&#93;):</p>\n<pre>x &gt; y</pre>\n"
              f"<p>{PAGE_HINT}</p>")
#: A failed test's feedback: two failed cases, the first with a hint.
FEEDBACK = "\n".join([
    "queueing_latency matches [iphone]: 2 of 3 cases failed (tolerance rel 1e-06)",
    "case 'defaults': queueing_latency(arrival_qps=8.0)",
    "  p99_latency_ms: expected 132.87, got 80.77 - outside tolerance",
    "    hint: p99 is the q = 0.99 quantile",
    "case 'load 5%': queueing_latency(arrival_qps=1.7)",
    "  p99_latency_ms: expected 71.68, got 30 - outside tolerance",
])


def section(page: str, name: str) -> str:
    """The ``<section id=NAME>`` of ``page`` (sections it holds end it early: enough here)."""
    found = re.search(rf'<section id="{name}"[^>]*>(.*?)</section>', page, re.DOTALL)
    assert found is not None, name
    return found.group(1)


def test_gradescopes_html_output_never_shows_on_the_page() -> None:
    document = {**results_document([], 1.0), "output": ESSENTIALS, "output_format": "html"}
    page = build_page(document, [])
    for shown_markup in ("&lt;pre&gt;", "&lt;p&gt;", "&lt;strong&gt;", "&amp;#91;",
                         "&amp;gt;", "Graded by the serving-lab grader"):
        assert shown_markup not in page
    assert "--grader-html" not in page  # the page never tells how to make itself
    assert 'class="summary"' not in page  # nothing else to say: no empty paragraph


def test_a_text_output_is_the_summary_escaped_once() -> None:
    document = {**results_document([], 1.0), "output_format": "text",
                "output": "partial run: 1 of 48 graded tests; <b> & [x](y)"}
    page = build_page(document, [])
    assert page.count('<p class="summary">partial run: 1 of 48 graded tests; &lt;b&gt; &amp; '
                      "[x](y)</p>") == 1


def test_what_to_fix_first_is_the_first_failed_visible_test_and_its_first_case() -> None:
    tests = [a_test("serve matches", "serve", 8.0, 8.0, ""),
             a_test("erlang_c large fleets", "erlang_c", 0.0, 3.0, "secret case",
                    "after_due_date"),
             a_test("queueing_latency matches [iphone]", "queueing_latency", 1.0, 3.0,
                    FEEDBACK, track="iphone"),
             a_test("batching_tax matches [iphone]", "batching_tax", 0.0, 3.0, "other")]
    page = build_page(results_document(tests, 9.0), [])
    first = section(page, "next")
    assert "Start with <strong>queueing_latency</strong>, the first function" in first
    assert ('<pre class="first-case">' + html_escape("\n".join(FEEDBACK.splitlines()[:4]))
            + "</pre>") in first  # its summary line, first case and hint; not the next case
    assert "load 5%" not in first
    assert "secret case" not in first
    assert "batching_tax" not in first
    assert "Fix it, then run <code>pytest</code> again." in first
    assert '<a href="#test-2">' in first
    assert '<li class="test failed" id="test-2"><span class="status">failed</span> ' \
           "queueing_latency matches [iphone]" in page
    assert page.index('id="next"') < page.index('id="scores"')  # at the top


def test_a_test_that_did_not_run_is_not_what_to_fix_first() -> None:
    tests = [{**a_test("serve matches", "serve", 0.0, 8.0, "deselected"),
              "extra_data": {"outcome": "not run"}},
             a_test("erlang_c matches", "erlang_c", 0.0, 8.0, "NotImplementedError")]
    first = section(build_page(results_document(tests, 0.0), []), "next")
    assert "Start with <strong>erlang_c</strong>" in first
    assert "deselected" not in first


def test_when_every_test_passes_the_page_says_there_is_nothing_to_fix() -> None:
    tests = [a_test("serve matches", "serve", 8.0, 8.0, "")]
    page = build_page({**results_document(tests, 8.0), "extra_data": {"max_score": 8.0}}, [])
    assert section(page, "next") == "<p>Every test passes: there is nothing left to fix.</p>"
    assert "What to fix first" not in page


def test_when_only_hidden_tests_lose_points_the_staff_page_says_how_many() -> None:
    tests = [a_test("serve matches", "serve", 8.0, 8.0, ""),
             a_test("erlang_c large fleets", "erlang_c", 1.0, 3.0, "secret", "hidden")]
    document = {**results_document(tests, 9.0), "extra_data": {"max_score": 11.0}}
    page = build_page(document, [], audience="staff")
    assert section(page, "next") == ("<p>Every visible test passes. The hidden tests earn "
                                     "1.00 of 3.00 points; their cases are not shown.</p>")
    student = build_page(document, [])
    assert "1.00 of 3.00" not in student
    assert "secret" not in student


def test_when_every_test_passes_the_students_page_says_nothing_of_the_hidden_ones() -> None:
    tests = [a_test("serve matches", "serve", 8.0, 8.0, ""),
             a_test("erlang_c large fleets", "erlang_c", 3.0, 3.0, "", "after_published")]
    page = build_page({**results_document(tests, 11.0), "extra_data": {"max_score": 11.0}},
                      [])
    assert "nothing left to fix" not in page  # it would tell that the hidden tests pass
    assert "hidden until the grades are published" in page
    assert "passed</span>erlang_c" not in page
    assert "11.00" not in page


def test_a_submission_that_does_not_import_is_told_to_fix_that_first() -> None:
    tests = [a_test("serve matches", "serve", 0.0, 8.0, "could not be imported")]
    document = {**results_document(tests, 0.0), "output": "",
                "import_error": "serving.py could not be imported: <SyntaxError>"}
    first = section(build_page(document, []), "next")
    assert first == ("<h2>What to fix first</h2><p>serving.py does not import, so every "
                     'test fails:</p><pre class="first-case">serving.py could not be '
                     "imported: &lt;SyntaxError&gt;</pre><p>Fix it, then run <code>pytest"
                     "</code> again.</p>")


def test_a_grader_failure_page_says_why_and_has_nothing_to_fix() -> None:
    page = build_page(grader_failure_results("the worker <vanished>"), [])
    assert 'id="grader-failed"' in page
    assert "the grader failed (the worker &lt;vanished&gt;)" in section_text(page)
    assert 'id="next"' not in page


def section_text(page: str) -> str:
    found = re.search(r'<p class="summary">(.*?)</p>', page, re.DOTALL)
    assert found is not None
    return found.group(1)


def test_what_the_code_printed_has_a_section_of_its_own_escaped_once() -> None:
    evil = "<script>alert(1)</script> &amp; [link](x)"
    document = {**results_document([], 1.0),
                "printed": f"Your code printed 52 B; they follow.\n{evil}\n"}
    page = build_page(document, [])
    assert section(page, "printed") == (
        "<h2>What your code printed</h2><p>Your code printed 52 B; they follow.</p>"
        f"<pre>{html_escape(evil)}\n</pre>")
    assert page.count(html_escape(evil)) == 1
    assert '<a href="#printed">what your code printed</a>' in page
    assert 'href="#printed"' not in build_page(results_document([], 1.0), [])


# --- asking for the report ----------------------------------------------------------------


class NoMatplotlib(importlib.abc.MetaPathFinder):
    """Refuses to import matplotlib, as an install without it would, and counts the tries."""

    def __init__(self) -> None:
        self.tries: list[str] = []

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.partition(".")[0] == "matplotlib":
            self.tries.append(name)
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None


@pytest.fixture
def no_matplotlib(monkeypatch: pytest.MonkeyPatch) -> NoMatplotlib:
    """matplotlib as if it were not installed (modules already imported forgotten)."""
    for name in [n for n in sys.modules if n.partition(".")[0] == "matplotlib"]:
        monkeypatch.delitem(sys.modules, name)
    blocker = NoMatplotlib()
    monkeypatch.setattr(sys, "meta_path", [blocker, *sys.meta_path])
    return blocker


def svgs(page: str) -> list[ET.Element]:
    """Every figure of ``page``, parsed (a malformed one fails here)."""
    return [ET.fromstring(base64.b64decode(data, validate=True)) for data in
            re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', page)]


def test_without_matplotlib_every_figure_is_still_drawn(
        tracks: tuple[Track, ...], no_matplotlib: NoMatplotlib) -> None:
    def answer(case: Case) -> CallOutcome:
        return CallOutcome("ok", value=reference_expected(case))

    for track in tracks:
        measured = measure(track_sweeps(track), answer, reference_expected)
        for function in PLOTTED_FUNCTIONS:
            uri = figure_uri([m for m in measured if m.sweep.function == function])
            assert uri.startswith("data:image/svg+xml;base64,")
    assert no_matplotlib.tries == []


def test_without_matplotlib_the_plugin_writes_the_page(
        pytester: pytest.Pytester, tracks: tuple[Track, ...],
        no_matplotlib: NoMatplotlib) -> None:
    shutil.copy(CORPUS / "correct" / "serving.py", pytester.path / "serving.py")
    result = pytester.runpytest("--student", "serving.py", "--grader-html", "page.html",
                                "-k", "test_serve")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["feedback report written to *page.html"])
    result.stdout.no_fnmatch_line("INTERNALERROR*")
    page = (pytester.path / "page.html").read_text(encoding="utf-8")
    assert plotted(page) == {(function, track.track_id) for function in PLOTTED_FUNCTIONS
                             for track in tracks}
    assert len(svgs(page)) == len(PLOTTED_FUNCTIONS) * len(tracks)
    assert "feedback report:" not in page  # no note that something failed
    assert no_matplotlib.tries == []


def test_without_matplotlib_graders_grade_html_writes_the_page(
        no_matplotlib: NoMatplotlib, capsys: pytest.CaptureFixture[str],
        tracks: tuple[Track, ...], tmp_path: Path) -> None:
    code = cli.main(["grade", str(CORPUS / "correct"), "--results", str(tmp_path / "r.json"),
                     "--html", str(tmp_path / "r.html"), "-q"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.err == ""
    document = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert f'data-score="{number(students_score(document))}"' in page
    assert plotted(page) == {(function, track.track_id) for function in PLOTTED_FUNCTIONS
                             for track in tracks}
    assert all(svg.tag == "{http://www.w3.org/2000/svg}svg" for svg in svgs(page))
    assert no_matplotlib.tries == []


def test_the_plugins_page_says_a_partial_run_and_what_the_code_printed_as_text(
        pytester: pytest.Pytester) -> None:
    code = (CORPUS / "correct" / "serving.py").read_text(encoding="utf-8")
    pytester.makepyfile(serving=f"{code}\nprint('<b>loud</b> &amp; [x](y)')\n")
    result = pytester.runpytest("--student", "serving.py", "--grader-html", "page.html",
                                "-k", "test_serve")
    result.stdout.no_fnmatch_line("INTERNALERROR*")
    page = (pytester.path / "page.html").read_text(encoding="utf-8")
    assert re.search(r'<p class="summary">partial run: \d+ of \d+ graded tests, ', page)
    assert "&lt;b&gt;loud&lt;/b&gt; &amp;amp; [x](y)\n</pre></section>" in page
    for markup in ("&lt;pre&gt;", "&lt;p&gt;", "&amp;#91;", "--grader-html"):
        assert markup not in page


def test_the_plugins_page_of_a_submission_that_does_not_import_says_so_first(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(serving="import a_module_nobody_has\n")
    result = pytester.runpytest("--student", "serving.py", "--grader-html", "page.html",
                                "-k", "test_serve")
    result.stdout.no_fnmatch_line("INTERNALERROR*")
    page = (pytester.path / "page.html").read_text(encoding="utf-8")
    first = section(page, "next")
    assert first.startswith("<h2>What to fix first</h2><p>serving.py does not import, so "
                            'every test fails:</p><pre class="first-case">serving.py could '
                            "not be imported: ModuleNotFoundError: No module named "
                            "&#x27;a_module_nobody_has&#x27;")
    assert page.count("No module named &#x27;a_module_nobody_has&#x27;") >= 2  # and below


def test_the_html_ini_key_writes_the_page_relative_to_the_ini_file(
        pytester: pytest.Pytester) -> None:
    shutil.copy(TEMPLATE, pytester.path / "serving.py")
    pytester.makeini("[pytest]\ngrader_student = serving.py\ngrader_html = out/page.html\n")
    result = pytester.runpytest("-k", "test_serve")
    result.stdout.fnmatch_lines(["feedback report written to *out*page.html"])
    result.stdout.no_fnmatch_line("INTERNALERROR*")
    page = (pytester.path / "out" / "page.html").read_text(encoding="utf-8")
    assert '<span id="score" data-score="0">0.00</span>' in page
    assert "serve: not implemented yet" not in page  # serve is not plotted
    assert page.count('class="no-plot"') == 4 * len(PLOTTED_FUNCTIONS)


def test_the_flag_is_in_the_option_group(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*--grader-html=PATH*", "*grader_html *"])


# --- full gradings with the page (each costs several seconds) ------------------------------


def grade(submission: Path, out: Path) -> tuple[dict[str, Any], str]:
    """``graders grade SUBMISSION --results --html`` in a fresh process."""
    results, page = out / "results.json", out / "page.html"
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PYTEST_", "COV_"))}
    run = subprocess.run([sys.executable, "-m", "graders", "grade", str(submission),
                          "--results", str(results), "--html", str(page), "-q"],
                         capture_output=True, text=True, env=env, timeout=300, check=False)
    assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-3000:])
    assert "Traceback" not in run.stdout + run.stderr
    document = json.loads(results.read_text(encoding="utf-8"))
    return document, page.read_text(encoding="utf-8")


#: What the hostile submission prints and raises: markup, character references, Markdown.
HOSTILE = ('<script>document.title = "ran"</script> <img src=x onerror="document.title=1"> '
           "&amp; &#91;x&#93; &gt; [link](x) ![image](y) </pre><p><strong>")
#: The correct solution, but for a transformer_state_gb that prints HOSTILE and answers
#: twice the right value, and a quantity_to_float that raises HOSTILE.
HOSTILE_CODE = f"""

HOSTILE = {HOSTILE!r}
_state_gb = transformer_state_gb


def transformer_state_gb(model, context_tokens, kv_bytes):
    print(HOSTILE)
    return 2 * _state_gb(model, context_tokens, kv_bytes)


def quantity_to_float(value, unit, default):
    raise ValueError(HOSTILE)
"""


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, Any]]]:
    """The correct, the buggy, the template and the hostile submission, each graded once
    with a page."""
    hostile = tmp_path_factory.mktemp("hostile-submission") / "serving.py"
    hostile.write_text((CORPUS / "correct" / "serving.py").read_text(encoding="utf-8")
                       + HOSTILE_CODE, encoding="utf-8")
    graded = {}
    for name, submission in (("correct", CORPUS / "correct"), ("buggy", BUGGY),
                             ("template", TEMPLATE), ("hostile", hostile)):
        out = tmp_path_factory.mktemp(name)
        document, _ = grade(submission, out)
        graded[name] = (out / "page.html", document)
    return graded


def plotted(page: str) -> set[tuple[str, str]]:
    return set(re.findall(r'<img data-function="([^"]+)" data-track="([^"]+)" '
                          r'src="data:image/svg\+xml;base64,', page))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["correct", "buggy"])
def test_an_implemented_submission_has_a_plot_per_function_and_track(
        graded: dict[str, tuple[Path, dict[str, Any]]], tracks: tuple[Track, ...],
        name: str) -> None:
    path, document = graded[name]
    page = path.read_text(encoding="utf-8")
    assert f'data-score="{number(students_score(document))}"' in page
    assert plotted(page) == {(function, track.track_id) for function in PLOTTED_FUNCTIONS
                             for track in tracks}
    assert 'class="no-plot"' not in page


@pytest.mark.slow
def test_the_buggy_page_carries_the_feedback_of_its_failed_tests(
        graded: dict[str, tuple[Path, dict[str, Any]]]) -> None:
    path, document = graded["buggy"]
    page = path.read_text(encoding="utf-8")
    failed = [t for t in document["tests"] if t["status"] == "failed"]
    assert failed
    for test in failed:
        if test["visibility"] == "visible":  # uncut on the page: results.json's and more
            shown = [line for line in test["output"].strip().splitlines()
                     if not line.startswith("... and ") and "[cut: " not in line]
            block = re.search(rf"<pre>{re.escape(html_escape(shown[0]))}\n.*?</pre>", page,
                              re.DOTALL)
            assert block is not None, test["name"]
            for line in shown:
                following = re.fullmatch(r"(?:  |every failed case: )(.+): wrong too, "
                                         r"following from (\w+|your \w+)", line)
                if following is None:
                    assert html_escape(line) in block.group(0), line
                    continue
                for field in following.group(1).split(", "):  # each with its values here
                    root = re.escape(following.group(2))
                    assert re.search(rf"\n  {field}: expected .*, got .* - follows from "
                                     rf"{root}\n", block.group(0)), line
        else:
            assert html_escape(test["name"]) in page
            assert html_escape(test["output"]) not in page


@pytest.mark.slow
def test_the_template_page_has_messages_instead_of_plots(
        graded: dict[str, tuple[Path, dict[str, Any]]], tracks: tuple[Track, ...]) -> None:
    path, document = graded["template"]
    page = path.read_text(encoding="utf-8")
    assert document["score"] == 0
    assert not plotted(page)
    for track in tracks:
        for function in PLOTTED_FUNCTIONS:
            assert (f'<div class="no-plot" data-function="{function}" '
                    f'data-track="{track.track_id}">') in page
            assert f"{function}: not implemented yet (NotImplementedError" in page


def html_escape(text: str) -> str:
    return html.escape(text, quote=True)


# --- the page in a real browser -----------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", ["correct", "buggy"])
def test_the_page_in_headless_chromium(graded: dict[str, tuple[Path, dict[str, Any]]],
                                       tracks: tuple[Track, ...], tmp_path: Path,
                                       name: str) -> None:
    executable = chromium()
    from playwright.sync_api import ConsoleMessage, sync_playwright

    path, document = graded[name]
    problems: list[str] = []
    requests: list[str] = []
    screenshot = tmp_path / f"{name}.png"

    def console(message: ConsoleMessage) -> None:
        if message.type == "error":
            problems.append(f"console error: {message.text}")

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", console)
            page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
            page.on("request", lambda request: requests.append(request.url))
            page.goto(path.as_uri(), wait_until="load")
            score = page.locator("#score").inner_text()
            track_heading = page.locator("table.by-track th").first.inner_text()
            feedback = page.locator("body").inner_text()
            exact = page.locator("#score").get_attribute("data-score")
            images = page.eval_on_selector_all(
                "img[data-function]", "els => els.map(e => [e.dataset.function, "
                "e.dataset.track, e.complete && e.naturalWidth > 0])")
            page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
    print(f"screenshot of the {name} page: {screenshot}")  # noqa: T201
    assert problems == []
    assert all(url.startswith(("file:", "data:")) for url in requests), requests
    assert track_heading == "track (per-track tests only)"
    assert "more failed cases" not in feedback  # the page cuts nothing
    assert "[cut: " not in feedback
    assert score == f"{students_score(document):.2f}"  # as everywhere else, 2 decimals
    assert exact is not None
    assert float(exact) == students_score(document)  # and exactly, for tools
    assert {(f, t) for f, t, _ in images} == {(function, track.track_id)
                                              for function in PLOTTED_FUNCTIONS
                                              for track in tracks}
    assert all(loaded for _, _, loaded in images)
    assert screenshot.stat().st_size > 10_000


#: HTML's elements (the grader's own ``<model Llama-2-70B>``, a repr in a case line, is
#: none of them).
ELEMENTS = ("a|abbr|address|article|aside|b|blockquote|body|br|button|caption|code|dd|"
            "details|div|dl|dt|em|embed|fieldset|figcaption|figure|footer|form|h[1-6]|head|"
            "header|hr|html|i|iframe|img|input|label|li|link|main|meta|nav|object|ol|p|pre|"
            "q|s|script|section|select|small|span|strong|style|sub|summary|sup|svg|table|"
            "tbody|td|textarea|tfoot|th|thead|title|tr|u|ul")
#: Markup as a reader would see it were it escaped into view: a tag, a comment or doctype,
#: or a character reference (named, decimal or hexadecimal).
MARKUP = re.compile(rf"</?(?:{ELEMENTS})[\s/>]|<!|"
                    r"&(?:[A-Za-z][A-Za-z0-9]*|#[0-9]+|#[xX][0-9A-Fa-f]+);", re.IGNORECASE)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["correct", "buggy", "hostile"])
def test_the_page_reads_clean_in_headless_chromium(
        graded: dict[str, tuple[Path, dict[str, Any]]], name: str) -> None:
    """What the reader sees holds no markup and no pointer to the page itself; what the
    submission printed or raised shows literally, escaped once, and never runs.

    The text is the body's ``innerText`` in Chromium: the text as laid out, with
    references decoded and the head, styles and hidden elements left out, which is what
    a reader sees; markup escaped into view (``&lt;pre&gt;``, ``&amp;#91;``) is in it as
    ``<pre>``, ``&#91;``, and markup left unescaped is not text at all, but elements."""
    executable = chromium()
    from playwright.sync_api import sync_playwright

    path, document = graded[name]
    problems: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda message: problems.append(f"console: {message.text}")
                    if message.type == "error" else None)
            page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
            page.goto(path.as_uri(), wait_until="load")
            text = page.locator("body").inner_text()
            first = page.locator("header").inner_text()
            title = page.title()
            foreign = page.eval_on_selector_all(
                "script, iframe, object, embed, img:not([data-function]), a:not([href^='#'])",
                "els => els.map(e => e.outerHTML.slice(0, 80))")
        finally:
            browser.close()
    assert gradescope_problems(document) == []  # and results.json stays valid Gradescope
    assert problems == []
    assert foreign == []  # no element of the submission's making
    assert title.startswith("Serving lab feedback: ")  # no script of the submission's ran
    assert "--grader-html" not in text
    if name == "hostile":
        assert HOSTILE in text  # literally: as printed, as raised
        assert html_escape(HOSTILE) not in text  # and never escaped twice
        text = text.replace(HOSTILE, "")
    assert MARKUP.findall(text) == []
    if name == "correct":  # a student's page: the hidden tests' outcomes are not shown
        assert ("Every visible test passes. The hidden tests' results are not shown before "
                "they are released.") in first
    else:
        assert "What to fix first" in first
        assert "Fix it, then run pytest again." in first
