"""Job slots of a class regrade: each with its own folder and, as root, its own sandbox user.

Two hostile workers that run at the same time as the same user could signal or read each
other, so every slot has a user of its own (``serving-sandbox-1``, ...), claimed with a
lock so that two regrades on one machine never share one. After each job, every process
of the slot's user, and every process that carries the slot's folder in its working
folder or environment, is killed; files the user left in the shared temp folders are
removed; the slot's temp folder is emptied but for the grader's self-checking caches.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import stat
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from graders.sandbox import (
    DEFAULT_SANDBOX_USER,
    SandboxError,
    SandboxUser,
    ensure_sandbox_user,
    running_as_root,
)

#: Temp-folder entries kept between jobs: caches the grader verifies before each use.
CACHE_PREFIXES = ("serving-grader-runtime-", "serving-grader-python-")
#: Shared, world-writable folders a sandbox user may leave files in.
SHARED_TEMP = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))
#: Slot users tried before giving up (others may be held by concurrent regrades).
MAX_SLOT_USERS = 64
_KILL_ROUNDS = 5


@dataclass
class Slot:
    """One place to run a grading: a private folder, and as root a user of its own."""

    number: int
    folder: Path
    user: SandboxUser | None = None
    lock: int | None = None

    @property
    def temp(self) -> Path:
        """The TMPDIR of the slot's gradings (the worker's box and caches live below)."""
        return self.folder / "tmp"

    def stop_processes(self) -> list[int]:
        """Kill what the last job left running (and, as root, what its user left in the
        shared temp folders); return the killed pids."""
        killed = kill_marked(f"{self.folder}/")
        if self.user is not None:
            killed += kill_user(self.user.uid)
            remove_files_of(self.user.uid)
        return killed

    def clean(self) -> None:
        """Stop the last job's processes and empty the slot's folder but for the caches."""
        self.stop_processes()
        for entry in list(self.temp.iterdir()) if self.temp.is_dir() else []:
            if not entry.name.startswith(CACHE_PREFIXES):
                _remove(entry)
        for name in os.listdir(self.folder):
            if name != "tmp":
                _remove(self.folder / name)


def claim_slots(count: int, root: Path) -> list[Slot]:
    """``count`` slots with folders below ``root``; as root each gets a sandbox user of its
    own, locked for this process (released by :func:`release_slots` or at exit)."""
    slots: list[Slot] = []
    try:
        number = 0
        while len(slots) < count:
            number += 1
            user, lock = None, None
            if running_as_root():
                if number > MAX_SLOT_USERS:
                    raise SandboxError(f"no free sandbox user among {DEFAULT_SANDBOX_USER}-1 to "
                                       f"-{MAX_SLOT_USERS}: other regrades hold them")
                name = f"{DEFAULT_SANDBOX_USER}-{number}"
                lock = _try_lock(name)
                if lock is None:
                    continue
                user = ensure_sandbox_user(name)
            folder = root / f"slot-{len(slots) + 1}"
            (folder / "tmp").mkdir(parents=True)
            for path in (folder, folder / "tmp"):  # the sandbox user must reach its box,
                path.chmod(0o711)                  # and no other slot's user may list them
            slots.append(Slot(len(slots) + 1, folder, user, lock))
    except BaseException:
        release_slots(slots)
        raise
    return slots


def release_slots(slots: list[Slot]) -> None:
    """Clean every slot and give its user back."""
    for slot in slots:
        slot.clean()
        if slot.lock is not None:
            os.close(slot.lock)
            slot.lock = None


def _lock_folder() -> Path:
    """Where slot locks live: a root-only folder, out of the sandbox users' reach."""
    folder = Path("/run/serving-grader") if Path("/run").is_dir() else \
        Path(tempfile.gettempdir()) / f"serving-grader-locks-{os.geteuid()}"
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o755)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() \
            or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise SandboxError(f"lock folder {folder} must be a folder owned by this user and "
                           "writable by no one else; remove it and retry")
    return folder


def _try_lock(name: str) -> int | None:
    """An open descriptor holding the lock of sandbox user ``name``, or None if taken."""
    path = _lock_folder() / f"{name}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _processes() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc")
            if entry.isdigit() and int(entry) != os.getpid()]


def _kill_until_gone(match: Callable[[int], bool]) -> list[int]:
    """SIGKILL every process ``match(pid)`` selects, in rounds, until none is left."""
    killed: list[int] = []
    for _ in range(_KILL_ROUNDS):
        found = [pid for pid in _processes() if match(pid)]
        if not found:
            break
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        time.sleep(0.05)
    return sorted(set(killed))


def kill_user(uid: int) -> list[int]:
    """SIGKILL every process whose real, effective or saved uid is ``uid``."""
    def owned(pid: int) -> bool:
        try:
            status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
        for line in status.splitlines():
            if line.startswith("Uid:"):
                return str(uid) in line.split()[1:4]
        return False

    return _kill_until_gone(owned)


def kill_marked(marker: str) -> list[int]:
    """SIGKILL every process whose working folder or environment contains ``marker``."""
    needle = marker.encode()

    def marked(pid: int) -> bool:
        with contextlib.suppress(OSError):
            if needle in (os.readlink(f"/proc/{pid}/cwd") + "/").encode():
                return True
        try:
            return needle in Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            return False

    return _kill_until_gone(marked)


def remove_files_of(uid: int) -> None:
    """Remove what ``uid`` left at the top of the shared temp folders."""
    for folder in SHARED_TEMP:
        with contextlib.suppress(OSError):
            for entry in folder.iterdir():
                with contextlib.suppress(OSError):
                    if entry.lstat().st_uid == uid:
                        _remove(entry)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
