"""Output files: refused up front unless they go to a private folder, then written atomically.

The submission's code can read the grader's command line, so it knows where every output
goes. Two rules keep it from redirecting or blocking them:

- **The folder is private.** Before grading, every output path is checked
  (:func:`check_output_file`): its folder must belong to the grader's user (the
  effective uid) and be writable by no one else; every folder above it, and every
  symbolic link on the way, must belong to that user or to root, and folders other users
  can write must be sticky (as ``/tmp`` is). A path that already exists must be a regular
  file: a symbolic link, FIFO, socket, device or folder is refused.
- **The grader creates what it writes.** Each file is written to a temp file the grader
  creates itself (``O_CREAT | O_EXCL | O_NOFOLLOW``, in a folder opened without following
  any link), then renamed over the target (:func:`write_bytes_atomically`). A rename
  replaces whatever entry is there and never writes through it, so a link or FIFO
  planted at the target or at a temp name redirects and blocks nothing.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tempfile
from pathlib import Path

from graders.errors import SettingsError

#: Open a folder without following a link (O_PATH: search permission is enough).
_FOLDER_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | getattr(os, "O_DIRECTORY", 0) \
    | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
#: (Flags Windows lacks count as 0 there, so that this module imports anywhere.)
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) \
    | getattr(os, "O_CLOEXEC", 0)
#: Read without following a link, and without blocking on a FIFO (refused after fstat).
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) \
    | getattr(os, "O_CLOEXEC", 0)
#: The advice every refusal ends with.
PRIVATE_FOLDER = ("write outputs into a private folder: one you own that no other user can "
                  "write, e.g. mkdir -m 700 results")
_MAX_NAME = 200
#: POSIX ownership, modes and descriptor-relative operations (not on Windows, whose
#: folders report mode 0777 and whose access is decided by ACLs: there the checks of
#: ownership and modes are skipped and files are written by path, still atomically).
POSIX_FOLDERS = hasattr(os, "geteuid") and os.open in os.supports_dir_fd


class OutputPathError(SettingsError):
    """An output path the grader refuses: the flag, the path, the rule it breaks and the fix."""


def _describe(info: os.stat_result) -> str:
    mode = info.st_mode
    for test, kind in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return kind
    return "not a regular file"


def _private_group(gid: int) -> bool:
    """Whether group ``gid`` is this user's private group (its only possible member);
    never where there are no user and group databases (Windows)."""
    try:  # POSIX-only: imported here, so that this module imports anywhere
        import grp
        import pwd
    except ImportError:
        return False
    try:
        me = pwd.getpwuid(os.geteuid())
        group = grp.getgrgid(gid)
    except KeyError:
        return False
    if group.gr_name != me.pw_name or any(member != me.pw_name for member in group.gr_mem):
        return False
    return all(user.pw_gid != gid or user.pw_uid == me.pw_uid for user in pwd.getpwall())


def others_can_write(info: os.stat_result) -> bool:
    """Whether a user other than the owner may write in a folder with this status (group
    write counts unless the group is the owner's private group)."""
    mode = stat.S_IMODE(info.st_mode)
    return bool(mode & stat.S_IWOTH) or (bool(mode & stat.S_IWGRP)
                                         and not _private_group(info.st_gid))


def _trusted_owner(uid: int) -> bool:
    return uid in (os.geteuid(), 0)


def _mode(info: os.stat_result) -> str:
    return f"owner uid {info.st_uid}, mode {stat.S_IMODE(info.st_mode):04o}"


def _refuse(flag: str, shown: object, problem: str) -> OutputPathError:
    return OutputPathError(f"{flag} {str(shown)!r}: {problem}; {PRIVATE_FOLDER}")


def _check_holder(folder: Path, flag: str, shown: object) -> None:
    """``folder``, which holds a folder on the way, belongs to this user or root and only
    they can change its entries (others may write only if it is sticky, as /tmp is)."""
    info = os.stat(folder)
    if not _trusted_owner(info.st_uid) or (
            others_can_write(info) and not info.st_mode & stat.S_ISVTX):
        raise _refuse(flag, shown, f"the folder {str(folder)!r} on its way can be changed "
                                   f"by other users ({_mode(info)})")


def _check_walk(folder: Path, flag: str, shown: object) -> None:
    """Every folder on the way to ``folder`` (links followed) belongs to this user or root
    and is writable by no one else unless sticky; every link on the way belongs to this
    user or root."""
    current = Path(folder.anchor)
    for part in folder.parts[1:]:
        _check_holder(current, flag, shown)
        current = current / part
        info = os.lstat(current)
        if stat.S_ISLNK(info.st_mode) and not _trusted_owner(info.st_uid):
            raise _refuse(flag, shown, f"it passes through the symbolic link "
                                       f"{str(current)!r} of another user (uid {info.st_uid})")


def _check_private(folder: Path, flag: str, shown: object) -> None:
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode):
        raise _refuse(flag, shown, f"{str(folder)!r} is not a folder")
    if info.st_uid != os.geteuid():
        raise _refuse(flag, shown, f"its folder {str(folder)!r} belongs to another user "
                                   f"({_mode(info)})")
    if others_can_write(info):
        raise _refuse(flag, shown, f"other users can write to its folder {str(folder)!r} "
                                   f"({_mode(info)}), so they could plant links or FIFOs in it")


def check_output_folder(folder: str | os.PathLike[str], flag: str, *, create: bool = True,
                        allow_link: bool = True, shown: object = None) -> Path:
    """The real path of ``folder``, where ``flag``'s outputs go, after checking that it is
    private (see the module docstring); missing folders are created when ``create``.

    Without ``create``, a missing folder is accepted when the folders above it pass.
    Without ``allow_link``, ``folder`` itself must not be a symbolic link.
    Raises :class:`OutputPathError` (one line: the flag, the path, the rule, the fix).
    """
    shown = folder if shown is None else shown
    wanted = Path(os.path.abspath(folder))
    if not POSIX_FOLDERS:
        try:
            if create:
                wanted.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise _refuse(flag, shown, f"it cannot be created ({error.strerror or error})") \
                from None
        return Path(os.path.realpath(wanted))
    if not allow_link and os.path.islink(wanted):
        raise _refuse(flag, shown, "it is a symbolic link, and results are never sent "
                                   "where a link points")
    existing, missing = wanted, 0
    while not os.path.lexists(existing):
        existing, missing = existing.parent, missing + 1
    try:
        _check_walk(existing, flag, shown)
        real = Path(os.path.realpath(existing))
        _check_walk(real, flag, shown)  # the folders a link led to
        if not missing:
            _check_private(real, flag, shown)
            return real
        if not os.path.isdir(real):
            raise _refuse(flag, shown, f"{str(existing)!r} is not a folder")
        _check_holder(real, flag, shown)
        if not create:
            return real.joinpath(*wanted.parts[len(wanted.parts) - missing:])
        for part in wanted.parts[len(wanted.parts) - missing:]:
            real = real / part
            with contextlib.suppress(FileExistsError):  # checked below, whoever made it
                os.mkdir(real, 0o755)  # never wider, whatever the umask
    except OSError as error:
        raise _refuse(flag, shown, f"it cannot be checked ({error.strerror or error})") \
            from None
    return check_output_folder(wanted, flag, create=False, allow_link=allow_link,
                               shown=shown)


def check_output_file(path: str | os.PathLike[str], flag: str, *, create: bool = True
                      ) -> Path:
    """The absolute path to write ``flag``'s output to, with its folder checked (see
    :func:`check_output_folder`); an existing entry there must be a regular file."""
    wanted = Path(os.path.abspath(path))
    if wanted.name in ("", ".", ".."):
        raise _refuse(flag, path, "it does not name a file")
    target = check_output_folder(wanted.parent, flag, create=create, shown=path) / wanted.name
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return target
    except OSError as error:
        raise _refuse(flag, path, f"it cannot be checked ({error.strerror or error})") \
            from None
    if not stat.S_ISREG(info.st_mode):
        raise OutputPathError(
            f"{flag} {str(path)!r} is {_describe(info)}: the grader writes only regular files "
            "it creates itself; remove it or choose another path")
    return target


def _open_folder(folder: Path) -> int:
    """A descriptor of ``folder`` (absolute, links resolved), opened one component at a
    time without following any link: a folder swapped for a link fails (ELOOP/ENOTDIR)."""
    descriptor = os.open(folder.anchor, _FOLDER_FLAGS)
    try:
        for part in folder.parts[1:]:
            inner = os.open(part, _FOLDER_FLAGS, dir_fd=descriptor)
            os.close(descriptor)
            descriptor = inner
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def _create_temporary(folder: int, name: str) -> tuple[str, int]:
    """A new temp file beside ``name``: created here, never an existing entry or a link."""
    for _ in range(100):
        temporary = f".{name[:_MAX_NAME]}.{secrets.token_hex(8)}.tmp"
        try:
            return temporary, os.open(temporary, _CREATE_FLAGS, 0o600, dir_fd=folder)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temp file name beside {name!r}")


def write_bytes_atomically(path: str | os.PathLike[str], data: bytes, *,
                           mode: int = 0o644) -> None:
    """Write ``data`` to ``path``: a temp file the grader creates, fsynced, given ``mode``,
    then renamed over ``path``. Missing folders are created; a link or FIFO at ``path`` is
    replaced, never written through."""
    target = Path(os.path.abspath(path))
    target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    if not POSIX_FOLDERS:
        _write_by_path(target, data)
        return
    folder = _open_folder(Path(os.path.realpath(target.parent)))
    try:
        temporary, handle = _create_temporary(folder, target.name)
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(data)
                stream.flush()
                os.fsync(stream.fileno())
                os.fchmod(stream.fileno(), mode)
            os.replace(temporary, target.name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=folder)
            raise
    finally:
        os.close(folder)


class Reservation:
    """Disk space held for one output from before any student code runs.

    A temp file the grader creates beside ``path`` is given ``size`` bytes of blocks at
    once, so a submission that fills the disk cannot keep the output from being written:
    :meth:`write` writes into blocks already allocated, then renames the file over
    ``path``. :meth:`release` gives the space back unused."""

    def __init__(self, path: str | os.PathLike[str], size: int) -> None:
        self.target = Path(os.path.abspath(path))
        self.size = size
        self.target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        self._folder: int | None = None
        if not POSIX_FOLDERS:  # nothing held: outputs are written the usual way
            return
        self._folder = _open_folder(Path(os.path.realpath(self.target.parent)))
        self._temporary, self._handle = _create_temporary(self._folder, self.target.name)
        try:
            try:
                os.posix_fallocate(self._handle, 0, size)
            except OSError:  # no fallocate on this file system: allocate by writing zeros
                os.pwrite(self._handle, bytes(size), 0)
            os.fsync(self._handle)
        except BaseException:  # no space to hold (or interrupted): nothing left behind
            self.release()
            raise

    def write(self, data: bytes, *, mode: int = 0o644) -> bool:
        """Write ``data`` into the reserved space and rename it over the target; False
        (nothing written) when ``data`` is larger than the reservation or it is used."""
        if self._folder is None or len(data) > self.size:
            return False
        os.pwrite(self._handle, data, 0)
        os.ftruncate(self._handle, len(data))
        os.fsync(self._handle)
        os.fchmod(self._handle, mode)
        os.replace(self._temporary, self.target.name, src_dir_fd=self._folder,
                   dst_dir_fd=self._folder)
        self._close()
        return True

    def release(self) -> None:
        """Give the space back (the temp file is removed) unless it was written."""
        if self._folder is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._temporary, dir_fd=self._folder)
            self._close()

    def _close(self) -> None:
        os.close(self._handle)
        if self._folder is not None:
            os.close(self._folder)
        self._folder = None


def _write_by_path(target: Path, data: bytes) -> None:
    """Where descriptor-relative operations are missing (Windows): a new temp file beside
    ``target`` (``mkstemp`` creates it exclusively), then ``os.replace``."""
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name[:_MAX_NAME]}.",
                                         suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def write_text_atomically(path: str | os.PathLike[str], text: str, *,
                          reservation: Reservation | None = None) -> None:
    """Write ``text`` as UTF-8 (see :func:`write_bytes_atomically`). A character UTF-8
    cannot encode (a lone surrogate) is written as its escape, ``\\ud800``: never an error.
    With a ``reservation`` for ``path``, into its reserved space when it fits."""
    data = text.encode("utf-8", errors="backslashreplace")
    if reservation is not None and reservation.target == Path(os.path.abspath(path)) \
            and reservation.write(data):
        return
    write_bytes_atomically(path, data)


def install_file(source: Path, target: str | os.PathLike[str]) -> None:
    """Copy ``source`` (a regular file in the grader's private scratch folder) to ``target``
    atomically, as :func:`write_bytes_atomically` does."""
    handle = os.open(source, _READ_FLAGS)
    with os.fdopen(handle, "rb") as stream:
        if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            raise OSError(f"{source} is not a regular file")
        data = stream.read()
    write_bytes_atomically(target, data)


def remove_output(path: str | os.PathLike[str]) -> None:
    """Remove an earlier run's output at ``path`` (a regular file, as checked): unlinking
    removes the entry, never what a link points to."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
