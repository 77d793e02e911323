"""pytest's environment never reaches the official grade, and ``-O`` is refused.

``graders grade`` reads none of pytest's variables (``PYTEST_ADDOPTS``, ``PYTEST_PLUGINS``,
...): a selection, a ``-x`` or a plugin set there would grade part of the suite as if it
were all of it. An interpreter that strips ``assert`` statements (``-O``,
``PYTHONOPTIMIZE``) would strip the invariants' checks, so the grading refuses it in one
line; a regrade's gradings run without it. Hypothesis draws the environment from a table
of what a shell, a CI runner or a course's image may set.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import CORPUS, graders, load
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

#: A submission that fails a few tests early in the suite (a selection or a -x changes
#: its score), and that has an invariant among them (a stripped assert changes it too).
BUGGY = CORPUS / "passes_floor"

#: What an environment may set, each with values that would change a grading that read it.
ENVIRONMENT = {
    "PYTEST_ADDOPTS": ["-x", "--maxfail=1", "-k serve", "-k 'not invariants'", "--lf",
                       "--sw", "-p no:graders.plugin", "--grader-max-score 10",
                       "--grader-rel-tol 1", "-o grader_max_score=7", "-q -q -q"],
    "PYTEST_PLUGINS": ["json", "graders.plugin"],
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": ["1", "0"],
    "PYTHONWARNINGS": ["error", "ignore"],
    "PYTHONHASHSEED": ["0", "12345"],
    "LC_ALL": ["C", "C.UTF-8"],
}


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> float:
    """The submission's score in a clean environment."""
    out = tmp_path_factory.mktemp("baseline")
    done = graders("grade", BUGGY, "--results", out / "results.json", "-q")
    assert done.returncode == 0, done.stderr
    score = float(load(out / "results.json")["score"])
    assert 0 < score < 100
    return score


@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(environment=st.dictionaries(st.sampled_from(sorted(ENVIRONMENT)), st.just(""),
                                   min_size=1)
       .flatmap(lambda names: st.fixed_dictionaries(
           {name: st.sampled_from(ENVIRONMENT[name]) for name in names})))
def test_no_environment_variable_changes_the_official_grade(
        environment: dict[str, str], baseline: float, tmp_path_factory: pytest.TempPathFactory
        ) -> None:
    out = tmp_path_factory.mktemp("graded")
    done = graders("grade", BUGGY, "--results", out / "results.json", "-q", env=environment)
    assert done.returncode == 0, (environment, done.stdout[-2000:], done.stderr[-2000:])
    document = load(out / "results.json")
    assert document["score"] == baseline, environment
    assert "partial_run" not in document.get("extra_data", {}), environment
    assert len(document["tests"]) == 48, environment


@pytest.mark.parametrize("how", [{"PYTHONOPTIMIZE": "1"}, {"PYTHONOPTIMIZE": "2"}])
def test_an_optimized_interpreter_is_refused_in_one_line(how: dict[str, str],
                                                          tmp_path: Path) -> None:
    done = graders("grade", BUGGY, "--results", tmp_path / "results.json", env=how)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("graders: error: Python runs with -O")
    assert not (tmp_path / "results.json").exists()
