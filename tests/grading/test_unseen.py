"""Unseen inputs (issue 23): the seed, the moved numbers, the twins and the confirmation rule."""

from __future__ import annotations

import collections
import random
from fractions import Fraction
from types import SimpleNamespace

import pytest
from helpers import REPO

from graders.expected.reference import reference_expected
from graders.grading.cases import CONTRACT_FUNCTIONS, Case, serve_cases, visible_cases
from graders.grading.compare import Tolerance
from graders.grading.credit import is_trivial
from graders.grading.scoring import GraderMark
from graders.grading.unseen import (
    CONFIRMING_SHARE,
    SPREAD,
    UnseenEvidence,
    confirmation,
    confirmation_note,
    inputs_key,
    moved,
    moves_answer,
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
    first = unseen_cases("seed", visible, 40, visible).cases
    assert [inputs_key(c) for c in first] == [inputs_key(c) for c in
                                              unseen_cases("seed", visible, 40, visible).cases]
    assert len(first) == 40
    assert not {inputs_key(c) for c in first} & {inputs_key(c) for c in visible}
    other = unseen_cases("another seed", visible, 40, visible).cases
    assert [inputs_key(c) for c in other] != [inputs_key(c) for c in first]


def test_twins_are_split_over_the_tracks_of_their_templates() -> None:
    tracks = load_tracks(REPO / "tracks")
    templates = [c for c in visible_cases(tracks) if c.function == "cache_capacity"]
    drawn = unseen_cases("seed", templates, 40, templates).cases
    counts = {track.track_id: sum(c.track_id == track.track_id for c in drawn)
              for track in tracks}
    assert set(counts.values()) == {40 // len(tracks)}


def test_a_template_with_nothing_to_move_gives_no_twin() -> None:
    template = Case("n=1 B=1", "serve", (1, 1))
    twins = unseen_cases("seed", [template], 10, [template])
    assert twins.cases == []
    assert twins.short


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
        by_function[function] = unseen_cases("seed", templates, 1, templates).cases[0]
    assert by_function["transformer_state_gb"].args[0] is cloud.model
    hardware = by_function["serving_track_profile"].args[2]
    assert hardware is not cloud.hardware
    assert hardware.memory.capacity != cloud.hardware.memory.capacity


# --- issue 33: a twin counts only if it moves the answer -------------------------------------

TOLERANCE = Tolerance()


def reference_moves(template: Case, twin: Case) -> bool:
    return moves_answer([reference_expected(template)], reference_expected(twin),
                        [*twin.args, *twin.kwargs.values()], TOLERANCE)


def test_a_twin_moves_the_answer_only_through_a_value_a_copy_cannot_give() -> None:
    source = {"total_ms": 672.0, "throughput_rps": 380.95, "passes": 8}
    inputs = (300, 40)
    assert moves_answer([source], {**source, "total_ms": 700.0}, inputs, TOLERANCE)
    assert not moves_answer([source], dict(source), inputs, TOLERANCE)
    # within the tolerance is the same answer
    assert not moves_answer([source], {**source, "total_ms": 672.0 * (1 + 1e-8)}, inputs,
                            TOLERANCE)
    # a field that echoes a moved input, a flag or a 0 or 1 moves nothing a copy cannot move
    assert not moves_answer([{"context_tokens": 256, "oom": False, "weight_gb": 7.0}],
                            {"context_tokens": 300, "oom": True, "weight_gb": 7.0},
                            (300,), TOLERANCE)
    assert moves_answer([[50.0, 0.5]], [40.0, 0.5], (10.0, 20.0, 1), TOLERANCE)
    # every source: a twin that moves from its own case but not from another visible case's
    # answer is a copy's to pass
    assert not moves_answer([[50.0, 0.5], [40.0, 0.5]], [40.0, 0.5], (10.0, 20.0, 1),
                            TOLERANCE)
    assert moves_answer([], [40.0, 0.5], (10.0, 20.0, 1), TOLERANCE)  # nothing to copy


def test_every_twin_moves_the_answer_of_the_case_it_was_drawn_from() -> None:
    tracks = load_tracks(REPO / "tracks")
    for function in CONTRACT_FUNCTIONS:
        templates = [c for c in visible_cases(tracks) if c.function == function
                     and not is_trivial(reference_expected(c), [*c.args, *c.kwargs.values()])]
        twins = unseen_cases("seed", templates, 40, templates, reference_moves)
        assert len(twins.cases) == twins.wanted >= 40, function
        for twin in twins.cases:
            sources = [t for t in templates if t.track_id == twin.track_id
                       and reference_moves(t, twin)]
            assert sources, (function, twin.describe_inputs())


def test_a_template_whose_answer_no_twin_can_move_gives_none_and_the_draw_says_so() -> None:
    # serve(1, B): one pass whatever B is, and n = 1 is kept
    template = Case("n=1 B=8", "serve", (1, 8))
    twins = unseen_cases("seed", [template], 10, [template], reference_moves)
    assert twins.cases == []
    assert (twins.wanted, twins.short) == (10, True)


def test_the_cases_a_function_fails_fill_a_track_whose_passed_cases_cannot_move() -> None:
    unmovable = Case("n=1 B=8", "serve", (1, 8))
    failed = Case("lab batched", "serve", (256, 32))
    twins = unseen_cases("seed", [unmovable], 10, [unmovable, failed], reference_moves,
                         spare=[failed])
    assert len(twins.cases) == 10
    assert not twins.short
    assert all(reference_moves(failed, twin) for twin in twins.cases)


def test_every_template_of_a_track_gives_its_share_of_twins() -> None:
    # sizes more than SPREAD**2 apart: each twin has one template it can come from
    templates = [Case(f"n={n}", "serve", (n, 7)) for n in (10, 30, 100, 300, 1000)]
    for seed_text in ("seed", "another seed"):
        twins = unseen_cases(seed_text, templates, 23, templates, reference_moves)
        counts = collections.Counter(
            next(t.args[0] for t in templates
                 if t.args[0] / SPREAD <= twin.args[0] <= t.args[0] * SPREAD)
            for twin in twins.cases)
        assert sorted(counts.values()) == [4, 4, 5, 5, 5]


def test_the_note_says_when_a_function_got_fewer_twins_than_its_count() -> None:
    unseen = evidence(10, 1)
    unseen.wanted = 40
    assert unseen.short
    note = confirmation_note("serve", unseen, Fraction(2, 5))
    assert "only 10 of its 40 twins move the answer" in note
    assert not evidence(10, 1).short
