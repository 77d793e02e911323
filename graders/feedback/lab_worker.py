"""The lab notebook's worker: the student's ``serving.py`` run as a grading runs it, in
the grader's own worker (a separate, limited process) with its per-call deadline and time
budget, and its sandbox user or seat where a grading here would take one. A call that
hangs is stopped at the deadline and becomes an outcome, as in ``pytest``; the notebook's
cell goes on. One worker serves one cell's calls, then stops: nothing is held between
cells (a ``pytest`` started meanwhile finds every sandbox user and seat free)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from graders.sandbox.limits import Limits
from graders.sandbox.platforms import running_as_root
from graders.sandbox.privileges import (
    SandboxUser,
    claim_sandbox_user,
    close_to_others,
    protected_folders,
)
from graders.sandbox.runner import StudentRunner
from graders.sandbox.seats import Seat, claim_seat, seated


@contextlib.contextmanager
def grading_worker(submission: bytes, limits: Limits | None = None
                   ) -> Iterator[StudentRunner]:
    """A started worker of ``submission`` under ``limits`` (the grader's defaults, as
    ``pytest`` has them, when None), with a fresh time budget; stopped, and its sandbox
    user and seat given back, when the block ends."""
    seat: Seat | None = None
    sandbox: SandboxUser | None = None
    runner: StudentRunner | None = None
    try:
        seat = claim_seat(submission) if seated() else None
        if running_as_root():  # as root the worker runs as a sandbox user, as in a grading
            sandbox = seat.user if seat is not None and seat.user is not None \
                else claim_sandbox_user()
            close_to_others(protected_folders(), sandbox_gid=sandbox.gid)
        runner = StudentRunner(submission, limits=limits or Limits(), sandbox=sandbox,
                               box=seat.box if seat is not None else None)
        runner.start()
        yield runner
    finally:
        if runner is not None:
            runner.close()
        if sandbox is not None:
            sandbox.release()
        if seat is not None:
            seat.release()
