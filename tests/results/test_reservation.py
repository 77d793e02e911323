"""Results are written even when a submission filled the disk: their space is reserved."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from graders.results.files import Reservation, write_text_atomically


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs of its own (root only), so filling it fills nothing else."""
    mount = tmp_path / "disk"
    mount.mkdir(mode=0o700)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs",
                           str(mount)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(folder: Path) -> None:
    """Write until the file system is full."""
    with contextlib.suppress(OSError), (folder / "filler").open("wb") as stream:
        while True:
            stream.write(bytes(64 * 1024))
            stream.flush()


def test_a_reserved_output_is_written_on_a_full_disk(small_disk: Path) -> None:
    results = small_disk / "results.json"
    reservation = Reservation(results, 2 * 1024**2)
    fill(small_disk)
    with pytest.raises(OSError, match="No space left"):
        write_text_atomically(small_disk / "other.json", "x" * 100_000)
    text = "{" + "x" * 900_000 + "}\n"
    write_text_atomically(results, text, reservation=reservation)
    assert results.read_text(encoding="utf-8") == text
    assert os.stat(results).st_size == len(text)
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler", "results.json"]


def test_a_released_reservation_leaves_nothing(tmp_path: Path) -> None:
    reservation = Reservation(tmp_path / "results.json", 1024)
    reservation.release()
    reservation.release()
    assert list(tmp_path.iterdir()) == []


def test_an_output_larger_than_its_reservation_is_written_the_usual_way(
        tmp_path: Path) -> None:
    target = tmp_path / "results.json"
    reservation = Reservation(target, 10)
    write_text_atomically(target, "a longer text than ten bytes", reservation=reservation)
    assert target.read_text(encoding="utf-8") == "a longer text than ten bytes"
    reservation.release()
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]
