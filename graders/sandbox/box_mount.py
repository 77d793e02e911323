"""The worker's box as a tmpfs of its own (root with CAP_SYS_ADMIN): at most
:data:`BOX_BYTES` and :data:`BOX_INODES`, nosuid, nodev, noexec, the sandbox user's;
mounted on the box folder before the worker starts, detached when the runner closes."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
from pathlib import Path

#: The box's bytes and inodes (files, folders and links; serving.py takes one).
BOX_BYTES = 64 * 1024**2
BOX_INODES = 4096
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MNT_DETACH, _UMOUNT_NOFOLLOW = 2, 4, 8, 2, 8
#: The source every box's tmpfs is mounted with (how a stale one is found again).
SOURCE = "serving-grader-box"


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def mount_box(box: Path, uid: int, gid: int) -> str | None:
    """Mount the box's tmpfs on the folder ``box`` (never a link); None, else why not."""
    fd = os.open(box, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        options = (f"size={BOX_BYTES},nr_inodes={BOX_INODES},mode=0700,"
                   f"uid={uid},gid={gid}").encode()
        if _libc().mount(SOURCE.encode(), f"/proc/self/fd/{fd}".encode(), b"tmpfs",
                         _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, options) != 0:
            return f"the box's tmpfs cannot be mounted: {os.strerror(ctypes.get_errno())}"
    except (AttributeError, OSError) as error:  # no mount(2) in this libc
        return f"the box's tmpfs cannot be mounted: {error}"
    finally:
        os.close(fd)
    return None


def unmount_box(box: Path) -> list[str]:
    """Detach the box's tmpfs from ``box`` (lazily); what went wrong, for the report."""
    if _libc().umount2(str(box).encode(), _MNT_DETACH | _UMOUNT_NOFOLLOW) != 0:
        return [f"unmounting {box}: {os.strerror(ctypes.get_errno())}"]
    return []


def stale_boxes_of(uid: int, mountinfo: str = "/proc/self/mountinfo") -> list[Path]:
    """The box mounts ``uid`` owns that a killed grading could not detach (for the sweep)."""
    found = []
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                fields = line.split()
                after = fields.index("-") if "-" in fields else -1
                if after < 0 or fields[after + 1:after + 3] != ["tmpfs", SOURCE]:
                    continue
                point = Path(fields[4].replace("\\040", " ").replace("\\011", "\t")
                             .replace("\\012", "\n").replace("\\134", "\\"))
                with contextlib.suppress(OSError):  # gone meanwhile
                    if os.lstat(point).st_uid == uid:
                        found.append(point)
    except OSError:  # no /proc
        pass
    return found
