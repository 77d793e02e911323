"""The lab notebook's engine (graders.feedback.explore): the student's functions swept in
the grader's worker, beside the points the student repository holds."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from helpers import CORPUS, REPO

from graders.expected.golden import GoldenOracle, build_golden
from graders.expected.oracle import ReferenceOracle
from graders.feedback import explore
from graders.feedback.curves import curve_cases, track_sweeps
from graders.grading.cases import Case, visible_cases
from graders.grading.contract import CONTRACT_FUNCTIONS
from graders.sandbox.limits import Limits
from graders.trackfiles.tracks import Track, default_tracks_dir, load_tracks

TEMPLATE = REPO / "student_template" / "serving.py"
#: Deadlines short enough for a test of a hang (the grader's own are 3 s and 10 s).
QUICK = Limits(call_timeout_s=0.5, import_timeout_s=2.0)


@pytest.fixture(scope="module")
def tracks() -> tuple[Track, ...]:
    return load_tracks(default_tracks_dir())


@pytest.fixture(scope="module")
def golden(tracks: tuple[Track, ...], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A golden file as a student bundle holds it: the visible and the curve cases."""
    cases = [*visible_cases(tracks), *(c for t in tracks for c in curve_cases(t))]
    document = build_golden(tracks, cases, ReferenceOracle().expected, visible_max_score=95.0)
    path = tmp_path_factory.mktemp("golden") / "golden.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def student(name: str) -> explore.StudentCode:
    path = TEMPLATE if name == "template" else CORPUS / name / "serving.py"
    return explore.load_student(path.read_bytes())


def probes(tracks: tuple[Track, ...] = ()) -> list[Case]:
    """One visible case per function, as the notebook probes them."""
    first: dict[str, Case] = {}
    for case in visible_cases(tracks):
        first.setdefault(case.function, case)
    return list(first.values())


def test_a_file_that_does_not_load_is_a_message_not_an_exception() -> None:
    for source, words in [(b"def serve(:\n", "SyntaxError"),
                          (b"raise SystemExit(3)\n", "SystemExit"),
                          (b"import numpyy\n", "No module named 'numpyy'"),
                          (b"while True:\n    pass\n", "took longer than the deadline")]:
        probed = explore.probe(explore.load_student(source, QUICK), probes())
        assert probed.error.startswith("serving.py could not be imported:"), probed
        assert words in probed.error
        assert probed.unwritten == tuple(CONTRACT_FUNCTIONS)


def test_a_call_that_hangs_is_stopped_at_the_grader_deadline_and_becomes_a_note(
        tracks: tuple[Track, ...]) -> None:
    unwritten = '    raise NotImplementedError("serve: implement me")\n'
    source = TEMPLATE.read_text(encoding="utf-8")
    assert source.count(unwritten) == 1
    source = source.replace(unwritten, "    while True:\n        pass\n")
    code = explore.load_student(source.encode(), QUICK)
    probed = explore.probe(code, probes(tracks))
    assert probed.error == ""
    assert [name for name, _ in probed.failed] == ["serve"]
    assert probed.failed[0][1] == explore.HANG_NOTE.format(deadline=0.5)
    assert "serve" not in probed.unwritten
    assert "erlang_c" in probed.unwritten


def test_a_function_that_hangs_on_a_sweep_gets_the_note_instead_of_a_figure(
        tracks: tuple[Track, ...], golden: Path) -> None:
    source = (CORPUS / "correct" / "serving.py").read_text(encoding="utf-8")
    heavy = "    v = max(0.1, (1 + service_cv**2) / 2)\n"
    assert source.count(heavy) == 1
    source = source.replace(heavy, "    while utilization > 0.8:\n        pass\n" + heavy)
    oracle = GoldenOracle.load(golden)
    track = oracle.bind(tracks)[0]
    measured = explore.measured(explore.load_student(source.encode(), QUICK),
                                explore.sweeps(track, explore.Knobs.of(track)), oracle.expected)
    by_name = {m.sweep.name: explore.show(m, None) for m in measured}
    assert by_name["load"].uri is None
    assert by_name["load"].text == "queueing_latency: " + explore.HANG_NOTE.format(deadline=0.5)
    assert by_name["context"].uri is not None  # the other functions are still drawn


def test_each_load_runs_the_file_as_it_is_now() -> None:
    first = explore.load_student(b"def quantity_to_float(v, u, d):\n    return 1.0\n")
    second = explore.load_student(b"def quantity_to_float(v, u, d):\n    return 2.0\n")
    case = next(c for c in visible_cases(()) if c.function == "quantity_to_float")
    assert explore.call(first, case).value == 1.0
    assert explore.call(second, case).value == 2.0


def test_a_call_that_raises_is_an_outcome_as_in_the_grader(tracks: tuple[Track, ...]) -> None:
    case = next(c for c in visible_cases(tracks) if c.function == "serve")
    outcome = explore.call(student("template"), case)
    assert outcome.status == "raised"
    assert outcome.message.startswith("NotImplementedError: serve")


def test_results_are_read_by_field_name_like_the_grader_reads_them() -> None:
    case = next(c for c in visible_cases(()) if c.function == "serve")
    assert tuple(case.fields or ()) == ("total_ms", "throughput_rps", "passes")
    for body, read in [
            ("return (1, 2.5, 3)", {"total_ms": 1, "throughput_rps": 2.5, "passes": 3}),
            ("return {'total_ms': 1.0}", {"total_ms": 1.0}),
            ("return type('R', (), {'total_ms': 4.0, 'throughput_rps': 5.0, 'passes': 2})()",
             {"total_ms": 4.0, "throughput_rps": 5.0, "passes": 2})]:
        code = explore.load_student(f"def serve(*args, **kwargs):\n    {body}\n".encode())
        value = explore.call(code, case).value
        assert {k: v for k, v in value.items() if k in read} == read, body


def test_the_untouched_template_says_every_function_is_still_to_write(
        tracks: tuple[Track, ...]) -> None:
    assert explore.unwritten(student("template"), probes(tracks)) == list(CONTRACT_FUNCTIONS)
    assert explore.unwritten(student("correct"), probes(tracks)) == []
    assert explore.probe(student("correct"), probes(tracks)) == explore.Probe(())


def test_at_the_tracks_own_settings_the_sweeps_are_the_pages_case_for_case(
        tracks: tuple[Track, ...]) -> None:
    for track in tracks:
        ours = explore.sweeps(track, explore.Knobs.of(track))
        page = track_sweeps(track)
        assert [[c.key for c in s.cases] for s in ours] == \
               [[c.key for c in s.cases] for s in page]
        assert [[c.kwargs for c in s.cases] for s in ours] == \
               [[c.kwargs for c in s.cases] for s in page]


def test_a_moved_knob_changes_its_sweeps_inputs_and_names_them_apart(
        tracks: tuple[Track, ...]) -> None:
    track = tracks[0]
    own = explore.Knobs.of(track)
    moved = explore.sweeps(track, dataclasses.replace(own, replicas=own.replicas + 1,
                                                     warm_pool_replicas=0))
    by_name = {sweep.name: sweep for sweep in moved}
    assert all(c.kwargs["replicas"] == own.replicas + 1 for c in by_name["load"].cases)
    assert all(c.case_id.startswith("lab-") for c in by_name["load"].cases)
    assert all(c.kwargs["warm_pool_replicas"] == 0 for c in by_name["bandwidth"].cases)
    # the sweeps the moved knobs do not reach keep their reference points
    assert not any(c.case_id.startswith("lab-") for c in by_name["context"].cases)


def test_the_correct_curves_go_through_every_golden_point_and_a_bug_departs(
        tracks: tuple[Track, ...], golden: Path) -> None:
    oracle = GoldenOracle.load(golden)
    bound = oracle.bind(tracks)
    # (bug, the sweeps it may move (its function's), the ones it moves on the iPhone track)
    for name, allowed, on_iphone in [
            ("correct", set(), set()),
            ("p99_at_q095", {"load", "batch"}, {"load", "batch"}),
            ("cache_ceil", {"context"}, {"context"}),
            ("warm_pool_ignored", {"warm-pool", "bandwidth"}, {"warm-pool"})]:
        every = explore.measured(student(name), [  # one worker for every track's sweeps
            sweep for track in bound for sweep in explore.sweeps(track, explore.Knobs.of(track))],
            oracle.expected)
        for track in bound:
            measured = [m for m in every if m.sweep.track_id == track.track_id]
            departed = {m.sweep.name for m in measured if explore.compare(m).departed}
            assert all(explore.compare(m).compared for m in measured), (name, track.track_id)
            assert departed <= allowed, (name, track.track_id, departed)
            if track.track_id == "iphone":
                assert departed == on_iphone, (name, departed)


def test_away_from_the_tracks_settings_the_curve_is_drawn_alone(
        tracks: tuple[Track, ...], golden: Path) -> None:
    oracle = GoldenOracle.load(golden)
    track = oracle.bind(tracks)[1]
    knobs = dataclasses.replace(explore.Knobs.of(track), replicas=3)
    load = explore.measured(student("correct"), explore.sweeps(track, knobs), oracle.expected)[0]
    assert explore.compare(load).compared == 0
    shown = explore.show(load, None)
    assert shown.uri is not None
    assert shown.text.startswith("No reference points at these settings")


def test_a_function_not_written_gets_its_message_instead_of_a_figure(
        tracks: tuple[Track, ...]) -> None:
    track = tracks[0]
    measured = explore.measured(student("template"),
                                explore.sweeps(track, explore.Knobs.of(track)),
                                ReferenceOracle().expected)
    shown = [explore.show(m, None) for m in measured]
    assert all(s.uri is None and s.img("x") == "" for s in shown)
    assert all("not implemented yet" in s.text for s in shown)


def test_every_slider_offers_the_tracks_own_value(tracks: tuple[Track, ...]) -> None:
    for track in tracks:
        own = explore.Knobs.of(track)
        for name, steps in explore.slider_steps(track).items():
            assert getattr(own, name) in steps, (track.track_id, name)
            assert steps == sorted(set(steps))


def test_the_preview_keeps_the_score_table_and_the_first_distinct_hints() -> None:
    output = "\n".join([
        "..F", "=== serving-lab feedback ===", "queueing_latency ...",
        "    hint: the variability factor squares cv",
        "    hint: the variability factor squares cv",
        "    hint: round down", "    hint: a", "    hint: b",
        "=== serving-lab score ===", "function  score  max  tests", "serve  12.00  12.00  4",
        "", "TOTAL 95.00 / 95.00", "This score is a preview: ...",
        "results written to x", "=== 1 failed, 45 passed in 0.8s ==="])
    preview = explore.parse_preview(output, 1)
    assert preview.table.splitlines()[0] == "function  score  max  tests"
    assert "TOTAL 95.00 / 95.00" in preview.table
    assert "This score is a preview: ..." in preview.table
    assert "results written" not in preview.table
    assert preview.hints == ("the variability factor squares cv", "round down", "a")
    assert preview.exit_code == 1


def test_the_preview_says_every_test_passes_only_when_pytest_did() -> None:
    unwritten = "\n".join([
        "FFF", "=== serving-lab feedback ===",
        "Start with serve: the first function of serving.py still to write, it needs none "
        "of the others.", "serve is not implemented yet (NotImplementedError: ...)",
        "=== serving-lab score ===", "TOTAL 0.00 / 95.00", "=== 46 failed in 1.8s ==="])
    failing = explore.parse_preview(unwritten, 1)
    assert failing.hints == ()
    assert "every visible test passes" not in failing.hint_list()
    assert failing.hint_list().startswith("- none: what fails gives no hint")
    passing = explore.parse_preview("...\n=== serving-lab score ===\nTOTAL 95.00 / 95.00\n", 0)
    assert passing.hint_list() == "- none: every visible test passes"
    hinted = explore.parse_preview(
        "F\n=== serving-lab feedback ===\n    hint: round up\n=== serving-lab score ===\n", 1)
    assert hinted.hint_list() == "- round up"
