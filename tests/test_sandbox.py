"""Privilege separation: as root the worker runs as an unprivileged user that can read
neither the reference nor the grader, cannot fork, and leaves no process behind.

The tests that need root run in CI (which runs as root); elsewhere they skip, saying why.
"""

from __future__ import annotations

import os
import stat
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import reference
from graders.errors import GraderError
from graders.runner import CallOutcome, Limits, StudentRunner
from graders.sandbox import (
    TOKEN_VARIABLE,
    SandboxUser,
    close_to_others,
    ensure_sandbox_user,
    protected_folders,
    reachable_by_others,
    sweep,
    worker_python,
)

REPO = Path(__file__).resolve().parents[1]
needs_root = pytest.mark.skipif(os.geteuid() != 0,
                                reason="the privilege drop needs root (CI runs as root)")

PROBE = textwrap.dedent("""
    import os
    import time

    def identity():
        return [os.getuid(), os.geteuid(), os.getgid(), os.getgroups()]

    def umask():
        mask = os.umask(0)
        os.umask(mask)
        return mask

    def read(path):
        try:
            with open(path, "rb") as handle:
                handle.read(1)
            return "read"
        except OSError as error:
            return type(error).__name__

    def write(path):
        try:
            with open(path, "w") as handle:
                handle.write("forged")
            return "written"
        except OSError as error:
            return type(error).__name__

    def fork():
        try:
            child = os.fork()
        except OSError as error:
            return type(error).__name__
        if child == 0:
            os.setsid()
            time.sleep(600)
            os._exit(0)
        return "forked"
""").encode()


def value(outcome: CallOutcome) -> object:
    assert outcome.ok, outcome
    return outcome.value


@pytest.fixture(scope="module")
def sandbox_user() -> SandboxUser:
    if os.geteuid() != 0:
        pytest.skip("the privilege drop needs root (CI runs as root)")
    return ensure_sandbox_user("serving-sandbox")


@pytest.fixture
def sandboxed(sandbox_user: SandboxUser) -> Iterator[StudentRunner]:
    close_to_others(protected_folders())
    with StudentRunner(PROBE, limits=Limits(call_timeout_s=5.0), sandbox=sandbox_user) as runner:
        yield runner


@needs_root
def test_the_worker_runs_as_the_sandbox_user_with_no_extra_groups(
        sandboxed: StudentRunner, sandbox_user: SandboxUser) -> None:
    uid, euid, gid, groups = value(sandboxed.call("identity"))  # type: ignore[misc]
    assert (uid, euid, gid) == (sandbox_user.uid, sandbox_user.uid, sandbox_user.gid)
    assert groups == []


@needs_root
def test_the_worker_creates_files_private_to_itself(sandboxed: StudentRunner) -> None:
    assert value(sandboxed.call("umask")) == 0o077


@needs_root
@pytest.mark.parametrize("secret", [
    Path(reference.__file__).with_name("queueing.py"),
    REPO / "graders" / "cases.py",
    REPO / "tests" / "corpus" / "correct" / "serving.py",
])
def test_the_worker_cannot_read_the_graders_secrets(sandboxed: StudentRunner,
                                                    secret: Path) -> None:
    assert secret.is_file()
    assert value(sandboxed.call("read", (str(secret),))) == "PermissionError"


@needs_root
def test_the_worker_cannot_write_into_a_results_folder(sandboxed: StudentRunner,
                                                       tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir(mode=0o755)
    tmp_path.chmod(0o755)
    assert value(sandboxed.call("write", (str(results / "results.json"),))) == \
        "PermissionError"
    assert not (results / "results.json").exists()


@needs_root
def test_the_worker_cannot_start_processes(sandboxed: StudentRunner) -> None:
    assert value(sandboxed.call("fork")) == "BlockingIOError"


@needs_root
def test_the_worker_interpreter_is_one_the_sandbox_user_can_run() -> None:
    python = worker_python()
    assert reachable_by_others(python.executable, execute=True)


def test_closing_a_folder_to_others_removes_only_their_rights(tmp_path: Path) -> None:
    folder = tmp_path / "secret"
    folder.mkdir(mode=0o755)
    close_to_others([folder])
    assert stat.S_IMODE(folder.stat().st_mode) == 0o750


def test_a_folder_behind_a_closed_parent_is_not_reachable(tmp_path: Path) -> None:
    inner = tmp_path / "outer" / "inner.txt"
    inner.parent.mkdir(mode=0o700)
    inner.write_text("x")
    inner.chmod(0o644)
    tmp_path.chmod(0o755)
    assert not reachable_by_others(inner)
    inner.parent.chmod(0o755)
    assert reachable_by_others(inner) is reachable_by_others(tmp_path)


def test_protected_folders_include_the_reference_and_the_grader() -> None:
    folders = protected_folders()
    assert Path(reference.__file__).parent in folders
    assert REPO / "graders" in folders


def test_an_unusable_sandbox_user_name_is_refused() -> None:
    with pytest.raises(GraderError, match="must be letters, digits"):
        ensure_sandbox_user("bad name; rm -rf /")


@needs_root
def test_root_is_refused_as_a_sandbox_user() -> None:
    with pytest.raises(GraderError, match="uid or gid 0"):
        ensure_sandbox_user("root")


def test_the_sweep_kills_every_process_carrying_the_token(tmp_path: Path) -> None:
    token = "sweep-test-" + str(os.getpid())
    child = os.fork()
    if child == 0:  # pragma: no cover - the child only sleeps until killed
        os.setsid()
        os.execve("/bin/sleep", ["sleep", "600"], {TOKEN_VARIABLE: token})
    time.sleep(0.2)
    assert sweep(token) == [child]
    _, status = os.waitpid(child, 0)
    assert os.WIFSIGNALED(status)


@needs_root
def test_no_sandbox_process_survives_the_runner(sandbox_user: SandboxUser) -> None:
    with StudentRunner(PROBE, sandbox=sandbox_user) as runner:
        value(runner.call("identity"))
        token = runner.token
    leftover = [entry for entry in Path("/proc").iterdir() if entry.name.isdigit()
                and _has_token(entry, token)]
    assert leftover == []


def _has_token(entry: Path, token: str) -> bool:
    try:
        return f"{TOKEN_VARIABLE}={token}".encode() in (entry / "environ").read_bytes()
    except OSError:
        return False
