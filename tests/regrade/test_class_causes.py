"""The class page lists causes (issue 34): a generated class with bugs that break the
functions calling them, an untouched template, two bugs in one function, and both forms of
two catalogued bugs, regraded once; its report.json and class.html, read as data and in
headless Chromium."""

from __future__ import annotations

import html.parser
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import CORPUS, REPO, offline_page

CORRECT = CORPUS / "correct" / "serving.py"
#: Each edit as (the correct line, the buggy one).
WARM_POOL_NOT_APPLIED = ("exposed = profile.service_ms + cold * (1 - protected)",
                         "exposed = profile.service_ms + cold")
ZERO_PASSES = [("passes = math.ceil(n_requests / batch_size)",
                "passes = n_requests // batch_size"),
               ("return ServeResult(total, n_requests / (total / 1000), passes)",
                "return ServeResult(total, n_requests / (total / 1000) if total else 0.0, "
                "passes)")]
FORMATION = ("formation = (b - 1) / (2 * lam) * 1000", "formation = (b - 1) / lam * 1000")
NATURAL_LOG = ("(1 + 0.08 * math.log2(b))", "(1 + 0.08 * math.log(b))")
#: Submission -> a corpus folder, the template, or edits of the correct solution.
CLASS: dict[str, str | list[tuple[str, str]]] = {
    "linear-cv-1": "variability_linear_cv",  # breaks batching_tax
    "linear-cv-2": "variability_linear_cv",
    "textbook-erlang": "erlang_c_textbook",  # breaks queueing_latency
    "kv-half": "kv_state_no_factor_2",  # breaks cache_capacity
    "template": "template",
    "double": [FORMATION, NATURAL_LOG],
    "formation": "formation_delay_no_half",
    "natural-log": "batching_natural_log",
    "warm-pool-zero": "warm_pool_ignored",
    "warm-pool-exposed": [WARM_POOL_NOT_APPLIED],
    "passes-raises": "passes_floor",
    "passes-zero": ZERO_PASSES,
    "correct": "correct",
}
#: A root's submissions, and the function each one breaks too.
KNOCK_ONS = {"linear-cv-1": ("queueing_latency", "batching_tax"),
             "linear-cv-2": ("queueing_latency", "batching_tax"),
             "textbook-erlang": ("erlang_c", "queueing_latency"),
             "kv-half": ("transformer_state_gb", "cache_capacity")}
#: Both forms of each bug: catalogue id -> the submission that shows it.
FORMS = {"warm-pool-ignored": "warm-pool-zero", "warm-pool-not-applied": "warm-pool-exposed",
         "passes-floor": "passes-raises", "passes-floor-values": "passes-zero"}


def source(spec: str | list[tuple[str, str]]) -> str:
    if spec == "template":
        return (REPO / "student_template" / "serving.py").read_text(encoding="utf-8")
    if isinstance(spec, str):
        return (CORPUS / spec / "serving.py").read_text(encoding="utf-8")
    text = CORRECT.read_text(encoding="utf-8")
    for right, wrong in spec:
        assert text.count(right) == 1, right
        text = text.replace(right, wrong)
    return text


@pytest.fixture(scope="module")
def regraded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("causes")
    base.chmod(0o700)
    root = base / "class"
    root.mkdir(mode=0o700)
    for ident, spec in CLASS.items():
        (root / ident).mkdir()
        (root / ident / "serving.py").write_text(source(spec), encoding="utf-8")
    out = base / "out"
    run = subprocess.run([sys.executable, "-m", "graders", "regrade", str(root), "--out",
                          str(out), "--jobs", "2", "--names", "--no-histogram"],
                         capture_output=True, text=True, timeout=900, check=False)
    assert run.returncode == 0, run.stderr
    return out


def clusters(out: Path) -> list[dict[str, Any]]:
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    found: list[dict[str, Any]] = report["clusters"]
    return found


@pytest.mark.slow
def test_no_knock_on_is_a_cluster_of_its_own(regraded: Path) -> None:
    found = clusters(regraded)
    for ident, (root, broken) in KNOCK_ONS.items():
        [home] = [c for c in found if ident in c["members"]]
        assert home["function"] == root, ident
        assert {"function": broken, "submissions": len(
            [i for i, (r, b) in KNOCK_ONS.items() if (r, b) == (root, broken)]),
            "members": [i for i, (r, b) in KNOCK_ONS.items() if (r, b) == (root, broken)]} \
            in home["breaks"], ident
    assert not [c for c in found if c["label"].startswith("knock-on")]
    counts = [c["submissions"] for c in found]
    assert counts == sorted(counts, reverse=True)


@pytest.mark.slow
def test_the_untouched_template_is_one_cluster(regraded: Path) -> None:
    found = clusters(regraded)
    [home] = [c for c in found if "template" in c["members"]]
    assert (home["members"], home["label"]) == (["template"], "not implemented yet")
    [row] = home["not_started"]
    assert row["submission"] == "template"
    assert row["functions"][:2] == ["serve", "erlang_c"]
    assert len(row["functions"]) == 9


@pytest.mark.slow
def test_each_catalogued_bug_is_named_in_both_its_forms(regraded: Path) -> None:
    found = clusters(regraded)
    for mistake, ident in FORMS.items():
        named = [c for c in found if mistake in c["mistakes"]]
        assert named, mistake
        assert ident in named[0]["members"], mistake
    assert not [c for c in found if not c["label"]]  # every bug here is catalogued


@pytest.mark.slow
def test_two_bugs_in_one_function_are_named_twice_and_counted_in_both(regraded: Path
                                                                      ) -> None:
    from graders.grading.mistakes import load_catalogue

    hints = {m.id: m.hint for m in load_catalogue()}
    found = clusters(regraded)
    for mistake, alone, field in (("natural-log", "natural-log", "batched_service_ms"),
                                  ("formation-no-half", "formation", "formation_delay_ms")):
        [named] = [c for c in found if c["mistakes"] == [mistake]]
        assert sorted(named["members"]) == sorted([alone, "double"]), mistake
        assert named["submissions"] == 2
        assert f": {field} expected " in named["first_case"]  # the label's own field
        assert named["hint"] == hints[mistake]
    assert len([c for c in found if "double" in c["members"]]) == 2


class _Page(html.parser.HTMLParser):
    """The clusters' sections, the knock-on items and the not-started rows."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[dict[str, str]] = []
        self.breaks: list[dict[str, str]] = []
        self._in_breaks = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {key: value or "" for key, value in attrs}
        if tag == "section" and values.get("class") == "cluster":
            self.sections.append(values)
        if tag == "ul":
            self._in_breaks = values.get("class") == "breaks"
        if tag == "li" and self._in_breaks and self.sections:
            self.breaks.append({**values, "in": self.sections[-1]["data-function"]})

    def handle_endtag(self, tag: str) -> None:
        if tag == "ul":
            self._in_breaks = False


@pytest.mark.slow
def test_the_page_lists_causes_with_their_knock_ons_inside(regraded: Path) -> None:
    page = (regraded / "class.html").read_text(encoding="utf-8")
    parsed = _Page()
    parsed.feed(page)
    functions = [section["data-function"] for section in parsed.sections]
    assert "batching_tax" in functions  # the natural log and the formation delay
    assert {(item["in"], item["data-function"]) for item in parsed.breaks} == {
        ("queueing_latency", "batching_tax"), ("erlang_c", "queueing_latency"),
        ("transformer_state_gb", "cache_capacity")}
    assert "also breaks <b>batching_tax</b> in these 2 submissions" in page
    assert "not started: serve, erlang_c, queueing_latency" in page
    assert "<script" not in page


@pytest.mark.slow
def test_the_page_of_causes_in_headless_chromium_without_network(regraded: Path,
                                                                 tmp_path: Path) -> None:
    screenshot = tmp_path / "causes.png"
    with offline_page(regraded / "class.html") as opened:
        page = opened.page
        headings = page.locator("section.cluster h3").all_inner_texts()
        knock_ons = page.locator("ul.breaks li").all_inner_texts()
        started = page.locator("table.not-started td").all_inner_texts()
        visible = page.locator("ul.breaks").first.is_visible()
        page.screenshot(path=str(screenshot), full_page=True)
    problems, requests = opened.problems, opened.requests
    print(f"screenshot of the class page: {screenshot}")  # noqa: T201
    assert problems == []
    assert all(url.startswith(("file:", "data:")) for url in requests), requests
    assert not [h for h in headings if "knock-on" in h]
    assert len([h for h in headings if "not started" in h]) == 1
    assert any("a natural log where the lab uses log2" in h for h in headings)
    assert any("the warm pool dropped from the exposed latency" in h for h in headings)
    assert len(knock_ons) == 3
    assert visible
    assert started[0] == "template"
    assert started[1].startswith("not started: serve, erlang_c")
    assert screenshot.stat().st_size > 10_000



@pytest.mark.slow
def test_a_bug_of_its_own_in_a_function_whose_callee_fails_is_a_second_cause(
        tmp_path: Path) -> None:
    # textbook Erlang C (which breaks queueing_latency) and a natural log in batching_tax:
    # batching_tax's values fit its own mistake, so it is a cause of its own there, not a
    # knock-on; the natural log is counted, and Erlang C is not said to break batching_tax
    root = tmp_path / "class"
    root.mkdir(mode=0o700)
    textbook = source("erlang_c_textbook")
    assert textbook.count(NATURAL_LOG[0]) == 1
    chain = {"textbook-erlang": textbook, "natural-log": source([NATURAL_LOG]),
             "both": textbook.replace(*NATURAL_LOG)}
    for ident, text in chain.items():
        (root / ident).mkdir()
        (root / ident / "serving.py").write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "graders", "regrade", str(root), "--out",
                          str(out), "--jobs", "2", "--names", "--no-histogram"],
                         capture_output=True, text=True, timeout=900, check=False)
    assert run.returncode == 0, run.stderr
    found = clusters(out)
    [natural] = [c for c in found if c["mistakes"] == ["natural-log"]]
    assert sorted(natural["members"]) == ["both", "natural-log"]
    [erlang] = [c for c in found if "textbook-erlang" in c["members"]]
    assert erlang["function"] == "erlang_c"
    assert sorted(erlang["members"]) == ["both", "textbook-erlang"]
    assert all("both" not in item["members"] for item in erlang["breaks"]
               if item["function"] == "batching_tax")
