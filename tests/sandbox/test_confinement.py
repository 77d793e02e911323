"""Confinement: as root, each worker runs in mount, network and IPC namespaces of its own.

It reaches no network and nothing it listens on can be reached; all it can write (box,
/tmp, /var/tmp, /dev/shm, /run/lock) is one tmpfs of TEMP_SPACE_BYTES and
TEMP_SPACE_INODES that vanishes with it; its SysV IPC objects never reach the host; and it
cannot become root again. Where namespaces are unavailable, the worker runs as before and
``StudentRunner.protections`` says so.

The tests that need root and namespaces run in CI (root); elsewhere they skip, saying why.
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
from helpers import ADVERSARIAL, CORPUS, kill_marked

import graders.sandbox.confinement
from graders.sandbox import landlock, modes, syscall_filter
from graders.sandbox import launcher as confinement_launcher
from graders.sandbox.confinement import (
    COVERED_FOLDERS,
    LAUNCHER,
    TEMP_SPACE_BYTES,
    TEMP_SPACE_INODES,
    Protections,
    launch_arguments,
    namespace_support,
    protections_for,
)
from graders.sandbox.privileges import (
    SandboxUser,
    claim_sandbox_user,
    close_to_others,
    protected_folders,
    worker_python,
)
from graders.sandbox.runner import CallOutcome, Limits, StudentRunner
from graders.sandbox.runtime import cached_runtime

MIB = 1024**2
#: The host folders a confined worker's files must never reach.
SHARED = [Path(folder) for folder in COVERED_FOLDERS if Path(folder).is_dir()]

PROBE = textwrap.dedent("""
    import ctypes
    import errno
    import fcntl
    import json
    import os
    import socket
    import struct

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

    def interfaces():
        found = {}
        with socket.socket() as sock:
            for _, name in socket.if_nameindex():
                request = struct.pack("256s", name.encode())
                flags = struct.unpack("H", fcntl.ioctl(sock, 0x8913, request)[16:18])[0]
                found[name] = "up" if flags & 1 else "down"
        return json.dumps(found)

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

    def touch(folder, limit):
        for index in range(limit):
            try:
                os.close(os.open(os.path.join(folder, f"empty-{index}"), os.O_CREAT, 0o600))
            except OSError as error:
                return [index, failure(error)]
        return [limit, "none"]

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

    def exists(path):
        return os.path.exists(path)

    def listing(folder):
        return sorted(os.listdir(folder))

    def write(path):
        try:
            with open(path, "w") as handle:
                handle.write("tampered")
        except OSError as error:
            return failure(error)
        return "written"

    def read(path):
        with open(path, "rb") as handle:
            return len(handle.read())

    def sysv(key):
        libc = ctypes.CDLL(None, use_errno=True)
        creat = 0o1000
        return [libc.shmget(key, 4096, creat | 0o600), libc.semget(key, 1, creat | 0o600),
                libc.msgget(key, creat | 0o600)]

    def shm_until_full(size):
        libc = ctypes.CDLL(None, use_errno=True)
        segments = 0
        while segments < 10000:
            if libc.shmget(0, size, 0o1000 | 0o600) < 0:
                return [segments, errno.errorcode[ctypes.get_errno()]]
            segments += 1
        return [segments, "none"]

    def sysctl(name):
        with open(f"/proc/sys/{name}") as handle:
            return handle.read().split()

    def sysv_listing():
        keys = {}
        for kind in ("shm", "sem", "msg"):
            with open(f"/proc/sysvipc/{kind}") as handle:
                keys[kind] = [int(line.split()[0]) for line in handle.readlines()[1:]]
        return json.dumps(keys)

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
        keep = ("Uid", "Gid", "Groups", "CapPrm", "CapEff", "CapAmb", "NoNewPrivs")
        with open("/proc/self/status") as handle:
            return json.dumps({line.split(":")[0]: line.split(":", 1)[1].split()
                               for line in handle if line.split(":")[0] in keep})

    def umask():
        mask = os.umask(0)
        os.umask(mask)
        return mask

    def mode(path):
        return os.stat(path).st_mode & 0o7777

    def die():
        os._exit(3)
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
def launcher_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are the launcher's (root's fallback where bubblewrap cannot run):
    bubblewrap is off in this process (tests/sandbox/test_bubblewrap.py tests it; the CLI
    gradings below run in a process of their own, with bubblewrap where it runs)."""
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
def namespaces(sandbox_user: SandboxUser) -> SandboxUser:
    reason = namespace_support(sandbox_user.uid, sandbox_user.gid)
    if reason is not None:
        pytest.skip(f"namespaces are unavailable here: {reason}")
    return sandbox_user


@pytest.fixture
def namespaces_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The launcher's namespaces on their own: the syscall filter, which refuses inet
    sockets and SysV IPC before they reach them, is off in this process (it is tested in
    test_syscall_filter.py, and with the launcher below)."""
    monkeypatch.setattr(syscall_filter, "unavailable", lambda: "switched off by the test")


@pytest.fixture
def confined(namespaces: SandboxUser, namespaces_alone: None) -> Iterator[StudentRunner]:
    close_to_others(protected_folders())
    with StudentRunner(PROBE, limits=Limits(call_timeout_s=10.0), sandbox=namespaces) as runner:
        assert runner.protections.namespaces
        yield runner


# --- what is reported -------------------------------------------------------------------


def test_without_root_no_confinement_is_claimed_only_the_syscall_filter() -> None:
    protections = protections_for(None)
    row = modes.ROOT_ALONE if os.geteuid() == 0 else modes.USER_REFUSED
    assert protections == Protections(False, False, False, False, protections.description,
                                      syscall_filter=syscall_filter.unavailable() is None,
                                      mode=row.name, layers=protections.layers)
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


def test_the_launcher_refuses_to_run_a_worker_as_root(capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    arguments = launch_arguments(SandboxUser("root", 0, 0), box=Path("/nonexistent"),
                                 read_only=[], environment={})
    assert confinement_launcher.main([*arguments, "--", "/bin/true"]) == \
        confinement_launcher.EXIT_FAILED
    assert capsys.readouterr().err == ("serving-grader: cannot confine the worker: "
                                       "ValueError: refusing to run the worker as root\n")


def test_the_launcher_refuses_arguments_it_does_not_know(capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    assert confinement_launcher.main(["--uid", "5", "--network", "on"]) == \
        confinement_launcher.EXIT_FAILED
    assert "bad launcher argument '--network'" in capsys.readouterr().err


def test_without_cap_sys_admin_the_launcher_fails_in_one_line(
        tmp_path: Path, sandbox_user: SandboxUser) -> None:
    """As an unprivileged user (as in a container without CAP_SYS_ADMIN), unshare fails:
    the launcher says so in one line and exits 125; the probe turns that into a reason."""
    user = sandbox_user
    folder = Path(tempfile.mkdtemp(prefix="confinement-launcher-"))
    try:
        folder.chmod(0o755)
        launcher = folder / LAUNCHER.name
        shutil.copy(LAUNCHER, launcher)
        launcher.chmod(0o644)
        box = folder / "box"
        box.mkdir(mode=0o755)
        (box / "serving.py").write_bytes(b"")
        python = worker_python()
        completed = subprocess.run(
            [str(python.executable), "-I", "-S", "-B", str(launcher), "--probe",
             *launch_arguments(user, box=box, read_only=[], environment={})],
            user=user.uid, group=user.gid, extra_groups=[], cwd=folder,
            env={"PATH": "/usr/bin:/bin", **python.environment}, capture_output=True,
            text=True, timeout=30, check=False)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert completed.returncode == confinement_launcher.EXIT_FAILED
    assert completed.stderr == ("serving-grader: cannot confine the worker: "
                                "unshare: Operation not permitted\n")


def test_without_cap_sys_admin_no_probe_is_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graders.sandbox.confinement, "_has_capability", lambda bit: False)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(sys, "platform", "linux")

    def no_probe(*args: object, **kwargs: object) -> None:
        raise AssertionError("no probe should run")

    monkeypatch.setattr(subprocess, "run", no_probe)
    namespace_support.cache_clear()
    try:
        assert namespace_support(1234, 1234) == ("the grader lacks CAP_SYS_ADMIN, which "
                                                 "unshare and mount need")
    finally:
        namespace_support.cache_clear()


def test_where_namespaces_are_unavailable_the_worker_runs_as_before(
        sandbox_user: SandboxUser, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graders.sandbox.confinement, "namespace_support",
                        lambda uid, gid: "cannot confine the worker: unshare: Operation "
                                         "not permitted")
    # the privilege drop alone (test_landlock.py tests what Landlock adds there)
    monkeypatch.setattr(landlock, "unavailable", lambda: "switched off by the test")
    close_to_others(protected_folders())
    marker = Path(tempfile.mkdtemp(prefix="confinement-visible-"))
    try:
        marker.chmod(0o755)
        with StudentRunner(PROBE, sandbox=sandbox_user) as runner:
            protections = runner.protections
            assert (protections.privilege_drop, protections.network_isolation,
                    protections.disk_bound, protections.ipc_isolation) == \
                (True, False, False, False)
            assert "unshare: Operation not permitted" in protections.description
            assert "an unprivileged sandbox user of its own" in protections.description
            status = loaded(runner.call("status"))
            assert status["Uid"] == [str(sandbox_user.uid)] * 4
            assert value(runner.call("exists", (str(marker),))) is True  # the host's /tmp
    finally:
        marker.rmdir()


def test_where_namespaces_are_available_every_protection_is_claimed(
        namespaces: SandboxUser) -> None:
    with StudentRunner(PROBE, sandbox=namespaces) as runner:
        assert runner.protections == Protections(
            True, True, True, True, runner.protections.description, tool="launcher",
            syscall_filter=True, mode=modes.ROOT_LAUNCHER.name,
            layers=modes.ROOT_LAUNCHER.layers)
        assert runner.protections.description.startswith(
            "root with CAP_SYS_ADMIN, no bubblewrap (launcher, syscall filter, privilege drop, "
            "rlimits, process sweep): the student's code runs as an unprivileged sandbox user "
            "of its own, without network, with 64 MiB and 4096 files of temporary space, and "
            "private, bounded IPC; it can read world-readable files (bubblewrap is off in "
            "these tests); a syscall filter refuses the keyring, new namespaces, mounts, SysV IPC "
            "and sockets other than AF_UNIX")


def test_under_the_launcher_the_worker_is_filtered_too(namespaces: SandboxUser) -> None:
    with StudentRunner(PROBE, limits=Limits(call_timeout_s=10.0), sandbox=namespaces
                       ) as runner:
        assert loaded(runner.call("status"))["NoNewPrivs"] == ["1"]
        refused = runner.call("connect", (free_port(),))
        assert refused.status == "raised"
        assert refused.message.startswith("OSError: [Errno 97]")  # EAFNOSUPPORT
        assert value(runner.call("sysv", (0x5E570000 + secrets.randbelow(0xFFFF),))) == \
            [-1, -1, -1]
        assert value(runner.call("shm_until_full", (4096,))) == [0, "EPERM"]


# --- network ----------------------------------------------------------------------------


def test_the_worker_cannot_connect_to_the_hosts_loopback(confined: StudentRunner) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        port = server.getsockname()[1]
        assert value(confined.call("connect", (port,))) == "ENETUNREACH"
        with pytest.raises(BlockingIOError):
            server.accept()


def test_the_workers_only_interface_is_a_loopback_that_is_down(
        confined: StudentRunner) -> None:
    assert loaded(confined.call("interfaces")) == {"lo": "down"}


def test_nothing_the_worker_listens_on_is_reachable_from_the_host(
        confined: StudentRunner) -> None:
    port = free_port()
    assert value(confined.call("listen", (port,))) == "listening"
    with socket.socket() as client, pytest.raises(ConnectionRefusedError):
        client.connect(("127.0.0.1", port))


# --- disk ---------------------------------------------------------------------------------


def test_the_worker_cannot_write_more_than_the_bound_into_tmp(confined: StudentRunner) -> None:
    before = shutil.disk_usage(tempfile.gettempdir()).free
    # Twice the bound at most, so that a broken confinement cannot fill the host's disk.
    written, errors = value(confined.call("fill", (["/tmp"], 2 * TEMP_SPACE_BYTES)))
    after = shutil.disk_usage(tempfile.gettempdir()).free
    assert errors == ["ENOSPC"]
    assert TEMP_SPACE_BYTES - 8 * MIB < written <= TEMP_SPACE_BYTES
    assert before - after < TEMP_SPACE_BYTES  # it went to the tmpfs, not the disk


def test_the_bound_is_a_total_over_the_box_and_every_shared_folder(
        confined: StudentRunner) -> None:
    folders = [".", *(str(folder) for folder in SHARED)]
    written, errors = value(confined.call("fill", (folders, 2 * TEMP_SPACE_BYTES)))
    assert errors == ["ENOSPC"] * len(folders)
    assert written <= TEMP_SPACE_BYTES


def test_the_worker_cannot_create_more_files_than_the_inode_bound(
        confined: StudentRunner) -> None:
    created, error = value(confined.call("touch", (".", 2 * TEMP_SPACE_INODES)))
    assert error == "ENOSPC"
    assert TEMP_SPACE_INODES - 32 < created < TEMP_SPACE_INODES


def test_files_the_worker_writes_never_reach_the_host_and_vanish_with_it(
        confined: StudentRunner) -> None:
    name = f"confinement-left-{secrets.token_hex(4)}"
    folders = [str(folder) for folder in SHARED]
    assert value(confined.call("leave", (name, [*folders, "."]))) == [*folders, "."]
    assert value(confined.call("exists", (f"/tmp/{name}",))) is True
    box = confined.root / "box"
    assert [folder for folder in SHARED if (folder / name).exists()] == []
    assert sorted(os.listdir(box)) == ["serving.py"]  # the host's box: never written
    confined.close()
    assert [folder for folder in SHARED if (folder / name).exists()] == []


def test_a_fresh_worker_gets_a_fresh_empty_temporary_space(confined: StudentRunner) -> None:
    name = f"confinement-restart-{secrets.token_hex(4)}"
    assert value(confined.call("leave", (name, ["/tmp", "."]))) == ["/tmp", "."]
    assert confined.call("die").status == "crashed"
    assert value(confined.call("exists", (f"/tmp/{name}",))) is False
    assert value(confined.call("listing", (".",))) == ["serving.py"]


@pytest.mark.usefixtures("namespaces_alone")
def test_a_box_outside_the_covered_folders_is_bounded_all_the_same(
        namespaces: SandboxUser, monkeypatch: pytest.MonkeyPatch) -> None:
    """The box gets the tmpfs whether or not it lies under /tmp (here /tmp is left
    uncovered, as a TMPDIR elsewhere would leave the box)."""
    monkeypatch.setattr(graders.sandbox.confinement, "COVERED_FOLDERS",
                        tuple(folder for folder in COVERED_FOLDERS if folder != "/tmp"))
    close_to_others(protected_folders())
    with StudentRunner(PROBE, limits=Limits(call_timeout_s=10.0), sandbox=namespaces) as runner:
        written, errors = value(runner.call("fill", (["."], 2 * TEMP_SPACE_BYTES)))
        assert errors == ["ENOSPC"]
        assert written <= TEMP_SPACE_BYTES
        assert sorted(os.listdir(runner.root / "box")) == ["serving.py"]
        # /tmp itself is the host's here: the rest of the confinement still holds
        assert value(runner.call("exists", (str(runner.root),))) is True
        assert value(runner.call("connect", (free_port(),))) == "ENETUNREACH"


def test_the_launcher_never_blocks_on_a_fifo_planted_as_the_submission(
        namespaces: SandboxUser) -> None:
    with StudentRunner(PROBE, limits=Limits(import_timeout_s=5.0), sandbox=namespaces
                       ) as runner:
        planted = runner.root / "box" / "serving.py"
        planted.unlink()
        os.mkfifo(planted)
        outcome = runner.call("umask")
    assert outcome.status == "unimportable"
    assert "code 125" in outcome.message


def test_the_worker_sees_its_runtime_read_only_and_reads_its_submission(
        confined: StudentRunner) -> None:
    runtime = cached_runtime(confined.root)
    assert value(confined.call("write", (str(runtime / "worker_main.py"),))) in (
        "EROFS", "EACCES")
    assert value(confined.call("write", (str(runtime / "planted.py"),))) in ("EROFS", "EACCES")
    assert not (runtime / "planted.py").exists()
    assert value(confined.call("read", ("serving.py",))) == len(PROBE)


def test_no_mount_of_the_worker_reaches_the_host(confined: StudentRunner) -> None:
    assert value(confined.call("exists", ("/tmp",))) is True  # the worker is running
    mounts = Path("/proc/self/mountinfo").read_text()
    assert f"nr_inodes={TEMP_SPACE_INODES}," not in mounts
    assert str(confined.root) not in mounts


# --- IPC ------------------------------------------------------------------------------------


def test_sysv_ipc_objects_of_the_worker_never_reach_the_host(confined: StudentRunner) -> None:
    key = 0x5E570000 + secrets.randbelow(0xFFFF)
    identifiers = value(confined.call("sysv", (key,)))
    assert all(identifier >= 0 for identifier in identifiers)
    inside = loaded(confined.call("sysv_listing"))
    assert all(key in inside[kind] for kind in ("shm", "sem", "msg"))
    assert all(key not in keys for keys in host_sysv_keys().values())
    confined.close()
    assert all(key not in keys for keys in host_sysv_keys().values())


def test_the_workers_ipc_namespace_is_bounded(confined: StudentRunner) -> None:
    assert value(confined.call("shm_until_full", (128 * MIB,))) == [0, "EINVAL"]  # > shmmax
    assert value(confined.call("shm_until_full", (2 * MIB,))) == [32, "ENOSPC"]  # shmall
    assert confined.call("die").status == "crashed"  # a fresh worker, a fresh namespace
    assert value(confined.call("shm_until_full", (4096,))) == [64, "ENOSPC"]  # shmmni
    assert value(confined.call("sysctl", ("kernel/msgmni",))) == ["64"]
    assert value(confined.call("sysctl", ("fs/mqueue/queues_max",))) == ["64"]
    assert Path("/proc/sys/kernel/shmmni").read_text().split() != ["64"]  # the host's


# --- privileges -----------------------------------------------------------------------------


def test_the_worker_cannot_regain_root(confined: StudentRunner, sandbox_user: SandboxUser
                                       ) -> None:
    assert set(loaded(confined.call("regain_root")).values()) == {"PermissionError"}
    status = loaded(confined.call("status"))
    assert status["Uid"] == [str(sandbox_user.uid)] * 4
    assert status["Gid"] == [str(sandbox_user.gid)] * 4
    assert status["Groups"] == []
    assert status["CapPrm"] == status["CapEff"] == status["CapAmb"] == ["0000000000000000"]
    assert status["NoNewPrivs"] == ["1"]


def test_the_worker_creates_files_private_to_itself(confined: StudentRunner) -> None:
    assert value(confined.call("umask")) == 0o077
    assert value(confined.call("leave", ("private", ["/tmp", "."]))) == ["/tmp", "."]
    assert value(confined.call("mode", ("/tmp/private",))) == 0o600
    assert value(confined.call("mode", (".",))) == 0o700
    assert value(confined.call("mode", ("/tmp",))) == 0o1777


# --- through the command line ----------------------------------------------------------------


def grade(folder: Path, home: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``python -m graders grade FOLDER --results FILE`` from a neutral folder, with a TMPDIR
    of its own below ``home``: the worker carries that path (to find survivors)."""
    out, tmp = home / "out", home / "tmp"
    out.mkdir(parents=True)
    tmp.mkdir()
    for path in (home, out, tmp):  # the sandbox user must reach its box below TMPDIR
        path.chmod(0o755)
    env = {key: item for key, item in os.environ.items() if not key.startswith("PYTEST_")}
    env["TMPDIR"] = str(tmp)
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


def test_a_correct_submission_still_scores_100_through_the_cli(home: Path) -> None:
    completed, results = grade(CORPUS / "correct", home)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert results["score"] == 100.0


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
    """What an unconfined run of the attacks would leave (not root, or no namespaces)."""
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
@pytest.mark.usefixtures("namespaces")
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
    assert survivors == []
    assert leftovers == []
    assert sorted(path.name for path in (home / "tmp").iterdir()
                  if not path.name.startswith("serving-grader-python-")
                  and not path.name.startswith("serving-grader-runtime-")) == []


def test_the_runner_knows_the_launchers_failure_code() -> None:
    assert confinement_launcher.EXIT_FAILED == graders.sandbox.confinement.LAUNCHER_FAILED
