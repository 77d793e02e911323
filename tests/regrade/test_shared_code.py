"""Shared code: alike submissions flagged beside their mistake cluster, for staff to look at.

Copies are made the way students disguise them: comments rewritten, local names renamed,
layout changed (identical once normalised), or one line edited (near-identical). The
false flags are counted on independent honest code: the correct implementations written
apart (``tests/corpus/correct``, ``tests/slips/correct``, the ``reference`` package and
the blind implementations of ``tests/blind/``), pair by pair.
"""

from __future__ import annotations

import ast
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tokenize
from pathlib import Path
from typing import Any

import pytest
from helpers import CORPUS, REPO

from graders.regrade.classpage import build_class_page
from graders.regrade.classview import cluster_rows, with_classes
from graders.regrade.clusters import Cluster
from graders.regrade.report import GradedSubmission, class_report
from graders.regrade.sharedcode import shared_code_rows
from graders.regrade.similarity import (
    NEAR,
    alike_pairs,
    fingerprints,
    groups,
    normalised,
    template_fingerprints,
)

CORRECT = (CORPUS / "correct" / "serving.py").read_text(encoding="utf-8")
REFERENCE_MODULES = ("units", "domain", "queueing", "batching", "capacity", "coldstart",
                     "profile")


def disguised(source: str) -> str:
    """``source`` with its comments rewritten, every local variable renamed and blank
    lines dropped: the same program."""
    tree = ast.parse(source)
    local = {node.id for function in ast.walk(tree) if isinstance(function, ast.FunctionDef)
             for node in ast.walk(function)
             if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}
    local -= {node.arg for node in ast.walk(tree) if isinstance(node, ast.keyword)}
    tokens = []
    previous = ""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            token = token._replace(string="# my own work")
        elif token.type == tokenize.NAME and token.string in local and previous != ".":
            token = token._replace(string=f"my_{token.string}")
        tokens.append(token)
        previous = token.string
    return "\n".join(line for line in tokenize.untokenize(tokens).splitlines()
                     if line.strip())


def honest_implementations() -> dict[str, str]:
    reference = "\n".join((REPO / "reference" / f"{name}.py").read_text(encoding="utf-8")
                          for name in REFERENCE_MODULES)
    return {"corpus": CORRECT,
            "slips": (REPO / "tests" / "slips" / "correct" / "serving.py").read_text(
                encoding="utf-8"),
            "reference": reference,
            **{f"blind {path.parent.name}": path.read_text(encoding="utf-8")
               for path in sorted((REPO / "tests" / "blind").glob("*/serving.py"))}}


def test_a_disguised_copy_is_the_same_code_once_normalised() -> None:
    copy = disguised(CORRECT)
    assert copy != CORRECT
    compile(copy, "copy.py", "exec")  # still a program
    [pair] = alike_pairs({"ada": CORRECT, "bob": copy})
    assert pair.identical
    assert pair.share == 1.0


def test_a_copy_with_one_line_edited_is_near_identical_with_the_edit_as_evidence() -> None:
    edited = CORRECT.replace("math.floor", "math.ceil", 1)
    assert edited != CORRECT
    [pair] = alike_pairs({"ada": CORRECT, "bob": disguised(edited)})
    assert not pair.identical
    assert pair.share >= NEAR
    assert any(line.startswith("-") and "floor" in line for line in pair.diff)
    assert any(line.startswith("+") and "ceil" in line for line in pair.diff)


def test_every_single_bug_copy_of_the_corpus_is_flagged_with_the_correct_file() -> None:
    sources = {folder.name: (folder / "serving.py").read_text(encoding="utf-8")
               for folder in sorted(CORPUS.iterdir()) if (folder / "serving.py").is_file()}
    flagged = {pair.second if pair.first == "correct" else pair.first
               for pair in alike_pairs(sources) if "correct" in (pair.first, pair.second)}
    assert flagged == set(sources) - {"correct"}
    assert len(flagged) >= 15


def test_independent_honest_implementations_are_not_flagged() -> None:
    """The false-flag count on independent correct code: 0 of the 6 pairs (each pair
    shares 17 % to 43 % of its fingerprints; flagging starts at 90 %)."""
    honest = honest_implementations()
    assert alike_pairs(honest) == []


def test_the_template_and_code_that_does_not_tokenize_are_never_flagged() -> None:
    template = (REPO / "student_template" / "serving.py").read_text(encoding="utf-8")
    assert alike_pairs({"ada": template, "bob": template + "\n# started\n"}) == []
    assert normalised("def f(:\n") is None
    assert alike_pairs({"ada": "def f(:\n", "bob": "def f(:\n"}) == []


def test_groups_join_pairs_transitively_largest_first() -> None:
    sources = {"a": CORRECT, "b": disguised(CORRECT), "c": disguised(CORRECT),
               "d": honest_implementations()["slips"]}
    [group] = groups(alike_pairs(sources))
    assert group.members == ("a", "b", "c")
    assert group.identical


def graded(ident: str, got: int) -> GradedSubmission:
    case = {"case": "defaults", "inputs": {}, "fields": {"max_concurrent": [1, got]}}
    test = {"name": "cache_capacity [iphone]", "status": "failed", "score": 0.0,
            "max_score": 2.0, "tags": ["cache_capacity", "iphone"],
            "extra_data": {"failed_cases": [case]}}
    return GradedSubmission(ident, (), "graded", "", {"score": 90.0, "tests": [test]})


def test_the_flag_sits_beside_its_cluster_with_the_shared_wrong_values() -> None:
    entries = [graded("ada", 2), graded("bob", 2), graded("cy", 2)]
    clusters = [Cluster("cache_capacity", ["ada", "bob", "cy"], ["cache_capacity [iphone]"],
                        ["iphone"], "", "")]
    report = with_classes(class_report(entries), cluster_rows(
        clusters, 3, key=b"k", names=True, pages=set()), None)
    sources = {"ada": CORRECT, "bob": disguised(CORRECT),
               "cy": honest_implementations()["slips"]}
    shown = shared_code_rows(report, clusters, entries, sources, lambda ident: ident)
    [beside] = shown["clusters"][0]["shared_code"]
    assert beside["members"] == ["ada", "bob"]
    assert beside["identical"]
    assert beside["shared_wrong_values"] == [
        "cache_capacity [iphone], case 'defaults': max_concurrent = 2 (expected 1)"]
    assert (beside["others"], beside["others_with_values"]) == (1, 1)
    page = build_class_page(shown, names=True)
    note = page[page.index("Worth a look"):page.index("</section>", page.index("Worth a look"))]
    assert "ada, bob" in note
    assert "max_concurrent = 2 (expected 1)" in note
    assert "1 of the cluster's other 1 submissions gave these values too" in note
    assert "not a finding" in note
    for verdict in ("plagiar", "cheat", "copied", "misconduct"):
        assert verdict not in page.lower()
    assert 'id="shared-code"' in page


def test_without_alike_code_the_section_says_so_and_no_cluster_is_flagged() -> None:
    honest = honest_implementations()
    entries = [graded("ada", 2), graded("bob", 2)]
    clusters = [Cluster("cache_capacity", ["ada", "bob"], [], [], "", "")]
    report: dict[str, Any] = {"submissions": 2, "graded": 2, "clusters": [{}]}
    shown = shared_code_rows(report, clusters, entries,
                             {"ada": honest["corpus"], "bob": honest["slips"]},
                             lambda ident: ident)
    assert shown["shared_code"] == []
    assert "shared_code" not in shown["clusters"][0]


def test_the_measured_shares_of_honest_pairs_lie_far_below_the_flag() -> None:
    """The margin behind the false-flag count: every independent pair's share."""
    base = template_fingerprints()
    prints = {name: fingerprints(code) - base for name, text in
              honest_implementations().items() if (code := normalised(text)) is not None}
    names = sorted(prints)
    shares = [len(prints[a] & prints[b]) / min(len(prints[a]), len(prints[b]))
              for i, a in enumerate(names) for b in names[i + 1:]]
    assert len(shares) == len(names) * (len(names) - 1) // 2 >= 6
    assert max(shares) < NEAR / 2


@pytest.mark.slow
def test_a_regrade_flags_a_disguised_copy_beside_the_cluster_of_its_bug() -> None:
    base = Path(tempfile.mkdtemp(prefix="shared-code-test-", dir="/tmp"))
    try:
        base.chmod(0o755)
        buggy = (CORPUS / "cache_ceil" / "serving.py").read_text(encoding="utf-8")
        for ident, text in (("ana", buggy), ("ben", disguised(buggy)),
                            ("cai", honest_implementations()["slips"])):
            (base / "class" / ident).mkdir(parents=True)
            (base / "class" / ident / "serving.py").write_text(text, encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
        result = subprocess.run(
            [sys.executable, "-m", "graders", "regrade", "class", "--out", "out",
             "--jobs", "2", "--no-histogram", "--names"],
            cwd=base, env=env, capture_output=True, text=True, timeout=600, check=False)
        assert result.returncode == 0, result.stderr[-3000:]
        report = json.loads((base / "out" / "report.json").read_text(encoding="utf-8"))
        assert [row["members"] for row in report["shared_code"]] == [["ana", "ben"]]
        [home] = [row for row in report["clusters"] if row.get("shared_code")]
        assert home["function"] == "cache_capacity"
        assert home["members"] == ["ana", "ben"]  # the honest cai passes cache_capacity
        assert home["shared_code"][0]["shared_wrong_values"]
        page = (base / "out" / "class.html").read_text(encoding="utf-8")
        assert page.index("Worth a look") < page.index('id="shared-code"')
    finally:
        shutil.rmtree(base, ignore_errors=True)
