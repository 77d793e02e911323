"""Track files as instructors save and check them (issue 36): a byte-order mark is read
like any UTF-8 file, and ``graders tracks check`` names every problem of a file, each on a
line of its own naming the file, the field and the rule."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from graders.cli import main
from graders.errors import TrackError
from graders.trackfiles.tracks import default_tracks_dir, load_track, load_track_text, load_tracks

TRACKS = default_tracks_dir()


def test_a_track_file_saved_with_a_byte_order_mark_loads_like_the_same_file_without(
        tmp_path: Path) -> None:
    shutil.copytree(TRACKS, tmp_path / "tracks")
    path = tmp_path / "tracks" / "iphone.toml"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    plain = load_track(TRACKS / "iphone.toml")
    marked = load_track(path)
    assert marked.reference_profile() == plain.reference_profile()
    assert {track.track_id for track in load_tracks(tmp_path / "tracks")} == \
        {track.track_id for track in load_tracks(TRACKS)}
    assert load_track_text("\ufeff" + (TRACKS / "iphone.toml").read_text("utf-8"),
                           path).track_id == "iphone"


def test_tracks_check_accepts_a_file_with_a_byte_order_mark(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(TRACKS / "iphone.toml", tmp_path)
    path = tmp_path / "iphone.toml"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert main(["tracks", "check", "--tracks", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"ok  iphone  {path}"]


def test_tracks_check_reports_every_problem_of_a_file_one_line_each(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (TRACKS / "iphone.toml").read_text(encoding="utf-8")
    for old, new in (("slo_ms", "# slo_ms"),            # a missing required key
                     ('"8 GiB"', '"8 W"'),              # a quantity in the wrong unit
                     ("[model]", "[model]\ncolour = 1"),  # an unknown key
                     ('id = "iphone"', 'id = "iPhone"')):  # an id that breaks the rule
        assert old in text, old
        text = text.replace(old, new, 1)
    path = tmp_path / "iphone.toml"
    path.write_text(text, encoding="utf-8")
    assert main(["tracks", "check", "--tracks", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 4, captured.err
    assert all(line.startswith(f"graders: error: {path}: ") for line in lines)
    for fragment in ("missing required key variant.defaults.slo_ms",
                     "hardware.memory.capacity must be a data size",
                     "unknown key model.colour",
                     "track.id must be a lowercase identifier"):
        assert sum(fragment in line for line in lines) == 1, (fragment, lines)
    with pytest.raises(TrackError) as raised:  # loading still stops at the first, in one line
        load_track(path)
    assert "\n" not in str(raised.value)
