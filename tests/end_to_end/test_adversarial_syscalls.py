"""The syscall filter, graded with the CLI: four attacks on what namespaces leave shared.

Each case is the correct solution with an attack appended that runs at import and again
in serve, and prints what it got (``... attack: ...``, kept in results.json's output):

- ``keyring_steal_and_plant`` reads, rewrites and plants keys: the grading runs in a
  session keyring of its own (the grading user's: root's, or the instructor account's)
  holding a secret key, which must come out unread and unchanged, with no key planted
  beside it nor in that user's own keyrings;
- ``sysv_shm_hoard`` holds 3 GiB of SysV shared memory, detached (past its 2 GiB
  address space), and fills message queues: the host's Shmem (/proc/meminfo, sampled
  during the grading) must not grow by 2.5 GiB;
- ``nested_namespaces`` makes user, mount and network namespaces of its own and fills a
  2 GiB tmpfs there: the host's Shmem must not grow by 1 GiB;
- ``tcp_to_host_loopback`` connects to a listener the test opens on 127.0.0.1: nobody
  must knock.

Each is graded in every mode of ``linux_modes.MODES``: as root (bubblewrap; the privilege
drop and Landlock alone; without CAP_SYS_ADMIN; in a simulation of Docker's default
profile) and as an ordinary user (the grader's instructor account, in bubblewrap and in
that simulation), where it scores exactly 100.0 (it gains nothing), the mode's
protections are reported and its evidence shows the attack failed; and, to show that
each attack has teeth, with the syscall filter, bubblewrap and Landlock switched off,
where it must succeed.

``host_probe`` reads host files, lists ``/`` and ``/proc`` and connects to a listener on
the host's 127.0.0.1: in each confined mode it reads nothing, reaches nothing and sees no
process but its own sandbox's.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import shutil
import socket
import tempfile
import textwrap
import time
from collections.abc import Collection, Iterator
from pathlib import Path

import pytest
from helpers import CORPUS, KILL_GRACE_S, processes_of
from linux_modes import (
    CONFINED,
    GIB,
    LANDLOCK,
    MODES,
    UNFILTERED,
    USER_DOCKER,
    USER_UNCONFINED,
    Graded,
    Instructor,
    assert_reported,
    grade,
    instructor,
    label,
    mode_unavailable,
    plant_switches,
    python_of,
    regrade,
)

from graders.sandbox import syscall_filter

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(syscall_filter.unavailable() is not None,
                                 reason=str(syscall_filter.unavailable()))]


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    """A folder the sandbox users can traverse, with one sitecustomize folder per switch."""
    folder = Path(tempfile.mkdtemp(prefix="adversarial-syscalls-", dir="/tmp"))
    folder.chmod(0o755)
    plant_switches(folder)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def ordinary(base: Path) -> Instructor:
    """The instructor account, with a grader copy it can read."""
    return instructor(base / "install")


def made(mode: str, request: pytest.FixtureRequest) -> Instructor | None:
    """Skip unless ``mode`` can be made here; the instructor account if it grades there."""
    reason = mode_unavailable(mode)
    if reason is not None:
        pytest.skip(reason)
    return request.getfixturevalue("ordinary") if MODES[mode].ordinary else None


def assert_gained_nothing(graded: Graded, mode: str) -> None:
    """Graded to completion, 100.0, with the protections of ``mode`` reported."""
    assert graded.returncode == 0, graded.stderr[-3000:]
    assert graded.results["score"] == 100.0, graded.output[-3000:]
    assert_reported(graded.results, mode)


# --- the keyring ------------------------------------------------------------------------------

#: Runs its arguments in a new session keyring holding the key "serving-grader-secret"
#: (payload: $SECRET), then writes to argv[1] the key's payload, the keyring's keys and the
#: keys of the user's own keyrings (user and user session, which outlive the grading: the
#: worker's too, where it runs as this user in no user namespace of its own), from which
#: it first removes any key planted there before (adding a key again only updates it).
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

    def keys(keyring):
        listing = read(keyring)  # a keyring reads as its keys' serials
        found = {}
        for key in struct.unpack(f"{len(listing) // 4}i", listing):
            buffer = ctypes.create_string_buffer(512)
            keyctl(long(6), long(key), buffer, long(512))  # KEYCTL_DESCRIBE
            found[key] = buffer.value.decode().rsplit(";", 1)[-1]
        return found

    for keyring in (-4, -5):
        for key, description in keys(keyring).items():
            if description == "planted-by-serving":
                keyctl(long(9), long(key), long(keyring))  # KEYCTL_UNLINK

    keyctl(long(1), b"serving-grader-test")  # KEYCTL_JOIN_SESSION_KEYRING
    secret = os.environ["SECRET"].encode()
    serial = libc.syscall(long(numbers["add_key"]), b"user", b"serving-grader-secret",
                          secret, long(len(secret)), long(-3))
    assert serial > 0, ctypes.get_errno()
    code = subprocess.run(sys.argv[2:]).returncode
    with open(sys.argv[1], "w") as report:
        json.dump({"serial": serial, "payload": read(serial).decode(),
                   "keys": list(keys(-3).values()),
                   "user keys": [*keys(-4).values(), *keys(-5).values()]}, report)
    sys.exit(code)
""")
PLANTED = "planted-by-serving"  # the attack's keys' description


@pytest.mark.parametrize("mode", MODES)
def test_the_graders_session_keyring_is_neither_read_nor_changed(
        base: Path, mode: str, request: pytest.FixtureRequest) -> None:
    user = made(mode, request)
    secret = f"SECRET-{os.urandom(8).hex()}"
    report = base / f"keyring-{label(mode)}.json"
    report.touch()
    if user is not None:  # the wrapper runs as the grading's user, in its own keyrings
        user.own(report)
    inner = [python_of(user), "-c", KEYRING_WRAPPER, str(report)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SECRET", secret)
        graded = grade(base, "keyring_steal_and_plant", mode, inner=inner, user=user)
    found = json.loads(report.read_text(encoding="utf-8"))
    if mode == UNFILTERED:  # the attack's teeth: it read the key and rewrote it (each call)
        assert found["payload"].startswith("STOLEN:")
        assert found["payload"].endswith(secret)
        assert PLANTED in found["keys"]
        return
    assert_gained_nothing(graded, mode)
    assert {key: found[key] for key in ("payload", "keys")} == \
        {"payload": secret, "keys": ["serving-grader-secret"]}, found
    assert PLANTED not in found["user keys"], found
    assert secret not in graded.stdout + graded.stderr + json.dumps(graded.results)
    assert "keyring attack: session keyring EPERM; request_key EPERM; add_key -3 EPERM; " \
           "add_key -4 EPERM; add_key -5 EPERM" in graded.output


# --- SysV shared memory and nested namespaces: the host's memory ------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_sysv_shared_memory_never_holds_the_hosts_memory(
        base: Path, mode: str, request: pytest.FixtureRequest) -> None:
    graded = grade(base, "sysv_shm_hoard", mode, user=made(mode, request))
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
        base: Path, mode: str, request: pytest.FixtureRequest) -> None:
    graded = grade(base, "nested_namespaces", mode, user=made(mode, request))
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
        base: Path, mode: str, listener: socket.socket,
        request: pytest.FixtureRequest) -> None:
    graded = grade(base, "tcp_to_host_loopback", mode, user=made(mode, request))
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

#: The world-readable file the probe must not read (HOST_FILES in its serving.py).
PROBED_FILE = Path("/tmp/serving-grader-host-probe/world-readable.txt")
PROBED_PORTS = range(47850, 47860)
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


@pytest.mark.parametrize("mode", CONFINED)
def test_the_worker_reads_no_host_file_sees_no_process_and_reaches_no_address(
        base: Path, mode: str, probed_listener: socket.socket,
        request: pytest.FixtureRequest) -> None:
    graded = grade(base, "host_probe", mode, user=made(mode, request))
    assert_gained_nothing(graded, mode)
    with pytest.raises(BlockingIOError):
        probed_listener.accept()
    probe = next(line for line in graded.output.split("\\n") if "host probe:" in line)
    assert "host probe: read &#91;&#93;;" in probe  # HTML-escaped brackets
    assert "reached &#91;&#93;;" in probe
    assert "HOST-SECRET" not in graded.output
    if MODES[mode].layer == LANDLOCK:
        assert "listed 0 entries of /; saw other processes &#91;&#93;;" in probe
        assert "open EACCES" in probe
    else:  # the processes it may see: its own sandbox's bubblewrap (pid 1 there), no other
        assert "saw other processes &#91;'bwrap'&#93;;" in probe


# --- what its user owns: other processes, and files outside the box ---------------------------

#: The file of the grading's user the attack reaches for (TARGET in its serving.py).
NEIGHBOUR_FILE = Path("/tmp/serving-grader-neighbour-target/secret.txt")
#: Every call the attack makes, each refused by the filter in every confined mode.
NEIGHBOUR_CALLS = ("chmod", "utime", "setxattr", "chown", "prlimit", "setpriority",
                   "setpriority user", "sched_setaffinity", "getsid", "getpgid", "inotify",
                   "fanotify", "pidfd_open", "memfd")


@pytest.fixture
def neighbour_file(request: pytest.FixtureRequest) -> Iterator[Path]:
    """A private file outside every box, of the user the worker runs as where it shares
    the grader's uid (root's otherwise)."""
    NEIGHBOUR_FILE.parent.mkdir(mode=0o755, exist_ok=True)
    NEIGHBOUR_FILE.write_text("A CLASSMATE'S WORK\n", encoding="utf-8")
    NEIGHBOUR_FILE.chmod(0o600)
    os.utime(NEIGHBOUR_FILE, (1_000_000_000, 1_000_000_000))
    try:
        yield NEIGHBOUR_FILE
    finally:
        shutil.rmtree(NEIGHBOUR_FILE.parent, ignore_errors=True)


def neighbour_evidence(graded: Graded) -> dict[str, str]:
    line = next(line for line in graded.output.split("\\n") if "neighbour attack:" in line)
    tried = line.split("neighbour attack: ", 1)[1]
    return dict(part.rsplit(" ", 1) for part in tried.split("; ")[:len(NEIGHBOUR_CALLS)])


@pytest.mark.parametrize("mode", MODES)
def test_no_process_or_file_of_its_own_user_outside_the_box_is_reached(
        base: Path, mode: str, neighbour_file: Path, request: pytest.FixtureRequest) -> None:
    user = made(mode, request)
    if user is not None:  # the worker runs as the grading's user: the file is its own
        user.own(neighbour_file)
    before = neighbour_file.stat()
    graded = grade(base, "reach_own_users_processes_and_files", mode, user=user)
    found = neighbour_evidence(graded)
    after = neighbour_file.stat()
    if mode == UNFILTERED:  # the teeth of the rows that need no shared uid
        assert {call: found[call] for call in ("inotify", "pidfd_open", "memfd")} == \
            dict.fromkeys(("inotify", "pidfd_open", "memfd"), "ok"), found
        return
    assert_gained_nothing(graded, mode)
    assert found == dict.fromkeys(NEIGHBOUR_CALLS, "EPERM"), found
    assert (after.st_mode, after.st_mtime, after.st_uid, after.st_gid) == \
        (before.st_mode, before.st_mtime, before.st_uid, before.st_gid)
    assert os.listxattr(neighbour_file) == []


# --- a grading and a regrade look the same to the worker --------------------------------------


@pytest.mark.parametrize("mode", CONFINED)
def test_a_grading_and_a_regrade_give_the_same_score_to_a_file_that_reads_its_session(
        base: Path, mode: str, request: pytest.FixtureRequest) -> None:
    user = made(mode, request)
    case = "tell_grading_from_regrade"
    graded = grade(base, case, mode, user=user, tag="-session")
    out, run = regrade(base, (case,), mode, user=user)
    assert graded.returncode == 0, graded.stderr[-3000:]
    assert run.returncode == 0, run.stderr[-3000:]
    regraded = json.loads((out / "submissions" / case / "results.json").read_text(
        encoding="utf-8"))
    assert regraded["score"] == graded.results["score"] < 100.0
    assert "session probe: EPERM" in graded.output
    assert "session probe: EPERM" in json.dumps(regraded, ensure_ascii=False)


# --- a hostile class, regraded by an ordinary user without namespaces -------------------------

#: The course secret the regrade is given (COURSE_SECRET in the attack's serving.py).
COURSE_SECRET = Path("/tmp/serving-grader-course-secret/course_secret")
#: The hostile student, and the classmates graded beside it (each graded alone first).
HOSTILE = "ordinary_user_regrade"
CLASSMATES = {"alice": CORPUS / "correct", "bob": CORPUS / "variability_linear_cv",
              "carol": CORPUS / "p99_at_q095"}


@pytest.fixture
def course_secret(ordinary: Instructor) -> Iterator[Path]:
    """The course secret, the instructor's own, private (mode 0600)."""
    COURSE_SECRET.parent.mkdir(mode=0o755, exist_ok=True)
    COURSE_SECRET.write_text(f"COURSE-SECRET-{os.urandom(8).hex()}\n", encoding="utf-8")
    COURSE_SECRET.chmod(0o600)
    ordinary.own(COURSE_SECRET)
    try:
        yield COURSE_SECRET
    finally:
        shutil.rmtree(COURSE_SECRET.parent, ignore_errors=True)


def left_running(uid: int, before: Collection[int], marker: str) -> dict[int, str]:
    """Processes of ``uid`` that were not running ``before`` and are still alive after the
    kill grace every adversarial case gets; those whose command line holds ``marker`` (this
    test's folder: the worker's runtime lies there) are then killed."""
    deadline = time.monotonic() + KILL_GRACE_S
    while (found := {pid: command for pid, command in processes_of(uid).items()
                     if pid not in before}) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid, command in found.items():
        if marker in command:
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
    return found


def test_a_hostile_class_regraded_without_namespaces_leaves_classmates_secret_and_processes(
        base: Path, course_secret: Path, request: pytest.FixtureRequest) -> None:
    """A class of three and a hostile student, regraded as an ordinary user whose user
    namespaces are refused (Landlock confines the worker, which shares the grader's uid).
    The hostile worker lists the seats' folder for the classmates' boxes and chmods their
    serving.py, chmods the course secret, lowers the file limit of every pid near its own,
    renices its user, kills every process of its user it can see, and forks a process that
    leaves its session, folder and environment to go on doing so for ten minutes. The
    classmates score exactly what each scores graded alone, the secret's mode is unchanged,
    and no process of the grading's user is left afterwards."""
    user = made(USER_DOCKER, request)
    assert user is not None
    uid = user.entry.pw_uid  # the worker's uid too: no sandbox user grades in this mode
    alone = {}
    for student, source in CLASSMATES.items():
        graded = grade(base, student, USER_DOCKER, user=user, source=source, tag="-alone")
        assert graded.returncode == 0, graded.stderr[-3000:]
        alone[student] = graded.results["score"]
    assert alone["alice"] == 100.0 > alone["bob"]  # the class has a buggy classmate
    mode_before, before = course_secret.stat().st_mode, set(processes_of(uid))
    out, run = regrade(base, (HOSTILE,), USER_DOCKER, user=user, classmates=CLASSMATES,
                       options=("--secret-file", str(course_secret)), tag="-hostile-class")
    survivors = left_running(uid, before, str(base))
    assert run.returncode == 0, run.stderr[-3000:]
    with (out / "grades.csv").open(encoding="utf-8") as handle:
        rows = {row["submission"]: row for row in csv.DictReader(handle)}
    assert {student: float(rows[student]["score"]) for student in CLASSMATES} == alone
    assert {rows[student]["status"] for student in (*CLASSMATES, HOSTILE)} == {"graded"}
    assert course_secret.stat().st_mode == mode_before
    assert survivors == {}
    hostile = json.loads((out / "submissions" / HOSTILE / "results.json").read_text(
        encoding="utf-8"))
    assert hostile["score"] == 100.0
    assert_reported(hostile, USER_DOCKER)
    evidence = json.dumps(hostile, ensure_ascii=False)
    assert "classmates attack: listed 0 seats; chmod seats ; chmod secret EPERM; " \
           "prlimit others EPERM=" in evidence
    assert "renice user EPERM; stay EAGAIN" in evidence
    secret = course_secret.read_text(encoding="utf-8").strip()
    assert [str(path) for path in out.rglob("*")
            if path.is_file() and secret.encode() in path.read_bytes()] == []


def test_without_landlock_and_the_filter_the_same_class_loses_the_secrets_mode(
        base: Path, course_secret: Path, request: pytest.FixtureRequest) -> None:
    """The attack's teeth: the same regrade with Landlock and the filter switched off (and
    --allow-unconfined, which it then needs) lets the hostile worker chmod the course
    secret to 0644, and kill its grader."""
    reason = mode_unavailable(USER_UNCONFINED)
    if reason is not None:
        pytest.skip(reason)
    user: Instructor = request.getfixturevalue("ordinary")
    before = set(processes_of(user.entry.pw_uid))
    _, run = regrade(base, (HOSTILE,), USER_UNCONFINED, user=user, classmates=CLASSMATES,
                     options=("--secret-file", str(course_secret), "--allow-unconfined"),
                     tag="-unconfined")
    left_running(user.entry.pw_uid, before, str(base))  # killed, whatever they did
    assert course_secret.stat().st_mode & 0o777 == 0o644
    assert run.returncode != 0  # its grader was killed: the regrade never finished
