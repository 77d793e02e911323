"""The box's bound where it is a plain host folder (Landlock's modes, no tmpfs mounted):
the grader's watch kills the worker once the box holds more than its bytes or entries,
says why, and the runner empties the box once the worker is gone. The watch alone, over
a scratch folder and a sleeping stand-in worker, then the runner's landlocked worker.

The overshoot past the bound (what a worker writes between an event and the kill) is
measured by tests/end_to_end/test_adversarial_box.py, not asserted here."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import graders.sandbox.box_watch
import graders.sandbox.confinement
import graders.sandbox.runner
from graders.sandbox import modes
from graders.sandbox.box_mount import BOX_BYTES, BOX_INODES
from graders.sandbox.box_watch import WATCHED, BoxWatch
from graders.sandbox.privileges import SandboxUser
from graders.sandbox.runner import Limits, StudentRunner

MIB = 1024**2


class StandIn:
    """What the watch stops: a transport's process, and the reason it is given."""

    stop_reason: str | None = None

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])


@pytest.fixture
def worker() -> Iterator[StandIn]:
    stand_in = StandIn()
    yield stand_in
    stand_in.process.kill()
    stand_in.process.wait()


@pytest.fixture(params=["inotify", "polling"])
def watch(request: pytest.FixtureRequest, tmp_path: Path,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[BoxWatch]:
    """A watch of 1 MiB and 8 entries over a box holding serving.py (with inotify, or
    scanning every POLL_S where inotify is refused)."""
    if request.param == "polling":
        monkeypatch.setattr(graders.sandbox.box_watch, "_inotify", lambda box: None)
    (tmp_path / "serving.py").write_text("x = 1\n")
    box_watch = BoxWatch(tmp_path, "serving.py", max_bytes=MIB, max_entries=8)
    yield box_watch
    box_watch.close()


def stopped(worker: StandIn) -> str | None:
    """Why the watch stopped ``worker``, once it is dead (a 10 s guard, not a measure)."""
    worker.process.wait(timeout=10)
    return worker.stop_reason


def test_a_box_past_its_bytes_stops_the_worker_and_says_so(
        watch: BoxWatch, worker: StandIn) -> None:
    watch.follow(worker)  # type: ignore[arg-type]
    for index in range(3):
        (watch.box / f"part-{index}").write_bytes(b"x" * (MIB // 2))
    assert stopped(worker) == ("its box held more than 1 MiB (the box's bound: 1 MiB and "
                               "8 files in all)")


def test_a_box_past_its_entries_stops_the_worker(watch: BoxWatch, worker: StandIn) -> None:
    watch.follow(worker)  # type: ignore[arg-type]
    for index in range(9):
        (watch.box / f"empty-{index}").touch()
    assert stopped(worker) == "its box held more than 8 files (the box's bound: 1 MiB and " \
        "8 files in all)"


def test_a_sparse_file_counts_in_full(watch: BoxWatch, worker: StandIn) -> None:
    # pages written through a mapping raise no event: its length is counted ahead
    watch.follow(worker)  # type: ignore[arg-type]
    with open(watch.box / "sparse", "wb") as handle:
        handle.truncate(2 * MIB)
    assert "more than 1 MiB" in str(stopped(worker))


def test_a_box_within_its_bound_keeps_its_worker_and_is_emptied_after(
        watch: BoxWatch, worker: StandIn) -> None:
    for index in range(6):  # with serving.py: 7 entries, 768 KiB
        (watch.box / f"part-{index}").write_bytes(b"x" * (MIB // 8))
    os.rename(watch.box / "part-0", watch.box / "renamed")
    (watch.box / "part-1").unlink()
    watch.follow(worker)  # type: ignore[arg-type]  # it looks at once, then as events come
    assert worker.process.poll() is None
    assert worker.stop_reason is None
    watch.empty()
    assert [path.name for path in watch.box.iterdir()] == ["serving.py"]


def test_an_emptied_box_stops_no_one_and_a_full_box_stops_the_next_worker(
        watch: BoxWatch, worker: StandIn) -> None:
    for index in range(9):
        (watch.box / f"empty-{index}").touch()
    watch.follow(None)  # no worker: nothing to stop
    watch.follow(worker)  # type: ignore[arg-type]
    assert "more than 8 files" in str(stopped(worker))


# --- the runner's landlocked worker, in a plain host folder ----------------------------------

PROBE = textwrap.dedent("""
    import errno
    import os

    def fill(size):
        index = 0
        try:
            while True:
                index += 1
                with open(f"fill-{index}", "wb") as handle:
                    handle.write(b"x" * size)
        except OSError as error:
            return errno.errorcode[error.errno]

    def mkdir():
        try:
            os.mkdir("folder")
        except OSError as error:
            return errno.errorcode[error.errno]

    def entries():
        return sorted(os.listdir("."))
""").encode()


@pytest.mark.parametrize("size", [4 * MIB, 0])
def test_the_landlocked_worker_is_stopped_past_the_boxs_bound_and_its_files_go_with_it(
        landlocked_unmounted: SandboxUser, size: int) -> None:
    with StudentRunner(PROBE, sandbox=landlocked_unmounted,
                       limits=Limits(call_timeout_s=60.0)) as runner:
        assert runner.protections.mode == modes.ROOT_NO_BUBBLEWRAP.name
        assert not runner.protections.box_mount
        assert runner.protections.description.endswith(f"; {WATCHED}")
        assert runner.call("mkdir").value == "EACCES"  # a flat box: one watch sees it all
        outcome = runner.call("fill", (size,))
        assert outcome.status == "crashed"
        bound = f"{BOX_BYTES // MIB} MiB" if size else f"{BOX_INODES} files"
        assert outcome.message == (
            f"the worker was stopped: its box held more than {bound} (the box's bound: "
            f"{BOX_BYTES // MIB} MiB and {BOX_INODES} files in all)")
        assert runner.call("entries").value == ["serving.py"]  # a fresh worker, emptied box
        box = runner.root / "box"
    assert not box.exists()


def test_a_box_the_grader_cannot_read_stops_the_worker(
        watch: BoxWatch, worker: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    # as an ordinary user the worker has the grader's uid and may chmod its box to 0: a box
    # the watch cannot read is not bounded, so the worker is stopped (fail closed)
    def refused(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    watch.follow(worker)  # type: ignore[arg-type]
    monkeypatch.setattr(os, "lstat", refused)
    monkeypatch.setattr(os, "scandir", refused)
    (watch.box / "unseen").write_bytes(b"x")
    assert stopped(worker) == "its box could not be read (Permission denied)"


def test_emptying_restores_the_boxs_mode_first(watch: BoxWatch) -> None:
    (watch.box / "left").write_bytes(b"x")
    watch.box.chmod(0)
    watch.empty()
    assert watch.box.stat().st_mode & 0o777 == 0o700
    assert sorted(path.name for path in watch.box.iterdir()) == ["serving.py"]
