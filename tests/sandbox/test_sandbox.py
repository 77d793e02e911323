"""Privilege separation: as root the worker runs as an unprivileged user that can read
neither the reference nor the grader, cannot fork, and leaves no process behind.

The tests that need root run in CI (which runs as root); elsewhere they skip, saying why.
"""

from __future__ import annotations

import contextlib
import fcntl
import grp
import json
import os
import pwd
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import CORPUS, REPO

import graders.sandbox.cleanup
import graders.sandbox.confinement
import graders.sandbox.landlock
import graders.sandbox.privileges
import graders.sandbox.runtime
import graders.sandbox.syscall_filter
import reference
from graders.errors import GraderError
from graders.plugin.session import closed_note
from graders.sandbox.bubblewrap import WORKER_ID
from graders.sandbox.cleanup import (
    SHARED_WRITABLE,
    ipc_objects_of,
    remove_files_of,
    remove_tree,
    sweep_user,
)
from graders.sandbox.privileges import (
    LOCK_FOLDER,
    LOCK_VARIABLE,
    TOKEN_VARIABLE,
    SandboxError,
    SandboxUser,
    claim_sandbox_user,
    close_to_others,
    ensure_sandbox_user,
    protected_folders,
    reachable_by_others,
    sweep,
    worker_python,
)
from graders.sandbox.runner import CallOutcome, Limits, StudentRunner

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


def host_identities(runner: StudentRunner) -> set[tuple[str, str, str]]:
    """(Uid, Gid, Groups) of /proc's status of every process carrying the runner's token:
    the worker, and bwrap's processes around it, as the host sees them (in bubblewrap the
    worker sees a uid of its own namespace)."""
    marker = f"{TOKEN_VARIABLE}={runner.token}".encode()
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit() or marker not in \
                    (entry / "environ").read_bytes().split(b"\0"):
                continue
            fields = dict(line.split(":", 1) for line in
                          (entry / "status").read_text().splitlines() if ":" in line)
        except OSError:
            continue
        found.add((" ".join(fields["Uid"].split()[:2]), " ".join(fields["Gid"].split()[:2]),
                   fields["Groups"].strip()))
    return found


@pytest.fixture(scope="module")
def sandbox_user() -> Iterator[SandboxUser]:
    """A sandbox user this module holds alone, as a grading does."""
    if os.geteuid() != 0:
        pytest.skip("the privilege drop needs root (CI runs as root)")
    user = claim_sandbox_user()
    yield user
    user.release()


@pytest.fixture
def sandboxed(sandbox_user: SandboxUser) -> Iterator[StudentRunner]:
    close_to_others(protected_folders())
    with StudentRunner(PROBE, limits=Limits(call_timeout_s=5.0), sandbox=sandbox_user) as runner:
        yield runner


@needs_root
def test_the_worker_runs_as_the_sandbox_user_with_no_extra_groups(
        sandboxed: StudentRunner, sandbox_user: SandboxUser) -> None:
    uid, euid, gid, groups = value(sandboxed.call("identity"))  # type: ignore[misc]
    # what it sees: in bubblewrap the same ids in every grading (docs/security.md)
    assert (uid, euid, gid) == ((WORKER_ID,) * 3 if sandboxed.protections.tool == "bubblewrap"
                                else (sandbox_user.uid, sandbox_user.uid, sandbox_user.gid))
    assert groups == []
    # what it is, as the host sees it: the sandbox user, real and effective, no groups
    assert host_identities(sandboxed) == {(f"{sandbox_user.uid} {sandbox_user.uid}",
                                           f"{sandbox_user.gid} {sandbox_user.gid}", "")}


@needs_root
def test_the_worker_creates_files_private_to_itself(sandboxed: StudentRunner) -> None:
    assert value(sandboxed.call("umask")) == 0o077


@needs_root
@pytest.mark.parametrize("secret", [
    Path(reference.__file__).with_name("queueing.py"),
    REPO / "graders" / "grading" / "cases.py",
    CORPUS / "correct" / "serving.py",
])
def test_the_worker_cannot_read_the_graders_secrets(sandboxed: StudentRunner,
                                                    secret: Path) -> None:
    assert secret.is_file()
    # refused (PermissionError), or not even visible inside the worker's own mount
    # namespace when the checkout lies under /tmp, covered by its private space
    assert value(sandboxed.call("read", (str(secret),))) in ("PermissionError",
                                                             "FileNotFoundError")


@needs_root
def test_the_worker_cannot_write_into_a_results_folder(sandboxed: StudentRunner,
                                                       tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir(mode=0o755)
    tmp_path.chmod(0o755)
    # refused (PermissionError), or not even visible inside the worker's own mount
    # namespace when /tmp is covered by its private space (FileNotFoundError)
    assert value(sandboxed.call("write", (str(results / "results.json"),))) in (
        "PermissionError", "FileNotFoundError")
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


def test_closing_says_what_it_closed_and_how_other_staff_can_still_grade(
        tmp_path: Path) -> None:
    opened, closed = tmp_path / "checkout", tmp_path / "already"
    opened.mkdir(mode=0o755)
    closed.mkdir(mode=0o750)
    opened.chmod(0o755)
    changed = close_to_others([opened, closed])
    assert [(path, before, after) for path, before, after in changed] == [
        (opened, 0o755, 0o750)]  # only what changed
    note = closed_note(changed)
    assert note is not None
    assert "\n" not in note
    assert f"closed {str(opened)!r} (mode 755 -> 750) to other users" in note
    assert "cannot read them" in note  # why
    group = grp.getgrgid(opened.stat().st_gid).gr_name
    assert f"group {group!r}" in note  # who can still grade
    assert f"chgrp -R STAFF {shlex.quote(str(opened))}" in note  # how to let others grade
    assert "chmod -R g+rX" in note
    assert closed_note([]) is None  # nothing changed, nothing said


def test_the_note_gives_the_fix_for_every_closed_folder_side_by_side(tmp_path: Path) -> None:
    """As installed into site-packages, the grader's packages are siblings: the fix names
    each (and a folder inside another once, through it)."""
    site = tmp_path / "site-packages"
    folders = [site / "graders", site / "reference", site / "graders" / "suite"]
    for folder in folders:
        folder.mkdir(mode=0o755, parents=True)
        folder.chmod(0o755)
    note = closed_note(close_to_others(folders))
    assert note is not None
    both = f"{shlex.quote(str(site / 'graders'))} {shlex.quote(str(site / 'reference'))}"
    assert f"chgrp -R STAFF {both} && chmod -R g+rX {both} " in note
    assert f"{site / 'graders' / 'suite'} " not in note.partition("chgrp")[2]


def test_the_sandbox_users_own_group_loses_its_rights_too(tmp_path: Path) -> None:
    folder = tmp_path / "reference"
    folder.mkdir(mode=0o775)
    folder.chmod(0o775)
    close_to_others([folder], sandbox_gid=folder.stat().st_gid)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    other = tmp_path / "graders"
    other.mkdir(mode=0o755)
    other.chmod(0o755)
    close_to_others([other], sandbox_gid=other.stat().st_gid + 1)
    assert stat.S_IMODE(other.stat().st_mode) == 0o750  # staff in its group keep reading


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


#: Accounts the grader did not make, as pwd gives them, and why each is refused.
PEOPLES_ACCOUNTS = {
    "a login shell": (1500, "/nonexistent", "/bin/bash", "its login shell is /bin/bash"),
    "a home folder": (990, "/", "/usr/sbin/nologin", "its home folder / exists"),
    "a person's uid": (1500, "/nonexistent", "/usr/sbin/nologin", "its uid 1500 is in "
                       "people's range"),
}


@pytest.mark.parametrize("kind", PEOPLES_ACCOUNTS)
def test_an_account_the_grader_did_not_make_is_refused_as_a_sandbox_user(
        kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its processes would be killed and its files in /tmp deleted by every grading."""
    import pwd

    uid, home, shell, why = PEOPLES_ACCOUNTS[kind]
    entry = pwd.struct_passwd(("someone", "x", uid, uid, "", home, shell))
    monkeypatch.setattr(pwd, "getpwnam", lambda name: entry)
    with pytest.raises(GraderError, match="is not an account the grader made") as refused:
        ensure_sandbox_user("someone")
    assert why in str(refused.value)


def test_an_account_as_the_grader_makes_them_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    import pwd

    entry = pwd.struct_passwd(("serving-sandbox-9", "x", 993, 992, "", "/nonexistent",
                               "/usr/sbin/nologin"))
    monkeypatch.setattr(pwd, "getpwnam", lambda name: entry)
    assert ensure_sandbox_user("serving-sandbox-9") == SandboxUser("serving-sandbox-9", 993, 992)


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


# --- clean-up: removing any tree a submission can make, never raising -----------------------

#: Deeper than the recursion limit (1000), with paths far longer than PATH_MAX (4096).
DEPTH = 3000


def deep_tree(top: Path, depth: int = DEPTH, *, outside: Path | None = None) -> None:
    """``depth`` nested folders ``d`` below ``top``, built through descriptors (their paths
    are too long for path calls), with a name holding a newline and non-UTF-8 bytes every
    500 levels, links to ``outside`` and upwards, and at the bottom a folder of mode 000
    (holding a file) inside a read-only one."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for level in range(depth):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
            if level % 500 == 0:
                os.close(os.open(b"odd\nname\xff", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
                if outside is not None:
                    os.symlink(outside, "outside", dir_fd=fd)
                os.symlink("..", "up", dir_fd=fd)
        os.mkdir("closed", dir_fd=fd)
        os.mkdir("closed/inner", dir_fd=fd)
        os.close(os.open("closed/inner/file", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
        os.chmod("closed", 0, dir_fd=fd)
        os.fchmod(fd, 0o500)
    finally:
        os.close(fd)


@pytest.fixture
def sentinel(tmp_path: Path) -> Path:
    """A folder outside every tree under test, that links point to: it must survive."""
    folder = tmp_path / "sentinel"
    folder.mkdir()
    (folder / "keep").write_text("keep", encoding="utf-8")
    return folder


def test_a_tree_deeper_than_the_recursion_limit_and_path_max_is_removed(
        tmp_path: Path, sentinel: Path) -> None:
    top = tmp_path / "tree"
    top.mkdir()
    deep_tree(top, outside=sentinel)
    assert sys.getrecursionlimit() < DEPTH
    assert remove_tree(top) == []
    assert not os.path.lexists(top)
    assert (sentinel / "keep").read_text(encoding="utf-8") == "keep"


def test_links_are_removed_and_never_followed(tmp_path: Path, sentinel: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(sentinel)
    tree = tmp_path / "tree"
    (tree / "inner").mkdir(parents=True)
    (tree / "inner" / "to-sentinel").symlink_to(sentinel)
    (tree / "inner" / "to-root").symlink_to("/")
    assert remove_tree(link) == []
    assert remove_tree(tree) == []
    assert not os.path.lexists(link)
    assert not os.path.lexists(tree)
    assert sorted(os.listdir(sentinel)) == ["keep"]


def test_files_missing_paths_and_roots_never_raise(tmp_path: Path) -> None:
    single = tmp_path / "file"
    single.write_bytes(b"x")
    assert remove_tree(single) == []
    assert not single.exists()
    assert remove_tree(tmp_path / "missing" / "deeper") == []
    for refused in ("/", ".", ".."):
        assert "refusing" in remove_tree(refused)[0]


def test_an_unexpected_error_is_reported_not_raised(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tree" / "inner").mkdir(parents=True)

    def broken(*args: object) -> None:
        raise RuntimeError("a bug in the clean-up")

    monkeypatch.setattr(graders.sandbox.cleanup, "_list_folder", broken)
    problems = remove_tree(tmp_path / "tree")
    assert len(problems) == 1
    assert "RuntimeError: a bug in the clean-up" in problems[0]


@needs_root
def test_as_their_owner_closed_folders_are_opened_and_what_is_not_its_own_is_reported() -> None:
    """As an unprivileged owner (not root), read-only and 000 folders are opened up and
    removed; an entry of another user cannot be, is reported, and the rest still goes."""
    nobody = pwd.getpwnam("nobody")
    base = Path(tempfile.mkdtemp(prefix="cleanup-owner-", dir="/tmp"))
    try:
        base.chmod(0o755)
        top = base / "tree"
        (top / "foreign").mkdir(parents=True)
        (top / "foreign" / "roots-file").write_bytes(b"x")  # root's: nobody cannot remove it
        os.chown(top, nobody.pw_uid, nobody.pw_gid)
        result = _remove_as(nobody.pw_uid, nobody.pw_gid, top)
        assert result["error"] is None, result
        assert os.listdir(top) == ["foreign"]  # all of nobody's own tree is gone
        problems = result["problems"]
        assert isinstance(problems, list)
        assert len(problems) == 1
        assert "roots-file" in problems[0]
        assert "Permission denied" in problems[0]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _remove_as(uid: int, gid: int, top: Path) -> dict[str, object]:
    """In a child as ``uid``: build a deep tree in ``top``, then remove_tree(top)."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        outcome: dict[str, object] = {"error": None, "problems": []}
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            (top / "mine").mkdir()
            deep_tree(top / "mine", 1200)
            outcome["problems"] = remove_tree(top)
        except BaseException as error:
            outcome["error"] = repr(error)
        os.write(write, json.dumps(outcome).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as stream:
        data = stream.read()
    os.waitpid(child, 0)
    result: dict[str, object] = json.loads(data)
    return result


# --- one sandbox user per grading ------------------------------------------------------------

IDENTITY = b"import os\n\ndef uid():\n    return os.getuid()\n"


def lock_is_free(name: str) -> bool:
    fd = os.open(LOCK_FOLDER / f"{name}.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


@needs_root
def test_two_gradings_at_the_same_time_run_as_different_users_then_give_them_back() -> None:
    first, second = claim_sandbox_user(), claim_sandbox_user()
    try:
        with StudentRunner(IDENTITY, sandbox=first) as one, \
                StudentRunner(IDENTITY, sandbox=second) as two:
            seen = value(one.call("uid")), value(two.call("uid"))
            uids = ({identity[0] for identity in host_identities(one)},
                    {identity[0] for identity in host_identities(two)})
        assert uids == ({f"{first.uid} {first.uid}"}, {f"{second.uid} {second.uid}"})
        if one.protections.tool == "bubblewrap":  # and both see the same, in every grading
            assert seen == (WORKER_ID, WORKER_ID)
        assert first.uid != second.uid
        assert first.name.startswith("serving-sandbox-")
        assert not lock_is_free(first.name)
        assert not lock_is_free(second.name)
    finally:
        first.release()
        second.release()
    assert lock_is_free(first.name)
    assert lock_is_free(second.name)
    assert not first.exclusive
    assert not second.exclusive


@needs_root
def test_a_named_sandbox_user_held_by_another_grading_is_refused_clearly() -> None:
    held = claim_sandbox_user()
    try:
        with pytest.raises(SandboxError, match=f"sandbox user '{held.name}' is in use by "
                                               "another grading"):
            claim_sandbox_user(held.name)
    finally:
        held.release()
    again = claim_sandbox_user(held.name)  # free once given back
    assert (again.name, again.uid, again.exclusive) == (held.name, held.uid, True)
    again.release()


@needs_root
def test_a_box_left_by_a_killed_grading_is_removed_before_its_user_runs_again() -> None:
    """A grading killed by SIGKILL cannot clean up: its runner folder (the grader's, so
    outside the shared folders' world-writable part) still holds the worker's box, with
    the student's serving.py, owned by the sandbox user. The next grading with that user
    could read it; claiming the user removes it first."""
    held = claim_sandbox_user()
    stale = Path(tempfile.mkdtemp(prefix="serving-grader-", dir="/tmp"))
    try:
        stale.chmod(0o711)  # as a runner leaves it
        box = stale / "box"
        box.mkdir(mode=0o700)
        (box / "serving.py").write_text("SECRET = 'a classmate\'s work'\n")
        (stale / "worker.output").write_text("the grader's own file\n")
        for path in (box, box / "serving.py"):
            os.chown(path, held.uid, held.gid)
        held.release()
        again = claim_sandbox_user(held.name)
        again.release()
        assert not box.exists()
        assert (stale / "worker.output").exists()  # only the user's entries go
    finally:
        held.release()
        shutil.rmtree(stale, ignore_errors=True)


@needs_root
def test_a_live_gradings_box_of_another_user_is_left_alone() -> None:
    mine, theirs = claim_sandbox_user(), claim_sandbox_user()
    folder = Path(tempfile.mkdtemp(prefix="serving-grader-", dir="/tmp"))
    try:
        box = folder / "box"
        box.mkdir(mode=0o700)
        os.chown(box, theirs.uid, theirs.gid)
        assert sweep_user(mine.uid) == []
        assert box.exists()
    finally:
        mine.release()
        theirs.release()
        shutil.rmtree(folder, ignore_errors=True)


CLAIM_IN_CHILD = """
import sys
from graders.sandbox.privileges import SandboxError, claim_sandbox_user
try:
    user = claim_sandbox_user(sys.argv[1])
except SandboxError as error:
    print("refused:", error)
else:
    print("claimed", user.uid)
"""


@needs_root
def test_a_child_takes_over_the_sandbox_user_its_parent_holds_and_no_one_else_can() -> None:
    held = claim_sandbox_user()
    assert held.claim is not None
    assert held.claim.fd is not None
    environment = {key: value for key, value in os.environ.items() if key != LOCK_VARIABLE}
    command = [sys.executable, "-c", CLAIM_IN_CHILD, held.name]
    try:
        child = subprocess.run(command, env={**environment, **held.claim.inheritance()},
                               pass_fds=(held.claim.fd,), capture_output=True, text=True,
                               check=True, cwd=REPO)
        assert child.stdout.strip() == f"claimed {held.uid}", child.stderr
        stranger = subprocess.run(command, env=environment, capture_output=True, text=True,
                                  check=True, cwd=REPO)
        assert stranger.stdout.startswith("refused: "), stranger.stderr
        assert not lock_is_free(held.name)  # the child's exit did not give it back
    finally:
        held.release()


# --- after every grading, nothing of the sandbox user is left ---------------------------------

LEAVES_EVERYTHING = textwrap.dedent("""
    import ctypes
    import os

    TAG = "test-leftover-" + os.environ["HOME"].strip("/").replace("/", "_")
    libc = ctypes.CDLL(None, use_errno=True)

    def dig(top, depth):
        start = os.open(".", os.O_RDONLY)
        os.chdir(top)
        for _ in range(depth):
            os.mkdir("d")
            os.chdir("d")
        os.fchdir(start)
        os.close(start)

    def leave():
        for folder in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock"):
            with open(os.path.join(folder, TAG), "w") as handle:
                handle.write("left")
            os.mkdir(os.path.join(folder, TAG + "-folder"))
        dig(os.path.join("/tmp", TAG + "-folder"), 3000)
        dig(os.getcwd(), 3000)
        return [libc.shmget(0, 4096, 0o1000 | 0o600), libc.msgget(0, 0o1000 | 0o600),
                libc.semget(0, 2, 0o1000 | 0o600)]
""").encode()


@pytest.fixture
def without_namespaces(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker runs without bubblewrap (as where the kernel refuses namespaces) and
    without Landlock, which would keep it out of the shared places: the sweep after the
    grading is then what removes its leftovers."""
    monkeypatch.setattr(graders.sandbox.confinement, "bubblewrap_support",
                        lambda uid, gid, drop: "bubblewrap switched off by the test")
    monkeypatch.setattr(graders.sandbox.landlock, "unavailable",
                        lambda: "Landlock switched off by the test")


@pytest.fixture
def without_syscall_filter(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep on its own: the syscall filter, which refuses SysV IPC before any object
    is made, is off in this process (tests/sandbox/test_syscall_filter.py tests it)."""
    monkeypatch.setattr(graders.sandbox.syscall_filter, "unavailable",
                        lambda: "switched off by the test")


def owned_entries(uid: int) -> list[str]:
    found = []
    for folder in SHARED_WRITABLE:
        with contextlib.suppress(OSError):
            found += [str(entry) for entry in folder.iterdir() if entry.lstat().st_uid == uid]
    return found


@needs_root
@pytest.mark.usefixtures("without_namespaces", "without_syscall_filter")
def test_everything_the_sandbox_user_left_in_shared_places_is_removed_after_a_grading() -> None:
    user = claim_sandbox_user()
    mine = Path("/tmp") / f"test-leftover-roots-own-{os.getpid()}"  # not the user's: kept
    mine.write_text("keep", encoding="utf-8")
    try:
        runner = StudentRunner(LEAVES_EVERYTHING, limits=Limits(call_timeout_s=60.0),
                               sandbox=user)
        with runner:
            identifiers = value(runner.call("leave"))
            assert (runner.protections.tool, runner.protections.landlock) == ("none", 0)
            assert isinstance(identifiers, list)
            assert min(identifiers) >= 0
            assert len(owned_entries(user.uid)) >= 8
            assert {kind for kind, _ in ipc_objects_of(user.uid)} == {"shm", "msg", "sem"}
        assert owned_entries(user.uid) == []
        assert ipc_objects_of(user.uid) == []
        assert not runner.root.exists()
        assert mine.read_text(encoding="utf-8") == "keep"
        assert sweep_user(user.uid) == []  # nothing left: harmless
    finally:
        mine.unlink()
        user.release()


@needs_root
@pytest.mark.usefixtures("without_namespaces")
def test_a_sandbox_user_that_the_grading_does_not_hold_alone_is_never_swept() -> None:
    shared = ensure_sandbox_user("serving-sandbox")  # not claimed: others may be using it
    other = Path("/tmp") / f"test-another-gradings-file-{os.getpid()}"
    other.write_text("theirs", encoding="utf-8")
    os.chown(other, shared.uid, shared.gid)
    try:
        with StudentRunner(IDENTITY, sandbox=shared) as runner:
            assert value(runner.call("uid")) == shared.uid
        assert other.read_text(encoding="utf-8") == "theirs"
    finally:
        other.unlink()


def test_files_of_a_user_are_found_in_world_writable_folders_of_others(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    (shared / "open-to-all").mkdir(parents=True)
    (shared / "open-to-all").chmod(0o1777)
    (shared / "open-to-all" / "left").write_bytes(b"x")
    uid = os.geteuid()
    assert remove_files_of(uid + 1, [shared]) == []  # nothing of that user: untouched
    assert (shared / "open-to-all" / "left").exists()
    (shared / "open-to-all").chmod(0o1777)
    os.chown(shared / "open-to-all", uid + 1, -1)  # another user's open folder
    assert remove_files_of(uid, [shared]) == []
    assert list((shared / "open-to-all").iterdir()) == []


# --- caches: one place whatever TMPDIR is, private copies removed ------------------------------

WHERE = (b"import os, sys\n\ndef where():\n    return [sys.executable, "
         b"os.path.dirname(os.path.abspath(sys.modules['__main__'].__file__))]\n")


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder the sandbox user can traverse (pytest's tmp_path is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="sandbox-test-", dir="/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@needs_root
def test_gradings_with_different_temp_folders_reuse_one_runtime_and_one_interpreter(
        open_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = claim_sandbox_user()
    seen = []
    try:
        for name in ("first", "second"):
            temp = open_folder / name
            temp.mkdir(mode=0o755)
            monkeypatch.setattr(tempfile, "tempdir", str(temp))
            with StudentRunner(WHERE, sandbox=user) as runner:
                seen.append(value(runner.call("where")))
            assert list(temp.iterdir()) == []
    finally:
        user.release()
    (first_python, first_runtime), (second_python, second_runtime) = seen  # type: ignore[misc]
    assert first_python == second_python  # one interpreter (a copy, if one was needed)
    # one runtime folder (its name changes only with the grader's code or packages)
    assert Path(first_runtime).parent == Path(second_runtime).parent
    for path in (first_python, first_runtime):
        assert not path.startswith(str(open_folder)), path


@needs_root
def test_copies_made_for_one_run_alone_are_removed_at_its_end(
        open_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a usable cache folder, the runtime (and the interpreter copy, where the
    sandbox user cannot run this interpreter) are made for the run, then removed."""
    monkeypatch.setattr(graders.sandbox.privileges, "cache_folder", lambda: None)
    monkeypatch.setattr(graders.sandbox.runtime, "cache_folder", lambda: None)
    monkeypatch.setattr(tempfile, "tempdir", str(open_folder))
    probe = worker_python()  # whether this interpreter needs copying (then privately)
    copied = probe.private is not None
    remove_tree(probe.private or open_folder / "none")
    user = claim_sandbox_user()
    try:
        with StudentRunner(WHERE, sandbox=user) as runner:
            executable, runtime = value(runner.call("where"))  # type: ignore[misc]
            assert runtime.startswith(str(open_folder))
            assert executable.startswith(str(open_folder)) is copied
    finally:
        user.release()
    assert not os.path.exists(runtime)
    assert os.path.exists(executable) is not copied
    assert list(open_folder.iterdir()) == []


DIGS = textwrap.dedent("""
    import os

    def dig():
        start = os.open(".", os.O_RDONLY)
        for _ in range(3000):
            os.mkdir("d")
            os.chdir("d")
        try:  # where the syscall filter runs, refused: the box stays the grader's to remove
            os.chmod(".", 0)
        except PermissionError:
            pass
        os.fchdir(start)
        os.close(start)
        return "dug"
""").encode()


def test_a_runner_removes_a_box_deeper_than_the_recursion_limit_when_it_closes() -> None:
    runner = StudentRunner(DIGS, limits=Limits(call_timeout_s=60.0))
    with runner:
        assert value(runner.call("dig")) == "dug"
    assert not runner.root.exists()
