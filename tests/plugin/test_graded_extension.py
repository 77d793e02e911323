"""The graded extension exact_p99_ms: off by default (no test, every score unchanged), and
graded with the points a course gives it when switched on."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import CORPUS, graders, load

#: exact_p99_ms written the way a student might: the M/M/c sojourn-time mixture's survival
#: function, solved for 0.99 by bisection (no reference: the worker cannot read it).
EXACT_P99 = '''

def exact_p99_ms(*, arrival_qps, service_ms, replicas=1):
    import math
    mu = 1.0 / service_ms
    lam = arrival_qps / 1000.0
    a = lam / mu
    if a >= replicas:
        return math.inf
    b = 1.0
    for k in range(1, replicas + 1):
        b = a * b / (k + a * b)
    c = replicas * b / (replicas - a * (1.0 - b))
    r = replicas * mu - lam

    def survival(t):
        if abs(r - mu) * t < 1e-9:
            waited = (1.0 + mu * t) * math.exp(-mu * t)
        else:
            waited = (r * math.exp(-mu * t) - mu * math.exp(-r * t)) / (r - mu)
        return (1.0 - c) * math.exp(-mu * t) + c * waited

    low, high = 0.0, 1.0
    while survival(high) > 0.01:
        high *= 2.0
    for _ in range(200):
        middle = (low + high) / 2.0
        if survival(middle) > 0.01:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0
'''


def _grade(submission: Path, results: Path, *extra: str) -> dict[str, Any]:
    run = graders("grade", submission, "--results", results, "-q", *extra)
    assert run.returncode == 0, run.stderr[-2000:]
    document: dict[str, Any] = load(results)
    return document


def _extension_tests(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in document["tests"] if t["tags"][0] == "exact_p99_ms"]


@pytest.fixture(scope="module")
def with_extension(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("extension")
    source = (CORPUS / "correct" / "serving.py").read_text(encoding="utf-8")
    (folder / "serving.py").write_text(source + EXACT_P99, encoding="utf-8")
    return folder / "serving.py"


def test_off_by_default_the_extension_is_not_graded_or_listed(
        with_extension: Path, tmp_path: Path) -> None:
    plain = _grade(CORPUS / "correct" / "serving.py", tmp_path / "plain.json")
    extended = _grade(with_extension, tmp_path / "extended.json")
    assert _extension_tests(plain) == _extension_tests(extended) == []
    assert [(t["name"], t["max_score"]) for t in plain["tests"]] == \
        [(t["name"], t["max_score"]) for t in extended["tests"]]
    assert plain["score"] == extended["score"] == 100.0


def test_switched_on_it_is_worth_the_points_the_course_gives_it(
        with_extension: Path, tmp_path: Path) -> None:
    right = _grade(with_extension, tmp_path / "right.json", "--exact-p99-points", "10")
    missing = _grade(CORPUS / "correct" / "serving.py", tmp_path / "missing.json",
                     "--exact-p99-points", "10")
    tests = _extension_tests(right)
    assert {t["tags"][1] for t in tests} == {"cloud_fleet", "iphone", "oura_ring", "robotaxi"}
    assert all(t["status"] == "passed" for t in tests)
    assert right["score"] == 100.0
    worth = sum(t["max_score"] for t in tests)
    assert worth == pytest.approx(sum(t["max_score"] for t in _extension_tests(missing)))
    assert 0 < worth < 100
    assert missing["score"] == pytest.approx(100.0 - worth, abs=1e-5)
    assert all(t["status"] == "failed" for t in _extension_tests(missing))


# --- the plugin's setting, with pytester ---------------------------------------------------


@pytest.fixture
def submission(pytester: pytest.Pytester) -> Path:
    path = pytester.path / "serving.py"
    shutil.copy(CORPUS / "correct" / "serving.py", path)
    return path


@pytest.mark.usefixtures("submission")
def test_the_ini_key_switches_the_extension_on(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ngrader_exact_p99_points = 5\n")
    result = pytester.runpytest("--student", "serving.py", "--grader-results", "r.json",
                                "-k", "test_exact_p99_ms")
    result.assert_outcomes(failed=4)  # one per track; this submission has no exact_p99_ms
    result.stdout.no_fnmatch_line("INTERNALERROR*")
    document = load(pytester.path / "r.json")
    assert {t["tags"][1] for t in _extension_tests(document)} == {
        "cloud_fleet", "iphone", "oura_ring", "robotaxi"}


@pytest.mark.usefixtures("submission")
def test_without_the_setting_no_extension_test_is_collected(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--student", "serving.py", "-k", "test_exact_p99_ms")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.no_fnmatch_line("INTERNALERROR*")


@pytest.mark.usefixtures("submission")
@pytest.mark.parametrize(("flag", "ini"), [(True, False), (False, True)])
def test_negative_points_are_a_usage_error(pytester: pytest.Pytester, flag: bool,
                                           ini: bool) -> None:
    if ini:
        pytester.makeini("[pytest]\ngrader_exact_p99_points = -1\n")
    extra = ["--grader-exact-p99-points=-1"] if flag else []
    result = pytester.runpytest("--student", "serving.py", *extra)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*must be a finite number >= 0*"])
    result.stdout.no_fnmatch_line("INTERNALERROR*")
