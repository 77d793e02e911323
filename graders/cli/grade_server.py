"""A grading process that grades submission after submission: a class regrade's job slot.

``python -P -m graders.cli.grade_server`` reads one JSON request per line on stdin,
``{"argv": [...], "log": PATH}``, runs ``graders grade ARGV`` exactly as the command line
does (the same :func:`graders.cli.main`, so the same options, checks, sandbox and
results), with its fds 1 and 2 sent to ``PATH``, then writes ``{"code": N}`` on stdout.
Each grading still starts fresh workers and claims the slot's sandbox user anew; what it
saves is the interpreter start, the imports and pint's registry, which this process keeps.

The slot's lock on its sandbox user (passed down as in :mod:`graders.regrade.job`) is held
for the whole life of this process: each grading gets a duplicate of the descriptor, so
closing it at the end of the grading keeps the lock.

A SIGTERM or SIGINT interrupts the grading under way as it does ``graders grade`` (its
workers stopped, its folders removed, its results saying so); the process then replies
and exits.

Nothing a submission does reaches this process: student code runs in the workers only.
The regrade still bounds each request with its timeout and, past it, kills this process
and starts another for the next submission.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from graders.cli import main as graders_main
from graders.cli.grade import INTERRUPTED_SIGINT, INTERRUPTED_SIGTERM
from graders.sandbox.privileges import LOCK_VARIABLE, lock_inheritance, passed_lock

#: The exit codes of a grading a signal interrupted: the process stops after it.
INTERRUPTED = (INTERRUPTED_SIGINT, INTERRUPTED_SIGTERM)


def held_lock() -> tuple[str, int] | None:
    """The sandbox user's name and lock descriptor the regrade passed down, if any (taken
    out of the environment: each grading is handed a duplicate instead)."""
    passed = passed_lock(os.environ)
    os.environ.pop(LOCK_VARIABLE, None)
    return passed


@contextlib.contextmanager
def output_to(path: str) -> Iterator[None]:
    """Send fds 1 and 2 (and so print, sys.stdout and sys.stderr) to the file ``path``."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = [os.dup(1), os.dup(2)]
    log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.dup2(log, 1)
        os.dup2(log, 2)
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, log):
            os.close(fd)


def grade_one(request: dict[str, Any], lock: tuple[str, int] | None) -> int:
    """Run one ``graders grade`` request; its exit code."""
    duplicate = None
    if lock is not None:
        duplicate = os.dup(lock[1])
        os.set_inheritable(duplicate, True)
        os.environ.update(lock_inheritance(lock[0], duplicate))
    try:
        with output_to(str(request["log"])):
            try:
                return graders_main(["grade", *map(str, request["argv"])])
            except SystemExit as stop:  # argparse's usage errors
                return stop.code if isinstance(stop.code, int) else 2
            except BaseException as error:  # noqa: BLE001  # the job fails, not the server
                sys.stderr.write(f"graders: grader failure: {type(error).__name__}: {error}\n")
                return 1
    finally:
        os.environ.pop(LOCK_VARIABLE, None)
        if duplicate is not None and lock is not None and _same_file(duplicate, lock[1]):
            os.close(duplicate)  # still open: the grading did not release its claim


def _same_file(fd: int, other: int) -> bool:
    """Whether ``fd`` is open on the file ``other`` is open on (a closed descriptor's
    number may have been reused meanwhile)."""
    try:
        one, two = os.fstat(fd), os.fstat(other)
    except OSError:
        return False
    return (one.st_dev, one.st_ino) == (two.st_dev, two.st_ino)


def serve(requests: TextIO, replies: TextIO) -> None:
    """Answer each request line with its exit code, until end of input."""
    lock = held_lock()
    for line in requests:
        code = grade_one(json.loads(line), lock)
        replies.write(json.dumps({"code": code}) + "\n")
        replies.flush()
        if code in INTERRUPTED:  # a signal stopped the grading (it cleaned up): stop too
            return


def main() -> int:
    # the protocol moves off fds 0 and 1: gradings write to fd 1, which is their log
    requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.close(devnull)
    serve(requests, replies)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
