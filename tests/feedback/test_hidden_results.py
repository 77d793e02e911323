"""Hidden results stay hidden, and a function's points are split one way in every output.

A student's page is made before the hidden tests are released, by ``graders grade --html``
and by ``graders regrade --pages`` (the pages to hand back). Read as a student reads it
(the body's text in headless Chromium), it shows no hidden test's points or outcome and
no total that counts them. The staff page (``--html-for staff``) shows them, under a
banner. The terminal's table, grades.csv and both pages give each function the same
maximum; the terminal, grades.csv and the staff page the same score too.
"""

from __future__ import annotations

import csv
import re
import shutil
from fractions import Fraction
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from helpers import CORPUS, graders, load, offline_page

from graders.feedback.render import HIDDEN_TEXT, STAFF_TEXT
from graders.results.reports import points_text

#: Two students: one loses points in visible and hidden tests alike (p99 at q = 0.95), one
#: passes every visible test and fails both hidden ones (an Erlang C that overflows on
#: large fleets), whose page must not say that every test passes.
STUDENTS = {"ada": CORPUS / "p99_at_q095", "bob": CORPUS / "erlang_c_textbook"}

pytestmark = pytest.mark.slow


class Graded(NamedTuple):
    results: dict[str, Any]
    terminal: dict[str, tuple[str, str, str]]
    student: Path
    staff: Path


class Read(NamedTuple):
    """A page as Chromium lays it out."""

    text: str
    score: str
    maximum: str
    functions: dict[str, list[str]]
    hidden_items: list[tuple[str, str, str]]


def terminal_functions(stdout: str) -> dict[str, tuple[str, str, str]]:
    """The terminal's table by function: (score, max, tests)."""
    block = stdout[stdout.index("\nfunction "):].split("\n\n")[0].splitlines()[2:]
    rows = [line.split() for line in block]
    return {row[0]: (row[1], row[2], row[3]) for row in rows}


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Graded]:
    """Each student graded twice with ``graders grade``: the student's page and the staff
    page."""
    done = {}
    for name, submission in STUDENTS.items():
        out = tmp_path_factory.mktemp(name)
        run = graders("grade", submission, "--results", out / "results.json",
                      "--html", out / "student.html")
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        staff = graders("grade", submission, "--html", out / "staff.html",
                        "--html-for", "staff", "-q")
        assert staff.returncode == 0, staff.stdout[-2000:] + staff.stderr[-2000:]
        assert terminal_functions(staff.stdout) == terminal_functions(run.stdout)
        done[name] = Graded(load(out / "results.json"), terminal_functions(run.stdout),
                            out / "student.html", out / "staff.html")
    return done


@pytest.fixture(scope="module")
def regraded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two students regraded as a class, with ``--pages``."""
    folder = tmp_path_factory.mktemp("class")
    for name, submission in STUDENTS.items():
        shutil.copy(submission / "serving.py", folder / f"{name}.py")
    out = tmp_path_factory.mktemp("regraded")
    run = graders("regrade", folder, "--out", out, "--pages", "--jobs", "2",
                  "--no-histogram")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return out


def read(path: Path) -> Read:
    with offline_page(path) as opened:
        page = opened.page
        text = page.locator("body").inner_text()
        functions = {}
        for row in page.locator("table.by-function tbody tr").all():
            cells = [cell.inner_text().strip() for cell in row.locator("td").all()]
            functions[cells[0]] = cells[1:]
        hidden = [(item.get_attribute("data-visibility") or "",
                   item.locator(".status").inner_text(), item.inner_text())
                  for item in page.locator("li.test[data-visibility]").all()]
        read = Read(text, page.locator("#score").inner_text(),
                    page.locator("#max-score").inner_text(), functions, hidden)
        assert opened.problems == []
        assert all(url.startswith(("file:", "data:")) for url in opened.requests)
    return read


def hidden_tests(results: dict[str, Any]) -> list[dict[str, Any]]:
    return [test for test in results["tests"] if test["visibility"] != "visible"]


def total(tests: list[dict[str, Any]], key: str) -> Fraction:
    return sum((Fraction(str(test[key])) for test in tests), Fraction(0))


def by_function(tests: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for test in tests:
        groups.setdefault(test["tags"][0], []).append(test)
    return groups


def assert_nothing_hidden_shows(page: Read, results: dict[str, Any],
                                terminal: dict[str, tuple[str, str, str]]) -> None:
    hidden = hidden_tests(results)
    visible = [test for test in results["tests"] if test["visibility"] == "visible"]
    assert hidden, "the suite has hidden tests"
    # the score counts the visible tests alone
    assert (page.score, page.maximum) == points_text(total(visible, "score"),
                                                     total(visible, "max_score"))
    whole = points_text(Fraction(str(results["score"])),
                        Fraction(str(results["extra_data"]["max_score"])))
    assert " / ".join(whole) not in page.text
    earned = points_text(total(hidden, "score"), total(hidden, "max_score"))
    assert f"{earned[0]} / {earned[1]}" not in page.text
    assert "(hidden tests)" not in page.text
    assert "nothing left to fix" not in page.text
    # each hidden test: its name and that it is hidden, no outcome, no points
    assert sorted(name for _, _, name in page.hidden_items) == sorted(
        f"hidden {test['name']} ({HIDDEN_TEXT[test['visibility']]})" for test in hidden)
    for _, status, item in page.hidden_items:
        assert status == "hidden"
        assert not re.search(r"passed|failed|\d+\.\d+ / \d", item), item
    for test in hidden:
        assert test["output"].strip().splitlines()[0] not in page.text
    # the function table: visible points, and the hidden tests' maximum in a column of
    # its own; the function's whole maximum is the terminal's
    functions = by_function(results["tests"])
    assert set(page.functions) == set(terminal)
    for function, (score, maximum, count, in_hidden) in page.functions.items():
        shown = [t for t in functions[function] if t["visibility"] == "visible"]
        withheld = [t for t in functions[function] if t["visibility"] != "visible"]
        assert (score, maximum) == points_text(total(shown, "score"), total(shown, "max_score"))
        assert int(count) == len(shown)
        whole = terminal[function][1]
        if withheld:
            assert in_hidden == f"{points_text(*[total(withheld, 'max_score')] * 2)[1]} " \
                               f"of {whole}"
        else:
            assert in_hidden == ""
            assert maximum == whole


def test_a_students_page_from_graders_grade_shows_no_hidden_result(
        graded: dict[str, Graded]) -> None:
    for name, run in graded.items():
        page = read(run.student)
        assert_nothing_hidden_shows(page, run.results, run.terminal)
        assert STAFF_TEXT not in page.text, name
        if name == "bob":  # every visible test passes; both hidden ones fail
            assert "Every visible test passes. The hidden tests' results are not shown " \
                   "before they are released." in page.text


def test_a_students_page_from_the_regrade_shows_no_hidden_result(
        graded: dict[str, Graded], regraded: Path) -> None:
    for name, run in graded.items():
        folder = regraded / "submissions" / name
        assert load(folder / "results.json")["tests"] == run.results["tests"]
        assert_nothing_hidden_shows(read(folder / "feedback.html"), run.results, run.terminal)


def test_the_staff_page_shows_the_hidden_results_labelled(graded: dict[str, Graded]) -> None:
    for run in graded.values():
        page = read(run.staff)
        lines = [line for line in page.text.splitlines() if line.strip()]
        assert lines[1] == STAFF_TEXT  # right under the title
        assert (page.score, page.maximum) == points_text(
            Fraction(str(run.results["score"])),
            Fraction(str(run.results["extra_data"]["max_score"])))
        hidden = hidden_tests(run.results)
        assert len(page.hidden_items) == len(hidden)
        for test in hidden:
            item = next(text for _, _, text in page.hidden_items if test["name"] in text)
            status = "passed" if test["status"] == "passed" else "failed"
            points = " / ".join(points_text(Fraction(str(test["score"])),
                                            Fraction(str(test["max_score"]))))
            assert item.startswith(f"{status} {test['name']} ({points}) [hidden from students: "
                                   f"{HIDDEN_TEXT[test['visibility']]}]"), item


def test_a_functions_points_are_split_one_way_everywhere(
        graded: dict[str, Graded], regraded: Path) -> None:
    """The terminal's table, the staff page and grades.csv: the same score, maximum and
    tests per function (the student's page: the same maximum, checked above)."""
    with (regraded / "grades.csv").open(encoding="utf-8", newline="") as handle:
        rows = {row["submission"]: row for row in csv.DictReader(handle)}
    for name, run in graded.items():
        staff = read(run.staff).functions
        assert {function: tuple(cells) for function, cells in staff.items()} == run.terminal
        for function, (score, maximum, _) in run.terminal.items():
            written = Fraction(rows[name][function])
            assert points_text(written, Fraction(maximum))[0] == score, (name, function)
