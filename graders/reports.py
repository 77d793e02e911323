"""Score reports built by pure functions: Gradescope ``results.json`` and the terminal table."""

from __future__ import annotations

import json
import os
import tempfile
from collections import defaultdict
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from graders.scoring import TestScore, rounded, total

SCHEMA_VERSION = 1


def gradescope_results(scores: Sequence[TestScore], *, execution_time_s: float,
                       output: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A results.json document in Gradescope's format, score clamped to [0, max]."""
    earned, maximum = total(scores)
    earned = min(max(earned, Fraction(0)), maximum)
    tests = []
    for number, score in enumerate(scores, start=1):
        tests.append({
            "name": score.name,
            "number": str(number),
            "score": rounded(score.earned),
            "max_score": rounded(score.max_score),
            "status": "passed" if score.status == "passed" else "failed",
            "output": score.output,
            "tags": score.tags,
            "visibility": score.visibility,
            "extra_data": {"nodeid": score.nodeid, "outcome": score.status,
                           "passed_cases": score.passed_cases,
                           "total_cases": score.total_cases},
        })
    return {
        "score": rounded(earned),
        "execution_time": round(execution_time_s, 3),
        "output": output,
        "stdout_visibility": "hidden",
        "extra_data": {"schema_version": SCHEMA_VERSION, "max_score": rounded(maximum),
                       **(extra or {})},
        "tests": tests,
    }


def write_json_atomically(path: Path, document: Mapping[str, Any]) -> None:
    """Write ``document`` to ``path`` through a temp file and ``os.replace``; no NaN allowed."""
    text = json.dumps(document, indent=2, allow_nan=False, sort_keys=False) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _rows(scores: Sequence[TestScore], key: str) -> list[tuple[str, Fraction, Fraction, int]]:
    groups: dict[str, list[TestScore]] = defaultdict(list)
    for score in scores:
        name = score.function if key == "function" else (score.track or "")
        if name:
            groups[name].append(score)
    rows = []
    for name, members in groups.items():
        earned, maximum = total(members)
        rows.append((name, earned, maximum, len(members)))
    return rows


def score_table(scores: Sequence[TestScore]) -> list[str]:
    """The terminal table: score by function, then by track, then the total."""
    lines: list[str] = []
    for key, title in (("function", "function"), ("track", "track")):
        rows = _rows(scores, key)
        if not rows:
            continue
        width = max(len(title), *(len(row[0]) for row in rows))
        lines.append(f"{title:<{width}}  {'score':>8}  {'max':>8}  tests")
        for name, earned, maximum, count in rows:
            lines.append(f"{name:<{width}}  {rounded(earned):>8.2f}  {rounded(maximum):>8.2f}"
                         f"  {count}")
        lines.append("")
    earned, maximum = total(scores)
    lines.append(f"TOTAL {rounded(earned):.2f} / {rounded(maximum):.2f}")
    return lines
