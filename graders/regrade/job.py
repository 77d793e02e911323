"""One submission of a regrade: ``graders grade`` in the slot's grading process, bounded by
a wall clock.

The grading is the same trusted, isolated grading as a single ``graders grade``: it grades
a private copy of the submission's ``serving.py`` from the slot's private folder, with the
slot's sandbox user (the regrade holds its lock and passes it down, so the grading
neither claims another user nor waits for this one), in the slot's long-lived grading
process (see :mod:`graders.regrade.server`), which runs in a session of its own. Past the
timeout that process group is killed, the slot is cleaned, and fallback results say why.
Student code never runs in the regrade process, nor in the grading process.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import graders
from graders.errors import BELOW_FAIL_UNDER_EXIT, SubmissionError
from graders.plugin.submission import read_submission
from graders.regrade.roster import ClassSubmission, file_name, submission_file, visible_name
from graders.regrade.server import GradingProcess
from graders.regrade.slots import Slot
from graders.regrade.state import RESULTS_NAME, JobRecord, sha256, write_record
from graders.results.reports import (
    grader_failure_results,
    read_grader_failure,
    read_valid_results,
    unusable_submission_results,
    write_json_atomically,
    write_results,
)
from graders.sandbox.privileges import LOCK_VARIABLE
from graders.sandbox.seats import SEATS, clear_seat, seat_of
from graders.sandbox.submission import SUBMISSION_NAME

LOG_NAME = "grade.log"
#: Each student's HTML feedback page, written with ``graders regrade --pages``.
PAGE_NAME = "feedback.html"
#: The end of the grading log kept beside each submission's results.
LOG_TAIL_BYTES = 64 * 1024


@dataclass
class JobContext:
    """What every job of one regrade shares."""

    out: Path
    grader_sha256: str
    timeout_s: float
    grade_options: list[str] = field(default_factory=list)
    #: Whether each student's HTML page is written too (``PAGE_NAME`` beside results.json).
    pages: bool = False
    #: Set on interrupt: jobs not started yet are not started, running ones are killed.
    stop: threading.Event = field(default_factory=threading.Event)
    _running: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    #: Each slot's grading process, by slot number.
    _processes: dict[int, GradingProcess] = field(default_factory=dict)
    #: Where gradings take seats (graders.sandbox.seats): a lock for each seat.
    seat_locks: dict[int, threading.Lock] | None = None

    def take_seats(self) -> None:
        """Gradings here take seats: this regrade's jobs of one seat run in turn."""
        self.seat_locks = {number: threading.Lock() for number in range(1, SEATS + 1)}

    @contextlib.contextmanager
    def seat(self, data: bytes) -> Iterator[None]:
        """Within, no other job of this regrade grades in the seat of ``data`` (waited for
        before the job's clock starts); the seat is cleared after, whatever happened (a
        grading that died or was stopped may leave its worker or its box there)."""
        if self.seat_locks is None:
            yield
            return
        with self.seat_locks[seat_of(data)]:
            try:
                yield
            finally:
                clear_seat(data)

    def grading_process(self, slot: Slot) -> GradingProcess:
        """The slot's grading process (started on its first job)."""
        with self._lock:
            if slot.number not in self._processes:
                self._processes[slot.number] = GradingProcess(
                    cwd=slot.private, environment=child_environment(slot),
                    pass_fds=passed_fds(slot), register=self.register,
                    unregister=self.unregister)
            return self._processes[slot.number]

    def stop_processes(self) -> None:
        """Stop every slot's grading process (at the end of the regrade)."""
        with self._lock:
            processes = list(self._processes.values())
            self._processes.clear()
        for process in processes:
            process.stop()

    def folder(self, submission: ClassSubmission) -> Path:
        """The submission's output folder, named by its id's UTF-8 bytes whatever the
        locale: a run under another one finds the same folder."""
        return self.out / "submissions" / file_name(submission.id)

    def register(self, process: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._running[process.pid] = process
        if self.stop.is_set():  # interrupted while it started
            self.kill_running()

    def unregister(self, process: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._running.pop(process.pid, None)

    def kill_running(self) -> None:
        """Kill the process group of every grading in progress."""
        with self._lock:
            for process in self._running.values():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)


def grade_arguments(staged: Path, results: Path, slot: Slot, options: list[str]) -> list[str]:
    """The ``graders grade`` arguments of one job."""
    arguments = [str(staged), "--results", str(results), "-q", *options]
    if slot.user is not None:
        arguments += ["--sandbox-user", slot.user.name]
    return arguments


def child_environment(slot: Slot) -> dict[str, str]:
    """This environment, with the slot's TMPDIR, no pytest settings and no -O (which the
    grading refuses), this grader first on the path (so the grading process grades with
    exactly the code that planned the job), and, as root, the slot user's lock handed down
    (see :func:`passed_fds`)."""
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith("PYTEST_")
                   and key not in (LOCK_VARIABLE, "PYTHONOPTIMIZE")}
    environment["TMPDIR"] = str(slot.temp)
    if slot.user is not None and slot.user.claim is not None:
        environment.update(slot.user.claim.inheritance())
    source = str(Path(graders.__file__).resolve().parent.parent)
    environment["PYTHONPATH"] = os.pathsep.join(
        [source, *filter(None, environment.get("PYTHONPATH", "").split(os.pathsep))])
    return environment


def passed_fds(slot: Slot) -> tuple[int, ...]:
    """The descriptors the child inherits: the lock on the slot's sandbox user, if any."""
    claim = slot.user.claim if slot.user is not None else None
    return (claim.fd,) if claim is not None and claim.fd is not None else ()


def run_job(submission: ClassSubmission, slot: Slot, context: JobContext) -> JobRecord | None:
    """Grade ``submission`` in ``slot`` and store its results and record; None when the
    regrade was interrupted before the job finished."""
    if context.stop.is_set():
        return None
    folder = context.folder(submission)
    started = time.monotonic()
    try:
        source = submission_file(submission)
        data = read_submission(source)
    except SubmissionError as error:
        reason = visible_name(str(error).replace(str(submission.path.parent) + os.sep, ""))
        _keep_page(None, folder / PAGE_NAME)  # an earlier grading's page is no longer its
        return _store(context, submission, folder, "rejected", reason, "", started, None,
                      unusable_submission_results(reason))
    with context.seat(data):
        return _grade_in_slot(submission, slot, context, data, folder, source, started)


def _grade_in_slot(submission: ClassSubmission, slot: Slot, context: JobContext, data: bytes,
                   folder: Path, source: Path, started: float) -> JobRecord | None:
    """:func:`run_job` once ``data`` is read and its seat (if any) is this job's."""
    grading = context.grading_process(slot)
    slot.clean(spare=_pids(grading))
    private = slot.private  # root's alone, in OUT: no sandbox user reads or fills these
    staged = private / "submission" / SUBMISSION_NAME
    staged.parent.mkdir()
    staged.write_bytes(data)
    results = private / RESULTS_NAME
    log = private / LOG_NAME
    page = private / PAGE_NAME
    options = [*context.grade_options, *(["--html", str(page)] if context.pages else [])]
    code, timed_out = grading.grade(grade_arguments(staged, results, slot, options), log,
                                    context.timeout_s)
    if context.stop.is_set():
        grading.stop()
        slot.clean()
        return None
    document = read_valid_results(results)
    status, reason = _outcome(code, timed_out, document, read_grader_failure(results), log,
                              context.timeout_s)
    if status != "graded" or document is None:
        document = grader_failure_results(reason)
    _keep_log_tail(log, folder / LOG_NAME)
    _keep_page(page if context.pages and not timed_out else None, folder / PAGE_NAME)
    slot.clean(spare=_pids(grading))
    return _store(context, submission, folder, status, reason, sha256(data), started, code,
                  document, source=source)


def _pids(grading: GradingProcess) -> tuple[int, ...]:
    return (grading.pid,) if grading.pid is not None else ()


def _outcome(code: int | None, timed_out: bool, document: dict[str, Any] | None,
             failure: str | None, log: Path, timeout_s: float) -> tuple[str, str]:
    """(status, reason) of a finished job: "graded" only for a grading that completed (exit
    code 0, or 3 for a score under --fail-under) with valid results."""
    if timed_out:
        return "timed_out", f"grading took longer than {timeout_s:g} s and was stopped"
    if code in (0, BELOW_FAIL_UNDER_EXIT) and document is not None:
        return "graded", ""
    if failure is not None:
        return "grader_failed", failure
    last = _last_line(log)
    return "grader_failed", f"graders grade exited with code {code}" + \
        (f": {last}" if last else "")


def _last_line(log: Path) -> str:
    try:
        with log.open("rb") as stream:
            stream.seek(max(0, log.stat().st_size - 4096))
            lines = stream.read().decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def _keep_log_tail(log: Path, destination: Path) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    try:
        with log.open("rb") as stream:
            stream.seek(max(0, log.stat().st_size - LOG_TAIL_BYTES))
            destination.write_bytes(stream.read())
    except OSError:
        pass


def _keep_page(page: Path | None, destination: Path) -> None:
    """Move the student's page beside its results, or remove an earlier run's."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    try:
        if page is not None and page.is_file():
            page.replace(destination)
            destination.chmod(0o644)
        else:
            destination.unlink(missing_ok=True)
    except OSError:
        pass


def _store(context: JobContext, submission: ClassSubmission, folder: Path, status: str,
           reason: str, digest: str, started: float, code: int | None,
           document: dict[str, Any], *, source: Path | None = None) -> JobRecord:
    """Write results.json, then meta.json (which marks the job done)."""
    folder.mkdir(parents=True, exist_ok=True)
    if status == "graded":
        write_json_atomically(folder / RESULTS_NAME, document)
    else:
        write_results(folder / RESULTS_NAME, document)
    record = JobRecord(
        submission=submission.id, status=status, reason=reason, submission_sha256=digest,
        grader_sha256=context.grader_sha256,
        source=str(source or submission.path), elapsed_s=round(time.monotonic() - started, 3),
        exit_code=code, submitters=submission.submitters)
    write_record(folder, record)
    return record
