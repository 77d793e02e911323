"""The worker's syscall filter: its table, its BPF program, and what it refuses and lets pass.

The program is checked by running it here, in a small classic-BPF interpreter, on both
architectures of the table (so aarch64's numbers are exercised on an x86_64 machine). The
behaviour is checked for real in child processes that install the filter and try each
refused call, and everything an honest worker needs; then in the worker itself, through
the runner, and in a worker that cannot install it (a grader failure, no student code).
"""

from __future__ import annotations

import errno
import json
import os
import re
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import REPO

import graders.sandbox.runner
from graders.sandbox import runtime, syscall_filter
from graders.sandbox.confinement import protections_for
from graders.sandbox.privileges import SandboxError
from graders.sandbox.runner import Limits, StudentRunner
from graders.sandbox.syscall_filter import (
    ARCHITECTURES,
    CLONE_NEW,
    MAX_INSTRUCTIONS,
    RULES,
    SECCOMP_RET_ALLOW,
    SECCOMP_RET_ERRNO,
    SECCOMP_RET_KILL_PROCESS,
    Architecture,
    program,
)

LINUX = sys.platform.startswith("linux")
HERE = syscall_filter.current_architecture()
needs_filter = pytest.mark.skipif(syscall_filter.unavailable() is not None,
                                  reason=str(syscall_filter.unavailable()))
KILL = SECCOMP_RET_KILL_PROCESS
ALLOW = SECCOMP_RET_ALLOW
#: Numbers of calls the table leaves alone (read, write, mmap, getrandom), per architecture.
ALLOWED = {"x86_64": {"read": 0, "write": 1, "mmap": 9, "getrandom": 318},
           "aarch64": {"read": 63, "write": 64, "mmap": 222, "getrandom": 278}}
#: clone's flags for a thread (glibc's pthread_create) and for fork (SIGCHLD).
THREAD_FLAGS = 0x3D0F00
FORK_FLAGS = 17
CLONE_NEWUSER = 0x10000000
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK = 1, 2, 10, 16


def refused(error: int) -> int:
    return SECCOMP_RET_ERRNO | error


def number(name: str, architecture: str) -> int:
    rule = next(rule for rule in RULES if rule.name == name)
    value = getattr(rule, architecture)
    assert value is not None, f"{name} has no number on {architecture}"
    return int(value)


def run_filter(code: bytes, *, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    """What the kernel would do with one call: ``code`` run on its seccomp_data."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * (6 - len(args))))
    instructions = [struct.unpack("=HBBI", code[i:i + 8]) for i in range(0, len(code), 8)]
    accumulator, pc = 0, 0
    while True:
        assert 0 <= pc < len(instructions), f"a jump leaves the program at {pc}"
        op, jt, jf, k = instructions[pc]
        if op == 0x20:  # load a word
            assert k % 4 == 0
            assert k + 4 <= len(data)
            accumulator = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif op == 0x06:
            return k
        elif op in (0x15, 0x35, 0x45):
            taken = {0x15: accumulator == k, 0x35: accumulator >= k,
                     0x45: bool(accumulator & k)}[op]
            pc += 1 + (jt if taken else jf)
        else:
            raise AssertionError(f"unexpected opcode {op:#x}")


def decide(architecture: Architecture, name: str, *args: int) -> int:
    nr = number(name, architecture.name) if name in {rule.name for rule in RULES} \
        else ALLOWED[architecture.name][name]
    return run_filter(program(architecture), nr=nr, arch=architecture.audit, args=args)


# --- the table -------------------------------------------------------------------------------


#: The calls x86_64 keeps from before the generic table, which aarch64 never had (its
#: libc uses the *at call of each): refused on x86_64 alone.
X86_64_ONLY = {"chmod", "chown", "lchown", "utime", "utimes", "futimesat", "inotify_init"}
#: Rows for calls newer than this machine's kernel headers, with their numbers (the same on
#: every architecture since Linux 5.1's unified numbering) and the kernel that added them.
NEWER_THAN_HEADERS = {"fchmodat2": (452, "6.6"), "setxattrat": (463, "6.13"),
                      "removexattrat": (466, "6.13")}


def test_every_refused_call_has_a_number_on_each_architecture_and_one_row() -> None:
    names = [rule.name for rule in RULES]
    assert len(names) == len(set(names))
    for architecture in ARCHITECTURES:
        numbers = [getattr(rule, architecture) for rule in RULES]
        assert all(value is None or 0 <= value < 1024 for value in numbers)
        present = [value for value in numbers if value is not None]
        assert len(present) == len(set(present)), f"two rows share a number on {architecture}"
    assert {rule.name for rule in RULES if rule.aarch64 is None} == X86_64_ONLY
    assert all(rule.x86_64 is not None for rule in RULES)


def test_every_row_gives_a_one_line_reason_and_a_known_errno() -> None:
    for rule in RULES:
        assert rule.reason, rule.name
        assert "\n" not in rule.reason, rule.name
        assert len(rule.reason) <= 80, rule.name
        assert rule.error in (errno.EPERM, errno.ENOSYS, errno.EAFNOSUPPORT, errno.EOPNOTSUPP), \
            rule.name


def test_the_table_refuses_at_least_what_the_issue_names() -> None:
    names = {rule.name for rule in RULES}
    assert {"keyctl", "add_key", "request_key", "unshare", "setns", "clone", "clone3",
            "mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen", "fsconfig",
            "fsmount", "fspick", "mount_setattr", "shmget", "shmat", "msgget", "msgsnd",
            "semget", "socket", "socketpair", "ptrace", "process_vm_readv",
            "process_vm_writev", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
            "io_uring_enter", "io_uring_register", "kexec_load", "kexec_file_load",
            "init_module", "finit_module", "delete_module", "personality"} <= names


#: The kernel headers that name each architecture's numbers (aarch64 uses the generic table).
HEADERS = {"x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
           "aarch64": Path("/usr/include/asm-generic/unistd.h")}


@pytest.mark.parametrize("architecture", sorted(ARCHITECTURES))
def test_the_tables_numbers_are_the_kernel_headers_numbers(architecture: str) -> None:
    header = HEADERS[architecture]
    if not header.is_file():
        pytest.skip(f"{header} is not installed")
    defined = dict(re.findall(r"^#define __NR_(\w+)\s+(\d+)\s*$", header.read_text(),
                              re.MULTILINE))
    known = [rule for rule in RULES if rule.name in defined
             or getattr(rule, architecture) is None]
    assert {rule.name: getattr(rule, architecture) for rule in known} == \
        {rule.name: int(defined[rule.name]) if rule.name in defined else None
         for rule in known}
    # the rest are the newer calls the headers predate, at their unified numbers
    assert {rule.name: getattr(rule, architecture) for rule in RULES if rule not in known} \
        == {name: number for name, (number, _) in NEWER_THAN_HEADERS.items()
            if name not in defined}


# --- the program ------------------------------------------------------------------------------


@pytest.mark.parametrize("architecture", ARCHITECTURES.values(), ids=ARCHITECTURES)
def test_the_program_is_whole_instructions_under_the_kernels_limit(
        architecture: Architecture) -> None:
    code = program(architecture)
    assert len(code) % 8 == 0
    assert len(RULES) * 2 < len(code) // 8 < MAX_INSTRUCTIONS


@pytest.mark.parametrize("architecture", ARCHITECTURES.values(), ids=ARCHITECTURES)
def test_every_row_is_refused_with_its_errno(architecture: Architecture) -> None:
    for rule in RULES:
        if rule.when is None and getattr(rule, architecture.name) is not None:
            assert decide(architecture, rule.name) == refused(rule.error), rule.name


@pytest.mark.parametrize("architecture", ARCHITECTURES.values(), ids=ARCHITECTURES)
def test_calls_on_another_pid_are_refused_and_on_its_own_pass(
        architecture: Architecture) -> None:
    """prlimit, the scheduler's setters, page moves, getsid and getpgid: a pid of 0 or the
    worker's own passes (its own limits, affinity, session), any other is refused."""
    own = 4242
    code = program(architecture, own_pid=own)
    on_pids = [rule for rule in RULES if rule.when is syscall_filter.OTHER_PID]
    assert {rule.name for rule in on_pids} >= {
        "prlimit64", "sched_setaffinity", "sched_setscheduler", "sched_setparam",
        "sched_setattr", "getsid", "getpgid"}
    for rule in on_pids:
        nr = getattr(rule, architecture.name)
        for pid in (0, own, own | 1 << 32):  # the upper half is not a pid's
            assert run_filter(code, nr=nr, arch=architecture.audit, args=(pid,)) == ALLOW
        for pid in (1, own - 1, own + 1, 0x7FFFFFFF, 0xFFFFFFFF):
            assert run_filter(code, nr=nr, arch=architecture.audit, args=(pid,)) == \
                refused(rule.error), (rule.name, pid)
    # the pid is the installing process's unless given
    assert run_filter(program(architecture), nr=number("getsid", architecture.name),
                      arch=architecture.audit, args=(os.getpid(),)) == ALLOW


@pytest.mark.parametrize("architecture", ARCHITECTURES.values(), ids=ARCHITECTURES)
def test_arguments_decide_clone_socket_personality_and_ioctl(
        architecture: Architecture) -> None:
    eperm = refused(errno.EPERM)
    assert decide(architecture, "clone", THREAD_FLAGS) == ALLOW
    assert decide(architecture, "clone", FORK_FLAGS) == ALLOW
    assert decide(architecture, "clone", FORK_FLAGS | CLONE_NEWUSER) == eperm
    for bit in range(32):
        if CLONE_NEW >> bit & 1:
            assert decide(architecture, "clone", 1 << bit | FORK_FLAGS) == eperm
    assert decide(architecture, "socket", AF_UNIX, 1, 0) == ALLOW
    assert decide(architecture, "socketpair", AF_UNIX, 1, 0) == ALLOW
    for family in (AF_INET, AF_INET6, AF_NETLINK, 17):
        assert decide(architecture, "socket", family) == refused(errno.EAFNOSUPPORT)
        assert decide(architecture, "socketpair", family) == refused(errno.EAFNOSUPPORT)
    assert decide(architecture, "personality", 0xFFFFFFFF) == ALLOW
    assert decide(architecture, "personality", 0) == ALLOW
    assert decide(architecture, "personality", 0x0040000) == eperm  # ADDR_NO_RANDOMIZE
    assert decide(architecture, "ioctl", 0, 0x5412) == eperm  # TIOCSTI
    assert decide(architecture, "ioctl", 0, 0x5412 | 1 << 32) == eperm  # upper half ignored
    assert decide(architecture, "ioctl", 0, 0x5401) == ALLOW  # TCGETS
    assert decide(architecture, "clone3") == refused(errno.ENOSYS)


@pytest.mark.parametrize("architecture", ARCHITECTURES.values(), ids=ARCHITECTURES)
def test_calls_outside_the_table_pass_and_foreign_abis_are_killed(
        architecture: Architecture) -> None:
    code = program(architecture)
    for nr in ALLOWED[architecture.name].values():
        assert run_filter(code, nr=nr, arch=architecture.audit) == ALLOW
    i386 = 0x40000003  # AUDIT_ARCH_I386: int 0x80 from an x86_64 process
    assert run_filter(code, nr=ALLOWED[architecture.name]["read"], arch=i386) == KILL
    if architecture.name == "x86_64":  # x32's numbers carry bit 30
        assert run_filter(code, nr=0x40000000 | 39, arch=architecture.audit) == KILL


def test_where_the_filter_cannot_run_it_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(syscall_filter.sys, "platform", "darwin")
    assert syscall_filter.unavailable() == "the syscall filter needs Linux (seccomp)"
    monkeypatch.setattr(syscall_filter.sys, "platform", "linux")
    uname = syscall_filter.os.uname()
    foreign = type(uname)((*uname[:4], "riscv64"))
    monkeypatch.setattr(syscall_filter.os, "uname", lambda: foreign)
    reason = syscall_filter.unavailable()
    assert reason is not None
    assert reason.startswith("no syscall table for this architecture")
    assert "riscv64" in reason
    protections = protections_for(None)
    assert protections.syscall_filter is False
    assert protections.description.endswith(f"; no syscall filter ({reason})")


@needs_filter
def test_protections_claim_the_filter_on_linux() -> None:
    protections = protections_for(None)
    assert protections.syscall_filter is True
    assert protections.as_dict()["syscall_filter"] is True
    assert "a syscall filter refuses the keyring, new namespaces, mounts, SysV IPC" in \
        protections.description


# --- installed in a child process --------------------------------------------------------------

#: Installs the filter (argument "install"), then tries each call; prints {call: outcome}.
#: Every call is harmless without the filter too (nonexistent paths and keys, bad
#: arguments, or effects on this short-lived process alone), so that it runs bare as root.
TRIES = textwrap.dedent("""
    import ctypes, errno, json, mmap, os, socket, subprocess, sys, threading
    sys.path.insert(0, sys.argv[1])
    import syscall_filter
    numbers = {rule.name: getattr(rule, syscall_filter.current_architecture().name)
               for rule in syscall_filter.RULES}
    libc = ctypes.CDLL(None, use_errno=True)
    found = {}
    NOWHERE = b"/nonexistent-serving-grader-filter-test"
    KEY = 0x5E57F11E  # a SysV key nobody uses: looked up, never created

    def outcome(result):
        return "ok" if result >= 0 else errno.errorcode[ctypes.get_errno()]

    def call(name, *args):
        found[name] = outcome(libc.syscall(ctypes.c_long(numbers[name]),
                                           *(ctypes.c_long(a) if isinstance(a, int) else a
                                             for a in args)))

    if sys.argv[2] == "install":
        syscall_filter.install()
    status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines()
                  if ":\\t" in line)
    found["Seccomp"], found["NoNewPrivs"] = status["Seccomp"].strip(), status["NoNewPrivs"].strip()
    call("keyctl", 0, -3, 0)  # KEYCTL_GET_KEYRING_ID of the session keyring
    call("add_key", b"user", b"serving-grader-filter-test", b"x", 1, -2)  # the process's
    call("request_key", b"user", b"serving-grader-filter-test-absent", None, 0)
    result = libc.syscall(ctypes.c_long(numbers["clone"]), ctypes.c_long(0x10000000 | 17),
                          *[ctypes.c_long(0)] * 4)
    if result == 0:
        os._exit(0)  # a child, had clone been allowed
    if result > 0:
        os.waitpid(result, 0)
    found["clone(CLONE_NEWUSER)"] = outcome(result)
    call("clone3", 0, 0)
    call("mount", b"none", NOWHERE, b"tmpfs", 0, 0)
    call("umount2", NOWHERE, 2)
    call("fsopen", b"no-such-filesystem", 0)
    call("shmget", KEY, 4096, 0)
    call("msgget", KEY, 0)
    call("semget", KEY, 1, 0)
    call("ptrace", 0x7FFF, os.getpid(), 0, 0)  # no such request
    call("bpf", 0, 0, 0)
    call("perf_event_open", 0, 0, -1, -1, 0)
    call("io_uring_setup", 1, 0)
    call("personality", 0x0040000)  # ADDR_NO_RANDOMIZE, for this process alone
    for family in ("AF_INET", "AF_INET6", "AF_NETLINK"):
        try:
            socket.socket(getattr(socket, family), socket.SOCK_DGRAM).close()
            found[family] = "ok"
        except OSError as error:
            found[family] = errno.errorcode[error.errno]
    # a file of its own, unlinked at once: KEEP_SIZE allocates past RLIMIT_FSIZE, mode 0 not
    import tempfile
    with tempfile.TemporaryFile() as scratch:
        for label, mode in (("fallocate(KEEP_SIZE)", 1), ("fallocate", 0)):
            call_result = libc.fallocate(scratch.fileno(), ctypes.c_int(mode),
                                         ctypes.c_long(0), ctypes.c_long(4096))
            found[label] = outcome(call_result)
    # what an honest worker needs
    left, right = socket.socketpair()
    left.sendall(b"ping")
    found["AF_UNIX socketpair"] = right.recv(4).decode()
    box = []
    thread = threading.Thread(target=lambda: box.append(threading.get_native_id()))
    thread.start()
    thread.join()
    found["thread"] = "ok" if box and box[0] != threading.get_native_id() else "no"
    found["fork and exec"] = subprocess.run(["/bin/echo", "ok"], capture_output=True,
                                            text=True).stdout.strip()
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    found["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    found["urandom"] = len(os.urandom(32)) + len(os.getrandom(8))
    with mmap.mmap(-1, 1 << 20) as memory:
        memory[:4] = b"page"
        found["mmap"] = memory[:4].decode()
    found["personality query"] = outcome(libc.syscall(ctypes.c_long(numbers["personality"]),
                                                      ctypes.c_long(0xFFFFFFFF)))
    # another process of its user (a child here, asleep), and its own
    import resource
    child = os.fork()
    if child == 0:
        import time
        time.sleep(30)
        os._exit(0)

    def tried(label, action):
        try:
            action()
            found[label] = "ok"
        except OSError as error:
            found[label] = errno.errorcode[error.errno]

    limit = resource.getrlimit(resource.RLIMIT_NOFILE)
    cpus = os.sched_getaffinity(0)
    tried("prlimit(other)", lambda: resource.prlimit(child, resource.RLIMIT_NOFILE, limit))
    tried("sched_setaffinity(other)", lambda: os.sched_setaffinity(child, cpus))
    tried("getsid(other)", lambda: os.getsid(child))
    tried("getpgid(other)", lambda: os.getpgid(child))
    tried("pidfd_open", lambda: os.close(os.pidfd_open(child)))
    tried("setpriority", lambda: os.setpriority(os.PRIO_PROCESS, 0,
                                                os.getpriority(os.PRIO_PROCESS, 0)))
    tried("prlimit(own)", lambda: resource.prlimit(os.getpid(), resource.RLIMIT_NOFILE, limit))
    tried("setrlimit", lambda: resource.setrlimit(resource.RLIMIT_NOFILE, limit))
    tried("sched_setaffinity(own)", lambda: os.sched_setaffinity(0, cpus))
    tried("getsid(own)", lambda: os.getsid(0))
    tried("getpgid(own)", lambda: os.getpgid(os.getpid()))
    os.kill(child, 9)
    os.waitpid(child, 0)
    # a file of its own, outside any box: its metadata
    handle, mine = tempfile.mkstemp()
    os.close(handle)
    tried("chmod", lambda: os.chmod(mine, 0o600))
    with open(mine, "rb") as opened:
        tried("fchmod", lambda: os.fchmod(opened.fileno(), 0o600))
    tried("chown", lambda: os.chown(mine, os.getuid(), os.getgid()))
    tried("utime", lambda: os.utime(mine, (0, 0)))
    tried("setxattr", lambda: os.setxattr(mine, "user.serving-grader-test", b"1"))
    os.unlink(mine)
    # watchers, and memory as a file
    for label, name, args in (("inotify_init1", "inotify_init1", (0,)),
                              ("fanotify_init", "fanotify_init", (0, 0))):
        result = getattr(libc, name)(*args)
        found[label] = outcome(result)
        if result >= 0:
            os.close(result)
    tried("memfd_create", lambda: os.close(os.memfd_create("serving-grader-test")))
    signal_number = ctypes.c_int(0)
    found["prctl(PR_GET_PDEATHSIG)"] = outcome(libc.prctl(2, ctypes.byref(signal_number), 0, 0, 0))
    found["prctl(PR_SET_PDEATHSIG)"] = outcome(libc.prctl(1, 0, 0, 0, 0))
    # last: it leaves this process in a user namespace of its own
    call("unshare", 0x10000000)  # CLONE_NEWUSER
    if hasattr(os, "unshare"):
        try:
            os.unshare(os.CLONE_NEWUSER)
            found["os.unshare"] = "ok"
        except OSError as error:
            found["os.unshare"] = errno.errorcode[error.errno]
    print(json.dumps(found))
""")

#: Every refused call, and the errno it fails with.
REFUSED = {"keyctl": "EPERM", "add_key": "EPERM", "request_key": "EPERM", "unshare": "EPERM",
           "clone(CLONE_NEWUSER)": "EPERM", "clone3": "ENOSYS", "mount": "EPERM",
           "umount2": "EPERM", "fsopen": "EPERM", "shmget": "EPERM", "msgget": "EPERM",
           "semget": "EPERM", "ptrace": "EPERM", "bpf": "EPERM", "perf_event_open": "EPERM",
           "io_uring_setup": "EPERM", "personality": "EPERM",
           "fallocate(KEEP_SIZE)": errno.errorcode[errno.EOPNOTSUPP],  # ENOTSUP, the same
           "AF_INET": "EAFNOSUPPORT", "AF_INET6": "EAFNOSUPPORT", "AF_NETLINK": "EAFNOSUPPORT",
           "prlimit(other)": "EPERM", "sched_setaffinity(other)": "EPERM",
           "getsid(other)": "EPERM", "getpgid(other)": "EPERM", "pidfd_open": "EPERM",
           "setpriority": "EPERM", "chmod": "EPERM", "fchmod": "EPERM", "chown": "EPERM",
           "utime": "EPERM", "setxattr": "EPERM", "inotify_init1": "EPERM",
           "fanotify_init": "EPERM", "memfd_create": "EPERM", "prctl(PR_SET_PDEATHSIG)": "EPERM"}
#: The calls on other processes and on its user's files that the filter refuses: each
#: works bare (as root, which this test is where the filter can run).
REACHING = ("prlimit(other)", "sched_setaffinity(other)", "getsid(other)", "getpgid(other)",
            "pidfd_open", "setpriority", "chmod", "fchmod", "chown", "utime",
            "inotify_init1", "fanotify_init", "memfd_create", "prctl(PR_SET_PDEATHSIG)")
#: What an honest worker needs, working.
HONEST = {"AF_UNIX socketpair": "ping", "thread": "ok", "fork and exec": "ok", "fork": 7,
          "urandom": 40, "mmap": "page", "personality query": "ok", "fallocate": "ok",
          "prlimit(own)": "ok", "setrlimit": "ok", "sched_setaffinity(own)": "ok",
          "getsid(own)": "ok", "getpgid(own)": "ok", "prctl(PR_GET_PDEATHSIG)": "ok"}


def tried(mode: str) -> dict[str, object]:
    completed = subprocess.run(
        [sys.executable, "-I", "-S", "-c", TRIES, str(Path(syscall_filter.__file__).parent),
         mode], capture_output=True, text=True, timeout=60, check=False, cwd="/")
    assert completed.returncode == 0, completed.stderr[-3000:]
    found: dict[str, object] = json.loads(completed.stdout)
    return found


@pytest.fixture(scope="module")
def filtered() -> dict[str, object]:
    if syscall_filter.unavailable() is not None:
        pytest.skip(str(syscall_filter.unavailable()))
    return tried("install")


def test_an_installed_filter_is_in_force_with_no_new_privileges(
        filtered: dict[str, object]) -> None:
    assert (filtered["Seccomp"], filtered["NoNewPrivs"]) == ("2", "1")


@pytest.mark.parametrize("call", sorted(REFUSED))
def test_each_refused_call_fails_with_its_errno_and_the_process_lives_on(
        filtered: dict[str, object], call: str) -> None:
    assert filtered[call] == REFUSED[call]


def test_os_unshare_is_refused_where_python_has_it(filtered: dict[str, object]) -> None:
    if "os.unshare" not in filtered:
        pytest.skip("this Python has no os.unshare (3.12 and later)")
    assert filtered["os.unshare"] == "EPERM"


def test_what_an_honest_worker_needs_still_works(filtered: dict[str, object]) -> None:
    assert {key: filtered[key] for key in HONEST} == HONEST


@needs_filter
def test_without_the_filter_the_same_calls_are_not_refused_so() -> None:
    """The probe has teeth: unfiltered, the calls succeed or fail for the kernel's own
    reasons (no such path, key or request), never with the filter's errno."""
    bare = tried("bare")
    assert (bare["Seccomp"], bare["AF_INET"], bare["AF_NETLINK"]) == ("0", "ok", "ok")
    assert bare["shmget"] == bare["msgget"] == bare["semget"] == "ENOENT"
    assert bare["mount"] == bare["umount2"] == "ENOENT"
    assert bare["clone3"] != "ENOSYS"
    assert bare["fallocate(KEEP_SIZE)"] == "ok"
    assert bare["ptrace"] != "EPERM"
    assert {key: bare[key] for key in HONEST} == HONEST
    if os.geteuid() == 0:  # fanotify needs CAP_SYS_ADMIN even bare
        assert {key: bare[key] for key in REACHING} == dict.fromkeys(REACHING, "ok")
    assert bare["setxattr"] != "EPERM"  # where the filesystem has user tags, "ok"


@pytest.mark.skipif(HERE is None or HERE.name != "x86_64", reason="x32 is x86_64's")
def test_an_x32_call_kills_the_process() -> None:
    completed = subprocess.run(
        [sys.executable, "-I", "-S", "-c", "import ctypes, sys; sys.path.insert(0, sys.argv[1]);"
         "import syscall_filter; syscall_filter.install();"
         "ctypes.CDLL(None).syscall(ctypes.c_long(0x40000000 | 39)); print('alive')",
         str(Path(syscall_filter.__file__).parent)],
        capture_output=True, text=True, timeout=60, check=False)
    assert completed.returncode == -31  # SIGSYS
    assert "alive" not in completed.stdout


# --- in the worker ----------------------------------------------------------------------------

PROBE = textwrap.dedent("""
    import ctypes, errno, os, socket

    def status():
        with open("/proc/self/status") as handle:
            lines = [line.split(":", 1) for line in handle if ":" in line]
        found = {key: value.strip() for key, value in lines}
        return [found["Seccomp"], found["NoNewPrivs"]]

    def inet():
        try:
            socket.socket(socket.AF_INET)
        except OSError as error:
            return errno.errorcode[error.errno]
        return "ok"
""").encode()


@needs_filter
def test_the_worker_runs_the_submission_filtered(tmp_path: Path) -> None:
    with StudentRunner(PROBE, root=tmp_path) as runner:
        assert runner.protections.syscall_filter is True
        outcome = runner.call("status")
        assert outcome.value == ["2", "1"]
        assert runner.call("inet").value == "EAFNOSUPPORT"
        assert runner.call("status").ok  # a refused call fails that call alone


@pytest.fixture
def broken_filter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A runtime whose syscall filter cannot be installed (as a kernel might refuse it)."""
    folder = tmp_path / "broken-runtime"
    runtime.prepare_runtime(folder)
    for cached in (folder / "__pycache__").glob("syscall_filter.*"):
        cached.unlink()
    (folder / "syscall_filter.py").write_text(
        "def install():\n    raise OSError(22, 'prctl(PR_SET_SECCOMP): refused by the test')\n",
        encoding="utf-8")
    monkeypatch.setattr(graders.sandbox.runner, "cached_runtime", lambda parent: folder)
    return folder


MARKS_ITS_IMPORT = b"""
import pathlib
pathlib.Path(__file__).with_name("imported").write_text("ran")

def status():
    return "answered"
"""


@needs_filter
def test_a_worker_that_cannot_install_the_filter_runs_no_student_code(
        broken_filter: Path, tmp_path: Path) -> None:
    root = tmp_path / "grading"
    root.mkdir()
    runner = StudentRunner(MARKS_ITS_IMPORT, root=root, limits=Limits(import_timeout_s=30.0))
    with runner:
        for _ in range(2):  # and every later call fails the same way
            with pytest.raises(SandboxError, match="could not install its syscall filter.*"
                               "refused by the test"):
                runner.call("status")
        assert not (root / "box" / "imported").exists()


#: Grades with the runtime's filter broken (as above), through the command line.
GRADE_BROKEN = textwrap.dedent("""
    import sys
    from pathlib import Path
    import graders.sandbox.runner
    from graders.sandbox import runtime
    from graders.cli import console_main

    def broken(parent):
        folder = parent / "broken-runtime"
        if not folder.exists():
            runtime.prepare_runtime(folder)
            for cached in (folder / "__pycache__").glob("syscall_filter.*"):
                cached.unlink()
            (folder / "syscall_filter.py").write_text(
                "def install():\\n    raise OSError(22, 'refused by the test')\\n")
        return folder

    graders.sandbox.runner.cached_runtime = broken
    sys.argv = ["graders", "grade", sys.argv[1], "--results", sys.argv[2]]
    raise SystemExit(console_main())
""")


@needs_filter
def test_a_grading_whose_worker_cannot_filter_is_a_grader_failure(tmp_path: Path) -> None:
    from graders.errors import GRADER_FAILED_EXIT

    out = tmp_path / "out"
    out.mkdir(mode=0o700)
    results = out / "results.json"
    completed = subprocess.run(
        [sys.executable, "-c", GRADE_BROKEN, str(REPO / "tests" / "corpus" / "correct"),
         str(results)], capture_output=True, text=True, timeout=300, check=False, cwd=out)
    assert completed.returncode == GRADER_FAILED_EXIT, completed.stderr[-3000:]
    document = json.loads(results.read_text(encoding="utf-8"))
    assert document["grader_failed"] is True
    assert "score" not in document or not document["score"]
    assert "syscall filter" in json.dumps(document)
