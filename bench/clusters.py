"""Speed of the class report's mistake clusters on a generated class.

Usage: ``python bench/clusters.py [--submissions 2000] [--repeat 3]``

Each corpus submission (tests/corpus: the correct one and the one-bug ones) is graded
once with ``graders grade``; a class of N submissions is then generated from their
results in fixed proportions (a third correct, the rest spread over the bugs), each copy
varied by floating-point noise (a relative 1e-13 on every wrong answer it kept, as another
order of the same arithmetic would give), so that no two documents are equal. Timed: the
clustering with the catalogue, the cluster rows of report.json, the class report, and the
class page, as ``graders regrade`` runs them after grading. Grading 2,000 submissions is
``bench/run.py --submissions``'s business, not this one's.
"""

from __future__ import annotations

import argparse
import copy
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "corpus"
sys.path.insert(0, str(REPO))

from graders.grading.mistakes import load_catalogue  # noqa: E402
from graders.regrade.classpage import build_class_page  # noqa: E402
from graders.regrade.classview import cluster_rows, with_classes  # noqa: E402
from graders.regrade.clusters import cluster  # noqa: E402
from graders.regrade.report import GradedSubmission, class_report  # noqa: E402
from graders.results.reports import read_valid_results  # noqa: E402


def grade_corpus(folder: Path) -> dict[str, dict[str, Any]]:
    """Each corpus submission's results.json, graded once."""
    documents = {}
    for submission in sorted(path for path in CORPUS.iterdir() if path.is_dir()):
        results = folder / f"{submission.name}.json"
        subprocess.run([sys.executable, "-m", "graders", "grade", str(submission),
                        "--results", str(results), "-q"], check=False,
                       capture_output=True)
        document = read_valid_results(results)
        if document is None:
            raise SystemExit(f"{submission.name}: no valid results")
        documents[submission.name] = document
    return documents


def varied(document: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """``document`` with every kept wrong answer moved by a relative 1e-13."""
    result = copy.deepcopy(document)
    for test in result["tests"]:
        for case in test.get("extra_data", {}).get("failed_cases", []):
            for pair in case.get("fields", {}).values():
                if isinstance(pair[1], float):
                    pair[1] *= 1 + rng.choice((-1, 1)) * 1e-13
    return result


def generated_class(documents: dict[str, dict[str, Any]], size: int
                    ) -> tuple[list[GradedSubmission], list[str]]:
    """N submissions and, for each, the corpus submission it was made from."""
    rng = random.Random(25)
    bugs = sorted(name for name in documents if name != "correct")
    names = ["correct" if index % 3 == 0 else bugs[index % len(bugs)] for index in range(size)]
    entries = [GradedSubmission(f"s{index:05d}", (), "graded", "", varied(documents[name], rng))
               for index, name in enumerate(names)]
    return entries, names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--submissions", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        documents = grade_corpus(Path(folder))
        print(f"graded {len(documents)} corpus submissions in "  # noqa: T201
              f"{time.perf_counter() - started:.1f} s")
    entries, sources = generated_class(documents, args.submissions)
    mix = Counter(sources)
    catalogue = load_catalogue()
    timings: dict[str, list[float]] = {"cluster": [], "report.json rows": [],
                                       "class report": [], "class page": []}
    for _ in range(args.repeat):
        moments = [time.perf_counter()]
        found = cluster(entries, catalogue)
        moments.append(time.perf_counter())
        rows = cluster_rows(found, len(entries), key=b"bench", names=False, pages=set())
        moments.append(time.perf_counter())
        report = with_classes(class_report(entries), rows, None)
        moments.append(time.perf_counter())
        build_class_page(report, names=False)
        moments.append(time.perf_counter())
        for values, start, end in zip(timings.values(), moments, moments[1:],
                                      strict=False):
            values.append(end - start)
    for name, values in timings.items():
        print(f"{name}: median {statistics.median(values):.3f} s "  # noqa: T201
              f"over {args.repeat} runs, {len(entries)} submissions")
    source = {entry.id: name for entry, name in zip(entries, sources, strict=True)}
    print(f"{len(found)} clusters (count, function, catalogued mistake, made from):")  # noqa: T201
    wrong = 0
    for found_cluster in found:
        made_from = Counter(source[member] for member in found_cluster.members)
        [(name, count)] = made_from.most_common(1)
        wrong += len(made_from) > 1 or count != mix[name]
        print(f"  {len(found_cluster.members):5d} {found_cluster.function}: "  # noqa: T201
              f"{found_cluster.mistake or '-'} <- {', '.join(sorted(made_from))}")
    print(f"clusters that mix corpus submissions or miss copies: {wrong}")  # noqa: T201


if __name__ == "__main__":
    main()
