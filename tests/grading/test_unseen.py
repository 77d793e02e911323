"""Unseen inputs (issue 23): the seed, the moved numbers, the twins and the confirmation rule."""

from __future__ import annotations

import random
from fractions import Fraction
from types import SimpleNamespace

import pytest
from helpers import REPO

from graders.grading.cases import Case, serve_cases, visible_cases
from graders.grading.scoring import GraderMark
from graders.grading.unseen import (
    CONFIRMING_SHARE,
    SPREAD,
    UnseenEvidence,
    confirmation,
    confirmation_note,
    inputs_key,
    moved,
    seed,
    unseen_cases,
    unseen_refusal,
)
from graders.trackfiles.tracks import load_tracks
from graders.units import registry


def test_the_seed_is_the_same_for_the_same_file_and_secret_and_differs_otherwise() -> None:
    assert seed(b"secret", b"code") == seed(b"secret", b"code")
    assert seed(b"secret", b"code") != seed(b"secret", b"code ")
    assert seed(b"secret", b"code") != seed(b"other", b"code")
    assert seed(b"", b"code") != seed(b"secret", b"code")


def test_moving_keeps_zero_one_flags_text_and_none() -> None:
    rng = random.Random(1)
    assert moved((0, 1, 0.0, True, False, None, "GB"), rng) == (0, 1, 0.0, True, False, None,
                                                              "GB")


@pytest.mark.parametrize("value", [2, 7, 64, 131072])
def test_a_whole_number_moves_to_another_whole_number_within_the_spread(value: int) -> None:
    rng = random.Random(value)
    for _ in range(50):
        new = moved(value, rng)
        assert type(new) is int
        assert new != value
        assert value / SPREAD - 1 <= new <= value * SPREAD + 1


def test_a_real_number_moves_within_the_spread_and_a_whole_float_stays_whole() -> None:
    rng = random.Random(2)
    for _ in range(50):
        new = moved(123.456, rng)
        assert 123.456 / SPREAD <= new <= 123.456 * SPREAD
        assert new != 123.456
        assert moved(2.0, rng).is_integer()


def test_an_object_moves_only_its_quantities_and_one_without_any_is_the_same_object() -> None:
    q = registry().Quantity
    profile = SimpleNamespace(track_id="iphone", service_ms=30.0, replicas=4)
    assert moved(profile, random.Random(3)) is profile
    hardware = SimpleNamespace(name="H100", memory=SimpleNamespace(capacity=q(80, "GiB")),
                               cores=8)
    copy = moved(hardware, random.Random(3))
    assert copy.name == "H100"
    assert copy.cores == 8
    assert str(copy.memory.capacity.units) == str(hardware.memory.capacity.units)
    assert copy.memory.capacity.magnitude != 80


def test_twins_are_deterministic_and_never_the_inputs_of_a_visible_case() -> None:
    visible = serve_cases()
    first = unseen_cases("seed", visible, 40, visible)
    assert [inputs_key(c) for c in first] == [inputs_key(c) for c in
                                              unseen_cases("seed", visible, 40, visible)]
    assert len(first) == 40
    assert not {inputs_key(c) for c in first} & {inputs_key(c) for c in visible}
    other = unseen_cases("another seed", visible, 40, visible)
    assert [inputs_key(c) for c in other] != [inputs_key(c) for c in first]


def test_twins_are_split_over_the_tracks_of_their_templates() -> None:
    tracks = load_tracks(REPO / "tracks")
    templates = [c for c in visible_cases(tracks) if c.function == "cache_capacity"]
    drawn = unseen_cases("seed", templates, 40, templates)
    counts = {track.track_id: sum(c.track_id == track.track_id for c in drawn)
              for track in tracks}
    assert set(counts.values()) == {40 // len(tracks)}


def test_a_template_with_nothing_to_move_gives_no_twin() -> None:
    template = Case("n=1 B=1", "serve", (1, 1))
    assert unseen_cases("seed", [template], 10, [template]) == []


def evidence(nontrivial: int, passed: int) -> UnseenEvidence:
    unseen = UnseenEvidence()
    for index in range(nontrivial):
        unseen.record(Case(f"unseen {index}", "serve", (index + 2, 3)), trivial=False,
                      passed=index < passed, values_right=int(index < passed))
    return unseen


@pytest.mark.parametrize(("nontrivial", "passed", "share"), [
    (40, 40, Fraction(1)), (40, 10, Fraction(1)), (40, 5, Fraction(1, 2)),
    (40, 0, Fraction(0)), (0, 0, Fraction(1)),
])
def test_visible_points_pay_in_proportion_to_the_twins_passed_below_a_quarter(
        nontrivial: int, passed: int, share: Fraction) -> None:
    assert Fraction(1, 4) == CONFIRMING_SHARE
    assert confirmation(evidence(nontrivial, passed)) == share


def test_a_trivial_twin_counts_for_nothing() -> None:
    unseen = UnseenEvidence()
    unseen.record(Case("unseen 1", "erlang_c", (300.0, 20.0, 4)), trivial=True, passed=True,
                  values_right=0)
    assert (unseen.nontrivial, unseen.nontrivial_passed) == (0, 0)


def test_the_note_shows_arguments_and_never_an_expected_value() -> None:
    note = confirmation_note("serve", evidence(10, 1), Fraction(2, 5))
    assert note.startswith("serve failed 9 of its 10 unseen inputs")
    assert "serve(3, 3)" in note
    assert "40%" in note
    assert "expected" not in note


def test_invariants_pay_only_with_some_unseen_value_right() -> None:
    assert unseen_refusal("serve", evidence(10, 1)) is None
    assert "unseen" in (unseen_refusal("serve", evidence(10, 0)) or "")
    assert unseen_refusal("serve", UnseenEvidence()) is not None


@pytest.mark.parametrize("unseen", [-1, 1.5, True, "5", 1001])
def test_the_marker_refuses_an_unseen_count_that_is_not_a_whole_number_in_range(
        unseen: object) -> None:
    with pytest.raises(ValueError, match="grader unseen"):
        GraderMark.from_marker((), {"points": 1, "function": "serve", "unseen": unseen}, "t")


def test_the_marker_takes_an_unseen_count() -> None:
    mark = GraderMark.from_marker((), {"points": 1, "function": "serve", "unseen": 0}, "t")
    assert mark.unseen == 0


def test_a_case_with_numbers_of_its_own_keeps_its_tracks_objects_and_one_without_moves_them(
) -> None:
    tracks = load_tracks(REPO / "tracks")
    cloud = next(track for track in tracks if track.track_id == "cloud_fleet")
    by_function = {}
    for function in ("transformer_state_gb", "serving_track_profile"):
        templates = [c for c in visible_cases(tracks)
                     if c.track_id == "cloud_fleet" and c.function == function]
        by_function[function] = unseen_cases("seed", templates, 1, templates)[0]
    assert by_function["transformer_state_gb"].args[0] is cloud.model
    hardware = by_function["serving_track_profile"].args[2]
    assert hardware is not cloud.hardware
    assert hardware.memory.capacity != cloud.hardware.memory.capacity
