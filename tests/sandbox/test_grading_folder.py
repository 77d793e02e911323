"""A grading's folders lie where its sandbox user can reach them (issue 21, item 3).

As root without namespaces (Docker's default: no CAP_SYS_ADMIN, no user namespaces), the
worker runs as the sandbox user straight from its box. With a temporary folder of mode 700
the box used to be out of that user's reach, and a correct submission scored 0 ("could not
be imported: PermissionError"). The grading's folders now go under a folder the grader
owns that every user may traverse, or the grader says what to do.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import CORPUS

import graders.sandbox.confinement
import graders.sandbox.privileges
from graders.sandbox.cleanup import traversable_by_others
from graders.sandbox.privileges import (
    GRADINGS_FOLDER,
    SandboxError,
    SandboxUser,
    claim_sandbox_user,
    grading_parent,
)
from graders.sandbox.runner import Limits, StudentRunner

STAND_IN = SandboxUser("any", 65534, 65534)


@pytest.fixture
def private_temp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temporary folder of mode 700, as TMPDIR."""
    folder = Path(tempfile.mkdtemp(prefix="private-temp-"))
    folder.chmod(0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    monkeypatch.undo()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def root_only() -> None:
    if os.geteuid() != 0:
        pytest.skip("the grader drops to a sandbox user only as root (CI runs as root)")


def test_without_a_sandbox_user_the_temporary_folder_is_used(private_temp: Path) -> None:
    assert grading_parent(None) is None


@pytest.mark.usefixtures("root_only")
def test_a_traversable_temporary_folder_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    folder = Path(tempfile.mkdtemp(prefix="open-temp-"))
    try:
        folder.chmod(0o755)
        monkeypatch.setattr(tempfile, "tempdir", str(folder))
        assert traversable_by_others(folder)
        assert grading_parent(STAND_IN) is None
    finally:
        folder.rmdir()


@pytest.mark.usefixtures("root_only")
def test_a_private_temporary_folder_is_replaced_by_one_the_sandbox_user_can_reach(
        private_temp: Path) -> None:
    assert not traversable_by_others(private_temp)
    parent = grading_parent(STAND_IN)
    assert parent == GRADINGS_FOLDER
    assert traversable_by_others(parent)
    assert parent.stat().st_uid == 0
    assert parent.stat().st_mode & 0o777 == 0o711  # others pass through, never list


@pytest.mark.usefixtures("root_only")
def test_where_no_folder_is_reachable_the_grader_says_what_to_do(
        private_temp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graders.sandbox.privileges, "GRADINGS_FOLDER",
                        private_temp / "closed" / "gradings")
    with pytest.raises(SandboxError, match="chmod o\\+x"):
        grading_parent(STAND_IN)


@pytest.mark.usefixtures("root_only")
def test_with_the_privilege_drop_alone_a_correct_submission_imports_from_a_private_tmpdir(
        private_temp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The configuration of issue 21, item 3: no bubblewrap, no namespaces, TMPDIR 700."""
    monkeypatch.setattr(graders.sandbox.confinement, "bubblewrap_support",
                        lambda uid, gid, drop: "off in this test")
    user = claim_sandbox_user()
    try:
        code = (CORPUS / "correct" / "serving.py").read_bytes()
        with StudentRunner(code, limits=Limits(call_timeout_s=10.0), sandbox=user) as runner:
            assert runner.protections.tool == "none"
            assert runner.protections.privilege_drop
            assert GRADINGS_FOLDER in runner.root.parents
            outcome = runner.call("serve", (10, 4))
            assert outcome.ok, outcome
            assert runner.import_error is None
    finally:
        user.release()


@pytest.mark.usefixtures("root_only")
def test_a_killed_gradings_box_there_is_removed_when_its_user_is_claimed_again() -> None:
    user = claim_sandbox_user()
    user.release()  # as a grading killed by SIGKILL leaves it: the box, and its user free
    GRADINGS_FOLDER.mkdir(mode=0o711, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="serving-grader-", dir=GRADINGS_FOLDER))
    box = root / "box"
    box.mkdir(mode=0o700)
    (box / "serving.py").write_text("a classmate's code")
    for path in (box, box / "serving.py"):
        os.chown(path, user.uid, user.gid)
    try:
        again = claim_sandbox_user(user.name)
        again.release()
        assert not box.exists()
    finally:
        shutil.rmtree(root, ignore_errors=True)
