"""The box's own tmpfs: as root with CAP_SYS_ADMIN, the grader mounts one tmpfs of
BOX_BYTES and BOX_INODES on the worker's box before it starts (bubblewrap binds it as the
worker's /tmp, Landlock lets the worker write it alone) and detaches it when the runner
closes, a failed set-up included. Where the grader cannot mount, nothing is mounted and
the protections say so. These tests need root with CAP_SYS_ADMIN; elsewhere they skip."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import graders.sandbox.confinement
import graders.sandbox.runner
from graders.sandbox import box_mount, bubblewrap, landlock
from graders.sandbox.box_mount import BOX_BYTES, BOX_INODES, mount_box
from graders.sandbox.cleanup import sweep_user
from graders.sandbox.confinement import CAP_SYS_ADMIN, _has_capability, bubblewrap_support
from graders.sandbox.privileges import (
    SandboxUser,
    claim_sandbox_user,
    close_to_others,
    protected_folders,
)
from graders.sandbox.runner import CallOutcome, Limits, StudentRunner

MIB = 1024**2
PROBE = textwrap.dedent("""
    import errno
    import os

    def fill(folder, limit):
        chunk, written, index = b"x" * (1 << 20), 0, 0
        while written < limit:
            index += 1
            try:
                with open(os.path.join(folder, f"fill-{index}"), "wb") as handle:
                    for _ in range(4):  # RLIMIT_FSIZE is 4 MiB a file
                        handle.write(chunk)
                        written += len(chunk)
            except OSError as error:
                return [written, errno.errorcode[error.errno]]
        return [written, "none"]

    def touch(folder, limit):
        for index in range(limit):
            try:
                os.close(os.open(os.path.join(folder, f"empty-{index}"), os.O_CREAT, 0o600))
            except OSError as error:
                return [index, errno.errorcode[error.errno]]
        return [limit, "none"]

    def die():
        os._exit(3)
""").encode()


def value(outcome: CallOutcome) -> Any:
    assert outcome.ok, outcome
    return outcome.value


def box_mounts(box: Path) -> list[str]:
    """The host's mounts on ``box``, as /proc/self/mountinfo lists them."""
    return [line for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if line.split()[4] == str(box)]


@pytest.fixture(scope="module")
def sandbox_user() -> Iterator[SandboxUser]:
    if os.geteuid() != 0 or not _has_capability(CAP_SYS_ADMIN):
        pytest.skip("mounting the box needs root with CAP_SYS_ADMIN (CI runs as root)")
    user = claim_sandbox_user()
    yield user
    user.release()


@pytest.fixture(params=["bubblewrap", "landlock"])
def mode(request: pytest.FixtureRequest, sandbox_user: SandboxUser,
         monkeypatch: pytest.MonkeyPatch) -> str:
    """The worker in bubblewrap, or (bubblewrap off) under Landlock."""
    if request.param == "bubblewrap":
        reason = bubblewrap_support(sandbox_user.uid, sandbox_user.gid, True)
    else:
        reason = landlock.unavailable()
        monkeypatch.setattr(graders.sandbox.confinement, "bubblewrap_support",
                            lambda uid, gid, drop: "switched off by the test")
    if reason is not None:
        pytest.skip(reason)
    close_to_others(protected_folders())
    return str(request.param)


def test_the_box_is_one_tmpfs_bounded_in_bytes_and_files_and_detached_after(
        mode: str, sandbox_user: SandboxUser) -> None:
    with StudentRunner(PROBE, limits=Limits(call_timeout_s=30.0), sandbox=sandbox_user
                       ) as runner:
        assert runner.protections.box_mount
        assert f"{BOX_BYTES // MIB} MiB and {BOX_INODES} files" in \
            runner.protections.description
        box = runner.root / "box"
        written, error = value(runner.call("fill", (".", 2 * BOX_BYTES)))
        assert error == "ENOSPC"
        assert BOX_BYTES - 8 * MIB < written <= BOX_BYTES
        [mount] = box_mounts(box)
        assert "nosuid,nodev,noexec" in mount
        assert f"nr_inodes={BOX_INODES}," in mount
        assert runner.call("die").status == "crashed"
        assert len(box_mounts(box)) == 1  # a restarted worker gets the same bounded box
    assert box_mounts(box) == []
    assert not runner.root.exists()


def test_the_worker_cannot_create_more_files_than_the_box_holds(
        mode: str, sandbox_user: SandboxUser) -> None:
    with StudentRunner(PROBE, limits=Limits(call_timeout_s=30.0), sandbox=sandbox_user
                       ) as runner:
        created, error = value(runner.call("touch", (".", 2 * BOX_INODES)))
        assert error == "ENOSPC"
        assert BOX_INODES - 32 < created < BOX_INODES
        if mode == "bubblewrap":  # its /tmp is the box's tmpfs: the same bound
            assert value(runner.call("touch", ("/tmp", 1))) == [0, "ENOSPC"]


def test_without_cap_sys_admin_nothing_is_mounted(
        sandbox_user: SandboxUser, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graders.sandbox.confinement, "_has_capability", lambda bit: False)
    with StudentRunner(PROBE, sandbox=sandbox_user) as runner:
        assert not runner.protections.box_mount
        assert value(runner.call("touch", (".", 3))) == [3, "none"]
        assert box_mounts(runner.root / "box") == []


def test_a_refused_mount_keeps_the_folder_and_says_why(
        sandbox_user: SandboxUser, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graders.sandbox.runner, "mount_box", lambda box, uid, gid: "refused")
    with StudentRunner(PROBE, sandbox=sandbox_user) as runner:
        assert not runner.protections.box_mount
        assert runner.protections.description.endswith("(not mounted: refused)")
        assert value(runner.call("touch", (".", 3))) == [3, "none"]


def test_a_set_up_that_fails_after_the_mount_detaches_it(
        sandbox_user: SandboxUser, monkeypatch: pytest.MonkeyPatch) -> None:
    mounted: list[Path] = []

    def recorded(box: Path, uid: int, gid: int) -> str | None:
        mounted.append(box)
        return mount_box(box, uid, gid)

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(graders.sandbox.runner, "mount_box", recorded)
    monkeypatch.setattr(graders.sandbox.runner, "WorkerSetup", interrupted)
    with pytest.raises(KeyboardInterrupt):
        StudentRunner(PROBE, sandbox=sandbox_user)
    [box] = mounted
    assert box_mounts(box) == []
    assert not box.parent.exists()


def test_the_box_is_never_mounted_through_a_link(
        tmp_path: Path, sandbox_user: SandboxUser) -> None:
    target, link = tmp_path / "target", tmp_path / "box"
    target.mkdir()
    link.symlink_to(target)
    with pytest.raises(OSError, match="Too many levels of symbolic links|Not a directory"):
        mount_box(link, sandbox_user.uid, sandbox_user.gid)
    assert box_mounts(target) == []
    assert box_mount.unmount_box(target) != []  # nothing there to detach: reported


def test_bubblewrap_binds_a_mounted_box_as_its_tmp_in_place_of_its_own_tmpfs(
        tmp_path: Path) -> None:
    options: dict[str, Any] = {"read_only": [], "covered": [], "submission_fd": 3,
                               "submission_name": "serving.py", "space_bytes": 1,
                               "worker": ["true"]}
    own = bubblewrap.bwrap_command(Path("/bin/true"), **options)
    assert own[own.index("--tmpfs") + 1] == bubblewrap.SPACE
    bound = bubblewrap.bwrap_command(Path("/bin/true"), space=tmp_path, **options)
    assert bound[bound.index("--bind") + 1:bound.index("--bind") + 3] == \
        [str(tmp_path), bubblewrap.SPACE]
    assert "--tmpfs" not in bound
    assert bound[bound.index("--dir") + 1] == bubblewrap.BOX


def test_a_box_left_mounted_by_a_killed_grading_is_detached_by_the_next_sweep(
        tmp_path: Path, sandbox_user: SandboxUser) -> None:
    # a grading killed with SIGKILL cannot detach its box: the next claim of its sandbox
    # user (which sweeps it) does, and leaves other users' boxes alone
    mine, other = tmp_path / "mine", tmp_path / "other"
    for box in (mine, other):
        box.mkdir()
    assert mount_box(mine, sandbox_user.uid, sandbox_user.gid) is None
    assert mount_box(other, sandbox_user.uid + 1, sandbox_user.gid) is None
    try:
        assert box_mount.stale_boxes_of(sandbox_user.uid) == [mine]
        assert sweep_user(sandbox_user.uid) == []
        assert box_mounts(mine) == []
        assert len(box_mounts(other)) == 1
    finally:
        for box in (mine, other):
            box_mount.unmount_box(box)


def test_mount_points_are_read_as_mountinfo_escapes_them(tmp_path: Path) -> None:
    mountinfo = tmp_path / "mountinfo"
    box = tmp_path / "a box\twith\\odd name"
    box.mkdir()
    escaped = str(box).replace("\\", "\\134").replace(" ", "\\040").replace("\t", "\\011")
    mountinfo.write_text(
        f"36 35 0:40 / {escaped} rw,nosuid - tmpfs {box_mount.SOURCE} rw,size=65536k\n"
        f"37 35 0:41 / {tmp_path} rw - tmpfs other-source rw\n", encoding="utf-8")
    assert box_mount.stale_boxes_of(os.geteuid(), str(mountinfo)) == [box]
    assert box_mount.stale_boxes_of(os.geteuid() + 1, str(mountinfo)) == []
