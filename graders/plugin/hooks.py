"""The hooks of a grading run, on one object registered only when grading is on (as
pytest-xdist registers its ``DSession``), so that no hook needs a guard; the pure work
is in module functions below it and in the sub-packages they call.
"""

from __future__ import annotations

import codecs
import sys
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Set
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from graders.errors import GRADER_FAILED_EXIT, GraderFailure
from graders.escaping import for_terminal
from graders.grading.checks import (
    MAX_FEEDBACK_CHARS,
    MAX_REASON_CHARS,
    GradingFailure,
    StudentCallFailed,
    shortened,
)
from graders.grading.contract import CONTRACT_FUNCTIONS
from graders.grading.feedback_layout import FeedbackParts
from graders.grading.scoring import (
    GraderMark,
    Status,
    TestScore,
    decimal_text,
    rounded,
    scaled_maxima,
    written_points,
)
from graders.plugin.session import GradingSession
from graders.plugin.stash import SCORE_KEY, TALLY_KEY
from graders.plugin.suite_imports import import_suite_module
from graders.plugin.usage import usage_error
from graders.results.reports import grader_failure_results, interrupted_results, score_table
from graders.results.terminal import Block, cases_shown, group_key, grouped_block, plain_block
from graders.sandbox.interrupts import interrupted_by
from graders.sandbox.runner import OutputMark
from graders.suite import EXTENSIONS_MODULE, HIDDEN_PREFIX
from graders.versions import drift_warning

SUITE_DIR = Path(__file__).parents[1] / "suite"
SUITE_PACKAGE = "graders.suite"
#: The one line a local run (a student bundle: no reference) ends with.
PREVIEW_LINE = ("This score is a preview of the visible tests: the final grade, made by the "
                "course staff with the course's full grader, also runs the hidden tests and "
                "checks every function on inputs you have not seen.")


class GradingHooks:
    """The hooks of a run that grades a submission, registered only then: grading off,
    the plugin adds its options and nothing else."""

    def __init__(self, session: GradingSession) -> None:
        self.session = session
        #: The signal that interrupted the run (SIGINT for Ctrl-C), once one has.
        self.interrupted: str | None = None
        #: What failed inside pytest or a hook (an internal error), once something has.
        self.failure: str | None = None
        #: Where the submission's output stood when each visible test started.
        self._output_marks: dict[str, OutputMark] = {}

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if session.config.getoption("capture") == "no":  # -s: its prints show live
            self.session.runner.echo_output(_live_output())

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.session.end()

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        return _header(self.session, verbose=config.getoption("verbose") > 0)

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "track" in metafunc.fixturenames:
            tracks = self.session.tracks
            metafunc.parametrize("track", tracks, ids=[t.track_id for t in tracks])

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        _add_suite(session, self.session, items)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.session.hidden_selected = any(_visibility(item) != "visible"
                                           for item in session.items)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if "student" in getattr(item, "fixturenames", ()):  # the invariants: the visible
            self.session.prestart_hidden()  # worker is idle most of their time
        score = item.stash.get(SCORE_KEY, None)
        if score is not None:
            _name_in_junit_xml(item, score)
            if score.visibility == "visible":
                self._output_marks[item.nodeid] = self.session.runner.output_mark()

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]
                                  ) -> Generator[None, Any, Any]:
        report = yield
        if call.excinfo is not None and call.excinfo.errisinstance(GraderFailure):
            self.session.failures.append(str(call.excinfo.value))
        score = item.stash.get(SCORE_KEY, None)
        if score is None:  # not a graded test
            return report
        updated = _score_phase(item, score, report, call)
        _short_summary(report, call, self.session, score.function)
        failure = call.excinfo.value if call.excinfo is not None else None
        if isinstance(failure, GradingFailure) and score.visibility == "visible":
            self.session.full_outputs[score.nodeid] = failure.full
            if failure.parts is not None:
                self.session.feedback_parts[score.nodeid] = failure.parts
        mark = self._output_marks.pop(item.nodeid, None) if report.when == "call" else None
        if mark is not None:
            self._captured(report, score, mark)
        if updated is not None:
            item.stash[SCORE_KEY] = updated
            self.session.scores[score.nodeid] = updated
            _set_score_properties(item, report, updated)
        return report

    @pytest.hookimpl(tryfirst=True)  # before the terminal's report of it, which can fail
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        if excinfo.errisinstance(pytest.Session.Interrupted):
            return  # a plugin ended the session on purpose (--sw): a partial run, no signal
        self.interrupted = interrupted_by(excinfo.value)

    def pytest_internalerror(self, excrepr: object,
                             excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        self.failure = f"{excinfo.type.__name__}: {excinfo.value}"

    def _captured(self, report: pytest.TestReport, score: TestScore, mark: OutputMark
                  ) -> None:
        """What the submission printed during this test's call, as pytest's captured
        output: a section of the report, and shown under the test's feedback."""
        printed = self.session.runner.output_summary(since=mark)
        if not printed.total_bytes:
            return
        text = printed.text
        if printed.truncated:
            text += f"\n[{printed.sentence()}]"
        report.sections.append(("Captured output of serving.py (stdout and stderr)", text))
        printed_before = self.session.printed.get(score.function, "")
        self.session.printed[score.function] = printed_before + text

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """The guard of every report: whatever fails or interrupts the finish, the workers
        are stopped and a final result is written (the grader's failure, or the
        interruption: no score); an interrupt is raised again once it is."""
        interrupted = self.interrupted  # whatever the exit status (its report may have failed)
        try:
            if exitstatus == pytest.ExitCode.INTERNAL_ERROR:  # no score from a broken run
                _finish_anyway(self.session, failure=self.failure or "an internal error")
            else:
                _finish(self.session, interrupted)
        except KeyboardInterrupt as error:
            _finish_anyway(self.session, interrupted=interrupted_by(error))
            raise
        except BaseException as error:  # noqa: BLE001 - RecursionError, MemoryError, ...
            _finish_anyway(self.session, failure=f"{type(error).__name__}: {error}")
        if self.session.grader_failure is not None and interrupted is None:
            session.exitstatus = GRADER_FAILED_EXIT  # one verdict: the exit code says it too
        elif exitstatus == pytest.ExitCode.INTERRUPTED and interrupted is None:
            # a plugin stopped the session at a failed test (--sw): that test failed, and
            # the run is partial; no signal interrupted it
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        _junit_written_points(session.config, self.session)
        _quiet_unused_hypothesis(session.config)

    @pytest.hookimpl(wrapper=True)
    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config
                                 ) -> Generator[None, Any, Any]:
        """At -qq (``graders grade -q``), no progress letters: only the score table shows."""
        result = yield
        if result and config.getoption("verbose") <= -2:
            category, _, word = result
            return category, "", word
        return result

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int,
                                config: pytest.Config) -> None:
        if self.interrupted is not None:  # no score table: there is no score
            terminalreporter.write_line(f"serving-grader: the grading was interrupted by "
                                        f"{self.interrupted}: no score", red=True)
            return
        if self.session.scores:
            _summary(terminalreporter, config, self.session)


#: Hypothesis's pytest plugin, as its entry point names it.
HYPOTHESIS_PLUGIN = "hypothesispytest"


def _quiet_unused_hypothesis(config: pytest.Config) -> None:
    """Unregister Hypothesis's pytest plugin when nothing in the run imported Hypothesis.

    Its terminal summary imports Hypothesis whatever the run did (about 1 s, and 2 s more
    where pytest rewrites Hypothesis's modules because bytecode cannot be cached), to
    report on tests that did not use it. A run whose tests use Hypothesis has imported it
    by now, and keeps the plugin.
    """
    if "hypothesis" not in sys.modules and config.pluginmanager.has_plugin(HYPOTHESIS_PLUGIN):
        config.pluginmanager.unregister(name=HYPOTHESIS_PLUGIN)


def _header(session: GradingSession, *, verbose: bool) -> list[str]:
    """What is graded and how; the protections the code runs under only when ``verbose``
    (``-v``): a student needs none of them, and results.json records them."""
    settings = session.settings
    ids = ", ".join(track.track_id for track in session.tracks)
    sandbox = session.runner.sandbox
    who = f" ({sandbox.name}, uid {sandbox.uid})" if sandbox is not None else ""
    lines = [f"serving-grader: grading {settings.student} on tracks {ids}",
             f"serving-grader: tolerance {settings.tolerance.describe()}, "
             f"{settings.limits.call_timeout_s:g} s per call, "
             f"max score {decimal_text(session.max_score)}, "
             f"{settings.examples} examples per invariant"]
    if verbose:
        lines.append(f"serving-grader: {session.isolation()}{who}")
    if session.unseen_seed is not None:
        secret = "the course secret" if settings.secret_file else "no course secret"
        lines.append(f"serving-grader: unseen inputs drawn from {secret} and the "
                     "submission's hash")
    warning = drift_warning()
    if warning is not None:
        lines.append(f"serving-grader: {warning}")
    return lines


def _add_suite(session: pytest.Session, grading: GradingSession,
               items: list[pytest.Item]) -> None:
    """Add the grading suite (unless the run collected it), score every test, and put the
    hidden tests last: their worker starts only after every visible call was made."""
    if not _extensions_on(grading):  # not even listed
        items[:] = [item for item in items if not _is_extension(item)]
    # every test of the suite, whatever a selection or a plugin (--lf, --sw) leaves of it:
    # those not run are "not run", never points scaled up from the others
    suite = _suite_items(session, grading, quietly=True)
    if not any(Path(item.path).parent == SUITE_DIR for item in items):
        items.extend(_suite_items(session, grading, quietly=False))
    _assign_maxima(grading, suite, items)
    items.sort(key=lambda item: _visibility(item) != "visible")


def _suite_items(session: pytest.Session, grading: GradingSession, *,
                 quietly: bool) -> list[pytest.Item]:
    """Every test of the grading suite, whatever the selection (it decides the maxima).

    ``quietly`` builds them without collection hooks, when the run collected its own."""
    suite: list[pytest.Item] = []
    for path in sorted(SUITE_DIR.glob("test_*.py")):
        if grading.oracle.golden and path.name.startswith(HIDDEN_PREFIX):
            continue  # hidden tests need the reference (and the bundle leaves them out)
        if path.name == EXTENSIONS_MODULE and not _extensions_on(grading):
            continue
        import_suite_module(path, f"{SUITE_PACKAGE}.{path.stem}")
        module = pytest.Module.from_parent(session, path=path,
                                           nodeid=f"graders/suite/{path.name}")
        found = module.collect() if quietly else session.genitems(module)
        suite.extend(i for i in found if isinstance(i, pytest.Item))
    return suite


def _visibility(item: pytest.Item) -> str:
    score = item.stash.get(SCORE_KEY, None)
    return score.visibility if score is not None else "visible"


def _assign_maxima(grading: GradingSession, suite: list[pytest.Item],
                   items: list[pytest.Item]) -> None:
    """Score every test of the suite (run or not) and stash each collected test's score."""
    marks: dict[str, tuple[pytest.Item, GraderMark]] = {}
    for item in [*suite, *items]:
        marker = item.get_closest_marker("grader")
        if marker is None or _test_id(item) in marks:
            continue
        try:
            marks[_test_id(item)] = (item, GraderMark.from_marker(marker.args, marker.kwargs,
                                                                  item.nodeid))
        except ValueError as error:
            raise usage_error(str(error)) from None
    siblings = Counter(_function_id(item) for item, _ in marks.values())
    weights = {nodeid: (grading.settings.exact_p99_points if _is_extension(item)
                        else mark.points) / siblings[_function_id(item)]
               for nodeid, (item, mark) in marks.items()}
    # shared level by level: the visible tests and the others; among the visible ones,
    # the lab's and the graded extension (which the student bundle cannot grade: its
    # lab tests are worth there what they are worth here, graders.export.visible_share);
    # then each function's tests together, so that each function's maximum is its share
    # on the grid whatever the number of tracks
    maxima = scaled_maxima(weights, grading.max_score, groups={
        nodeid: ("visible" if mark.visibility == "visible" else "other",
                 "extension" if _is_extension(item) else "lab", mark.function)
        for nodeid, (item, mark) in marks.items()})
    for nodeid, (item, mark) in marks.items():
        if mark.unseen is not None:
            grading.unseen_counts[mark.function] = mark.unseen
        grading.scores[nodeid] = TestScore(
            nodeid=nodeid, name=_display_name(item), function=mark.function,
            track=_track_id(item), visibility=mark.visibility, max_score=maxima[nodeid])
    for item in items:
        if _test_id(item) in grading.scores:
            item.stash[SCORE_KEY] = grading.scores[_test_id(item)]


def _extensions_on(grading: GradingSession) -> bool:
    """Whether the graded extensions run: a course gave them points, and the reference
    computes their expected values (a golden file, the student bundle's, has none)."""
    return bool(grading.settings.exact_p99_points) and not grading.oracle.golden


def _is_extension(item: pytest.Item) -> bool:
    return Path(item.path) == SUITE_DIR / EXTENSIONS_MODULE


def _test_id(item: pytest.Item) -> str:
    """The test's node id, the same for a suite test however it was collected."""
    if Path(item.path).parent == SUITE_DIR:
        return f"graders/suite/{Path(item.path).name}::{item.name}"
    return item.nodeid


def _function_id(item: pytest.Item) -> str:
    return _test_id(item).split("[", 1)[0]


def _track_id(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    track = callspec.params.get("track") if callspec is not None else None
    return getattr(track, "track_id", None)


def _display_name(item: pytest.Item) -> str:
    doc = getattr(getattr(item, "function", None), "__doc__", None) or item.name
    title = " ".join(doc.strip().split("\n\n", 1)[0].split()).rstrip(".")  # first paragraph
    track = _track_id(item)
    return f"{title} [{track}]" if track else title


def _name_in_junit_xml(item: pytest.Item, score: TestScore) -> None:
    """With ``--junitxml``, the test's ``<testcase>`` carries the readable name that
    results.json gives it, with its contract function as the class name (as pytest's own
    ``record_xml_attribute`` does, set before the test's reports are written)."""
    from _pytest.junitxml import xml_key

    xml = item.config.stash.get(xml_key, None)
    if xml is not None:
        reporter = xml.node_reporter(item.nodeid)
        reporter.add_attribute("classname", score.function)
        reporter.add_attribute("name", score.name)


def _short_summary(report: pytest.TestReport, call: pytest.CallInfo[None],
                   session: GradingSession, function: str) -> None:
    """pytest's short summary line of a failed test: its reason, not the exception's name
    (and, for a submission that does not import, a pointer to the one line that says why;
    for a function not written yet, that it is not implemented yet)."""
    excinfo = call.excinfo
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is None or excinfo is None or not report.failed:
        return
    evidence = session.evidences.get(function)
    if evidence is not None and evidence.not_implemented:
        reason = f"{function} is not implemented yet"
    elif isinstance(excinfo.value, GradingFailure):
        reason = excinfo.value.summary
    elif isinstance(excinfo.value, StudentCallFailed):
        reason = str(excinfo.value)
    else:
        return
    if session.import_error and session.import_error.split("\n", 1)[0] in reason:
        reason = "serving.py does not import (the reason is printed once, above the scores)"
    crash.message = shortened(" ".join(str(reason).split()), MAX_REASON_CHARS)


def _set_score_properties(item: pytest.Item, report: pytest.TestReport,
                          score: TestScore) -> None:
    """The test's score as properties (JUnit XML writes them as <property> elements),
    replaced whenever a later phase changes the score."""
    properties = [
        ("grader_score", rounded(score.earned)), ("grader_max_score", rounded(score.max_score)),
        ("grader_function", score.function), ("grader_visibility", score.visibility),
    ]
    for holder in (item.user_properties, report.user_properties):
        holder[:] = [p for p in holder if not str(p[0]).startswith("grader_")] + properties


def written_by_test(grading: GradingSession) -> dict[str, tuple[float, float]]:
    """Each test's (score, max_score) as results.json writes them (the largest-remainder
    grid of :func:`graders.grading.scoring.written_points`), by the test's node id: what
    every other output writes too, instead of each test's points rounded on their own."""
    scores = list(grading.scores.values())
    points = written_points(scores)
    return {score.nodeid: (rounded(earned), rounded(maximum))
            for score, earned, maximum in zip(scores, points.earned, points.maxima,
                                              strict=True)}


def _junit_written_points(config: pytest.Config, grading: GradingSession) -> None:
    """With ``--junitxml``, each test's ``grader_score`` and ``grader_max_score`` properties
    set to the points results.json writes (:func:`written_by_test`), known only once every
    test has run. pytest freezes each ``<testcase>`` element when its test ends and writes
    them all at the end of the session, after this hook (tryfirst) ran."""
    from _pytest.junitxml import xml_key

    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    written = written_by_test(grading)
    by_case = {(score.function, score.name): written[score.nodeid]
               for score in grading.scores.values()}
    for reporter in xml.node_reporters_ordered:
        case = reporter.to_xml()
        points = by_case.get((case.get("classname", ""), case.get("name", "")))
        if points is None:
            continue
        for prop in case.iter("property"):
            if prop.get("name") == "grader_score":
                prop.set("value", str(points[0]))
            elif prop.get("name") == "grader_max_score":
                prop.set("value", str(points[1]))


def _score_phase(item: pytest.Item, score: TestScore, report: pytest.TestReport,
                 call: pytest.CallInfo[None]) -> TestScore | None:
    hidden = score.visibility != "visible"
    if report.when == "setup" and not report.passed:
        status: Status = "skipped" if report.skipped else "error"
        return score.with_outcome(status, Fraction(0), _output(report, hidden, status))
    if report.when == "teardown" and report.failed:
        return score.with_outcome("error", Fraction(0), _output(report, hidden, "error"))
    if report.when != "call":
        return None
    tally = item.stash.get(TALLY_KEY, None)
    cases = (tally.passed, tally.total) if tally is not None else (int(report.passed), 1)
    if report.passed:
        return score.with_outcome("passed", Fraction(1), "All cases passed.", *cases)
    if report.skipped:
        return score.with_outcome("skipped", Fraction(0), _output(report, hidden, "skipped"))
    excinfo = call.excinfo
    if tally is not None and excinfo is not None and excinfo.errisinstance(GradingFailure) \
            and tally.total:
        fraction = Fraction(tally.passed, tally.total) * tally.share
        return score.with_outcome("failed", fraction, str(excinfo.value), *cases,
                                  failed_cases=tally.kept)
    return score.with_outcome("failed", Fraction(0),
                              _output(report, hidden, "failed", excinfo), *cases)


def _output(report: pytest.TestReport, hidden: bool, status: str,
            excinfo: pytest.ExceptionInfo[BaseException] | None = None) -> str:
    if hidden:
        return f"This test {status}; its cases are hidden."
    if report.skipped and isinstance(report.longrepr, tuple):
        return f"skipped: {report.longrepr[2]}"
    if excinfo is not None and excinfo.errisinstance(AssertionError):
        # every line of the suite's own message (pytest marks only the first with "E")
        output = excinfo.exconly().strip()
    else:
        text = report.longreprtext.strip()
        lines = [line[2:] if line.startswith("E ") else line for line in text.splitlines()
                 if line.startswith("E ")] or text.splitlines()[-20:]
        output = "\n".join(lines).strip()
    for prefix in (f"{cls.__module__}.{cls.__qualname__}: "
                   for cls in (StudentCallFailed, GradingFailure)):
        output = output.removeprefix(prefix)  # the reason first, not the grader's class
    return shortened(output, MAX_FEEDBACK_CHARS) or status


def _finish(grading: GradingSession, interrupted: str | None = None) -> None:
    """The last visible calls, the workers stopped, then every report written; after an
    interrupt, no more calls: the workers stopped and results that say so."""
    if interrupted is not None:
        _finish_anyway(grading, interrupted=interrupted)
        return
    html = grading.settings.html
    grading.finish_visible()  # measures the page's curves, if any, before the worker stops
    report = grading.feedback
    grading.close()
    document = grading.final_results()
    if grading.settings.results is not None:
        grading.write_results(grading.settings.results)
    if grading.settings.classroom is not None:
        grading.write_classroom(grading.settings.classroom)
    if report is not None and html is not None:
        report.write(html, grading.page_document(document), grading.settings.html_for)


def _finish_anyway(grading: GradingSession, *, interrupted: str | None = None,
                   failure: str | None = None) -> None:
    """Stop the workers and write a final result that gives no score: the run was
    ``interrupted`` by that signal, or the grader failed with ``failure``."""
    grading.close()
    grading.final = interrupted_results(interrupted) if interrupted is not None else \
        grader_failure_results(failure or "the grader failed")
    if grading.settings.results is not None:
        grading.write_results(grading.settings.results)


def _summary(terminalreporter: Any, config: pytest.Config, grading: GradingSession) -> None:
    """The feedback section (one block per failed test) and the score table."""
    scores = list(grading.scores.values())
    quiet = config.getoption("verbose") <= -2
    import_error = grading.import_error
    if config.getoption("tbstyle") == "no" and not quiet:
        failed = [score for score in scores if score.status not in ("passed", "not run")]
        if failed:
            terminalreporter.section("serving-lab feedback")
        if import_error:  # one cause, said once
            terminalreporter.write_line(for_terminal(import_error), red=True)
            terminalreporter.write_line("Every test fails until serving.py imports cleanly.")
            terminalreporter.write_line("")
            failed = []  # every test failed for that one reason
        blocks = _feedback_blocks(grading, failed,
                                  printed=config.getoption("capture") != "no")  # -s: live
        for block, shown in zip(blocks, cases_shown(blocks), strict=True):
            if block.title is not None:
                terminalreporter.write_line(for_terminal(block.title), bold=True)
            for line in block.body(shown):
                terminalreporter.write_line(for_terminal(line))
            if block.printed:
                terminalreporter.write_sep(
                    "-", f"what serving.py printed while the {block.function} tests ran")
                for line in block.printed:
                    terminalreporter.write_line(for_terminal(line))
            terminalreporter.write_line("")
        not_run = [score for score in scores if score.status == "not run"]
        if not_run:  # one line, not one block per test
            functions = ", ".join(dict.fromkeys(score.function for score in not_run))
            terminalreporter.write_line(for_terminal(shortened(
                f"not run: {len(not_run)} graded tests (of {functions})", MAX_REASON_CHARS)))
    terminalreporter.section("serving-lab score")
    if import_error and (quiet or config.getoption("tbstyle") != "no"):
        terminalreporter.write_line(for_terminal(import_error), red=True)
    for line in score_table(scores, grader_failure=grading.grader_failure):
        terminalreporter.write_line(for_terminal(line))
    if grading.oracle.golden:
        terminalreporter.write_line(PREVIEW_LINE)
    if quiet:  # pytest prints no counts at -qq: the score table's own line says them
        counts = Counter(score.status for score in scores)
        terminalreporter.write_line(", ".join(f"{counts[status]} {status}" for status in
                                              ("passed", "failed", "error", "skipped",
                                               "not run") if counts[status]))
        return
    if grading.settings.results is not None:
        terminalreporter.write_line(for_terminal(
            f"results written to {grading.settings.results}"))
    if grading.settings.html is not None:
        terminalreporter.write_line(for_terminal(
            f"feedback report written to {grading.settings.html}"
            + (" (a staff page: it shows the hidden tests' results)"
               if grading.settings.html_for == "staff" else "")))


def _live_output() -> Callable[[bytes], None]:
    """A writer of the submission's output chunks to this process's stdout, as they
    arrive (controls escaped, UTF-8 split across chunks decoded whole)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def write(chunk: bytes) -> None:
        sys.stdout.write(for_terminal(decoder.decode(chunk)))
        sys.stdout.flush()

    return write


def _feedback_blocks(grading: GradingSession, failed: list[TestScore], *, printed: bool
                     ) -> list[Block]:
    """The feedback section's blocks, in the tests' order: a function not written yet in
    one line; the failed per-track tests of one test function that say the same before
    their cases in one block (see :func:`graders.results.terminal.grouped_block`); any
    other failure as it is. What the submission printed goes under the first block of its
    function (when ``printed``: not under ``-s``, which showed it live)."""
    unwritten = _not_implemented(grading, failed)
    ran = {score.function for score in grading.scores.values() if score.status != "not run"}
    entries: list[tuple[TestScore, Block | tuple[str, ...] | None]] = []
    groups: dict[tuple[str, ...], list[tuple[str | None, FeedbackParts]]] = {}
    for score in failed:
        parts = grading.feedback_parts.get(score.nodeid)
        if score.function in unwritten:  # one line per function, not one per test
            if all(said.function != score.function for said, _ in entries):
                entries.append((score, None))
        elif parts is None or score.status != "failed":
            entries.append((score, plain_block(score.name, score.status, score.output)))
        else:
            key = group_key(score.nodeid, parts)
            if key not in groups:
                entries.append((score, key))
                groups[key] = []
            groups[key].append((score.track, parts))
    blocks = []
    for index, (score, entry) in enumerate(entries):
        if entry is None:  # every function not written yet, in one block where the first is
            if score.function in unwritten:
                lines = list(unwritten.values())
                start = start_line(unwritten, ran) if index == 0 else []
                blocks.append(Block(None, [*start, *lines]))
                unwritten.clear()
            continue
        if isinstance(entry, tuple):
            name = score.name.removesuffix(f" [{score.track}]") if score.track else score.name
            block = grouped_block(name, groups[entry])
        else:
            block = entry
        output = grading.printed.pop(score.function, "") if printed else ""
        if output:  # under its function's first failure
            block.function = score.function
            # a gutter: no printed line can pass for the grader's (a forged TOTAL)
            block.printed = [f"| {line}" for line in shortened(
                output.rstrip("\n"), MAX_FEEDBACK_CHARS).split("\n")]
        blocks.append(block)
    return blocks


def start_line(unwritten: Iterable[str], ran: Set[str]) -> list[str]:
    """Where a student starts when the first failed test is of a function not written yet:
    the first of the ``unwritten`` functions in serving.py (the contract's order), which
    needs none of the others, since a contract function calls only ones above it. Said
    only when every function above it had tests in this run (the functions that ``ran``):
    a selection (``-k queueing``) does not show whether those are written."""
    order = {name: index for index, name in enumerate(CONTRACT_FUNCTIONS)}
    first = min(unwritten, key=lambda name: order.get(name, len(order)))
    if any(name not in ran for name in CONTRACT_FUNCTIONS[:order.get(first, 0)]):
        return []
    return [f"Start with {first}: the first function of serving.py still to write, it "
            "needs none of the others."]


def _not_implemented(grading: GradingSession, failed: list[TestScore]) -> dict[str, str]:
    """The line that says, once for all its failed tests, that a function is not written
    yet, by function (only functions whose every visible case raised NotImplementedError)."""
    lines = {}
    for function in dict.fromkeys(score.function for score in failed):
        evidence = grading.evidences.get(function)
        if evidence is None or not evidence.not_implemented:
            continue
        count = sum(1 for score in failed if score.function == function)
        tests = "its test fails" if count == 1 else f"its {count} tests fail"
        lines[function] = f"{function} is {evidence.first_failure}; {tests} until it is written"
    return lines


class JsonReportMetadata:
    """Adds score and max_score to each test's pytest-json-report metadata (registered
    only when pytest-json-report is active): the points results.json writes
    (:func:`written_by_test`), set once every test has run."""

    def __init__(self, grading: GradingSession) -> None:
        self.grading = grading
        #: The graded tests' node ids in the grading (the suite's), by pytest's node id.
        self._test_ids: dict[str, str] = {}

    def pytest_json_runtest_metadata(self, item: pytest.Item,
                                     call: pytest.CallInfo[None]) -> dict[str, Any] | None:
        score = item.stash.get(SCORE_KEY, None)
        if score is None:
            return None
        self._test_ids[item.nodeid] = score.nodeid
        return {"score": rounded(score.earned), "max_score": rounded(score.max_score),
                "function": score.function, "track": score.track,
                "visibility": score.visibility}

    def pytest_json_modifyreport(self, json_report: dict[str, Any]) -> None:
        written = written_by_test(self.grading)
        for test in json_report.get("tests", []):
            points = written.get(self._test_ids.get(test.get("nodeid", ""), ""))
            metadata = test.get("metadata")
            if points is not None and isinstance(metadata, dict):
                metadata["score"], metadata["max_score"] = points
