"""Job slots of a class regrade: each with its own folders and, as root, its own sandbox user.

Two hostile workers that run at the same time as the same user could signal or read each
other, so every slot has a user of its own (``serving-sandbox-N``, claimed from the pool
with :func:`graders.sandbox.privileges.claim_sandbox_user`, so that no other grading on the machine
uses it meanwhile). A slot has two folders: ``folder``, in the regrade's temp folder, is
the TMPDIR of its gradings (the worker's box lives below it, so its user must reach it);
``private``, in the output folder and root's alone, holds the staged ``serving.py``, the
results and the log of the job, out of reach of every sandbox user. After each job every
process of the slot's user, and every process that carries the slot's folder in its
working folder or environment (but the slot's grading process, see
:mod:`graders.regrade.server`), is killed; what the user left in the shared writable
folders and its SysV IPC objects are removed; both folders are emptied. None of this
raises: a problem is reported on stderr and the regrade goes on.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from graders.sandbox.cleanup import kill_marked, remove_tree, report_problems, sweep_user
from graders.sandbox.limits import DEFAULT_SANDBOX_USER
from graders.sandbox.platforms import running_as_root
from graders.sandbox.privileges import SandboxUser, claim_sandbox_user
from graders.sandbox.seats import seated

__all__ = ["Slot", "claim_slots", "kill_marked", "release_slots"]


@dataclass
class Slot:
    """One place to run a grading: its folders, and as root a user of its own."""

    number: int
    folder: Path
    private: Path
    user: SandboxUser | None = None

    @property
    def temp(self) -> Path:
        """The TMPDIR of the slot's gradings (the worker's box lives below)."""
        return self.folder / "tmp"

    def stop_processes(self, spare: Collection[int] = ()) -> list[str]:
        """Kill what the last job left running (but the slot's grading process, in
        ``spare``) and, as root, remove everything its user left (processes, shared-folder
        entries, IPC objects); return the problems."""
        problems: list[str] = []
        try:
            kill_marked(f"{self.folder}/", spare)
        except Exception as error:  # a clean-up reports, never raises
            problems.append(f"killing the processes of slot {self.number}: {error}")
        if self.user is not None:
            problems += sweep_user(self.user.uid)
        return problems

    def clean(self, spare: Collection[int] = ()) -> list[str]:
        """Stop the last job's processes (but those in ``spare``) and empty the slot's
        folders. Never raises; the problems are reported on stderr and returned."""
        problems = self.stop_processes(spare)
        for folder, keep in ((self.folder, "tmp"), (self.temp, None), (self.private, None)):
            try:
                names = os.listdir(folder)
            except FileNotFoundError:
                continue
            except OSError as error:
                problems.append(f"{folder}: {error.strerror}")
                continue
            for name in names:
                if name != keep:
                    problems += remove_tree(folder / name)
        report_problems(problems, what=f"cleaning job slot {self.number}")
        return problems


def claim_slots(count: int, root: Path, private_root: Path) -> list[Slot]:
    """``count`` slots with folders below ``root`` (reachable by sandbox users) and
    ``private_root`` (root's alone); as root each gets a sandbox user of its own, held
    for this process until :func:`release_slots` (or its exit), but where workers run
    without namespaces: there each grading takes its submission's seat
    (:mod:`graders.sandbox.seats`)."""
    slots: list[Slot] = []
    # without namespaces each grading takes its submission's seat and user itself
    own_users = running_as_root() and not seated()
    try:
        for number in range(1, count + 1):
            user = claim_sandbox_user(DEFAULT_SANDBOX_USER) if own_users else None
            folder = root / f"slot-{number}"
            private = private_root / f"slot-{number}"
            slot = Slot(number, folder, private, user)
            slots.append(slot)
            (folder / "tmp").mkdir(parents=True)
            for path in (folder, folder / "tmp"):  # the sandbox user must reach its box,
                path.chmod(0o711)                  # and no other slot's user may list them
            private.mkdir(mode=0o700, parents=True)
    except BaseException:
        release_slots(slots)
        raise
    return slots


def release_slots(slots: list[Slot]) -> None:
    """Clean every slot and give its user back. Never raises."""
    for slot in slots:
        with contextlib.suppress(Exception):
            slot.clean()
        if slot.user is not None:
            slot.user.release()
