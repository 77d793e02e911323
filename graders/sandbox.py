"""Privilege separation for the student worker when the grader runs as root.

The worker then runs as an unprivileged sandbox user with no supplementary groups
and umask 077, from an interpreter and a runtime folder that user can read, while
the grader's own folders (the reference, the grading suite, the project checkout)
are closed to it. Without root none of this is possible; the grader says so.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from graders.errors import GraderError
from graders.runtime import publish_folder

DEFAULT_SANDBOX_USER = "serving-sandbox"
#: Environment variable that marks every process a worker starts, for the final sweep.
TOKEN_VARIABLE = "SERVING_GRADER_TOKEN"
#: Standard-library folders the worker never needs, left out of an interpreter copy.
_STDLIB_SKIP = ("site-packages", "dist-packages", "test", "tests", "idlelib", "tkinter",
                "turtledemo", "ensurepip", "lib2to3", "pydoc_data")


class SandboxError(GraderError):
    """The sandbox user or a reachable interpreter cannot be set up."""


@dataclass(frozen=True)
class SandboxUser:
    """The unprivileged account the worker runs as."""

    name: str
    uid: int
    gid: int


@dataclass(frozen=True)
class WorkerPython:
    """An interpreter the worker can run: its path and the environment it needs."""

    executable: Path
    environment: dict[str, str] = field(default_factory=dict)


def running_as_root() -> bool:
    return os.geteuid() == 0


def protected_folders() -> list[Path]:
    """The grader's own folders: the reference, the grader with its suite, and the project
    checkout they were installed from (if any)."""
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


def ensure_sandbox_user(name: str) -> SandboxUser:
    """The sandbox account ``name``, created (system account, no home, no login) if missing."""
    if not name or not name.replace("-", "").replace("_", "").isalnum():
        raise SandboxError(f"sandbox user name {name!r} must be letters, digits, - or _")
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        _create_user(name)
        entry = pwd.getpwnam(name)
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise SandboxError(f"sandbox user {name!r} has uid or gid 0; choose an unprivileged "
                           "account with --grader-sandbox-user")
    return SandboxUser(name, entry.pw_uid, entry.pw_gid)


def _create_user(name: str) -> None:
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    command = [useradd, "--system", "--user-group", "--no-create-home",
               "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name]
    try:
        subprocess.run(command, check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as error:
        detail = getattr(error, "stderr", "") or str(error)
        raise SandboxError(f"cannot create the sandbox user {name!r} ({detail.strip()}); "
                           "create it yourself or pass --grader-sandbox-user") from None


def reachable_by_others(path: Path, *, execute: bool = False) -> bool:
    """Whether a user with no ownership or group rights can read (and execute) ``path``."""
    path = path.resolve()
    for folder in reversed(path.parents):
        if not folder.stat().st_mode & stat.S_IXOTH:
            return False
    mode = path.stat().st_mode
    need = stat.S_IROTH | (stat.S_IXOTH if execute or path.is_dir() else 0)
    return mode & need == need


def worker_python() -> WorkerPython:
    """This interpreter if others can run it, else a cached copy of it that they can."""
    executable = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    library = _shared_library()
    parts = [(executable, True), (stdlib, False)] + ([(library, False)] if library else [])
    if all(reachable_by_others(path, execute=run) for path, run in parts):
        return WorkerPython(executable)
    folder = _cached_copy(executable, stdlib, library)
    return WorkerPython(folder / "bin" / executable.name,
                        {"LD_LIBRARY_PATH": str(folder / "lib")})


def _shared_library() -> Path | None:
    name = sysconfig.get_config_var("LDLIBRARY") or ""
    directory = sysconfig.get_config_var("LIBDIR") or ""
    if not name.endswith(".so") and ".so." not in name:
        return None
    candidates = sorted(Path(directory).glob(f"{name}*")) if directory else []
    return candidates[-1] if candidates else None


def _cached_copy(executable: Path, stdlib: Path, library: Path | None) -> Path:
    digest = hashlib.sha256(f"{executable}:{executable.stat().st_mtime_ns}:{sys.version}"
                            .encode()).hexdigest()[:20]
    folder = Path(tempfile.gettempdir()) / f"serving-grader-python-{os.geteuid()}-{digest}"
    if _complete_copy(folder):
        return folder
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
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
        _open_to_others(staging)
        (staging / ".complete").write_text("complete\n", encoding="utf-8")
    except OSError as error:
        shutil.rmtree(staging, ignore_errors=True)
        raise SandboxError(f"cannot prepare an interpreter the sandbox user can run: "
                           f"{error}") from None
    return publish_folder(staging, folder, _complete_copy)


def _complete_copy(folder: Path) -> bool:
    """An interpreter copy this user finished building."""
    return (folder / ".complete").is_file() and folder.lstat().st_uid == os.geteuid()


def _open_to_others(root: Path) -> None:
    """Make a folder tree readable (and its folders and programs runnable) by everyone."""
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        executable = path.is_dir() or path.stat().st_mode & stat.S_IXUSR
        path.chmod(0o755 if executable else 0o644)


def close_to_others(paths: Iterable[Path]) -> None:
    """Remove every right of "others" on ``paths`` (folders then cannot be entered)."""
    for path in paths:
        if path.exists() and not path.is_symlink():
            mode = path.stat().st_mode
            path.chmod(stat.S_IMODE(mode) & ~0o007)


def sweep(token: str) -> list[int]:
    """SIGKILL every process whose environment carries ``token``; return their pids."""
    marker = f"{TOKEN_VARIABLE}={token}".encode()
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environment = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in environment.split(b"\0"):
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
            except (ProcessLookupError, PermissionError):
                pass
    return killed
