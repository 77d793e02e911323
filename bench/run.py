"""Speed of the grader, as ratios against baselines measured in the same run.

Usage: ``python bench/run.py [--repeat N] [--calls N] [--submissions N] [--no-suite]
[--write bench/RESULTS.md]``

- grading: ``graders grade`` on the correct corpus submission, against the import floor
  ``python -c "import pytest, pint, hypothesis"`` (target: within 2x);
- the student's ``pytest``: the student bundle (``graders export student``) installed in a
  fresh virtual environment, graded by plain ``pytest`` on the same correct ``serving.py``,
  against the same floor (target: within 2x);
- the page: ``graders grade --html``, against the grading without it (target: within 1.5x);
- runner: student calls per second through the worker process, one at a time and
  pipelined (``StudentRunner.call_many``), against the same calls made in-process;
- reference: ``queueing_latency`` at 10,000 replicas, against one at 1 replica;
- regrade: ``graders regrade`` of N generated submissions (every other one correct, the
  rest cycling through the corpus bugs) at ``--jobs 1`` and ``--jobs 2``, in submissions
  per hour (target at ``--jobs 2`` on 2 cores: 6,000 an hour, 10,000 the goal);
- the worker's start: from starting a worker to its first answer, with pint preloaded (the
  visible tests' worker) and without (the hidden tests' worker), against the floor;
- the default test suite's wall time (``--no-suite`` leaves it out; target: 5 minutes).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
import venv
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "corpus"
CORRECT = CORPUS / "correct" / "serving.py"
#: Text after this heading in the results file is kept when it is rewritten.
NOTES_HEADING = "## Notes"


def interleaved(commands: list[list[str]], repeat: int, cwd: list[Path | None]
                ) -> list[list[float]]:
    """Wall seconds of each command, over ``repeat`` rounds that run each once, after one
    warm-up round."""
    times: list[list[float]] = [[] for _ in commands]
    for round_number in range(repeat + 1):
        for index, command in enumerate(commands):
            started = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True, cwd=cwd[index])
            if round_number:
                times[index].append(time.perf_counter() - started)
    return times


def calls_per_second(call: Callable[[], object], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        call()
    return calls / (time.perf_counter() - started)


def runner_rates(calls: int) -> tuple[float, float, float]:
    """(worker calls/s one at a time, pipelined, in-process calls/s) for erlang_c on a
    16-replica fleet."""
    from graders.grading.cases import RESULT_FIELDS
    from graders.sandbox.runner import CallRequest, StudentRunner

    fields = RESULT_FIELDS["erlang_c"]
    with StudentRunner(CORRECT.read_bytes()) as runner:
        runner.call("erlang_c", (200.0, 20.0, 16), fields=fields)
        remote = calls_per_second(
            lambda: runner.call("erlang_c", (200.0, 20.0, 16), fields=fields), calls)
        started = time.perf_counter()
        for _ in runner.call_many([CallRequest("erlang_c", (200.0, 20.0, 16), None, fields)]
                                  * calls):
            pass
        pipelined = calls / (time.perf_counter() - started)
    namespace: dict[str, object] = {}
    exec(compile(CORRECT.read_text(), str(CORRECT), "exec"), namespace)
    erlang_c: Callable[..., object] = namespace["erlang_c"]  # type: ignore[assignment]
    local = calls_per_second(lambda: erlang_c(200.0, 20.0, 16), calls)
    return remote, pipelined, local


def worker_start_times(repeat: int) -> tuple[float, float]:
    """Median seconds from starting a worker to its first answer (it has imported the
    submission): with pint preloaded, as the visible tests' worker starts, and without, as
    the hidden tests' worker does. As root, under a sandbox user, as a grading runs it."""
    from graders.sandbox.platforms import running_as_root
    from graders.sandbox.privileges import claim_sandbox_user
    from graders.sandbox.runner import StudentRunner

    sandbox = claim_sandbox_user() if running_as_root() else None
    code = CORRECT.read_bytes()
    medians = []
    try:
        for preload in (True, False):
            seconds = []
            for round_number in range(repeat + 1):
                with StudentRunner(code, sandbox=sandbox) as runner:
                    started = time.perf_counter()
                    runner.start(preload_pint=preload)
                    runner.call("erlang_c", (200.0, 20.0, 16))
                    if round_number:
                        seconds.append(time.perf_counter() - started)
            medians.append(statistics.median(seconds))
    finally:
        if sandbox is not None:
            sandbox.release()
    return medians[0], medians[1]


def suite_seconds() -> float:
    """Wall seconds of the default test suite (``python -m pytest -q``, slow tests left out),
    run once."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-q"], cwd=REPO,
                   check=True, capture_output=True)
    return time.perf_counter() - started


def student_bundle(scratch: Path) -> tuple[Path, Path]:
    """The student bundle with the correct ``serving.py``, installed as its README says
    (``pip install -e .``) in a fresh virtual environment; (bundle folder, its pytest)."""
    bundle = scratch / "bundle"
    subprocess.run([sys.executable, "-m", "graders", "export", "student", str(bundle)],
                   check=True, capture_output=True)
    (bundle / "serving.py").write_bytes(CORRECT.read_bytes())
    environment = scratch / "venv"
    venv.EnvBuilder(with_pip=True).create(environment)
    python = environment / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "-e", "."], cwd=bundle,
                   check=True, capture_output=True)
    return bundle, environment / "bin" / "pytest"


def reference_times() -> tuple[float, float]:
    """Median seconds of reference queueing_latency at 10,000 and at 1 replica, 80 % load."""
    from reference import queueing_latency

    def at(replicas: int) -> float:
        arrival = 0.8 * replicas * 1000.0 / 5.0
        runs = timeit.repeat(lambda: queueing_latency(arrival_qps=arrival, service_ms=5.0,
                                                      replicas=replicas), number=20, repeat=7)
        return statistics.median(runs) / 20

    return at(10_000), at(1)


def generate_class(folder: Path, count: int) -> None:
    """``count`` submission folders: every other one correct, the others cycling through
    the corpus bugs; each one's text is unique (so none is a copy of another)."""
    buggy = sorted(p.name for p in CORPUS.iterdir()
                   if (p / "serving.py").is_file() and p.name != "correct")
    for index in range(count):
        name = "correct" if index % 2 == 0 else buggy[(index // 2) % len(buggy)]
        target = folder / f"submission_{index:04d}"
        target.mkdir(parents=True)
        source = (CORPUS / name / "serving.py").read_text(encoding="utf-8")
        (target / "serving.py").write_text(f"{source}\n# generated submission {index}: {name}\n",
                                           encoding="utf-8")


def regrade_times(count: int) -> tuple[float, float, bool]:
    """Wall seconds of ``graders regrade`` of ``count`` submissions at --jobs 1 and 2, and
    whether both wrote the same grades.csv."""
    with tempfile.TemporaryDirectory(prefix="bench-regrade-") as scratch:
        base = Path(scratch)
        base.chmod(0o755)  # the sandbox users must reach their slots' boxes
        generate_class(base / "class", count)
        seconds, sheets = [], []
        for jobs in (1, 2):
            out = base / f"out-{jobs}"
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "graders", "regrade", str(base / "class"),
                            "--out", str(out), "--jobs", str(jobs)],
                           check=True, capture_output=True)
            seconds.append(time.perf_counter() - started)
            sheets.append((out / "grades.csv").read_text(encoding="utf-8"))
    return seconds[0], seconds[1], sheets[0] == sheets[1]


def kept_notes(path: Path) -> list[str]:
    """The notes section of an existing results file (written by hand), if any."""
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    return text[text.index(NOTES_HEADING):].splitlines() if NOTES_HEADING in text else []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per command")
    parser.add_argument("--calls", type=int, default=5000, help="runner calls to time")
    parser.add_argument("--submissions", type=int, default=100,
                        help="generated submissions to regrade (0: skip the regrade)")
    parser.add_argument("--suite", action=argparse.BooleanOptionalAction, default=True,
                        help="time the default test suite too (about 3 minutes)")
    parser.add_argument("--write", metavar="FILE", help="also write a Markdown report here")
    args = parser.parse_args()

    floor_command = [sys.executable, "-c", "import pytest, pint, hypothesis"]
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        results = ["--results", str(folder / "results.json")]
        grade_command = [sys.executable, "-m", "graders", "grade", str(CORRECT), *results]
        html_command = [*grade_command, "--html", str(folder / "page.html")]
        bundle, bundle_pytest = student_bundle(folder)
        # interleaved, one of each per round, so that a busy moment costs every measure
        floor, grade, student, html = interleaved(
            [floor_command, grade_command, [str(bundle_pytest), "-q"], html_command],
            args.repeat, cwd=[None, None, bundle, None])
    remote, pipelined, local = runner_rates(args.calls)
    visible_start, hidden_start = worker_start_times(args.repeat)
    big, small = reference_times()
    regrade = regrade_times(args.submissions) if args.submissions else None
    floor_s, grade_s = statistics.median(floor), statistics.median(grade)
    student_s, html_s = statistics.median(student), statistics.median(html)
    rows = [
        ("import floor (pytest, pint, hypothesis)", f"{floor_s:.3f} s", "1.00x (baseline)"),
        ("graders grade of a correct submission", f"{grade_s:.3f} s",
         f"{grade_s / floor_s:.2f}x the floor (target <= 2x)"),
        ("student's pytest in the bundle, same submission", f"{student_s:.3f} s",
         f"{student_s / floor_s:.2f}x the floor (target <= 2x)"),
        ("graders grade --html (the feedback page)", f"{html_s:.3f} s",
         f"{html_s / grade_s:.2f}x the grading without it (target <= 1.5x)"),
        ("student calls through the worker, one by one", f"{remote:,.0f} calls/s",
         f"{local / remote:.1f}x slower than in-process ({local:,.0f}/s); target >= 2,000/s"),
        ("student calls through the worker, pipelined", f"{pipelined:,.0f} calls/s",
         f"{pipelined / remote:.2f}x one by one"),
        ("reference queueing_latency, 10,000 replicas", f"{big * 1e3:.3f} ms",
         f"{big / small:.0f}x one replica ({small * 1e6:.1f} us)"),
        ("worker start to first answer, pint preloaded (visible)",
         f"{visible_start * 1e3:.1f} ms", f"{visible_start / floor_s:.2f}x the floor"),
        ("worker start to first answer, no pint (hidden)", f"{hidden_start * 1e3:.1f} ms",
         f"{hidden_start / floor_s:.2f}x the floor; started while the invariants run"),
    ]
    if regrade is not None:
        one, two, same = regrade
        count = args.submissions
        rows += [
            (f"regrade of {count} submissions, --jobs 1", f"{one:.1f} s",
             f"{count / one * 3600:,.0f} submissions/hour"),
            (f"regrade of {count} submissions, --jobs 2", f"{two:.1f} s",
             f"{count / two * 3600:,.0f} submissions/hour (target 6,000, goal 10,000); "
             f"{one / two:.2f}x --jobs 1; same grades.csv: {'yes' if same else 'NO'}"),
        ]
    if args.suite:
        suite = suite_seconds()
        rows.append(("default test suite (python -m pytest -q)", f"{suite:.0f} s",
                     f"{suite / 60:.1f} minutes (target <= 5)"))
    width = max(len(row[0]) for row in rows)
    lines = [f"{name:<{width}}  {value:>16}  {ratio}" for name, value, ratio in rows]
    print("\n".join(lines))
    if args.write:
        table = ["| measure | value | ratio |", "|---|---|---|"]
        table += [f"| {name} | {value} | {ratio} |" for name, value, ratio in rows]
        command = (f"python bench/run.py --repeat {args.repeat} --calls {args.calls} "
                   f"--submissions {args.submissions}{'' if args.suite else ' --no-suite'} "
                   f"--write {args.write}")
        report = [
            "# Benchmark results", "",
            f"Reproduce with `{command}`.", "",
            f"Medians of {args.repeat} interleaved runs after a warm-up (the regrades: one run "
            "each), on "
            f"Python {sys.version.split()[0]}",
            f"and {os.cpu_count()} CPUs, all in one run, so the ratios compare like with like.",
            "", *table, "", *kept_notes(Path(args.write)),
        ]
        Path(args.write).write_text("\n".join(report) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
