"""How much a grade depends on which twins its file hash drew (issue 33).

    python tools/twin_spread.py [--hashes 50] [--jobs 2] [--secret TEXT]
                                [--bug NAME ...] [--submission PATH ...]

Each single-bug submission of tests/corpus (or only the ``--bug`` ones, or the
``--submission`` files or folders given) is graded officially (the reference installed,
one fixed course secret) ``--hashes`` times, each time with a distinct comment line
appended, so that each grading draws the unseen inputs of another file hash. The table
gives, per submission, the score CORPUS_EXPECTED (tests/helpers.py) states, the lowest and
highest score over the hashes, their spread, and how many hashes gave the stated score.

The gradings run in ``--jobs`` long-lived grading processes (``graders.cli.grade_server``,
the class regrade's job slots: one interpreter and its imports per slot, fresh workers and
sandbox users per grading), each exactly as ``graders grade`` runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"


def corpus_expected() -> dict[str, float]:
    """The exact score of each single-bug submission (tests/helpers.py)."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from helpers import CORPUS_EXPECTED  # noqa: PLC0415  # tests/ is not a package
    finally:
        sys.path.remove(str(ROOT / "tests"))
    return {name: outcome.score for name, outcome in CORPUS_EXPECTED.items()}


@dataclass
class Spread:
    """One submission's scores over the hashes."""

    name: str
    stated: float | None
    scores: list[float] = field(default_factory=list)

    def row(self) -> str:
        low, high = min(self.scores), max(self.scores)
        stated = "" if self.stated is None else f"{self.stated:.6f}"
        same = "-" if self.stated is None else \
            f"{sum(abs(score - self.stated) < 5e-7 for score in self.scores)}/{len(self.scores)}"
        return f"| {self.name} | {stated} | {low:.6f} | {high:.6f} | {high - low:.6f} | {same} |"


class GradingProcess:
    """One ``graders.cli.grade_server``: grades one request at a time."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.process = subprocess.Popen(
            [sys.executable, "-P", "-m", "graders.cli.grade_server"], cwd=folder,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def grade(self, argv: list[str], log: Path) -> int:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(json.dumps({"argv": argv, "log": str(log)}) + "\n")
        self.process.stdin.flush()
        reply = self.process.stdout.readline()
        if not reply:
            raise RuntimeError(f"the grading process stopped; see {log}")
        code: int = json.loads(reply)["code"]
        return code

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


def variants(source: str, hashes: int) -> list[str]:
    """``source`` with a distinct comment line appended: a distinct file hash each."""
    return [f"{source.rstrip()}\n# twin draw {index}\n" for index in range(hashes)]


def measure(submissions: dict[str, Path], stated: dict[str, float], *, hashes: int,
            jobs: int, secret: str) -> list[Spread]:
    spreads = {name: Spread(name, stated.get(name)) for name in submissions}
    with tempfile.TemporaryDirectory(prefix="twin-spread-") as temporary:
        base = Path(temporary)
        base.chmod(0o700)
        secret_file = base / "secret"
        secret_file.write_text(secret + "\n", encoding="utf-8")
        work: list[tuple[str, Path, Path]] = []
        for name, path in submissions.items():
            source = path.read_text(encoding="utf-8")
            for index, text in enumerate(variants(source, hashes)):
                folder = base / f"{name}-{index}"
                folder.mkdir()
                (folder / "serving.py").write_text(text, encoding="utf-8")
                work.append((name, folder, base / f"{name}-{index}.json"))
        lock = threading.Lock()
        failures: list[str] = []

        def slot(number: int) -> None:
            private = base / f"slot-{number}"
            private.mkdir(mode=0o700)
            process = GradingProcess(private)
            try:
                while True:
                    with lock:
                        if not work:
                            return
                        name, folder, results = work.pop()
                    log = private / "grade.log"
                    code = process.grade([str(folder), "--results", str(results), "-q",
                                          "--secret-file", str(secret_file)], log)
                    if code != 0:
                        with lock:
                            failures.append(f"{folder}: exit {code}: "
                                            f"{log.read_text(encoding='utf-8')[-500:]}")
                        continue
                    score = json.loads(results.read_text(encoding="utf-8"))["score"]
                    with lock:
                        spreads[name].scores.append(float(score))
            finally:
                process.close()

        threads = [threading.Thread(target=slot, args=(number,)) for number in range(jobs)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise SystemExit("\n".join(failures))
    return list(spreads.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hashes", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=max(1, min(4, os.cpu_count() or 1)))
    parser.add_argument("--secret", default="twin spread: one fixed course secret")
    parser.add_argument("--bug", action="append", default=[],
                        help="a folder of tests/corpus (default: every single-bug one)")
    parser.add_argument("--submission", action="append", default=[], type=Path,
                        help="another serving.py, or a folder holding one")
    options = parser.parse_args(argv)
    stated = corpus_expected()
    bugs = options.bug or ([] if options.submission else sorted(stated))
    submissions = {name: CORPUS / name / "serving.py" for name in bugs}
    for path in options.submission:
        file = path / "serving.py" if path.is_dir() else path
        submissions[file.parent.name] = file
    spreads = measure(submissions, stated, hashes=options.hashes, jobs=options.jobs,
                      secret=options.secret)
    worst = max(spreads, key=lambda s: max(s.scores) - min(s.scores))
    sys.stdout.write("\n".join([
        f"{options.hashes} file hashes per submission, one course secret", "",
        "| submission | stated | min | max | spread | at stated |",
        "|---|---|---|---|---|---|", *(spread.row() for spread in spreads), "",
        f"largest spread: {max(worst.scores) - min(worst.scores):.6f} ({worst.name})", ""]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
