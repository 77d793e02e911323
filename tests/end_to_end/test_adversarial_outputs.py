"""Hostile submissions against the grader's outputs, graded with the CLI as a user runs it.

- ``hostile_text`` raises, from erlang_c, exceptions whose messages hold a lone surrogate,
  ``<script>``, Markdown images and links, ANSI colours, an OSC window title and a forged
  green "TOTAL 100.00 / 100.00" line. Every output must stay valid and inert, and the
  score must be exactly what the correct code earns with erlang_c raising
  NotImplementedError (graded here as the baseline).
- ``plant_output_symlinks`` reads the grader's command line from /proc and plants
  symbolic links to decoy files, and FIFOs, at every output path and at names a temp file
  beside them may get. It changes no answer: it must score exactly 100.0, leave the
  decoys untouched and hang nothing.

Each grading writes every output (``--results``, ``--junit-xml``, ``--json-report``,
``--html``, ``--classroom``) into a private folder, from a neutral working folder.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import ADVERSARIAL, CORPUS, reject_constant

from graders.results.reports import gradescope_problems
from graders.sandbox.runner import Limits

pytestmark = pytest.mark.slow

CORRECT_SOURCE = CORPUS / "correct" / "serving.py"
AS_ROOT = os.geteuid() == 0
#: A grading that takes longer than this hung.
TIMEOUT_S = Limits().worst_case_s + 60
NOT_IMPLEMENTED_ERLANG_C = '''

def erlang_c(arrival_qps, service_ms, replicas):
    raise NotImplementedError
'''
OUTPUTS = {"--results": "results.json", "--junit-xml": "junit.xml",
           "--json-report": "report.json", "--html": "page.html",
           "--classroom": "classroom.json"}
DECOY = b"a file of root's that no grading may change\n"
#: Raw bytes that must never reach the terminal: ESC, the C1 CSI and OSC (as UTF-8), BEL,
#: CR, and a lone surrogate (as Python's surrogatepass writes it).
TERMINAL_FORBIDDEN = (b"\x1b", b"\xc2\x9b", b"\xc2\x9d", b"\x07", b"\r", b"\xed\xa0\x80")
#: Characters no text output may hold raw (see graders.escaping).
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")
#: Markup that must not appear unescaped in an output rendered as HTML or Markdown.
RENDERED_MARKUP = re.compile(r"(?<![\\&])<(script|img)|(?<!\\)!\[|(?<!\\)\]\(")


@dataclass(frozen=True)
class Graded:
    """One CLI grading: its exit code, its terminal output and its files."""

    returncode: int
    output: bytes
    out: Path
    decoys: dict[str, Path]

    @property
    def text(self) -> str:
        return self.output.decode("utf-8")

    @property
    def results(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads((self.out / "results.json").read_text(
            encoding="utf-8"), parse_constant=reject_constant)
        return document

    def file(self, name: str) -> bytes:
        return (self.out / name).read_bytes()


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="adversarial-outputs-", dir="/tmp"))
    folder.chmod(0o755)  # the sandbox user may traverse it, and write nothing in it
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def grade(base: Path, name: str, source: str) -> Graded:
    """Grade ``source`` with every output in ``base/name/out`` and decoys beside it."""
    home = base / name
    submission, out, cwd = home / "submission", home / "out", home / "cwd"
    for folder in (submission, out, cwd):
        folder.mkdir(parents=True)
        folder.chmod(0o755)
    (submission / "serving.py").write_text(source, encoding="utf-8")
    (submission / "serving.py").chmod(0o644)
    decoys = {}
    for file_name in OUTPUTS.values():  # where the attack's links point
        decoys[file_name] = home / f"decoy-{file_name}"
        decoys[file_name].write_bytes(DECOY)
        decoys[file_name].chmod(0o644)
    command = [sys.executable, "-m", "graders", "grade", str(submission)]
    for flag, file_name in OUTPUTS.items():
        command += [flag, str(out / file_name)]
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("PYTEST_", "COV_"))}
    try:
        run = subprocess.run(command, cwd=cwd, env=environment, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"grading {name} hung for more than {TIMEOUT_S:g} s")
    return Graded(run.returncode, run.stdout, out, decoys)


@pytest.fixture(scope="module")
def baseline(base: Path) -> Graded:
    """The correct code with erlang_c raising NotImplementedError: what honesty earns."""
    source = CORRECT_SOURCE.read_text(encoding="utf-8") + NOT_IMPLEMENTED_ERLANG_C
    return grade(base, "baseline", source)


@pytest.fixture(scope="module")
def hostile(base: Path) -> Graded:
    return grade(base, "hostile_text",
                 (ADVERSARIAL / "hostile_text" / "serving.py").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def planted(base: Path) -> Graded:
    if not AS_ROOT:
        pytest.skip("without root the worker runs as the grader's own user, which may write "
                    "anywhere the grader can (see docs/security.md: not defended)")
    return grade(base, "plant_output_symlinks",
                 (ADVERSARIAL / "plant_output_symlinks" / "serving.py")
                 .read_text(encoding="utf-8"))


def assert_completed(graded: Graded) -> None:
    assert graded.returncode == 0, graded.output[-3000:]
    assert b"Traceback" not in graded.output
    assert b"INTERNALERROR" not in graded.output


def texts(document: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(where, text, output_format) of every output and name in a results document."""
    yield "output", document["output"], document["output_format"]
    for index, test in enumerate(document["tests"]):
        yield f"tests[{index}].output", test["output"], test["output_format"]
        yield f"tests[{index}].name", test["name"], test["name_format"]


# --- hostile text -----------------------------------------------------------------------------


def test_the_baseline_is_graded_and_loses_points(baseline: Graded) -> None:
    assert_completed(baseline)
    assert 0 < baseline.results["score"] < 100


def test_hostile_text_scores_exactly_what_erlang_c_raising_earns(baseline: Graded,
                                                                 hostile: Graded) -> None:
    assert_completed(hostile)
    assert hostile.results["score"] == baseline.results["score"]
    assert [(t["name"], t["score"]) for t in hostile.results["tests"]] == \
        [(t["name"], t["score"]) for t in baseline.results["tests"]]


def test_the_hostile_text_reaches_results_json_escaped_for_its_format(hostile: Graded) -> None:
    document = hostile.results
    assert gradescope_problems(document) == []
    # the top-level output is the html essentials (results/essentials.py), tests are text
    assert (document["output_format"], document["test_output_format"]) == ("html", "text")
    assert "<pre>" in document["output"]
    shown = "\n".join(test["output"] for test in document["tests"])
    assert "HostileError" in shown  # the attack's text is there, escaped
    assert "\\ud800" in shown
    assert "\\x1b" in shown
    for where, text, output_format in texts(document):
        assert CONTROL.search(text) is None, where
        if output_format in ("md", "html", "simple_format"):
            assert RENDERED_MARKUP.search(text) is None, where
        else:
            assert output_format in ("text", "ansi"), where
    raw = hostile.file("results.json")
    raw.decode("utf-8")
    assert not re.search(rb"(?<!\\)\\u(d[89abcdef][0-9a-f]{2}|001b|009b)", raw)


def test_the_html_page_is_written_and_inert(hostile: Graded) -> None:
    page = hostile.file("page.html").decode("utf-8")  # strict: valid UTF-8, no surrogate
    assert "HostileError" in page
    assert "&lt;script&gt;" in page
    assert CONTROL.search(page) is None
    assert re.search(r"<(script|img src=x)", page, re.IGNORECASE) is None


def test_the_terminal_gets_no_escape_sequence_and_no_forged_total(baseline: Graded,
                                                                  hostile: Graded) -> None:
    for forbidden in TERMINAL_FORBIDDEN:
        assert forbidden not in hostile.output, forbidden
    text = hostile.text
    assert "HostileError" in text  # the feedback was shown, escaped
    totals = [line for line in text.splitlines() if line.lstrip().startswith("TOTAL")]
    assert totals == [f"TOTAL {baseline.results['score']:.2f} / 100.00"]


def test_the_other_outputs_stay_well_formed_and_free_of_escape_codes(hostile: Graded) -> None:
    ElementTree.fromstring(hostile.file("junit.xml"))
    json.loads(hostile.file("report.json"), parse_constant=reject_constant)
    classroom = json.loads(hostile.file("classroom.json"))
    for test in classroom["tests"]:
        assert CONTROL.search(test["message"]) is None
        assert not any(line.lstrip().startswith("::") for line in test["message"].splitlines())
    for name in OUTPUTS.values():
        assert b"\x1b" not in hostile.file(name), name


# --- planted links and FIFOs ------------------------------------------------------------------


def test_planted_links_and_fifos_cost_nothing_and_score_100(planted: Graded) -> None:
    assert_completed(planted)
    assert planted.results["score"] == 100.0


def test_every_output_is_a_regular_file_of_the_grader(planted: Graded) -> None:
    for name in OUTPUTS.values():
        info = (planted.out / name).lstat()
        assert stat.S_ISREG(info.st_mode), name
        assert info.st_uid == os.geteuid(), name
    ElementTree.fromstring(planted.file("junit.xml"))
    json.loads(planted.file("report.json"), parse_constant=reject_constant)
    assert sorted(p.name for p in planted.out.iterdir()) == sorted(OUTPUTS.values())


def test_the_decoys_outside_are_unchanged(planted: Graded) -> None:
    for name, path in planted.decoys.items():
        info = path.lstat()
        assert stat.S_ISREG(info.st_mode), name
        assert info.st_uid == os.geteuid(), name
        assert path.read_bytes() == DECOY, name
