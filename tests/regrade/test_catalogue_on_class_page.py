"""Every mistake of the grader's catalogue is named on the class page.

A submission with each entry's mistake (``tests/catalogue_mutants.py``) is regraded with
the others as one class, as an instructor runs it. The entries come from
``graders/grading/mistakes.toml`` itself, so a new entry is covered as soon as it is
written, and fails here until it has a submission that shows it and the class report
keeps every field its expression uses.
"""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from catalogue_mutants import KNOCK_ON_ONLY, MUTANTS, submission_name, write_mutant
from helpers import CORPUS, graders, load

from graders.grading.diagnosis import catalogue
from graders.grading.mistakes import Mistake

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def regraded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Each catalogue entry's submission (one per distinct submission), regraded as one
    class with ``--names``: its output folder."""
    folder = tmp_path_factory.mktemp("class")
    scratch = tmp_path_factory.mktemp("mutants")
    for source in dict.fromkeys(MUTANTS.values()):
        name = submission_name(source)
        if isinstance(source, str):
            shutil.copy(CORPUS / source / "serving.py", folder / f"{name}.py")
        else:
            (scratch / name).mkdir()
            shutil.copy(write_mutant(scratch / name, source), folder / f"{name}.py")
    out = tmp_path_factory.mktemp("regraded")
    run = graders("regrade", folder, "--out", out, "--jobs", "2", "--names",
                  "--no-histogram")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return out


def clusters_of(out: Path, member: str) -> list[dict[str, Any]]:
    return [cluster for cluster in load(out / "report.json")["clusters"]
            if member in cluster.get("members", [])]


def class_page_headings(out: Path) -> dict[str, list[str]]:
    """Each cluster's heading on the class page, by the ids of the entries it names."""
    page = (out / "class.html").read_text(encoding="utf-8")
    found: dict[str, list[str]] = {}
    for ids, heading in re.findall(r'<section class="cluster" [^>]*data-mistakes="([^"]*)"'
                                   r"[^>]*>\s*<h3>(.*?)</h3>", page, re.DOTALL):
        text = html.unescape(re.sub(r"<[^>]+>", "", heading))
        for mistake in ids.split():
            found.setdefault(mistake, []).append(text)
    return found


@pytest.mark.parametrize("mistake", sorted(catalogue(), key=lambda m: m.id),
                         ids=lambda m: m.id)
def test_each_catalogued_mistake_is_named_on_the_class_page(regraded: Path,
                                                            mistake: Mistake) -> None:
    assert mistake.id in MUTANTS, \
        f"give {mistake.id} a submission that shows it in tests/catalogue_mutants.py"
    member = submission_name(MUTANTS[mistake.id])
    clusters = clusters_of(regraded, member)
    assert clusters, f"{member} is in no cluster"
    if mistake.id in KNOCK_ON_ONLY:  # seen through its root: nested in the root's cluster
        root = KNOCK_ON_ONLY[mistake.id]
        [cluster] = [c for c in clusters if c["function"] == root]
        assert cluster["mistakes"], cluster
        assert mistake.function in {broken["function"] for broken in cluster["breaks"]}
        return
    named = [c for c in clusters if mistake.id in c["mistakes"]]
    assert named, [(c["function"], c["label"]) for c in clusters]
    assert all(c["function"] == mistake.function for c in named)
    headings = class_page_headings(regraded).get(mistake.id, [])
    assert headings, f"no cluster of the class page names {mistake.id}"
    assert all(mistake.label in heading and "not in the catalogue" not in heading
               for heading in headings), headings
