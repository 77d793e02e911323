"""Seats: the same worker environment in every grading where namespaces cannot give one.

Without namespaces (the Landlock rows of :mod:`graders.sandbox.modes`) a worker sees the
host's own paths and ids: its box's path (its HOME, TMPDIR and working folder) and, as
root, its sandbox user's uid. So that a submission sees the same ones in ``graders
grade``, in a regrade's slot and in its hidden worker, it always takes the same seat,
one of :data:`SEATS`, drawn from a hash of its bytes: the box ``seats/seat-N/box`` in the
grader's cache folder and, as root, the pool user ``serving-sandbox-N``. One grading
holds a seat at a time (a ``flock``; a grading whose seat is taken waits for it), and
what a killed grading left in a seat is removed when the seat is next taken.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from graders.sandbox.cleanup import cache_folder, kill_marked, remove_tree, report_problems
from graders.sandbox.confinement import without_namespaces
from graders.sandbox.limits import DEFAULT_SANDBOX_USER
from graders.sandbox.platforms import running_as_root
from graders.sandbox.privileges import (
    SandboxClaim,
    SandboxError,
    SandboxUser,
    claim_sandbox_user,
    lock_file,
)

#: How many seats there are: the pool users ``serving-sandbox-1`` to ``-SEATS`` as root.
SEATS = 8


@dataclass
class Seat:
    """A seat held by this grading: its number, its box and, as root, its user."""

    number: int
    box: Path
    #: As root, the seat's pool user (held); else None (the worker runs as this user).
    user: SandboxUser | None
    #: The seat's own lock, where no user's lock stands for it (not root).
    claim: SandboxClaim | None = None

    def release(self) -> None:
        """Give the seat back (idempotent)."""
        if self.user is not None:
            self.user.release()
        if self.claim is not None:
            self.claim.release()


def seated() -> bool:
    """Whether gradings here take seats: their workers run without namespaces."""
    return sys.platform.startswith("linux") and without_namespaces(running_as_root())


def seat_of(submission: bytes) -> int:
    """The seat ``submission`` takes in every grading: 1 to :data:`SEATS`."""
    return int.from_bytes(hashlib.sha256(submission).digest()[:8], "big") % SEATS + 1


def seats_folder() -> Path | None:
    """The seats' folder in the grader's cache folder (made if missing), or None where
    there is no cache folder of this user's alone (then a grading has no seat)."""
    cache = cache_folder()
    if cache is None:
        return None
    folder = cache / "seats"
    mode = 0o711 if running_as_root() else 0o700  # the sandbox users enter their boxes
    try:
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=mode)
        info = folder.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            return None
        os.chmod(folder, mode)
    except OSError:
        return None
    return folder


def claim_seat(submission: bytes, sandbox_user: str = DEFAULT_SANDBOX_USER, *,
               wait: bool = True) -> Seat | None:
    """The seat of ``submission``, held by this grading, emptied of what an earlier
    holder left: waited for while another grading holds it (or, without ``wait``, None);
    None where there is no seats folder. As root its user is the seat's pool user, or
    ``sandbox_user`` when another is named."""
    folder = seats_folder()
    if folder is None:
        return None
    number = seat_of(submission)
    place = folder / f"seat-{number}"
    as_root = running_as_root()
    waiting = (f"graders: waiting for seat {number} (another grading of the same "
               "submission, or of one that hashes alike, holds it)\n") if wait else None
    claim = None
    user = None
    try:
        if not as_root or sandbox_user != DEFAULT_SANDBOX_USER:
            claim = lock_file(folder / f"seat-{number}.lock", waiting=waiting)
            if claim is None:
                return None
        if as_root and sandbox_user == DEFAULT_SANDBOX_USER:
            try:
                user = claim_sandbox_user(f"{DEFAULT_SANDBOX_USER}-{number}", waiting=waiting)
            except SandboxError:
                if wait:
                    raise
                return None  # held by another grading
        elif as_root:  # as when it has no seat: refused while another grading holds it
            user = claim_sandbox_user(sandbox_user)
        with contextlib.suppress(FileExistsError):
            place.mkdir(mode=0o711 if as_root else 0o700)
        box = place / "box"
        # what a grading that was killed left here: its worker's processes, then its files
        kill_marked(str(box))  # in its working folder, or its HOME or TMPDIR
        report_problems(remove_tree(box), what=f"leftovers of seat {number}")
    except BaseException:
        if user is not None:
            user.release()
        if claim is not None:
            claim.release()
        raise
    return Seat(number, box, user, claim)


def clear_seat(submission: bytes) -> None:
    """Remove what a stopped grading of ``submission`` left in its seat, unless another
    grading holds the seat now (that one removed it on taking the seat). Never raises."""
    try:
        seat = claim_seat(submission, wait=False) if seated() else None
    except Exception as error:  # noqa: BLE001 - a clean-up reports, never raises
        report_problems([f"{type(error).__name__}: {error}"], what="clearing a seat")
        return
    if seat is not None:
        seat.release()
