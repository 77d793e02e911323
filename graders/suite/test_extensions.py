"""Graded extensions, off by default: collected only when a course gives them points.

exact_p99_ms(*, arrival_qps, service_ms, replicas=1) is the exact p99 latency of an M/M/c
queue (reference/tails.py): not the lab formula's waiting-time quantile added to the mean
service time, but the quantile of the service time plus the wait. Its points are the
``--grader-exact-p99-points`` (ini ``grader_exact_p99_points``) setting, weighted like a
test marker's; the marker's own points are replaced by it.

PYTEST_DONT_REWRITE: as the rest of the suite.
"""

from __future__ import annotations

import pytest

from graders.grading import cases
from graders.grading.checks import Grading
from graders.trackfiles.tracks import Track


@pytest.mark.grader(points=0, function="exact_p99_ms")
def test_exact_p99_ms(grading: Grading, track: Track) -> None:
    """exact_p99_ms matches the exact M/M/c p99 from light load to near saturation"""
    grading.check(cases.exact_p99_cases(track))
