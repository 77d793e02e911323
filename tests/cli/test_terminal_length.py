"""A submission with two bugs reads in about one screen (issue 31): ``graders grade`` run as
a user runs it, on the correct submission with two of the corpus's bugs planted."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import TWO_BUG_MAX_LINES as MAX_LINES
from helpers import graders, load, with_bugs


@pytest.mark.parametrize(("bugs", "blocks"), [
    # queueing_latency on 4 tracks, batching_tax on 2 (knock-on), cache_capacity on 3
    (("variability_linear_cv", "mb_over_1000"),
     {"queueing_latency matches": "[cloud_fleet, iphone, oura_ring, robotaxi]",
      "batching_tax matches": "[iphone, robotaxi]",
      "cache_capacity matches": "[iphone, oura_ring, robotaxi]"}),
    # serve's ZeroDivisionError and wrong passes; cold_start_latency on 4 tracks; invariants
    (("passes_floor", "warm_pool_ignored"),
     {"serve matches": "", "cold_start_latency matches":
      "[cloud_fleet, iphone, oura_ring, robotaxi]"}),
], ids=["two functions on many tracks", "errors and wrong fields"])
def test_a_two_bug_submission_fits_a_screen_or_two_with_every_hint_whole(
        tmp_path: Path, bugs: tuple[str, ...], blocks: dict[str, str]) -> None:
    results = tmp_path / "results.json"
    run = graders("grade", with_bugs(tmp_path / "two_bugs", *bugs), "--results", results)
    assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-3000:])
    lines = run.stdout.splitlines()
    assert len(lines) <= MAX_LINES, run.stdout
    feedback = run.stdout.split("serving-lab feedback", 1)[1].split("serving-lab score")[0]
    for name, tracks in blocks.items():  # one block per test function, its tracks named
        headers = [line for line in feedback.splitlines() if line.startswith(name)]
        assert len(headers) == 1, feedback
        assert f"{tracks}: " in headers[0] if tracks else re.search(r": \d+ of", headers[0])
    kept = [line for line in lines if "hint:" in line or "expected" in line]
    assert any("hint:" in line for line in kept)
    assert [line for line in kept if "[cut:" in line or "…" in line] == []
    # results.json: still one output per test, each hint and expected line whole there too
    outputs = [test["output"] for test in load(results)["tests"] if test["status"] == "failed"]
    firsts = [output.split("\n", 1)[0] for output in outputs]
    assert any("[iphone]: " in first for first in firsts)
    assert not any("iphone, " in first for first in firsts)
    assert "[cut:" not in "\n".join(line for output in outputs for line in output.splitlines()
                                     if "hint:" in line or "expected" in line)
