"""The class histogram's bins fit the class (issue 34): finer where most scores are, one
bin for each empty range, every score counted once, whatever the maximum."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from graders.regrade.report import CROWDED_MIN, CROWDED_SHARE, FINEST, class_bins


def test_a_good_class_gets_fine_bins_near_the_top() -> None:
    scores = [100.0] * 12 + [98.0] * 9 + [96.0] * 8 + [93.0] * 8 + [75.0] * 4 + [40.0, 5.0]
    edges, counts = class_bins(scores, 100.0)
    # 37 of 43 in 90-100: halved while more than a third of the class, down to 1.25 points
    assert edges == [0.0, 10.0, 40.0, 50.0, 70.0, 80.0, 90.0, 95.0, 97.5, 98.75, 100.0]
    assert counts == [1, 0, 1, 0, 4, 0, 8, 8, 9, 12]
    assert sum(counts) == len(scores)


def test_few_scores_keep_ten_point_bins_with_empty_runs_merged() -> None:
    assert class_bins([10.0, 35.0, 55.0, 85.0], 100.0) == (
        [0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 80.0, 90.0, 100.0],
        [0, 1, 0, 1, 0, 1, 0, 1, 0])


@given(st.lists(st.floats(0, 1), max_size=80), st.floats(1, 1000))
def test_the_bins_cover_the_scores_and_refine_only_crowded_ranges(
        shares: list[float], maximum: float) -> None:
    scores = [share * maximum for share in shares]
    edges, counts = class_bins(scores, maximum)
    assert edges[0] == 0.0
    assert edges[-1] == round(maximum, 6)
    assert all(low < high for low, high in zip(edges, edges[1:], strict=False))
    assert len(counts) == len(edges) - 1
    assert sum(counts) == len(scores)
    crowded = max(CROWDED_MIN, len(scores) * CROWDED_SHARE)
    for low, high, count in zip(edges, edges[1:], counts, strict=False):
        assert count <= crowded or high - low <= maximum / FINEST * 1.5 + 1e-6
    assert all(left or right for left, right in zip(counts, counts[1:], strict=False))
