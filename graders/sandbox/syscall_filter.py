"""The worker's syscall filter: one table of refused system calls (:data:`RULES`), a
reason on each row, assembled into a seccomp BPF program for x86_64 and aarch64 that every
Linux worker installs before it imports the submission; on the portable runner a second
one refuses new processes. A refused call fails with its errno, a foreign ABI's kills
(why: docs/security.md, "A syscall filter"). The worker imports a copy: stdlib only."""

from __future__ import annotations

import errno
import os
import struct
import sys
from typing import NamedTuple

#: The namespace flags of clone(2) and unshare(2): NEWNS, NEWCGROUP, NEWUTS, NEWIPC,
#: NEWUSER, NEWPID, NEWNET (the mask moby's default profile refuses clone on).
CLONE_NEW = 0x7E020000
AF_UNIX = 1
TIOCSTI = 0x5412
#: prctl(2)'s option that sets (or, with 0, clears) the signal sent at the parent's death.
PR_SET_PDEATHSIG = 1
TIOCLINUX = 0x541C
#: personality(2) values Docker allows: Linux, Linux32, UNAME26 with each, and a query.
PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)


class Arg(NamedTuple):
    """A test of one argument's low 32 bits: the call is refused when it holds."""

    position: int
    #: "any": refused when the argument has any bit of ``values[0]``; "in": when it is
    #: one of ``values``; "not in": unless it is one of them.
    test: str
    values: tuple[int, ...]


class Rule(NamedTuple):
    """One refused system call: its numbers on x86_64 and aarch64 (None where the
    architecture has no such call), its errno, why."""

    name: str
    x86_64: int | None
    aarch64: int | None
    error: int
    reason: str
    when: Arg | None = None


#: In an argument test's values, the pid of the process that installs the filter (a pid
#: argument of 0 also means it): ``Arg(0, "not in", (0, OWN_PID))`` refuses any other pid.
OWN_PID = -1
#: Refused unless its first argument is 0 or the worker's own pid.
OTHER_PID = Arg(0, "not in", (0, OWN_PID))


EPERM, ENOSYS, EAFNOSUPPORT = errno.EPERM, errno.ENOSYS, errno.EAFNOSUPPORT

RULES: tuple[Rule, ...] = (
    # the kernel keyring: not namespaced, and bubblewrap gives no session keyring of its own
    Rule("keyctl", 250, 219, EPERM, "reads, rewrites and links keys of the grader's session"),
    Rule("add_key", 248, 217, EPERM, "plants keys in the grader's or the sandbox user's keyrings"),
    Rule("request_key", 249, 218, EPERM, "finds keys by name, may run /sbin/request-key"),
    # namespaces and mounts: a namespace of its own mounts a tmpfs past the 64 MiB bound
    Rule("unshare", 272, 97, EPERM, "new user, mount, network... namespaces"),
    Rule("setns", 308, 268, EPERM, "enters another process's namespaces"),
    Rule("clone", 56, 220, EPERM, "new namespaces at fork (threads and forks pass)",
         Arg(0, "any", (CLONE_NEW,))),
    Rule("clone3", 435, 435, ENOSYS, "flags in memory the filter cannot read: libc falls "
         "back to clone"),
    Rule("mount", 165, 40, EPERM, "mounts (a tmpfs of any size, in a namespace of its own)"),
    Rule("umount2", 166, 39, EPERM, "unmounts what hides the host (the package folders)"),
    Rule("pivot_root", 155, 41, EPERM, "a root of its own"),
    Rule("chroot", 161, 51, EPERM, "a root of its own"),
    Rule("open_tree", 428, 428, EPERM, "the new mount API, as mount"),
    Rule("move_mount", 429, 429, EPERM, "the new mount API, as mount"),
    Rule("fsopen", 430, 430, EPERM, "the new mount API, as mount"),
    Rule("fsconfig", 431, 431, EPERM, "the new mount API, as mount"),
    Rule("fsmount", 432, 432, EPERM, "the new mount API, as mount"),
    Rule("fspick", 433, 433, EPERM, "the new mount API, as mount"),
    Rule("mount_setattr", 442, 442, EPERM, "the new mount API, as mount"),
    # SysV IPC: shared memory is outside RLIMIT_AS and outlives the worker; without an IPC
    # namespace the objects are the host's. Refused, not bounded: no per-process bound
    # exists (the kernel's are per namespace), and no serving.py needs them
    Rule("shmget", 29, 194, EPERM, "shared memory outside the memory bound"),
    Rule("shmat", 30, 196, EPERM, "attaches shared memory (the host's, without namespaces)"),
    Rule("shmctl", 31, 195, EPERM, "changes or removes shared memory"),
    Rule("msgget", 68, 186, EPERM, "message queues: kernel memory outside the memory bound"),
    Rule("msgsnd", 69, 189, EPERM, "fills message queues"),
    Rule("msgrcv", 70, 188, EPERM, "reads message queues (the host's, without namespaces)"),
    Rule("msgctl", 71, 187, EPERM, "changes or removes message queues"),
    Rule("semget", 64, 190, EPERM, "semaphore sets, left on the host"),
    Rule("semop", 65, 193, EPERM, "operates the host's semaphores, without namespaces"),
    Rule("semtimedop", 220, 192, EPERM, "operates the host's semaphores, without namespaces"),
    Rule("semctl", 66, 191, EPERM, "changes or removes semaphore sets"),
    # the network: without a network namespace the host's 127.0.0.1 and the world
    Rule("socket", 41, 198, EAFNOSUPPORT, "any family but AF_UNIX: TCP, UDP, netlink, raw",
         Arg(0, "not in", (AF_UNIX,))),
    Rule("socketpair", 53, 199, EAFNOSUPPORT, "any family but AF_UNIX",
         Arg(0, "not in", (AF_UNIX,))),
    # other processes: their memory and descriptors
    Rule("ptrace", 101, 117, EPERM, "traces processes of its user"),
    Rule("process_vm_readv", 310, 270, EPERM, "reads another process's memory"),
    Rule("process_vm_writev", 311, 271, EPERM, "writes another process's memory"),
    Rule("pidfd_getfd", 438, 438, EPERM, "takes another process's descriptors"),
    Rule("kcmp", 312, 272, EPERM, "compares other processes' kernel objects"),
    # other processes of its user: without namespaces, the grader's and a classmate's worker
    Rule("prlimit64", 302, 261, EPERM, "sets another process's limits (a classmate's files)",
         OTHER_PID),
    Rule("setpriority", 141, 140, EPERM, "renices its user's processes, or all of them"),
    Rule("ioprio_set", 251, 30, EPERM, "changes its user's processes' disk priority"),
    Rule("sched_setaffinity", 203, 122, EPERM, "pins another process to CPUs", OTHER_PID),
    Rule("sched_setscheduler", 144, 119, EPERM, "reschedules another process", OTHER_PID),
    Rule("sched_setparam", 142, 118, EPERM, "reschedules another process", OTHER_PID),
    Rule("sched_setattr", 314, 274, EPERM, "reschedules another process", OTHER_PID),
    Rule("migrate_pages", 256, 238, EPERM, "moves another process's memory", OTHER_PID),
    Rule("move_pages", 279, 239, EPERM, "moves another process's memory", OTHER_PID),
    Rule("getsid", 124, 156, EPERM, "reads another's session: tells a grading from a regrade",
         OTHER_PID),
    Rule("getpgid", 121, 155, EPERM, "reads another's process group, as getsid", OTHER_PID),
    Rule("prctl", 157, 167, EPERM, "clears its parent-death signal: outlives its grader",
         Arg(0, "in", (PR_SET_PDEATHSIG,))),
    Rule("pidfd_open", 434, 434, EPERM, "holds another process (the grader) by a descriptor"),
    Rule("pidfd_send_signal", 424, 424, EPERM, "signals a process by its descriptor"),
    Rule("inotify_init", 253, None, EPERM, "watches folders: learns other gradings' names"),
    Rule("inotify_init1", 294, 26, EPERM, "watches folders: learns other gradings' names"),
    Rule("fanotify_init", 300, 262, EPERM, "watches files and mounts beyond the box"),
    # its user's files' metadata, which Landlock leaves to the owner (no lab function
    # needs any: the box's files are made by the grader, with their modes)
    Rule("chmod", 90, None, EPERM, "changes the modes of its user's files outside the box"),
    Rule("fchmod", 91, 52, EPERM, "changes a file's mode, as chmod"),
    Rule("fchmodat", 268, 53, EPERM, "changes a file's mode, as chmod"),
    Rule("fchmodat2", 452, 452, EPERM, "changes a file's mode, as chmod (Linux 6.6)"),
    Rule("chown", 92, None, EPERM, "changes the group of its user's files outside the box"),
    Rule("fchown", 93, 55, EPERM, "changes a file's owner or group, as chown"),
    Rule("lchown", 94, None, EPERM, "changes a file's owner or group, as chown"),
    Rule("fchownat", 260, 54, EPERM, "changes a file's owner or group, as chown"),
    Rule("utime", 132, None, EPERM, "sets its user's files' times outside the box"),
    Rule("utimes", 235, None, EPERM, "sets a file's times, as utime"),
    Rule("futimesat", 261, None, EPERM, "sets a file's times, as utime"),
    Rule("utimensat", 280, 88, EPERM, "sets a file's times, as utime"),
    Rule("setxattr", 188, 5, EPERM, "tags its user's files outside the box"),
    Rule("lsetxattr", 189, 6, EPERM, "tags a file, as setxattr"),
    Rule("fsetxattr", 190, 7, EPERM, "tags a file, as setxattr"),
    Rule("setxattrat", 463, 463, EPERM, "tags a file, as setxattr (Linux 6.13)"),
    Rule("removexattr", 197, 14, EPERM, "removes its user's files' tags outside the box"),
    Rule("lremovexattr", 198, 15, EPERM, "removes a file's tags, as removexattr"),
    Rule("fremovexattr", 199, 16, EPERM, "removes a file's tags, as removexattr"),
    Rule("removexattrat", 466, 466, EPERM, "removes a file's tags, as removexattr (Linux 6.13)"),
    # memory the address-space bound does not count as it is used, and that can outlive it
    Rule("memfd_create", 319, 279, EPERM, "memory as a file: past the memory bound, passable"),
    Rule("memfd_secret", 447, 447, EPERM, "memory as a file, as memfd_create"),
    # the kernel's attack surface, which no serving.py needs
    Rule("bpf", 321, 280, EPERM, "loads programs into the kernel"),
    Rule("perf_event_open", 298, 241, EPERM, "performance counters: side channels"),
    Rule("userfaultfd", 323, 282, EPERM, "stalls the kernel on a page fault: races"),
    Rule("io_uring_setup", 425, 425, EPERM, "io_uring's operations bypass this filter"),
    Rule("io_uring_enter", 426, 426, EPERM, "io_uring's operations bypass this filter"),
    Rule("io_uring_register", 427, 427, EPERM, "io_uring's operations bypass this filter"),
    Rule("personality", 135, 92, EPERM, "execution domains, ASLR off (Docker's values pass)",
         Arg(0, "not in", PERSONALITIES)),
    Rule("ioctl", 16, 29, EPERM, "types into the terminal (TIOCSTI) or drives the console",
         Arg(1, "in", (TIOCSTI, TIOCLINUX))),
    # disk the file-size limit does not see (KEEP_SIZE, and the other modes): mode 0 passes
    Rule("fallocate", 285, 47, errno.EOPNOTSUPP, "disk past RLIMIT_FSIZE and the box's watch "
         "(FALLOC_FL_KEEP_SIZE)", Arg(1, "not in", (0,))),
    # the machine's own state: root's, refused too where the worker is root (runner tests)
    Rule("kexec_load", 246, 104, EPERM, "replaces the running kernel"),
    Rule("kexec_file_load", 320, 294, EPERM, "replaces the running kernel"),
    Rule("init_module", 175, 105, EPERM, "loads kernel modules"),
    Rule("finit_module", 313, 273, EPERM, "loads kernel modules"),
    Rule("delete_module", 176, 106, EPERM, "unloads kernel modules"),
    Rule("reboot", 169, 142, EPERM, "reboots the machine"),
    Rule("swapon", 167, 224, EPERM, "changes swap"),
    Rule("swapoff", 168, 225, EPERM, "changes swap"),
    Rule("acct", 163, 89, EPERM, "process accounting into a file"),
    Rule("syslog", 103, 116, EPERM, "reads the kernel log (where dmesg is not restricted)"),
    Rule("open_by_handle_at", 304, 265, EPERM, "opens files past the mount view (shocker)"),
    Rule("settimeofday", 164, 170, EPERM, "sets the clock"),
    Rule("clock_settime", 227, 112, EPERM, "sets the clock"),
)


class Architecture(NamedTuple):
    """An architecture the table has numbers for."""

    name: str
    #: The kernel's AUDIT_ARCH_* value, which seccomp_data.arch holds for this ABI.
    audit: int
    #: Syscall numbers at or above this belong to another ABI on the same arch (x32).
    foreign_from: int | None


ARCHITECTURES = {
    "x86_64": Architecture("x86_64", 0xC000003E, 0x40000000),  # EM_X86_64 | 64-bit | LE
    "aarch64": Architecture("aarch64", 0xC00000B7, None),  # EM_AARCH64 | 64-bit | LE
}
#: What ``uname -m`` may say for each.
MACHINES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}

#: clone(2)'s flag for a thread (threads die with the worker: they pass the process filter).
CLONE_THREAD = 0x00010000
#: The calls that start a process, by architecture: fork and vfork (x86_64 only), clone.
FORKS = {"x86_64": (57, 58), "aarch64": ()}
CLONE = {"x86_64": 56, "aarch64": 220}

# seccomp(2) and prctl(2); KILL_PROCESS reads as KILL (the thread) before Linux 4.14
SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_ERRNO, SECCOMP_RET_ALLOW = 0x80000000, 0x50000, 0x7FFF0000
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
#: The kernel's limit on one filter's instructions (BPF_MAXINSNS).
MAX_INSTRUCTIONS = 4096
# classic BPF opcodes
LOAD = 0x20  # BPF_LD | BPF_W | BPF_ABS: a 32-bit word of seccomp_data
JEQ, JGE, JSET = 0x15, 0x35, 0x45  # BPF_JMP | BPF_JEQ, BPF_JGE, BPF_JSET | BPF_K
RETURN = 0x06  # BPF_RET | BPF_K
# offsets in struct seccomp_data {int nr; u32 arch; u64 ip; u64 args[6];}
NR, ARCH, ARGS = 0, 4, 16


def unavailable() -> str | None:
    """None when :func:`install` can filter this process, else why not."""
    if not sys.platform.startswith("linux"):
        return "the syscall filter needs Linux (seccomp)"
    if current_architecture() is None:
        return (f"no syscall table for this architecture ({os.uname().machine}, "
                f"{struct.calcsize('P') * 8}-bit {sys.byteorder}-endian Python)")
    return None


def current_architecture() -> Architecture | None:
    """The table's architecture of this interpreter (a 64-bit little-endian one)."""
    name = MACHINES.get(os.uname().machine)
    if name is None or struct.calcsize("P") != 8 or sys.byteorder != "little":
        return None
    return ARCHITECTURES[name]


def instruction(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    """One ``struct sock_filter``."""
    return struct.pack("=HBBI", code, jt, jf, k)


def _refuse(error: int) -> bytes:
    return instruction(RETURN, SECCOMP_RET_ERRNO | (error & 0xFFFF))


ALLOW = instruction(RETURN, SECCOMP_RET_ALLOW)


def _argument_test(rule: Rule, when: Arg, own_pid: int) -> list[bytes]:
    """The instructions after a match of ``rule``'s number: load the argument, return
    (:data:`OWN_PID` among the values is ``own_pid``)."""
    refuse, allow = _refuse(rule.error), ALLOW
    load = instruction(LOAD, ARGS + 8 * when.position)  # the low half: little-endian
    values = tuple(own_pid if value == OWN_PID else value for value in when.values)
    when = when._replace(values=values)
    count = len(when.values)
    if when.test == "any":
        return [load, instruction(JSET, when.values[0], 0, 1), refuse, allow]
    if when.test in ("in", "not in"):  # each match jumps to the last return, past the other
        matches = [instruction(JEQ, value, count - i, 0) for i, value in enumerate(when.values)]
        return [load, *matches, *((allow, refuse) if when.test == "in" else (refuse, allow))]
    raise ValueError(f"unknown argument test {when.test!r} in the rule for {rule.name}")


def _prologue(architecture: Architecture) -> list[bytes]:
    """Kill a call from a foreign ABI, then load the call's number."""
    kill = instruction(RETURN, SECCOMP_RET_KILL_PROCESS)
    code = [instruction(LOAD, ARCH), instruction(JEQ, architecture.audit, 1, 0), kill,
            instruction(LOAD, NR)]
    if architecture.foreign_from is not None:
        code += [instruction(JGE, architecture.foreign_from, 0, 1), kill]
    return code


def program(architecture: Architecture, rules: tuple[Rule, ...] = RULES,
            own_pid: int | None = None) -> bytes:
    """The filter for ``architecture``, installed by the process ``own_pid`` (this one
    unless given): a foreign ABI is killed, each rule's call refused with its errno (when
    its argument test holds), everything else allowed."""
    own_pid = os.getpid() if own_pid is None else own_pid
    code = _prologue(architecture)
    for rule in rules:
        number = getattr(rule, architecture.name)
        if number is None:  # no such call on this architecture
            continue
        if rule.when is None:
            code += [instruction(JEQ, number, 0, 1), _refuse(rule.error)]
        else:
            body = _argument_test(rule, rule.when, own_pid)
            # the body ends in returns, so the accumulator it loads never reaches a later rule
            code += [instruction(JEQ, number, 0, len(body)), *body]
    code.append(ALLOW)
    if len(code) > MAX_INSTRUCTIONS:
        raise ValueError(f"the syscall filter has {len(code)} instructions, more than the "
                         f"kernel's {MAX_INSTRUCTIONS}")
    return b"".join(code)


def process_program(architecture: Architecture) -> bytes:
    """The portable runner's second filter: fork, vfork and clone without CLONE_THREAD
    fail with EAGAIN; a foreign ABI is killed; everything else is left to the first."""
    refuse, allow = _refuse(errno.EAGAIN), ALLOW
    code = _prologue(architecture)
    for number in FORKS[architecture.name]:
        code += [instruction(JEQ, number, 0, 1), refuse]
    code += [instruction(JEQ, CLONE[architecture.name], 0, 4), instruction(LOAD, ARGS),
             instruction(JSET, CLONE_THREAD, 0, 1), allow, refuse, allow]
    return b"".join(code)


def install(rules: tuple[Rule, ...] = RULES, *, no_new_privs: bool = True,
            no_processes: bool = False) -> None:
    """Set no_new_privs (unless not ``no_new_privs``: CAP_SYS_ADMIN is then needed), install
    the filter of ``rules`` (and :func:`process_program` with ``no_processes``) while the
    process has one thread; OSError says which step failed."""
    reason = unavailable()
    architecture = current_architecture()
    if reason is not None or architecture is None:
        raise OSError(errno.ENOSYS, reason or "no syscall table")
    import ctypes  # here only: the grader imports this module too

    class SockFprog(ctypes.Structure):
        _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))

    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                      ctypes.c_ulong)
    prctl.restype = ctypes.c_int
    if no_new_privs and prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(error)}")
    extra = [process_program(architecture)] if no_processes else []
    for code in (program(architecture, rules), *extra):
        instructions = ctypes.create_string_buffer(code, len(code))
        fprog = SockFprog(len(code) // 8, ctypes.addressof(instructions))
        if prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"prctl(PR_SET_SECCOMP): {os.strerror(error)}")
