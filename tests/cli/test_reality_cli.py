"""``graders reality build|table`` as an instructor runs them, ``graders tracks show``'s
real p99, and the instructor guide's table, which must be the command's output."""

from __future__ import annotations

import re

import pytest
from helpers import REPO, graders

GUIDE = REPO / "docs" / "instructor-guide.md"
TABLE_START, TABLE_END = "<!-- reality-table:start -->", "<!-- reality-table:end -->"


def test_the_reality_command_offers_build_and_table() -> None:
    run = graders("reality", "--help")
    assert run.returncode == 0
    assert "build" in run.stdout
    assert "table" in run.stdout


def test_an_unknown_reality_command_is_a_one_line_usage_error() -> None:
    run = graders("reality", "simulate")
    assert run.returncode == 2
    assert len(run.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_build_then_tracks_show_prints_the_real_p99_beside_each_formula_p99() -> None:
    built = graders("reality", "build")
    assert built.returncode == 0, built.stderr
    assert "reality curves ready for 4 of 4 tracks" in built.stdout
    shown = graders("tracks", "show", "iphone")
    assert shown.returncode == 0, shown.stderr
    queueing = next(line for line in shown.stdout.splitlines() if "queueing " in line)
    batching = next(line for line in shown.stdout.splitlines() if "batching " in line)
    assert re.search(r"p99 132\.869 ms, .*real p99 1\d\d ms ± [\d.]+ ms \(simulated\), "
                     r"formula error -\d+ %", queueing), queueing
    assert re.search(r"total_p99 132\.183 ms, .*real p99 5\d\d ms ± [\d.]+ ms \(simulated\)",
                     batching), batching


@pytest.mark.slow
def test_the_instructor_guides_table_is_the_commands_output() -> None:
    run = graders("reality", "table")
    assert run.returncode == 0, run.stderr
    text = GUIDE.read_text(encoding="utf-8")
    block = text.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0].strip()
    assert block == run.stdout.strip(), (
        "docs/instructor-guide.md's table is stale: paste 'graders reality table' between "
        f"{TABLE_START} and {TABLE_END}")
