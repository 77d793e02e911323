"""``graders tracks show|check|new`` as a user runs them, and their one-line errors."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from graders.cli import main
from graders.cli.tracks import parse_settings
from graders.trackfiles.tracks import default_tracks_dir, load_track

TRACKS = default_tracks_dir()
HAS_MLSYSIM = importlib.util.find_spec("mlsysim") is not None


def graders(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m graders ARGV`` in a fresh interpreter."""
    return subprocess.run([sys.executable, "-m", "graders", *argv], capture_output=True,
                          text=True, cwd=cwd, timeout=120, check=False)


def assert_one_line_error(stderr: str, *fragments: str) -> None:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("graders: error: ")
    assert "Traceback" not in stderr
    for fragment in fragments:
        assert fragment in lines[0]


def errors_and_warnings(stderr: str) -> tuple[str, list[str]]:
    """``stderr`` without its ``graders: warning:`` lines, and those lines."""
    lines = stderr.splitlines()
    warnings = [line for line in lines if line.startswith("graders: warning: ")]
    return "\n".join(line for line in lines if line not in warnings), warnings


@pytest.fixture
def bad_tracks(tmp_path: Path) -> Path:
    """A copy of the shipped tracks where robotaxi's memory capacity is in watts."""
    folder = tmp_path / "tracks"
    shutil.copytree(TRACKS, folder)
    robotaxi = folder / "robotaxi.toml"
    robotaxi.write_text(robotaxi.read_text(encoding="utf-8").replace('"32 GiB"', '"3 W"'),
                        encoding="utf-8")
    return folder


def test_show_prints_every_track_with_its_outputs_at_defaults() -> None:
    result = graders("tracks", "show")
    assert result.returncode == 0, result.stderr
    for track_id in ("cloud_fleet", "iphone", "oura_ring", "robotaxi"):
        assert re.search(rf"^{track_id}: ", result.stdout, re.MULTILINE)
    for number in ("p99 132.869 ms", "total_p99 36.469 ms", "p99 269.755 ms",
                   "state 5.859e-05 GB/request", "max_concurrent 137", "cold 28300 ms",
                   "exposed 14175 ms", "memory_capacity_gb           85.899 GB",
                   "interconnect_bandwidth_gbs   3.75 GB/s", "battery_wh                   15 Wh"):
        assert number in result.stdout


def test_show_one_id_prints_only_that_track(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tracks", "show", "iphone"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("iphone: iPhone (Mobile ML), ")
    assert "utilization 0.24, p99 132.869 ms, slo_ok False" in out
    assert "cold 400.487 ms, exposed 430.487 ms, exceeds_slo True" in out
    assert "cloud_fleet" not in out


def test_show_marks_the_unstable_cloud_fleet_queue(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tracks", "show", "cloud_fleet"]) == 0
    assert "utilization 1.5625, p99 inf ms, slo_ok False (unstable)" in capsys.readouterr().out


def test_show_an_unknown_id_lists_the_known_ids(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tracks", "show", "robotaxy"]) == 2
    assert_one_line_error(capsys.readouterr().err, "unknown track id 'robotaxy'",
                          "did you mean 'robotaxi'?",
                          "known ids: cloud_fleet, iphone, oura_ring, robotaxi")


def test_check_prints_one_ok_line_per_track() -> None:
    result = graders("tracks", "check", "--tracks", str(TRACKS), cwd=TRACKS.parent)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "ok  cloud_fleet  tracks/cloud_fleet.toml",
        "ok  iphone  tracks/iphone.toml",
        "ok  oura_ring  tracks/oura_ring.toml",
        "ok  robotaxi  tracks/robotaxi.toml",
    ]


def test_check_of_a_bad_tracks_dir_exits_2_with_one_line_and_no_traceback(
    bad_tracks: Path,
) -> None:
    result = graders("tracks", "check", "--tracks", str(bad_tracks))
    assert result.returncode == 2
    errors, warnings = errors_and_warnings(result.stderr)
    assert [line.split(": ")[2] for line in warnings] == [str(bad_tracks / "cloud_fleet.toml")]
    assert_one_line_error(
        errors, "robotaxi.toml",
        'hardware.memory.capacity must be a data size such as "80 GiB", got "3 W"')


def test_show_of_a_bad_tracks_dir_fails_the_same_way(
    bad_tracks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tracks", "show", "--tracks", str(bad_tracks)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert_one_line_error(captured.err, "robotaxi.toml", "memory.capacity must be a data size")


def test_check_of_a_missing_folder_says_how_to_point_at_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tracks", "check", "--tracks", str(tmp_path / "nope")]) == 2
    assert_one_line_error(capsys.readouterr().err, "does not exist", "--tracks DIR")


def test_new_refuses_to_overwrite_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(TRACKS / "iphone.toml", tmp_path)
    argv = ["tracks", "new", "--id", "iphone", "--hardware", "Hardware.Mobile.iPhone15Pro",
            "--model", "Models.Vision.MobileNetV2", "--tracks", str(tmp_path)]
    assert main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, "iphone.toml already exists",
                          "pass --force")


def test_new_refuses_an_id_another_file_defines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(TRACKS / "iphone.toml", tmp_path / "phone.toml")
    argv = ["tracks", "new", "--id", "iphone", "--hardware", "Hardware.Mobile.iPhone15Pro",
            "--model", "Models.Vision.MobileNetV2", "--tracks", str(tmp_path)]
    assert main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, "phone.toml already defines track id")


def test_new_into_a_missing_folder_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["tracks", "new", "--id", "x", "--hardware", "Hardware.Cloud.H100", "--model",
            "Models.Language.Llama2_7B", "--tracks", str(tmp_path / "nope")]
    assert main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, "does not exist")


@pytest.mark.parametrize(
    ("setting", "fragment"),
    [("arival_qps=40", "unknown key 'arival_qps'; did you mean 'arrival_qps'?"),
     ("arrival_qps", "must be KEY=VALUE"),
     ("arrival_qps=fast", "arrival_qps must be a number such as 500")],
)
def test_new_rejects_a_bad_set_before_reading_mlsysim(
    setting: str, fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["tracks", "new", "--id", "jetson", "--hardware", "Hardware.Edge.JetsonOrinNX",
            "--model", "Models.Vision.YOLOv8_Nano", "--stdout", "--set", setting]
    assert main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, fragment)


def test_new_with_a_bad_id_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["tracks", "new", "--id", "Jetson-NX", "--hardware", "Hardware.Edge.JetsonOrinNX",
            "--model", "Models.Vision.YOLOv8_Nano", "--stdout"]
    assert main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, "'Jetson-NX'", "lowercase identifier")


def test_new_without_mlsysim_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "mlsysim", None)
    argv = ["tracks", "new", "--id", "jetson", "--hardware", "Hardware.Edge.JetsonOrinNX",
            "--model", "Models.Vision.YOLOv8_Nano", "--stdout"]
    assert main(argv) == 2
    assert_one_line_error(capsys.readouterr().err,
                          "pip install 'serving-lab-grader[mlsysim]'")


def test_a_set_key_may_be_given_only_once() -> None:
    from graders.errors import TrackError

    assert parse_settings(["label=A b", "x=1=2"]) == {"label": "A b", "x": "1=2"}
    with pytest.raises(TrackError, match="--set label is given twice"):
        parse_settings(["label=a", "label=b"])


@pytest.mark.slow
@pytest.mark.needs_mlsysim
@pytest.mark.skipif(not HAS_MLSYSIM, reason="needs the optional mlsysim package")
def test_new_stdout_prints_a_track_file_that_loads(tmp_path: Path) -> None:
    result = graders("tracks", "new", "--id", "jetson_orin_nx", "--hardware",
                     "Hardware.Edge.JetsonOrinNX", "--model", "Models.Vision.YOLOv8_Nano",
                     "--set", "label=Jetson Orin NX", "--set", "arrival_qps=40", "--stdout")
    assert result.returncode == 0, result.stderr
    assert 'capacity = "16 GiB"' in result.stdout
    path = tmp_path / "jetson_orin_nx.toml"
    path.write_text(result.stdout, encoding="utf-8")
    track = load_track(path)
    assert (track.label, track.variant.defaults["arrival_qps"]) == ("Jetson Orin NX", 40)


@pytest.mark.slow
@pytest.mark.needs_mlsysim
@pytest.mark.skipif(not HAS_MLSYSIM, reason="needs the optional mlsysim package")
def test_new_list_prints_the_refs_new_accepts_those_of_the_shipped_tracks_among_them() -> None:
    result = graders("tracks", "new", "--list")
    assert result.returncode == 0, result.stderr
    listed = {line.split()[0] for line in result.stdout.splitlines() if line.startswith("  ")}
    tracks = [load_track(path) for path in TRACKS.glob("*.toml")]
    shipped = {ref for track in tracks
               for ref in (track.variant.hardware_ref, track.variant.model_ref)}
    assert shipped <= listed, shipped - listed
    assert {ref.split(".")[0] for ref in listed} == {"Hardware", "Models"}
    # a listed ref is one 'tracks new' takes: the first model listed makes a track
    first_model = next(ref for ref in sorted(listed) if ref.startswith("Models."))
    assert "Hardware.Edge.JetsonOrinNX" in listed
    made = graders("tracks", "new", "--id", "listed", "--hardware", "Hardware.Edge.JetsonOrinNX",
                   "--model", first_model, "--set", "slo_ms=100", "--stdout")
    assert made.returncode == 0, made.stderr


def test_new_without_its_refs_names_what_is_missing_and_the_list(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tracks", "new", "--id", "jetson"]) == 2
    assert_one_line_error(capsys.readouterr().err, "needs --hardware, --model",
                          "graders tracks new --list")


def test_check_names_every_bad_file_and_every_good_one(tmp_path: Path) -> None:
    for path in sorted(TRACKS.glob("*.toml")):
        shutil.copy(path, tmp_path)
    for name, old, new in (("iphone.toml", "slo_ms", "# slo_ms"),
                           ("robotaxi.toml", "[model]", "[modle]"),
                           ("oura_ring.toml", "[track]", "[track")):
        path = tmp_path / name
        path.write_text(path.read_text(encoding="utf-8").replace(old, new, 1), encoding="utf-8")
    result = graders("tracks", "check", "--tracks", str(tmp_path))
    assert result.returncode == 2
    assert result.stdout.splitlines() == [f"ok  cloud_fleet  {tmp_path / 'cloud_fleet.toml'}"]
    errors, warnings = errors_and_warnings(result.stderr)
    [warning] = warnings  # cloud_fleet is good, but overloaded
    assert "cloud_fleet.toml" in warning
    problems = errors.splitlines()
    assert len(problems) == 4  # every problem of each file: robotaxi's [modle] makes two
    assert all(line.startswith("graders: error: ") for line in problems)
    assert "missing required key variant.defaults.slo_ms" in problems[0]
    robotaxi = [line for line in problems if "robotaxi.toml" in line]
    assert len(robotaxi) == 2
    assert "unknown key modle" in robotaxi[0]
    assert "missing required key model" in robotaxi[1]
    assert "Traceback" not in result.stderr


def overloaded_h100(folder: Path, **defaults: str) -> Path:
    """cloud_fleet.toml on one H100 at the lab's default load, with ``defaults`` changed."""
    text = (TRACKS / "cloud_fleet.toml").read_text(encoding="utf-8")
    values = {"arrival_qps": "100", "service_ms": "20", "replicas": "1",
              "devices_per_replica": "1", "context_tokens": "4096", **defaults}
    for key, value in values.items():
        text = re.sub(rf"^{key} = .*$", f"{key} = {value}", text, count=1, flags=re.MULTILINE)
    text = text.replace('id = "cloud_fleet"', 'id = "h100"')
    path = folder / "h100.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_check_warns_with_the_fix_when_a_tracks_defaults_cannot_serve(tmp_path: Path) -> None:
    overloaded_h100(tmp_path)
    result = graders("tracks", "check", "--tracks", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"ok  h100  {tmp_path / 'h100.toml'}"]
    errors, warnings = errors_and_warnings(result.stderr)
    assert errors == ""
    unstable, oom = warnings
    assert "the queue is unstable (utilization 2 >= 1" in unstable
    assert "set replicas = 3 or more, or arrival_qps below 50" in unstable
    assert "out of memory (max_concurrent 0: weights 140 GB" in oom
    assert "set devices_per_replica = 2 or more" in oom


def test_the_fixes_check_names_clear_the_warnings(tmp_path: Path) -> None:
    overloaded_h100(tmp_path, replicas="3", devices_per_replica="2")
    result = graders("tracks", "check", "--tracks", str(tmp_path))
    assert (result.returncode, result.stderr) == (0, "")
    overloaded_h100(tmp_path, replicas="2", devices_per_replica="1")  # one short of each fix
    assert len(errors_and_warnings(graders("tracks", "check", "--tracks",
                                           str(tmp_path)).stderr)[1]) == 2


def test_check_warns_when_even_a_lone_request_misses_the_slo(tmp_path: Path) -> None:
    overloaded_h100(tmp_path, replicas="3", devices_per_replica="2", slo_ms="15")
    result = graders("tracks", "check", "--tracks", str(tmp_path))
    assert result.returncode == 0
    [warning] = errors_and_warnings(result.stderr)[1]
    assert "p99 exceeds slo_ms 15 at every load (even a lone request's p99 is 20 ms" in warning
    assert "set slo_ms above 20, or lower service_ms" in warning


def test_check_and_show_read_gb_per_second_as_gigabits(tmp_path: Path) -> None:
    text = (TRACKS / "cloud_fleet.toml").read_text(encoding="utf-8")
    (tmp_path / "cloud_fleet.toml").write_text(
        text.replace('bandwidth = "64.0 GB/s"', 'bandwidth = "102.0 Gb/s"'), encoding="utf-8")
    assert graders("tracks", "check", "--tracks", str(tmp_path)).returncode == 0
    shown = graders("tracks", "show", "--tracks", str(tmp_path)).stdout
    assert re.search(r"interconnect_bandwidth_gbs +12\.75 GB/s\n", shown), shown


def test_show_says_which_bandwidths_fall_back_to_memory_bandwidth() -> None:
    shown = graders("tracks", "show", "iphone").stdout
    assert re.search(r"storage_bandwidth_gbs +51\.2 GB/s  \(lab default: memory bandwidth, "
                     r"the track has no hardware\.storage\)", shown), shown
    assert re.search(r"tdp_w +5 W\n", shown), shown  # given by the track: no mark


def test_show_marks_the_values_a_track_leaves_to_the_lab_defaults(tmp_path: Path) -> None:
    text = (TRACKS / "iphone.toml").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.startswith("warm_pool_replicas")]
    (tmp_path / "iphone.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = graders("tracks", "show", "--tracks", str(tmp_path))
    assert result.returncode == 0, result.stderr
    marked = [line for line in result.stdout.splitlines() if "(lab default)" in line]
    assert [line.split()[0] for line in marked] == ["warm_pool_replicas"]
