"""The lab notebook's predict-then-check (graders.feedback.predictions), and its note on
why batching_tax at B = 1 is not section 1's queue (graders.feedback.explore)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from graders.feedback import curves, explore, predictions
from graders.feedback.measure import MeasuredSweep
from graders.reality.curves import BATCHES
from graders.trackfiles.tracks import Track, default_tracks_dir, load_tracks


@pytest.fixture(scope="module")
def tracks() -> dict[str, Track]:
    return {track.track_id: track for track in load_tracks(default_tracks_dir())}


def measured(sweep: curves.Sweep, field: str, student: dict[int, float],
             reference: dict[int, float] | None = None) -> MeasuredSweep:
    """``sweep`` with ``field`` at the given x positions (by index into its xs)."""

    def rows(values: dict[int, float] | None) -> tuple[Any, ...]:
        if values is None:
            return (None,) * len(sweep.xs)
        return tuple({field: values[i]} if i in values else None for i in range(len(sweep.xs)))

    return MeasuredSweep(sweep, rows(reference), rows(student))


def load_rows(low: float, high: float) -> dict[int, float]:
    return {curves.LOADS.index(0.5): low, curves.LOADS.index(0.9): high}


def test_the_tail_verdict_names_the_prediction_and_the_factor(tracks: dict[str, Track]) -> None:
    sweep = curves.load_sweep(tracks["cloud_fleet"])
    lab = measured(sweep, "p99_latency_ms", load_rows(10.0, 44.0), load_rows(10.0, 44.0))
    said = predictions.verdict("grows more than 5 times", lab, predictions.tail, "p99 {}",
                               "Your queueing_latency")
    assert said.startswith("You predicted that p99 grows more than 5 times: **not so**.")
    assert "4.4 times, so p99 **grows 2 to 5 times**" in said
    assert said.endswith("Your queueing_latency: the same.")
    right = predictions.verdict("grows 2 to 5 times", lab, predictions.tail, "p99 {}", "Yours")
    assert "**right**" in right


def test_a_tail_that_more_than_doubles_five_times_is_judged_so(
        tracks: dict[str, Track]) -> None:
    sweep = curves.load_sweep(tracks["cloud_fleet"])
    for low, high, answer in [(10.0, 19.0, "less than doubles"), (10.0, 50.0, "grows 2 to 5 times"),
                              (10.0, 51.0, "grows more than 5 times")]:
        check = predictions.tail(measured(sweep, "p99_latency_ms", load_rows(low, high)), False)
        assert check.answer == answer, (low, high)


def test_without_reference_points_the_students_curve_judges_and_says_so(
        tracks: dict[str, Track]) -> None:
    sweep = curves.load_sweep(tracks["cloud_fleet"])
    alone = measured(sweep, "p99_latency_ms", load_rows(10.0, 15.0))
    said = predictions.verdict("grows 2 to 5 times", alone, predictions.tail, "p99 {}",
                               "Your queueing_latency")
    assert "**not so**" in said
    assert "Your queueing_latency: p99 goes from 10 ms at 50 % load to 15 ms" in said
    assert "lab's model" not in said
    nothing = measured(sweep, "p99_latency_ms", {})
    assert "nothing to check it against yet" in predictions.verdict(
        "grows 2 to 5 times", nothing, predictions.tail, "p99 {}", "Yours")


def test_without_a_prediction_asked_the_check_is_shown_alone(tracks: dict[str, Track]) -> None:
    sweep = curves.load_sweep(tracks["cloud_fleet"])
    lab = measured(sweep, "p99_latency_ms", load_rows(10.0, 30.0), load_rows(10.0, 44.0))
    said = predictions.verdict(None, lab, predictions.tail, "p99 {}", "Your queueing_latency")
    assert "predicted" not in said
    assert "The lab's model: p99 goes from 10 ms at 50 % load to 44 ms at 90 %" in said
    assert "Your queueing_latency: p99 goes from 10 ms at 50 % load to 30 ms at 90 %" in said


def test_batching_compares_b_32_with_b_1_an_unstable_queue_included(
        tracks: dict[str, Track]) -> None:
    sweep = curves.batch_sweep(tracks["cloud_fleet"])
    one, many = BATCHES.index(1), BATCHES.index(32)
    for at_one, at_many, answer in [(4.0, 40.0, "higher"), (40.0, 4.0, "lower"),
                                    (10.0, 10.5, "about the same"), (math.inf, 40.0, "lower"),
                                    (4.0, math.inf, "higher"), (math.inf, math.inf, None)]:
        check = predictions.batching(
            measured(sweep, "total_p99_ms", {one: at_one, many: at_many}), False)
        assert check.answer == answer, (at_one, at_many)
    said = predictions.verdict("lower", measured(sweep, "total_p99_ms", {one: 4.0, many: 40.0},
                                                 {one: 4.0, many: 40.0}),
                               predictions.batching, "with batches of 32 the total p99 is {}",
                               "Your batching_tax")
    assert said.startswith("You predicted that with batches of 32 the total p99 is lower: "
                           "**not so**.")
    assert "the total p99 is **higher**" in said


def test_memory_doubles_the_context_from_the_knobs_length(tracks: dict[str, Track]) -> None:
    sweep = curves.context_sweep(tracks["cloud_fleet"])
    at = {n: i for i, n in enumerate(curves.CONTEXTS)}
    for before, after, answer in [(100.0, 50.0, "halves"), (5.0, 2.0, "halves"),
                                  (100.0, 80.0, "falls by less than half"),
                                  (7.0, 7.0, "does not change")]:
        check = predictions.memory(
            measured(sweep, "max_concurrent", {at[4096]: before, at[8192]: after}), False, 5000)
        assert check.answer == answer, (before, after)
        assert "at 4,096 tokens" in check.figures
        assert "at 8,192" in check.figures


def test_the_b_1_note_explains_cloud_fleets_two_queues(tracks: dict[str, Track]) -> None:
    track = tracks["cloud_fleet"]
    note = explore.batch_of_one_note(track, explore.Knobs.of(track))
    assert "efficiency gain g = 6.4" in note
    assert "25 / 6.4 = 3.91 ms" in note
    assert "8 replicas serve up to 2,048 req/s, and 500 req/s is 24% of that" in note
    assert "8 replicas serve up to 320 req/s, and 500 req/s is 156% of that: past " \
           "saturation, so that queue is unstable" in note


def test_on_a_track_without_an_efficiency_gain_b_1_is_section_1s_queue(
        tracks: dict[str, Track]) -> None:
    plain = next(t for t in tracks.values()
                 if t.reference_profile().batch_efficiency_gain == 1)
    note = explore.batch_of_one_note(plain, explore.Knobs.of(plain))
    assert note.startswith("**B = 1 here is section 1's queue.**")
    moved = dataclasses.replace(explore.Knobs.of(tracks["cloud_fleet"]), replicas=16)
    assert "16 replicas serve up to 4,096 req/s" in explore.batch_of_one_note(
        tracks["cloud_fleet"], moved)
