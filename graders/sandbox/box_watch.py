"""The box's bound where it is a plain host folder (Landlock without a mounted tmpfs): a
thread SIGKILLs the worker once the flat box holds more than :data:`BOX_BYTES` or
:data:`BOX_INODES` entries, woken by inotify (or every :data:`POLL_S` where refused); what
it does not count: docs/security.md, "The box's watch"."""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import struct
import threading
import time
from pathlib import Path

from graders.sandbox.box_mount import BOX_BYTES, BOX_INODES
from graders.sandbox.cleanup import remove_tree, report_problems
from graders.sandbox.hardened import HardenedTransport
from graders.sandbox.portable import PortableTransport

# IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
EVENTS = 0x2 | 0x4 | 0x40 | 0x80 | 0x100 | 0x200
IN_Q_OVERFLOW, IN_ONLYDIR, IN_DONT_FOLLOW = 0x4000, 0x1000000, 0x2000000
HEADER = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then the name
#: Seconds between two full scans without events (for a write that raises none, if any),
#: and where inotify is refused.
RESCAN_S, POLL_S = 0.25, 0.005
#: Bytes of events read at once (about 100 events), the box checked after each read.
EVENT_BYTES = 4096
#: What the protections' description says of a watched box.
WATCHED = (f"its box is watched: the worker is stopped once it holds more than "
           f"{BOX_BYTES // 1024**2} MiB or {BOX_INODES} files")


class BoxWatch:
    """Watches ``box`` from a thread; stops the worker it follows once the box is full."""

    def __init__(self, box: Path, keep: str, *, max_bytes: int = BOX_BYTES,
                 max_entries: int = BOX_INODES) -> None:
        self.box, self._keep = box, keep
        self.max_bytes, self.max_entries = max_bytes, max_entries
        self._sizes: dict[str, int] = {}
        self.total = 0
        self._worker: HardenedTransport | PortableTransport | None = None
        self._lock = threading.Lock()
        self._folder = os.open(box, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        self._wake = os.pipe()
        self._events = _inotify(box)
        self._look(None)
        threading.Thread(target=self._run, daemon=True, name="serving-grader-box-watch").start()

    def follow(self, worker: HardenedTransport | PortableTransport | None) -> None:
        """Stop ``worker`` once the box is full (None: stop no worker, it is being stopped)."""
        with self._lock:
            self._worker = worker
            self._stop_if_full()

    def empty(self) -> None:
        """Remove every entry of the box but ``keep`` (its worker is gone)."""
        with self._lock:
            os.fchmod(self._folder, 0o700)  # as made: a worker of the grader's uid may chmod it
            problems = [line for entry in os.scandir(self.box) if entry.name != self._keep
                        for line in remove_tree(entry.path)]
            self._look(None)
        report_problems(problems)

    def close(self) -> None:
        """Stop watching; the thread closes its descriptors (inotify's takes ~8 ms)."""
        os.write(self._wake[1], b"x")
        os.close(self._wake[1])

    def _run(self) -> None:
        poller = select.poll()  # any descriptor number, unlike select()
        for fd in (self._wake[0], self._events):
            if fd is not None:
                poller.register(fd, select.POLLIN)
        wait_ms = 1000 * (RESCAN_S if self._events is not None else POLL_S)
        scanned = time.monotonic()
        while self._wake[0] not in (ready := {fd for fd, _ in poller.poll(wait_ms)}):
            names = self._read_events(self._events) if self._events in ready else None
            if names is None or time.monotonic() - scanned >= RESCAN_S:  # however busy
                names, scanned = None, time.monotonic()
            with self._lock:
                try:
                    self._look(names)
                except OSError as error:  # a box it cannot read (chmod 0) is not bounded
                    self._stop(f"its box could not be read ({error.strerror})")
                else:
                    self._stop_if_full()
        for fd in (self._folder, self._wake[0], self._events):
            if fd is not None:
                os.close(fd)

    @staticmethod
    def _read_events(fd: int) -> set[str] | None:
        """The names of one read's events (at most :data:`EVENT_BYTES`: the box is checked
        between two reads, so a worker that makes files faster than they are read is
        stopped as soon as the bound is crossed, not once the queue is drained); None
        after an overflow (scan all)."""
        names: set[str] | None = set()
        try:
            data = os.read(fd, EVENT_BYTES)
        except BlockingIOError:
            return names
        offset = 0
        while offset < len(data):
            _, mask, _, size = HEADER.unpack_from(data, offset)
            name = data[offset + HEADER.size:offset + HEADER.size + size].rstrip(b"\0")
            offset += HEADER.size + size
            if mask & IN_Q_OVERFLOW:
                names = None
            elif names is not None and name:
                names.add(os.fsdecode(name))
        return names

    def _look(self, names: set[str] | None) -> None:
        """Update the sizes of ``names`` (None: of every entry, from a fresh scan)."""
        if names is None:
            with os.scandir(self._folder) as entries:
                self._sizes = {entry.name: _size(entry.stat(follow_symlinks=False))
                               for entry in entries}
            self.total = sum(self._sizes.values())
            return
        for name in names:
            self.total -= self._sizes.pop(name, 0)
            with contextlib.suppress(FileNotFoundError):
                self._sizes[name] = _size(os.lstat(name, dir_fd=self._folder))
                self.total += self._sizes[name]

    def _stop_if_full(self) -> None:
        """SIGKILL the worker followed once the box holds too much (under the lock)."""
        over = (f"{self.max_bytes // 1024**2} MiB" if self.total > self.max_bytes else
                f"{self.max_entries} files" if len(self._sizes) > self.max_entries else None)
        if over is not None:
            self._stop(f"its box held more than {over} (the box's bound: "
                       f"{self.max_bytes // 1024**2} MiB and {self.max_entries} files in all)")

    def _stop(self, reason: str) -> None:
        """SIGKILL the worker followed, saying ``reason`` (under the lock)."""
        if self._worker is not None:
            self._worker.stop_reason = reason
            with contextlib.suppress(OSError):  # not reaped yet: the runner stops it first
                os.kill(self._worker.process.pid, signal.SIGKILL)
            self._worker = None


def _size(status: os.stat_result) -> int:
    return max(status.st_size, status.st_blocks * 512)


def _inotify(box: Path) -> int | None:
    """An inotify descriptor watching ``box`` (non-blocking), or None where refused."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, AttributeError):
        return None
    if fd < 0:
        return None
    if libc.inotify_add_watch(fd, os.fsencode(box), EVENTS | IN_ONLYDIR | IN_DONT_FOLLOW) < 0:
        os.close(fd)
        return None
    return int(fd)
