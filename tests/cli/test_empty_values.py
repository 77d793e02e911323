"""An empty value is refused, for every option and argument of every command.

``--out ''`` or ``--results "$UNSET"`` is a slip: read as "not given" it wrote into the
current folder, graded without the secret, or wrote nothing and exited 0. Each is refused
with exit 2 and one line naming it, before anything is read or written.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from graders.cli import build_parser, main

#: A value each command accepts for its other required arguments.
PLACEHOLDER = "placeholder-that-is-never-read"


def commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()
             ) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every (sub)command that takes arguments, with its words."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*prefix, name))
            return
    yield prefix, parser


def cases() -> Iterator[tuple[tuple[str, ...], str | None, list[str]]]:
    """(command, the option given empty or None for a positional, the command line)."""
    for words, parser in commands(build_parser()):
        positionals = [a for a in parser._actions if not a.option_strings
                       and a.nargs not in (0, argparse.SUPPRESS)]
        filled = [PLACEHOLDER] * sum(1 for a in positionals if a.nargs in (None, 1))
        for action in parser._actions:
            if not action.option_strings or action.nargs == 0 or action.help == argparse.SUPPRESS:
                continue
            yield words, action.option_strings[-1], [*words, *filled,
                                                     action.option_strings[-1], ""]
        for index in range(len(filled)):
            line = list(filled)
            line[index] = ""
            yield words, None, [*words, *line]


CASES = list(cases())


def test_the_table_covers_every_command_and_the_slips_of_the_issue() -> None:
    flags = {(" ".join(words), flag) for words, flag, _ in CASES}
    assert {("regrade", "--out"), ("grade", "--results"), ("grade", "--secret-file"),
            ("grade", None)} <= flags
    assert {words for words, _, _ in CASES} >= {("grade",), ("regrade",),
                                                ("export", "student"), ("tracks", "check")}


@pytest.mark.parametrize(("words", "flag", "line"), CASES,
                         ids=[" ".join(line).replace(PLACEHOLDER, "X") + "''"
                              for _, _, line in CASES])
def test_an_empty_value_is_a_usage_error_that_writes_nothing(
        words: tuple[str, ...], flag: str | None, line: list[str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    mode = tmp_path.stat().st_mode
    with pytest.raises(SystemExit) as stopped:
        main(line)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    (message,) = err.splitlines()
    assert "is empty: give it a value" in message, message
    if flag is not None:
        assert f"argument {flag}" in message or flag in message, message
    assert list(tmp_path.iterdir()) == []
    assert tmp_path.stat().st_mode == mode  # the current folder's mode untouched


def test_the_plugin_refuses_an_empty_flag_too(pytester: pytest.Pytester) -> None:
    run = pytester.runpytest("--student", "serving.py", "--grader-results", "")
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    assert run.stderr.lines[-1] == "graders: error: --grader-results is empty: give it a value"
    empty = pytester.runpytest("--student", "")
    assert empty.ret == pytest.ExitCode.USAGE_ERROR
    assert empty.stderr.lines[-1] == "graders: error: --student is empty: give it a value"
