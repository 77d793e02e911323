"""Privilege separation as root: sandbox users, each held by one grading alone (a
``flock``), an interpreter they can run, and the grader's folders closed to them
(docs/security.md, "Privilege separation")."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graders.errors import GraderFailure, SettingsError
from graders.sandbox.cleanup import (
    GRADINGS_FOLDER,
    cache_folder,
    kill_marked,
    process_alive,
    remove_tree,
    report_problems,
    sweep_user,
    traversable_by_others,
)
from graders.sandbox.limits import DEFAULT_SANDBOX_USER
from graders.sandbox.runtime import open_to_others, publish_folder

#: The default sandbox user names a pool: ``serving-sandbox-1`` to ``-MAX_POOL_USERS``.
MAX_POOL_USERS = 64
#: Where sandbox users' locks live (root-only); without /run, a folder in the temp folder.
LOCK_FOLDER = Path("/run/serving-grader")
#: ``NAME:FD``: the parent's lock on sandbox user NAME, passed down as descriptor FD.
LOCK_VARIABLE = "SERVING_GRADER_SANDBOX_LOCK"
#: Environment variable that marks every process a worker starts, for the final sweep.
TOKEN_VARIABLE = "SERVING_GRADER_TOKEN"
#: Standard-library folders the worker never needs, left out of an interpreter copy.
_STDLIB_SKIP = ("site-packages", "dist-packages", "test", "tests", "idlelib", "tkinter",
                "turtledemo", "ensurepip", "lib2to3", "pydoc_data")


class SandboxError(GraderFailure):
    """The sandbox user or a reachable interpreter cannot be set up (a grader failure)."""


class SandboxClaim:
    """This process's hold on a sandbox user: a descriptor with a ``flock`` on the user's
    lock file. Closing it (or the process dying) gives the user back."""

    def __init__(self, name: str, fd: int) -> None:
        self.name = name
        #: The descriptor holding the lock (None once released), to pass down to a child.
        self.fd: int | None = fd

    def inheritance(self) -> dict[str, str]:
        """The environment that lets a child (given ``pass_fds=(fd,)``) take over this hold."""
        return lock_inheritance(self.name, self.fd) if self.fd is not None else {}

    def release(self, _close: Callable[[int], None] = os.close) -> None:
        """Give the user back (idempotent; also as ``__del__``, so no module lookups). The
        descriptor is closed, never unlocked: an inherited lock stays the parent's."""
        fd, self.fd = self.fd, None
        if fd is not None:
            try:
                _close(fd)
            except Exception:  # noqa: SIM105 - contextlib may be gone at shutdown
                return

    __del__ = release

    def __repr__(self) -> str:
        return f"SandboxClaim({self.name!r}, held={self.fd is not None})"


@dataclass(frozen=True)
class SandboxUser:
    """The unprivileged account the worker runs as."""

    name: str
    uid: int
    gid: int
    #: This grading's exclusive hold on the user, if any: then its leftovers are removed.
    claim: SandboxClaim | None = field(default=None, compare=False, repr=False)

    @property
    def exclusive(self) -> bool:
        """Whether this grading holds the user alone (then its leftovers are removed)."""
        return self.claim is not None and self.claim.fd is not None

    def release(self) -> None:
        """Give the user back to other gradings, if this one holds it (idempotent)."""
        if self.claim is not None:
            self.claim.release()


@dataclass(frozen=True)
class WorkerPython:
    """An interpreter the worker can run: its path and the environment it needs."""

    executable: Path
    environment: dict[str, str] = field(default_factory=dict)
    #: A copy made for this run alone (no usable cache): remove it after the run.
    private: Path | None = None


def protected_folders() -> list[Path]:
    """The grader's own folders: the reference, the grader, and their checkout (if any)."""
    import importlib.util

    import graders

    package = Path(graders.__file__).parent
    folders = [package]
    spec = importlib.util.find_spec("reference")
    if spec is not None and spec.origin is not None:  # absent from the student bundle
        folders.insert(0, Path(spec.origin).parent)
    checkout = package.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "tracks").is_dir():
        folders.append(checkout)
    return folders


def claim_sandbox_user(name: str = DEFAULT_SANDBOX_USER, *,
                       waiting: str | None = None) -> SandboxUser:
    """A sandbox user held by this grading alone, created if missing and swept: the first
    free one of the pool for the default name, else that user exactly (taken over when a
    parent passed its lock down; when another grading holds it, refused, or waited for
    after writing ``waiting`` to stderr)."""
    _check_name(name)
    if name == DEFAULT_SANDBOX_USER:
        for attempt in range(2):
            for number in range(1, MAX_POOL_USERS + 1):
                claim = _try_claim(f"{name}-{number}")
                if claim is not None:
                    return _claimed(claim)
            if attempt == 0:  # claims of finished gradings not yet released are given back
                gc.collect()  # when collected (see SandboxClaim.__del__)
        raise SandboxError(f"no free sandbox user among {name}-1 to {name}-{MAX_POOL_USERS}: "
                           f"other gradings hold them all (locks in {_lock_folder()}); "
                           "wait for some to finish")
    claim = _inherited_claim(name) or _try_claim(name, waiting)
    if claim is None:
        raise SandboxError(f"sandbox user {name!r} is in use by another grading (it holds "
                           f"{_lock_folder() / (name + '.lock')}); wait for it to finish, "
                           "or omit --grader-sandbox-user to get a free one")
    return _claimed(claim)


def _claimed(claim: SandboxClaim) -> SandboxUser:
    try:
        user = ensure_sandbox_user(claim.name)
    except BaseException:
        claim.release()
        raise
    report_problems(sweep_user(user.uid), what=f"leftovers of sandbox user {user.name}")
    return SandboxUser(user.name, user.uid, user.gid, claim)


def _check_name(name: str) -> None:
    if not name or not name.replace("-", "").replace("_", "").isalnum():
        raise SettingsError(f"sandbox user name {name!r} must be letters, digits, - or _")


def _lock_folder() -> Path:
    """Where sandbox users' locks live: a folder of this user's that no one else may write."""
    folder = LOCK_FOLDER if LOCK_FOLDER.parent.is_dir() else \
        Path(tempfile.gettempdir()) / f"serving-grader-locks-{os.geteuid()}"
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o755)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() \
            or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise SandboxError(f"lock folder {folder} must be a folder owned by this user and "
                           "writable by no one else; remove it and retry")
    return folder


def _try_claim(name: str, waiting: str | None = None) -> SandboxClaim | None:
    """A claim on sandbox user ``name``, or None if another process holds it (see
    :func:`lock_file` for ``waiting``)."""
    return lock_file(_lock_folder() / f"{name}.lock", waiting=waiting)


def lock_file(path: Path, *, waiting: str | None = None) -> SandboxClaim | None:
    """This process's ``flock`` on ``path`` (made if missing): None if another process
    holds it, or, given ``waiting``, that line on stderr and the lock once it is free."""
    import fcntl  # POSIX-only, so imported here: this module imports anywhere

    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if waiting is None or not isinstance(error, BlockingIOError):
                os.close(fd)
                return None
            sys.stderr.write(waiting)
            fcntl.flock(fd, fcntl.LOCK_EX)  # a signal's handler may still interrupt it
    except BaseException:
        os.close(fd)
        raise
    return SandboxClaim(path.stem, fd)


def lock_inheritance(name: str, fd: int) -> dict[str, str]:
    """The environment that passes the lock descriptor ``fd`` on user ``name`` down."""
    return {LOCK_VARIABLE: f"{name}:{fd}"}


def passed_lock(environment: Mapping[str, str]) -> tuple[str, int] | None:
    """The user name and lock descriptor :data:`LOCK_VARIABLE` names (not checked)."""
    name, _, number = environment.get(LOCK_VARIABLE, "").rpartition(":")
    return (name, int(number)) if name and number.isdigit() else None


def _inherited_claim(name: str) -> SandboxClaim | None:
    """The claim on ``name`` a parent passed down, if its descriptor holds that lock."""
    passed = passed_lock(os.environ)
    if passed is None or passed[0] != name:
        return None
    fd = passed[1]
    import fcntl  # POSIX-only, so imported here: this module imports anywhere

    try:
        if not os.path.samestat(os.fstat(fd), (_lock_folder() / f"{name}.lock").stat()):
            return None
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the parent's own lock: granted
        os.set_inheritable(fd, False)
    except OSError:
        return None
    os.environ.pop(LOCK_VARIABLE, None)
    return SandboxClaim(name, fd)


def ensure_sandbox_user(name: str) -> SandboxUser:
    """The sandbox account ``name``, created (no home, no login) if missing; not claimed."""
    _check_name(name)
    import pwd  # POSIX-only, so imported here: this module imports anywhere

    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        _create_user(name)
        entry = pwd.getpwnam(name)
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise SettingsError(f"sandbox user {name!r} has uid or gid 0; choose an unprivileged "
                           "account with --grader-sandbox-user")
    person = _not_grader_made(entry)
    if person is not None:
        raise SettingsError(
            f"sandbox user {name!r} is not an account the grader made ({person}), and a "
            "grading kills its processes and deletes its files in the temporary folder; name "
            "a new account (the grader makes it, with no home and no login) or one it made")
    return SandboxUser(name, entry.pw_uid, entry.pw_gid)


#: Shells of an account nobody logs in to.
NO_LOGIN_SHELLS = ("nologin", "false")


def _not_grader_made(entry: Any) -> str | None:
    """Why the account ``entry`` (a pwd entry) is not one the grader would have made (a
    system account with no home and no login shell), or None when it could be."""
    shell = Path(entry.pw_shell or "/usr/sbin/nologin").name
    if shell not in NO_LOGIN_SHELLS:
        return f"its login shell is {entry.pw_shell}"
    home = entry.pw_dir or "/nonexistent"
    if home != "/nonexistent" and os.path.isdir(home):
        return f"its home folder {home} exists"
    first_person = _login_defs("UID_MIN", 1000)
    if entry.pw_uid >= first_person:
        return f"its uid {entry.pw_uid} is in people's range, {first_person} and up in " \
               "/etc/login.defs"
    return None


def _login_defs(key: str, default: int) -> int:
    """A number of /etc/login.defs (``default`` where it is absent or unreadable)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/etc/login.defs").read_text(encoding="utf-8").splitlines():
            words = line.split()
            if len(words) >= 2 and words[0] == key:
                return int(words[1])
    return default


def _create_user(name: str) -> None:
    """Create the account; retried, since useradd fails while another locks /etc/passwd."""
    import pwd  # POSIX-only, so imported here: this module imports anywhere

    command = [shutil.which("useradd") or "/usr/sbin/useradd", "--system", "--user-group",
               "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
               name]
    detail = ""
    for attempt in range(10):
        try:
            subprocess.run(command, check=True, capture_output=True, text=True)
            return
        except OSError as error:
            detail = str(error)
            break
        except subprocess.CalledProcessError as error:
            detail = error.stderr or str(error)
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return
        time.sleep(0.1 * (attempt + 1))
    raise SandboxError(f"cannot create the sandbox user {name!r} ({detail.strip()}); "
                       "create it yourself or pass --grader-sandbox-user")


def grading_parent(sandbox: SandboxUser | None) -> Path | None:
    """Where a grading makes its folders: None for the temporary folder, or
    :data:`GRADINGS_FOLDER` where the sandbox user cannot reach that; SandboxError when
    it can reach neither."""
    temp = Path(tempfile.gettempdir())
    if sandbox is None or traversable_by_others(temp):
        return None
    try:
        with contextlib.suppress(FileExistsError):
            GRADINGS_FOLDER.mkdir(mode=0o711, parents=True)
        info = GRADINGS_FOLDER.lstat()
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() \
                and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            GRADINGS_FOLDER.chmod(0o711)
            if traversable_by_others(GRADINGS_FOLDER):
                return GRADINGS_FOLDER
    except OSError:
        pass
    raise SandboxError(f"the sandbox user cannot reach the temporary folder {temp} (it or a "
                       f"folder above it is closed to other users), nor {GRADINGS_FOLDER}: "
                       "make the temporary folder traversable (chmod o+x) or set TMPDIR to "
                       "one that is, such as /tmp")


def reachable_by_others(path: Path, *, execute: bool = False) -> bool:
    """Whether a user with no ownership or group rights can read (and execute) ``path``."""
    path = path.resolve()
    need = stat.S_IROTH | (stat.S_IXOTH if execute or path.is_dir() else 0)
    return traversable_by_others(path.parent) and path.stat().st_mode & need == need


def worker_python() -> WorkerPython:
    """This interpreter if others can run it, else a copy of it that they can."""
    executable = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    library = shared_library()
    parts = [(executable, True), (stdlib, False)] + ([(library, False)] if library else [])
    if all(reachable_by_others(path, execute=run) for path, run in parts):
        return WorkerPython(executable)
    folder, private = _cached_copy(executable, stdlib, library)
    return WorkerPython(folder / "bin" / executable.name,
                        {"LD_LIBRARY_PATH": str(folder / "lib")},
                        private=folder if private else None)


def shared_library() -> Path | None:
    name = sysconfig.get_config_var("LDLIBRARY") or ""
    directory = sysconfig.get_config_var("LIBDIR") or ""
    shared = name.endswith(".so") or ".so." in name
    candidates = sorted(Path(directory).glob(f"{name}*")) if directory and shared else []
    return candidates[-1] if candidates else None


def _cached_copy(executable: Path, stdlib: Path, library: Path | None) -> tuple[Path, bool]:
    """The cached interpreter copy, or else one for this run; and whether it is private."""
    digest = hashlib.sha256(f"{executable}:{executable.stat().st_mtime_ns}:{sys.version}"
                            .encode()).hexdigest()[:20]
    name = f"serving-grader-python-{os.geteuid()}-{digest}"
    cache = cache_folder()
    if cache is None:  # a private copy where the sandbox user can reach it, for this run
        parent = Path(tempfile.mkdtemp(prefix=f"{name}-"))
        parent.chmod(0o755)
        return _build_copy(executable, stdlib, library, parent), True
    folder = cache / name
    if _complete_copy(folder):
        return folder, False
    with contextlib.suppress(OSError):  # staging folders whose builder died mid-way
        for entry in cache.iterdir():
            pid, dot, _ = entry.name.removeprefix(f".{name}.").partition(".")
            if entry.name.startswith(f".{name}.") and dot and pid.isdigit() \
                    and not process_alive(int(pid)):
                remove_tree(entry)
    if os.path.lexists(folder):  # unfinished or broken: ours to replace (no one else writes here)
        report_problems(remove_tree(folder), what="replacing a broken interpreter copy")
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.{os.getpid()}.", dir=cache))
    _build_copy(executable, stdlib, library, staging)
    published = publish_folder(staging, folder, _complete_copy)
    return published, published != folder


def _build_copy(executable: Path, stdlib: Path, library: Path | None, staging: Path) -> Path:
    """Copy the interpreter, its shared library and its standard library into ``staging``."""
    try:
        (staging / "bin").mkdir()
        shutil.copy2(executable, staging / "bin" / executable.name)
        (staging / "lib").mkdir()
        if library is not None:
            shutil.copy2(library, staging / "lib" / library.name)
            for alias in library.parent.glob(f"{library.name.split('.so')[0]}.so*"):
                if alias.name != library.name:
                    (staging / "lib" / alias.name).symlink_to(library.name)
        shutil.copytree(stdlib, staging / "lib" / stdlib.name,
                        ignore=shutil.ignore_patterns(*_STDLIB_SKIP, "config-*"),
                        symlinks=True)
        open_to_others(staging)
        (staging / ".complete").write_text("complete\n", encoding="utf-8")
    except OSError as error:
        remove_tree(staging)
        raise SandboxError(f"cannot prepare an interpreter the sandbox user can run: "
                           f"{error}") from None
    return staging


def _complete_copy(folder: Path) -> bool:
    """An interpreter copy this user finished building."""
    return (folder / ".complete").is_file() and folder.lstat().st_uid == os.geteuid()


def close_to_others(paths: Iterable[Path], *, sandbox_gid: int | None = None
                    ) -> list[tuple[Path, int, int]]:
    """Remove every right of "others" on ``paths``, and of the group where it is
    ``sandbox_gid``; return (path, mode before, mode after) of each change."""
    changed = []
    for path in paths:
        if path.exists() and not path.is_symlink():
            info = path.stat()
            before = stat.S_IMODE(info.st_mode)
            after = before & ~(0o077 if info.st_gid == sandbox_gid else 0o007)
            if after != before:
                path.chmod(after)
                changed.append((path, before, after))
    return changed


def sweep(token: str) -> list[int]:
    """SIGKILL every process whose environment carries ``token``; return their pids."""
    return kill_marked(f"{TOKEN_VARIABLE}={token}\0")
