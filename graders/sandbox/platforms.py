"""What this system offers the grader: the hardened runner's needs (Linux: ``pwd``,
``grp``, ``fcntl``, ``resource``, process groups, FIFOs, ``/proc``), or the portable one.
No POSIX-only module is imported at import time; tests point :data:`PROC` elsewhere."""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

#: Where the process information file system is mounted (Linux).
PROC = Path("/proc")
#: The modules the hardened path needs, none of which Windows has.
POSIX_MODULES = ("pwd", "grp", "fcntl", "resource")
#: Seconds ``taskkill`` may take to end a worker's process tree on Windows.
TASKKILL_TIMEOUT_S = 10.0


def optional_module(name: str) -> ModuleType | None:
    """The module ``name``, or None where this system does not have it."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


@dataclass(frozen=True)
class Capabilities:
    """What the system offers the runner, probed when asked (cheap: imports are cached)."""

    #: Why the hardened runner cannot run here, one reason each (none: it can).
    lacking: tuple[str, ...]
    #: Whether the worker can lower its resource limits (it probes this itself too).
    rlimits: bool

    @property
    def hardened(self) -> bool:
        """Whether the hardened runner can run here."""
        return not self.lacking

    def why_portable(self) -> str:
        """Why the hardened runner is not used ("" when it is)."""
        return "; ".join(self.lacking)


def capabilities() -> Capabilities:
    """Probe this system now."""
    missing = [name for name in POSIX_MODULES if optional_module(name) is None]
    try:
        proc = (PROC / "self").is_dir()
    except OSError:
        proc = False
    reasons = ((not sys.platform.startswith("linux"), f"{sys.platform} is not Linux"),
               (bool(missing), f"no {', '.join(missing)} module"), (not proc, f"no {PROC}"),
               (not hasattr(os, "mkfifo"), "no FIFOs"),
               (not (hasattr(os, "killpg") and hasattr(os, "setsid")), "no process groups"))
    return Capabilities(tuple(reason for lacks, reason in reasons if lacks),
                        rlimits="resource" not in missing)


def effective_uid() -> int | None:
    """This process's effective uid, or None where there are no uids (Windows)."""
    geteuid = getattr(os, "geteuid", None)
    return int(geteuid()) if geteuid is not None else None


def running_as_root() -> bool:
    """Whether the grader runs as root where that enables the privilege drop (hardened)."""
    return effective_uid() == 0 and capabilities().hardened


def owned_by_me(uid: int) -> bool:
    """Whether a file with owner ``uid`` belongs to this user (always, without uids)."""
    me = effective_uid()
    return me is None or uid == me


def kill_tree(process: subprocess.Popen[bytes]) -> None:
    """Kill ``process`` and everything it started (``taskkill /T /F`` on Windows)."""
    if sys.platform == "win32":
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(["taskkill", "/T", "/F", "/PID", str(process.pid)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=TASKKILL_TIMEOUT_S, check=False)
    elif hasattr(os, "killpg"):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        process.kill()

