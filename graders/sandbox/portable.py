"""The portable transport, where the hardened one cannot run: plain pipes, each served by
a daemon thread (a worker that stops reading blocks that thread, never the grader); a stop
kills the worker's process tree. Its bound on a worker's memory and every process it
starts: a Job Object on Windows, a watch of its process tree through ``ps`` elsewhere
(what each holds, and the watch's gaps: docs/security.md, "Supported systems")."""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from graders.sandbox import platforms as platform_support
from graders.sandbox.limits import Limits
from graders.sandbox.output import OutputSink
from graders.sandbox.worker_command import OUTPUT_CHUNK_BYTES, REPLY_CHUNK_BYTES, WorkerCommand

#: Seconds a stop waits for the output thread to take in what the killed worker wrote.
OUTPUT_JOIN_S = 1.0


class PortableTransport:
    """A worker at the head of a process tree, its pipes served by threads."""

    def __init__(self, command: WorkerCommand, sink: OutputSink, limits: Limits) -> None:
        group: dict[str, Any] = {"start_new_session": True}  # a tree it can be killed with
        if sys.platform == "win32":
            group = {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
        self.process = command.popen(stderr=subprocess.PIPE, **group)
        #: Reply chunks (b"" at the end); bounded, so that a worker that writes without end
        #: blocks its thread instead of filling memory.
        self._replies: queue.Queue[bytes] = queue.Queue(
            maxsize=limits.max_reply_bytes // REPLY_CHUNK_BYTES + 2)
        _thread("replies", _pump, self.process.stdout, REPLY_CHUNK_BYTES, self._replies.put,
                b"")
        self._output = _thread("output", _pump, self.process.stderr, OUTPUT_CHUNK_BYTES,
                               sink.feed, None)
        # before the worker reads its first request: nothing of the student's runs yet
        self._containment = contain(self.process, limits.address_space_bytes)
        self._box_reason: str | None = None
        #: Requests for the writer thread (None: stop and close the pipe).
        self._requests: queue.Queue[bytes | None] = queue.Queue()
        _thread("requests", self._write_requests)

    @property
    def stop_reason(self) -> str | None:
        return self._box_reason or (self._containment.reason if self._containment else None)

    @stop_reason.setter
    def stop_reason(self, reason: str) -> None:
        """Why the box's watch stopped the worker (where Landlock confines it to its box)."""
        self._box_reason = reason

    def send(self, line: bytes, *, flush: bool = True) -> None:
        self._requests.put(line)

    def flush(self) -> None:
        """Nothing to do: the writer thread writes every request as it comes."""

    def _write_requests(self) -> None:
        stream = self.process.stdin
        assert stream is not None
        with contextlib.suppress(Exception):
            while (line := self._requests.get()) is not None:
                stream.write(line)
                stream.flush()
        with contextlib.suppress(Exception):
            stream.close()

    def receive(self, wait_s: float) -> bytes | None:
        try:
            return self._replies.get(timeout=wait_s)
        except queue.Empty:
            return None

    def drain(self) -> None:
        """Nothing to do: the output thread drains the output as it comes."""

    def stop(self) -> None:
        """Kill the worker's process tree, then give the output thread a moment to take in
        what it wrote (a process left in a session of its own may keep the pipe open)."""
        if self._containment is not None:  # first: it finds the worker's tree through it
            self._containment.close()
        platform_support.kill_tree(self.process)
        self._requests.put(None)  # its thread closes the pipe, once a write ends
        try:
            self.process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self._output.join(OUTPUT_JOIN_S)


def _pump(stream: Any, size: int, take: Callable[[bytes], object], end: bytes | None) -> None:
    """Pass ``stream``'s chunks to ``take`` until it ends, then close it and pass ``end``."""
    with contextlib.suppress(Exception):
        while chunk := stream.read1(size):
            take(chunk)
    with contextlib.suppress(Exception):
        stream.close()
    if end is not None:
        take(end)


def _thread(name: str, target: Callable[..., None], *args: object) -> threading.Thread:
    """A daemon thread of this transport, started."""
    thread = threading.Thread(target=target, args=args, daemon=True,
                              name=f"serving-grader-{name}")
    thread.start()
    return thread


#: Seconds between two looks at the process table; looks at a frozen tree, at most, before
#: it is killed; seconds ``ps`` may take.
WATCH_INTERVAL_S, FREEZE_ROUNDS, PS_TIMEOUT_S = 0.5, 8, 5.0
#: Processes a worker's job may hold at once: the interpreter, and the one a Windows
#: virtual environment's ``python.exe`` launcher starts.
JOB_PROCESSES = 2


# --- the process table, through ps (POSIX) -----------------------------------------------------


@dataclass(frozen=True)
class ProcessRow:
    pid: int
    ppid: int
    pgid: int
    rss_bytes: int
    #: When it started, as ps prints it: with the pid, names one process (pids are reused).
    started: str


def process_table() -> dict[int, ProcessRow] | None:
    """Every process, by pid, from ``ps`` (procps, BSD and macOS); None where it fails."""
    try:  # no ps: FileNotFoundError
        listing = subprocess.run([shutil.which("ps") or "ps", "-A", "-o",
                                  "pid=,ppid=,pgid=,rss=,lstart="],
                                 capture_output=True, text=True, timeout=PS_TIMEOUT_S,
                                 check=False, env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.SubprocessError):
        return None
    if listing.returncode != 0:
        return None
    table = {}
    for line in listing.stdout.splitlines():
        fields = line.split(None, 4)
        if len(fields) == 5 and all(f.isdigit() for f in fields[:4]):
            pid, ppid, pgid, rss = map(int, fields[:4])
            table[pid] = ProcessRow(pid, ppid, pgid, rss * 1024, fields[4].strip())
    return table


def tree(root: int, table: dict[int, ProcessRow]) -> set[int]:
    """``root``, its descendants and the members of its process group, as in ``table``."""
    children: dict[int, list[int]] = {}
    for row in table.values():
        children.setdefault(row.ppid, []).append(row.pid)
    found = {pid for pid, row in table.items() if row.pgid == root or pid == root}
    stack = list(found)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


class TreeWatch:
    """Watches the worker ``pid``'s tree (descendants and process group): kills it all once
    its resident memory passes ``memory_bytes``, and every process seen in it at close."""

    def __init__(self, pid: int, memory_bytes: int, *,
                 table: Callable[[], dict[int, ProcessRow] | None] = process_table,
                 interval_s: float = WATCH_INTERVAL_S,
                 unreaped: Callable[[], bool] | None = None) -> None:
        self.pid, self.memory_bytes, self._table, self._interval_s = \
            pid, memory_bytes, table, interval_s
        #: Whether ``pid`` is the grader's child and not reaped yet (so still its own).
        self._unreaped = unreaped
        #: Why it stopped the worker, once it has ("" until then).
        self.reason = ""
        self._seen: dict[int, str] = {}  # pid: its start time, for every process seen
        self._lock, self._stopped = threading.Lock(), threading.Event()
        self._resident = 0  # the tree's memory at the last look
        threading.Thread(target=self._watch, daemon=True, name="serving-grader-watch").start()

    def _watch(self) -> None:
        while not self._stopped.wait(self.next_interval_s()):
            with contextlib.suppress(Exception):  # a look that fails is the next one's
                self.look()

    def next_interval_s(self) -> float:
        """Seconds to the next look: a tenth of the interval past half the bound."""
        near = self._resident >= self.memory_bytes // 2
        return self._interval_s / 10 if near else self._interval_s

    def look(self) -> None:
        """Read the process table once: remember the tree, and kill it past the bound."""
        with self._lock:
            table = self._table()
            if table is None:
                return
            members = tree(self.pid, table)
            for pid in members:
                self._seen[pid] = table[pid].started
            resident = self._resident = sum(table[pid].rss_bytes for pid in members)
            if resident > self.memory_bytes and not self._stopped.is_set():
                self.reason = (f"its processes used more than {self.memory_bytes // 1024**2} "
                               "MiB of memory")
                self._kill(table)

    def close(self) -> None:
        """Freeze the tree (SIGSTOP) until no new process shows, then kill every process
        seen in it (still the same: same start time). Call it while the worker lives."""
        self._stopped.set()
        with contextlib.suppress(Exception), self._lock:
            frozen: set[int] = set()
            if self._unreaped is not None and self._unreaped():
                # the worker first, without a look (one less ps): its pid is still its own
                with contextlib.suppress(OSError):
                    os.kill(self.pid, signal.SIGSTOP)
                frozen.add(self.pid)
            table = None
            for _ in range(FREEZE_ROUNDS):
                table = self._table()
                if table is None:
                    break
                members = tree(self.pid, table) | {
                    pid for pid, started in self._seen.items()
                    if pid in table and table[pid].started == started}
                members.discard(os.getpid())
                for pid in members & table.keys():
                    self._seen[pid] = table[pid].started
                if not members - frozen:
                    break
                for pid in members - frozen:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGSTOP)
                frozen |= members
            self._kill(table)

    def _kill(self, table: dict[int, ProcessRow] | None) -> None:
        """SIGKILL each process seen in the tree that is still the same process."""
        if table is None:
            return
        for pid, started in list(self._seen.items()):
            row = table.get(pid)
            if row is not None and row.started == started and pid != os.getpid():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)


# --- the Job Object (Windows) ------------------------------------------------------------------

JOB_OBJECT_LIMIT_ACTIVE_PROCESS, JOB_OBJECT_LIMIT_JOB_MEMORY = 0x00000008, 0x00000200
JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x400, 0x2000
JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS = 9
PROCESS_TERMINATE, PROCESS_SET_QUOTA = 0x0001, 0x0100

DWORD = ctypes.c_uint32


class BasicLimits(ctypes.Structure):
    """JOBOBJECT_BASIC_LIMIT_INFORMATION."""

    _fields_ = [("PerProcessUserTimeLimit", ctypes.c_int64),
                ("PerJobUserTimeLimit", ctypes.c_int64), ("LimitFlags", DWORD),
                ("MinimumWorkingSetSize", ctypes.c_size_t),
                ("MaximumWorkingSetSize", ctypes.c_size_t), ("ActiveProcessLimit", DWORD),
                ("Affinity", ctypes.c_size_t), ("PriorityClass", DWORD),
                ("SchedulingClass", DWORD)]


class ExtendedLimits(ctypes.Structure):
    """JOBOBJECT_EXTENDED_LIMIT_INFORMATION."""

    _fields_ = [("BasicLimitInformation", BasicLimits),
                ("IoInfo", ctypes.c_uint64 * 6),  # IO_COUNTERS: six counts, unused
                *((name, ctypes.c_size_t) for name in (
                    "ProcessMemoryLimit", "JobMemoryLimit", "PeakProcessMemoryUsed",
                    "PeakJobMemoryUsed"))]


class JobObject:
    """A Windows Job Object holding the worker ``pid`` and all it starts, terminated with
    it; ``kernel32`` is given by tests. Raises OSError where the worker cannot join one."""

    def __init__(self, pid: int, memory_bytes: int, *, kernel32: Any = None) -> None:
        self.reason = ""
        self._kernel32 = kernel32 if kernel32 is not None else _kernel32()
        self._job = self._kernel32.CreateJobObjectW(None, None)
        if not self._job:
            raise OSError("CreateJobObjectW failed")
        try:  # memory_bytes in all, JOB_PROCESSES at once, every one killed on close
            limits = ExtendedLimits(JobMemoryLimit=memory_bytes)
            limits.BasicLimitInformation.LimitFlags = (
                JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | JOB_OBJECT_LIMIT_JOB_MEMORY
                | JOB_OBJECT_LIMIT_ACTIVE_PROCESS | JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION)
            limits.BasicLimitInformation.ActiveProcessLimit = JOB_PROCESSES
            if not self._kernel32.SetInformationJobObject(
                    self._job, JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS,
                    ctypes.byref(limits), ctypes.sizeof(limits)):
                raise OSError("SetInformationJobObject failed")
            process = self._kernel32.OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE,
                                                 False, pid)
            if not process:
                raise OSError("OpenProcess failed")
            try:
                if not self._kernel32.AssignProcessToJobObject(self._job, process):
                    raise OSError("AssignProcessToJobObject failed")
            finally:
                self._kernel32.CloseHandle(process)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Terminate every process of the job, and close it. Never raises."""
        job, self._job = self._job, None
        if job:
            with contextlib.suppress(Exception):
                self._kernel32.TerminateJobObject(job, 1)
            with contextlib.suppress(Exception):
                self._kernel32.CloseHandle(job)


def _kernel32() -> Any:
    windll: Any = getattr(ctypes, "WinDLL", None)
    if windll is None:
        raise OSError("no Windows API here")
    kernel32 = windll("kernel32", use_last_error=True)
    kernel32.CreateJobObjectW.restype = ctypes.c_void_p
    kernel32.OpenProcess.restype = ctypes.c_void_p
    kernel32.SetInformationJobObject.argtypes = [ctypes.c_void_p, ctypes.c_int,
                                                 ctypes.c_void_p, DWORD]
    kernel32.AssignProcessToJobObject.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    kernel32.TerminateJobObject.argtypes = [ctypes.c_void_p, ctypes.c_uint]
    kernel32.CloseHandle.argtypes = [ctypes.c_void_p]
    return kernel32


def contain(process: subprocess.Popen[bytes], memory_bytes: int
            ) -> JobObject | TreeWatch | None:
    """A Job Object on Windows, a tree watch where ``ps`` runs, else None."""
    if sys.platform == "win32":
        try:
            return JobObject(process.pid, memory_bytes)
        except OSError:
            return None
    return None if shutil.which("ps") is None else \
        TreeWatch(process.pid, memory_bytes, unreaped=lambda: process.returncode is None)
