"""Class analytics from many ``results.json`` documents: the grade sheet, every test's pass
rate, the score distribution and the most common failure messages. Pure functions only."""

from __future__ import annotations

import bisect
import datetime
import math
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from graders.escaping import escape_controls, for_csv_cell, for_markdown_cell
from graders.regrade.roster import Submitter
from graders.results.reports import result_tags

SCHEMA_VERSION = 1
#: Statuses of a submission in a regrade; only "graded" ones have a full list of tests.
GRADED = "graded"
#: Statuses with a score: graded, and rejected (no usable serving.py earns 0).
SCORED = (GRADED, "rejected")
#: Failure messages listed in the report.
TOP_FAILURES = 20
HISTOGRAM_BINS = 10
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?![\w])")
_SKIPPED_LINE = ("case ", "... and ", "hint:")
_MESSAGE_CHARS = 240


@dataclass(frozen=True)
class GradedSubmission:
    """One submission after a regrade: who, how grading ended, and its results."""

    id: str
    submitters: tuple[Submitter, ...]
    status: str
    reason: str
    results: Mapping[str, Any]
    #: When it was submitted and when it was due, as Gradescope's metadata writes them
    #: ("" when unknown): see :func:`lateness`.
    created_at: str = ""
    due: str = ""

    @property
    def graded(self) -> bool:
        return self.status == GRADED

    @property
    def score(self) -> float:
        value = self.results.get("score", 0.0)
        return float(value) if isinstance(value, int | float) else 0.0

    @property
    def tests(self) -> list[Mapping[str, Any]]:
        tests = self.results.get("tests", [])
        return [test for test in tests if isinstance(test, Mapping)] \
            if isinstance(tests, list) else []


def function_of(test: Mapping[str, Any]) -> str:
    return result_tags(test)[0]


def track_of(test: Mapping[str, Any]) -> str:
    return result_tags(test)[1]


def _test_key(test: Mapping[str, Any]) -> str:
    extra = test.get("extra_data")
    nodeid = extra.get("nodeid") if isinstance(extra, Mapping) else None
    return str(nodeid or test.get("name", ""))


def function_scores(submission: GradedSubmission) -> dict[str, float]:
    """Points per contract function (the first tag of each test), in test order."""
    earned: dict[str, float] = {}
    for test in submission.tests:
        name = function_of(test)
        earned[name] = earned.get(name, 0.0) + float(test.get("score", 0.0))
    return {name: round(value, 6) for name, value in earned.items()}


def max_score(entries: Sequence[GradedSubmission]) -> float | None:
    """The suite's maximum, from the first graded submission (None when none was)."""
    for entry in entries:
        if entry.graded:
            extra = entry.results.get("extra_data")
            if isinstance(extra, Mapping) and isinstance(extra.get("max_score"), int | float):
                return float(extra["max_score"])
            return round(sum(float(t.get("max_score", 0.0)) for t in entry.tests), 6)
    return None


def grade_table(entries: Sequence[GradedSubmission]) -> list[list[str]]:
    """The rows of grades.csv, header first: one row per person (a group submission gives
    each member a row with the same score and the submission id as ``group``), how
    grading ended, the score, lateness, and the points of every function (empty where
    grading did not complete).

    Every text cell is safe in a spreadsheet (:func:`graders.escaping.for_csv_cell`):
    a name such as ``=HYPERLINK(...)`` is written as ``'=HYPERLINK(...)``."""
    functions: list[str] = []
    for entry in entries:
        for name in function_scores(entry):
            if name not in functions:
                functions.append(name)
    maximum = max_score(entries)
    rows = [["submission", "name", "sid", "email", "status", "score", "max_score", "group",
             "late", "days_late", *map(for_csv_cell, functions)]]
    for entry in entries:
        points = function_scores(entry) if entry.graded else {}
        late, days = lateness(entry.created_at, entry.due)
        group = entry.id if len(entry.submitters) > 1 else ""
        for person in entry.submitters or (Submitter(),):
            rows.append([
                *(for_csv_cell(text) for text in (
                    entry.id, person.name, person.sid, person.email, entry.status)),
                # a grader failure or a time-out has no score: an empty cell, never a 0
                _number(entry.score) if entry.status in SCORED else "",
                "" if maximum is None else _number(maximum),
                for_csv_cell(group), late, days,
                *(_number(points[name]) if name in points else "" for name in functions),
            ])
    return rows


_TIME = re.compile(r"^\s*(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d(?::\d\d)?)(\.\d+)?\s*"
                   r"(Z|UTC|[+-]\d\d:?\d\d)?\s*$", re.IGNORECASE)


def parse_time(text: str) -> datetime.datetime | None:
    """A time as Gradescope writes it (``2024-03-01 12:00:00.000000000 -08:00``, or ISO
    8601); None when it is not one. A time without an offset is read as UTC."""
    match = _TIME.match(text)
    if match is None:
        return None
    day, clock, fraction, zone = match.groups()
    if len(clock) == 5:
        clock += ":00"
    micro = (fraction or ".0")[1:7].ljust(6, "0")
    offset = "+00:00" if zone is None or zone.upper() in ("Z", "UTC") else zone
    if ":" not in offset:
        offset = f"{offset[:3]}:{offset[3:]}"
    try:
        return datetime.datetime.fromisoformat(f"{day}T{clock}.{micro}{offset}")
    except ValueError:
        return None


def lateness(created_at: str, due: str) -> tuple[str, str]:
    """(``late``, ``days_late``) for grades.csv: ``yes``/``no`` and the days started after
    the due date (1 for a minute late; 0 when on time); both empty when either time is
    unknown. No penalty: that is each course's policy."""
    submitted, deadline = parse_time(created_at), parse_time(due)
    if submitted is None or deadline is None:
        return "", ""
    seconds = (submitted - deadline).total_seconds()
    if seconds <= 0:
        return "no", "0"
    return "yes", str(math.ceil(seconds / 86400))


def _number(value: float) -> str:
    return repr(round(value, 6))


@dataclass(frozen=True)
class PassRate:
    """How the class did on one test."""

    key: str
    name: str
    function: str
    track: str
    visibility: str
    passed: int
    graded: int
    mean_fraction: float

    @property
    def pass_rate(self) -> float:
        return self.passed / self.graded if self.graded else 0.0


def pass_rates(entries: Sequence[GradedSubmission]) -> list[PassRate]:
    """Every test's pass rate (full marks) and mean share of its points over the graded
    submissions: lowest pass rate first, ties in suite order."""
    seen: dict[str, Mapping[str, Any]] = {}
    passed: Counter[str] = Counter()
    graded: Counter[str] = Counter()
    fractions: dict[str, float] = defaultdict(float)
    for entry in entries:
        if not entry.graded:
            continue
        for test in entry.tests:
            key = _test_key(test)
            seen.setdefault(key, test)
            graded[key] += 1
            passed[key] += int(test.get("status") == "passed")
            maximum = float(test.get("max_score", 0.0))
            fractions[key] += float(test.get("score", 0.0)) / maximum if maximum else 1.0
    rates = [PassRate(key, str(test.get("name", key)), function_of(test), track_of(test),
                      str(test.get("visibility", "visible")), passed[key], graded[key],
                      round(fractions[key] / graded[key], 6))
             for key, test in seen.items()]
    order = {key: index for index, key in enumerate(seen)}
    return sorted(rates, key=lambda rate: (rate.pass_rate, order[rate.key]))


def normalize_message(line: str) -> str:
    """A failure line with its numbers replaced by ``#``, so that variants group together."""
    text = " ".join(_NUMBER.sub("#", line).split())
    return text[:_MESSAGE_CHARS]


def failure_lines(test: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(message, hint) for each problem in a failed test's output.

    The problems are the field and error lines under each case; a test without them
    (an invariant, or a test whose cases are hidden) is summed up by its first line.
    A failed student call is reduced to why it failed, without the call and the
    falsifying example, so that one cause reads the same in every test.
    """
    lines = str(test.get("output", "")).splitlines()
    found: list[tuple[str, str]] = []
    for index, raw in enumerate(lines[1:], start=1):
        line = raw.strip()
        if not line or line.startswith(_SKIPPED_LINE):
            continue
        following = lines[index + 1].strip() if index + 1 < len(lines) else ""
        hint = following.removeprefix("hint:").strip() if following.startswith("hint:") else ""
        found.append((_cause(line.removeprefix("every failed case: ")), hint))
    if not found and lines:
        first = lines[0].strip()
        name = str(test.get("name", ""))
        found.append((_cause(first.removeprefix(f"{name}: ") if name else first), ""))
    return found


_EXAMPLE = re.compile(r" \(falsifying example: .*$")  # its end may be cut off
_QUALIFIED = re.compile(r"^(?:[A-Za-z_]\w*\.)+(?=\w+: )")
_CALL_FAILED = "StudentCallFailed: "


def _cause(line: str) -> str:
    """``line`` without a falsifying example, module path, or the failed call itself."""
    line = _QUALIFIED.sub("", _EXAMPLE.sub("", line))
    if line.startswith(_CALL_FAILED):
        line = line.removeprefix(_CALL_FAILED)
        end = _call_end(line)
        if end is not None and line[end:].startswith(": "):
            line = line[end + 2:]
    marker = line.rfind(", in ")  # an invariant's "reason, in name(...)"
    if marker != -1:
        end = _call_end(line[marker + 5:])
        if end is not None and not line[marker + 5 + end:].strip():
            line = line[:marker]
    return line


def _call_end(text: str) -> int | None:
    """The index just past a leading ``name(...)`` call (parentheses balanced), if any."""
    match = re.match(r"\w+\(", text)
    if match is None:
        return None
    depth = 0
    for index in range(match.end() - 1, len(text)):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            return index + 1
    return None


@dataclass(frozen=True)
class FailureGroup:
    """One kind of failure and how many submissions show it."""

    message: str
    hint: str
    submissions: int
    functions: tuple[str, ...]
    tests: tuple[str, ...]
    example: str


def failure_groups(entries: Sequence[GradedSubmission], limit: int = TOP_FAILURES
                   ) -> list[FailureGroup]:
    """The most common failures over the graded submissions, grouped by function and
    normalized message (one function's hint never covers another's failures) and counted
    once per submission: most common first."""
    submissions: Counter[tuple[str, str]] = Counter()
    functions: dict[tuple[str, str], list[str]] = defaultdict(list)
    tests: dict[tuple[str, str], list[str]] = defaultdict(list)
    first: dict[tuple[str, str], tuple[str, str]] = {}
    for entry in entries:
        if not entry.graded:
            continue
        keys: set[tuple[str, str]] = set()
        for test in entry.tests:
            if test.get("status") == "passed":
                continue
            for line, hint in failure_lines(test):
                key = (function_of(test), normalize_message(line))
                keys.add(key)
                first.setdefault(key, (line[:_MESSAGE_CHARS], hint))
                for seen, value in ((functions[key], function_of(test)),
                                    (tests[key], str(test.get("name", "")))):
                    if value not in seen:
                        seen.append(value)
        submissions.update(keys)
    ranked = sorted(submissions.items(), key=lambda item: (-item[1], -len(tests[item[0]]),
                                                           item[0]))[:limit]
    return [FailureGroup(key[1], first[key][1], count, tuple(functions[key]), tuple(tests[key]),
                         first[key][0])
            for key, count in ranked]


def histogram(scores: Sequence[float], maximum: float | None, bins: int = HISTOGRAM_BINS
              ) -> tuple[list[float], list[int]]:
    """Equal-width bins over [0, maximum] (the last one closed): edges and counts."""
    top = maximum if maximum else max([*scores, 1.0])
    edges = [round(top * index / bins, 6) for index in range(bins + 1)]
    counts = [0] * bins
    for score in scores:
        index = min(int(score / top * bins), bins - 1) if score > 0 else 0
        counts[index] += 1
    return edges, counts


#: A bin of the class histogram is halved while it holds more than this share of the
#: scores (and more than :data:`CROWDED_MIN` of them), down to 1/80 of the maximum.
CROWDED_SHARE = 1 / 3
CROWDED_MIN = 3
FINEST = 80


def class_bins(scores: Sequence[float], maximum: float | None
               ) -> tuple[list[float], list[int]]:
    """Bins that fit the class: :data:`HISTOGRAM_BINS` equal bins over [0, maximum],
    each crowded one halved (finer where most scores are, e.g. near the top), then each run
    of empty bins merged into one: edges and counts."""
    edges, _ = histogram(scores, maximum)
    top = edges[-1]
    crowded = max(CROWDED_MIN, len(scores) * CROWDED_SHARE)
    while True:
        counts = _counts(scores, edges)
        split = [index for index, count in enumerate(counts) if count > crowded
                 and edges[index + 1] - edges[index] > top / FINEST * 1.5]
        if not split:
            break
        for index in reversed(split):
            edges.insert(index + 1, round((edges[index] + edges[index + 1]) / 2, 6))
    kept = [edges[0]]
    for index, count in enumerate(counts):
        if count or index == 0 or counts[index - 1]:
            kept.append(edges[index + 1])
        else:
            kept[-1] = edges[index + 1]
    return kept, _counts(scores, kept)


def _counts(scores: Sequence[float], edges: Sequence[float]) -> list[int]:
    """How many ``scores`` fall in each bin of ``edges`` (the last one closed)."""
    counts = [0] * (len(edges) - 1)
    for score in scores:
        counts[min(max(bisect.bisect_right(edges, score) - 1, 0), len(counts) - 1)] += 1
    return counts


def heatmap(entries: Sequence[GradedSubmission]) -> dict[str, Any]:
    """Pass rates by function and track: the share of graded submissions with full marks
    on every test of that function and track ("" is the tests without a track)."""
    functions: list[str] = []
    tracks: list[str] = []
    passed: Counter[tuple[str, str]] = Counter()
    graded = 0
    for entry in entries:
        if not entry.graded:
            continue
        graded += 1
        failed: set[tuple[str, str]] = set()
        cells: set[tuple[str, str]] = set()
        for test in entry.tests:
            cell = (function_of(test), track_of(test))
            cells.add(cell)
            if test.get("status") != "passed":
                failed.add(cell)
            if cell[0] not in functions:
                functions.append(cell[0])
            if cell[1] not in tracks:
                tracks.append(cell[1])
        passed.update(cells - failed)
        passed.update(dict.fromkeys(failed, 0))
    rates: dict[str, dict[str, float]] = defaultdict(dict)
    for (function, track), count in passed.items():
        rates[function][track] = round(count / graded, 6)
    tracks.sort(key=lambda track: (track != "", track))
    return {"functions": functions, "tracks": tracks, "pass_rate": dict(rates)}


def class_report(entries: Sequence[GradedSubmission]) -> dict[str, Any]:
    """The class report as plain JSON data (rendered to Markdown by :func:`markdown`);
    every text in it is free of control characters."""
    graded = [entry for entry in entries if entry.graded]
    scores = [entry.score for entry in graded]
    maximum = max_score(entries)
    edges, counts = class_bins(scores, maximum)
    functions: dict[str, list[float]] = defaultdict(list)
    function_max: dict[str, float] = defaultdict(float)
    for entry in graded[:1]:
        for test in entry.tests:
            function_max[function_of(test)] += float(test.get("max_score", 0.0))
    for entry in graded:
        for name, points in function_scores(entry).items():
            functions[name].append(points)
    return {
        "schema_version": SCHEMA_VERSION,
        "submissions": len(entries),
        "graded": len(graded),
        "max_score": maximum,
        "scores": {
            "mean": round(statistics.fmean(scores), 6),
            "median": round(statistics.median(scores), 6),
            "min": min(scores), "max": max(scores),
            "full_marks": sum(maximum is not None and score >= maximum for score in scores),
        } if scores else None,
        "histogram": {"edges": edges, "counts": counts,
                      "apart": dict(Counter(entry.status for entry in entries
                                            if not entry.graded))},
        "heatmap": heatmap(entries),
        "functions": [{"function": name, "mean": round(statistics.fmean(points), 6),
                       "max_score": round(function_max[name], 6)}
                      for name, points in functions.items()],
        "tests": [{"test": rate.key, "name": rate.name, "function": rate.function,
                   "track": rate.track, "visibility": rate.visibility,
                   "passed": rate.passed, "graded": rate.graded,
                   "pass_rate": round(rate.pass_rate, 6), "mean_fraction": rate.mean_fraction}
                  for rate in pass_rates(entries)],
        "failures": [{"message": escape_controls(group.message),
                      "hint": escape_controls(group.hint),
                      "submissions": group.submissions,
                      "functions": [escape_controls(name) for name in group.functions],
                      "tests": [escape_controls(name) for name in group.tests],
                      "example": escape_controls(group.example)}
                     for group in failure_groups(entries)],
        "not_graded": [{"submission": escape_controls(entry.id),
                        "status": escape_controls(entry.status),
                        "reason": escape_controls(entry.reason)}
                       for entry in entries if not entry.graded],
    }


def markdown(report: Mapping[str, Any], *, histogram_file: str | None = None) -> str:
    """The class report for people: summary, histogram, pass rates, failures.

    Text a submission controls (failure messages and their hints, submission ids, why a
    submission was not graded) is escaped as literal Markdown, so that no link, image,
    HTML or table cell can come from it; the grader's own names are only kept on one line
    with their ``|`` escaped."""
    graded, total = report["graded"], report["submissions"]
    lines = ["# Class report", "",
             f"{total} submissions, {graded} graded"
             + (f", {total - graded} not graded (listed at the end)" if total > graded else "")
             + (f". Maximum score {report['max_score']:g}." if report["max_score"] is not None
                else "."), ""]
    if report.get("version_drift"):
        lines += [f"**Warning:** {_cell(report['version_drift'])}: these scores may differ "
                  "from Gradescope's, which grades with the pinned versions.", ""]
    scores = report["scores"]
    if scores:
        lines += [f"Scores: mean {scores['mean']:g}, median {scores['median']:g}, "
                  f"min {scores['min']:g}, max {scores['max']:g}; "
                  f"{scores['full_marks']} with full marks.", ""]
    lines += ["## Score distribution", ""]
    if histogram_file:
        lines += [f"![score histogram]({histogram_file})", ""]
    edges, counts = report["histogram"]["edges"], report["histogram"]["counts"]
    lines += ["| scores | submissions |", "|---|---|"]
    lines += [f"| {low:g}-{high:g} | {count} |"
              for low, high, count in zip(edges, edges[1:], counts, strict=False)]
    lines += [f"| not graded: {_cell(status.replace('_', ' '))} | {count} |"
              for status, count in sorted(report["histogram"].get("apart", {}).items())]
    lines += ["", "## Points by function", "", "| function | mean | max |", "|---|---|---|"]
    lines += [f"| {_cell(row['function'])} | {row['mean']:g} | {row['max_score']:g} |"
              for row in report["functions"]]
    lines += ["", "## Pass rate of every test", "",
              "Passed means full marks; points is the mean share of the test's points.", "",
              "| pass rate | passed | points | function | test | visibility |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {row['pass_rate']:.0%} | {row['passed']}/{row['graded']} | "
              f"{row['mean_fraction']:.0%} | {_cell(row['function'])} | {_cell(row['name'])} | "
              f"{row['visibility']} |" for row in report["tests"]]
    lines += ["", "## Most common failures", "",
              "Each failure counts once per submission; numbers are replaced by `#`.", "",
              "| submissions | failure | hint | functions | tests |", "|---|---|---|---|---|"]
    lines += [f"| {row['submissions']} | {_student_cell(row['message'])} | "
              f"{_student_cell(row['hint'])} | "
              f"{_cell(', '.join(row['functions']))} | {len(row['tests'])} |"
              for row in report["failures"]]
    if report.get("clusters"):
        lines += _cluster_lines(report["clusters"])
    if report["not_graded"]:
        lines += ["", "## Not graded", "", "| submission | status | reason |", "|---|---|---|"]
        lines += [f"| {_student_cell(row['submission'])} | {_cell(row['status'])} | "
                  f"{_student_cell(row['reason'])} |"
                  for row in report["not_graded"]]
    return "\n".join(lines) + "\n"


def _cluster_lines(clusters: Sequence[Mapping[str, Any]]) -> list[str]:
    """The mistake clusters, by cause (see class.html): a table, then what each cause
    breaks too and the submissions not started."""
    lines = ["", "## Mistake clusters", "",
             "One cause per cluster, most submissions first (see class.html); a submission "
             "with two bugs is counted in both.", "",
             "| submissions | share | function | known mistake | hint | representative |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {row['submissions']} | {row['share']:.0%} | "
              f"{_cell(row['function'] or 'not started')} | "
              f"{_cell(row['label'] or '-')} | {_student_cell(row['hint'])} | "
              f"{_student_cell(row['representative'])} |" for row in clusters]
    knock_ons = [f"- cluster {rank} ({_cell(row['function'] or 'not started')}) also breaks "
                 f"{_cell(broken['function'])} in {broken['submissions']} submission"
                 f"{'s' if broken['submissions'] != 1 else ''}"
                 for rank, row in enumerate(clusters, start=1)
                 for broken in row.get("breaks", [])]
    if knock_ons:
        lines += ["", "Knock-ons (never clusters of their own):", "", *knock_ons]
    started = [f"- {_student_cell(item['submission'])}: not started: "
               f"{_cell(', '.join(item['functions']))}"
               for row in clusters for item in row.get("not_started", [])]
    if started:
        lines += ["", "Not implemented yet:", "", *started]
    return lines


def _cell(text: str) -> str:
    """The grader's own text inside a Markdown table cell: one line, ``|`` escaped."""
    return escape_controls(" ".join(str(text).split())).replace("|", "\\|")


def _student_cell(text: str) -> str:
    """Text a submission controls inside a Markdown table cell: literal Markdown."""
    return for_markdown_cell(str(text))
