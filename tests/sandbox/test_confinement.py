"""Confinement as reported, and the row of root without bubblewrap.

As root without bubblewrap (missing, or refused as in Docker's default profile) the worker
runs as a sandbox user under Landlock and the syscall filter, in a box that is a tmpfs of
its own where the grader has CAP_SYS_ADMIN. These tests grade in that row (bubblewrap
switched off, in this process and in the CLI gradings below) and check what must hold
there: no network address is reachable, nothing outside its runtime and box is readable,
it writes only its box (bounded in total where mounted), SysV IPC is refused, and it
cannot become root again. Bubblewrap's row is tests/sandbox/test_bubblewrap.py's.

The tests that need root run in CI (root); elsewhere they skip, saying why.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import ADVERSARIAL, CORPUS, REPO, kill_marked

import graders.sandbox.confinement
from graders.sandbox import landlock, modes, syscall_filter
from graders.sandbox.box_mount import BOX_BYTES, BOX_INODES
from graders.sandbox.cleanup import SHARED_WRITABLE
from graders.sandbox.confinement import Protections, protections_for
from graders.sandbox.privileges import (
    SandboxUser,
    claim_sandbox_user,
    close_to_others,
    protected_folders,
)
from graders.sandbox.runner import CallOutcome, Limits, StudentRunner
from graders.sandbox.runtime import cached_runtime

MIB = 1024**2
#: The host's shared writable folders, which the worker must never write.
SHARED = [folder for folder in SHARED_WRITABLE if folder.is_dir()]
#: Switches bubblewrap off in a CLI grading (a sitecustomize on PYTHONPATH).
NO_BUBBLEWRAP = """\
import graders.sandbox.confinement as confinement
confinement.bubblewrap_support = lambda uid, gid, drop: "bubblewrap is off in these tests"
"""

PROBE = textwrap.dedent("""
    import ctypes
    import errno
    import json
    import os
    import socket

    SOCKETS = []

    def failure(error):
        return errno.errorcode.get(error.errno or 0, type(error).__name__)

    def connect(port):
        sock = socket.socket()
        sock.settimeout(2.0)
        try:
            sock.connect(("127.0.0.1", port))
        except OSError as error:
            return failure(error)
        finally:
            sock.close()
        return "connected"

    def listen(port):
        sock = socket.socket()
        try:
            sock.bind(("0.0.0.0", port))
            sock.listen()
        except OSError as error:
            return failure(error)
        SOCKETS.append(sock)
        return "listening"

    def fill(folders, limit):
        chunk = b"x" * (1 << 20)
        written, errors, index = 0, [], 0
        for folder in folders:
            while written < limit:
                index += 1
                try:
                    with open(os.path.join(folder, f"fill-{index}"), "wb") as handle:
                        for _ in range(4):  # RLIMIT_FSIZE is 4 MiB a file
                            handle.write(chunk)
                            written += len(chunk)
                except OSError as error:
                    errors.append(failure(error))
                    break
        return [written, errors]

    def leave(name, folders):
        made = []
        for folder in folders:
            try:
                with open(os.path.join(folder, name), "w") as handle:
                    handle.write("left behind")
                made.append(folder)
            except OSError as error:
                made.append(failure(error))
        return made

    def listing(folder):
        try:
            return sorted(os.listdir(folder))
        except OSError as error:
            return failure(error)

    def write(path):
        try:
            with open(path, "w") as handle:
                handle.write("tampered")
        except OSError as error:
            return failure(error)
        return "written"

    def read(path):
        try:
            with open(path, "rb") as handle:
                return len(handle.read())
        except OSError as error:
            return failure(error)

    def sysv(key):
        libc = ctypes.CDLL(None, use_errno=True)
        creat = 0o1000
        return [libc.shmget(key, 4096, creat | 0o600), libc.semget(key, 1, creat | 0o600),
                libc.msgget(key, creat | 0o600)]

    def regain_root():
        attempts = {"setuid": lambda: os.setuid(0), "seteuid": lambda: os.seteuid(0),
                    "setgid": lambda: os.setgid(0), "setgroups": lambda: os.setgroups([0]),
                    "setresuid": lambda: os.setresuid(0, 0, 0)}
        results = {}
        for name, attempt in attempts.items():
            try:
                attempt()
                results[name] = "done"
            except OSError as error:
                results[name] = type(error).__name__
        return json.dumps(results)

    def status():
        # ids, groups, capabilities and no_new_privs, without /proc (Landlock hides it)
        libc = ctypes.CDLL(None, use_errno=True)
        header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
        data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable; twice
        assert libc.capget(header, data) == 0
        return json.dumps({"Uid": list(os.getresuid()), "Gid": list(os.getresgid()),
                           "Groups": os.getgroups(), "Caps": list(data),
                           "NoNewPrivs": libc.prctl(39, 0, 0, 0, 0)})  # PR_GET_NO_NEW_PRIVS

    def umask():
        mask = os.umask(0)
        os.umask(mask)
        return mask

    def mode(path):
        return os.stat(path).st_mode & 0o7777

""").encode()


def value(outcome: CallOutcome) -> Any:
    assert outcome.ok, outcome
    return outcome.value


def loaded(outcome: CallOutcome) -> Any:
    return json.loads(value(outcome))


def host_sysv_keys() -> dict[str, set[int]]:
    """The keys of the SysV IPC objects of the host's IPC namespace."""
    keys = {}
    for kind in ("shm", "sem", "msg"):
        lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]
        keys[kind] = {int(line.split()[0]) for line in lines}
    return keys


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(autouse=True)
def no_bubblewrap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bubblewrap is off in this process (tests/sandbox/test_bubblewrap.py tests it)."""
    monkeypatch.setattr(graders.sandbox.confinement, "bubblewrap_support",
                        lambda uid, gid, drop: "bubblewrap is off in these tests")


@pytest.fixture(scope="module")
def sandbox_user() -> Iterator[SandboxUser]:
    """A pool user held by these tests alone (swept when claimed, given back after)."""
    if os.geteuid() != 0:
        pytest.skip("the privilege drop needs root (CI runs as root)")
    user = claim_sandbox_user()
    yield user
    user.release()


@pytest.fixture(scope="module")
def landlocked(sandbox_user: SandboxUser) -> SandboxUser:
    if landlock.unavailable() is not None:
        pytest.skip(str(landlock.unavailable()))
    return sandbox_user


@pytest.fixture
def confined(landlocked: SandboxUser) -> Iterator[StudentRunner]:
    close_to_others(protected_folders())
    with StudentRunner(PROBE, limits=Limits(call_timeout_s=30.0), sandbox=landlocked
                       ) as runner:
        assert runner.protections.mode == modes.ROOT_NO_BUBBLEWRAP.name
        assert runner.protections.syscall_filter
        yield runner


# --- what is reported -------------------------------------------------------------------


def test_without_root_no_confinement_is_claimed_only_the_syscall_filter() -> None:
    protections = protections_for(None)
    row = modes.ROOT_ALONE if os.geteuid() == 0 else modes.USER_REFUSED
    filtered = syscall_filter.unavailable() is None  # the filter refuses IP sockets
    assert protections == Protections(False, filtered, False, False, protections.description,
                                      syscall_filter=filtered, mode=row.name,
                                      layers=protections.layers)
    assert set(protections.layers) <= set(row.layers)
    assert "the student's code runs as this user" in protections.description
    assert protections.as_dict()["privilege_drop"] is False


def test_a_runners_protections_are_read_only(tmp_path: Path) -> None:
    runner = StudentRunner(b"", root=tmp_path)
    try:
        assert isinstance(runner.protections, Protections)
        with pytest.raises(AttributeError):
            runner.protections = protections_for(None)  # type: ignore[misc]
    finally:
        runner.close()


def test_without_bubblewrap_root_claims_landlock_the_filter_and_the_drop(
        confined: StudentRunner) -> None:
    protections = confined.protections
    mounted = protections.box_mount
    assert protections == Protections(
        # no IP socket (the filter), and all it writes is its bounded box (Landlock)
        True, True, True, False, protections.description, syscall_filter=True,
        landlock=landlock.abi_version(), mode=modes.ROOT_NO_BUBBLEWRAP.name,
        layers=modes.ROOT_NO_BUBBLEWRAP.layers, box_mount=mounted)
    assert protections.confined
    box = f", in a box of {BOX_BYTES // MIB} MiB and {BOX_INODES} files (a tmpfs of its own)"
    assert protections.description.startswith(
        "root, no bubblewrap (landlock, syscall filter, privilege drop, rlimits, process "
        "sweep): the student's code runs as an unprivileged sandbox user of its own, "
        "without namespaces (bubblewrap is off in these tests)" + (box if mounted else "")
        + f"; Landlock (ABI {landlock.abi_version()}) lets it read only its runtime")
    assert protections.description.endswith(
        "; a syscall filter refuses the keyring, new namespaces, mounts, SysV IPC and "
        "sockets other than AF_UNIX")


def test_without_landlock_too_the_worker_runs_with_the_privilege_drop_alone(
        sandbox_user: SandboxUser, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(landlock, "unavailable", lambda: "switched off by the test")
    close_to_others(protected_folders())
    marker = Path(tempfile.mkdtemp(prefix="confinement-visible-"))
    try:
        marker.chmod(0o755)
        (marker / "note").write_text("world-readable", encoding="utf-8")
        (marker / "note").chmod(0o644)
        with StudentRunner(PROBE, sandbox=sandbox_user) as runner:
            protections = runner.protections
            assert (protections.privilege_drop, protections.landlock, protections.tool) == \
                (True, 0, "none")
            assert not protections.confined
            assert "bubblewrap is off in these tests" in protections.description
            assert "no Landlock (switched off by the test)" in protections.description
            assert loaded(runner.call("status"))["Uid"] == [sandbox_user.uid] * 3
            assert value(runner.call("read", (str(marker / "note"),))) == len("world-readable")
    finally:
        shutil.rmtree(marker)


# --- network ----------------------------------------------------------------------------


def test_the_worker_cannot_connect_to_the_hosts_loopback(confined: StudentRunner) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        refused = confined.call("connect", (server.getsockname()[1],))
        assert refused.status == "raised"
        assert refused.message.startswith("OSError: [Errno 97]")  # EAFNOSUPPORT
        with pytest.raises(BlockingIOError):
            server.accept()


def test_nothing_the_worker_listens_on_is_reachable_from_the_host(
        confined: StudentRunner) -> None:
    port = free_port()
    refused = confined.call("listen", (port,))
    assert refused.status == "raised"
    assert refused.message.startswith("OSError: [Errno 97]")
    with socket.socket() as client, pytest.raises(ConnectionRefusedError):
        client.connect(("127.0.0.1", port))


# --- disk ---------------------------------------------------------------------------------


def test_the_worker_writes_only_its_box(confined: StudentRunner) -> None:
    name = f"confinement-left-{secrets.token_hex(4)}"
    folders = [str(folder) for folder in SHARED]
    assert value(confined.call("leave", (name, [*folders, "."]))) == \
        ["EACCES"] * len(folders) + ["."]
    assert [folder for folder in SHARED if (folder / name).exists()] == []
    runtime = cached_runtime(confined.root)
    assert value(confined.call("write", (str(runtime / "worker_main.py"),))) == "EACCES"
    assert value(confined.call("write", (str(runtime / "planted.py"),))) == "EACCES"
    assert not (runtime / "planted.py").exists()


def test_all_it_can_write_is_bounded_by_its_box(confined: StudentRunner) -> None:
    if not confined.protections.box_mount:
        pytest.skip("the box is a tmpfs of its own only as root with CAP_SYS_ADMIN")
    before = shutil.disk_usage(tempfile.gettempdir()).free
    folders = [".", *(str(folder) for folder in SHARED)]
    # Twice the bound at most, so that a broken confinement cannot fill the host's disk.
    written, errors = value(confined.call("fill", (folders, 2 * BOX_BYTES)))
    after = shutil.disk_usage(tempfile.gettempdir()).free
    assert errors == ["ENOSPC"] + ["EACCES"] * len(SHARED)
    assert BOX_BYTES - 8 * MIB < written <= BOX_BYTES
    assert before - after < BOX_BYTES  # it went to the box's tmpfs, not the disk


def test_the_worker_creates_files_private_to_itself(confined: StudentRunner) -> None:
    assert value(confined.call("umask")) == 0o077
    assert value(confined.call("leave", ("private", ["."]))) == ["."]
    assert value(confined.call("mode", ("private",))) == 0o600
    assert value(confined.call("mode", (".",))) == 0o700


# --- reading ------------------------------------------------------------------------------


def test_nothing_outside_its_runtime_and_box_is_readable(confined: StudentRunner) -> None:
    marker = Path(tempfile.mkdtemp(prefix="confinement-visible-"))
    try:
        marker.chmod(0o755)
        (marker / "note").write_text("world-readable", encoding="utf-8")
        (marker / "note").chmod(0o644)
        assert value(confined.call("read", (str(marker / "note"),))) == "EACCES"
        assert value(confined.call("read", ("/etc/passwd",))) == "EACCES"
        assert value(confined.call("listing", ("/",))) == "EACCES"
        assert value(confined.call("listing", ("/proc",))) == "EACCES"
        assert value(confined.call("read", ("serving.py",))) == len(PROBE)
    finally:
        shutil.rmtree(marker)


# --- IPC ------------------------------------------------------------------------------------


def test_sysv_ipc_is_refused_and_nothing_reaches_the_host(confined: StudentRunner) -> None:
    key = 0x5E570000 + secrets.randbelow(0xFFFF)
    assert value(confined.call("sysv", (key,))) == [-1, -1, -1]
    assert all(key not in keys for keys in host_sysv_keys().values())


# --- privileges -----------------------------------------------------------------------------


def test_the_worker_cannot_regain_root(confined: StudentRunner, sandbox_user: SandboxUser
                                       ) -> None:
    assert set(loaded(confined.call("regain_root")).values()) == {"PermissionError"}
    assert loaded(confined.call("status")) == {
        "Uid": [sandbox_user.uid] * 3, "Gid": [sandbox_user.gid] * 3, "Groups": [],
        "Caps": [0] * 6, "NoNewPrivs": 1}


# --- through the command line ----------------------------------------------------------------


def grade(folder: Path, home: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``python -m graders grade FOLDER --results FILE`` from a neutral folder, bubblewrap
    switched off, with a TMPDIR of its own below ``home``: the worker carries that path (to
    find survivors)."""
    out, tmp, site = home / "out", home / "tmp", home / "site"
    for path in (out, tmp, site):
        path.mkdir(parents=True)
    for path in (home, out, tmp):  # the sandbox user must reach its box below TMPDIR
        path.chmod(0o755)
    (site / "sitecustomize.py").write_text(NO_BUBBLEWRAP, encoding="utf-8")
    env = {key: item for key, item in os.environ.items() if not key.startswith("PYTEST_")}
    env["TMPDIR"] = str(tmp)
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(REPO)])
    results = out / "results.json"
    completed = subprocess.run(
        [sys.executable, "-m", "graders", "grade", str(folder), "--results", str(results)],
        cwd=out, env=env, capture_output=True, text=True, timeout=Limits().worst_case_s + 120,
        check=False)
    document = json.loads(results.read_text(encoding="utf-8")) if results.exists() else {}
    return completed, document


@pytest.fixture
def home() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="confinement-cli-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.usefixtures("landlocked")
def test_a_correct_submission_still_scores_100_through_the_cli(home: Path) -> None:
    completed, results = grade(CORPUS / "correct", home)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert results["score"] == 100.0
    protections = results["extra_data"]["protections"]
    assert (protections["mode"], protections["tool"]) == (modes.ROOT_NO_BUBBLEWRAP.name, "none")
    assert protections["landlock"] == landlock.abi_version()


#: Files the attacks name with their own prefix; SysV keys of sysv_ipc_leftovers.
ATTACK_PREFIXES = ("fill_tmp_disk-", "sysv_ipc_leftovers-")
ATTACK_KEYS = set(range(0x5E571E00, 0x5E571E08))
#: Where network_listen_connect knocks (the grader's tests listen on one of these).
KNOCKED_PORTS = range(47800, 47810)


def attack_leftovers() -> list[str]:
    found = [str(path) for folder in SHARED for prefix in ATTACK_PREFIXES
             for path in folder.glob(f"{prefix}*")]
    found += [f"{kind} key {key:#x}" for kind, keys in host_sysv_keys().items()
              for key in keys & ATTACK_KEYS]
    return found


def remove_attack_leftovers() -> None:
    """What an unconfined run of the attacks would leave (a confinement that failed)."""
    for folder in SHARED:
        for prefix in ATTACK_PREFIXES:
            for path in folder.glob(f"{prefix}*"):
                with contextlib.suppress(OSError):
                    path.unlink()
    ipcrm = shutil.which("ipcrm")
    for key in ATTACK_KEYS:
        for option in ("-M", "-S", "-Q"):
            if ipcrm:
                subprocess.run([ipcrm, option, str(key)], capture_output=True, check=False)


@pytest.mark.slow
@pytest.mark.usefixtures("landlocked")
@pytest.mark.parametrize("case", ["fill_tmp_disk", "network_listen_connect",
                                  "sysv_ipc_leftovers"])
def test_a_confinement_attack_gains_nothing_and_leaves_nothing(case: str, home: Path) -> None:
    remove_attack_leftovers()
    listener = None
    for port in KNOCKED_PORTS:
        with contextlib.suppress(OSError):
            listener = socket.create_server(("127.0.0.1", port))
            break
    assert listener is not None, "no free port in 47800-47809"
    listener.setblocking(False)
    submission = home / "submission"
    shutil.copytree(ADVERSARIAL / case, submission)
    submission.chmod(0o755)
    try:
        completed, results = grade(submission, home)
        survivors = kill_marked(f"{home}/")  # after a grace; SIGKILLed
        leftovers = attack_leftovers()
        with listener, pytest.raises(BlockingIOError):
            listener.accept()  # nobody knocked at the host's door
    finally:
        remove_attack_leftovers()
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "Traceback" not in completed.stderr
    assert results["score"] == 100.0
    assert results["extra_data"]["protections"]["mode"] == modes.ROOT_NO_BUBBLEWRAP.name
    assert survivors == []
    assert leftovers == []
    assert sorted(path.name for path in (home / "tmp").iterdir()
                  if not path.name.startswith("serving-grader-python-")
                  and not path.name.startswith("serving-grader-runtime-")) == []
