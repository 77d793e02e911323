"""Golden files: expected values without the reference, checked against their inputs."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import types
from pathlib import Path
from typing import Any

import pytest
from helpers import CORPUS, graders, load

from graders.errors import GoldenError
from graders.expected.golden import (
    GoldenOracle,
    build_golden,
    fingerprint,
    from_json_data,
    to_json_data,
)
from graders.expected.oracle import ReferenceOracle, choose_oracle
from graders.grading.cases import Case, serve_cases, visible_cases
from graders.grading.contract import PROFILE_FIELDS, RESULT_FIELDS
from graders.trackfiles.tracks import default_tracks_dir, load_tracks


def write_golden(folder: Path, tracks_dir: Path, visible_max_score: float = 95.0) -> Path:
    tracks = load_tracks(tracks_dir)
    document = build_golden(tracks, visible_cases(tracks), ReferenceOracle().expected,
                            visible_max_score=visible_max_score)
    path = folder / "golden.json"
    path.write_text(json.dumps(document, allow_nan=False), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def golden_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_golden(tmp_path_factory.mktemp("golden"), default_tracks_dir())


# --- the contract and the data format ------------------------------------------------------


def test_the_contract_fields_are_the_reference_result_fields() -> None:
    import reference

    types_by_function = {"serve": reference.ServeResult,
                         "queueing_latency": reference.QueueingResult,
                         "batching_tax": reference.BatchingTaxResult,
                         "cache_capacity": reference.CacheCapacityResult,
                         "cold_start_latency": reference.ColdStartResult,
                         "serving_track_profile": reference.ServingTrackProfile}
    for function, result_type in types_by_function.items():
        names = getattr(result_type, "_fields", None) or tuple(
            f.name for f in dataclasses.fields(result_type))
        assert RESULT_FIELDS[function] == names, function
    assert RESULT_FIELDS["serving_track_profile"] == PROFILE_FIELDS


def test_json_data_round_trips_non_finite_floats_tuples_and_namespaces() -> None:
    value = {"a": math.inf, "b": -math.inf, "c": (1, "x", None), "d": [1.5, True],
             "e": types.SimpleNamespace(f=(2.0, 3.0), g=None)}
    encoded = to_json_data(value)
    text = json.dumps(encoded, allow_nan=False)  # strict JSON
    decoded = from_json_data(json.loads(text))
    assert decoded["a"] == math.inf
    assert decoded["b"] == -math.inf
    assert decoded["c"] == (1, "x", None)
    assert decoded["d"] == [1.5, True]
    assert decoded["e"] == types.SimpleNamespace(f=(2.0, 3.0), g=None)


def test_json_data_refuses_objects_it_cannot_write() -> None:
    with pytest.raises(TypeError, match="cannot hold a object"):
        to_json_data(object())


def test_a_fingerprint_changes_with_any_input_and_only_with_inputs() -> None:
    case = Case("x", "serve", (256, 32), {"overhead_ms": 20.0})
    assert fingerprint(case) == fingerprint(Case("other id", "serve", (256, 32),
                                                 {"overhead_ms": 20.0}))
    assert fingerprint(case) != fingerprint(Case("x", "serve", (256, 33), {"overhead_ms": 20.0}))
    assert fingerprint(case) != fingerprint(Case("x", "serve", (256, 32), {"overhead_ms": 20.5}))


def test_every_visible_case_has_a_unique_key() -> None:
    tracks = load_tracks(default_tracks_dir())
    keys = [case.key for case in visible_cases(tracks)]
    assert len(keys) == len(set(keys))
    assert any(key.startswith("iphone/queueing_latency/") for key in keys)
    assert any(key.startswith("-/serve/") for key in keys)


def test_two_cases_with_one_key_are_refused() -> None:
    case = Case("same", "serve", (1, 1))
    with pytest.raises(GoldenError, match="two cases share the key '-/serve/same'"):
        build_golden([], [case, case], ReferenceOracle().expected)


# --- the golden oracle ----------------------------------------------------------------------


def test_golden_values_equal_the_reference_values(golden_file: Path) -> None:
    oracle = GoldenOracle.load(golden_file)
    tracks = oracle.bind(load_tracks(default_tracks_dir()))
    reference = ReferenceOracle()
    checked = 0
    for case in visible_cases(tracks):
        assert oracle.expected(case) == reference.expected(case), case.key
        checked += 1
    assert checked == len(oracle.entries)
    assert oracle.visible_max_score == 95.0


def test_golden_profiles_have_every_profile_field_with_tuples_restored(
        golden_file: Path) -> None:
    fresh = {track.track_id: track for track in load_tracks(default_tracks_dir())}
    tracks = GoldenOracle.load(golden_file).bind(tuple(fresh.values()))
    for track in tracks:
        profile = track.reference_profile()
        assert isinstance(profile, types.SimpleNamespace)
        assert tuple(vars(profile)) == PROFILE_FIELDS
        computed = fresh[track.track_id].reference_profile()
        assert all(getattr(profile, name) == getattr(computed, name) for name in PROFILE_FIELDS)
        assert isinstance(profile.source_refs, tuple)


def test_a_case_the_golden_file_lacks_is_a_clear_error(golden_file: Path) -> None:
    oracle = GoldenOracle.load(golden_file)
    with pytest.raises(GoldenError, match=r"has no value for case -/serve/unknown; the bundle "
                                          r"carries the visible cases only"):
        oracle.expected(Case("unknown", "serve", (1, 1)))


def test_a_case_with_changed_inputs_is_refused(golden_file: Path) -> None:
    oracle = GoldenOracle.load(golden_file)
    case = serve_cases()[0]
    changed = dataclasses.replace(case, args=(257, 1))
    assert oracle.expected(case) is not None
    with pytest.raises(GoldenError, match="has other inputs than golden.json was built from"):
        oracle.expected(changed)


def test_an_edited_track_file_is_refused(golden_file: Path, tmp_path: Path) -> None:
    shutil.copytree(default_tracks_dir(), tmp_path / "tracks")
    edited = tmp_path / "tracks" / "iphone.toml"
    edited.write_text(edited.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    with pytest.raises(GoldenError, match=r"iphone.toml differs from the file golden.json was "
                                          r"built from; restore it"):
        GoldenOracle.load(golden_file).bind(load_tracks(tmp_path / "tracks"))


def test_a_track_without_golden_values_is_refused(tmp_path: Path) -> None:
    shutil.copytree(default_tracks_dir(), tmp_path / "tracks")
    (tmp_path / "tracks" / "robotaxi.toml").unlink()
    golden = write_golden(tmp_path, tmp_path / "tracks")
    with pytest.raises(GoldenError, match=r"track 'robotaxi' \(robotaxi.toml\) has no golden "
                                          r"values in golden.json; this bundle grades the "
                                          r"tracks it was built with \(cloud_fleet, iphone, "
                                          r"oura_ring\)"):
        GoldenOracle.load(golden).bind(load_tracks(default_tracks_dir()))


def test_a_deleted_track_file_is_refused(golden_file: Path, tmp_path: Path) -> None:
    shutil.copytree(default_tracks_dir(), tmp_path / "tracks")
    (tmp_path / "tracks" / "cloud_fleet.toml").unlink()
    with pytest.raises(GoldenError, match=r"track cloud_fleet of golden.json is missing from "
                                          r"the tracks folder; restore it"):
        GoldenOracle.load(golden_file).bind(load_tracks(tmp_path / "tracks"))


@pytest.mark.parametrize(("text", "message"), [
    ("{not json", "is not valid JSON"),
    ('{"schema_version": 99}', "is not schema version 1"),
    ('{"schema_version": 1, "tracks": {}}', "is missing or garbles 'cases'"),
    ('{"schema_version": 1, "tracks": {}, "cases": {}, "visible_max_score": -1}',
     "visible_max_score must be a positive number"),
])
def test_a_broken_golden_file_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "golden.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(GoldenError, match=message):
        GoldenOracle.load(path)


def test_a_missing_golden_file_names_the_flag(tmp_path: Path) -> None:
    with pytest.raises(GoldenError, match="cannot read golden file .* pass --grader-golden"):
        choose_oracle(tmp_path / "absent.json")


def test_the_reference_is_the_default_oracle_in_a_checkout(golden_file: Path) -> None:
    assert isinstance(choose_oracle(None), ReferenceOracle)
    chosen = choose_oracle(golden_file)
    assert isinstance(chosen, GoldenOracle)
    assert chosen.golden
    assert chosen.default_max_score == 95.0


# --- grading with a golden file ----------------------------------------------------------------


def grade(tmp_path: Path, submission: Path, *extra: str | Path) -> dict[str, Any]:
    results = tmp_path / f"{submission.name}-{len(extra)}.json"
    run = graders("grade", submission, "--results", results, "-q", *extra, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    return load(results)  # type: ignore[no-any-return]


def test_golden_grading_scores_visible_tests_exactly_as_the_reference_does(
        golden_file: Path, tmp_path: Path) -> None:
    buggy = CORPUS / "p99_at_q095"
    by_reference = grade(tmp_path, buggy)
    by_golden = grade(tmp_path, buggy, "--golden", golden_file)
    hidden = {t["extra_data"]["nodeid"]: t for t in by_reference["tests"]
              if t["visibility"] != "visible"}
    assert hidden, "the reference run grades the hidden tests"
    reference_visible = {t["extra_data"]["nodeid"]: t["score"] for t in by_reference["tests"]
                         if t["visibility"] == "visible"}
    golden_scores = {t["extra_data"]["nodeid"]: t["score"] for t in by_golden["tests"]}
    assert set(golden_scores) == set(reference_visible)
    assert golden_scores == reference_visible
    lost_in_hidden = sum(t["max_score"] - t["score"] for t in hidden.values())
    assert lost_in_hidden > 0
    assert by_golden["score"] == pytest.approx(
        by_reference["score"] - sum(t["score"] for t in hidden.values()), abs=1e-5)


def test_golden_grading_totals_the_visible_points_by_default(golden_file: Path,
                                                             tmp_path: Path) -> None:
    results = grade(tmp_path, CORPUS / "correct", "--golden", golden_file)
    assert results["score"] == 95.0
    assert results["extra_data"]["max_score"] == 95.0
    assert all(t["visibility"] == "visible" for t in results["tests"])
    assert len(results["tests"]) == 46


def test_every_invariant_test_asks_calls_the_bundle_can_answer() -> None:
    from graders.expected.invariant_examples import INVARIANT_MARK
    from graders.export.invariant_answers import lab_cases
    from graders.suite import test_invariants as suite

    tracks = load_tracks(default_tracks_dir())
    cases = lab_cases(tracks, 2)
    assert len({case.key for case in cases}) == len(cases)
    assert all(case.case_id.startswith(INVARIANT_MARK) for case in cases)
    # every function an invariant is about is asked, and the tracks' profiles are passed
    assert {case.function for case in cases} >= {
        test.pytestmark[0].kwargs["function"]
        for name, test in vars(suite).items() if name.startswith("test_")}
    # more examples ask more calls; the same examples, the same calls
    assert {c.key for c in cases} < {c.key for c in lab_cases(tracks, 3)}
    assert [c.key for c in cases] == [c.key for c in lab_cases(tracks, 2)]
