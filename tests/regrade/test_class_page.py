"""The class page of a real regrade: a generated class mixing the corpus's one-bug
submissions in known proportions, each varied so that no two files are equal."""

from __future__ import annotations

import csv
import html.parser
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import CORPUS, offline_page

#: Corpus folder -> (copies, the function where the bug is, the catalogued mistake or "").
MIX: dict[str, tuple[int, str, str]] = {
    "batching_natural_log": (4, "batching_tax", "natural-log"),
    "gib_for_gb": (3, "serving_track_profile", "gib-for-gb"),
    "kv_state_no_factor_2": (2, "transformer_state_gb", "kv-no-factor-2"),
    "warm_pool_ignored": (2, "cold_start_latency", "warm-pool-ignored"),
    "erlang_c_textbook": (2, "erlang_c", "erlang-c-textbook"),
    # its p99 follows from its mean latency (the root the catalogue names)
    "variability_linear_cv": (1, "queueing_latency", "variability-linear-cv-mean"),
    "p99_at_q095": (1, "queueing_latency", "p99-at-q095"),
    "correct": (2, "", ""),
}
METADATA = """\
{folder}:
  :submitters:
  - :name: Ann Lee
    :sid: 0012346
  - :name: Ben Ode
    :sid: 0012347
  :created_at: 2024-03-02 13:00:00.000000000 -08:00
"""


def generated_class(root: Path) -> dict[str, str]:
    """Write the class (one folder per submission); return submission id -> corpus name."""
    root.mkdir(mode=0o700)
    made = {}
    for name, (copies, _, _) in MIX.items():
        source = (CORPUS / name / "serving.py").read_text(encoding="utf-8")
        for copy in range(copies):
            ident = f"{name}-{copy}"
            (root / ident).mkdir()
            (root / ident / "serving.py").write_text(
                f"{source}\n# variant {copy} of {name}\n_VARIANT = {copy}\n", encoding="utf-8")
            made[ident] = name
    (root / "submission_metadata.yml").write_text(
        METADATA.format(folder="batching_natural_log-0"), encoding="utf-8")
    return made


@pytest.fixture(scope="module")
def regraded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    base = tmp_path_factory.mktemp("class")
    base.chmod(0o700)
    made = generated_class(base / "class")
    out = base / "out"
    run = subprocess.run(
        [sys.executable, "-m", "graders", "regrade", str(base / "class"), "--out", str(out),
         "--jobs", "2", "--pages", "--names", "--no-histogram",
         "--due", "2024-03-01 23:59:00 -08:00"],
        capture_output=True, text=True, timeout=900, check=False)
    assert run.returncode == 0, run.stderr
    return out, made


class _Sections(html.parser.HTMLParser):
    """The clusters' sections and the links of a class page."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[dict[str, str]] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {key: value or "" for key, value in attrs}
        if tag == "section":
            self.sections.append(values)
        if tag == "a":
            self.links.append(values["href"])


@pytest.mark.slow
def test_each_bug_has_its_cluster_with_the_right_count_and_label(
        regraded: tuple[Path, dict[str, str]]) -> None:
    out, made = regraded
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["graded"] == len(made)
    clusters = report["clusters"]
    for name, (copies, function, mistake) in MIX.items():
        members = sorted(ident for ident, source in made.items() if source == name)
        if not function:
            assert all(not set(members) & set(c["members"]) for c in clusters)
            continue
        [found] = [c for c in clusters if c["function"] == function
                   and set(c["members"]) & set(members)]
        assert (sorted(found["members"]), found["submissions"], found["mistake"]) == \
            (members, copies, mistake), name
        assert found["share"] == pytest.approx(copies / len(made), abs=1e-6)
        if mistake:
            assert found["label"]
    counts = [c["submissions"] for c in clusters]
    assert counts == sorted(counts, reverse=True)  # largest first
    page = (out / "class.html").read_text(encoding="utf-8")
    sections = _Sections()
    sections.feed(page)
    shown = {(s["data-function"], s["data-mistake"], int(s["data-count"]))
             for s in sections.sections}
    for copies, function, mistake in MIX.values():
        if function:
            assert (function, mistake, copies) in shown
    assert all((out / link).is_file() for link in sections.links)
    assert len(sections.links) > len(made)  # every page, and the representatives'


@pytest.mark.slow
def test_the_grade_sheet_has_a_row_per_group_member_with_lateness(
        regraded: tuple[Path, dict[str, str]]) -> None:
    out, made = regraded
    rows = list(csv.DictReader((out / "grades.csv").open(encoding="utf-8")))
    assert len(rows) == len(made) + 1
    pair = [row for row in rows if row["submission"] == "batching_natural_log-0"]
    assert [(r["name"], r["sid"], r["group"], r["late"], r["days_late"]) for r in pair] == [
        ("Ann Lee", "0012346", "batching_natural_log-0", "yes", "1"),
        ("Ben Ode", "0012347", "batching_natural_log-0", "yes", "1")]
    assert pair[0]["score"] == pair[1]["score"] == "91.666667"
    others = [row for row in rows if row["submission"] != "batching_natural_log-0"]
    assert {(row["group"], row["late"]) for row in others} == {("", "")}


@pytest.mark.slow
def test_the_class_page_in_headless_chromium_without_network(
        regraded: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    out, made = regraded
    screenshot = tmp_path / "class.png"
    with offline_page(out / "class.html") as opened:
        page = opened.page
        counts: list[Any] = page.eval_on_selector_all(
            "section.cluster", "els => els.map(e => Number(e.dataset.count))")
        cells = page.locator("#heatmap td[data-rate]").count()
        bars = page.locator("#distribution rect").count()
        bins = page.locator("#bins").inner_text()
        box = page.locator("#distribution").bounding_box()
        page.screenshot(path=str(screenshot), full_page=True)
        page.locator("#students a").first.click()
        page.wait_for_load_state("load")
        student = page.url
    problems, requests = opened.problems, opened.requests
    print(f"screenshot of the class page: {screenshot}")  # noqa: T201
    assert problems == []
    assert all(url.startswith(("file:", "data:")) for url in requests), requests
    assert counts == sorted(counts, reverse=True)
    assert counts[0] == 4
    assert cells == 9 * 5 - 3 * 4 - 1  # track-less functions have no track cells
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    edges = report["histogram"]["edges"]
    assert bars == len(report["histogram"]["counts"]) == len(edges) - 1
    assert all(f"{low:g}\u2013{high:g}" in bins
               for low, high in zip(edges, edges[1:], strict=False))
    assert box is not None
    assert box["width"] > 300
    assert student.endswith("/feedback.html")
    assert screenshot.stat().st_size > 10_000


def test_a_relative_out_folder_grades_every_submission(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)  # sandbox users must reach their boxes below it, as root
    (tmp_path / "class" / "alice").mkdir(parents=True)
    (tmp_path / "class" / "alice" / "serving.py").write_bytes(
        (CORPUS / "correct" / "serving.py").read_bytes())
    run = subprocess.run([sys.executable, "-m", "graders", "regrade", "class", "--out", "out",
                          "--no-histogram"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=600, check=False)
    assert run.returncode == 0, run.stderr
    [row] = csv.DictReader((tmp_path / "out" / "grades.csv").open(encoding="utf-8"))
    assert (row["status"], row["score"]) == ("graded", "100.0")
    assert (tmp_path / "out" / "class.html").is_file()
