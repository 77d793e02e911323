"""A job slot's long-lived grading process: many gradings, one interpreter, and nothing
one submission does reaches the next one's results."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import ADVERSARIAL, CORPUS, graders, load

from graders.regrade import server
from graders.regrade.job import JobContext, grade_arguments
from graders.regrade.server import GradingProcess
from graders.regrade.slots import Slot, claim_slots, release_slots

#: Submissions that leave things behind (files in the shared folders, SysV IPC objects,
#: processes) or tamper with what the grader reuses, graded just before a correct one.
HOSTILE = ("leave_shared_files", "sysv_ipc_leftovers", "fork_bomb", "tamper_runtime_cache",
           "monkeypatch_builtins")

pytestmark = pytest.mark.slow


def without_time(document: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in document.items() if key != "execution_time"}


@pytest.fixture
def slot(tmp_path: Path) -> Iterator[Slot]:
    # the sandbox user must reach its box below the slot (pytest's tmp_path is root's alone)
    work = Path(tempfile.mkdtemp(prefix="grading-process-", dir="/tmp"))
    work.chmod(0o711)
    claimed, = claim_slots(1, work / "slots", tmp_path / "private")
    try:
        yield claimed
    finally:
        release_slots([claimed])
        shutil.rmtree(work, ignore_errors=True)


def grading_process(slot: Slot) -> GradingProcess:
    """The slot's grading process, as a regrade makes it."""
    context = JobContext(out=slot.private.parent, grader_sha256="", timeout_s=300.0)
    return context.grading_process(slot)


def grade_in(process: GradingProcess, slot: Slot, submission: Path, name: str,
             timeout_s: float = 300.0) -> tuple[int | None, bool, Path]:
    """Grade ``submission`` in ``process`` as a regrade job does: staged in the slot's
    private folder, cleaned before and after (sparing the process)."""
    slot.clean(spare=(process.pid,) if process.pid else ())
    staged = slot.private / name / "serving.py"
    staged.parent.mkdir()
    staged.write_bytes(submission.read_bytes())
    results = slot.private / f"{name}.json"
    code, timed_out = process.grade(grade_arguments(staged, results, slot, []),
                                    slot.private / f"{name}.log", timeout_s)
    kept = slot.private.parent.parent / f"{name}.json"
    if results.exists():
        kept.write_bytes(results.read_bytes())
    return code, timed_out, kept


def single_grading(submission: Path, out: Path) -> dict[str, Any]:
    out.mkdir(mode=0o700, exist_ok=True)
    done = graders("grade", submission, "--results", out / "results.json")
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = load(out / "results.json")
    return document


def test_a_correct_submission_graded_after_hostile_ones_gets_a_single_gradings_results(
        slot: Slot, tmp_path: Path) -> None:
    correct = CORPUS / "correct" / "serving.py"
    process = grading_process(slot)
    try:
        pids = set()
        for name in HOSTILE:
            code, timed_out, _ = grade_in(process, slot, ADVERSARIAL / name / "serving.py", name)
            assert not timed_out, name
            pids.add(process.pid)
        code, timed_out, results = grade_in(process, slot, correct, "correct")
        pids.add(process.pid)
    finally:
        process.stop()
    assert (code, timed_out) == (0, False)
    assert len(pids) == 1, "every grading ran in the same process"
    alone = single_grading(correct, tmp_path / "alone")
    assert without_time(load(results)) == without_time(alone)
    assert alone["score"] == 100.0


def test_past_its_timeout_the_process_is_replaced_and_the_next_job_is_graded(
        slot: Slot) -> None:
    process = grading_process(slot)
    try:
        code, timed_out, _ = grade_in(process, slot, ADVERSARIAL / "hang_at_import" / "serving.py",
                                      "hang", timeout_s=3.0)
        assert (code, timed_out) == (None, True)
        assert process.pid is None  # killed with its session
        code, timed_out, results = grade_in(process, slot, CORPUS / "correct" / "serving.py",
                                            "after")
    finally:
        process.stop()
    assert (code, timed_out) == (0, False)
    assert json.loads(results.read_text())["score"] == 100.0


def test_the_process_is_replaced_after_its_share_of_jobs(
        slot: Slot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "JOBS_PER_PROCESS", 1)
    process = grading_process(slot)
    correct = CORPUS / "correct" / "serving.py"
    try:
        grade_in(process, slot, correct, "first")
        first = process.pid
        code, _, results = grade_in(process, slot, correct, "second")
        assert process.pid != first
    finally:
        process.stop()
    assert code == 0
    assert json.loads(results.read_text())["score"] == 100.0


def test_a_timeout_longer_than_a_selector_can_wait_is_accepted(slot: Slot) -> None:
    """2,147,484 s is past the 2**31 - 1 ms an epoll timeout can take (once an
    OverflowError): the wait is made in slices."""
    process = grading_process(slot)
    try:
        code, timed_out, results = grade_in(process, slot, CORPUS / "correct" / "serving.py",
                                            "patient", timeout_s=2_147_484.0)
    finally:
        process.stop()
    assert (code, timed_out) == (0, False)
    assert json.loads(results.read_text())["score"] == 100.0
