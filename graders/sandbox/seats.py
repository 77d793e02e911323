"""Seats: the same worker environment in every grading where namespaces cannot give one.

Without namespaces (the Landlock rows of :mod:`graders.sandbox.modes`) a worker sees its
box's host path (its HOME, TMPDIR and working folder) and, as root, its user's uid. So
that a submission sees the same in ``graders grade``, a regrade and its hidden worker, it
always takes the seat a hash of its bytes picks: the box ``seats/seat-N-TOKEN/box`` in
the grader's cache folder and, as root, the pool user ``serving-sandbox-N``. A seat is held
by one grading at a time (a ``flock``: a grading whose seat is taken waits), and what a
killed grading left in it is removed when it is next taken.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path

from graders.sandbox.box_mount import unmount_box
from graders.sandbox.cleanup import cache_folder, kill_marked, remove_tree, report_problems
from graders.sandbox.confinement import protections_here
from graders.sandbox.limits import DEFAULT_SANDBOX_USER
from graders.sandbox.modes import ROOT_NO_BUBBLEWRAP, USER_REFUSED
from graders.sandbox.platforms import running_as_root
from graders.sandbox.privileges import SandboxClaim, SandboxUser, claim_sandbox_user, lock_file

#: How many seats there are: the pool users ``serving-sandbox-1`` to ``-SEATS`` as root.
SEATS = 8


@dataclass
class Seat:
    """A seat held by this grading: its lock, its box and, as root, its user (None: the
    worker runs as this user)."""

    claim: SandboxClaim
    box: Path
    user: SandboxUser | None = None

    def release(self) -> None:
        """Give the seat back (idempotent)."""
        if self.user is not None:
            self.user.release()
        self.claim.release()


def seated() -> bool:
    """Whether gradings here take seats: their workers run without namespaces."""
    return sys.platform.startswith("linux") and protections_here(running_as_root()).mode in (
        ROOT_NO_BUBBLEWRAP.name, USER_REFUSED.name)


def seat_of(submission: bytes) -> int:
    """The seat ``submission`` takes in every grading: 1 to :data:`SEATS`."""
    return int.from_bytes(hashlib.sha256(submission).digest()[:8], "big") % SEATS + 1


def claim_seat(submission: bytes, sandbox_user: str = DEFAULT_SANDBOX_USER, *,
               wait: bool = True) -> Seat | None:
    """The seat of ``submission``, held by this grading and emptied of what an earlier
    holder left: waited for while another grading holds it (without ``wait``: None);
    None where the grader has no cache folder. As root its user is the seat's pool user,
    or ``sandbox_user`` when another is named."""
    cache = cache_folder()
    if cache is None:
        return None
    number, mode = seat_of(submission), 0o711 if running_as_root() else 0o700
    seats = cache / "seats"  # listed by no worker: root's 0711, else Landlock's
    seats.mkdir(mode=mode, exist_ok=True)
    seats.chmod(mode)
    waiting = (f"graders: waiting for seat {number} (another grading of the same "
               "submission, or of one that hashes alike, holds it)\n") if wait else None
    claim = lock_file(seats / f"seat-{number}.lock", waiting=waiting)
    if claim is None:
        return None
    # seat-N-TOKEN, its token drawn once and kept: a worker knows its own seat's folder,
    # and can name no other's (to stat it, or reach a socket file in it)
    found = sorted(seats.glob(f"seat-{number}-*"))
    seat = Seat(claim, (found[0] if found else seats / f"seat-{number}-{secrets.token_hex(16)}")
                / "box")
    try:
        seat.box.parent.mkdir(mode=mode, exist_ok=True)
        seat.box.parent.chmod(mode)
        if running_as_root():  # a named user is refused while another grading holds it
            seat.user = claim_sandbox_user(f"{DEFAULT_SANDBOX_USER}-{number}", waiting=waiting) \
                if sandbox_user == DEFAULT_SANDBOX_USER else claim_sandbox_user(sandbox_user)
        kill_marked(str(seat.box))  # a killed holder's worker: in its folder, HOME or TMPDIR
        if os.path.ismount(seat.box):  # a killed holder's box tmpfs, whoever its user
            report_problems(unmount_box(seat.box))
        report_problems(remove_tree(seat.box), what=f"leftovers of seat {number}")
    except BaseException:
        seat.release()
        raise
    return seat


def clear_seat(submission: bytes) -> None:
    """Remove what a stopped grading of ``submission`` left in its seat, unless another
    grading holds the seat now (it did so on taking it). Never raises."""
    try:
        seat = claim_seat(submission, wait=False) if seated() else None
    except Exception as error:  # noqa: BLE001 - a clean-up reports, never raises
        report_problems([f"{type(error).__name__}: {error}"], what="clearing a seat")
        return
    if seat is not None:
        seat.release()
