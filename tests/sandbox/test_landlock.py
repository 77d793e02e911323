"""Landlock where bubblewrap cannot run, and the table of layers per mode.

The module on its own restricts a scratch interpreter (reads, writes, /proc, TCP, signals);
the runner's worker restricts itself as the sandbox user where bubblewrap is switched off,
as in Docker's default profile, and fails as the grader's failure where it cannot. The
Docker-profile simulation, graded with the CLI, is in
tests/end_to_end/test_adversarial_syscalls.py.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import AS_ROOT

import graders.sandbox.confinement
import graders.sandbox.runner
from graders.sandbox import landlock, modes
from graders.sandbox.confinement import protections_for
from graders.sandbox.privileges import SandboxUser
from graders.sandbox.runner import SandboxError, StudentRunner

needs_landlock = pytest.mark.skipif(landlock.unavailable() is not None,
                                    reason=str(landlock.unavailable()))

#: Restricts itself to reading its interpreter and argv[1], writing argv[2], then reports
#: what it could do: JSON on stdout.
TRIES = textwrap.dedent("""
    import errno, json, os, signal, socket, sys, sysconfig
    sys.path.insert(0, sys.argv[4])
    import landlock
    readable, box, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    stdlib = sysconfig.get_paths()["stdlib"]
    abi = landlock.restrict([sys.executable, stdlib, readable, "/lib", "/usr/lib"], [box])

    def attempt(action):
        try:
            action()
            return "ok"
        except OSError as error:
            return errno.errorcode.get(error.errno, "?")

    def write():
        with open(os.path.join(box, "written"), "w") as handle:
            handle.write("x")

    def connect():
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass

    print(json.dumps({
        "abi": abi,
        "read allowed": attempt(lambda: open(readable).read()),
        "read /etc/passwd": attempt(lambda: open("/etc/passwd").read()),
        "write box": attempt(write),
        "mkdir box": attempt(lambda: os.mkdir(os.path.join(box, "folder"))),
        "fifo in box": attempt(lambda: os.mkfifo(os.path.join(box, "fifo"))),
        "socket in box": attempt(lambda: socket.socket(socket.AF_UNIX).bind(
            os.path.join(box, "socket"))),
        "write beside": attempt(lambda: open(readable + ".new", "w").close()),
        "list /proc": attempt(lambda: os.listdir("/proc")),
        "read parent": attempt(lambda: open(f"/proc/{os.getppid()}/cmdline").read()),
        "connect": attempt(connect),
        "signal parent": attempt(lambda: os.kill(os.getppid(), 0)),
    }))
""")


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.setblocking(False)
        yield server


@needs_landlock
def test_a_restricted_process_reads_and_writes_only_what_it_was_given(
        tmp_path: Path, listener: socket.socket) -> None:
    readable, box = tmp_path / "readable.txt", tmp_path / "box"
    readable.write_text("allowed", encoding="utf-8")
    box.mkdir()
    completed = subprocess.run(
        [sys.executable, "-I", "-S", "-c", TRIES, str(readable), str(box),
         str(listener.getsockname()[1]), str(Path(landlock.__file__).parent)],
        capture_output=True, text=True, timeout=60, check=True)
    found = json.loads(completed.stdout)
    abi = landlock.abi_version()
    assert found == {
        "abi": abi, "read allowed": "ok", "read /etc/passwd": "EACCES", "write box": "ok",
        "mkdir box": "EACCES", "fifo in box": "EACCES", "socket in box": "EACCES",
        "write beside": "EACCES", "list /proc": "EACCES",
        "read parent": "EACCES",
        "connect": "EACCES" if abi >= 4 else "ok",
        "signal parent": "EPERM" if abi >= 6 else "ok"}
    assert (box / "written").read_text(encoding="utf-8") == "x"
    assert not Path(f"{readable}.new").exists()
    with pytest.raises(BlockingIOError):
        listener.accept()


@pytest.mark.parametrize(("abi", "fs", "net", "scoped"), [
    (1, 0x1FFF, 0, 0), (2, 0x3FFF, 0, 0), (3, 0x7FFF, 0, 0), (4, 0x7FFF, 3, 0),
    (5, 0xFFFF, 3, 0), (6, 0xFFFF, 3, 3), (7, 0xFFFF, 3, 3)])
def test_each_abi_handles_the_rights_it_knows(abi: int, fs: int, net: int,
                                              scoped: int) -> None:
    assert landlock.handled(abi) == (fs, net, scoped)


def test_without_landlock_the_protections_say_so_and_keep_the_filter(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graders.sandbox.confinement, "bubblewrap_support",
                        lambda uid, gid, drop: "switched off by the test")
    monkeypatch.setattr(landlock, "unavailable", lambda: "this kernel offers no Landlock")
    sandbox = SandboxUser("any", 65534, 65534) if AS_ROOT else None
    protections = protections_for(sandbox)
    assert protections.landlock == 0
    assert modes.LANDLOCK not in protections.layers
    assert protections.mode in (modes.ROOT_NO_BUBBLEWRAP.name, modes.USER_REFUSED.name)
    assert "no Landlock (this kernel offers no Landlock)" in protections.description
    assert protections.syscall_filter is (modes.FILTER in protections.layers)
    assert not protections.confined


def test_landlock_is_unavailable_off_linux(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(landlock.sys, "platform", "darwin")
    assert landlock.abi_version() == 0
    assert landlock.unavailable() == "Landlock needs Linux"


@pytest.mark.parametrize(("who", "row"), [
    ({"root": True, "sandbox": True, "cap_sys_admin": True, "bubblewrap": True}, modes.ROOT),
    ({"root": True, "sandbox": True, "cap_sys_admin": False, "bubblewrap": True},
     modes.ROOT_NO_ADMIN),
    ({"root": True, "sandbox": True, "cap_sys_admin": False, "bubblewrap": False},
     modes.ROOT_NO_BUBBLEWRAP),
    ({"root": True, "sandbox": True, "cap_sys_admin": True, "bubblewrap": False},
     modes.ROOT_NO_BUBBLEWRAP),
    ({"root": True, "sandbox": False, "cap_sys_admin": True, "bubblewrap": True},
     modes.ROOT_ALONE),
    ({"root": False, "sandbox": False, "cap_sys_admin": False, "bubblewrap": True},
     modes.USER),
    ({"root": False, "sandbox": False, "cap_sys_admin": False, "bubblewrap": False},
     modes.USER_REFUSED)])
def test_each_mode_has_its_row(who: dict[str, bool], row: modes.Mode) -> None:
    assert modes.hardened_mode(**who) is row


def test_the_table_names_only_known_layers_and_landlock_only_where_bubblewrap_is_not() -> None:
    for row in modes.MODES:
        assert set(row.layers) <= set(modes.LAYERS), row
        assert not {modes.BUBBLEWRAP, modes.LANDLOCK} <= set(row.layers), row
    dropped = {modes.ROOT, modes.ROOT_NO_ADMIN, modes.ROOT_NO_BUBBLEWRAP}
    assert {row for row in modes.MODES if modes.DROP in row.layers} == dropped
    assert len({row.name for row in modes.MODES}) == len(modes.MODES)


# --- the runner's worker, as the sandbox user ----------------------------------------------

PROBE = textwrap.dedent("""
    import os

    def tries(path):
        try:
            with open(path, "rb") as handle:
                return len(handle.read())
        except OSError as error:
            return error.strerror

    def writes():
        with open("written.txt", "w") as handle:
            return handle.write("in the box")
""").encode()


def test_the_landlocked_worker_reads_no_host_file_and_writes_its_box(
        landlocked: SandboxUser) -> None:
    with StudentRunner(PROBE, sandbox=landlocked) as runner:
        assert runner.protections.mode == modes.ROOT_NO_BUBBLEWRAP.name
        assert runner.protections.landlock == landlock.abi_version()
        assert runner.protections.confined
        assert runner.call("tries", ("/etc/passwd",)).value == "Permission denied"
        assert runner.call("tries", ("/proc/1/cmdline",)).value == "Permission denied"
        assert runner.call("writes").value == len("in the box")


def test_a_worker_that_cannot_apply_landlock_runs_no_student_code(
        landlocked: SandboxUser, monkeypatch: pytest.MonkeyPatch) -> None:
    refused = {"read": ["/root/no-such-folder/file"], "write": []}  # /root: closed to it
    monkeypatch.setattr(graders.sandbox.runner, "landlock_paths", lambda *_: refused)
    with StudentRunner(PROBE, sandbox=landlocked) as runner, \
            pytest.raises(SandboxError, match="could not install its Landlock, so no student"):
        runner.call("writes")


#: A submission whose worker rewrites its own file in the box (or leaves a link there to a
#: file of the grader's), then dies: the next worker must import the file submitted.
REWRITES = PROBE + textwrap.dedent("""
    VERSION = "submitted"

    def version():
        return VERSION

    def rewrite_and_die(target):
        os.remove("serving.py")
        if target:
            os.symlink(target, "serving.py")
        else:
            with open("serving.py", "w") as handle:
                handle.write("def version():\\n    return 'rewritten'\\n")
        os._exit(0)
""").encode()


@pytest.mark.parametrize("user", ["landlocked", "landlocked_unmounted"],
                         ids=["mounted box", "host folder"])
@pytest.mark.parametrize("link", [False, True], ids=["rewritten", "link"])
def test_every_worker_imports_the_file_submitted_whatever_an_earlier_one_left(
        request: pytest.FixtureRequest, tmp_path: Path, user: str, link: bool) -> None:
    landlocked: SandboxUser = request.getfixturevalue(user)
    mounted = user == "landlocked"
    graders_file = tmp_path / "graders-file"
    graders_file.write_text("the grader's\n", encoding="utf-8")
    tmp_path.chmod(0o755)
    with StudentRunner(REWRITES, sandbox=landlocked) as runner:
        assert runner.protections.box_mount is mounted
        assert runner.call("version").value == "submitted"
        assert runner.call("rewrite_and_die", (str(graders_file) if link else "",)).status \
            != "ok"
        assert runner.call("version").value == "submitted"
    assert graders_file.read_text(encoding="utf-8") == "the grader's\n"
