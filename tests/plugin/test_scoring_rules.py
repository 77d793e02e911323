"""Scoring rules seen through pytest: partial runs, hidden tests last, invariants that pay
only for real answers (pytester, the way pytest plugins are tested)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import CORPUS, FAKES, REPO

from graders.grading.cases import serve_cases
from graders.sandbox.platforms import running_as_root

CORRECT = CORPUS / "correct" / "serving.py"
BUGGY = CORPUS / "p99_at_q095" / "serving.py"
#: The grading suite, named by path as a student names one of its tests.
SUITE = REPO / "graders" / "suite"


def results(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


@pytest.fixture(autouse=True)
def submission(pytester: pytest.Pytester) -> Path:
    path = pytester.path / "serving.py"
    shutil.copy(BUGGY, path)
    return path


@pytest.mark.parametrize("selection", [
    ["-k", "queueing"],
    [f"{SUITE}/test_cases.py::test_serve"],
    ["-m", "not grader"],
    ["--deselect", "graders/suite/test_cases.py::test_serve"],
    ["-x"],
])
def test_a_selection_shows_a_partial_run_and_no_total(pytester: pytest.Pytester,
                                                      selection: list[str]) -> None:
    result = pytester.runpytest("--student", "serving.py", "--grader-results", "out.json",
                                "-p", "no:randomly", *selection)
    result.stdout.no_fnmatch_line("INTERNALERROR*")
    result.stdout.no_fnmatch_line("TOTAL *")
    result.stdout.fnmatch_lines(["partial run: * of 48 graded tests, * of their * points; "
                                 "run `pytest` with no selection for your score"])
    document = results(pytester.path / "out.json")
    assert document["extra_data"]["max_score"] == 100.0
    assert document["output"].startswith("<pre>partial run: ")  # the html essentials
    assert document["extra_data"]["partial_run"].startswith("partial run: ")
    ran = [t for t in document["tests"] if t["extra_data"]["outcome"] != "not run"]
    assert 0 < len(ran) < 48 or selection == ["-m", "not grader"]
    # tests that did not run neither count as 0 nor scale the others up
    whole = {t["extra_data"]["nodeid"]: t["max_score"] for t in document["tests"]}
    assert sum(whole.values()) == pytest.approx(100.0, abs=1e-3)


def test_the_partial_line_gives_the_points_of_the_tests_that_ran(
        pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--student", "serving.py", f"{SUITE}/test_cases.py::test_serve",
                                f"{SUITE}/test_cases.py::test_erlang_c")
    result.stdout.fnmatch_lines(["partial run: 2 of 48 graded tests, 16.00 of their 16.00 "
                                 "points; *"])


def test_a_full_run_shows_the_total(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--student", "serving.py")
    result.stdout.fnmatch_lines(["TOTAL * / 100.00"])
    result.stdout.no_fnmatch_line("partial run*")


def test_hidden_tests_run_last_in_a_fresh_worker(pytester: pytest.Pytester,
                                                 submission: Path) -> None:
    # the submission remembers every input of a large fleet (the hidden tests' inputs), in
    # memory and in files, and puts what it remembers into the feedback of visible tests
    source = CORRECT.read_text(encoding="utf-8") + '''

# --- record the hidden inputs and leak them through visible feedback --------------------
import glob as _glob
import os as _os
import tempfile as _tempfile

_SEEN = []
_honest_erlang_c = erlang_c
_honest_queueing = queueing_latency
_honest_serve = serve
_DROPS = [_os.path.join(folder, "hidden-inputs-drop")
          for folder in ("/tmp", "/dev/shm", _tempfile.gettempdir(), _os.getcwd())]


def _remember(replicas, arrival):
    if replicas >= 170:
        _SEEN.append(f"LEAK c={replicas} qps={arrival}")
        for drop in _DROPS:
            try:
                with open(drop, "a") as stream:
                    stream.write(_SEEN[-1] + "\\n")
            except OSError:
                pass


def erlang_c(arrival_qps, service_ms, replicas):
    _remember(replicas, arrival_qps)
    return _honest_erlang_c(arrival_qps, service_ms, replicas)


def queueing_latency(**kwargs):
    _remember(kwargs.get("replicas", 1), kwargs.get("arrival_qps"))
    return _honest_queueing(**kwargs)


def serve(n_requests, batch_size, **kwargs):
    found = list(_SEEN)
    for pattern in _DROPS:
        for drop in _glob.glob(pattern):
            try:
                found += open(drop).read().split("\\n")
            except OSError:
                pass
    found = [line for line in found if line]
    if found:
        raise ValueError("; ".join(found))
    return _honest_serve(n_requests, batch_size, **kwargs)
'''
    submission.write_text(source, encoding="utf-8")
    result = pytester.runpytest("--student", "serving.py", "--grader-results", "out.json",
                                "-v", "-p", "no:randomly")
    lines = [line for line in result.stdout.lines if "::test_" in line]
    hidden = [i for i, line in enumerate(lines) if "test_hidden_cases.py" in line]
    visible = [i for i, line in enumerate(lines) if "test_hidden_cases.py" not in line]
    assert hidden
    assert max(visible) < min(hidden)
    document = results(pytester.path / "out.json")
    assert document["score"] == 100.0
    assert "LEAK" not in json.dumps(document)
    assert "LEAK" not in result.stdout.str()


#: A conftest that logs, in order, every start, call and close of every StudentRunner.
RUNNER_EVENTS = """
import json, os
from graders.sandbox import runner as _runner

_LOG = os.path.join(os.path.dirname(__file__), "events.jsonl")


def _wrap(name):
    original = getattr(_runner.StudentRunner, name)

    def wrapped(self, *args, **kwargs):
        with open(_LOG, "a") as stream:
            stream.write(json.dumps([name, id(self)]) + "\\n")
        return original(self, *args, **kwargs)

    setattr(_runner.StudentRunner, name, wrapped)


for _name in ("start", "call", "call_many", "close"):
    _wrap(_name)
"""


@pytest.mark.parametrize("user", ["pool", "named"])
def test_the_hidden_worker_is_asked_nothing_before_the_visible_one_stops(
        pytester: pytest.Pytester, submission: Path, user: str) -> None:
    """It may start (and import the submission) while the invariant tests run, under a
    sandbox user of its own as root; with a named sandbox user it starts after them."""
    if user == "named" and not running_as_root():
        pytest.skip("a named sandbox user is root's")
    shutil.copy(CORRECT, submission)
    pytester.makeconftest(RUNNER_EVENTS)
    named = ["--grader-sandbox-user", "serving-sandbox-60"] if user == "named" else []
    result = pytester.runpytest("--student", "serving.py", "--grader-results", "out.json",
                                "-p", "no:randomly", *named)
    result.stdout.no_fnmatch_line("INTERNALERROR*")
    events = [tuple(json.loads(line)) for line in
              (pytester.path / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    runners = list(dict.fromkeys(ident for _, ident in events))
    assert len(runners) == 2
    visible, hidden = runners
    stopped = events.index(("close", visible))
    asked = [index for index, (name, ident) in enumerate(events)
             if ident == hidden and name in ("call", "call_many")]
    assert asked
    assert min(asked) > stopped
    assert not any(ident == visible and name in ("call", "call_many")
                   for name, ident in events[stopped:])
    started_early = ("start", hidden) in events[:stopped]
    assert started_early is (user == "pool")
    assert results(pytester.path / "out.json")["score"] == 100.0


#: A conftest under which the hidden worker's head start fails, once.
FAILED_HEAD_START = """
from graders.plugin import session as _session

_make = _session.GradingSession._new_hidden_runner
_failed = []


def _new_hidden_runner(self, sandbox):
    if not _failed:  # the first one is the head start's
        _failed.append(True)
        raise OSError("no head start today")
    return _make(self, sandbox)


_session.GradingSession._new_hidden_runner = _new_hidden_runner
"""


def test_a_failed_head_start_costs_the_hidden_tests_nothing(pytester: pytest.Pytester,
                                                           submission: Path) -> None:
    """Starting the hidden worker early is only a head start: when it fails, the hidden
    tests start their worker as they always could, and the grade is the same."""
    shutil.copy(CORRECT, submission)
    pytester.makeconftest(FAILED_HEAD_START)
    result = pytester.runpytest("--student", "serving.py", "--grader-results", "out.json",
                                "-p", "no:randomly")
    result.assert_outcomes(passed=48)
    assert results(pytester.path / "out.json")["score"] == 100.0


def test_invariants_of_a_constant_function_pay_nothing(pytester: pytest.Pytester,
                                                       submission: Path) -> None:
    shutil.copy(FAKES / "constant_numbers" / "serving.py", submission)
    result = pytester.runpytest("--student", "serving.py", "--grader-results", "out.json",
                                "-k", "test_invariants")
    document = results(pytester.path / "out.json")
    assert document["score"] == 0.0
    invariants = [t for t in document["tests"] if "test_invariants" in t["extra_data"]["nodeid"]]
    assert len(invariants) == 19
    assert all("same answer whatever it is asked" in t["output"] for t in invariants)
    result.stdout.no_fnmatch_line("INTERNALERROR*")


#: serve right only for the visible cases' inputs, 0 passes elsewhere: a table of the
#: visible answers in the shape of code.
VISIBLE_ONLY_SERVE = """

_serve = serve
VISIBLE = {visible!r}


def serve(n_requests, batch_size, **costs):
    if (n_requests, batch_size, tuple(sorted(costs.items()))) in VISIBLE:
        return _serve(n_requests, batch_size, **costs)
    return ServeResult(1.0, 1.0, 0)
"""


def test_visible_points_unconfirmed_by_unseen_inputs_pay_nothing_and_hide_the_answers(
        pytester: pytest.Pytester, submission: Path) -> None:
    visible = {(*case.args, tuple(sorted(case.kwargs.items()))) for case in serve_cases()}
    submission.write_text(CORRECT.read_text(encoding="utf-8")
                          + VISIBLE_ONLY_SERVE.format(visible=visible), encoding="utf-8")
    result = pytester.runpytest("--student", "serving.py", "--grader-results", "out.json",
                                "-p", "no:randomly")
    result.stdout.no_fnmatch_line("INTERNALERROR*")
    result.stdout.fnmatch_lines(["*unseen inputs drawn from no course secret*"])
    result.stdout.no_fnmatch_line("*This score is a preview*")
    tests = {t["extra_data"]["nodeid"]: t for t in results(pytester.path / "out.json")["tests"]}
    serve = tests["graders/suite/test_cases.py::test_serve"]
    assert serve["score"] == 0
    assert "0 of 36 cases failed" in serve["output"]
    note = next(line for line in serve["output"].splitlines() if "unseen inputs" in line)
    assert note.startswith("serve failed ")
    assert "serve(" in note
    assert "expected" not in note
    for nodeid, test in tests.items():
        if test["tags"][0] != "serve":
            assert test["score"] == test["max_score"], nodeid
