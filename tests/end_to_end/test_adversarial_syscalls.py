"""The syscall filter, graded with the CLI: four attacks on what namespaces leave shared.

Each case is the correct solution with an attack appended that runs at import and again
in serve, and prints what it got (``... attack: ...``, kept in results.json's output):

- ``keyring_steal_and_plant`` reads, rewrites and plants keys: the grading runs in a
  session keyring of its own holding a secret key, which must come out unread and unchanged,
  with no key planted beside it;
- ``sysv_shm_hoard`` holds 3 GiB of SysV shared memory, detached (past its 2 GiB
  address space), and fills message queues: the host's Shmem (/proc/meminfo, sampled
  during the grading) must not grow by 2.5 GiB;
- ``nested_namespaces`` makes user, mount and network namespaces of its own and fills a
  2 GiB tmpfs there: the host's Shmem must not grow by 1 GiB;
- ``tcp_to_host_loopback`` connects to a listener the test opens on 127.0.0.1: nobody
  must knock.

Each is graded in five modes: as the grader runs here (bubblewrap, where it can); with
the privilege drop and Landlock (bubblewrap switched off by a ``sitecustomize`` on
PYTHONPATH; as root with CAP_SYS_ADMIN, in a box that is a tmpfs of its own); as root
without CAP_SYS_ADMIN (``setpriv`` drops it from every set: bubblewrap still runs, as the
sandbox user); in a simulation of Docker's default profile (a filter refusing namespaces
and mounts, installed without no_new_privs as Docker's is, then that ``setpriv``:
bubblewrap cannot run, Landlock can, the box is not mounted); and, to show that
each attack has teeth, with the syscall filter and Landlock switched off too, where it
must succeed. In all but the last, each scores exactly 100.0 (it gains nothing) and its
evidence shows the attack failed.

``host_probe`` reads host files, lists ``/`` and ``/proc`` and connects to a listener on
the host's 127.0.0.1: in each of those modes and as an ordinary user (the grader's
instructor account, with and without the Docker-like filter), it reads nothing, reaches
nothing and sees no process but its own sandbox's.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    ADVERSARIAL,
    AS_ROOT,
    INSTRUCTOR,
    REPO,
    SYSTEM_PYTHON,
    kill_marked,
    ordinary_regrade_unsupported,
    ordinary_user,
    world_readable_install,
)

from graders.sandbox import landlock, syscall_filter
from graders.sandbox.confinement import CAP_SYS_ADMIN, _has_capability
from graders.sandbox.runner import Limits

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(syscall_filter.unavailable() is not None,
                                 reason=str(syscall_filter.unavailable()))]

GIB = 1024**3
#: Modes, and the sitecustomize that makes each (None: the grader as it runs here).
AS_GRADED, NO_BUBBLEWRAP, UNFILTERED = "as graded", "no bubblewrap", "unfiltered"
SWITCHES = {
    AS_GRADED: None,
    NO_BUBBLEWRAP: textwrap.dedent("""\
        import graders.sandbox.confinement as confinement

        confinement.bubblewrap_support = lambda uid, gid, drop: "switched off by the test"
    """),
}
SWITCHES[UNFILTERED] = str(SWITCHES[NO_BUBBLEWRAP]) + textwrap.dedent("""\
    import graders.sandbox.landlock as landlock
    import graders.sandbox.syscall_filter as syscall_filter

    landlock.unavailable = lambda: "switched off by the test"
    syscall_filter.unavailable = lambda: "switched off by the test"
""")
#: Modes made by a wrapper, not a switch: root without CAP_SYS_ADMIN (setpriv drops it
#: from the bounding and inheritable sets, so the grader's exec holds it in no set), and
#: Docker's default profile (that, after a filter that refuses namespaces and mounts).
NO_ADMIN, DOCKER = "root without CAP_SYS_ADMIN", "docker default profile"
SWITCHES[NO_ADMIN] = SWITCHES[DOCKER] = None
MODES = (AS_GRADED, NO_BUBBLEWRAP, UNFILTERED, NO_ADMIN, DOCKER)
FILTERED = (AS_GRADED, NO_BUBBLEWRAP, NO_ADMIN, DOCKER)
#: Installs a filter refusing what Docker's default profile refuses a container without
#: CAP_SYS_ADMIN (namespaces, mounts; the keyring too, left out here: the keyring test's
#: own wrapper, run after this one, needs it), without no_new_privs, as Docker does; then
#: runs its arguments.
DOCKER_FILTER = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, os.environ["FILTER_FOLDER"])
    import syscall_filter
    REFUSED = {"unshare", "setns", "clone", "clone3", "mount", "umount2", "pivot_root",
               "chroot", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
               "mount_setattr"}
    syscall_filter.install(tuple(rule for rule in syscall_filter.RULES if rule.name in REFUSED),
                           no_new_privs=False)
    os.execvp(sys.argv[1], sys.argv[1:])
""")
DROP_SYS_ADMIN = ["setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin"]
WRAPPERS = {NO_ADMIN: [*DROP_SYS_ADMIN, "--"],
            DOCKER: [sys.executable, "-c", DOCKER_FILTER, *DROP_SYS_ADMIN, "--"]}
#: The row of graders.sandbox.modes each mode must report (as graded: this machine's).
ROWS = {NO_BUBBLEWRAP: "root, no bubblewrap", NO_ADMIN: "root without CAP_SYS_ADMIN",
        DOCKER: "root, no bubblewrap"}
#: Whether the grader here may mount (root with CAP_SYS_ADMIN: the box's own tmpfs).
ADMIN = AS_ROOT and _has_capability(CAP_SYS_ADMIN)
#: A grading that takes longer than this is stuck (a generous bound, not a measurement).
GRADING_TIMEOUT_S = Limits().worst_case_s + 600


def needs_mode(mode: str) -> None:
    if mode != AS_GRADED and not AS_ROOT:
        pytest.skip("the privilege drop alone exists only under root (sandbox users)")


@dataclass(frozen=True)
class Graded:
    """One CLI grading: its exit code, stderr, results, and the host's Shmem growth."""

    returncode: int
    stdout: str
    stderr: str
    results: dict[str, Any]
    #: The largest growth of the host's Shmem during the grading, in bytes.
    shmem_growth: int

    @property
    def output(self) -> str:
        """Every text of the results (the submission's output at import is in the top-level
        output, what it prints in serve in serve's tests' outputs)."""
        return json.dumps(self.results, ensure_ascii=False)


def shmem_bytes() -> int:
    with open("/proc/meminfo", encoding="ascii") as meminfo:
        for line in meminfo:
            if line.startswith("Shmem:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no Shmem line in /proc/meminfo")


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    """A folder the sandbox users can traverse, with one sitecustomize folder per mode."""
    folder = Path(tempfile.mkdtemp(prefix="adversarial-syscalls-", dir="/tmp"))
    folder.chmod(0o755)
    for mode, text in SWITCHES.items():
        if text is not None:
            site = folder / f"site-{mode.replace(' ', '-')}"
            site.mkdir()
            (site / "sitecustomize.py").write_text(text, encoding="utf-8")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def grade(base: Path, case: str, mode: str, *, wrapper: Sequence[str] = (),
          user: tuple[Any, str] | None = None) -> Graded:
    """Grade ``case`` in ``mode`` (through ``wrapper``, a command that runs the grading as
    its last arguments; as ``user``, a ``pwd`` entry and the PYTHONPATH of a grader it can
    read, when given), sampling the host's Shmem meanwhile."""
    label = f"{case}-{mode.replace(' ', '-')}"
    home = base / label
    submission, out, temp = home / "submission", home / "out", home / "tmp"
    for folder in (home, out, temp):
        folder.mkdir(mode=0o755, parents=True)
        folder.chmod(0o755)
    submission.mkdir(mode=0o700)
    shutil.copy(ADVERSARIAL / case / "serving.py", submission / "serving.py")
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env["TMPDIR"] = str(temp)
    if SWITCHES[mode] is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(base / f"site-{mode.replace(' ', '-')}"), str(REPO),
             *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))])
    env["FILTER_FOLDER"] = str(Path(syscall_filter.__file__).parent)
    python, wrapper = sys.executable, [*WRAPPERS.get(mode, ()), *wrapper]
    if user is not None:  # the system's Python, on a copy of the grader it can read
        entry, env["PYTHONPATH"] = user
        python, env["HOME"] = str(SYSTEM_PYTHON), str(home)
        wrapper = [*wrapper, "setpriv", f"--reuid={entry.pw_uid}",
                   f"--regid={entry.pw_gid}", "--clear-groups", "--"]
        for path in [home, *home.rglob("*")]:
            os.chown(path, entry.pw_uid, entry.pw_gid)
    results = out / "results.json"
    before, peak, done = shmem_bytes(), [0], threading.Event()

    def sample() -> None:
        while not done.wait(0.02):
            peak[0] = max(peak[0], shmem_bytes())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        completed = subprocess.run(
            [*wrapper, python, "-m", "graders", "grade", str(submission), "--results",
             str(results), "-q"], cwd=out, env=env, capture_output=True, text=True,
            timeout=GRADING_TIMEOUT_S, check=False)
    finally:
        done.set()
        sampler.join()
    assert kill_marked(f"{home}/") == []
    document = json.loads(results.read_text(encoding="utf-8")) if results.exists() else {}
    return Graded(completed.returncode, completed.stdout, completed.stderr, document,
                  max(peak[0] - before, 0))


def assert_gained_nothing(graded: Graded, mode: str) -> None:
    """Graded to completion, 100.0, with the protections of ``mode`` reported."""
    assert graded.returncode == 0, graded.stderr[-3000:]
    assert graded.results["score"] == 100.0, graded.output[-3000:]
    protections = graded.results["extra_data"]["protections"]
    assert protections["syscall_filter"] is (mode != UNFILTERED)
    if mode in (NO_BUBBLEWRAP, UNFILTERED, DOCKER):
        assert protections["tool"] == "none"
        assert protections["privilege_drop"] is True
    if mode in ROWS:
        assert protections["mode"] == ROWS[mode]
        assert protections["landlock"] == (landlock.abi_version() if mode != NO_ADMIN else 0)
        # without CAP_SYS_ADMIN (NO_ADMIN, DOCKER) the grader cannot mount the box
        assert protections["box_mount"] is (mode == NO_BUBBLEWRAP and ADMIN)


# --- the keyring ------------------------------------------------------------------------------

#: Runs its arguments in a new session keyring holding the key "serving-grader-secret"
#: (payload: $SECRET), then writes to argv[1] the key's payload and the keyring's keys.
KEYRING_WRAPPER = textwrap.dedent("""
    import ctypes, json, os, struct, subprocess, sys
    sys.path.insert(0, os.environ["FILTER_FOLDER"])
    import syscall_filter
    numbers = {rule.name: getattr(rule, syscall_filter.current_architecture().name)
               for rule in syscall_filter.RULES}
    libc = ctypes.CDLL(None, use_errno=True)
    long = ctypes.c_long

    def keyctl(*args):
        result = libc.syscall(long(numbers["keyctl"]), *args)
        if result < 0:
            raise OSError(ctypes.get_errno(), "keyctl")
        return result

    def read(serial):
        buffer = ctypes.create_string_buffer(4096)
        size = keyctl(long(11), long(serial), buffer, long(4096))  # KEYCTL_READ
        return buffer.raw[:size]

    keyctl(long(1), b"serving-grader-test")  # KEYCTL_JOIN_SESSION_KEYRING
    secret = os.environ["SECRET"].encode()
    serial = libc.syscall(long(numbers["add_key"]), b"user", b"serving-grader-secret",
                          secret, long(len(secret)), long(-3))
    assert serial > 0, ctypes.get_errno()
    code = subprocess.run(sys.argv[2:]).returncode
    listing = read(-3)  # the session keyring: its keys' serials
    keys = []
    for key in struct.unpack(f"{len(listing) // 4}i", listing):
        buffer = ctypes.create_string_buffer(512)
        keyctl(long(6), long(key), buffer, long(512))  # KEYCTL_DESCRIBE
        keys.append(buffer.value.decode().rsplit(";", 1)[-1])
    with open(sys.argv[1], "w") as report:
        json.dump({"serial": serial, "payload": read(serial).decode(), "keys": keys}, report)
    sys.exit(code)
""")


@pytest.mark.parametrize("mode", MODES)
def test_the_graders_session_keyring_is_neither_read_nor_changed(base: Path, mode: str) -> None:
    needs_mode(mode)
    secret = f"SECRET-{os.urandom(8).hex()}"
    report = base / f"keyring-{mode.replace(' ', '-')}.json"
    wrapper = [sys.executable, "-c", KEYRING_WRAPPER, str(report)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SECRET", secret)
        graded = grade(base, "keyring_steal_and_plant", mode, wrapper=wrapper)
    found = json.loads(report.read_text(encoding="utf-8"))
    if mode == UNFILTERED:  # the attack's teeth: it read the key and rewrote it (each call)
        assert found["payload"].startswith("STOLEN:")
        assert found["payload"].endswith(secret)
        assert "planted-by-serving" in found["keys"]
        return
    assert_gained_nothing(graded, mode)
    assert found == {"serial": found["serial"], "payload": secret,
                     "keys": ["serving-grader-secret"]}
    assert secret not in graded.stdout + graded.stderr + json.dumps(graded.results)
    assert "keyring attack: session keyring EPERM; request_key EPERM; add_key -3 EPERM; " \
           "add_key -4 EPERM; add_key -5 EPERM" in graded.output


# --- SysV shared memory and nested namespaces: the host's memory ------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_sysv_shared_memory_never_holds_the_hosts_memory(base: Path, mode: str) -> None:
    needs_mode(mode)
    graded = grade(base, "sysv_shm_hoard", mode)
    if mode == UNFILTERED:  # the attack's teeth: 3 GiB held past a 2 GiB address space
        assert graded.shmem_growth >= 2.5 * GIB, graded.output[-2000:]
        assert "held 3072 MiB of shared memory (held)" in graded.output
        return
    assert_gained_nothing(graded, mode)
    assert graded.shmem_growth < 2.5 * GIB
    assert "shm attack: held 0 MiB of shared memory and 0 full message queues (shmget " \
           "EPERM; msgget EPERM)" in graded.output
    assert "shm attack: held 0 MiB of shared memory (shmget EPERM)" in graded.output


@pytest.mark.parametrize("mode", MODES)
def test_nested_namespaces_are_refused_so_no_tmpfs_escapes_the_bound(
        base: Path, mode: str) -> None:
    needs_mode(mode)
    graded = grade(base, "nested_namespaces", mode)
    if mode == UNFILTERED:  # the attack's teeth: 1.5 GiB in a tmpfs of its own
        assert "namespace attack: mounted a tmpfs, wrote 1536 MiB" in graded.output
        assert graded.shmem_growth >= 1 * GIB
        return
    assert_gained_nothing(graded, mode)
    assert graded.shmem_growth < 1 * GIB
    assert "namespace attack: unshare EPERM" in graded.output
    assert "mounted" not in graded.output


# --- TCP to the host's loopback ---------------------------------------------------------------

#: Where the attack knocks (PORTS in its serving.py).
KNOCKED_PORTS = range(47840, 47850)


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A listener on the host's 127.0.0.1, on the first free port the attack knocks on."""
    for port in KNOCKED_PORTS:
        with contextlib.suppress(OSError):
            server = socket.create_server(("127.0.0.1", port))
            break
    else:
        pytest.fail("no free port in 47840-47849")
    server.setblocking(False)
    with server:
        yield server


@pytest.mark.parametrize("mode", MODES)
def test_no_connection_reaches_a_listener_on_the_hosts_loopback(
        base: Path, mode: str, listener: socket.socket) -> None:
    needs_mode(mode)
    graded = grade(base, "tcp_to_host_loopback", mode)
    if mode == UNFILTERED:  # the attack's teeth: without namespaces, the host's loopback
        connection, _ = listener.accept()
        connection.close()
        return
    assert_gained_nothing(graded, mode)
    with pytest.raises(BlockingIOError):
        listener.accept()
    assert "network attack: reached &#91;&#93;;" in graded.output  # HTML-escaped brackets
    assert "socket EAFNOSUPPORT" in graded.output
    assert "connect E" not in graded.output  # no connect was even tried


# --- where namespaces are refused: the host's files, processes and loopback -------------------

#: Modes of an ordinary user (the grader's instructor account): as it runs here, and in
#: Docker's default profile, where bubblewrap cannot run.
USER, USER_DOCKER = "ordinary user", "ordinary user in docker default profile"
WRAPPERS[USER_DOCKER] = [sys.executable, "-c", DOCKER_FILTER]
SWITCHES[USER] = SWITCHES[USER_DOCKER] = None
#: The world-readable file the probe must not read (HOST_FILES in its serving.py).
PROBED_FILE = Path("/tmp/serving-grader-host-probe/world-readable.txt")
PROBED_PORTS = range(47850, 47860)
#: What each mode must report, and the processes the worker may see: its own sandbox's
#: bubblewrap (pid 1 of its pid namespace), no other.
PROBED = {AS_GRADED: "bubblewrap", NO_BUBBLEWRAP: "landlock", NO_ADMIN: "bubblewrap",
          DOCKER: "landlock", USER: "bubblewrap", USER_DOCKER: "landlock"}


@pytest.fixture(scope="module")
def ordinary(base: Path) -> tuple[Any, str]:
    """The instructor account and the PYTHONPATH of a grader copy it can read."""
    reason = ordinary_regrade_unsupported()
    if reason is not None:
        pytest.skip(reason)
    return ordinary_user(INSTRUCTOR), world_readable_install(base / "install")


@pytest.fixture
def probed_listener() -> Iterator[socket.socket]:
    """A world-readable host file, and a listener on the host's 127.0.0.1."""
    PROBED_FILE.parent.mkdir(mode=0o755, exist_ok=True)
    PROBED_FILE.write_text("HOST-SECRET\n", encoding="utf-8")
    PROBED_FILE.chmod(0o644)
    for port in PROBED_PORTS:
        with contextlib.suppress(OSError):
            server = socket.create_server(("127.0.0.1", port))
            break
    else:
        pytest.fail("no free port in 47850-47859")
    server.setblocking(False)
    try:
        with server:
            yield server
    finally:
        shutil.rmtree(PROBED_FILE.parent, ignore_errors=True)


@pytest.mark.parametrize("mode", list(PROBED))
def test_the_worker_reads_no_host_file_sees_no_process_and_reaches_no_address(
        base: Path, mode: str, probed_listener: socket.socket,
        request: pytest.FixtureRequest) -> None:
    needs_mode(mode)
    if PROBED[mode] == "landlock" and landlock.unavailable() is not None:
        pytest.skip(str(landlock.unavailable()))
    user = request.getfixturevalue("ordinary") if mode in (USER, USER_DOCKER) else None
    graded = grade(base, "host_probe", mode, user=user)
    assert graded.returncode == 0, graded.stderr[-3000:]
    assert graded.results["score"] == 100.0, graded.output[-3000:]
    protections = graded.results["extra_data"]["protections"]
    assert PROBED[mode] in protections["layers"]
    assert protections["syscall_filter"] is True
    with pytest.raises(BlockingIOError):
        probed_listener.accept()
    probe = next(line for line in graded.output.split("\\n") if "host probe:" in line)
    assert "host probe: read &#91;&#93;;" in probe  # HTML-escaped brackets
    assert "reached &#91;&#93;;" in probe
    assert "HOST-SECRET" not in graded.output
    if PROBED[mode] == "landlock":
        assert "listed 0 entries of /; saw other processes &#91;&#93;;" in probe
        assert "open EACCES" in probe
    else:
        assert "saw other processes &#91;'bwrap'&#93;;" in probe
