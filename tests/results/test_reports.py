"""The score reports built from the points (graders.results.reports): Gradescope's
results document, written atomically, and the terminal's score table."""

from __future__ import annotations

import json
import math
import os
import stat
from fractions import Fraction
from pathlib import Path

import pytest
from helpers import sample_score as score
from hypothesis import given, settings
from hypothesis import strategies as st

from graders.grading.scoring import SCORE_DECIMALS, TestScore, scaled_maxima
from graders.results.reports import (
    SCHEMA_VERSION,
    gradescope_results,
    partial_run,
    points_text,
    score_table,
    write_json_atomically,
)

# --- gradescope_results -------------------------------------------------------------------

#: 100 shared by three equal tests, as written out (spelled from the decimals rather than
#: by rounded()): the largest remainder gives the unit left over to the first test, so the
#: maxima add up to 100 exactly; a third of the second test's maximum, on the grid.
FIRST_THIRD = float("33." + "3" * (SCORE_DECIMALS - 1) + "4")
THIRD = float("33." + "3" * SCORE_DECIMALS)
NINTH = float("11." + "1" * SCORE_DECIMALS)
TEST_KEYS = {"name", "name_format", "number", "score", "max_score", "status", "output",
             "output_format", "tags", "visibility", "extra_data"}


def graded() -> list[TestScore]:
    maxima = scaled_maxima({"a": 1, "b": 1, "c": 1}, 100)
    return [
        score("serve matches", max_score=maxima["a"]).with_outcome(
            "passed", Fraction(1), "All cases passed.", 36, 36),
        score("cache on iphone", function="cache_capacity", track="iphone",
              max_score=maxima["b"], visibility="hidden").with_outcome(
            "failed", Fraction(1, 3), "2 of 3 failed", 1, 3),
        score("erlang_c", function="erlang_c", max_score=maxima["c"]).with_outcome(
            "error", Fraction(0), "error"),
    ]


def test_a_results_document_has_the_gradescope_top_level_fields() -> None:
    document = gradescope_results(graded(), execution_time_s=4.12345, output="Score: 44/100")
    assert set(document) == {"score", "execution_time", "output", "output_format",
                             "test_output_format", "test_name_format", "stdout_visibility",
                             "extra_data", "tests"}
    assert document["output_format"] == document["test_output_format"] == "text"
    assert document["score"] == float("44." + "4" * (SCORE_DECIMALS - 1) + "5")
    assert document["execution_time"] == 4.123
    assert document["output"] == "Score: 44/100"
    assert document["stdout_visibility"] == "hidden"
    assert document["extra_data"] == {"schema_version": SCHEMA_VERSION, "max_score": 100.0}
    assert SCHEMA_VERSION == 1


def test_each_test_entry_has_the_gradescope_fields() -> None:
    tests = gradescope_results(graded(), execution_time_s=1.0, output="")["tests"]
    assert [set(test) for test in tests] == [TEST_KEYS] * 3
    first, second, third = tests
    assert first == {
        "name": "serve matches", "name_format": "text", "number": "1", "score": FIRST_THIRD,
        "max_score": FIRST_THIRD, "status": "passed", "output": "All cases passed.",
        "output_format": "text", "tags": ["serve"],
        "visibility": "visible",
        "extra_data": {"nodeid": "suite::serve matches", "outcome": "passed",
                       "passed_cases": 36, "total_cases": 36},
    }
    assert (second["number"], second["score"], second["status"]) == ("2", NINTH, "failed")
    assert second["tags"] == ["cache_capacity", "iphone"]
    assert second["visibility"] == "hidden"
    assert second["extra_data"]["outcome"] == "failed"
    assert (third["number"], third["score"], third["status"]) == ("3", 0.0, "failed")
    assert third["extra_data"]["outcome"] == "error"


@pytest.mark.parametrize("status", ["failed", "error", "skipped", "not run"])
def test_every_status_but_passed_is_failed_for_gradescope(status: str) -> None:
    [test] = gradescope_results([score(status=status)], execution_time_s=0, output="")["tests"]
    assert test["status"] == "failed"
    assert test["extra_data"]["outcome"] == status


@pytest.mark.parametrize(("earned", "written"), [(Fraction(15), 10.0), (Fraction(-3), 0.0),
                                                 (Fraction(10), 10.0)])
def test_the_total_score_is_clamped_to_between_zero_and_the_maximum(earned: Fraction,
                                                                    written: float) -> None:
    document = gradescope_results([score(earned=earned)], execution_time_s=0, output="")
    assert document["score"] == written


def test_extra_data_is_merged_beside_the_schema_version() -> None:
    document = gradescope_results([], execution_time_s=0, output="",
                                  extra={"grader_error": "pytest exit code 3"})
    assert document["extra_data"] == {"schema_version": 1, "max_score": 0.0,
                                      "grader_error": "pytest exit code 3"}
    assert document["score"] == 0.0
    assert document["tests"] == []


def test_a_results_document_is_strict_json() -> None:
    document = gradescope_results(graded(), execution_time_s=2.5, output="x")
    assert json.loads(json.dumps(document, allow_nan=False)) == document


# --- write_json_atomically -----------------------------------------------------------------


def test_a_document_is_written_whole_with_mode_0644_and_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "out" / "results.json"
    document = gradescope_results(graded(), execution_time_s=1.0, output="done")
    old_umask = os.umask(0o077)
    try:
        write_json_atomically(target, document)
    finally:
        os.umask(old_umask)
    assert json.loads(target.read_text(encoding="utf-8")) == document
    assert target.read_text(encoding="utf-8").endswith("}\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert sorted(p.name for p in target.parent.iterdir()) == ["results.json"]


def test_a_document_replaces_an_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "results.json"
    target.write_text("old", encoding="utf-8")
    write_json_atomically(target, {"score": 1.0})
    assert json.loads(target.read_text(encoding="utf-8")) == {"score": 1.0}
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_document_with_nan_or_inf_is_refused_and_no_file_appears(tmp_path: Path,
                                                                   bad: float) -> None:
    target = tmp_path / "results.json"
    with pytest.raises(ValueError, match="not JSON compliant"):
        write_json_atomically(target, {"score": bad})
    assert list(tmp_path.iterdir()) == []


def test_a_refused_document_leaves_the_previous_results_untouched(tmp_path: Path) -> None:
    target = tmp_path / "results.json"
    write_json_atomically(target, {"score": 50.0})
    before = target.read_bytes()
    with pytest.raises(ValueError, match="not JSON compliant"):
        write_json_atomically(target, {"score": 75.0, "tests": [{"score": math.nan}]})
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_a_document_with_an_object_json_cannot_encode_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "results.json"
    with pytest.raises(TypeError, match="not JSON serializable"):
        write_json_atomically(target, {"score": Fraction(1, 3)})
    assert list(tmp_path.iterdir()) == []


def test_a_failed_replace_removes_the_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "results.json"
    target.mkdir()
    (target / "keep").write_text("x", encoding="utf-8")
    with pytest.raises(IsADirectoryError):
        write_json_atomically(target, {"score": 1.0})
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]
    assert [p.name for p in target.iterdir()] == ["keep"]


# --- score_table --------------------------------------------------------------------------


def table_scores() -> list[TestScore]:
    return [
        score("serve a", max_score=Fraction(8), earned=Fraction(8), status="passed"),
        score("serve b", max_score=Fraction(4), earned=Fraction(1), status="failed"),
        score("cache iphone", function="cache_capacity", track="iphone",
              max_score=Fraction(100, 3), earned=Fraction(100, 6), status="failed"),
        score("cache robotaxi", function="cache_capacity", track="robotaxi",
              max_score=Fraction(100, 3), earned=Fraction(0), status="failed"),
    ]


def test_the_table_has_a_row_per_function_then_per_track_then_the_total() -> None:
    lines = score_table(table_scores())
    assert lines == [
        "function           score       max  tests",
        "serve               9.00     12.00  2",
        "cache_capacity     16.67     66.67  2",
        "",
        "track (per-track tests only)     score       max  tests",
        "iphone                           16.67     33.33  1",
        "robotaxi                          0.00     33.33  1",
        "",
        "TOTAL 25.67 / 78.67",
    ]


def test_a_table_without_tracks_has_no_track_section() -> None:
    lines = score_table([score(max_score=Fraction(12), earned=Fraction(6), status="failed")])
    assert not any(line.startswith("track") for line in lines)
    assert lines[-1] == "TOTAL 6.00 / 12.00"
    assert any(line.startswith("serve") and "6.00" in line and "12.00" in line
               for line in lines)


def test_an_empty_table_still_has_a_total_line() -> None:
    assert score_table([]) == ["TOTAL 0.00 / 0.00"]


def _never_misread(value: Fraction, text: str) -> bool:
    """Whether ``text`` shows ``value`` so that it cannot be misread: exactly, or rounded
    in its last digit alone (every digit before it is the value's own, so that 99.999999
    never shows as 100.00) and not as zero when the value is not."""
    shown = Fraction(text)
    if shown == value:
        return True
    places = len(text.split(".")[1])
    unit = Fraction(1, 10**(places - 1))
    return shown != 0 and abs(shown - value) <= Fraction(1, 2 * 10**places) \
        and math.floor(shown / unit) == math.floor(value / unit)


@pytest.mark.parametrize(("maximum", "total"), [
    ("0.000003", "TOTAL 0.000003 / 0.000003"),
    ("99.999999", "TOTAL 99.999999 / 99.999999"),
    ("100", "TOTAL 100.00 / 100.00"),
    ("0.25", "TOTAL 0.25 / 0.25"),
    ("1000000", "TOTAL 1000000.00 / 1000000.00"),
])
def test_a_full_score_total_shows_the_maximum_as_it_is(maximum: str, total: str) -> None:
    full = Fraction(maximum)
    lines = score_table([score(max_score=full, earned=full, status="passed")])
    assert lines[-1] == total


def test_a_total_rounded_in_its_last_digit_keeps_two_decimals() -> None:
    lines = score_table([score(max_score=Fraction(100), earned=Fraction(91_666_667, 10**6),
                               status="failed")])
    assert lines[-1] == "TOTAL 91.67 / 100.00"


GRID = 10**SCORE_DECIMALS


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(maximum_units=st.integers(1, 10**6 * GRID), share=st.fractions(0, 1))
def test_no_total_from_1e_6_to_1e6_points_is_ever_misread(maximum_units: int,
                                                          share: Fraction) -> None:
    maximum = Fraction(maximum_units, GRID)
    for earned in (maximum, math.floor(maximum * share * GRID) / Fraction(GRID)):
        earned_text, maximum_text = points_text(earned, maximum)
        assert _never_misread(earned, earned_text), (earned, earned_text)
        assert _never_misread(maximum, maximum_text), (maximum, maximum_text)
        assert len(maximum_text.split(".")[1]) >= 2
        assert (earned_text == maximum_text) == (earned == maximum)
        lines = score_table([score(max_score=maximum, earned=earned,
                                   status="passed" if earned == maximum else "failed")])
        assert lines[-1] == f"TOTAL {earned_text} / {maximum_text}"


def test_a_table_of_a_partial_run_gives_no_total_and_says_what_ran() -> None:
    scores = [score("a", max_score=Fraction(8), earned=Fraction(4), status="failed"),
              score("b", max_score=Fraction(12), earned=Fraction(12), status="passed"),
              score("c", max_score=Fraction(80))]
    lines = score_table(scores)
    assert not any(line.startswith("TOTAL") for line in lines)
    assert lines[-1] == ("partial run: 2 of 3 graded tests, 16.00 of their 20.00 points; "
                         "run `pytest` with no selection for your score")
    assert partial_run(scores[:2]) is None


def test_a_submission_not_graded_is_told_once_what_to_submit_and_no_server_path() -> None:
    from graders.plugin.submission import SUBMIT_ONE
    from graders.results.reports import unusable_submission_results

    reason = ("serving.py not found in submission folder '/autograder/submission' or its "
              f"subfolders (found 'main.py'); {SUBMIT_ONE}")
    document = unusable_submission_results(reason)
    output = document["output"]
    assert output == ("Your submission was not graded: serving.py not found in submission "
                      f"folder or its subfolders (found 'main.py'); {SUBMIT_ONE}.")
    assert output.lower().count("submit") == 1
    assert "/autograder" not in output
    assert "/autograder" not in json.dumps(document)
    too_big = unusable_submission_results("submission '/tmp/x/big.py' is 1000001 bytes; "
                                          "the limit is 1000000 bytes")["output"]
    assert too_big == ("Your submission was not graded: submission is 1000001 bytes; the "
                       "limit is 1000000 bytes. Submit serving.py (the file itself, or a "
                       "folder holding exactly one) and grading will run.")
    # a name relative to the class folder (a regrade's) is the student's own: kept
    assert "'two'" in unusable_submission_results(
        "2 serving.py files in submission folder 'two' (a/serving.py, b/serving.py); "
        "keep one")["output"]
