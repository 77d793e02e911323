"""Student text escaped for each medium: the pure functions of graders.escaping, and the
reports that use them (results.json, Classroom, the HTML page, the class report)."""

from __future__ import annotations

import csv
import html
import io
import json
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graders.escaping import (
    GRADESCOPE_FORMATS,
    escape_controls,
    for_actions_log,
    for_csv_cell,
    for_gradescope,
    for_html,
    for_markdown,
    for_markdown_cell,
    for_terminal,
    has_controls,
    single_line,
)
from graders.feedback.page import FeedbackReport
from graders.feedback.render import build_page
from graders.grading.scoring import TestScore
from graders.regrade.report import GradedSubmission, class_report, grade_table, markdown
from graders.regrade.roster import Submitter
from graders.results.classroom import classroom_results
from graders.results.reports import (
    OUTPUT_FORMAT,
    gradescope_problems,
    gradescope_results,
    read_valid_results,
    write_results,
)

ESC = "\x1b"
#: What a hostile submission puts in an exception message (see tests/adversarial/hostile_text).
HOSTILE = ("lone \ud800 <script>alert(1)</script> ![x](https://a.example/p.png) "
           "[link](https://a.example) \x1b]0;title\x07 \u202eevil\u202c \x9b31m "
           "\r\x1b[2K\x1b[32mTOTAL 100.00 / 100.00\x1b[0m\n=HYPERLINK(\"x\")\n::error::no")
#: Every character that must never reach any medium raw.
CONTROLS = ["\x00", "\x07", "\x08", "\x0b", "\x0c", "\r", "\x1b", "\x1f", "\x7f", "\x80",
            "\x85", "\x9b", "\x9d", "\x9f", "\ud800", "\udfff", "\u202a", "\u202b", "\u202c",
            "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e", "\u200f",
            "\u061c", "\u2028", "\u2029"]
MEDIA = [escape_controls, for_terminal, for_markdown, for_markdown_cell, for_html,
         for_csv_cell, for_actions_log, single_line,
         *(lambda text, f=f: for_gradescope(text, f) for f in GRADESCOPE_FORMATS)]


def raw_controls(text: str) -> list[str]:
    return [c for c in text if c in CONTROLS]


# --- control characters: escaped visibly, everywhere ---------------------------------------


@pytest.mark.parametrize("character", CONTROLS, ids=lambda c: f"U+{ord(c):04X}")
def test_every_control_character_is_escaped_visibly(character: str) -> None:
    escaped = escape_controls(f"a{character}b")
    code = ord(character)
    assert escaped == (f"a\\x{code:02x}b" if code <= 0xFF else f"a\\u{code:04x}b")


@pytest.mark.parametrize("medium", MEDIA)
def test_no_medium_lets_a_control_character_or_lone_surrogate_through(medium: Any) -> None:
    text = medium(HOSTILE + "".join(CONTROLS))
    assert raw_controls(text) == []
    text.encode("utf-8")  # never raises: no lone surrogate is left


def test_newlines_tabs_and_ordinary_unicode_are_kept() -> None:
    text = "p99 = 3 ms\n\tµ, ☃, 数, 😀, é"
    assert escape_controls(text) == for_terminal(text) == text
    assert not has_controls(text)


def test_single_line_escapes_newlines_and_tabs_too() -> None:
    assert single_line("a\nTOTAL 100\tx\x1b") == "a\\nTOTAL 100\\tx\\x1b"


def test_the_terminal_gets_no_escape_sequence_and_nothing_else_changes() -> None:
    text = for_terminal(HOSTILE)
    assert ESC not in text
    assert "\x9b" not in text
    assert "\r" not in text
    assert "\x07" not in text
    assert "\\x1b[32mTOTAL 100.00 / 100.00\\x1b[0m" in text  # visible, not coloured
    assert "<script>alert(1)</script>" in text  # nothing else is touched
    assert for_terminal("plain text, 42 < 43") == "plain text, 42 < 43"


# --- Markdown -------------------------------------------------------------------------------


def test_markdown_markup_is_escaped_so_no_link_image_or_html_can_form() -> None:
    text = for_markdown("![img](https://a.example/x.png) [a](b) <b>x</b> `code` *em* _u_ "
                        "https://a.example www.a.example a|b {c} #h +1 -1 2. ! ~s~ =x")
    assert "![" not in text
    assert "](" not in text
    assert "<b>" not in text
    for mark in "![]()<>`*_|{}#+-.~=":
        assert re.search(rf"(?<!\\){re.escape(mark)}", text) is None, mark
    assert "https\\://a\\.example" in text
    assert "www\\.a\\.example" in text


@pytest.mark.parametrize(("line", "start"), [
    ("# heading", "\\#"), ("> quote", "\\>"), ("- item", "\\-"), ("+ item", "\\+"),
    ("* item", "\\*"), ("1. item", "1\\."), ("1) item", "1\\)"), ("===", "\\="),
    ("---", "\\-"), ("| a | b |", "\\|"), ("```", "\\`"), ("~~~", "\\~"), ("<div>", "\\<")])
def test_a_line_leading_markdown_marker_is_escaped(line: str, start: str) -> None:
    assert for_markdown(f"text\n{line}").split("\n")[1].startswith(start)


def test_a_backslash_is_escaped_so_escapes_cannot_be_undone() -> None:
    assert for_markdown("\\<script>") == "\\\\\\<script\\>"


def test_a_markdown_cell_is_one_line_with_its_pipes_escaped() -> None:
    assert for_markdown_cell("a |\nb\t| c") == "a \\| b \\| c"


# --- HTML -------------------------------------------------------------------------------------


def test_html_escapes_markup_and_quotes_after_the_control_pass() -> None:
    assert for_html('<script>"x" & \'y\'\x1b\ud800') == \
        "&lt;script&gt;&quot;x&quot; &amp; &#x27;y&#x27;\\x1b\\ud800"
    assert html.unescape(for_html("<a href='x'>")) == "<a href='x'>"


# --- CSV --------------------------------------------------------------------------------------


@pytest.mark.parametrize("cell", ["=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx", "  =1+1",
                                  '=HYPERLINK("https://a.example","x")'])
def test_a_cell_a_spreadsheet_would_evaluate_gets_a_leading_quote(cell: str) -> None:
    assert for_csv_cell(cell).startswith("'")


@pytest.mark.parametrize("cell", ["Ada Lovelace", "ada@example.edu", "1.5", "", "O'Neil"])
def test_an_ordinary_cell_is_unchanged(cell: str) -> None:
    assert for_csv_cell(cell) == cell


# --- GitHub Actions logs ----------------------------------------------------------------------


def test_no_line_of_an_actions_log_message_starts_a_workflow_command() -> None:
    text = for_actions_log("ok\n::error::forged\n  ::add-mask::x\n::")
    assert all(not line.lstrip().startswith("::") for line in text.splitlines())
    assert "ok" in text


# --- Gradescope output_format -----------------------------------------------------------------


def test_each_gradescope_format_gets_its_own_escaping() -> None:
    assert for_gradescope(HOSTILE, "text") == for_gradescope(HOSTILE, "ansi") \
        == escape_controls(HOSTILE)
    assert for_gradescope(HOSTILE, "md") == for_markdown(HOSTILE)
    assert for_gradescope(HOSTILE, "html") == for_gradescope(HOSTILE, "simple_format") \
        == for_html(HOSTILE)
    with pytest.raises(ValueError, match="unknown Gradescope output_format 'rtf'"):
        for_gradescope("x", "rtf")


def hostile_score(visibility: str = "visible") -> TestScore:
    return TestScore(nodeid="suite::erlang", name="erlang_c matches", function="erlang_c",
                     track=None, visibility=visibility,  # type: ignore[arg-type]
                     max_score=Fraction(5)).with_outcome("failed", Fraction(0),
                                                         f"raised HostileError: {HOSTILE}")


def test_results_declare_the_text_format_everywhere_and_escape_for_it() -> None:
    document = gradescope_results([hostile_score()], execution_time_s=1.0,
                                  output=f"serving.py could not be imported: {HOSTILE}",
                                  extra={"note": HOSTILE})
    assert OUTPUT_FORMAT == "text"
    assert (document["output_format"], document["test_output_format"],
            document["test_name_format"]) == ("text", "text", "text")
    [test] = document["tests"]
    assert (test["output_format"], test["name_format"]) == ("text", "text")
    for text in (document["output"], test["output"], document["extra_data"]["note"]):
        assert raw_controls(text) == []
        assert "\\ud800" in text
        assert "\\x1b" in text
    assert gradescope_problems(document) == []
    json.dumps(document, ensure_ascii=False).encode("utf-8")  # no lone surrogate anywhere


def test_the_validator_refuses_an_unknown_format_and_raw_control_characters() -> None:
    document = gradescope_results([hostile_score()], execution_time_s=1.0, output="ok")
    document["tests"][0]["output_format"] = "rtf"
    document["test_output_format"] = "pdf"
    document["output"] = "forged \x1b[32m"
    document["tests"][0]["name"] = "x\u202e"
    problems = gradescope_problems(document)
    assert "tests[0].output_format must be one of text, html, simple_format, md, ansi" \
        in problems
    assert "test_output_format must be one of text, html, simple_format, md, ansi" in problems
    assert "output holds unescaped control characters" in problems
    assert "tests[0].name holds unescaped control characters" in problems


def test_written_results_with_hostile_text_read_back_as_valid(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    write_results(path, gradescope_results([hostile_score()], execution_time_s=0.0,
                                           output=HOSTILE))
    document = read_valid_results(path)
    assert document is not None
    assert raw_controls(json.dumps(document, ensure_ascii=False)) == []


# --- Classroom, the HTML page, the class report -----------------------------------------------


def test_classroom_messages_carry_no_escape_sequence_or_workflow_command() -> None:
    [test] = classroom_results([hostile_score()])["tests"]
    assert raw_controls(test["message"]) == []
    assert all(not line.lstrip().startswith("::") for line in test["message"].splitlines())


def test_the_page_escapes_hostile_text_and_always_encodes() -> None:
    document = gradescope_results([hostile_score()], execution_time_s=0.0, output=HOSTILE)
    document["tests"][0]["output"] = HOSTILE  # as if results.json had not escaped it
    page = build_page(document, [])
    page.encode("utf-8")
    assert "<script" not in page
    assert "<img" not in page
    assert raw_controls(page) == []
    assert "&lt;script&gt;" in page


def test_the_feedback_report_writes_a_page_even_from_a_lone_surrogate(tmp_path: Path) -> None:
    report = FeedbackReport({}, (), error=f"the curves could not be measured: {HOSTILE}")
    path = tmp_path / "page.html"
    report.write(path, {"score": 1.0, "output": HOSTILE, "tests": [], "extra_data": {}})
    page = path.read_text(encoding="utf-8")
    assert "\\ud800" in page
    assert ESC not in page
    assert "<script" not in page


def test_the_feedback_report_survives_a_document_it_cannot_render(tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    FeedbackReport({}, ()).write(path, {"score": 3.0, "tests": [{"score": "NaN?"}]})
    page = path.read_text(encoding="utf-8")
    assert "the page could not be built" in page
    assert 'data-score="3"' in page


CLASS = [
    GradedSubmission("=cmd|'/C calc'!A0", (Submitter("=HYPERLINK(\"https://a.example\")",
                                                     "+123", "@x\x1b"),), "graded", "",
                     {"score": 0.0, "tests": [{
                         "name": "t_erlang", "score": 0.0, "max_score": 1.0,
                         "status": "failed", "tags": ["erlang_c"], "visibility": "visible",
                         "output": f"t_erlang: 1 of 1 cases failed\ncase 'a': erlang_c(1)\n"
                                   f"  raised HostileError: {escape_controls(HOSTILE)}\n"
                                   "    hint: ![h](https://a.example/h.png)",
                         "extra_data": {"nodeid": "suite::t_erlang"}}],
                      "extra_data": {"max_score": 1.0}}),
    GradedSubmission("<img src=x>", (), "rejected", f"not graded: {HOSTILE}", {}),
]


def test_grades_csv_cells_cannot_run_as_formulas() -> None:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(grade_table(CLASS))
    rows = list(csv.reader(io.StringIO(buffer.getvalue())))
    assert rows[1][:4] == ["'=cmd|'/C calc'!A0", "'=HYPERLINK(\"https://a.example\")",
                           "'+123", "'@x\\x1b"]
    assert all(not cell.startswith(("=", "+", "-", "@", "\t", "\r"))
               for row in rows for cell in row)


def test_the_class_report_json_and_markdown_keep_student_text_inert() -> None:
    report = class_report(CLASS)
    text = json.dumps(report, ensure_ascii=False)
    text.encode("utf-8")
    assert raw_controls(text) == []
    page = markdown(report)
    assert raw_controls(page) == []
    for forbidden in (r"<script", r"<img", r"!\[", r"\]\(", r"\n# Forged", r"\n::error"):
        assert re.search(r"(?<!\\)" + forbidden, page) is None, forbidden
    assert "\\<img src=x\\>" in page  # the submission id, shown literally (only the
    # characters Markdown would read as markup in a cell are escaped)


# --- a stream that cannot show every character ------------------------------------------------

#: Encodings a student's or a course's terminal or redirected file may have.
NARROW_ENCODINGS = ("cp1252", "latin-1", "ascii", "cp437", "iso8859-15", "shift_jis")


def grader_texts() -> list[str]:
    """Every hint and rule text the grader itself writes to a terminal."""
    from graders.grading.diagnosis import catalogue
    from graders.grading.hints import ERROR_HINTS, HINTS

    texts = [*HINTS.values(), *ERROR_HINTS.values()]
    for mistake in catalogue():
        texts += [mistake.hint, mistake.label]
    return texts


@pytest.mark.parametrize("encoding", NARROW_ENCODINGS)
def test_every_grader_text_reads_on_any_encoding(encoding: str) -> None:
    from graders.escaping import for_terminal

    for text in grader_texts():
        shown = for_terminal(text, encoding)
        shown.encode(encoding)  # never a crash, nor pytest's \\u2265 escapes
        assert "\\u" not in shown, shown
        assert "\\x" not in shown, shown
        assert shown == text or not text.isascii()


@given(st.text())
def test_any_text_is_shown_on_a_narrow_stream_with_its_ascii_unchanged(text: str) -> None:
    from graders.escaping import escape_controls, for_terminal

    for encoding in ("cp1252", "ascii"):
        shown = for_terminal(text, encoding)
        shown.encode(encoding)
        if text.isascii():
            assert shown == escape_controls(text)


def test_the_symbols_of_the_hints_have_readable_spellings() -> None:
    from graders.escaping import for_terminal

    assert for_terminal("(B - 1) / (2λ)", "cp1252") == "(B - 1) / (2lambda)"
    assert for_terminal("a ≥ c, 1 − p, s · t ≤ u", "ascii") == "a >= c, 1 - p, s * t <= u"
    assert for_terminal("ρ ≈ 0.9 → µs", "latin-1") == "rho ~ 0.9 -> µs"  # µ is Latin-1
    assert for_terminal("naïve", "ascii") == "naive"
    assert for_terminal("λ ≥ 1", "utf-8") == "λ ≥ 1"
