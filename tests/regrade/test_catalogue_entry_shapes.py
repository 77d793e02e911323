"""A ``--mistakes`` catalogue as instructors write it: an entry that is not a table, a
``got`` that is not a string, and a file saved with a byte-order mark (issue 36)."""

from __future__ import annotations

from pathlib import Path

import pytest

from graders.grading.mistakes import MistakeError, load_catalogue, parse_catalogue

ENTRY = """
[[mistake]]
id = "half-p99"
label = "p99 halved"
function = "queueing_latency"
field = "p99_latency_ms"
got = "expected / 2"
"""


@pytest.mark.parametrize(("text", "message"), [
    ("mistake = [1]\n", "course.toml: mistake 1 must be a table ([[mistake]]), got 1"),
    ('mistake = ["natural-log"]\n',
     "course.toml: mistake 1 must be a table ([[mistake]]), got 'natural-log'"),
    ("mistake = 3\n", "course.toml: mistake must be a list of [[mistake]] tables, got 3"),
    (ENTRY.replace('got = "expected / 2"', "got = 0"),
     'course.toml: mistake 1 (half-p99): got must be a string expression, e.g. got = "0"'),
    (ENTRY.replace('got = "expected / 2"', "got = 1.5"),
     'got must be a string expression, e.g. got = "1.5"'),
    (ENTRY.replace('got = "expected / 2"', "error = 3"),
     'error must be a string, the exception\'s name, e.g. error = "OverflowError"'),
])
def test_an_entry_of_the_wrong_shape_is_one_line_naming_it_and_the_fix(
        text: str, message: str) -> None:
    with pytest.raises(MistakeError) as raised:
        parse_catalogue(text, "course.toml")
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_catalogue_saved_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    path = tmp_path / "course.toml"
    path.write_bytes(b"\xef\xbb\xbf" + ENTRY.encode("utf-8"))
    assert load_catalogue(path)[0].id == "half-p99"
    assert parse_catalogue("\ufeff" + ENTRY, "course.toml")[0].id == "half-p99"
