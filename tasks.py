"""The two commands of this repository: grade a submission, and run the tests.

    python3 tasks.py grade [SUBMISSION]   set up, then grade SUBMISSION (default: the
                                          example tests/corpus/correct) into results/
    python3 tasks.py test [PYTEST ARGS]   set up, then ruff, mypy and pytest

Both need only Python 3.11+ with venv and pip. The first run makes ``.venv`` and installs
the project with its development tools, the grading dependencies pinned by
graders/constraints.txt; later runs reinstall only when pyproject.toml or the pins
change. ``test`` runs the fast tests; with ``CI`` set (CI does) or ``--all`` it runs the
slow ones too (simulation, corpora, exports end to end).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".serving-grader-installed"
CONSTRAINTS = ROOT / "graders" / "constraints.txt"
EXAMPLE = ROOT / "tests" / "corpus" / "correct"
RESULTS = ROOT / "results"


def say(message: str) -> None:
    sys.stderr.write(f"tasks.py: {message}\n")
    sys.stderr.flush()


def run(*command: str | Path, cwd: Path = ROOT) -> int:
    return subprocess.call([str(part) for part in command], cwd=cwd)


def setup() -> None:
    """Make .venv and install the project into it, unless it is already up to date; then
    compile the grader's modules (see :func:`compile_sources`)."""
    if sys.version_info < (3, 11):  # noqa: UP036 (users may run it with an older python3)
        raise SystemExit("tasks.py: Python 3.11 or newer is needed")
    install()
    compile_sources()
    precompute_reality()


def precompute_reality() -> None:
    """Simulate the tracks' reality curves into the grader's cache (a few seconds, once per
    change of the tracks or of the simulation; a grading only reads them)."""
    if run(BIN / "graders", "reality", "build") != 0:
        say("the reality curves could not be built; the feedback page will show none")


def compile_sources() -> None:
    """Write the bytecode of ``graders/`` and ``reference/`` (only what changed).

    The project is installed editable, so pip compiles none of it; where
    PYTHONDONTWRITEBYTECODE is set (as on many machines and CI images), Python would
    otherwise compile every grader module again at every grading.
    """
    run(BIN / "python", "-m", "compileall", "-q", "graders", "reference")


def install() -> None:
    """Make .venv and install the project into it, unless it is already up to date."""
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()
                            + CONSTRAINTS.read_bytes()).hexdigest()
    if STAMP.is_file() and STAMP.read_text(encoding="utf-8") == wanted:
        return
    if not (BIN / "python").exists():
        say(f"creating {VENV.relative_to(ROOT)}")
        venv.EnvBuilder(with_pip=True).create(VENV)
    say("installing the project, its test tools and the pinned grading dependencies "
        "(a few minutes the first time)")
    python = BIN / "python"
    steps: list[list[str | Path]] = [
        [python, "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
        [python, "-m", "pip", "install", "--quiet", "--constraint", CONSTRAINTS,
         "--editable", ".[dev,mlsysim]"],
    ]
    for step in steps:
        if run(*step) != 0:
            raise SystemExit("tasks.py: the installation failed (see above)")
    STAMP.write_text(wanted, encoding="utf-8")


def grade(arguments: list[str]) -> int:
    """Grade a submission (default: the example) into results/results.json (the grader
    says where, once). The grading runs in the caller's working folder, so that every
    path given (the submission, and any option such as ``--html feedback.html``) means
    what it means there."""
    submission = Path(arguments[0]).absolute() if arguments else EXAMPLE
    RESULTS.mkdir(mode=0o700, exist_ok=True)
    results = RESULTS / "results.json"
    return run(BIN / "graders", "grade", submission, "--results", results, *arguments[1:],
               cwd=Path.cwd())


def test(arguments: list[str]) -> int:
    """Lint, type-check and run the tests (the slow ones too with CI set or --all)."""
    everything = "--all" in arguments or bool(os.environ.get("CI"))
    arguments = [argument for argument in arguments if argument != "--all"]
    for check in ([BIN / "ruff", "check", "reference", "graders", "tests", "bench", "tools",
                   "student_template/lab.py", "tasks.py"], [BIN / "mypy"]):
        if run(*check) != 0:
            return 1
    selection = ["-m", "slow or not slow"] if everything else []
    # in CI, the slowest tests named at the end: where the run's time goes
    timings = ["--durations=30"] if os.environ.get("CI") else []
    code = run(BIN / "pytest", *selection, *timings, *arguments)
    return 0 if code == 0 else code


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("grade", "test"):
        sys.stderr.write(__doc__ or "")
        return 2
    setup()
    return grade(argv[1:]) if argv[0] == "grade" else test(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
