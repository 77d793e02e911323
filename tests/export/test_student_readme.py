"""The student README's rules of the twins: each in one sentence, with an example whose
numbers are the grader's own."""

from __future__ import annotations

import re
from fractions import Fraction

from helpers import REPO

from graders.grading.cases import serve_cases
from graders.grading.unseen import DEFAULT_UNSEEN, SPREAD, UnseenEvidence, confirmation

README = REPO / "graders" / "export" / "templates" / "student_README.md"


def twin_rules() -> list[str]:
    text = README.read_text(encoding="utf-8")
    rules = text.split("called\n*twins*", 1)[1].split("\n\n", 2)[1]
    return [" ".join(rule.split()) for rule in rules.split("\n- ")]


def test_each_twin_rule_is_one_bold_sentence_and_an_example() -> None:
    rules = twin_rules()
    assert len(rules) == 2
    for rule in rules:
        sentence = re.fullmatch(r"-? ?\*\*([^*]+)\*\* For example, .+", rule)
        assert sentence is not None, rule
        assert sentence.group(1).count(". ") == 0
        assert sentence.group(1).endswith(".")


def test_the_twin_example_is_a_visible_case_moved_within_the_grader_s_spread() -> None:
    moved = re.search(r"`serve\((\d+), (\d+)\)` may come back as `serve\((\d+), (\d+)\)`",
                      twin_rules()[0])
    assert moved is not None
    n, batch, twin_n, twin_batch = map(int, moved.groups())
    assert (n, batch) in {case.args for case in serve_cases()}
    for before, after in ((n, twin_n), (batch, twin_batch)):
        assert before / SPREAD <= after <= before * SPREAD
        assert after != before


def test_the_points_example_is_what_the_grader_keeps() -> None:
    rule = twin_rules()[1]
    example = re.search(r"with (\d+) twins, passing (\d+) or more keeps every point, passing "
                        r"(\d+) keeps half, and passing none keeps nothing", rule)
    assert example is not None, rule
    twins, full, half = map(int, example.groups())
    assert twins == DEFAULT_UNSEEN

    def kept(passed: int) -> Fraction:
        return confirmation(UnseenEvidence(nontrivial=twins, nontrivial_passed=passed))

    assert kept(full) == 1
    assert kept(full - 1) < 1
    assert kept(half) == Fraction(1, 2)
    assert kept(0) == 0
