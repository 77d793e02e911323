"""The docs run as written: every shell command of the README, of docs/*.md and of the
student README, from the folder each says, with its outcome checked.

The mechanism is generic, so that a command someone adds to any of these files is run
too:

- **Which commands.** Every fenced ```bash (or ```sh, ```shell) block of a document, in
  order, in one ``bash`` with ``set -euo pipefail``. Other fenced blocks (```text, plain)
  hold synopses and output: each ``graders ...`` line there must use only flags that
  command has. :data:`NOT_RUN` lists the commands that are never run here, with why.
- **From where.** A fresh clone of the repository (its tracked and unignored files),
  with the grader on PATH; the instructor guide sets itself up (PATH without this test
  run's virtual environment); the student README runs in the student bundle, with the
  correct solution as ``serving.py`` (the student's work done).
- **What must come out** (:func:`check_outcomes`): each ``graders grade SRC --results R``
  gives SRC's expected score in R, each ``graders regrade SRC --out OUT`` lists every
  submission ``graded`` with its expected score, each export is there, ``tasks.py grade``
  gives the example's 100, the student bundle's ``pytest`` a full visible score, and the
  autograder tried in a temporary root prints ``score: 100.0``. Expected scores come from
  ``helpers.CORPUS_EXPECTED`` on the shipped tracks; with a track added, the correct
  solution must still get exactly 100 and every single-bug one less.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import CORPUS, CORPUS_EXPECTED, REPO, load

#: Commands never run by this test (matched at the start of a command line), and why.
NOT_RUN = {
    "python3 tasks.py test": "it runs this test suite, this test included",
    ".venv/bin/python bench/run.py": "the benchmark: about 12 minutes, never part of the tests",
    "marimo edit lab.py": "an interactive notebook server, open until its user stops it; "
                          "tests/export/test_notebook.py runs the notebook headless",
}
GUIDE = REPO / "docs" / "instructor-guide.md"
STUDENT_README = REPO / "graders" / "export" / "templates" / "student_README.md"
SHELL = ("bash", "sh", "shell")
#: The bin/ of the grader's Python, with the ``graders`` the docs' readers have installed
#: (last on PATH: ``python3`` stays the system's).
OUR_BIN = str(Path(sys.executable).parent)


def documents() -> list[Path]:
    """Every document whose commands run: the README, docs/*.md, the student README."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), STUDENT_README]


@dataclass(frozen=True)
class Block:
    language: str
    text: str
    line: int


def fenced_blocks(markdown: str) -> list[Block]:
    """The fenced blocks of a Markdown text, in order, with their language and line."""
    return [Block(match.group(1), match.group(2), markdown.count("\n", 0, match.start()) + 1)
            for match in re.finditer(r"^```(\w*)\n(.*?)^```", markdown,
                                     flags=re.DOTALL | re.MULTILINE)]


def commands(text: str) -> list[str]:
    """The command lines of a shell block (continuations joined, comments dropped)."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [line.split(" #")[0].strip() for line in joined.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def words(command: str) -> list[str]:
    """The words of a command, without leading VARIABLE=value assignments."""
    parts = shlex.split(command)
    while parts and re.fullmatch(r"[A-Za-z_]\w*=.*", parts[0]):
        parts.pop(0)
    return parts


def script_of(document: Path) -> tuple[str, list[str]]:
    """The ``bash`` script of ``document``'s shell blocks (each announced on stderr, so a
    failure names its block), and every command it runs."""
    lines, run = ["set -euo pipefail"], []
    for block in fenced_blocks(document.read_text(encoding="utf-8")):
        if block.language not in SHELL:
            continue
        lines.append(f"echo 'docs test: {document.name} line {block.line}' >&2")
        for command in commands(block.text):
            if any(command.startswith(skipped) for skipped in NOT_RUN):
                lines.append(f": not run: {shlex.quote(command)}")
                continue
            lines.append(command)
            run.append(command)
    return "\n".join(lines) + "\n", run


def fresh_clone(target: Path) -> Path:
    """The files a clone of the repository would hold (tracked, or new and not ignored)."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                             "-z"], cwd=REPO, capture_output=True, check=False)
    if listed.returncode != 0:
        pytest.skip("the docs test needs the project's git checkout")
    for name in listed.stdout.decode().split("\0"):
        source = REPO / name
        if name and source.is_file():
            destination = target / name
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination)
    return target


def environment(*, ours_on_path: bool) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PYTEST_", "VIRTUAL_ENV", "PYTHONPATH"))}
    path = [part for part in env.get("PATH", "").split(os.pathsep) if part and part != OUR_BIN]
    env["PATH"] = os.pathsep.join([*path, OUR_BIN] if ours_on_path else path)
    return env


# --- expected outcomes -----------------------------------------------------------------------


def corpus_name(source: str) -> str | None:
    parts = Path(source).parts
    return parts[-1] if len(parts) >= 3 and parts[-3:-1] == ("tests", "corpus") else None


def shipped_tracks(folder: Path) -> bool:
    """Whether ``folder``'s track files are exactly the repository's."""
    def files(where: Path) -> dict[str, bytes]:
        return {path.name: path.read_bytes() for path in where.glob("*.toml")}
    return files(folder / "tracks") == files(REPO / "tracks")


def assert_score(name: str, score: float, *, shipped: bool, where: str) -> None:
    if name == "correct":
        assert score == 100.0, where
    elif shipped:
        assert score == CORPUS_EXPECTED[name].score, where
    else:  # a track added: the expected values are not the shipped corpus's
        assert score < 100.0, where


def option(parts: list[str], flag: str) -> str | None:
    return parts[parts.index(flag) + 1] if flag in parts[:-1] else None


def check_outcomes(folder: Path, ran: list[str], stdout: str) -> None:
    """The outcome of every command of a document that :func:`script_of` ran in
    ``folder`` (see the module docstring)."""
    shipped = shipped_tracks(folder)
    written: dict[str, str] = {}  # results path: the submission graded into it, last wins
    copies: dict[str, str] = {}  # a copy of the corpus (cp -R tests/corpus X): X -> source
    for command in ran:
        parts = words(command)
        if parts[:2] == ["cp", "-R"] and len(parts) == 4:
            copies[parts[3].rstrip("/")] = parts[2].rstrip("/")
        elif parts[:2] == ["graders", "grade"] and option(parts, "--results"):
            written[str(option(parts, "--results"))] = parts[2]
            html = option(parts, "--html")
            if html:
                assert (folder / html).stat().st_size > 0, command
        elif parts[:2] == ["graders", "regrade"]:
            check_regrade(folder / str(option(parts, "--out")),
                          copies.get(parts[2].rstrip("/"), parts[2]), shipped, command)
        elif parts[:3] == ["graders", "export", "gradescope"]:
            assert (folder / parts[3]).is_file(), command
        elif parts[:3] == ["graders", "export", "student"]:
            assert (folder / parts[3] / "graders" / "golden.json").is_file(), command
        elif parts[:3] == ["graders", "tracks", "new"] and option(parts, "--id"):
            assert (folder / "tracks" / f"{option(parts, '--id')}.toml").is_file(), command
        elif parts[:3] == ["python3", "tasks.py", "grade"] and len(parts) == 3:
            assert load(folder / "results" / "results.json")["score"] == 100.0, command
        elif parts == ["pytest"]:
            totals = re.findall(r"TOTAL ([\d.]+) / ([\d.]+)", stdout)
            assert totals, stdout[-2000:]
            assert totals[-1][0] == totals[-1][1], stdout[-2000:]
        elif parts and parts[-1].endswith("run_autograder"):
            assert "score: 100.0" in stdout, stdout[-2000:]
    for results, source in written.items():
        name = corpus_name(source)
        if name is not None:
            assert_score(name, load(folder / results)["score"], shipped=shipped,
                         where=f"graders grade {source} --results {results}")


def check_regrade(out: Path, source: str, shipped: bool, command: str) -> None:
    with (out / "grades.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert rows, command
    for row in rows:
        assert row["status"] == "graded", (command, row)
        if corpus_name(f"{source.rstrip('/')}/{row['submission']}") is not None:
            assert_score(row["submission"], float(row["score"]), shipped=shipped,
                         where=f"{command}: {row['submission']}")


# --- the tests -------------------------------------------------------------------------------


def test_the_guide_has_the_commands_the_issue_names() -> None:
    _, ran = script_of(GUIDE)
    script = "\n".join(ran)
    for command in ("graders tracks check", "graders tracks show", "graders tracks new",
                    "graders export gradescope", "graders export student", "graders regrade",
                    "graders reality table"):
        assert command in script, command


def test_every_document_with_commands_is_found() -> None:
    found = {path.name for path in documents() if script_of(path)[1]}
    assert {"instructor-guide.md", "student_README.md", "README.md"} <= found


def command_parser(names: list[str]) -> argparse.ArgumentParser:
    """The parser of the ``graders`` subcommand that ``names`` (the words after
    ``graders``) lead to."""
    from graders.cli import build_parser

    parser = build_parser()
    for name in names:
        choices = [action.choices for action in parser._actions
                   if isinstance(action, argparse._SubParsersAction)]
        if not choices or name not in choices[0]:
            break
        parser = choices[0][name]
    return parser


def test_synopses_use_only_flags_their_command_has() -> None:
    checked = 0
    for document in documents():
        for block in fenced_blocks(document.read_text(encoding="utf-8")):
            for line in commands(block.text):
                if not line.startswith("graders "):
                    continue
                parser = command_parser(line.split()[1:])
                known = {flag for action in parser._actions for flag in action.option_strings}
                for flag in re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", line):
                    assert flag in known, f"{document.name} line {block.line}: {line}"
                checked += 1
    assert checked > 5


@pytest.mark.slow
@pytest.mark.parametrize("document", [path for path in documents()
                                      if path not in (GUIDE, STUDENT_README)],
                         ids=lambda path: path.name)
def test_a_documents_commands_run_as_written_on_a_fresh_clone(tmp_path: Path,
                                                            document: Path) -> None:
    script, ran = script_of(document)
    if not ran:
        pytest.skip(f"{document.name} has no command to run")
    clone = fresh_clone(tmp_path / "clone")
    done = subprocess.run(["bash", "-c", script], cwd=clone, env=environment(ours_on_path=True),
                          capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    check_outcomes(clone, ran, done.stdout)


@pytest.mark.slow
@pytest.mark.needs_mlsysim
def test_the_instructor_guide_runs_as_written_on_a_fresh_clone(tmp_path: Path) -> None:
    pytest.importorskip("mlsysim")
    script, ran = script_of(GUIDE)
    clone = fresh_clone(tmp_path / "clone")
    done = subprocess.run(["bash", "-c", script], cwd=clone, env=environment(ours_on_path=False),
                          capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    check_outcomes(clone, ran, done.stdout)
    golden = json.loads((clone / "dist" / "serving-lab-student" / "graders" / "golden.json")
                        .read_text(encoding="utf-8"))
    assert "jetson_orin_nx" in golden["tracks"]  # the track the guide adds
    # the class page names each catalogued corpus bug, with --names as the guide asks
    report = json.loads((clone / "dist" / "regrade" / "report.json").read_text(encoding="utf-8"))
    labelled = {(c["function"], c["mistake"]): c["members"] for c in report["clusters"]}
    assert labelled[("batching_tax", "natural-log")] == ["batching_natural_log"]
    assert labelled[("erlang_c", "erlang-c-textbook")] == ["erlang_c_textbook"]
    page = (clone / "dist" / "regrade" / "class.html").read_text(encoding="utf-8")
    assert "a natural log where the lab uses log2" in page


@pytest.mark.slow
def test_the_student_readme_runs_as_written_in_the_student_bundle(tmp_path: Path) -> None:
    bundle = tmp_path / "serving-lab"
    exported = subprocess.run([sys.executable, "-m", "graders", "export", "student",
                               str(bundle)], env=environment(ours_on_path=True),
                              capture_output=True, text=True, timeout=600, check=False)
    assert exported.returncode == 0, exported.stderr
    shutil.copy(CORPUS / "correct" / "serving.py", bundle / "serving.py")
    script, ran = script_of(bundle / "README.md")
    written = [command for block in fenced_blocks(STUDENT_README.read_text(encoding="utf-8"))
               if block.language in SHELL for command in commands(block.text)]
    # every command as written, but the notebook's interactive server (see NOT_RUN)
    assert [command for command in written if command not in ran] == ["marimo edit lab.py"]
    assert ran == [command for command in written if command != "marimo edit lab.py"]
    done = subprocess.run(["bash", "-c", script], cwd=bundle,
                          env=environment(ours_on_path=False), capture_output=True, text=True,
                          timeout=1800, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    check_outcomes(bundle, ran, done.stdout)
