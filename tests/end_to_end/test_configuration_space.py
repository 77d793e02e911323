"""The grader's own properties over the configurations a course can choose.

For every configuration Hypothesis draws (the number of tracks, the total of points, the
outputs asked for, relative or absolute paths and the working folder, ``TMPDIR`` and its
mode, the umask, and who runs the grader: root, root without ``CAP_SYS_ADMIN`` as in
Docker's default, and, in the slow set, an ordinary user running the system's Python on
a world-readable install), a correct submission gets exactly the maximum, and the exit
code, the terminal's total, results.json, the JUnit file, the Classroom file and the HTML
page all say so. A few examples run by default; the slow set draws many more.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    AS_ROOT,
    CORPUS,
    INSTRUCTOR,
    REPO,
    SYSTEM_PYTHON,
    load,
    ordinary_regrade_unsupported,
    ordinary_user,
    world_readable_install,
)
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from graders.results.reports import gradescope_problems, points_text

BOOK_TRACKS = sorted((REPO / "tracks").glob("*.toml"))
#: Who runs the grader: root keeps every confinement; without CAP_SYS_ADMIN (Docker's
#: default) the namespaces cannot be had and the privilege drop alone must hold.
RUNNERS = ("root", "root without CAP_SYS_ADMIN") if AS_ROOT else ("this user",)
#: An instructor without root: the slow set draws it too, where the machine allows it.
ORDINARY = "ordinary user"


@dataclass(frozen=True)
class Configuration:
    """One way a course runs ``graders grade``."""

    tracks: int
    max_score: str
    relative: bool
    html: bool
    tmpdir_mode: int | None
    umask: int
    runner: str


def points() -> st.SearchStrategy[str]:
    """Totals a course may type: round ones, and any with up to 6 decimals."""
    typed = st.sampled_from(["100", "37", "95.5", "33.333333", "10.6299", "8.3333", "1"])
    drawn = st.integers(min_value=1, max_value=10**9).map(
        lambda units: format(Decimal(units).scaleb(-6).normalize(), "f"))
    return st.one_of(typed, drawn)


def configurations(runners: tuple[str, ...] = RUNNERS) -> st.SearchStrategy[Configuration]:
    return st.builds(
        Configuration,
        tracks=st.integers(min_value=1, max_value=20),
        max_score=points(),
        relative=st.booleans(),
        html=st.booleans(),
        tmpdir_mode=st.sampled_from([None, 0o700, 0o755, 0o1777]),
        umask=st.sampled_from([0o022, 0o077, 0o002, 0o000]),
        runner=st.sampled_from(runners),
    )


def track_folder(folder: Path, count: int) -> Path:
    """``count`` tracks: the book's, then renamed copies of them (an instructor's own)."""
    folder.mkdir()
    for index in range(count):
        source = BOOK_TRACKS[index % len(BOOK_TRACKS)]
        if index < len(BOOK_TRACKS):
            shutil.copyfile(source, folder / source.name)
            continue
        name = f"{source.stem}_copy{index}"
        text = re.sub(r'(?m)^id = "[^"]+"', f'id = "{name}"', source.read_text("utf-8"),
                      count=1)
        (folder / f"{name}.toml").write_text(text, encoding="utf-8")
    return folder


def command(configuration: Configuration, workspace: Path) -> list[str]:
    """The ``graders grade`` command line of ``configuration``, run from ``workspace``."""
    def where(name: str) -> str:
        return name if configuration.relative else str(workspace / name)

    python = str(SYSTEM_PYTHON) if configuration.runner == ORDINARY else sys.executable
    arguments = [python, "-m", "graders", "grade", where("submission"),
                 "--tracks", where("tracks"), "--max-score", configuration.max_score,
                 "--results", where("out/results.json"),
                 "--junit-xml", where("out/junit.xml"),
                 "--classroom", where("out/classroom.json")]
    if configuration.html:
        arguments += ["--html", where("out/feedback.html")]
    shell = ["sh", "-c", f"umask {configuration.umask:03o}; exec \"$@\"", "sh"]
    if configuration.runner == "root without CAP_SYS_ADMIN":
        shell = ["setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin", *shell]
    return [*shell, *arguments]


def environment(configuration: Configuration, workspace: Path,
                install: str | None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PYTEST_", "COV_"))}
    if configuration.runner == ORDINARY:
        assert install is not None
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONPATH": install,
               "HOME": ordinary_user(INSTRUCTOR).pw_dir}
    env.pop("TMPDIR", None)
    if configuration.tmpdir_mode is not None:
        temporary = workspace / "private tmp"
        temporary.mkdir()
        temporary.chmod(configuration.tmpdir_mode)
        env["TMPDIR"] = str(temporary)
    return env


def grade(configuration: Configuration, workspace: Path, install: str | None = None
          ) -> subprocess.CompletedProcess[str]:
    shutil.copytree(CORPUS / "correct", workspace / "submission")
    track_folder(workspace / "tracks", configuration.tracks)
    env = environment(configuration, workspace, install)
    user: dict[str, Any] = {}
    if configuration.runner == ORDINARY:  # the user owns everything of its grading
        entry = ordinary_user(INSTRUCTOR)
        for path in [workspace, *workspace.rglob("*")]:
            os.chown(path, entry.pw_uid, entry.pw_gid)
        user = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
    return subprocess.run(command(configuration, workspace), capture_output=True, text=True,
                          cwd=workspace, env=env, timeout=600, check=False, **user)


def assert_every_output_says_the_maximum(configuration: Configuration, workspace: Path,
                                         completed: subprocess.CompletedProcess[str]) -> None:
    maximum = Fraction(configuration.max_score)
    context = f"{configuration}\n{completed.stdout[-3000:]}\n{completed.stderr[-3000:]}"
    assert completed.returncode == 0, context
    out = workspace / "out"
    results = load(out / "results.json")
    assert gradescope_problems(results) == [], context
    assert Fraction(str(results["score"])) == maximum, context
    assert Fraction(str(results["extra_data"]["max_score"])) == maximum, context
    assert sum(Fraction(str(t["max_score"])) for t in results["tests"]) == maximum, context
    assert sum(Fraction(str(t["score"])) for t in results["tests"]) == maximum, context
    assert {t["status"] for t in results["tests"]} == {"passed"}, context
    assert len({t["tags"][1] for t in results["tests"] if len(t["tags"]) > 1}) \
        == configuration.tracks, context
    total = re.search(r"^TOTAL (\S+) / (\S+)$", completed.stdout, re.MULTILINE)
    assert total is not None, context
    assert total.group(1) == total.group(2), context  # the earned total reads as the maximum
    # as the terminal shows points: two places, more where two would misread the maximum
    assert (total.group(1), total.group(2)) == points_text(maximum, maximum), context
    shown = Decimal(total.group(2))
    places = -int(shown.as_tuple().exponent)
    assert places >= 2, context
    assert shown > 0, context
    assert abs(shown - Decimal(configuration.max_score)) <= Decimal(5) / 10 ** (places + 1), \
        context
    junit = ElementTree.parse(out / "junit.xml").getroot()
    suite = junit if junit.tag == "testsuite" else junit.find("testsuite")
    assert suite is not None
    assert (suite.get("failures"), suite.get("errors")) == ("0", "0"), context
    assert int(suite.get("tests", "0")) == len(results["tests"]), context
    classroom = load(out / "classroom.json")
    assert classroom["status"] == "pass", context
    assert Fraction(str(classroom["max_score"])) == maximum, context
    assert sum(Fraction(str(t["score"])) for t in classroom["tests"]) == maximum, context
    if configuration.html:
        page = (out / "feedback.html").read_text(encoding="utf-8")
        shown = re.search(r'id="score" data-score="([^"]+)"', page)
        assert shown is not None, context
        # the student's page counts the visible tests alone (hidden results not released)
        visible = sum((Fraction(str(t["max_score"])) for t in results["tests"]
                       if t["visibility"] == "visible"), Fraction(0))
        assert Fraction(shown.group(1)) == visible, context
        hidden = maximum - visible
        if hidden:
            assert f"worth {points_text(hidden, hidden)[1]} points" in page, context


def check(configuration: Configuration, base: Path, install: str | None = None) -> None:
    if configuration.runner == ORDINARY:  # pytest's tmp_path is root's alone
        base = Path(ordinary_user(INSTRUCTOR).pw_dir)
    workspace = Path(tempfile.mkdtemp(prefix="config é ", dir=base))
    workspace.chmod(0o755)
    try:
        assert_every_output_says_the_maximum(configuration, workspace,
                                             grade(configuration, workspace, install))
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


@pytest.fixture(scope="module")
def install() -> Iterator[str | None]:
    """A world-readable install of the grader for the ordinary user (None where the
    machine cannot run one: not root, or no confinement for that user)."""
    if ordinary_regrade_unsupported() is not None:
        yield None
        return
    folder = Path(tempfile.mkdtemp(prefix="config-install-", dir="/tmp"))
    try:
        yield world_readable_install(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


#: Each example is a whole grading (seconds): no shrinking, which would run dozens more;
#: the failing configuration is printed whole instead.
SETTINGS: dict[str, Any] = {"deadline": None, "derandomize": True, "database": None,
                            "phases": (Phase.explicit, Phase.generate),
                            "suppress_health_check": [HealthCheck.function_scoped_fixture]}


@settings(max_examples=3, **SETTINGS)
@given(configuration=configurations())
def test_a_correct_submission_gets_exactly_the_maximum_in_every_configuration(
        configuration: Configuration, tmp_path: Path) -> None:
    check(configuration, tmp_path)


@pytest.mark.slow
@settings(max_examples=40, **SETTINGS)
@given(data=st.data())
def test_a_correct_submission_gets_exactly_the_maximum_in_many_configurations(
        data: st.DataObject, tmp_path: Path, install: str | None) -> None:
    runners = RUNNERS if install is None else (*RUNNERS, ORDINARY)
    check(data.draw(configurations(runners), label="configuration"), tmp_path, install)


@pytest.mark.slow
@pytest.mark.parametrize("configuration", [
    Configuration(6, "33.333333", True, True, 0o700, 0o077, ORDINARY),
    Configuration(11, "95.5", False, False, None, 0o022, ORDINARY)],
    ids=["private TMPDIR, relative paths", "eleven tracks, absolute paths"])
def test_an_ordinary_user_gets_exactly_the_maximum_too(
        configuration: Configuration, tmp_path: Path, install: str | None) -> None:
    reason = ordinary_regrade_unsupported()
    if reason is not None:
        pytest.skip(reason)
    check(configuration, tmp_path, install)


@pytest.mark.parametrize("configuration", [
    Configuration(6, "100", True, False, None, 0o022, RUNNERS[0]),
    Configuration(9, "37", False, False, None, 0o022, RUNNERS[0]),
    Configuration(7, "33.333333", True, True, 0o700, 0o077, RUNNERS[-1]),
    Configuration(20, "10.6299", False, False, 0o700, 0o022, RUNNERS[-1]),
], ids=["six tracks", "nine tracks at 37", "private TMPDIR, 6 decimals",
        "twenty tracks, 4 decimals"])
def test_the_configurations_that_once_gave_a_correct_submission_zero(
        configuration: Configuration, tmp_path: Path) -> None:
    check(configuration, tmp_path)
