"""A bad track file stops with one TrackError naming the file, the field, the rule and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from graders.errors import GraderError, TrackError
from graders.trackfiles.tracks import (
    DEFAULT_KEYS,
    default_tracks_dir,
    load_track,
    load_tracks,
    parse_quantity,
)
from reference.profile import DEFAULT_FIELDS

CLOUD = default_tracks_dir() / "cloud_fleet.toml"


def write_variant(tmp_path: Path, old: str, new: str, name: str = "bad.toml") -> Path:
    """A copy of cloud_fleet.toml with ``old`` replaced by ``new``, written to ``tmp_path``."""
    text = CLOUD.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path = tmp_path / name
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path


def load_error(path: Path) -> str:
    with pytest.raises(TrackError) as caught:
        load_track(path)
    message = str(caught.value)
    assert path.name in message, message
    assert "\n" not in message
    return message


def test_track_errors_are_value_errors_and_grader_errors() -> None:
    assert issubclass(TrackError, ValueError)
    assert issubclass(TrackError, GraderError)


def test_malformed_toml_names_the_file_and_tomllibs_line_and_column(tmp_path: Path) -> None:
    path = write_variant(tmp_path, 'label = "Cloud Fleet"', 'label = "Cloud Fleet')
    message = load_error(path)
    assert "not valid TOML" in message
    assert "line 6, column" in message


def test_a_file_that_is_not_utf8_is_reported_as_such(tmp_path: Path) -> None:
    path = tmp_path / "latin.toml"
    path.write_bytes(CLOUD.read_bytes().replace(b"Cloud Fleet", b"Cl\xf6ud Fleet"))
    assert "not UTF-8" in load_error(path)


def test_a_missing_required_key_names_its_dotted_path_and_table(tmp_path: Path) -> None:
    path = write_variant(tmp_path, 'bandwidth = "3.35 TB/s"\n', "")
    message = load_error(path)
    assert "missing required key hardware.memory.bandwidth" in message
    assert '"3.35 TB/s"' in message
    assert "add it to [hardware.memory]" in message


def test_a_missing_required_table_is_named(tmp_path: Path) -> None:
    path = write_variant(tmp_path, "[hardware.memory]", "[hardware.memry]")
    message = load_error(path)
    assert "unknown key hardware.memry" in message
    assert "did you mean 'memory'?" in message


def test_an_unknown_key_suggests_the_closest_known_key(tmp_path: Path) -> None:
    path = write_variant(tmp_path, "service_cv = 1.0", "service_vc = 1.0")
    message = load_error(path)
    assert "unknown key variant.defaults.service_vc" in message
    assert "did you mean 'service_cv'?" in message


def test_an_unknown_table_suggests_the_closest_known_table(tmp_path: Path) -> None:
    path = write_variant(tmp_path, "[track]", "[trak]")
    assert "unknown key trak; did you mean 'track'?" in load_error(path)


@pytest.mark.parametrize(
    ("old", "new", "fragment"),
    [
        ("replicas = 8", 'replicas = "8"',
         'variant.defaults.replicas must be a whole number such as 8, got "8"; write it '
         "without quotes"),
        ("replicas = 8", "replicas = 8.5",
         "variant.defaults.replicas must be a whole number such as 8, got 8.5; drop the "
         "fractional part"),
        ("service_ms = 25", 'service_ms = "25 ms"',
         'variant.defaults.service_ms must be a number such as 25, got "25 ms"'),
        ("service_ms = 25", "service_ms = true",
         "variant.defaults.service_ms must be a number such as 25, got true"),
        ('label = "Cloud Fleet"', "label = 3",
         "track.label must be a non-empty string"),
        ("layers = 80", 'layers = "80"', 'model.layers must be a whole number such as 80'),
        ("validation_tests = [", "validation_tests = [1, ",
         "variant.defaults.validation_tests must be a list of non-empty strings"),
        ('tdp = "700 W"\n\n[hardware.memory]\ncapacity = "80 GiB"\nbandwidth = "3.35 TB/s"\n',
         'tdp = "700 W"\nmemory = "80 GiB"\n',
         'hardware.memory must be a table [hardware.memory], got "80 GiB"'),
    ],
)
def test_a_wrong_type_names_the_field_the_rule_and_the_fix(
    tmp_path: Path, old: str, new: str, fragment: str
) -> None:
    assert fragment in load_error(write_variant(tmp_path, old, new))


def test_a_wrong_dimension_reads_as_the_issue_asks(tmp_path: Path) -> None:
    path = write_variant(tmp_path, 'capacity = "80 GiB"', 'capacity = "3 W"')
    message = load_error(path)
    assert 'memory.capacity must be a data size such as "80 GiB", got "3 W"' in message
    assert "hardware.memory.capacity" in message


@pytest.mark.parametrize(
    ("old", "new", "fragment"),
    [
        ('bandwidth = "3.35 TB/s"', 'bandwidth = "3.35 TB"',
         'hardware.memory.bandwidth must be a bandwidth such as "3.35 TB/s", got "3.35 TB"'),
        ('bandwidth = "7.0 GB/s"', 'bandwidth = "7 GB/hour/hour"',
         "hardware.storage.bandwidth must be a bandwidth"),
        ('tdp = "700 W"', 'tdp = "700 Wh"', 'hardware.tdp must be a power such as "700 W"'),
        ('tdp = "700 W"', 'tdp = "700 W"\nbattery_capacity = "15 W"',
         'hardware.battery_capacity must be an energy such as "15 Wh", got "15 W"'),
        ('parameters = "7e10 param"', 'parameters = "70 GB"',
         'model.parameters must be a parameter count such as "7e10 param", got "70 GB"'),
        ('capacity = "80 GiB"', 'capacity = "80 GiB**2"', "must be a data size"),
        ('capacity = "80 GiB"', 'capacity = "80 percent"', "must be a data size"),
    ],
)
def test_a_quantity_in_the_wrong_units_is_rejected(
    tmp_path: Path, old: str, new: str, fragment: str
) -> None:
    assert fragment in load_error(write_variant(tmp_path, old, new))


@pytest.mark.parametrize("written", ["80", '"80"'])
def test_a_data_size_without_a_unit_asks_for_one(tmp_path: Path, written: str) -> None:
    path = write_variant(tmp_path, 'capacity = "80 GiB"', f"capacity = {written}")
    message = load_error(path)
    assert "hardware.memory.capacity must be a data size" in message
    assert "add a unit" in message


def test_an_unreadable_quantity_says_pint_cannot_read_it(tmp_path: Path) -> None:
    path = write_variant(tmp_path, 'capacity = "80 GiB"', 'capacity = "eighty GiB"')
    assert "pint cannot read" in load_error(path)


@pytest.mark.parametrize(
    ("old", "new", "field", "rule"),
    [
        ('capacity = "80 GiB"', 'capacity = "0 GiB"', "hardware.memory.capacity",
         "must be greater than 0"),
        ('bandwidth = "3.35 TB/s"', 'bandwidth = "-3.35 TB/s"', "hardware.memory.bandwidth",
         "must be greater than 0"),
        ('bandwidth = "64.0 GB/s"', 'bandwidth = "0 Gbps"', "hardware.interconnect.bandwidth",
         "must be greater than 0"),
        ('parameters = "7e10 param"', "parameters = 0", "model.parameters",
         "must be greater than 0"),
        ('capacity = "80 GiB"', 'capacity = "inf GiB"', "hardware.memory.capacity",
         "write a finite number"),
        ("service_ms = 25", "service_ms = 0", "variant.defaults.service_ms",
         "must be greater than 0"),
        ("slo_ms = 200", "slo_ms = -5", "variant.defaults.slo_ms", "must be greater than 0"),
        ("batch_size = 32", "batch_size = 0", "variant.defaults.batch_size",
         "must be greater than 0"),
        ("replicas = 8", "replicas = -1", "variant.defaults.replicas", "must be greater than 0"),
        ("arrival_qps = 500", "arrival_qps = -1", "variant.defaults.arrival_qps",
         "must be at least 0"),
        ("service_cv = 1.0", "service_cv = -0.5", "variant.defaults.service_cv",
         "must be at least 0"),
        ("warm_pool_replicas = 2", "warm_pool_replicas = -2",
         "variant.defaults.warm_pool_replicas", "must be at least 0"),
        ("layers = 80", "layers = 0", "model.layers", "must be greater than 0"),
        ("arrival_qps = 500", "arrival_qps = nan", "variant.defaults.arrival_qps",
         "write a finite number"),
    ],
)
def test_an_impossible_value_names_the_field_and_its_bound(
    tmp_path: Path, old: str, new: str, field: str, rule: str
) -> None:
    message = load_error(write_variant(tmp_path, old, new))
    assert field in message
    assert rule in message


@pytest.mark.parametrize(
    ("old", "new"),
    [("arrival_qps = 500", "arrival_qps = 0"), ("warm_pool_replicas = 2", "warm_pool_replicas = 0"),
     ("context_tokens = 131072", "context_tokens = 0"), ("service_cv = 1.0", "service_cv = 0")],
)
def test_zero_is_accepted_where_it_is_possible(tmp_path: Path, old: str, new: str) -> None:
    load_track(write_variant(tmp_path, old, new))


@pytest.mark.parametrize("track_id", ["Cloud_Fleet", "cloud-fleet", "1cloud", "cloud fleet", ""])
def test_a_track_id_must_be_a_lowercase_identifier(tmp_path: Path, track_id: str) -> None:
    path = write_variant(tmp_path, 'id = "cloud_fleet"', f'id = "{track_id}"')
    message = load_error(path)
    assert "track.id must be" in message


def test_a_bad_track_id_suggests_a_valid_one(tmp_path: Path) -> None:
    path = write_variant(tmp_path, 'id = "cloud_fleet"', 'id = "Cloud-Fleet"')
    message = load_error(path)
    assert "lowercase identifier" in message
    assert 'got "Cloud-Fleet"; rename it, e.g. "cloud_fleet"' in message


def test_a_duplicate_track_id_names_both_files(tmp_path: Path) -> None:
    write_variant(tmp_path, 'label = "Cloud Fleet"', 'label = "Cloud Fleet"', name="a.toml")
    write_variant(tmp_path, 'label = "Cloud Fleet"', 'label = "Copy"', name="b.toml")
    with pytest.raises(TrackError) as caught:
        load_tracks(tmp_path)
    message = str(caught.value)
    assert "a.toml" in message
    assert "b.toml" in message
    assert "track.id 'cloud_fleet' is already used" in message


def test_loading_a_folder_that_does_not_exist_says_how_to_point_at_one(tmp_path: Path) -> None:
    with pytest.raises(TrackError, match="does not exist.*--tracks DIR"):
        load_tracks(tmp_path / "missing")


def test_loading_a_folder_without_track_files_says_how_to_add_one(tmp_path: Path) -> None:
    with pytest.raises(TrackError, match=r"holds no \*\.toml track files.*graders tracks new"):
        load_tracks(tmp_path)


def test_loading_a_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(TrackError, match="gone.toml: cannot read the track file"):
        load_track(tmp_path / "gone.toml")


def test_the_defaults_keys_are_the_references_plus_three() -> None:
    read_by_reference = {key for key, _ in DEFAULT_FIELDS.values()}
    extra = {"validation_tests", "storage_bandwidth_gbs", "interconnect_bandwidth_gbs"}
    assert set(DEFAULT_KEYS) == read_by_reference | extra


def test_bandwidth_overrides_in_defaults_win_over_the_hardware(tmp_path: Path) -> None:
    path = write_variant(tmp_path, "scale_out_replicas = 4",
                         "scale_out_replicas = 4\nstorage_bandwidth_gbs = 2.5")
    assert load_track(path).reference_profile().storage_bandwidth_gbs == 2.5


def test_optional_facts_may_be_left_out(tmp_path: Path) -> None:
    text = CLOUD.read_text(encoding="utf-8")
    for table in ("[hardware.storage]\nbandwidth = \"7.0 GB/s\"\n",
                  "[hardware.interconnect]\nbandwidth = \"64.0 GB/s\"\n", 'tdp = "700 W"\n'):
        assert table in text
        text = text.replace(table, "")
    path = tmp_path / "lean.toml"
    path.write_text(text, encoding="utf-8")
    profile = load_track(path).reference_profile()
    assert profile.storage_bandwidth_gbs == pytest.approx(3350.0)
    assert profile.tdp_w == 0.0


@pytest.mark.parametrize(
    ("text", "kind", "magnitude", "unit"),
    [("80 GiB", "data size", 80 * 2**30 / 1e9, "GB"), ("30 Gbps", "bandwidth", 3.75, "GB/s"),
     ("56 Gbit/s", "bandwidth", 7.0, "GB/s"), ("0.02 W", "power", 0.02, "W"),
     ("54000 J", "energy", 15.0, "Wh"), (3_504_872, "parameter count", 3_504_872, "param"),
     ("7e10", "parameter count", 7e10, "param"),
     # data units as people write them, which pint alone reads otherwise (Gb is gilbert)
     ("102.0 Gb/s", "bandwidth", 12.75, "GB/s"), ("816 Gbps", "bandwidth", 102.0, "GB/s"),
     ("12 GBps", "bandwidth", 12.0, "GB/s"), ("8 Mb/ms", "bandwidth", 1.0, "GB/s"),
     ("1 KB/s", "bandwidth", 1e-6, "GB/s"), ("64 Gb", "data size", 8.0, "GB"),
     ("1 KiB", "data size", 1.024e-6, "GB"), ("1 gigabyte/second", "bandwidth", 1.0, "GB/s"),
     ("8e9 b", "data size", 1.0, "GB")],
)
def test_parse_quantity_checks_units_by_name_and_converts(
    text: str | int, kind: str, magnitude: float, unit: str
) -> None:
    quantity = parse_quantity(text, kind, "where")  # type: ignore[arg-type]
    assert quantity.m_as(unit) == pytest.approx(magnitude, rel=1e-12)


def test_a_refused_bandwidth_unit_is_told_which_units_are_accepted() -> None:
    with pytest.raises(TrackError) as caught:
        parse_quantity("5 GW", "bandwidth", "x.toml: hardware.storage.bandwidth")
    assert str(caught.value).endswith(
        "use a data rate unit: a byte or bit unit (GB, GiB, Gbit or Gb, ...) per time unit "
        '(/s, /ms, ...), or Gbps, Mbps, GBps, e.g. "3.35 TB/s"')


def test_parse_quantity_prefixes_its_message_with_where() -> None:
    with pytest.raises(TrackError) as caught:
        parse_quantity("3 W", "data size", "x.toml: hardware.memory.capacity")
    assert str(caught.value).startswith(
        'x.toml: hardware.memory.capacity must be a data size such as "80 GiB", got "3 W";')
