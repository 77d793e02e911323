"""``graders export``: the Gradescope autograder zip and the student bundle.

Both are built from a source checkout of the project. The Gradescope zip carries the
whole grader (reference and hidden tests included) with ``setup.sh`` and
``run_autograder`` at its root. The student bundle carries the template, the plugin,
the tracks and a golden file of expected values for the visible cases, and no
reference code and no hidden test.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import secrets
import shutil
import stat
import string
import tempfile
import tomllib
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from graders.errors import GraderError
from graders.expected.golden import (
    GOLDEN_NAME,
    PROBES_NAME,
    build_golden,
    build_probes,
    from_json_data,
)
from graders.export.invariant_answers import lab_cases
from graders.grading.cases import Case
from graders.grading.scoring import GraderMark, decimal_text, scaled_maxima
from graders.plugin.settings import DEFAULT_EXAMPLES, read_secret
from graders.reality.store import REALITY_NAME
from graders.sandbox.cleanup import remove_tree
from graders.suite import EXTENSIONS_MODULE, HIDDEN_PREFIX
from graders.versions import GRADING_PACKAGES, pinned_requirements

TEMPLATES = Path(__file__).with_name("templates")
#: Instructor-only parts of the ``graders`` package (sub-packages, or modules by their
#: path in it), left out of the student bundle.
INSTRUCTOR_ONLY = ("export", "regrade", "trackfiles/generate.py", "trackfiles/sanity.py",
                   "cli/tracks.py", "cli/reality.py")
EXECUTABLE = 0o755
#: The course secret's name in the Gradescope zip (run_autograder passes it to the grader).
SECRET_NAME = "course_secret"
#: Files of the ``graders`` package a student bundle takes besides its ``*.py`` modules.
BUNDLED_NAMES = ("py.typed", "constraints.txt", "mistakes.toml")


class ExportError(GraderError):
    """An export cannot be built from this checkout."""


@dataclass(frozen=True)
class SuiteTest:
    """A graded test of the suite, read from its ``grader`` marker."""

    module: str
    name: str
    mark: GraderMark


def project_root() -> Path:
    """The source checkout that holds this ``graders`` package."""
    root = Path(__file__).resolve().parents[2]
    needed = ("pyproject.toml", "reference", "tracks", "student_template/serving.py",
              "student_template/lab.py")
    missing = [name for name in needed if not (root / name).exists()]
    if missing:
        raise ExportError(f"export needs the grader's source checkout; {root} lacks "
                          f"{', '.join(missing)} (run it from a clone of the repository)")
    return root


def suite_tests() -> list[SuiteTest]:
    """Every graded test function of the grading suite, with its marker."""
    suite = Path(__file__).parents[1] / "suite"
    found = []
    for path in sorted(suite.glob("test_*.py")):
        module = importlib.import_module(f"graders.suite.{path.stem}")
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if not name.startswith("test_") or function.__module__ != module.__name__:
                continue
            for mark in getattr(function, "pytestmark", []):
                if mark.name == "grader":
                    nodeid = f"graders/suite/{path.name}::{name}"
                    found.append(SuiteTest(path.stem, name,
                                           GraderMark.from_marker(mark.args, mark.kwargs, nodeid)))
    return found


def visible_share(tests: list[SuiteTest], max_score: Fraction,
                  exact_p99_points: float = 0.0) -> Fraction:
    """The points of the visible tests out of ``max_score``, with the graded extension
    weighted ``exact_p99_points`` (0: off) as the official grading weighs it; the bundle
    cannot grade the extension, so its share is left out. Checks hidden tests' homes."""
    misplaced = [f"{t.module}.{t.name}" for t in tests
                 if t.mark.visibility != "visible" and not t.module.startswith(HIDDEN_PREFIX)]
    if misplaced:
        raise ExportError(f"{', '.join(misplaced)} is not visible but lives outside a "
                          f"{HIDDEN_PREFIX}*.py module; move it (and its cases) there so the "
                          "student bundle can leave it out")
    extension = f"test_{EXTENSIONS_MODULE.removeprefix('test_').removesuffix('.py')}"

    def weight(test: SuiteTest) -> Fraction:
        return Fraction(str(exact_p99_points if test.module == extension else test.mark.points))

    whole = sum((weight(t) for t in tests), Fraction(0))
    added = sum((weight(t) for t in tests if t.module == extension), Fraction(0))
    visible = sum((weight(t) for t in tests
                   if t.mark.visibility == "visible" and t.module != extension), Fraction(0))
    # shared as the grading shares it (graders.plugin.hooks): the visible tests of the
    # official grading (the extension among them) are worth exactly what the bundle grades
    # its own visible tests out of, plus the extension's share, which it cannot grade
    return scaled_maxima({"visible": visible, "extension": added,
                          "other": whole - visible - added}, max_score,
                         groups={"visible": "visible", "extension": "visible",
                                 "other": "other"})["visible"]


# --- the Gradescope zip ------------------------------------------------------------------


def gradescope_members(root: Path, tracks: Path | None = None
                       ) -> Iterator[tuple[str, Path]]:
    """(name in the zip, file) for every file of the autograder, with the track files of
    ``tracks`` (default: the checkout's)."""
    yield "setup.sh", TEMPLATES / "setup.sh"
    yield "run_autograder", TEMPLATES / "run_autograder"
    for name in ("pyproject.toml", "README.md"):
        yield name, root / name
    for folder in ("reference", "graders"):
        for path in _source_files(root / folder):
            yield path.relative_to(root).as_posix(), path
    for path in sorted((tracks or root / "tracks").glob("*.toml")):
        yield f"tracks/{path.name}", path
    yield "student_template/serving.py", root / "student_template" / "serving.py"
    yield "student_template/lab.py", root / "student_template" / "lab.py"


def course_secret(target: Path, given: Path | None) -> tuple[Path, bytes, bool]:
    """The course secret of the zip ``target``: ``given``'s, else ``OUT.zip.secret``'s,
    made (a random 256-bit hex string, mode 600) when that file does not exist yet.
    Returns the file, the secret, and whether it was made now."""
    path = given if given is not None else target.with_name(f"{target.name}.secret")
    if given is None and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="ascii") as handle:
            handle.write(secrets.token_hex(32) + "\n")
        return path, read_secret(path), True
    return path, read_secret(path), False


def export_gradescope(target: Path, *, max_score: Fraction = Fraction(100),
                      exact_p99_points: float = 0.0, secret_file: Path | None = None,
                      tracks: Path | None = None) -> tuple[list[str], Path, bool]:
    """Write the Gradescope autograder zip to ``target``, grading out of ``max_score``
    (and the extension exact_p99_ms for ``exact_p99_points``, 0: off) on the tracks of
    ``tracks`` (default: the checkout's) with the course secret of :func:`course_secret`;
    return its member names, the secret's file and whether the secret was made now."""
    max_score = Fraction(max_score)
    root = project_root()
    tracks = _tracks_folder(root, tracks)
    suite_tests()  # a suite that does not import must not ship
    if target.suffix != ".zip":
        raise ExportError(f"{target}: the Gradescope autograder must be a .zip file")
    target.parent.mkdir(parents=True, exist_ok=True)
    secret_path, secret, made = course_secret(target, secret_file)
    names = []
    with tempfile.NamedTemporaryFile(dir=target.parent, suffix=".zip.tmp",
                                     delete=False) as handle:
        temporary = Path(handle.name)
    try:
        with zipfile.ZipFile(temporary, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for name, path in gradescope_members(root, tracks):
                info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
                mode = EXECUTABLE if name in ("setup.sh", "run_autograder") else 0o644
                info.external_attr = (stat.S_IFREG | mode) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                data = path.read_bytes()
                if name == "run_autograder":
                    data = run_autograder_with(data, {
                        "max_score": decimal_text(max_score),
                        "exact_p99_points": f"{exact_p99_points:g}"})
                archive.writestr(info, data)
                names.append(name)
            info = zipfile.ZipInfo(f"graders/{REALITY_NAME}", date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, _reality_text(tracks))
            names.append(info.filename)
            info = zipfile.ZipInfo(SECRET_NAME, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (stat.S_IFREG | 0o600) << 16
            archive.writestr(info, secret + b"\n")
            names.append(SECRET_NAME)
        temporary.replace(target)
    finally:
        temporary.unlink(missing_ok=True)
    return names, secret_path, made


# --- the student bundle ------------------------------------------------------------------


def student_members(root: Path, tracks: Path | None = None) -> Iterator[tuple[str, Path]]:
    """(path in the bundle, source file) for every copied file of the student bundle, with
    the track files of ``tracks`` (default: the checkout's)."""
    yield "serving.py", root / "student_template" / "serving.py"
    yield "lab.py", root / "student_template" / "lab.py"
    package = root / "graders"
    for path in _source_files(package):
        relative = path.relative_to(package)
        if relative.parts[0] in INSTRUCTOR_ONLY or relative.as_posix() in INSTRUCTOR_ONLY \
                or path.name not in BUNDLED_NAMES and path.suffix != ".py":
            continue
        if relative.parts[0] == "suite" and relative.name.startswith(HIDDEN_PREFIX):
            continue
        yield f"graders/{relative.as_posix()}", path
    for path in sorted((tracks or root / "tracks").glob("*.toml")):
        yield f"tracks/{path.name}", path


def export_student(target: Path, *, max_score: Fraction = Fraction(100),
                   exact_p99_points: float = 0.0, tracks: Path | None = None) -> list[str]:
    """Write the student bundle into the new or empty folder ``target``, for an assignment
    graded out of ``max_score`` with the extension weighted ``exact_p99_points`` on the
    tracks of ``tracks`` (default: the checkout's); return its files."""
    from graders.expected.oracle import ReferenceOracle
    from graders.feedback.curves import curve_cases
    from graders.grading.cases import visible_cases
    from graders.trackfiles.tracks import load_tracks

    root = project_root()
    tracks = _tracks_folder(root, tracks)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ExportError(f"{target} exists and is not an empty folder; choose a new folder")
    share = visible_share(suite_tests(), Fraction(max_score), exact_p99_points)
    tracks_found = load_tracks(tracks)
    cases = [*visible_cases(tracks_found), *(c for t in tracks_found for c in curve_cases(t))]
    golden = build_golden(tracks_found, cases, ReferenceOracle().expected,
                          visible_max_score=float(share))
    bound = tuple(track.with_profile(from_json_data(golden["tracks"][track.track_id]["profile"]))
                  for track in tracks_found)  # as the bundle binds them: its calls' inputs
    probes = build_probes(golden, visible_cases(tracks_found), ReferenceOracle().expected,
                          hidden_cases(), lab_cases(bound, DEFAULT_EXAMPLES))
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".student-", dir=target.parent))
    staging.chmod(0o755)
    try:
        written = []
        for name, path in student_members(root, tracks):
            destination = staging / name
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, destination)
            written.append(name)
        generated = {
            f"graders/{GOLDEN_NAME}": json.dumps(golden, indent=1, allow_nan=False) + "\n",
            f"graders/{REALITY_NAME}": _reality_text(tracks),
            "pyproject.toml": _student_pyproject(root),
            "README.md": _fill("student_README.md", visible_max=decimal_text(share),
                               max_score=decimal_text(Fraction(max_score)),
                               track_count=str(len(tracks_found)),
                               track_labels=", ".join(t.label for t in tracks_found)),
            ".github/workflows/classroom.yml": (TEMPLATES / "classroom.yml").read_text(),
            ".gitignore": (TEMPLATES / "gitignore").read_text(),
        }
        for name, text in generated.items():
            destination = staging / name
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_text(text, encoding="utf-8")
            written.append(name)
        (staging / "graders" / PROBES_NAME).write_bytes(probes)
        written.append(f"graders/{PROBES_NAME}")
        if target.exists():
            target.rmdir()
        staging.replace(target)
    finally:
        remove_tree(staging)
    return sorted(written)


def hidden_cases() -> list[Case]:
    """The cases of the hidden tests (their module's ``*_cases`` functions)."""
    from graders.suite import test_hidden_cases

    return [case for name, make in vars(test_hidden_cases).items()
            if name.endswith("_cases") and callable(make) for case in make()]


def _reality_text(tracks: Path) -> str:
    """The reality curves of the tracks in ``tracks``, precomputed for the page (never run
    while grading)."""
    from graders.reality.store import exported_text
    from graders.trackfiles.tracks import load_tracks

    return exported_text(load_tracks(tracks))


def _tracks_folder(root: Path, tracks: Path | None) -> Path:
    """The folder of track files an export ships: ``tracks`` (checked: every file must
    load), else the checkout's."""
    from graders.trackfiles.tracks import load_tracks

    folder = root / "tracks" if tracks is None else tracks
    load_tracks(folder)  # a bad track file stops the export with its problems
    return folder


def _student_pyproject(root: Path) -> str:
    """The bundle's pyproject: the grading dependencies pinned exactly as
    ``graders/constraints.txt`` pins them, so students grade with the official versions
    (the HTML page needs nothing more)."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8-sig"))["project"]
    dependencies = pinned_requirements(GRADING_PACKAGES)
    if not dependencies:
        raise ExportError("graders/constraints.txt pins none of the installed grading "
                          "dependencies; refresh it (python tools/refresh_constraints.py)")
    return _fill("student_pyproject.toml", version=project["version"],
                 dependencies=_toml_list(dependencies),
                 notebook=_toml_list(project["optional-dependencies"]["notebook"]))


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(item) for item in items) + "]"


def run_autograder_with(script: bytes, values: Mapping[str, str]) -> bytes:
    """run_autograder with each grade-changing option set (its ``NAME="..."`` line, which
    it passes to the grader as the option's flag); every option of
    :data:`~graders.plugin.settings.GRADE_CHANGING` must be given, and be in the script."""
    from graders.plugin.settings import GRADE_CHANGING, grade_flag, option_named

    if set(values) != set(GRADE_CHANGING):
        raise ExportError(f"the zip's grade-changing options are {', '.join(GRADE_CHANGING)}, "
                          f"got {', '.join(values)}")
    for name, value in values.items():
        variable, flag = name.upper(), grade_flag(option_named(name))
        setting = re.compile(rf'^{variable}="[^"\n]*"', re.MULTILINE)
        if len(setting.findall(script.decode())) != 1 \
                or f'{flag} "${variable}"'.encode() not in script:
            raise ExportError(f"run_autograder must set {variable}=\"...\" exactly once and "
                              f"pass it as {flag} \"${variable}\"")
        script = setting.sub(f'{variable}="{value}"', script.decode(), count=1).encode()
    return script


def _fill(template: str, **values: str) -> str:
    return string.Template((TEMPLATES / template).read_text(encoding="utf-8")).substitute(values)


def _source_files(folder: Path) -> Iterator[Path]:
    for path in sorted(folder.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            yield path
