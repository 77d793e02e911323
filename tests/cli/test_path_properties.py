"""Property: however its paths are typed, a correct submission gets exactly 100, and
results.json, the JUnit file and the exit code agree.

Hypothesis draws the path forms people use: relative or absolute, from the folder that
holds the submission, from inside it or from an unrelated one; names with spaces and
non-ASCII letters; the submission through a symbolic link to its folder; the submission
named as its folder or as its serving.py; output folders that do not exist yet. Each
example is one ``graders grade`` run as a user runs it (a separate process).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import CORPUS, graders, load
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

CORRECT = CORPUS / "correct" / "serving.py"
#: Names as people give folders and files: spaces, accents, other scripts.
NAMES = st.sampled_from(["sub", "my submission", "résumé", "задание 1", "課題", "a b é"])


@dataclass(frozen=True)
class PathForm:
    """One way of typing a grading's paths."""

    folder: str  # the submission's folder, below the base
    through_link: bool  # the submission named through a link to its folder
    as_file: bool  # serving.py named, not its folder
    working: str  # "base", "inside" (the submission's folder) or "elsewhere"
    absolute: bool
    results: tuple[str, ...]  # folders (missing ones made by the grader), then the file
    junit: tuple[str, ...]


path_forms = st.builds(
    PathForm,
    folder=NAMES,
    through_link=st.booleans(),
    as_file=st.booleans(),
    working=st.sampled_from(["base", "inside", "elsewhere"]),
    absolute=st.booleans(),
    results=st.lists(NAMES, max_size=2).map(lambda parts: (*parts, "results.json")),
    junit=st.lists(NAMES, max_size=2).map(lambda parts: (*parts, "jünit report.xml")),
)


def typed(path: Path, working: Path, absolute: bool) -> str:
    """``path`` as a user in ``working`` would type it."""
    return str(path) if absolute else os.path.relpath(path, working)


def check_path_form(form: PathForm) -> None:
    base = Path(tempfile.mkdtemp(prefix="path-form-"))
    try:
        real = base / "real" / form.folder
        real.mkdir(parents=True)
        shutil.copy(CORRECT, real / "serving.py")
        folder = real
        if form.through_link:
            (base / "link").symlink_to(base / "real")
            folder = base / "link" / form.folder
        submission = folder / "serving.py" if form.as_file else folder
        working = {"base": base, "inside": real, "elsewhere": base / "else where"}[form.working]
        working.mkdir(exist_ok=True)
        outputs = base / "out"
        outputs.mkdir(mode=0o700)
        results, junit = outputs.joinpath(*form.results), outputs.joinpath(*form.junit)
        run = graders("grade", typed(submission, working, form.absolute),
                      "--results", typed(results, working, form.absolute),
                      "--junit-xml", typed(junit, working, form.absolute), "-q", cwd=working)
        assert run.returncode == 0, (form, run.stdout[-2000:], run.stderr[-2000:])
        document = load(results)
        assert document["score"] == 100.0, form
        suite = ElementTree.parse(junit).getroot().find("testsuite")
        assert suite is not None
        assert int(suite.get("tests", "-1")) == len(document["tests"]), form
        assert (suite.get("failures"), suite.get("errors")) == ("0", "0"), form
        assert "TOTAL 100.00 / 100.00" in run.stdout, form
        assert (real / "serving.py").read_bytes() == CORRECT.read_bytes()
    finally:
        shutil.rmtree(base, ignore_errors=True)


@settings(max_examples=4, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(form=path_forms)
def test_a_correct_submission_gets_100_however_its_paths_are_typed(form: PathForm) -> None:
    check_path_form(form)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(form=path_forms)
def test_many_more_path_forms_give_100(form: PathForm) -> None:
    check_path_form(form)
