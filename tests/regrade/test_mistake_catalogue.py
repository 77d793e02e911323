"""The catalogue of known mistakes: its file format, its errors, and what an entry predicts."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from graders.grading.mistakes import (
    BUILTIN,
    MistakeError,
    load_catalogue,
    parse_catalogue,
)

ENTRY = """
[[mistake]]
id = "half-p99"
label = "p99 halved"
function = "queueing_latency"
field = "p99_latency_ms"
got = "expected / 2"
"""


def test_the_graders_own_catalogue_loads_and_names_the_issues_examples() -> None:
    ids = {mistake.id for mistake in load_catalogue()}
    assert {"natural-log", "gib-for-gb", "kv-no-factor-2", "no-variability-factor",
            "erlang-c-textbook", "warm-pool-ignored"} <= ids
    assert BUILTIN.name == "mistakes.toml"


def test_an_instructors_entries_come_first_and_replace_an_own_entry_of_the_same_id(
        tmp_path: Path) -> None:
    path = tmp_path / "course.toml"
    path.write_text(ENTRY + ENTRY.replace("half-p99", "natural-log")
                    .replace("p99 halved", "ours"), encoding="utf-8")
    catalogue = load_catalogue(path)
    assert [m.id for m in catalogue[:2]] == ["half-p99", "natural-log"]
    assert [m.label for m in catalogue if m.id == "natural-log"] == ["ours"]


@pytest.mark.parametrize(("text", "message"), [
    ("[[mistake]\nid=1", "not valid TOML"),
    ("title = 'x'\n" + ENTRY, "unknown top-level key(s) title"),
    ("", "no [[mistake]] tables"),
    (ENTRY.replace('got =', 'colour = "red"\ngot ='), "unknown key(s) colour"),
    (ENTRY.replace('id = "half-p99"', 'id = ""'), "id must be a non-empty string"),
    (ENTRY.replace('id = "half-p99"', 'id = "half p99"'), "id may hold only"),
    (ENTRY.replace('"queueing_latency"', '"queue"'), "'queue' is not a contract function"),
    (ENTRY.replace('"p99_latency_ms"', '"p99"'), "field 'p99' is not a field of "
                                                  "queueing_latency; give one of"),
    (ENTRY + 'error = "OverflowError"\n', "give exactly one of got"),
    (ENTRY.replace('got = "expected / 2"', 'error = "Overflow Error"'),
     "error must be an exception's name"),
    (ENTRY.replace("expected / 2", "expected /"), "got is not an expression"),
    (ENTRY.replace("expected / 2", "expected.real"), "got may hold only numbers, names"),
    (ENTRY.replace("expected / 2", "__import__('os')"), "got calls __import__"),
    (ENTRY.replace("expected / 2", "'a' * 2"), "got may hold only numbers, found 'a'"),
    (ENTRY.replace("expected / 2", "expected * servic_ms"), "got uses 'servic_ms', which is "
                                                            "not one of"),
    (ENTRY + 'rel = 2\n', "rel must be a number in [0, 1)"),
    (ENTRY + ENTRY, "two mistakes have the id 'half-p99'"),
])
def test_a_bad_catalogue_says_where_and_what_to_fix(text: str, message: str) -> None:
    with pytest.raises(MistakeError) as raised:
        parse_catalogue(text, "course.toml")
    assert str(raised.value).startswith("course.toml: ")
    assert message in str(raised.value)


def test_an_entry_predicts_the_mistaken_answer_from_the_reference_and_the_inputs() -> None:
    [natural] = [m for m in load_catalogue() if m.id == "natural-log"]
    expected = 25.0 * (1 + 0.08 * math.log2(32)) / 6.4
    got = 25.0 * (1 + 0.08 * math.log(32)) / 6.4
    assert natural.agrees(expected, got, {"batch_size": 32.0})
    assert not natural.agrees(expected, got * 1.001, {"batch_size": 32.0})
    assert not natural.agrees(expected, got, {})  # an input it needs is missing
    [battery] = [m for m in load_catalogue() if m.id == "battery-zero"]
    assert battery.agrees(None, 0.0, {})  # no use of the expected value: None is fine
    assert not battery.agrees(None, None, {})


def test_a_huge_power_is_not_computed() -> None:
    [mistake] = parse_catalogue(ENTRY.replace("expected / 2", "expected ** 100000"), "x.toml")
    assert mistake.predicts(10.0, {}) is None


def test_the_regrade_refuses_a_bad_catalogue_in_one_line_before_grading(
        tmp_path: Path) -> None:
    bad = tmp_path / "course.toml"
    bad.write_text(ENTRY.replace('"p99_latency_ms"', '"p99"'), encoding="utf-8")
    (tmp_path / "class").mkdir()
    run = subprocess.run([sys.executable, "-m", "graders", "regrade", str(tmp_path / "class"),
                          "--out", str(tmp_path / "out"), "--mistakes", str(bad)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 2, run.stderr
    [line] = run.stderr.strip().splitlines()
    assert line.startswith("graders: error: ")
    assert "field 'p99' is not a field of queueing_latency" in line
    assert not (tmp_path / "out" / "submissions").exists()
