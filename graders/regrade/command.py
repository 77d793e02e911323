"""``graders regrade SUBMISSIONS --out DIR``: grade a whole class in parallel, resumably,
and report on it.

Each submission is graded by ``graders grade`` in a job slot (see
:mod:`graders.regrade.slots`), in the slot's long-lived grading process (see
:mod:`graders.regrade.server`), bounded by ``--timeout``. Submissions already graded from the
same ``serving.py`` by the same grader are skipped unless ``--force``. Outputs, in DIR:
``submissions/<id>/results.json`` (with meta.json, grade.log and, with ``--pages``, the
student's ``feedback.html``), ``grades.csv``, and the class report: ``class.html`` (see
:mod:`graders.regrade.classpage`), ``report.md``, ``report.json`` and ``histogram.png``;
with them ``run.json`` (this run, for the next to compare with) and, when there is an
earlier run in DIR or ``--compare``'s, ``changes.csv`` (see
:mod:`graders.regrade.changes`).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import csv
import hashlib
import io
import math
import os
import queue
import shlex
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from graders.errors import GRADER_FAILED_EXIT, GraderError, SubmissionError
from graders.escaping import escape_controls, for_terminal, single_line
from graders.grading.mistakes import Mistake, load_catalogue
from graders.plugin.settings import (
    flag_value,
    grade_changing_options,
    grade_flag,
    read_secret,
)
from graders.plugin.submission import read_submission
from graders.regrade.changes import (
    CHANGES_NAME,
    RUN_NAME,
    TEST_CHANGES_NAME,
    changed_tests_table,
    changes_table,
    compare,
    point_changes,
    read_run,
    run_record,
    run_settings,
    setting_changes,
)
from graders.regrade.classlist import join, read_roster, with_submitters
from graders.regrade.classpage import PAGE_NAME, build_class_page
from graders.regrade.classview import (
    anonymous_label,
    change_rows,
    cluster_rows,
    label_key,
    pages_written,
    student_rows,
    with_classes,
    without_names,
)
from graders.regrade.clusters import cluster
from graders.regrade.gradebook import gradebook_outputs
from graders.regrade.job import JobContext, run_job
from graders.regrade.progress import Progress
from graders.regrade.published import check_settings
from graders.regrade.report import (
    GradedSubmission,
    class_report,
    grade_table,
    markdown,
    parse_time,
)
from graders.regrade.roster import (
    ClassSubmission,
    discover,
    duplicate_sid_warnings,
    export_inside,
    submission_file,
    visible_name,
)
from graders.regrade.sharedcode import read_sources, shared_code_rows
from graders.regrade.slots import Slot, claim_slots, release_slots
from graders.regrade.state import (
    RESULTS_NAME,
    JobRecord,
    grader_fingerprint,
    read_record,
    sha256,
    up_to_date,
)
from graders.results.files import OutputPathError, check_output_folder
from graders.results.reports import read_valid_results, write_json_atomically
from graders.sandbox.cleanup import process_alive, remove_tree, report_problems
from graders.sandbox.confinement import confinement_gap
from graders.sandbox.interrupts import GradingInterrupted, Interruption
from graders.sandbox.platforms import capabilities, running_as_root
from graders.sandbox.privileges import close_to_others
from graders.sandbox.runner import Limits
from graders.sandbox.seats import SEATS, seated
from graders.versions import drift_listed, regrade_drift_warning

#: Seconds one submission may take in all: the runner's bound on a submission that hangs
#: everywhere, plus a generous allowance for the rest of its grading on a busy machine.
DEFAULT_TIMEOUT_S = float(math.ceil(Limits().worst_case_s + 120))


def needs_linux(command: str) -> str | None:
    """One line saying ``command`` needs Linux, when the hardened path is unavailable."""
    found = capabilities()
    if found.hardened:
        return None
    return (f"graders {command} needs Linux (it locks job slots, sweeps /proc and drops "
            f"privileges; here: {found.why_portable()}); use 'graders grade' for one "
            "submission at a time")


def run_regrade(args: argparse.Namespace) -> int:
    """Grade every submission below ``args.submissions``; 0 when the batch completed, and
    128 + the signal's number with one line when Ctrl-C (130) or SIGTERM (143) stops it,
    in whichever phase (the checks, the gradings, the reports)."""
    with _interrupts_as_keyboard_interrupt():
        try:
            return _regrade(args)
        except KeyboardInterrupt as error:
            sys.stderr.write("graders: regrade interrupted; run the same command again to "
                             "resume\n")
            return Interruption().exit_code(error)


def _regrade(args: argparse.Namespace) -> int:
    """:func:`run_regrade`'s work."""
    refusal = needs_linux("regrade")  # job-slot locks, the /proc sweep, the privilege drop
    if refusal is not None:
        raise GraderError(refusal)
    # absolute once, here: the slots' grading processes run in folders of their own
    root, out = Path(args.submissions).absolute(), Path(args.out).absolute()
    # refused before anything: a link, a file, a folder of another user or one that others
    # can write (see graders.results.files); a missing one is made below, and checked again
    check_output_folder(out, "--out", create=False, allow_link=False)
    _refuse_out_inside(root, out)
    export = export_inside(root, exclude=out)
    if export is not None:  # "Export Submissions", unzipped: one folder holding the class
        sys.stderr.write(f"graders: note: {visible_name(str(root))!r} holds one Gradescope "
                         f"export, {visible_name(export.name)!r}: grading the submissions in "
                         "it\n")
        root = export
    _refuse_inputs(root, out, args.tracks)
    if not args.no_histogram:
        from graders.regrade.histogram import check_available

        check_available()
    options = grade_options(args)
    _check_confinement(allow_unconfined=args.allow_unconfined)
    catalogue = load_catalogue(Path(args.mistakes) if args.mistakes else None)
    if args.due and parse_time(args.due) is None:
        raise GraderError(f"--due {args.due!r} is not a time: give e.g. "
                          "'2024-03-01 23:59 -08:00' (ISO 8601; UTC without an offset)")
    submissions, warnings = discover(root, exclude=out)
    classlist = join(submissions, read_roster(Path(args.roster)) if args.roster else None)
    submissions = with_submitters(submissions, classlist)  # a Classroom class gets names
    for warning in [*warnings, *classlist.warnings]:
        sys.stderr.write(f"graders: warning: {warning}\n")
    drifted = regrade_drift_warning()  # once for the class; its gradings do not repeat it
    if drifted is not None:
        sys.stderr.write(f"graders: warning: {drifted}\n")
    if not submissions:
        raise SubmissionError(f"no submissions in {str(root)!r}: expected a folder per "
                              "submission (e.g. a Gradescope export) or *.py files")
    check_output_folder(out, "--out", allow_link=False)
    baseline = _baseline(out, args.compare)  # read before any grading rewrites OUT
    settings = _settings(args, options)
    if args.compare is None:  # OUT's grades are published: never replaced unasked
        differ = check_settings(out, baseline[0], settings, accepted=args.new_settings)
        if differ is not None:
            sys.stderr.write(f"graders: note: {differ}\n")
    closed = _close_class_folders(root, out)
    started = time.monotonic()
    fingerprint = grader_fingerprint(tracks=Path(args.tracks) if args.tracks else None,
                                     options=[*_fingerprint_options(options),
                                              *(["--pages"] if args.pages else [])])
    context = JobContext(out=out, grader_sha256=fingerprint,
                         timeout_s=args.timeout or DEFAULT_TIMEOUT_S,
                         grade_options=options, pages=args.pages)
    pending = [s for s in submissions
               if args.force or not _is_up_to_date(s, context)]
    progress = Progress(len(submissions), sys.stderr, skipped=len(submissions) - len(pending))
    with _interrupts_as_keyboard_interrupt():
        try:
            _grade_all(pending, context, args.jobs, progress)
        except KeyboardInterrupt as error:
            progress.close()
            for line in closed:  # said in the summary otherwise, which this run never prints
                sys.stderr.write(f"graders: note: {line}\n")
            sys.stderr.write("graders: regrade interrupted; run the same command again to "
                             "resume\n")
            return Interruption().exit_code(error)
    progress.close()
    entries = [_graded(submission, context, due=args.due or "") for submission in submissions]
    for warning in duplicate_sid_warnings(entries):
        sys.stderr.write(f"graders: warning: {warning}\n")
    current = run_record(entries, settings, {
        submission.id: record.submission_sha256 for submission in submissions
        if (record := read_record(context.folder(submission))) is not None})
    written, failures = write_outputs(out, entries, histogram=not args.no_histogram,
                                      names=args.names, catalogue=catalogue,
                                      run=(current, *baseline),
                                      sources=read_sources(submissions))
    books, notes, failed = gradebook_outputs(out, entries, classlist, args.gradebook or (),
                                             args.gradebook_column)
    written, failures = [*written, *books], [*failures, *failed]
    _summary(entries, len(pending), time.monotonic() - started, written, closed)
    for note in notes:  # what the gradebook files leave out, or the LMS may not match
        sys.stderr.write(f"graders: warning: {note}\n")
    for failure in failures:  # the grader's own failure, never a student's: said, not hidden
        sys.stderr.write(f"graders: error: {failure}\n")
    if failures:
        return GRADER_FAILED_EXIT
    unfinished = [entry for entry in entries if entry.status in RETRIED]
    if unfinished:  # never a silent success: these have no score yet
        sys.stderr.write(f"graders: error: {len(unfinished)} of {len(entries)} submissions "
                         "have no score: the grader failed or ran out of time on them (their "
                         "reasons are above); run the same command again to grade them "
                         "again\n")
        return GRADER_FAILED_EXIT
    return 0


def _baseline(out: Path, compare_with: str | None) -> tuple[dict[str, Any] | None, str]:
    """The run this one is compared with, and its folder's name: ``--compare DIR``'s (which
    must hold one), else OUT's previous run (none the first time)."""
    if compare_with is None:
        return read_run(out), out.name
    folder = Path(compare_with)
    previous = read_run(folder)
    if previous is None:
        raise GraderError(f"--compare {compare_with!r} holds no {RUN_NAME}: give the --out "
                          "folder of an earlier graders regrade (each one records its run "
                          "there)")
    return previous, folder.name


def _settings(args: argparse.Namespace, options: list[str]) -> dict[str, Any]:
    """What decided this run's grades besides the submissions (``run.json``)."""
    secret = read_secret(Path(args.secret_file)) if args.secret_file else None
    return run_settings(tracks=Path(args.tracks) if args.tracks else None, options=options,
                        secret=secret)


def _refuse_out_inside(root: Path, out: Path) -> None:
    """--out is not inside the submissions folder: every later regrade of that folder, or
    of the Gradescope export in it, would find it among the submissions."""
    real_root, real_out = Path(os.path.realpath(root)), Path(os.path.realpath(out))
    if real_out != real_root and real_out.is_relative_to(real_root):
        raise OutputPathError(f"--out {str(out)!r} lies inside the submissions folder "
                              f"{str(root)!r}: a later regrade of it would take the outputs "
                              "for a submission; choose a folder outside it (e.g. beside it)")


def _refuse_inputs(root: Path, out: Path, tracks: str | None) -> None:
    """--out is neither the class nor a folder that holds it, nor in the tracks folder or
    the grader's code (see :mod:`graders.results.overlaps`)."""
    from graders.results.overlaps import grader_folders, refuse_overlaps
    from graders.trackfiles.tracks import default_tracks_dir

    real_root, real_out = Path(os.path.realpath(root)), Path(os.path.realpath(out))
    if real_root.is_relative_to(real_out):
        raise OutputPathError(f"--out {str(out)!r} holds the submissions {str(root)!r}: the "
                              "regrade would write among them; choose another folder")
    folders = grader_folders()
    with contextlib.suppress(GraderError):
        folders["the tracks folder"] = Path(tracks) if tracks else default_tracks_dir()
    refuse_overlaps({"--out": out}, {}, folders)


def _check_confinement(*, allow_unconfined: bool) -> None:
    """Refuse to grade a class whose workers would run unconfined, unless the instructor
    accepts the risk by name (``--allow-unconfined``); then say so once."""
    gap = confinement_gap(running_as_root())
    if gap is None:
        return
    if not allow_unconfined:
        raise GraderError(
            f"refusing to grade a class without confinement: {gap}. A hostile submission "
            "could read your files, rewrite classmates' results and reach the network. "
            "Install bubblewrap or enable user namespaces, or pass --allow-unconfined to "
            "take that risk")
    sys.stderr.write(f"graders: warning: grading without confinement (--allow-unconfined): "
                     f"{gap}\n")


#: Statuses of a submission whose grading did not complete through no fault of its own:
#: it has no score, and the next run grades it again.
RETRIED = ("grader_failed", "timed_out", "missing")


#: Why a regrade run as root closes the class's folders (said on stderr and in the summary).
CLOSED_WHY = ("so that student code, run as a sandbox user, cannot read the class's "
              "submissions or results")


def _close_class_folders(root: Path, out: Path) -> list[str]:
    """As root, close the class's submissions and results to other users: a sandbox user
    must not read (or run) a classmate's serving.py or results while it is graded. The
    lines that say what was changed, and how to undo it."""
    if not running_as_root():
        return []
    out.mkdir(mode=0o755, parents=True, exist_ok=True)
    lines = []
    for path in (root, out):
        mode = path.stat().st_mode & 0o777
        if not mode & 0o007:
            continue
        try:
            close_to_others([path])
        except OSError as error:  # a read-only mount: graded all the same, and said
            lines.append(f"could not close {str(path)!r} to other users (mode {mode:o}: "
                         f"{error.strerror or error}); its files stay readable to local "
                         "users, and the workers' confinement alone keeps them from it")
            continue
        # said once, in the summary (or on stderr if the regrade is interrupted before it)
        lines.append(f"closed {str(path)!r} to other users (mode {mode:o} -> "
                     f"{path.stat().st_mode & 0o777:o}) {CLOSED_WHY}; to reopen it after "
                     f"the regrade: chmod o+rx {shlex.quote(str(path))}")
    return lines


def grade_options(args: argparse.Namespace) -> list[str]:
    """The ``graders grade`` options every job shares, validated once up front."""
    from graders.trackfiles.tracks import default_tracks_dir, load_tracks

    options: list[str] = []
    if args.tracks:
        load_tracks(args.tracks)
        options += ["--tracks", str(Path(args.tracks).resolve())]
    else:  # as graders grade does: no job could grade without them (an installed grader)
        load_tracks(default_tracks_dir())
    for option in grade_changing_options():  # each as graders grade and the exports take it
        value = getattr(args, option.name)
        if value is not None:
            flag_value(grade_flag(option), value, option.parse)
            options += [grade_flag(option), value]
    if args.secret_file:
        secret = Path(args.secret_file).resolve()
        read_secret(secret)  # readable and not empty, before any grading
        options += ["--secret-file", str(secret)]
    return options


def _fingerprint_options(options: list[str]) -> list[str]:
    """The options as the regrade's fingerprint sees them: a rotated secret, even in the
    same file, makes every submission out of date."""
    if "--secret-file" not in options:
        return options
    secret = read_secret(Path(options[options.index("--secret-file") + 1]))
    return [*options, f"secret-sha256={hashlib.sha256(secret).hexdigest()}"]


def _is_up_to_date(submission: ClassSubmission, context: JobContext) -> bool:
    try:
        data = read_submission(submission_file(submission))
    except SubmissionError:
        return False
    return up_to_date(context.folder(submission), sha256(data), context.grader_sha256)


@contextlib.contextmanager
def _interrupts_as_keyboard_interrupt() -> Iterator[None]:
    """Treat SIGTERM like Ctrl-C, so that running gradings are killed either way; the
    interrupt names its signal, for the exit code."""
    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise GradingInterrupted(signum)

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _grade_all(pending: Sequence[ClassSubmission], context: JobContext, jobs: int,
               progress: Progress) -> None:
    """Run ``pending`` in up to ``jobs`` slots, updating ``progress`` as jobs finish."""
    if not pending:
        return
    work, private = _work_folders(context.out)
    slots: list[Slot] = []
    if seated():  # one grading a seat at a time: more slots than seats would only wait
        context.take_seats()
        if jobs > SEATS:
            sys.stderr.write(f"graders: note: without namespaces each grading takes one of "
                             f"{SEATS} seats (docs/security.md), so --jobs {jobs} runs "
                             f"{SEATS} at a time\n")
            jobs = SEATS
    try:
        slots = claim_slots(min(jobs, len(pending)), work, private)
        free: queue.Queue[Slot] = queue.Queue()
        for slot in slots:
            free.put(slot)

        def job(submission: ClassSubmission) -> JobRecord | None:
            slot = free.get()
            try:
                return run_job(submission, slot, context)
            finally:
                free.put(slot)

        with concurrent.futures.ThreadPoolExecutor(max_workers=len(slots)) as pool:
            futures = {pool.submit(job, submission): submission for submission in pending}
            try:
                _follow(futures, progress)
            except BaseException:
                context.stop.set()
                context.kill_running()
                for future in futures:
                    future.cancel()
                raise
    finally:
        context.stop_processes()
        release_slots(slots)
        report_problems(remove_tree(work) + remove_tree(private), what="regrade clean-up")


#: Prefixes of a regrade's folders: its slots' temp folders (in the temp folder, where the
#: sandbox users reach their boxes) and its jobs' private folders (in OUT, root's alone).
WORK_PREFIX = "serving-regrade-"
PRIVATE_PREFIX = ".regrade-jobs-"


def _work_folders(out: Path) -> tuple[Path, Path]:
    """This regrade's work folder (temp folder, 0711: sandbox users may enter their boxes
    but list nothing) and private folder (``OUT/.regrade-jobs-PID-*``, 0700: staged
    submissions, results and logs, out of reach and out of the space sandbox users can
    fill). Folders of earlier regrades that were killed (their pid is gone) are removed."""
    temp = Path(tempfile.gettempdir())
    for parent, prefix in ((temp, WORK_PREFIX), (out, PRIVATE_PREFIX)):
        with contextlib.suppress(OSError):
            for entry in parent.iterdir():
                pid, dash, _ = entry.name.removeprefix(prefix).partition("-")
                if entry.name.startswith(prefix) and dash and pid.isdigit() \
                        and not process_alive(int(pid)) and entry.lstat().st_uid == os.geteuid():
                    report_problems(remove_tree(entry), what="removing an abandoned regrade")
    work = Path(tempfile.mkdtemp(prefix=f"{WORK_PREFIX}{os.getpid()}-"))
    work.chmod(0o711)
    out.mkdir(mode=0o755, parents=True, exist_ok=True)
    private = Path(tempfile.mkdtemp(prefix=f"{PRIVATE_PREFIX}{os.getpid()}-", dir=out))
    return work, private


def _follow(futures: dict[concurrent.futures.Future[JobRecord | None], ClassSubmission],
            progress: Progress) -> None:
    waiting = set(futures)
    while waiting:
        done, waiting = concurrent.futures.wait(
            waiting, timeout=1.0, return_when=concurrent.futures.FIRST_COMPLETED)
        for future in done:
            try:
                record = future.result()
            except Exception as error:  # a bug or a full disk: report it, go on with the rest
                sys.stderr.write(f"\ngraders: error: regrading {futures[future].id} failed: "
                                 f"{type(error).__name__}: {error}\n")
                record = None
            progress.advance(None if record is None else record.status)
        progress.show()


def _graded(submission: ClassSubmission, context: JobContext, *, due: str = ""
            ) -> GradedSubmission:
    folder = context.folder(submission)
    record, results = read_record(folder), read_valid_results(folder / RESULTS_NAME)
    times = {"created_at": submission.created_at, "due": submission.due or due}
    if record is not None and record.status in RETRIED:  # no score, and the reason why
        return GradedSubmission(submission.id, submission.submitters or record.submitters,
                                record.status, record.reason, {}, **times)
    if record is None or results is None:
        return GradedSubmission(submission.id, submission.submitters, "missing",
                                "no results: its grading did not finish", {}, **times)
    return GradedSubmission(submission.id, submission.submitters or record.submitters,
                            record.status, record.reason, results, **times)


#: This run's record, the run it is compared with (None: none) and that one's folder name.
RunPair = tuple[dict[str, Any], dict[str, Any] | None, str]


def write_outputs(out: Path, entries: Sequence[GradedSubmission], *, histogram: bool,
                  names: bool = False, catalogue: Sequence[Mistake] | None = None,
                  run: RunPair | None = None, sources: Mapping[str, str] | None = None
                  ) -> tuple[list[Path], list[str]]:
    """Write grades.csv, report.json (with the mistake clusters and, given ``run``, what
    changed), changes.csv (when there is a run to compare with), class.html, histogram.png,
    report.md and, last, run.json; return the paths written and a line for each output
    that could not be (one failing output never stops the others). Submission names appear
    in the clusters, the changes and on the class page only with ``names``."""
    written: list[Path] = []
    failures: list[str] = []

    def attempt(path: Path, write: Callable[[], object]) -> bool:
        try:
            write()
        except Exception as error:  # a bug of the grader's, or a full disk: said, not fatal
            failures.append(f"writing {path} failed: {type(error).__name__}: {error}")
            return False
        written.append(path)
        return True

    attempt(out / "grades.csv", lambda: _write_csv(out / "grades.csv", grade_table(entries)))
    report: dict[str, Any] = {}

    moves = compare(run[1], run[0]) if run is not None and run[1] is not None else None
    if moves is not None:
        attempt(out / CHANGES_NAME, lambda: _write_csv(out / CHANGES_NAME,
                                                       changes_table(moves, entries)))
        attempt(out / TEST_CHANGES_NAME, lambda: _write_csv(out / TEST_CHANGES_NAME,
                                                            changed_tests_table(moves)))
    else:  # nothing to compare with: an earlier run's changes would say otherwise
        for name in (CHANGES_NAME, TEST_CHANGES_NAME):
            try:
                (out / name).unlink(missing_ok=True)
            except OSError as error:
                failures.append(f"removing the earlier {out / name} failed: {error}")

    def summary() -> None:
        built, left_out = guarded_report(
            entries, lambda chosen: _class_summary(out, chosen, mistakes, names=names,
                                                   sources=sources))
        failures.extend(left_out)
        report.update(built)
        drifted = drift_listed()
        if drifted is not None:  # said in report.md and on the class page too
            report["version_drift"] = drifted
        if run is not None:
            report["changes"] = _changes(run, moves, key=label_key(out), names=names)
        write_json_atomically(out / "report.json", report)

    mistakes = load_catalogue() if catalogue is None else catalogue

    if not attempt(out / "report.json", summary):
        return written, failures  # the page, the histogram and report.md are drawn from it
    attempt(out / PAGE_NAME, lambda: _write_text(out / PAGE_NAME,
                                                 build_class_page(report, names=names)))
    picture = None
    if histogram:
        from graders.regrade.histogram import write_histogram

        drawn = out / "histogram.png"
        if attempt(drawn, lambda: write_histogram(
                drawn, report["histogram"]["edges"], report["histogram"]["counts"],
                title=f"Scores of {report['graded']} graded submissions",
                apart=report["histogram"]["apart"])):
            picture = drawn
    else:  # an earlier run's picture would stand beside this run's report as its own
        try:
            (out / "histogram.png").unlink(missing_ok=True)
        except OSError as error:
            failures.append(f"removing the earlier {out / 'histogram.png'} failed: {error}")
    attempt(out / "report.md", lambda: _write_text(
        out / "report.md",
        markdown(report, histogram_file=picture.name if picture else None)))
    if run is not None and not failures:  # the next run compares itself with this one
        attempt(out / RUN_NAME, lambda: write_json_atomically(out / RUN_NAME, run[0]))
    return written, failures


def _changes(run: RunPair, moves: Sequence[Any] | None, *, key: bytes, names: bool
             ) -> dict[str, Any]:
    """report.json's ``changes``: the run compared with, the settings that differ, and
    every submission that moved (see :mod:`graders.regrade.changes`)."""
    current, previous, folder = run
    if previous is None or moves is None:
        return {"compared_with": None, "settings": [], "moves": []}
    return {"compared_with": {"folder": escape_controls(folder),
                              "finished_at": str(previous.get("finished_at", ""))},
            "settings": setting_changes(previous.get("settings", {}),
                                        current.get("settings", {})),
            "points": point_changes(previous, current),
            "submissions": len(current.get("submissions", {})),
            "unchanged_with_test_changes": sum(not move.changed for move in moves),
            "moves": change_rows([move for move in moves if move.changed], key=key,
                                 names=names)}


def _write_csv(path: Path, rows: Sequence[Sequence[str]]) -> None:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    _write_text(path, buffer.getvalue())


def _class_summary(out: Path, entries: Sequence[GradedSubmission],
                   catalogue: Sequence[Mistake], *, names: bool,
                   sources: Mapping[str, str] | None = None) -> dict[str, Any]:
    """report.json's content for ``entries``: the class report, its mistake clusters,
    the groups of alike submissions (given their ``sources``) and, with ``names``, its
    students."""
    pages = pages_written(out, entries)
    found = cluster(entries, catalogue)
    key = label_key(out)
    report = with_classes(
        class_report(entries) if names else without_names(class_report(entries), entries,
                                                           key=key),
        cluster_rows(found, sum(entry.graded for entry in entries), key=key,
                     names=names, pages=pages),
        student_rows(entries, pages) if names else None)
    if sources is None:
        return report
    return shared_code_rows(report, found, entries, sources, lambda ident: escape_controls(
        ident) if names else anonymous_label(key, ident))


def guarded_report(entries: Sequence[GradedSubmission],
                   build: Callable[[Sequence[GradedSubmission]], dict[str, Any]]
                   ) -> tuple[dict[str, Any], list[str]]:
    """``build(entries)``, guarded like the grading: when it fails, each submission is
    tried alone, and those whose part of the report fails are left out of it, each with
    a line saying why (the rest of the class still gets its report)."""
    try:
        return build(entries), []
    except Exception:  # found below, submission by submission
        pass
    kept: list[GradedSubmission] = []
    left_out: list[str] = []
    for entry in entries:
        try:
            build([entry])
        except Exception as error:  # one submission never stops the class report
            left_out.append(f"the class report leaves out {visible_name(entry.id)!r}: "
                            f"{type(error).__name__}: "
                            f"{single_line(str(error))[:300]}")
        else:
            kept.append(entry)
    return build(kept), left_out


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    # a stray lone surrogate (bytes that were not UTF-8) is written as a visible escape
    with os.fdopen(handle, "w", encoding="utf-8", errors="backslashreplace",
                   newline="") as stream:
        stream.write(text)
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)


def _summary(entries: Sequence[GradedSubmission], regraded: int, elapsed_s: float,
             written: Sequence[Path], closed: Sequence[str] = ()) -> None:
    rejected = [entry for entry in entries if entry.status == "rejected"]
    failed = [entry for entry in entries if not entry.graded and entry.status != "rejected"]
    lines = [f"{len(entries)} submissions: {regraded} processed now, "
             f"{len(entries) - regraded} up to date, "
             + (f"{len(rejected)} rejected (0 points), " if rejected else "")
             + f"{len(failed)} not graded ({elapsed_s:.1f} s)"]
    shown = [*((entry, f"rejected: {entry.id}") for entry in rejected),
             *((entry, f"not graded: {entry.id} ({entry.status})") for entry in failed)]
    lines += [f"  {what}: {entry.reason}" for entry, what in shown[:10]]
    if len(shown) > 10:
        lines.append(f"  ... and {len(shown) - 10} more (see report.md)")
    lines += [f"  {line}" for line in closed]
    lines.append("wrote " + ", ".join(str(path) for path in written))
    sys.stdout.write(for_terminal("\n".join(lines)) + "\n")
