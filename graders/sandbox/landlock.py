"""Landlock for the worker where bubblewrap cannot run: the allowlist without a mount
namespace, applied by the worker itself before it imports the submission, as the kernel's
ABI allows: read only the paths given, write only its box (flat, executing nothing); from
ABI 4 no TCP, from ABI 6 scoped signals and abstract sockets (docs/security.md,
"Landlock"). Copied into the runtime like the syscall filter: the standard library only."""

from __future__ import annotations

import errno
import os
import stat
import struct
import sys
from collections.abc import Sequence

# the generic syscall numbers: the same on x86_64 and aarch64
CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION, RULE_PATH_BENEATH, PR_SET_NO_NEW_PRIVS = 1, 1, 38

# file system rights (LANDLOCK_ACCESS_FS_*)
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
MAKE_DIR, MAKE_SOCK, MAKE_FIFO = 1 << 7, 1 << 9, 1 << 10
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
#: Rights that apply to a file (the rest apply to a folder's entries).
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
#: The file system rights each ABI handles: ABI 1's thirteen, then one right at 2, 3, 5.
FS_BY_ABI = {1: (1 << 13) - 1, 2: REFER, 3: TRUNCATE, 5: IOCTL_DEV}
#: LANDLOCK_ACCESS_NET_BIND_TCP | CONNECT_TCP (ABI 4).
NET_TCP = 0b11
#: LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | SIGNAL (ABI 6).
SCOPES = 0b11


def abi_version() -> int:
    """The kernel's Landlock ABI version, 0 where there is none."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        return _syscall(CREATE_RULESET, None, 0, CREATE_RULESET_VERSION)
    except OSError:  # ENOSYS (no Landlock), EOPNOTSUPP (not enabled at boot)
        return 0


def unavailable() -> str | None:
    """None where :func:`restrict` can apply, else why not."""
    if not sys.platform.startswith("linux"):
        return "Landlock needs Linux"
    if abi_version() < 1:
        return f"this kernel ({os.uname().release}) offers no Landlock"
    return None


def handled(abi: int) -> tuple[int, int, int]:
    """The file system rights, network rights and scopes handled at ``abi``."""
    fs = sum(rights for version, rights in FS_BY_ABI.items() if version <= abi)
    return fs, NET_TCP if abi >= 4 else 0, SCOPES if abi >= 6 else 0


def restrict(read: Sequence[str], write: Sequence[str]) -> int:
    """Restrict this process to reading ``read`` and writing ``write`` (missing paths left
    out), refuse TCP and scope it, as the kernel's ABI allows; return that ABI."""
    abi = abi_version()
    if abi < 1:
        raise OSError(errno.ENOSYS, unavailable() or "no Landlock")
    fs, net, scoped = handled(abi)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    attr = struct.pack("=QQQ", fs, net, scoped)[:size]
    ruleset = _syscall(CREATE_RULESET, attr, size, 0)
    # a flat box (see box_watch.py), with no socket or FIFO another worker could open
    written = fs & ~EXECUTE & ~MAKE_DIR & ~MAKE_SOCK & ~MAKE_FIFO
    try:
        for paths, rights in ((read, EXECUTE | READ_FILE | READ_DIR), (write, written)):
            for path in paths:
                _allow(ruleset, path, rights)
        # restrict_self needs no_new_privs (without CAP_SYS_ADMIN); the filter sets it too
        _syscall(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, call="prctl")
        _syscall(RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)
    return abi


def _allow(ruleset: int, path: str, rights: int) -> None:
    """Add a rule giving ``rights`` beneath ``path`` (a file's rights alone on a file)."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= FILE_RIGHTS
        rule = struct.pack("=Qi", rights, fd)  # struct landlock_path_beneath_attr (packed)
        _syscall(ADD_RULE, ruleset, RULE_PATH_BENEATH, rule, 0)
    finally:
        os.close(fd)


def _syscall(number: int, *arguments: int | bytes | None, call: str = "syscall") -> int:
    """``syscall(number, *arguments)`` (or libc's ``call``), bytes by address; OSError."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    buffers = [ctypes.create_string_buffer(value, len(value)) if isinstance(value, bytes)
               else value for value in arguments]
    values = [ctypes.c_void_p(ctypes.addressof(value)) if isinstance(value, ctypes.Array)
              else ctypes.c_long(value or 0) for value in buffers]
    result = getattr(libc, call)(ctypes.c_long(number), *values)
    if result < 0:
        error = ctypes.get_errno()
        raise OSError(error, f"landlock {call} {number}: {os.strerror(error)}")
    return int(result)
