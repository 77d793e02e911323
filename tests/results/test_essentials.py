"""The html essentials that head results.json on Gradescope (pure functions)."""

from __future__ import annotations

import re
from dataclasses import replace
from fractions import Fraction

from helpers import REPO
from helpers import sample_score as score

from graders.regrade.job import PAGE_NAME
from graders.results.essentials import PAGE_FILE, PAGE_HINT, essentials_html, first_case
from graders.results.reports import gradescope_problems, gradescope_results, points_text

FEEDBACK = "\n".join([
    "queueing_latency matches [iphone]: 2 of 3 cases failed (tolerance rel 1e-06)",
    "case 'defaults': queueing_latency(arrival_qps=8.0)",
    "  p99_latency_ms: expected 132.87, got 80.77 - outside tolerance",
    "    hint: p99 is the q = 0.99 quantile",
    "case 'load 5%': queueing_latency(arrival_qps=1.7)",
    "  p99_latency_ms: expected 71.68, got 30 - outside tolerance",
])
HOSTILE = "<script>alert(1)</script> ![x](http://attacker.example) [link](y) \x1b[31m"


def scores() -> list:  # type: ignore[type-arg]
    failed = replace(score("queueing_latency matches [iphone]", function="queueing_latency",
                           track="iphone", max_score=Fraction(3)),
                     status="failed", earned=Fraction(1), output=FEEDBACK)
    passed = score("serve matches", max_score=Fraction(8), earned=Fraction(8),
                   status="passed")
    hidden = score("erlang_c on large fleets", function="erlang_c", max_score=Fraction(4),
                   status="failed", visibility="after_due_date")
    return [passed, failed, hidden]


def test_the_first_failed_case_is_the_summary_and_the_first_case_block() -> None:
    assert first_case(FEEDBACK) == "\n".join(FEEDBACK.splitlines()[:4])
    assert first_case("t: failed\nevery failed case: not implemented yet") == \
        "t: failed\nevery failed case: not implemented yet"


def test_the_essentials_hold_the_visible_table_and_the_first_failed_case() -> None:
    page = essentials_html(scores(), "Graded by the serving-lab grader.", "debug 1\n")
    assert page.startswith("<pre>Graded by the serving-lab grader.</pre>")
    table = page.split("<pre>")[2].split("</pre>")[0]
    assert table.splitlines()[1:] == [
        "serve                 8.00      8.00  1",
        "queueing_latency      1.00      3.00  1",
        "visible               9.00     11.00"]
    assert "erlang_c" not in page  # a hidden test's points would reveal its score
    assert "case 'load 5%'" not in page  # the first failed case only
    assert "hint: p99 is the q = 0.99 quantile" in page
    assert page.endswith("<pre>debug 1\n</pre>")


def test_student_text_in_the_essentials_renders_as_nothing() -> None:
    hostile = replace(scores()[1], output=HOSTILE)
    page = essentials_html([hostile], HOSTILE, HOSTILE)
    assert "<script" not in page
    assert "![" not in page
    assert "](" not in page
    assert "\x1b" not in page
    assert "&lt;script&gt;" in page


def test_results_carry_the_essentials_as_html_and_the_tests_as_text() -> None:
    document = gradescope_results(scores(), execution_time_s=1.0, output="plain",
                                  output_html=essentials_html(scores(), "plain"))
    assert (document["output_format"], document["test_output_format"]) == ("html", "text")
    assert all(test["output_format"] == "text" for test in document["tests"])
    assert gradescope_problems(document) == []


def test_a_score_just_under_the_maximum_never_reads_as_the_maximum() -> None:
    near = [score("a", max_score=Fraction(12), visibility="visible").with_outcome(
        "failed", Fraction(11_999_999, 12_000_000), "1 of many cases failed", 1, 2)]
    table = essentials_html(near, "done")
    assert "serve     11.999999  12.000000  1" in table
    assert "12.00  " not in table
    assert points_text(Fraction(11_999_999, 10**6), Fraction(12)) == ("11.999999",
                                                                       "12.000000")
    assert points_text(Fraction(12), Fraction(12)) == ("12.00", "12.00")
    assert points_text(Fraction(1153, 100), Fraction(12)) == ("11.53", "12.00")


def test_results_with_hostile_text_in_the_essentials_stay_valid() -> None:
    hostile = replace(scores()[1], output=HOSTILE)
    document = gradescope_results([hostile], execution_time_s=1.0, output=HOSTILE,
                                  output_html=essentials_html([hostile], HOSTILE, HOSTILE))
    assert gradescope_problems(document) == []


def test_the_page_is_named_the_same_wherever_students_read_of_it() -> None:
    templates = REPO / "graders" / "export" / "templates"
    ignored = (templates / "gitignore").read_text(encoding="utf-8").splitlines()
    readme = (templates / "student_README.md").read_text(encoding="utf-8")
    assert PAGE_HINT.count(f"--grader-html {PAGE_FILE} ") == 1
    assert f"open {PAGE_FILE} in a browser" in PAGE_HINT
    assert PAGE_FILE in ignored  # the page is never committed by mistake
    assert [line for line in ignored if line.endswith(".html")] == [PAGE_FILE]
    assert "--grader-html" in readme
    assert set(re.findall(r"--grader-html (\S+?)`", readme)) == {PAGE_FILE}
    assert PAGE_NAME == PAGE_FILE  # the class regrade's pages too
