"""Speed of the grader, as ratios against baselines measured in the same run.

Usage: ``python bench/run.py [--repeat N] [--calls N] [--submissions N] [--write
bench/RESULTS.md]``

- grading: ``graders grade`` on the correct corpus submission, against the import floor
  ``python -c "import pytest, pint, hypothesis"`` (target: within 2x);
- runner: student calls per second through the worker process (target: >= 2,000/s),
  against the same calls made in-process;
- reference: ``queueing_latency`` at 10,000 replicas, against one at 1 replica;
- regrade: ``graders regrade`` of N generated submissions (every other one correct, the
  rest cycling through the corpus bugs) at ``--jobs 1`` and ``--jobs 2``, as a ratio
  (target on 2 cores: >= 1.7x), and what ``--jobs 2`` grades in an hour.
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
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "corpus"
CORRECT = CORPUS / "correct" / "serving.py"
#: Text after this heading in the results file is kept when it is rewritten.
NOTES_HEADING = "## Notes"


def wall_time(command: list[str], repeat: int) -> list[float]:
    """Wall seconds of ``command``, run ``repeat`` times after one warm-up run."""
    subprocess.run(command, check=True, capture_output=True)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return times


def calls_per_second(call: Callable[[], object], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        call()
    return calls / (time.perf_counter() - started)


def runner_rates(calls: int) -> tuple[float, float]:
    """(worker calls/s, in-process calls/s) for erlang_c on a 16-replica fleet."""
    from graders.grading.cases import RESULT_FIELDS
    from graders.sandbox.runner import StudentRunner

    fields = RESULT_FIELDS["erlang_c"]
    with StudentRunner(CORRECT.read_bytes()) as runner:
        runner.call("erlang_c", (200.0, 20.0, 16), fields=fields)
        remote = calls_per_second(
            lambda: runner.call("erlang_c", (200.0, 20.0, 16), fields=fields), calls)
    namespace: dict[str, object] = {}
    exec(compile(CORRECT.read_text(), str(CORRECT), "exec"), namespace)
    erlang_c: Callable[..., object] = namespace["erlang_c"]  # type: ignore[assignment]
    local = calls_per_second(lambda: erlang_c(200.0, 20.0, 16), calls)
    return remote, local


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
    parser.add_argument("--write", metavar="FILE", help="also write a Markdown report here")
    args = parser.parse_args()

    floor = wall_time([sys.executable, "-c", "import pytest, pint, hypothesis"], args.repeat)
    with tempfile.TemporaryDirectory() as scratch:
        grade = wall_time([sys.executable, "-m", "graders", "grade", str(CORRECT),
                           "--results", str(Path(scratch) / "results.json")], args.repeat)
    remote, local = runner_rates(args.calls)
    big, small = reference_times()
    regrade = regrade_times(args.submissions) if args.submissions else None
    floor_s, grade_s = statistics.median(floor), statistics.median(grade)
    rows = [
        ("import floor (pytest, pint, hypothesis)", f"{floor_s:.3f} s", "1.00x (baseline)"),
        ("full grading of a correct submission", f"{grade_s:.3f} s",
         f"{grade_s / floor_s:.2f}x the floor (target <= 2x)"),
        ("student calls through the worker", f"{remote:,.0f} calls/s",
         f"{local / remote:.1f}x slower than in-process ({local:,.0f}/s); target >= 2,000/s"),
        ("reference queueing_latency, 10,000 replicas", f"{big * 1e3:.3f} ms",
         f"{big / small:.0f}x one replica ({small * 1e6:.1f} us)"),
    ]
    if regrade is not None:
        one, two, same = regrade
        count = args.submissions
        rows += [
            (f"regrade of {count} submissions, --jobs 1", f"{one:.1f} s",
             f"{count / one * 3600:,.0f} submissions/hour"),
            (f"regrade of {count} submissions, --jobs 2", f"{two:.1f} s",
             f"{one / two:.2f}x --jobs 1 (target >= 1.7x); {count / two * 3600:,.0f} "
             f"submissions/hour; same grades.csv: {'yes' if same else 'NO'}"),
        ]
    width = max(len(row[0]) for row in rows)
    lines = [f"{name:<{width}}  {value:>16}  {ratio}" for name, value, ratio in rows]
    print("\n".join(lines))
    if args.write:
        table = ["| measure | value | ratio |", "|---|---|---|"]
        table += [f"| {name} | {value} | {ratio} |" for name, value, ratio in rows]
        command = (f"python bench/run.py --repeat {args.repeat} --calls {args.calls} "
                   f"--submissions {args.submissions} --write {args.write}")
        report = [
            "# Benchmark results", "",
            f"Reproduce with `{command}`.", "",
            f"Medians of {args.repeat} runs after a warm-up (the regrades: one run each), on "
            f"Python {sys.version.split()[0]}",
            f"and {os.cpu_count()} CPUs, all in one run, so the ratios compare like with like.",
            "", *table, "", *kept_notes(Path(args.write)),
        ]
        Path(args.write).write_text("\n".join(report) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
