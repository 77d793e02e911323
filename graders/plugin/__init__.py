"""The pytest plugin of the serving-lab grader: its options, and the switch that turns
grading on.

Grading is on when a submission is named (``--student`` or the ``grader_student``
ini key). Then, and only then, :func:`pytest_configure` opens the grading session and
registers its hooks (:class:`graders.plugin.hooks.GradingHooks`) and fixtures
(:mod:`graders.plugin.fixtures`): the grading suite in :mod:`graders.suite` joins the
collected tests, every test is scored, and the reports are written at the end. With
grading off, the plugin adds its options and imports nothing else.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import TYPE_CHECKING, Any

import pytest

from graders.plugin.settings import OPTIONS, Settings, resolve
from graders.plugin.usage import usage_error

if TYPE_CHECKING:
    from graders.trackfiles.tracks import Track

MARKER_HELP = (
    "grader(points, function, visibility='visible', unseen=None): a graded test worth "
    "`points` (scaled so the suite totals grader_max_score), tagged with the contract "
    "`function`; visibility is one of visible, hidden, after_due_date, after_published; "
    "unseen, on a test of cases, is how many unseen inputs (split over the tracks) the "
    "official grade checks its function on (default 40, 0 for none)"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("serving-grader", "serving-lab grader")
    for option in OPTIONS:
        group.addoption(option.flag, dest=f"grader_{option.name}", default=None,
                        type=option.parse, metavar=option.metavar, help=option.help)
        parser.addini(option.ini, help=option.help, default=None)


def _resolve_settings(config: pytest.Config) -> Settings:
    raw: dict[str, Any] = {}
    for option in OPTIONS:
        value = config.getoption(f"grader_{option.name}")
        if value == "":  # an unset shell variable, never "not given"
            raise usage_error(f"{option.flag} is empty: give it a value")
        if value is not None:
            raw[option.name] = (value, False)
            continue
        text = config.getini(option.ini)
        if text in (None, ""):
            raw[option.name] = (option.default, False)
            continue
        try:
            raw[option.name] = (option.parse(str(text).strip()), True)
        except argparse.ArgumentTypeError as error:
            raise usage_error(f"ini key {option.ini}: {error}") from None
    return resolve(raw, invocation_dir=config.invocation_params.dir,
                   ini_dir=config.inipath.parent if config.inipath else config.rootpath)


def _record_grader_failure(settings: Settings, reason: str) -> None:
    """Leave a grader-failure record at the results path (best effort: the command that
    ran pytest writes one too when it finds none)."""
    if settings.results is None:
        return
    from graders.results.reports import grader_failure_results, write_json_atomically

    with contextlib.suppress(OSError):
        write_json_atomically(settings.results, grader_failure_results(reason))


class FailedGrading:
    """The hooks of a run whose grading could not start (the grader failed while setting
    it up): nothing is collected or run, the score section says that the grader failed and
    why (no score), and pytest exits with the grader-failure code; ``graders grade`` then
    says it in its one line. No INTERNALERROR traceback, no second message."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> bool:
        return True

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        return True

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from graders.errors import GRADER_FAILED_EXIT

        session.exitstatus = GRADER_FAILED_EXIT

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from graders.escaping import for_terminal
        from graders.results.reports import score_table

        terminalreporter.section("serving-lab score")
        for line in score_table([], grader_failure=self.reason):
            terminalreporter.write_line(for_terminal(line))


def _fail_grading(config: pytest.Config, settings: Settings, reason: str) -> None:
    """The grading cannot start: its grader-failure record, and a run that says so
    (:class:`FailedGrading`)."""
    _record_grader_failure(settings, reason)
    config.pluginmanager.register(FailedGrading(reason), "serving-grader-failed")


def _refuse_what_changes_the_grade(config: pytest.Config) -> None:
    """Refuse, in one line, what would grade other than the official grading does: an
    interpreter that strips ``assert`` statements (``-O``), and tests spread over
    processes (pytest-xdist's ``-n``), whose scores the grader never sees."""
    if sys.flags.optimize:
        raise usage_error("Python runs with -O (or PYTHONOPTIMIZE set), which strips the "
                          "grading suite's checks; run it without -O and PYTHONOPTIMIZE")
    workers = config.getoption("numprocesses", default=None)
    if workers not in (None, 0, "0") or config.getoption("dist", default="no") != "no":
        raise usage_error("pytest-xdist (-n, --dist) runs tests in other processes, which "
                          "the grader cannot score; run it without -n")


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    settings = _resolve_settings(config)
    from graders.plugin.stash import SESSION_KEY, SETTINGS_KEY

    config.stash[SETTINGS_KEY] = settings
    if not settings.grading:
        return
    _refuse_what_changes_the_grade(config)
    from graders.sandbox.confinement import start_probe

    start_probe()  # runs while the outputs are checked and the submission is read
    from graders.errors import GraderError, GraderFailure, disk_full
    from graders.plugin import fixtures
    from graders.plugin.bytecode import write_bytecode
    from graders.plugin.exit import freeze_heap_at_exit
    from graders.plugin.hooks import GradingHooks, JsonReportMetadata
    from graders.plugin.session import GradingSession
    from graders.results.files import check_output_file

    def load_tracks() -> tuple[Track, ...]:
        from graders.trackfiles.tracks import default_tracks_dir, load_tracks

        return load_tracks(settings.tracks or default_tracks_dir())

    config.add_cleanup(write_bytecode)  # for the next run, once this one is over
    freeze_heap_at_exit()
    try:
        for path, flag in ((settings.results, "--grader-results"),
                           (settings.classroom, "--grader-classroom"),
                           (settings.html, "--grader-html")):
            if path is not None:  # before any student code runs, as graders grade does
                check_output_file(path, flag)
        session = GradingSession.open(settings, load_tracks,
                                      verbose=config.getoption("verbose") > 0)
    except GraderFailure as error:  # the grader's failure, not the user's: never a usage error
        _fail_grading(config, settings, str(error))
        return
    except GraderError as error:
        raise usage_error(str(error)) from None
    except OSError as error:  # a full disk is the grader's failure, said as one
        reason = disk_full(error)
        if reason is None:
            raise
        _fail_grading(config, settings, reason)
        return
    config.stash[SESSION_KEY] = session
    config.pluginmanager.register(GradingHooks(session), "serving-grader-session")
    config.pluginmanager.register(fixtures, "serving-grader-fixtures")
    if config.getoption("json_report", default=False):
        config.pluginmanager.register(JsonReportMetadata(session),
                                      "serving-grader-json-report")
