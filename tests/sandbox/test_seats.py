"""Seats: a submission's worker gets the same box and, as root, the same user in every
grading where namespaces cannot hide the host (``graders.sandbox.seats``, issue 32).

The end-to-end check (a submission that looks at its environment scores the same in two
gradings and a regrade, in every Linux mode) is in
``end_to_end/test_adversarial_values.py``; these pin the seat's own rules: which seat, one
holder at a time, a waiting grading told so, and a killed holder's leftovers removed.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graders.regrade.job
import graders.sandbox.seats as seats
from graders.regrade.job import JobContext
from graders.sandbox import landlock
from graders.sandbox.box_mount import mount_box, unmount_box
from graders.sandbox.cleanup import process_alive
from graders.sandbox.confinement import CAP_SYS_ADMIN, _has_capability
from graders.sandbox.runner import StudentRunner
from graders.sandbox.seats import SEATS, Seat, claim_seat, clear_seat, seat_of


@pytest.fixture
def seat_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The grader's cache folder, one of this test's own."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    monkeypatch.setattr(seats, "cache_folder", lambda: cache)
    return cache


@contextlib.contextmanager
def sleeping_in(folder: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A process left in ``folder`` (as a killed grading's worker), killed after if alive."""
    process = subprocess.Popen(["sleep", "60"], cwd=folder, start_new_session=True)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def claim_in_thread(submission: bytes) -> tuple[threading.Thread, list[Seat | None]]:
    """Claim ``submission``'s seat in a thread; the seat lands in the list."""
    claimed: list[Seat | None] = []
    thread = threading.Thread(target=lambda: claimed.append(claim_seat(submission)),
                              daemon=True)
    thread.start()
    return thread, claimed


@given(st.binary(max_size=256))
@settings(max_examples=200, deadline=None)
def test_a_submission_always_takes_the_same_seat_among_the_seats(source: bytes) -> None:
    assert seat_of(source) == seat_of(bytes(source))
    assert 1 <= seat_of(source) <= SEATS


def test_submissions_spread_over_every_seat() -> None:
    taken = {seat_of(f"submission {number}".encode()) for number in range(200)}
    assert taken == set(range(1, SEATS + 1))


def test_a_seat_is_the_same_box_and_user_in_every_claim(seat_cache: Path) -> None:
    source = b"def serve(): pass\n"
    first = claim_seat(source)
    assert first is not None
    first.release()
    again = claim_seat(source)
    assert again is not None
    try:
        assert again.box == first.box
        assert first.box.name == "box"
        assert first.box.parent.parent == seat_cache / "seats"
        # seat-N-TOKEN: a worker knows its own seat's folder and can name no other's
        assert re.fullmatch(f"seat-{seat_of(source)}-[0-9a-f]{{32}}", first.box.parent.name)
        if os.geteuid() == 0:  # the seat's pool user
            assert first.user is not None
            assert again.user is not None
            assert again.user.name == first.user.name == f"serving-sandbox-{seat_of(source)}"
            assert again.user.uid == first.user.uid
        else:
            assert first.user is None
            assert again.user is None
    finally:
        again.release()


def test_a_taken_seat_is_waited_for_and_the_wait_is_said(
        seat_cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = b"x = 1\n"
    held = claim_seat(source)
    assert held is not None
    try:
        assert claim_seat(source, wait=False) is None
        thread, claimed = claim_in_thread(source)
        time.sleep(0.3)
        assert thread.is_alive()
        assert claimed == []
    finally:
        held.release()
    thread.join(timeout=30)
    assert not thread.is_alive()
    seat = claimed[0]
    assert seat is not None
    assert seat.box == held.box
    seat.release()
    assert f"waiting for seat {seat_of(source)}" in capsys.readouterr().err


def test_seats_have_folders_of_their_own_tokens(seat_cache: Path) -> None:
    one_each = {seat_of(f"submission {n}".encode()): f"submission {n}".encode()
                for n in range(200)}
    folders = set()
    for source in one_each.values():
        seat = claim_seat(source)
        assert seat is not None
        seat.release()
        folders.add(seat.box.parent.name)
    assert len(folders) == len({name.split("-")[1] for name in folders}) == SEATS
    assert len({name.split("-")[2] for name in folders}) == SEATS


def test_taking_a_seat_removes_what_a_killed_holder_left(seat_cache: Path) -> None:
    source = b"y = 2\n"
    first = claim_seat(source)
    assert first is not None
    first.release()
    box = first.box
    box.mkdir()
    (box / "planted.txt").write_text("left by a killed grading")
    with sleeping_in(box) as left:
        seat = claim_seat(source)
        assert seat is not None
        seat.release()
        left.wait(timeout=10)  # killed by the claim
        assert not process_alive(left.pid)
        assert not box.exists()


def test_clearing_a_seat_removes_leftovers_only_when_no_grading_holds_it(
        seat_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(seats, "seated", lambda: True)
    source = b"z = 3\n"
    held = claim_seat(source)
    assert held is not None
    held.box.mkdir()
    (held.box / "serving.py").write_bytes(source)
    try:
        with sleeping_in(held.box) as running:
            clear_seat(source)  # the holder's worker is left alone
            assert running.poll() is None
            assert (held.box / "serving.py").exists()
            held.release()  # as when its grading is killed: the lock goes, the worker stays
            clear_seat(source)
            running.wait(timeout=10)
            assert not held.box.exists()
    finally:
        held.release()


def test_where_workers_have_namespaces_clearing_takes_no_seat(
        seat_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(seats, "seated", lambda: False)
    clear_seat(b"w = 4\n")
    assert not (seat_cache / "seats").exists()


#: A process Landlock lets write only the box (argv[1]); once told to (a line on stdin),
#: it tries to write a file there and prints what happened.
EARLIER_WORKER = """
import sys
from graders.sandbox import landlock
landlock.restrict(read=[sys.prefix, sys.base_prefix, "/usr", "/lib", "/etc"], write=[sys.argv[1]])
print("restricted", flush=True)
sys.stdin.readline()
try:
    with open(sys.argv[1] + "/planted.py", "w") as planted:
        planted.write("print('planted')")
    print("wrote", flush=True)
except OSError as error:
    print("refused", error.errno, flush=True)
"""


def test_a_runner_in_a_seat_gets_a_box_an_earlier_workers_leftover_cannot_write(
        tmp_path: Path) -> None:
    # Landlock's rule holds the box's inode, not its path: the box is made anew, so a
    # leftover of an earlier worker (one the sweep could not find) cannot write the next
    if landlock.unavailable() is not None:
        pytest.skip(str(landlock.unavailable()))
    box = tmp_path / "seat-1" / "box"
    box.mkdir(parents=True)
    (box / "left.txt").write_text("left by an earlier worker")
    with subprocess.Popen([sys.executable, "-c", EARLIER_WORKER, str(box)], text=True,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE) as earlier:
        assert earlier.stdout is not None
        assert earlier.stdin is not None
        assert earlier.stdout.readline().strip() == "restricted"
        with StudentRunner(b"x = 1\n", box=box):
            assert box.is_dir()
            assert not (box / "left.txt").exists()
            earlier.stdin.write("go\n")
            earlier.stdin.flush()
            assert earlier.stdout.readline().split()[0] == "refused"
            assert not (box / "planted.py").exists()
    assert not box.exists()  # removed with the runner


def test_the_same_leftover_could_write_a_box_kept_as_it_was(tmp_path: Path) -> None:
    # the check above has teeth: the same process writes into the box it was given
    if landlock.unavailable() is not None:
        pytest.skip(str(landlock.unavailable()))
    box = tmp_path / "box"
    box.mkdir()
    completed = subprocess.run([sys.executable, "-c", EARLIER_WORKER, str(box)], input="go\n",
                               text=True, capture_output=True, check=True)
    assert completed.stdout.split() == ["restricted", "wrote"]


@pytest.mark.skipif(not (os.geteuid() == 0 and _has_capability(CAP_SYS_ADMIN)),
                    reason="mounting a box needs root with CAP_SYS_ADMIN")
def test_a_named_user_taking_a_seat_detaches_a_killed_holders_box_mount(
        seat_cache: Path) -> None:
    source = b"v = 5\n"
    held = claim_seat(source)
    assert held is not None
    assert held.user is not None
    held.box.mkdir()
    assert mount_box(held.box, held.user.uid, held.user.gid) is None
    held.release()  # killed: the mount stays, owned by the seat's pool user
    try:
        named = claim_seat(source, sandbox_user="serving-sandbox-63")
        assert named is not None
        named.release()
        assert not os.path.ismount(held.box)
        assert not held.box.exists()
    finally:
        if os.path.ismount(held.box):
            unmount_box(held.box)


def test_a_regrades_jobs_of_one_seat_run_in_turn_and_each_clears_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cleared: list[bytes] = []
    monkeypatch.setattr(graders.regrade.job, "clear_seat", cleared.append)
    context = JobContext(out=tmp_path, grader_sha256="", timeout_s=60)
    context.take_seats()
    source = b"u = 6\n"
    inside = threading.Event()
    leave = threading.Event()
    order: list[str] = []

    def first() -> None:
        with context.seat(source):
            order.append("first in")
            inside.set()
            leave.wait(10)
            order.append("first out")

    def second() -> None:
        inside.wait(10)
        with context.seat(source):  # the same seat: after the first
            order.append("second in")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    inside.wait(10)
    time.sleep(0.2)
    assert order == ["first in"]  # the second waits, before its clock starts
    leave.set()
    for thread in threads:
        thread.join(10)
    assert order == ["first in", "first out", "second in"]
    assert cleared == [source, source]


def test_without_seats_a_regrades_jobs_take_none(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    cleared: list[bytes] = []
    monkeypatch.setattr(graders.regrade.job, "clear_seat", cleared.append)
    context = JobContext(out=tmp_path, grader_sha256="", timeout_s=60)
    with context.seat(b"t = 7\n"), context.seat(b"t = 7\n"):  # no lock to wait for
        pass
    assert cleared == []
