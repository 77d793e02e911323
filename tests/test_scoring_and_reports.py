"""Points and partial credit (scoring.py) and the score reports built from them (reports.py)."""

from __future__ import annotations

import json
import math
import os
import stat
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from graders.grading.scoring import (
    SCORE_DECIMALS,
    VISIBILITIES,
    GraderMark,
    TestScore,
    rounded,
    scaled_maxima,
    total,
)
from graders.results.reports import (
    SCHEMA_VERSION,
    gradescope_results,
    partial_run,
    score_table,
    write_json_atomically,
)

WHERE = "graders/suite/test_cases.py::test_serve"


def mark(*args: object, **kwargs: object) -> GraderMark:
    return GraderMark.from_marker(args, kwargs, WHERE)


def score(name: str = "serve matches", *, function: str = "serve", track: str | None = None,
          max_score: Fraction = Fraction(10), earned: Fraction = Fraction(0),
          status: Any = "not run", visibility: Any = "visible") -> TestScore:
    return TestScore(nodeid=f"suite::{name}", name=name, function=function, track=track,
                     visibility=visibility, max_score=max_score, earned=earned, status=status)


# --- GraderMark.from_marker ----------------------------------------------------------------


def test_a_valid_marker_gives_float_points_and_visible_by_default() -> None:
    assert mark(points=3, function="serve") == GraderMark(3.0, "serve", "visible")
    assert type(mark(points=3, function="serve").points) is float


@pytest.mark.parametrize("visibility", VISIBILITIES)
def test_every_gradescope_visibility_is_accepted(visibility: str) -> None:
    assert mark(points=1.5, function="erlang_c", visibility=visibility).visibility == visibility


def test_zero_points_are_allowed() -> None:
    assert mark(points=0, function="serve").points == 0.0


def test_positional_marker_arguments_are_refused_and_shown() -> None:
    with pytest.raises(ValueError, match=rf"^{WHERE}: grader marker takes keywords only, "
                                         r"got \(3, 'serve'\)$"):
        mark(3, "serve")


@pytest.mark.parametrize("points", [-1, -0.5, -1e-9])
def test_negative_points_are_refused_with_their_value(points: float) -> None:
    with pytest.raises(ValueError, match=rf"^{WHERE}: grader points must be a finite number >= 0, "
                                         rf"got {points!r}$"):
        mark(points=points, function="serve")


@pytest.mark.parametrize("points", [True, False])
def test_bool_points_are_refused(points: bool) -> None:
    message = f"grader points must be a finite number >= 0, got {points}"
    with pytest.raises(ValueError, match=message):
        mark(points=points, function="serve")


@pytest.mark.parametrize("points", [None, "3", [3], {"points": 3}])
def test_points_that_are_not_a_plain_number_are_refused(points: object) -> None:
    with pytest.raises(ValueError, match="grader points must be a finite number >= 0"):
        mark(points=points, function="serve")


def test_missing_points_are_refused() -> None:
    with pytest.raises(ValueError, match="grader points must be a finite number >= 0, got None"):
        mark(function="serve")


@pytest.mark.parametrize("points", [math.nan, math.inf])
def test_points_that_are_not_finite_are_refused(points: float) -> None:
    # NaN is not >= 0, and neither can be scaled: Fraction(nan) and Fraction(inf) raise.
    with pytest.raises(ValueError, match="grader points must be"):
        mark(points=points, function="serve")


def test_unknown_marker_keywords_are_refused_and_listed_sorted() -> None:
    with pytest.raises(ValueError, match=rf"^{WHERE}: unknown grader marker keyword\(s\) "
                                         r"\['track', 'weight'\]$"):
        mark(points=1, function="serve", weight=2, track="iphone")


@pytest.mark.parametrize("function", [None, "", 3])
def test_a_marker_must_name_a_function(function: object) -> None:
    with pytest.raises(ValueError, match=f"^{WHERE}: grader function must name a contract"):
        mark(points=1, function=function)


@pytest.mark.parametrize("visibility", ["Visible", "private", "", None])
def test_an_unknown_visibility_is_refused_with_the_allowed_ones(visibility: object) -> None:
    message = (f"grader visibility must be one of visible, hidden, after_due_date, "
               f"after_published, got {visibility!r}")
    with pytest.raises(ValueError, match=f"^{WHERE}: {message}$"):
        mark(points=1, function="serve", visibility=visibility)


# --- scaled_maxima, rounded, total ---------------------------------------------------------


def test_equal_weights_split_the_total_exactly_in_thirds() -> None:
    maxima = scaled_maxima({"a": 1.0, "b": 1.0, "c": 1.0}, 100.0)
    assert maxima == {"a": Fraction(100, 3), "b": Fraction(100, 3), "c": Fraction(100, 3)}
    assert sum(maxima.values()) == 100


@pytest.mark.parametrize(
    ("weights", "total_points"),
    [({"a": 0.1, "b": 0.2, "c": 0.7}, 100.0), ({"a": 3.0, "b": 1.5, "c": 1.0 / 3, "d": 7.0}, 37.5),
     ({f"t{i}": 1.0 / (i + 1) for i in range(48)}, 100.0), ({"only": 4.0}, 12.0)],
)
def test_scaled_maxima_sum_exactly_to_the_total(weights: dict[str, float],
                                                total_points: float) -> None:
    maxima = scaled_maxima(weights, total_points)
    assert set(maxima) == set(weights)
    assert sum(maxima.values(), Fraction(0)) == Fraction(total_points)


def test_scaled_maxima_keep_the_proportions_of_the_weights() -> None:
    maxima = scaled_maxima({"serve": 8.0, "erlang_c": 4.0}, 60.0)
    assert maxima == {"serve": Fraction(40), "erlang_c": Fraction(20)}


def test_all_zero_weights_give_zero_maxima_not_a_division_error() -> None:
    assert scaled_maxima({"a": 0.0, "b": 0.0}, 100.0) == {"a": 0, "b": 0}
    assert scaled_maxima({}, 100.0) == {}


def test_a_score_is_written_with_score_decimals_places() -> None:
    places = SCORE_DECIMALS
    assert places >= 2
    assert rounded(Fraction(1, 3)) == float("0." + "3" * places)
    assert rounded(Fraction(2, 3)) == float("0." + "6" * (places - 1) + "7")
    assert rounded(Fraction(100, 3)) == float("33." + "3" * places)
    assert rounded(Fraction(0)) == 0.0
    assert type(rounded(Fraction(7))) is float


def test_total_sums_earned_and_maximum_points_exactly() -> None:
    third = Fraction(100, 3)
    scores = [score(f"t{i}", max_score=third, earned=third if i else Fraction(0))
              for i in range(3)]
    assert total(scores) == (Fraction(200, 3), Fraction(100))
    assert total([]) == (0, 0)


# --- TestScore ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fraction", "earned"),
    [(Fraction(1, 2), Fraction(5)), (Fraction(1), Fraction(10)), (Fraction(0), Fraction(0)),
     (Fraction(3, 2), Fraction(10)), (Fraction(-1, 4), Fraction(0)), (Fraction(7), Fraction(10))],
)
def test_with_outcome_scales_the_maximum_by_the_fraction_clamped_to_0_and_1(
        fraction: Fraction, earned: Fraction) -> None:
    after = score().with_outcome("failed", fraction, "2 of 4 cases failed", 2, 4)
    assert after.earned == earned
    assert (after.status, after.output, after.passed_cases, after.total_cases) == (
        "failed", "2 of 4 cases failed", 2, 4)
    assert after.max_score == Fraction(10)


def test_with_outcome_returns_a_new_score_and_leaves_the_original() -> None:
    before = score()
    after = before.with_outcome("passed", Fraction(1), "All cases passed.")
    assert before.earned == 0
    assert before.status == "not run"
    assert after.earned == 10


def test_the_tags_name_the_function_and_the_track_when_there_is_one() -> None:
    assert score(function="cache_capacity", track="iphone").tags == ["cache_capacity", "iphone"]
    assert score(function="serve").tags == ["serve"]


# --- gradescope_results -------------------------------------------------------------------

#: 100/3 and 100/9 as written out, spelled from the decimals rather than by rounded().
THIRD = float("33." + "3" * SCORE_DECIMALS)
NINTH = float("11." + "1" * SCORE_DECIMALS)
TEST_KEYS = {"name", "name_format", "number", "score", "max_score", "status", "output",
             "output_format", "tags", "visibility", "extra_data"}


def graded() -> list[TestScore]:
    third = Fraction(100, 3)
    return [
        score("serve matches", max_score=third).with_outcome(
            "passed", Fraction(1), "All cases passed.", 36, 36),
        score("cache on iphone", function="cache_capacity", track="iphone", max_score=third,
              visibility="hidden").with_outcome("failed", Fraction(1, 3), "2 of 3 failed", 1, 3),
        score("erlang_c", function="erlang_c", max_score=third).with_outcome(
            "error", Fraction(0), "error"),
    ]


def test_a_results_document_has_the_gradescope_top_level_fields() -> None:
    document = gradescope_results(graded(), execution_time_s=4.12345, output="Score: 44/100")
    assert set(document) == {"score", "execution_time", "output", "output_format",
                             "test_output_format", "test_name_format", "stdout_visibility",
                             "extra_data", "tests"}
    assert document["output_format"] == document["test_output_format"] == "text"
    assert document["score"] == rounded(Fraction(400, 9)) == float("44." + "4" * SCORE_DECIMALS)
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
        "name": "serve matches", "name_format": "text", "number": "1", "score": THIRD,
        "max_score": THIRD, "status": "passed", "output": "All cases passed.",
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
        "track        score       max  tests",
        "iphone       16.67     33.33  1",
        "robotaxi      0.00     33.33  1",
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


def test_a_table_of_a_partial_run_gives_no_total_and_says_what_ran() -> None:
    scores = [score("a", max_score=Fraction(8), earned=Fraction(4), status="failed"),
              score("b", max_score=Fraction(12), earned=Fraction(12), status="passed"),
              score("c", max_score=Fraction(80))]
    lines = score_table(scores)
    assert not any(line.startswith("TOTAL") for line in lines)
    assert lines[-1] == ("partial run: 2 of 3 graded tests, 16.00 of their 20.00 points; "
                         "run `pytest` with no selection for your score")
    assert partial_run(scores[:2]) is None
