"""Confinement, graded with the CLI: the disk search and the ordinary user's regrade.

The disk search: a world-readable copy of the grader earns a confined worker nothing.

``search_disk_for_grader`` walks the whole disk for any ``reference/__init__.py`` it can
read (an instructor's checkout in a home folder of mode 755, an install in /opt or /srv)
and answers ``serve`` with it. The test leaves such a copy in a world-readable folder
outside the temporary folder, checks that an ordinary process of another user could
import it there, and grades the case with the CLI: the worker sees only its runtime and
its box (bubblewrap's allowlist), so the theft finds nothing and the case scores the
honest baseline, 88.0 (serve's 12 points lost).

The ordinary user's regrade: an instructor without root grades a class of three with
``graders regrade``, run by the system's Python from a world-readable install (the
grader's own interpreter lies in /root). ``ordinary_user_regrade`` is honest code that,
at import, reads the user's secret, rewrites every results.json it finds under /home,
plants pickles in the grader's cache, knocks on a server on the host's loopback and
SIGKILLs every other process of its user. Confined (user, pid, mount and network
namespaces, the allowlist), none of it happens: the classmates' grades are exactly theirs,
the secret appears in no output, nothing is planted, nobody knocks, the regrade completes
and nothing of the user is left running.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import (
    ADVERSARIAL,
    AS_ROOT,
    CORPUS,
    CORPUS_EXPECTED,
    INSTRUCTOR,
    KILL_GRACE_S,
    REPO,
    SYSTEM_PYTHON,
    grade_case,
    ordinary_regrade_unsupported,
    ordinary_user,
    processes_of,
    world_readable_install,
)

from graders.sandbox.confinement import bubblewrap_support
from graders.sandbox.privileges import worker_python

pytestmark = pytest.mark.slow

CASE = "search_disk_for_grader"
BASELINE_WITHOUT_SERVE = 88.0
NOBODY = 65534


def confined_here() -> str | None:
    """Why the disk search cannot be contained on this machine (None: it can)."""
    if not AS_ROOT:
        return "the readable copy is planted in /srv, which needs root"
    return bubblewrap_support(NOBODY, NOBODY, True)


@pytest.fixture
def readable_copy() -> Iterator[Path]:
    """A copy of the grader's reference/ in a folder of mode 755 under /srv."""
    folder = Path("/srv") / f"serving-grader-copy-{secrets.token_hex(4)}"
    shutil.copytree(REPO / "reference", folder / "reference",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def confined() -> None:
    """Skip where the disk search cannot be contained (decided when the test runs)."""
    reason = confined_here()
    if reason is not None:
        pytest.skip(reason)


@pytest.mark.usefixtures("confined")
def test_the_copy_is_importable_by_another_user_outside_the_sandbox(
        readable_copy: Path) -> None:
    """The premise: without the allowlist, any user's process could use the copy."""
    python = worker_python()  # the interpreter (or its copy) a sandbox user can run
    completed = subprocess.run(
        [str(python.executable), "-I", "-S", "-c", "import sys; sys.path.insert(0, "
         "sys.argv[1]); import reference; print(callable(reference.serve))",
         str(readable_copy)],
        capture_output=True, text=True, user=NOBODY, group=NOBODY, extra_groups=[],
        env={"PATH": "/usr/bin:/bin", **python.environment}, cwd="/", timeout=60,
        check=False)
    assert completed.stdout.strip() == "True", completed.stderr


@pytest.mark.usefixtures("confined")
def test_a_disk_search_for_a_readable_grader_copy_earns_nothing(readable_copy: Path) -> None:
    base = Path(tempfile.mkdtemp(prefix="adversarial-confinement-", dir="/tmp"))
    base.chmod(0o755)
    try:
        case = grade_case(CASE, ADVERSARIAL / CASE, base)
        assert case.returncode == 0, case.stderr
        results = json.loads(case.text)
        assert results["score"] == BASELINE_WITHOUT_SERVE, results.get("output")
        assert results["extra_data"]["protections"]["allowlist"] is True
        assert not case.survivors
    finally:
        shutil.rmtree(base, ignore_errors=True)


# --- the ordinary user's regrade -------------------------------------------------------------

REGRADE_CASE = "ordinary_user_regrade"
#: Where the attack knocks (KNOCKED_PORTS in its serving.py).
KNOCKED_PORTS = range(47820, 47830)
BUGGY = "variability_linear_cv"
@pytest.fixture
def knocked() -> Iterator[socket.socket]:
    """The server the attack knocks on, on the host's loopback."""
    for port in KNOCKED_PORTS:
        with contextlib.suppress(OSError):
            server = socket.create_server(("127.0.0.1", port))
            break
    else:
        pytest.fail("no free port in 47820-47829")
    server.setblocking(False)
    with server:
        yield server


def test_an_ordinary_users_regrade_keeps_every_grade_file_and_process_its_own(
        knocked: socket.socket) -> None:
    reason = ordinary_regrade_unsupported()  # when the test runs: it may make the user
    if reason is not None:
        pytest.skip(reason)
    entry = ordinary_user(INSTRUCTOR)
    home, token = Path(entry.pw_dir), secrets.token_hex(16)
    install = Path(tempfile.mkdtemp(prefix="ordinary-regrade-", dir="/tmp"))
    work = home / f"course-{token[:8]}"
    try:
        pythonpath = world_readable_install(install)
        shutil.rmtree(home / ".cache" / "serving-grader", ignore_errors=True)  # built anew
        secret = home / "secret.txt"
        secret.write_text(f"SECRET-{token}")
        secret.chmod(0o600)
        submissions = {"alice": CORPUS / "correct", "bob": CORPUS / BUGGY,
                       "mallory": ADVERSARIAL / REGRADE_CASE}
        for student, source in submissions.items():
            (work / "class" / student).mkdir(parents=True)
            shutil.copy2(source / "serving.py", work / "class" / student / "serving.py")
        for path in [secret, home / ".cache", work, *work.rglob("*")]:
            if path.exists():
                os.chown(path, entry.pw_uid, entry.pw_gid)
        completed = subprocess.run(
            [str(SYSTEM_PYTHON), "-m", "graders", "regrade", "class", "--out", str(work / "out"),
             "--jobs", "2", "--no-histogram"],
            cwd=work, user=entry.pw_uid, group=entry.pw_gid, extra_groups=[],
            env={"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
                 "PYTHONPATH": pythonpath},
            capture_output=True, text=True, timeout=900, check=False)
        deadline = time.monotonic() + KILL_GRACE_S  # as for every adversarial case
        while (left_running := processes_of(entry.pw_uid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in left_running:
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
        assert completed.returncode == 0, completed.stderr[-3000:]
        with (work / "out" / "grades.csv").open(encoding="utf-8") as handle:
            rows = {row["submission"]: row for row in csv.DictReader(handle)}
        scores = {student: float(rows[student]["score"]) for student in submissions}
        assert scores == {"alice": 100.0, "bob": CORPUS_EXPECTED[BUGGY].score,
                          "mallory": 100.0}
        assert {rows[student]["status"] for student in submissions} == {"graded"}
        outputs = [path for path in work.rglob("*") if path.is_file()]
        assert [str(path) for path in outputs if token.encode() in path.read_bytes()] == []
        assert secret.read_text() == f"SECRET-{token}"
        cache = home / ".cache"
        assert [str(path) for path in cache.rglob("*") if path.is_file()
                and (path.name == "planted.pickle" or b"PLANTED" in path.read_bytes())] == []
        with pytest.raises(BlockingIOError):
            knocked.accept()
        assert left_running == {}
        mallory = json.loads((work / "out" / "submissions" / "mallory" / "results.json"
                              ).read_text(encoding="utf-8"))
        assert mallory["extra_data"]["protections"]["tool"] == "bubblewrap"
    finally:
        shutil.rmtree(install, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
