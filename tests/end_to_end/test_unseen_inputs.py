"""The official grade checks inputs no student has seen (issue 23), with the CLI as users run it.

A lookup table built from a freshly exported student bundle's golden file
(``tests/adversarial/lookup_table_generator.py``) must score no more than constants; one
right case per function earns at most those cases' share and no invariant; the same file
is graded the same, a changed file or secret meets new inputs; a failed unseen input shows
its arguments and never its expected value; a local (golden) run says its score is a
preview.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import CORPUS, FAKES, TESTS, graders, load

from graders.plugin.hooks import PREVIEW_LINE

pytestmark = pytest.mark.slow

GENERATOR = TESTS / "adversarial" / "lookup_table_generator.py"
#: The twin-aware copy (issue 33): a twin gets the golden answer of its nearest visible case.
TWIN_COPY = TESTS / "adversarial" / "twin_copy_generator.py"
#: The functions whose answers are products of the inputs a twin moves: one multiplication
#: of a golden answer by the moved inputs' ratios answers their twins.
PRODUCTS = frozenset({"transformer_state_gb", "quantity_to_float"})
#: File hashes each copy is graded with (each draws other twins).
COPY_HASHES = 3


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("unseen") / "bundle"
    assert graders("export", "student", target).returncode == 0
    return target


def generated(bundle: Path, folder: Path, *options: str, generator: Path = GENERATOR
              ) -> Path:
    folder.mkdir()
    subprocess.run([sys.executable, str(generator), str(bundle), str(folder / "serving.py"),
                    *options], check=True, timeout=120)
    return folder


def grade(submission: Path, results: Path, *options: str | Path
          ) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    run = graders("grade", submission, "--results", results, "-q", *options)
    assert run.returncode == 0, run.stdout + run.stderr
    document: dict[str, Any] = load(results)
    return document, run


def case_tests(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [test for test in document["tests"] if "the reference" in test["name"]
            or "converts quantities" in test["name"]]


def test_a_lookup_table_of_the_golden_file_scores_no_more_than_constants(
        bundle: Path, tmp_path: Path) -> None:
    table = generated(bundle, tmp_path / "table")
    local, run = grade(table, tmp_path / "local.json", "--golden",
                       bundle / "graders" / "golden.json")
    # the table is exact: locally, every visible case test passes
    assert all(test["score"] == test["max_score"] for test in case_tests(local))
    assert run.stdout.count(PREVIEW_LINE) == 1
    official, run = grade(table, tmp_path / "official.json")
    constants, _ = grade(FAKES / "constant_numbers", tmp_path / "constants.json")
    assert official["score"] <= constants["score"]
    assert PREVIEW_LINE not in run.stdout
    notes = [line for test in official["tests"] for line in test["output"].splitlines()
             if "unseen inputs" in line]
    assert notes
    assert all("expected" not in line for line in notes)


def test_one_right_case_per_function_earns_at_most_its_share_and_no_invariant(
        bundle: Path, tmp_path: Path) -> None:
    one = generated(bundle, tmp_path / "one", "--one")
    official, _ = grade(one, tmp_path / "official.json")
    for test in official["tests"]:
        if test["name"] in {t["name"] for t in case_tests(official)}:
            counts = re.search(r"(\d+) of (\d+) cases failed", test["output"])
            assert counts is not None, test["output"]
            failed, total = map(int, counts.groups())
            assert test["score"] <= test["max_score"] * (total - failed) / total + 1e-6
        else:
            assert test["score"] == 0, test["name"]


def test_the_same_file_meets_the_same_inputs_and_a_changed_file_or_secret_new_ones(
        tmp_path: Path) -> None:
    secret, other = tmp_path / "secret", tmp_path / "other"
    secret.write_text("course secret\n", encoding="utf-8")
    other.write_text("another term's secret\n", encoding="utf-8")
    changed = tmp_path / "changed"
    changed.mkdir()
    source = (CORPUS / "correct" / "serving.py").read_text(encoding="utf-8")
    (changed / "serving.py").write_text(source + "\n# one more line\n", encoding="utf-8")
    runs = {name: grade(path, tmp_path / f"{name}.json", "--secret-file", key)[0]
            for name, path, key in [("first", CORPUS / "correct", secret),
                                    ("again", CORPUS / "correct", secret),
                                    ("changed", changed, secret),
                                    ("rotated", CORPUS / "correct", other)]}
    digests = {name: document["extra_data"]["unseen_inputs_sha256"]
               for name, document in runs.items()}
    assert all(document["score"] == 100.0 for document in runs.values())
    for document in runs.values():
        document.pop("execution_time")
    assert runs["first"] == runs["again"]
    assert len({digests["first"], digests["changed"], digests["rotated"]}) == 3


def test_an_unreadable_secret_file_is_a_usage_error(tmp_path: Path) -> None:
    run = graders("grade", CORPUS / "correct", "--results", tmp_path / "r.json",
                  "--secret-file", tmp_path / "missing")
    assert run.returncode == 2
    assert "--secret-file" in run.stderr
    assert "Traceback" not in run.stdout + run.stderr


def test_an_output_naming_the_course_secret_is_refused_and_leaves_it(tmp_path: Path) -> None:
    secret = tmp_path / "course.zip.secret"
    secret.write_text("course secret\n", encoding="utf-8")
    run = graders("grade", CORPUS / "correct", "--results", secret, "--secret-file", secret)
    assert run.returncode == 2
    assert "is the course secret" in run.stderr
    assert secret.read_text(encoding="utf-8") == "course secret\n"


@pytest.fixture(scope="module")
def course_secret(tmp_path_factory: pytest.TempPathFactory) -> Path:
    secret = tmp_path_factory.mktemp("secret") / "course.secret"
    secret.write_text("the course secret of issue 33\n", encoding="utf-8")
    return secret


def rehashed(submission: Path, folder: Path, index: int) -> Path:
    """``submission`` with a comment line of its own: another file hash, other twins."""
    folder.mkdir()
    source = (submission / "serving.py").read_text(encoding="utf-8")
    (folder / "serving.py").write_text(f"{source}\n# hash {index}\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize("multiply", [False, True], ids=["copy", "copy_and_multiply"])
def test_a_twin_aware_copy_scores_no_more_than_constants(
        bundle: Path, course_secret: Path, tmp_path: Path, multiply: bool) -> None:
    """A copy that answers any twin with the golden answer of the visible case it could
    have been moved from passes no twin that counts: every twin moves the answer. One
    multiplication (a single-number golden answer times the moved inputs' ratios) earns
    at most the points of the functions whose answers are such products."""
    copy = generated(bundle, tmp_path / "copy", *(["--multiply"] if multiply else []),
                     generator=TWIN_COPY)
    local, _ = grade(copy, tmp_path / "local.json", "--golden",
                     bundle / "graders" / "golden.json")
    # the copy is exact on the visible cases: locally, every visible case test passes
    assert all(test["score"] == test["max_score"] for test in case_tests(local))
    constants, _ = grade(FAKES / "constant_numbers", tmp_path / "constants.json",
                         "--secret-file", course_secret)
    for index in range(COPY_HASHES):
        official, _ = grade(rehashed(copy, tmp_path / f"hash{index}", index),
                            tmp_path / f"official{index}.json", "--secret-file", course_secret)
        if not multiply:
            assert official["score"] <= constants["score"]
            continue
        products = sum(test["max_score"] for test in official["tests"]
                       if PRODUCTS & set(test["tags"]))
        assert official["score"] <= products + 1e-6
        assert all(test["score"] == 0 for test in official["tests"]
                   if not PRODUCTS & set(test["tags"])), official["score"]
