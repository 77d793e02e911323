"""The student's functions against the reference, case by case, on every track.

Partial credit: a test earns the fraction of its cases that pass.

PYTEST_DONT_REWRITE: the suite asserts with messages of its own, and reads the same under
``graders grade`` (which runs pytest with ``--assert=plain``) and a student's ``pytest``.
"""

from __future__ import annotations

import pytest

from graders.grading import cases
from graders.grading.checks import Grading
from graders.trackfiles.tracks import Track

grader = pytest.mark.grader


@grader(points=8, function="serve")
def test_serve(grading: Grading) -> None:
    """serve matches the reference on the lab workload and other sizes"""
    grading.check(cases.serve_cases())


@grader(points=8, function="erlang_c")
def test_erlang_c(grading: Grading) -> None:
    """erlang_c matches the reference on small fleets, overload and edge cases"""
    grading.check(cases.erlang_c_cases())


@grader(points=12, function="queueing_latency")
def test_queueing_latency(grading: Grading, track: Track) -> None:
    """queueing_latency matches the reference from light load to past saturation"""
    grading.check(cases.queueing_cases(track))


@grader(points=10, function="batching_tax")
def test_batching_tax(grading: Grading, track: Track) -> None:
    """batching_tax matches the reference for batch sizes 1 to 64"""
    grading.check(cases.batching_cases(track))


@grader(points=4, function="transformer_state_gb")
def test_transformer_state_gb(grading: Grading, track: Track) -> None:
    """transformer_state_gb matches the reference at 256 to 131,072 tokens"""
    grading.check(cases.transformer_state_cases(track))


@grader(points=8, function="cache_capacity")
def test_cache_capacity(grading: Grading, track: Track) -> None:
    """cache_capacity matches the reference across context lengths, precisions and devices"""
    grading.check(cases.cache_cases(track))


@grader(points=8, function="cold_start_latency")
def test_cold_start_latency(grading: Grading, track: Track) -> None:
    """cold_start_latency matches the reference with warm pools and bandwidth overrides"""
    grading.check(cases.cold_start_cases(track))


@grader(points=4, function="quantity_to_float")
def test_quantity_to_float(grading: Grading) -> None:
    """quantity_to_float converts quantities in several units and falls back to the default"""
    grading.check(cases.quantity_cases())


@grader(points=8, function="serving_track_profile")
def test_serving_track_profile(grading: Grading, track: Track) -> None:
    """serving_track_profile matches the reference, whatever units the facts come in"""
    grading.check(cases.profile_cases(track))
