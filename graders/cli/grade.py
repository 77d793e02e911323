"""``graders grade SUBMISSION``: grade one submission with a trusted, isolated pytest run.

The run starts from the grader's own configuration in a private folder: no
plugin autoloading, no conftest, ini file or test of the submission's, and
nothing but ``serving.py`` taken from the submission.

Every output path is checked before grading (:func:`graders.results.files.check_output_file`:
a private folder, no link, FIFO or other non-regular file at the path), and an earlier
run's outputs are removed. The grader writes each output through a temp file it creates
and a rename; JUnit XML and the json report, which pytest and pytest-json-report write
themselves, are written into the run's private scratch folder and installed the same way.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graders.errors import (
    BELOW_FAIL_UNDER_EXIT,
    GRADER_FAILED_EXIT,
    GRADER_FAILURE_ADVICE,
    GraderError,
    SettingsError,
    SubmissionError,
    TrackError,
    disk_full,
)
from graders.escaping import escape_controls
from graders.plugin.settings import OPTIONS, flag_value, grade_flag, non_negative_float
from graders.plugin.submission import locate_submission, read_submission
from graders.results.classroom import (
    classroom_results,
    github_output_line,
    preview_notice,
    preview_summary,
)
from graders.results.files import (
    OutputPathError,
    check_output_file,
    install_file,
    remove_output,
    write_text_atomically,
)
from graders.results.overlaps import existing, grader_folders, refuse_overlaps
from graders.results.reports import (
    grader_failure,
    grader_failure_results,
    interrupted_results,
    read_grader_failure,
    read_valid_results,
    unusable_submission_results,
    write_results,
)
from graders.sandbox.confinement import start_probe
from graders.sandbox.interrupts import Interruption, interruptible

#: pytest exit codes after which grading completed, whatever the score.
COMPLETED = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
GRADER_FAILED = GRADER_FAILED_EXIT
USAGE_ERROR = 2
BELOW_FAIL_UNDER = BELOW_FAIL_UNDER_EXIT
#: 128 + the signal's number, the shell's convention.
INTERRUPTED_SIGINT = 130
INTERRUPTED_SIGTERM = 143
#: The exit-code policy of ``graders grade``, for CI pipelines and docs/course-staff.md.
EXIT_CODES = {
    0: "grading completed (whatever the score, unless --fail-under says otherwise)",
    USAGE_ERROR: "usage or configuration error, or no usable serving.py in the submission "
                 "(one line on stderr; for a submission that exists, --results still gets "
                 "0 points and the reason)",
    BELOW_FAIL_UNDER: "grading completed and the score is below --fail-under",
    GRADER_FAILED: "the grader itself failed: no score; --results holds a grader-failure "
                   "record (no score, the reason) and stderr one line saying what failed",
    INTERRUPTED_SIGINT: "the grading was interrupted by SIGINT (Ctrl-C): its workers were "
                        "stopped and its folders removed; no score: --results holds a "
                        "grader-failure record whose extra_data.interrupted names the signal",
    INTERRUPTED_SIGTERM: "the same, for SIGTERM",
}


#: Metavars of the options whose values are paths (made absolute for the pytest run).
PATH_METAVARS = ("PATH", "DIR")
#: Every output of a grading: its argument and its flag.
OUTPUTS = (("results", "--results"), ("classroom", "--classroom"), ("html", "--html"),
           ("junit_xml", "--junit-xml"), ("json_report", "--json-report"))
#: Outputs written by pytest or a plugin, not by the grader: into the scratch folder under
#: these names, then installed at the user's path.
INSTALLED = {"junit_xml": "junit.xml", "json_report": "report.json"}


def checked_outputs(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with every output path checked and absolute (folders created); raises
    :class:`OutputPathError` for a path the grader must not write (see
    :func:`graders.results.files.check_output_file`), an output that names an input
    or another output (see :func:`graders.results.overlaps.refuse_overlaps`)."""
    updated = argparse.Namespace(**vars(args))
    files, folders = grading_inputs(args)
    for name, flag in OUTPUTS:
        value = getattr(args, name, None)
        if value:
            setattr(updated, name, str(check_output_file(value, flag)))
    refuse_overlaps(_outputs(updated), files, folders)
    return updated


def grading_inputs(args: argparse.Namespace) -> tuple[dict[str, Path], dict[str, Path]]:
    """The files and the folders a grading of ``args`` reads (see
    :mod:`graders.results.overlaps`)."""
    from graders.expected.oracle import bundled_golden_file
    from graders.trackfiles.tracks import default_tracks_dir

    located = None
    with contextlib.suppress(SubmissionError):
        located = locate_submission(args.submission)
    bundled = bundled_golden_file()
    tracks = Path(args.tracks) if args.tracks else None
    if tracks is None:
        with contextlib.suppress(TrackError):
            tracks = default_tracks_dir()
    files = existing([
        ("the submission", Path(args.submission)), ("the submission's serving.py", located),
        ("the golden file", Path(args.golden) if args.golden else
         bundled if bundled.is_file() else None),
        ("the submission metadata",
         Path(args.submission_metadata) if args.submission_metadata else None),
        ("the course secret", Path(args.secret_file) if args.secret_file else None)])
    folders = existing([("the tracks folder", tracks)])
    folders.update(grader_folders())
    return files, folders


def _outputs(args: argparse.Namespace) -> dict[str, Path]:
    """Each output that is set, by its flag."""
    return {flag: Path(getattr(args, name)) for name, flag in OUTPUTS
            if getattr(args, name, None)}


def _removable_outputs(args: argparse.Namespace) -> dict[str, Path]:
    """The outputs an early usage error may remove or replace: those that pass their own
    checks and name no input (never raises)."""
    try:
        files, folders = grading_inputs(args)
    except (GraderError, OSError):
        return {}
    removable = {}
    for flag, path in _outputs(args).items():
        try:
            checked = check_output_file(path, flag, create=False)
            refuse_overlaps({flag: checked}, files, folders)
        except (GraderError, OSError):
            continue
        removable[flag] = checked
    return removable


def pytest_arguments(args: argparse.Namespace, workdir: Path, submission: Path) -> list[str]:
    """The pytest command line of a trusted grading run."""
    ini = workdir / "pytest.ini"
    ini.write_text("[pytest]\n", encoding="utf-8")
    arguments = [
        str(workdir), "-c", str(ini), "--rootdir", str(workdir),
        # no:unraisableexception: its five garbage collections at exit cost 0.1 s, and no
        # student code runs in this process for it to watch
        "-p", "graders.plugin", "-p", "no:cacheprovider", "-p", "no:unraisableexception",
        "--assert=plain",
        "--tb=no", "-rN", "-q", "--student", str(submission),
    ]
    if getattr(args, "quiet", False):
        # -qq: the plugin prints the score table and the counts only (and, with the
        # classic style, no bare progress percentage)
        arguments += ["-q", "-o", "console_output_style=classic"]
    for option in OPTIONS:  # every grading option, passed to the plugin as it was given
        value = getattr(args, option.name, None)
        if option.name == "student" or value in (None, ""):
            continue
        if option.metavar in PATH_METAVARS:
            value = str(Path(value).resolve())
        arguments += [option.flag, str(value)]
    if args.json_report:
        arguments += ["-p", "pytest_jsonreport.plugin", "--json-report",
                      "--json-report-file", str(Path(args.json_report).resolve())]
    if args.junit_xml:
        arguments += ["--junitxml", str(Path(args.junit_xml).resolve()),
                      "-o", "junit_suite_name=serving-lab"]
    return arguments


def collect_no_garbage() -> None:
    """Turn off automatic garbage collection, for a grading in a process that ends after
    it. Its collections cost about a tenth of the grading's CPU (pint's registry, the
    tracks and the tests' objects traversed again and again, a full collection among
    them) and free almost nothing: reference counting frees a grading's values, and the
    cycles it leaves (a test's report, a failure's traceback) are a few per test of a
    fixed suite. Never in a long-lived process (the regrade's grading process), whose
    garbage would pile up grading after grading."""
    gc.disable()


def run_grade(args: argparse.Namespace, *, one_shot: bool = False) -> int:
    """Grade ``args.submission``; see :data:`EXIT_CODES` for what the result means;
    ``one_shot``: the process ends after this grading (see :func:`collect_no_garbage`),
    the ``graders grade`` command, which also says a version drift (:func:`_say_drift`).

    Every usage error is found before grading starts, and leaves the same thing behind
    (never an earlier run's outputs): a 0-point results file with the reason for a
    submission that exists but holds no usable ``serving.py``, else nothing."""
    if one_shot:
        collect_no_garbage()
    try:
        args, submission, fail_under, github_output = _prepare(args)
    except GraderError as error:
        removable = _removable_outputs(args)
        for path in removable.values():  # only this run may leave these behind
            remove_output(path)
        if isinstance(error, SubmissionError) and "--results" in removable \
                and os.path.lexists(args.submission):
            write_results(removable["--results"], unusable_submission_results(str(error)))
        raise
    if one_shot:  # the command; a regrade says it once for the class, not per grading
        _say_drift()
    results = Path(args.results) if args.results else None
    targets = {name: getattr(args, name) for name in INSTALLED}
    interruption = Interruption()
    try:
        with interruptible() as interruption:
            return _grade(args, submission, fail_under, github_output,
                          received=interruption)
    except GraderError:
        raise
    except KeyboardInterrupt as error:  # SIGINT or SIGTERM: the run cleaned up on its way out
        return _interrupted(interruption, error, args, targets)
    except Exception as error:  # noqa: BLE001 - the guard: whatever failed, no score
        if interruption.signal_number is not None:  # reporting the interrupt failed (pytest's
            return _interrupted(interruption, error, args, targets)  # own report can)
        recorded = read_grader_failure(results) if results is not None else None
        _report_grader_failure(recorded or disk_full(error) or f"{type(error).__name__}: {error}",
                               args, targets)
        return GRADER_FAILED


def _say_drift() -> None:
    """One line on stderr when a grading dependency differs from its pin (the plugin's
    header, which says it under plain pytest, is not shown here)."""
    from graders.versions import drift_warning

    warning = drift_warning()
    if warning is not None:
        sys.stderr.write(f"graders: {warning}\n")


def _interrupted(interruption: Interruption, error: BaseException, args: argparse.Namespace,
                 targets: dict[str, str | None]) -> int:
    """A grading stopped by a signal: one line, the no-score record, 128 + the signal."""
    name = interruption.name(error)
    sys.stderr.write(f"graders: the grading was interrupted by {name}: no score\n")
    _report_no_score(interrupted_results(name), args, targets)
    return interruption.exit_code(error)


def _grade(args: argparse.Namespace, submission: Path, fail_under: float | None,
           github_output: Path | None, *, received: Interruption | None = None) -> int:
    """The grading run itself: pytest in a private scratch folder, the outputs installed.
    A signal ``received`` during the run is an interruption, whatever pytest's exit code
    (pytest's report of the interrupt can itself fail, as an internal error)."""
    start_probe()  # the confinement probe runs while pytest starts
    with tempfile.TemporaryDirectory(prefix="serving-grade-") as directory, \
            _environment(**{**dict.fromkeys(_pytest_environment()),
                            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
                         # Hypothesis keeps no examples (database=None), but would still
                         # make .hypothesis/
                         HYPOTHESIS_STORAGE_DIRECTORY=str(Path(directory) / ".hypothesis")):
        scratch = Path(directory)
        targets = {name: getattr(args, name) for name in INSTALLED}
        args = _with_scratch_outputs(args, scratch, fail_under is not None,
                                     github_output is not None)
        workdir = scratch / "run"
        workdir.mkdir()
        code = pytest.main(pytest_arguments(args, workdir, submission.resolve()))
        if code == pytest.ExitCode.USAGE_ERROR:
            return USAGE_ERROR
        if code == pytest.ExitCode.INTERRUPTED or \
                received is not None and received.signal_number is not None:
            raise KeyboardInterrupt  # before the plugin's hooks could say so, or after
        results = Path(args.results) if args.results else None
        document = read_valid_results(results) if results is not None else None
        failure = _grader_failure(code, results, document)
        if failure is not None:
            _report_grader_failure(failure, args, targets)
            return GRADER_FAILED
        _install_outputs(scratch, targets)
        if github_output is not None and args.classroom:
            classroom = json.loads(Path(args.classroom).read_text(encoding="utf-8"))
            with github_output.open("a", encoding="utf-8") as stream:
                stream.write(github_output_line(classroom))
            sys.stdout.write(preview_notice(classroom))  # beside the reporter's points
            step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
            if step_summary:  # the job's summary, on the run's page too
                with open(step_summary, "a", encoding="utf-8") as stream:
                    stream.write(preview_summary(classroom))
        if fail_under is not None and document is not None:
            score = document["score"]
            if score < fail_under:
                sys.stderr.write(f"graders: score {score:g} is below --fail-under "
                                 f"{fail_under:g}\n")
                return BELOW_FAIL_UNDER
    return 0


def _prepare(args: argparse.Namespace) -> tuple[argparse.Namespace, Path, float | None,
                                                Path | None]:
    """Every check of a grading's command line, before anything is written: the options'
    values, the outputs (see :func:`checked_outputs`), the submission and the tracks; the
    earlier run's outputs are then removed. Raises a :class:`GraderError` (a usage
    error)."""
    for option in OPTIONS:  # every value in its range, one line naming the flag if not
        value = getattr(args, option.name, None)
        if option.name != "student" and value not in (None, ""):
            flag_value(grade_flag(option), str(value), option.parse)
    fail_under = _fail_under(args.fail_under, args.max_score)
    github_output = _github_output() if args.github_output else None
    args = checked_outputs(args)
    submission = locate_submission(args.submission)
    read_submission(submission)  # refuse links, other file types and oversized files
    if args.tracks:
        from graders.trackfiles.tracks import load_tracks

        load_tracks(args.tracks)
    for name, _ in OUTPUTS:  # only this run may leave these behind
        if getattr(args, name):
            remove_output(getattr(args, name))
    return args, submission, fail_under, github_output


def _grader_failure(code: int, results: Path | None, document: dict[str, Any] | None
                    ) -> str | None:
    """Why the grading run failed as a grader (None when it completed with a result)."""
    if code == GRADER_FAILED_EXIT:  # the plugin said so, and why, in the results
        recorded = read_grader_failure(results) if results is not None else None
        return recorded or "the grader failed (see the messages above)"
    if code == pytest.ExitCode.INTERRUPTED:
        return "the grading was interrupted"
    if code not in COMPLETED:
        return f"the grader stopped with pytest exit code {int(code)}"
    if results is not None and document is None:
        return "the grader wrote no valid results"
    return None


def _report_grader_failure(reason: str, args: argparse.Namespace,
                           targets: dict[str, str | None]) -> None:
    """Say a grader failure everywhere, the same way: one line on stderr, the record at
    --results, and no output that shows a score (the Classroom file says "error", the
    JUnit file holds one errored test, the page says the grader failed; pytest's json
    report, written by pytest itself, records the exit code)."""
    sys.stderr.write(f"graders: error: the grader failed: {reason}; {GRADER_FAILURE_ADVICE}\n")
    _report_no_score(grader_failure_results(reason), args, targets)


def _report_no_score(record: dict[str, Any], args: argparse.Namespace,
                     targets: dict[str, str | None]) -> None:
    """Write a record that gives no score (a grader failure, an interruption) at --results,
    and outputs that show no score at the other paths."""
    reason = grader_failure(record) or "the grader failed"
    if args.results:
        write_results(Path(args.results), record)
    if args.classroom:
        _install_text(json.dumps(classroom_results([], grader_failure=reason), indent=2)
                      + "\n", args.classroom, "--classroom")
    if targets.get("junit_xml"):
        _install_text(_junit_failure(reason), str(targets["junit_xml"]), "--junit-xml")
    if args.html:
        from graders.feedback.render import build_page

        _install_text(build_page(record, []), args.html, "--html")


def _junit_failure(reason: str) -> str:
    """A JUnit XML file of one errored test: the grader failed (no test result is shown)."""
    from xml.sax.saxutils import quoteattr  # it imports urllib.request: 10 ms of a grading

    text = quoteattr(f"the grader failed: {escape_controls(reason)}")
    return ('<?xml version="1.0" encoding="utf-8"?>\n<testsuites><testsuite '
            'name="serving-lab" tests="1" errors="1" failures="0" skipped="0">'
            f'<testcase classname="serving-lab" name="grader"><error message={text}/>'
            "</testcase></testsuite></testsuites>\n")


def _install_text(text: str, target: str, flag: str) -> None:
    try:
        write_text_atomically(Path(target), text)
    except OSError as error:
        raise OutputPathError(f"{flag} {target!r} could not be written: "
                              f"{error.strerror or error}") from None


def _pytest_environment() -> list[str]:
    """The variables of this environment that pytest reads (``PYTEST_ADDOPTS``,
    ``PYTEST_PLUGINS``, ...): the official grade reads none of them."""
    return [name for name in os.environ if name.startswith("PYTEST_")]


@contextlib.contextmanager
def _environment(**values: str | None) -> Iterator[None]:
    """Set (or, for None, remove) environment variables for the grading run, and restore
    them after it."""
    saved = {name: os.environ.get(name) for name in values}
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _fail_under(text: str | None, max_score: str | None) -> float | None:
    """``--fail-under``'s bar: a number from 0 to the assignment's points (``--max-score``,
    else the default 100)."""
    if text is None:
        return None
    bar = float(flag_value("--fail-under", text, non_negative_float))
    ceiling = 100.0 if max_score is None else float(max_score)
    if bar > ceiling:
        raise SettingsError(f"--fail-under must lie in [0, {ceiling:g}] (the assignment's "
                            f"points), got {text!r}")
    return bar


def _github_output() -> Path:
    """The file GitHub Actions reads step outputs from, checked before grading: the line
    is appended to it once the grading is done, and a grading that could not append it
    would be lost."""
    value = os.environ.get("GITHUB_OUTPUT")
    if not value:
        raise SettingsError("--github-output needs the GITHUB_OUTPUT environment variable "
                            "(set by GitHub Actions); use --classroom FILE elsewhere")
    path = Path(os.path.abspath(value))
    problem = None
    if path.is_symlink() or path.exists() and not path.is_file():
        problem = "it is not a regular file"
    elif path.exists() and not os.access(path, os.W_OK):
        problem = "it cannot be written"
    elif not path.exists() and not path.parent.is_dir():
        problem = f"its folder {str(path.parent)!r} does not exist"
    elif not path.exists() and not os.access(path.parent, os.W_OK | os.X_OK):
        problem = f"its folder {str(path.parent)!r} cannot be written"
    if problem is not None:
        raise SettingsError(f"--github-output: GITHUB_OUTPUT {value!r} cannot take the "
                            f"result: {problem}")
    return path


def _install_outputs(scratch: Path, targets: dict[str, str | None]) -> None:
    """Install the outputs pytest wrote into ``scratch`` at the paths the user gave."""
    for name, target in targets.items():
        source = scratch / INSTALLED[name]
        if not target or not source.is_file():
            continue
        try:
            install_file(source, target)
        except OSError as error:
            flag = dict(OUTPUTS)[name]
            raise OutputPathError(f"{flag} {target!r} could not be written: "
                                  f"{error.strerror or error}") from None


def _with_scratch_outputs(args: argparse.Namespace, scratch: Path, need_results: bool,
                          need_classroom: bool) -> argparse.Namespace:
    """``args`` with results and classroom files in ``scratch`` where a check needs them,
    and the outputs pytest writes itself (JUnit XML, the json report) in ``scratch``."""
    updated = argparse.Namespace(**vars(args))
    for name, file_name in INSTALLED.items():
        if getattr(updated, name, None):
            setattr(updated, name, str(scratch / file_name))
    if need_results and not updated.results:
        updated.results = str(scratch / "results.json")
    if need_classroom and not updated.classroom:
        updated.classroom = str(scratch / "classroom.json")
    return updated
