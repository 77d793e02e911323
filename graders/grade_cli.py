"""``graders grade SUBMISSION``: grade one submission with a trusted, isolated pytest run.

The run starts from the grader's own configuration in a private folder: no
plugin autoloading, no conftest, ini file or test of the submission's, and
nothing but ``serving.py`` taken from the submission.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import pytest

from graders.errors import SettingsError
from graders.reports import fallback_results, gradescope_problems, write_results
from graders.settings import positive_float
from graders.submission import locate_submission, read_submission

#: pytest exit codes after which grading completed, whatever the score.
COMPLETED = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
GRADER_FAILED = 1


def pytest_arguments(args: argparse.Namespace, workdir: Path, submission: Path) -> list[str]:
    """The pytest command line of a trusted grading run."""
    ini = workdir / "pytest.ini"
    ini.write_text("[pytest]\n", encoding="utf-8")
    arguments = [
        str(workdir), "-c", str(ini), "--rootdir", str(workdir),
        "-p", "graders.plugin", "-p", "no:cacheprovider", "--assert=plain",
        "--tb=no", "-rN", "-q", "--student", str(submission),
    ]
    if args.quiet:
        arguments += ["-q"]
    if args.results:
        arguments += ["--grader-results", str(Path(args.results).resolve())]
    if args.tracks:
        arguments += ["--grader-tracks", str(Path(args.tracks).resolve())]
    if args.max_score is not None:
        try:
            positive_float(args.max_score)
        except argparse.ArgumentTypeError as error:
            raise SettingsError(f"--max-score {error}") from None
        arguments += ["--grader-max-score", args.max_score]
    if args.json_report:
        arguments += ["-p", "pytest_jsonreport.plugin", "--json-report",
                      "--json-report-file", str(Path(args.json_report).resolve())]
    return arguments


def run_grade(args: argparse.Namespace) -> int:
    """Grade ``args.submission``; 0 when grading completed, whatever the score."""
    submission = locate_submission(args.submission)
    read_submission(submission)  # refuse links, other file types and oversized files early
    if args.tracks:
        from graders.tracks import load_tracks

        load_tracks(args.tracks)
    if args.results:  # only this run may leave a results file behind
        Path(args.results).unlink(missing_ok=True)
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    with tempfile.TemporaryDirectory(prefix="serving-grade-") as directory:
        # Hypothesis keeps no examples (database=None), but would still make .hypothesis/
        os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = str(Path(directory) / ".hypothesis")
        code = pytest.main(pytest_arguments(args, Path(directory), submission.resolve()))
    if code == pytest.ExitCode.USAGE_ERROR:
        return 2
    completed = code in COMPLETED
    if args.results and not _valid_results(Path(args.results)):
        reason = "no valid results were written" if completed else \
            f"the grader stopped with pytest exit code {int(code)}"
        write_results(Path(args.results), fallback_results([], reason))
        return GRADER_FAILED
    return 0 if completed else GRADER_FAILED


def _valid_results(path: Path) -> bool:
    def reject(constant: str) -> None:
        raise ValueError(constant)

    try:
        document = json.loads(path.read_text(encoding="utf-8"), parse_constant=reject)
    except (OSError, ValueError):
        return False
    return not gradescope_problems(document)
