"""Removing what a grading leaves behind, and keeping what gradings reuse in one place.
Every clean-up returns its problems and never raises: the results are written after it
(docs/security.md, "Nothing is left behind")."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeAlias

from graders.sandbox import platforms as platform_support
from graders.sandbox.box_mount import stale_boxes_of, unmount_box

PathLike: TypeAlias = str | bytes | os.PathLike[str] | os.PathLike[bytes]

#: Shared folders any user may write into, swept for what a sandbox user left there.
SHARED_WRITABLE = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"), Path("/run/lock"),
                   Path("/dev/mqueue"))
#: How deep :func:`remove_files_of` looks inside world-writable folders of other users.
SHARED_DEPTH = 4
#: The grader's own folders in the temp folder: a killed grading leaves its box in one.
GRADER_FOLDER_PREFIX = b"serving-grader-"
#: Problems kept per clean-up; the rest are counted.
MAX_PROBLEMS = 20
#: SysV IPC kinds: the file under /proc/sysvipc, and the name of its id column.
IPC_KINDS = (("shm", "shmid"), ("msg", "msqid"), ("sem", "semid"))
_IPC_RMID, _KILL_ROUNDS = 0, 5
#: How long one round of :func:`_kill_until_gone` waits for deaths, and its first look.
_DEATH_WAIT_S, _FIRST_LOOK_S = 0.05, 0.0005
#: Flags that open a folder without following a link.
_DIRECTORY = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) \
    | getattr(os, "O_CLOEXEC", 0)
_O_PATH = getattr(os, "O_PATH", 0)
#: Listings of one folder before giving up on emptying it (removals hide entries from one).
_PASSES = 3
_DISPLAY_CHARS = 160


# --- problems -------------------------------------------------------------------------------


@dataclass
class Problems:
    """What a clean-up could not do: the first few, and a count of the rest."""

    kept: list[str] = field(default_factory=list)
    dropped: int = 0

    def add(self, text: str) -> None:
        if len(self.kept) < MAX_PROBLEMS:
            self.kept.append(text)
        else:
            self.dropped += 1

    def as_list(self) -> list[str]:
        return self.kept + ([f"... and {self.dropped} more problems"] if self.dropped else [])


def report_problems(problems: Iterable[str], *, what: str = "clean-up") -> None:
    """Write each problem as one warning line on stderr; never raises."""
    with contextlib.suppress(Exception):
        for problem in problems:
            sys.stderr.write(f"graders: warning: {what}: {problem}\n")


def _display(path: bytes) -> str:
    """A path for a message: escaped, and shortened in the middle when long."""
    text = repr(os.fsdecode(path))[1:-1]
    if len(text) > _DISPLAY_CHARS:
        half = _DISPLAY_CHARS // 2
        text = f"{text[:half]}...({path.count(b'/')} levels)...{text[-half:]}"
    return text


def _why(error: BaseException) -> str:
    return getattr(error, "strerror", None) or f"{type(error).__name__}: {error}"


# --- removing a tree ---------------------------------------------------------------------------


def remove_tree(path: PathLike) -> list[str]:
    """Remove ``path`` (a file, a link or a folder tree, walked through descriptors at any
    depth, opened up where this user owns it); return what could not be removed, one line
    each. Never raises, follows no link, stays on ``path``'s file system."""
    problems = Problems()
    try:
        raw = os.fsencode(path)
    except Exception as error:  # a clean-up reports, never raises
        return [f"{path!r}: {_why(error)}"]
    if not (os.open in os.supports_dir_fd and os.unlink in os.supports_dir_fd
            and hasattr(os, "O_DIRECTORY") and hasattr(os, "O_NOFOLLOW")):  # Windows
        return _remove_tree_portably(raw)
    try:
        raw = os.path.normpath(raw)
        parent, name = os.path.split(raw)
        if name in (b"", b".", b".."):
            return [f"{_display(raw)}: refusing to remove a root or relative folder"]
        try:
            parent_fd = os.open(parent or b".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            return []
        try:
            _remove_at(parent_fd, name, raw, problems)
        finally:
            os.close(parent_fd)
    except Exception as error:  # a bug must not cost a grading its results
        problems.add(f"{_display(raw)}: {_why(error)}")
    return problems.as_list()


def _remove_tree_portably(raw: bytes) -> list[str]:
    """:func:`remove_tree` with ``shutil.rmtree``, where folders cannot be opened (Windows)."""
    problems = Problems()

    def retry(function: Callable[..., object], name: str | bytes, _: object) -> None:
        try:
            os.chmod(name, stat.S_IWRITE | stat.S_IREAD | stat.S_IEXEC)
            function(name)
        except OSError as error:
            problems.add(f"{_display(os.fsencode(name))}: {_why(error)}")

    try:
        if os.path.isdir(raw) and not os.path.islink(raw):
            shutil.rmtree(raw, onerror=retry)
        elif os.path.lexists(raw):
            retry(os.unlink, raw, None)
    except Exception as error:  # a clean-up reports, never raises
        problems.add(f"{_display(raw)}: {_why(error)}")
    return problems.as_list()


Shown: TypeAlias = Callable[[], bytes]
"""The path of an entry, built only when a message needs it (deep paths are long)."""


def _remove_at(parent_fd: int, name: bytes, shown: bytes, problems: Problems) -> bool:
    """Remove the entry ``name`` of the open folder ``parent_fd``; whether it is gone."""
    try:
        info = os.lstat(name, dir_fd=parent_fd)
    except FileNotFoundError:
        return True
    except OSError as error:
        problems.add(f"{_display(shown)}: {_why(error)}")
        return False
    if not stat.S_ISDIR(info.st_mode):
        return _remove_entry(os.unlink, parent_fd, name, lambda: shown, problems)
    return _remove_folder(parent_fd, name, shown, info.st_dev, problems)


def _remove_entry(remove: Callable[..., None], folder_fd: int, name: bytes, shown: Shown,
                  problems: Problems) -> bool:
    """``remove(name, dir_fd=folder_fd)``, opening the folder up once; whether it is gone."""
    for attempt in range(2):
        try:
            remove(name, dir_fd=folder_fd)
        except FileNotFoundError:
            pass
        except OSError as error:
            if isinstance(error, PermissionError) and attempt == 0 and _open_up(folder_fd):
                continue
            problems.add(f"{_display(shown())}: {_why(error)}")
            return False
        return True
    return False


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _open_up(fd: int) -> bool:
    """Give this user full rights on its folder ``fd``; whether the mode changed."""
    try:
        info = os.fstat(fd)
        if info.st_uid != os.geteuid() or stat.S_IMODE(info.st_mode) & 0o700 == 0o700:
            return False
        os.fchmod(fd, stat.S_IMODE(info.st_mode) | 0o700)
        return True
    except OSError:
        return False


def _open_folder(parent_fd: int, name: bytes) -> int:
    """Open the folder ``name`` of ``parent_fd``, following no link, opened up if need be."""
    try:
        return os.open(name, _DIRECTORY, dir_fd=parent_fd)
    except PermissionError:
        if not _O_PATH:
            raise
    handle = os.open(name, _O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                     dir_fd=parent_fd)
    try:  # a folder for sure (O_NOFOLLOW | O_DIRECTORY): change it through its handle
        info = os.fstat(handle)
        if info.st_uid != os.geteuid():
            raise PermissionError(13, "Permission denied (owned by another user)")
        os.chmod(f"/proc/self/fd/{handle}", stat.S_IMODE(info.st_mode) | 0o700)
    finally:
        os.close(handle)
    return os.open(name, _DIRECTORY, dir_fd=parent_fd)


@dataclass
class _Level:
    """One folder on the way down: its name in its parent, its identity, its subfolders
    still to remove, its listings so far and whether the last saw an entry (then it is
    listed again), and whether something below is stuck (then it is too)."""

    name: bytes
    device: int
    inode: int
    pending: list[bytes] = field(default_factory=list)
    passes: int = 0
    dirty: bool = True
    stuck: bool = False


def _remove_folder(parent_fd: int, name: bytes, shown: bytes, device: int,
                   problems: Problems) -> bool:
    """Remove a folder tree iteratively, holding at most two descriptors; the way back up
    is ``..``, checked against the identity recorded on the way down."""
    try:
        fd = _open_folder(parent_fd, name)
    except OSError as error:
        problems.add(f"{_display(shown)}: cannot open: {_why(error)}")
        return False
    info = os.fstat(fd)
    stack = [_Level(name, info.st_dev, info.st_ino)]

    def path(*tail: bytes) -> Shown:  # built lazily: only a problem needs it
        depth = len(stack)
        return lambda: b"/".join([shown, *(level.name for level in stack[1:depth]), *tail])

    current: int | None = fd
    try:
        while stack:
            level = stack[-1]
            assert current is not None
            if not level.pending and level.dirty and not level.stuck \
                    and level.passes < _PASSES:
                _list_folder(current, path, level, problems)
            if level.pending:
                child = level.pending.pop()
                entered = _enter(current, child, path(child), device, problems)
                if entered is False:
                    level.stuck = True
                if isinstance(entered, bool):
                    continue
                os.close(current)
                current, child_info = entered
                stack.append(_Level(child, child_info.st_dev, child_info.st_ino))
                continue
            stack.pop()
            where = path(level.name) if stack else (lambda: shown)
            if not stack:
                os.close(current)
                current = None
                return not level.stuck and _remove_entry(os.rmdir, parent_fd, level.name,
                                                         where, problems)
            parent = stack[-1]  # back up: ".." must still be the folder we came from
            up: int | None = None
            with contextlib.suppress(OSError):
                up = os.open(b"..", _DIRECTORY, dir_fd=current)
            os.close(current)
            current = up
            if current is None or (os.fstat(current).st_dev, os.fstat(current).st_ino) \
                    != (parent.device, parent.inode):
                problems.add(f"{_display(where())}: the tree moved while it was removed; "
                             "gave up")
                return False
            if level.stuck or not _remove_entry(os.rmdir, current, level.name, where, problems):
                parent.stuck = True
        return False
    finally:
        if current is not None:
            os.close(current)


def _list_folder(fd: int, path: Callable[..., Shown], level: _Level, problems: Problems
                 ) -> None:
    """Remove every entry of the folder ``fd`` that is not a folder; queue its folders."""
    level.passes += 1
    level.dirty = False
    _open_up(fd)
    try:
        os.lseek(fd, 0, os.SEEK_SET)  # list from the start, also on a second pass
        with os.scandir(fd) as entries:
            for entry in entries:
                level.dirty = True
                name = os.fsencode(entry.name)
                try:
                    is_folder = entry.is_dir(follow_symlinks=False)
                except OSError:
                    is_folder = False
                try:
                    if not is_folder:
                        os.unlink(name, dir_fd=fd)
                        continue
                except IsADirectoryError:  # a folder after all
                    pass
                except OSError:
                    level.stuck |= not _remove_entry(os.unlink, fd, name, path(name), problems)
                    continue
                level.pending.append(name)
    except OSError as error:
        problems.add(f"{_display(path()())}: cannot list: {_why(error)}")
        level.stuck = True


def _enter(fd: int, name: bytes, shown: Shown, device: int, problems: Problems
           ) -> tuple[int, os.stat_result] | bool:
    """Open the subfolder ``name``: its descriptor and identity, True when there is nothing
    to empty (gone, or a file now: unlinked), False when stuck."""
    try:
        child = _open_folder(fd, name)
    except FileNotFoundError:
        return True
    except NotADirectoryError:  # replaced by a file or a link: unlink that
        return _remove_entry(os.unlink, fd, name, shown, problems)
    except OSError as error:
        problems.add(f"{_display(shown())}: cannot open: {_why(error)}")
        return False
    info = os.fstat(child)
    if info.st_dev != device:
        os.close(child)
        problems.add(f"{_display(shown())}: another file system is mounted there; "
                     "left alone")
        return False
    return child, info


# --- what a sandbox user leaves ---------------------------------------------------------------


#: Where gradings make their folders when the temporary folder is closed to the sandbox
#: user (``privileges.grading_parent``); root's, mode 0711.
GRADINGS_FOLDER = Path("/run/serving-grader-gradings")


def remove_files_of(uid: int, folders: Iterable[Path] | None = None) -> list[str]:
    """Remove every entry ``uid`` (held exclusively) owns in ``folders`` (default:
    :data:`SHARED_WRITABLE`, :data:`GRADINGS_FOLDER` and a world-writable temp folder), down
    to :data:`SHARED_DEPTH` in world-writable folders and in this user's grader folders (a
    killed grading's box); return the problems."""
    if folders is None:
        folders = [folder for folder in (*SHARED_WRITABLE, GRADINGS_FOLDER) if folder.is_dir()]
        with contextlib.suppress(OSError):
            temp = Path(tempfile.gettempdir())
            if temp.stat().st_mode & stat.S_IWOTH and temp.resolve() not in \
                    {folder.resolve() for folder in folders}:
                folders.append(temp)
    problems = Problems()
    for folder in folders:
        try:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            _remove_owned(fd, os.fsencode(folder), uid, SHARED_DEPTH, problems)
        except Exception as error:  # a clean-up reports, never raises
            problems.add(f"{folder}: {_why(error)}")
        finally:
            os.close(fd)
    return problems.as_list()


def _remove_owned(fd: int, path: bytes, uid: int, depth: int, problems: Problems) -> None:
    try:
        names = [os.fsencode(name) for name in os.listdir(fd)]
    except OSError:
        return
    for name in names:
        try:
            info = os.lstat(name, dir_fd=fd)
        except OSError:
            continue
        if info.st_uid == uid:
            _remove_at(fd, name, path + b"/" + name, problems)
        elif depth > 1 and stat.S_ISDIR(info.st_mode) and (
                info.st_mode & stat.S_IWOTH or (depth == SHARED_DEPTH
                                                and name.startswith(GRADER_FOLDER_PREFIX)
                                                and info.st_uid == os.geteuid())):
            try:
                inner = os.open(name, _DIRECTORY, dir_fd=fd)
            except OSError:
                continue
            try:
                if os.fstat(inner).st_dev == os.fstat(fd).st_dev:
                    _remove_owned(inner, path + b"/" + name, uid, depth - 1, problems)
            finally:
                os.close(inner)


def ipc_objects_of(uid: int, proc: Path = Path("/proc/sysvipc")) -> list[tuple[str, int]]:
    """The SysV IPC objects (kind, id) that ``uid`` owns or created, from /proc/sysvipc."""
    found: list[tuple[str, int]] = []
    for kind, id_column in IPC_KINDS:
        try:
            header, *lines = (proc / kind).read_text(encoding="ascii", errors="replace")\
                .splitlines()
            ident, owner, creator = (header.split().index(name)
                                     for name in (id_column, "uid", "cuid"))
        except (OSError, ValueError):  # no such file, an empty one, or another layout
            continue
        for line in lines:
            fields = line.split()
            with contextlib.suppress(IndexError, ValueError):
                if uid in (int(fields[owner]), int(fields[creator])):
                    found.append((kind, int(fields[ident])))
    return found


def remove_ipc_of(uid: int) -> list[str]:
    """Remove the SysV IPC objects ``uid`` owns or created. Returns the problems."""
    problems = Problems()
    try:
        objects = ipc_objects_of(uid)
        if not objects:
            return []
        import ctypes
        import ctypes.util

        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        for kind, ident in objects:  # shmctl, msgctl (id, IPC_RMID, NULL); semctl (id, 0, ...)
            arguments = (ident, 0, _IPC_RMID) if kind == "sem" else (ident, _IPC_RMID, None)
            if getattr(libc, f"{kind}ctl")(*arguments) != 0:
                error = ctypes.get_errno()
                if error not in (errno.EINVAL, errno.EIDRM):  # already gone
                    problems.add(f"SysV {kind} {ident} of uid {uid}: {os.strerror(error)}")
    except Exception as error:  # a clean-up reports, never raises
        problems.add(f"SysV IPC of uid {uid}: {_why(error)}")
    return problems.as_list()


def _kill_until_gone(match: Callable[[int], bool]) -> list[int]:
    """SIGKILL every process ``match(pid)`` selects, in rounds, until none is left."""
    killed: list[int] = []
    for _ in range(_KILL_ROUNDS):
        try:
            names = os.listdir(platform_support.PROC)
        except OSError:
            names = []
        found = [int(name) for name in names
                 if name.isdigit() and int(name) != os.getpid() and match(int(name))]
        if not found:
            break
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        # then wait for the deaths, at most _DEATH_WAIT_S, looking ever less often
        deadline, pause = time.monotonic() + _DEATH_WAIT_S, _FIRST_LOOK_S
        while found and time.monotonic() < deadline:
            time.sleep(pause)
            found = [pid for pid in found if _alive(pid)]
            pause = min(pause * 2, max(deadline - time.monotonic(), 0.0))
    return sorted(set(killed))


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not dead (a zombie waiting to be reaped)."""
    try:
        stat_line = Path(f"{platform_support.PROC}/{pid}/stat").read_bytes()
    except OSError:
        return False
    state = stat_line[stat_line.rfind(b")") + 2:][:1]
    return state not in (b"Z", b"X")


def kill_session(process: subprocess.Popen[bytes], wait_s: float = 5.0) -> None:
    """SIGKILL the session ``process`` leads, close its pipes, and reap it. Never raises."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    try:
        process.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        process.kill()


def kill_user(uid: int) -> list[int]:
    """SIGKILL every live process with ``uid`` among its uids; return their pids."""
    def owned(pid: int) -> bool:
        try:
            status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
        lines = {line.partition(":")[0]: line.partition(":")[2].split()
                 for line in status.splitlines()}
        # a zombie (Z, X) is dead, waiting to be reaped
        return lines.get("State", [""])[0] not in ("Z", "X") and str(uid) in lines.get("Uid", [])

    return _kill_until_gone(owned)


def kill_marked(marker: str, spare: Collection[int] = ()) -> list[int]:
    """SIGKILL every process but ``spare`` whose folder or environment holds ``marker``."""
    needle = marker.encode()

    def marked(pid: int) -> bool:
        if pid in spare:
            return False
        with contextlib.suppress(OSError):
            if needle in (os.readlink(f"/proc/{pid}/cwd") + "/").encode():
                return True
        with contextlib.suppress(OSError):
            return needle in Path(f"/proc/{pid}/environ").read_bytes()
        return False

    return _kill_until_gone(marked)


def sweep_user(uid: int) -> list[str]:
    """Remove all the sandbox user ``uid`` (held exclusively) left; return the problems."""
    if uid == 0:
        return ["refusing to sweep uid 0"]
    problems = Problems()
    try:
        kill_user(uid)
    except Exception as error:  # a clean-up reports, never raises
        problems.add(f"killing the processes of uid {uid}: {_why(error)}")
    for text in [*(line for box in stale_boxes_of(uid) for line in unmount_box(box)),
                 *remove_files_of(uid), *remove_ipc_of(uid)]:  # unmounting killed gradings' boxes
        problems.add(text)
    return problems.as_list()


# --- where reused things live ---------------------------------------------------------------


def cache_folder() -> Path | None:
    """What the grader reuses between gradings, whatever TMPDIR is: ``/var/cache`` as root,
    else ``$XDG_CACHE_HOME``'s ``serving-grader`` folder, made if missing; None (then build
    private copies) unless this user's alone to write and, as root, enterable by others."""
    uid = platform_support.effective_uid()
    folder = Path("/var/cache" if uid == 0 else os.environ.get("XDG_CACHE_HOME")
                  or os.path.join(os.path.expanduser("~"), ".cache")) / "serving-grader"
    if not folder.is_absolute():
        return None
    try:
        folder.mkdir(mode=0o755, parents=True, exist_ok=True)
        info = folder.lstat()
        if not stat.S_ISDIR(info.st_mode) or not platform_support.owned_by_me(info.st_uid):
            return None
        if uid is not None and stat.S_IMODE(info.st_mode) != 0o755:
            folder.chmod(0o755)
        return folder if uid != 0 or traversable_by_others(folder) else None
    except OSError:
        return None


def traversable_by_others(path: Path) -> bool:
    """Whether a user with no ownership or group rights can pass through ``path``."""
    try:
        return all(folder.stat().st_mode & stat.S_IXOTH
                   for folder in [path.resolve(), *path.resolve().parents])
    except OSError:
        return False
