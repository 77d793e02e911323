"""Start the student worker in namespaces of its own, then become the sandbox user.

Run as root by :mod:`graders.sandbox.runner` as ``python -I -S -B confinement_launcher.py OPTIONS --
WORKER...`` (see :func:`parse` and :mod:`graders.sandbox.confinement`), in the session, folder
and with the stdin, stdout and stderr the runner gave it; it never writes to stdout. It
imports os, sys and ctypes only (no json, re or typing: each would add to every worker
start). Before any student code runs, it:

1. enters new mount, network and IPC namespaces, and makes every mount private
   (``MS_REC | MS_PRIVATE`` on ``/``), so that nothing it mounts reaches the host;
2. reads the submission from the box, and opens the read-only folders (worker runtime,
   interpreter copy) that lie under a folder it is about to cover;
3. bounds what its IPC namespace may hold (IPC_LIMITS); mounts ONE tmpfs (``size=``,
   ``nr_inodes=``, nosuid, nodev, noexec) and binds a folder of it over /tmp, /var/tmp,
   /dev/shm, /run/lock and /dev/mqueue (those that exist) and over the box, so that all
   the space the sandbox user can write is that one bounded tmpfs, which disappears with
   the worker;
4. binds the read-only folders back at their own paths, read-only;
5. copies the submission into the new box, owned by the sandbox user, and enters it;
6. sets no_new_privs, drops every group, then the gid and uid (real, effective and
   saved), sets umask 077, and checks that root cannot be regained;
7. execs the worker (same process, same pid and process group).

The new network namespace has only a loopback interface, and it is down: the worker can
reach no address, the host's 127.0.0.1 included, and nothing it listens on is reachable.
SysV shared memory, semaphores, message queues and POSIX queues it creates live in its
IPC namespace and die with it. A step that fails writes one line to stderr and exits
with EXIT_FAILED: the worker never starts half-confined.

With ``--probe`` it does all of this but the exec, then exits 0: the grader runs that
once to learn whether this machine allows the namespaces.
"""

from __future__ import annotations

import ctypes
import os
import stat
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
PR_SET_NO_NEW_PRIVS = 38
#: Exit status when a step fails (as env(1) and unshare(1) do).
EXIT_FAILED = 125
#: The folder of the tmpfs that becomes the box.
BOX = "box"
#: Limits of the worker's IPC namespace (these sysctls are per IPC namespace, so writing
#: them never touches the host's): at most 64 SysV shared memory segments of 64 MiB in
#: total, 64 message queues of 16 KiB, 64 semaphore sets of 1024 semaphores in total, and
#: 64 POSIX message queues. The kernel's defaults are unbounded in practice.
MIB = 1024 * 1024
IPC_LIMITS = (
    ("kernel/shmmax", str(64 * MIB)),
    ("kernel/shmall", str(64 * MIB // os.sysconf("SC_PAGE_SIZE"))),  # in pages
    ("kernel/shmmni", "64"),
    ("kernel/msgmni", "64"),
    ("kernel/msgmnb", "16384"),
    ("kernel/sem", "64 1024 32 64"),  # per set, in total, per semop, sets
    ("fs/mqueue/queues_max", "64"),
)


class Libc:
    """unshare(2), mount(2) and prctl(2) through ctypes (Python 3.11 has no os.unshare)."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._libc.unshare.argtypes = [ctypes.c_int]
        self._libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                     ctypes.c_ulong, ctypes.c_char_p]
        self._libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong,
                                     ctypes.c_ulong, ctypes.c_ulong]

    @staticmethod
    def _check(result: int, what: str) -> None:
        if result != 0:
            number = ctypes.get_errno()
            raise OSError(number, f"{what}: {os.strerror(number)}")

    def unshare(self, flags: int) -> None:
        self._check(self._libc.unshare(flags), "unshare")

    def mount(self, source: str | None, target: str, fstype: str | None, flags: int,
              data: str | None = None) -> None:
        def encoded(text: str | None) -> bytes | None:
            return None if text is None else os.fsencode(text)

        self._check(self._libc.mount(encoded(source), encoded(target), encoded(fstype),
                                     flags, encoded(data)), f"mount {target}")

    def no_new_privileges(self) -> None:
        self._check(self._libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


class Config:
    """What to confine, from the command line::

        [--probe] --uid N --gid N --bytes N --inodes N --box PATH --submission NAME
        [--cover FOLDER]... [--read-only PATH]... [--env KEY=VALUE]... -- WORKER ARGV...
    """

    SINGLE = ("--uid", "--gid", "--bytes", "--inodes", "--box", "--submission")
    REPEATED = ("--cover", "--read-only", "--env")

    def __init__(self, arguments: list[str]) -> None:
        self.probe = False
        single: dict[str, str] = {}
        repeated: dict[str, list[str]] = {name: [] for name in self.REPEATED}
        self.command: list[str] = []
        index = 0
        while index < len(arguments):
            option = arguments[index]
            if option == "--":
                self.command = arguments[index + 1:]
                break
            if option == "--probe":
                self.probe = True
                index += 1
                continue
            if option not in self.SINGLE + self.REPEATED or index + 1 >= len(arguments):
                raise ValueError(f"bad launcher argument {option!r}")
            if option in self.SINGLE:
                single[option] = arguments[index + 1]
            else:
                repeated[option].append(arguments[index + 1])
            index += 2
        missing = [name for name in self.SINGLE if name not in single]
        if missing or not (self.command or self.probe):
            raise ValueError(f"missing launcher arguments: {missing or 'the worker command'}")
        self.uid, self.gid = int(single["--uid"]), int(single["--gid"])
        self.bytes, self.inodes = int(single["--bytes"]), int(single["--inodes"])
        self.box, self.submission = single["--box"], single["--submission"]
        self.cover, self.read_only = repeated["--cover"], repeated["--read-only"]
        self.environment = dict(item.partition("=")[::2] for item in repeated["--env"])
        if self.uid == 0 or self.gid == 0:
            raise ValueError("refusing to run the worker as root")
        if "/" in self.submission or self.submission in ("", ".", ".."):
            raise ValueError(f"bad submission name {self.submission!r}")


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _fd_path(fd: int, name: str = "") -> str:
    """A path that reaches what ``fd`` refers to, even once its own path is covered."""
    return f"/proc/self/fd/{fd}" + (f"/{name}" if name else "")


def _mount_point(path: str, *, folder: bool) -> None:
    """Create ``path`` (and its missing parents, traversable only) to mount on."""
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        os.makedirs(parent, mode=0o711, exist_ok=True)
    if folder:
        os.makedirs(path, mode=0o711, exist_ok=True)
    elif not os.path.exists(path):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))


def confine(config: Config, libc: Libc) -> None:
    """Steps 1 to 6: namespaces, the bounded tmpfs, the read-only binds, the drop."""
    os.umask(0o022)
    box = os.path.realpath(config.box)
    covered = {os.path.realpath(path) for path in config.cover}
    folders = sorted((path for path in covered if os.path.isdir(path)), key=len)

    libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC)
    libc.mount(None, "/", None, MS_REC | MS_PRIVATE)
    for name, limit in IPC_LIMITS:
        with open(f"/proc/sys/{name}", "w") as handle:
            handle.write(limit)

    submission = os.path.join(box, config.submission)
    # The host's box belongs to the sandbox user: never follow a link or block on a FIFO.
    with open(os.open(submission, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ValueError(f"{submission} is not a regular file")
        code = handle.read(config.bytes + 1)
    if len(code) > config.bytes:
        raise ValueError(f"{submission} does not fit in {config.bytes} bytes")
    # Opened in this namespace (a bind source must be in it), before anything covers them.
    keep: list[tuple[str, int]] = []
    for path in sorted({os.path.realpath(path) for path in config.read_only}, key=len):
        if not any(_under(path, folder) for folder in folders) or \
                any(_under(path, kept) for kept, _ in keep) or not os.path.exists(path):
            continue
        keep.append((path, os.open(path, os.O_PATH | os.O_CLOEXEC)))

    # One tmpfs for all the writable space, mounted on the box first (it always exists).
    libc.mount("tmpfs", box, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
               f"size={config.bytes},nr_inodes={config.inodes},mode=0700")
    space = os.open(box, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    os.mkdir(os.path.join(box, BOX), 0o700)
    os.chown(os.path.join(box, BOX), config.uid, config.gid)
    for index, _ in enumerate(folders):
        os.mkdir(os.path.join(box, f"covered-{index}"))
        os.chmod(os.path.join(box, f"covered-{index}"), 0o1777)
    for index, folder in enumerate(folders):
        if os.path.isdir(folder):  # else it lay in a folder covered just before
            libc.mount(_fd_path(space, f"covered-{index}"), folder, None, MS_BIND)
    _mount_point(box, folder=True)
    libc.mount(_fd_path(space, BOX), box, None, MS_BIND)
    os.close(space)
    for path, fd in keep:
        _mount_point(path, folder=os.path.isdir(_fd_path(fd)))
        libc.mount(_fd_path(fd), path, None, MS_BIND)
        libc.mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
        os.close(fd)

    copy = os.open(submission, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(copy, code)
        os.fchown(copy, config.uid, config.gid)
    finally:
        os.close(copy)
    os.chdir(box)

    libc.no_new_privileges()
    os.setgroups([])
    os.setresgid(config.gid, config.gid, config.gid)
    os.setresuid(config.uid, config.uid, config.uid)
    os.umask(0o077)
    try:
        os.setuid(0)
    except PermissionError:
        return
    raise PermissionError("root could be regained after the privilege drop")


def _describe(error: Exception) -> str:
    if isinstance(error, OSError) and error.strerror:
        where = f" ({error.filename})" if error.filename else ""
        return f"{error.strerror}{where}"
    return f"{type(error).__name__}: {error}"


def main(arguments: list[str]) -> int:
    """Confine this process and exec the worker; return EXIT_FAILED if that fails (or 0
    after a successful ``--probe``)."""
    try:
        config = Config(arguments)
        confine(config, Libc())
        if config.probe:
            return 0
        os.execve(config.command[0], config.command, {**os.environ, **config.environment})
    except Exception as error:  # one line in the worker's log, never a traceback
        sys.stderr.write(f"serving-grader: cannot confine the worker: {_describe(error)}\n")
        sys.stderr.flush()
    return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
