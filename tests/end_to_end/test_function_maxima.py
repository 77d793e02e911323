"""Each function's maximum is its rubric share on the grid, whatever the number of tracks.

A function's points are split over its per-track tests; rounded test by test, the sum
drifted (``batching_tax 11.999998`` with 7 tracks). The maxima are shared function by
function first, so every output's function table and grades.csv show the share itself.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from helpers import CORPUS, graders, load
from test_configuration_space import track_folder

from graders.export.build import suite_tests
from graders.grading.scoring import SCORE_UNIT


@pytest.mark.parametrize(("tracks", "max_score"), [(7, "100"), (7, "33.333333"),
                                                   (13, "10.6299")])
def test_each_functions_maximum_is_its_share_whatever_the_number_of_tracks(
        tmp_path: Path, tracks: int, max_score: str) -> None:
    folder = track_folder(tmp_path / "tracks", tracks)
    done = graders("grade", CORPUS / "correct", "--tracks", folder, "--max-score", max_score,
                   "--results", tmp_path / "results.json", "-q")
    assert done.returncode == 0, done.stderr
    document = load(tmp_path / "results.json")
    by_function: dict[str, Fraction] = {}
    for test in document["tests"]:
        function = test["tags"][0]
        by_function[function] = by_function.get(function, Fraction(0)) + \
            Fraction(str(test["max_score"]))
    rubric: dict[str, Fraction] = {}
    for test in suite_tests():
        if test.mark.points and test.module != "test_extensions":
            rubric[test.mark.function] = rubric.get(test.mark.function, Fraction(0)) + \
                Fraction(str(test.mark.points))
    whole, total = sum(rubric.values()), Fraction(max_score)
    assert sum(by_function.values()) == total
    for function, points in rubric.items():
        share = total * points / whole
        # one grid unit per group the function's tests span (visible, hidden), no more;
        # the share itself when it is on the grid
        assert abs(by_function[function] - share) <= 2 * SCORE_UNIT, (function, share)
        if share % SCORE_UNIT == 0 and total == 100:
            assert by_function[function] == share, function
