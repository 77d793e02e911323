"""The Linux modes the adversarial cases are graded in (issue 32), as one table, and a
grading or regrade with the CLI in any of them.

Each mode is a row of ``graders.sandbox.modes`` made on this one machine, which must be
root for all but the first (CI runs as root):

- *as graded*: the grader as it runs here (bubblewrap, as the sandbox user);
- *no bubblewrap*: bubblewrap switched off by a ``sitecustomize`` on PYTHONPATH, so
  Landlock and the privilege drop confine the worker (as root with CAP_SYS_ADMIN, in a box
  that is a tmpfs of its own);
- *unfiltered*: that, with Landlock and the syscall filter switched off too: where an
  attack must succeed, to show it has teeth;
- *root without CAP_SYS_ADMIN*: ``setpriv`` drops it from every set (bubblewrap still
  runs, as the sandbox user);
- *docker default profile*: a filter refusing namespaces and mounts, installed without
  no_new_privs as Docker's is, then that ``setpriv`` (bubblewrap cannot run, Landlock can,
  the box is not mounted);
- *ordinary user*: the grader's instructor account (the system's Python on a
  world-readable copy of the grader), in bubblewrap;
- *ordinary user in docker default profile*: that account under the same filter, so
  Landlock confines the worker.

A mode that cannot be made here is skipped with the reason (:func:`mode_unavailable`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from helpers import (
    ADVERSARIAL,
    AS_ROOT,
    INSTRUCTOR,
    REPO,
    SYSTEM_PYTHON,
    kill_marked,
    ordinary_regrade_unsupported,
    ordinary_user,
    ordinary_user_unavailable,
    world_readable_install,
)

from graders.sandbox import landlock, syscall_filter
from graders.sandbox.confinement import CAP_SYS_ADMIN, _has_capability
from graders.sandbox.runner import Limits

GIB = 1024**3
BUBBLEWRAP, LANDLOCK = "bubblewrap", "landlock"

#: Switches off bubblewrap: Landlock and the privilege drop remain.
NO_NAMESPACES = textwrap.dedent("""\
    import graders.sandbox.confinement as confinement

    confinement.bubblewrap_support = lambda uid, gid, drop: "switched off by the test"
""")
#: That, with Landlock and the syscall filter switched off too.
NO_CONFINEMENT = NO_NAMESPACES + textwrap.dedent("""\
    import graders.sandbox.landlock as landlock
    import graders.sandbox.syscall_filter as syscall_filter

    landlock.unavailable = lambda: "switched off by the test"
    syscall_filter.unavailable = lambda: "switched off by the test"
""")
#: Installs a filter refusing what Docker's default profile refuses a container without
#: CAP_SYS_ADMIN (namespaces, mounts; the keyring too, left out here: the keyring test's
#: own wrapper, run after this one, needs it), without no_new_privs, as Docker does; then
#: runs its arguments.
DOCKER_FILTER = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, os.environ["FILTER_FOLDER"])
    import syscall_filter
    REFUSED = {"unshare", "setns", "clone", "clone3", "mount", "umount2", "pivot_root",
               "chroot", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
               "mount_setattr"}
    syscall_filter.install(tuple(rule for rule in syscall_filter.RULES if rule.name in REFUSED),
                           no_new_privs=False)
    os.execvp(sys.argv[1], sys.argv[1:])
""")
DOCKER_WRAPPER = (sys.executable, "-c", DOCKER_FILTER)
DROP_SYS_ADMIN = ("setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin", "--")


class Mode(NamedTuple):
    """One mode: how the test makes it, and what the grading must report in it."""

    #: A ``sitecustomize.py`` put first on the grader's PYTHONPATH (None: none; root only).
    switch: str | None
    #: A command run as root that runs the grading as its last arguments (or the step
    #: down to the instructor account, which comes after it).
    wrapper: tuple[str, ...]
    #: Graded by the instructor account (the test steps down to it from root).
    ordinary: bool
    #: The layer that confines the worker's view (None: none, nor the syscall filter).
    layer: str | None
    #: The row of graders.sandbox.modes reported (None: this machine's, as graded).
    row: str | None


AS_GRADED, NO_BUBBLEWRAP, UNFILTERED = "as graded", "no bubblewrap", "unfiltered"
NO_ADMIN, DOCKER = "root without CAP_SYS_ADMIN", "docker default profile"
USER, USER_DOCKER = "ordinary user", "ordinary user in docker default profile"
#: Every mode, the one table.
MODES: dict[str, Mode] = {
    AS_GRADED: Mode(None, (), False, BUBBLEWRAP, None),
    NO_BUBBLEWRAP: Mode(NO_NAMESPACES, (), False, LANDLOCK, "root, no bubblewrap"),
    UNFILTERED: Mode(NO_CONFINEMENT, (), False, None, None),
    NO_ADMIN: Mode(None, DROP_SYS_ADMIN, False, BUBBLEWRAP, "root without CAP_SYS_ADMIN"),
    DOCKER: Mode(None, (*DOCKER_WRAPPER, *DROP_SYS_ADMIN), False, LANDLOCK,
                 "root, no bubblewrap"),
    USER: Mode(None, (), True, BUBBLEWRAP, "ordinary user"),
    USER_DOCKER: Mode(None, DOCKER_WRAPPER, True, LANDLOCK, "ordinary user, namespaces refused"),
}
#: The modes every attack must gain nothing in (all but the one that shows its teeth).
CONFINED = tuple(name for name, mode in MODES.items() if mode.layer is not None)
USER_UNCONFINED = "ordinary user, unconfined"
#: Modes outside the table, where an attack on an ordinary user's regrade must succeed:
#: the instructor account in the Docker simulation with Landlock and the filter off.
TEETH: dict[str, Mode] = {
    USER_UNCONFINED: Mode(NO_CONFINEMENT, DOCKER_WRAPPER, True, None, None)}
#: Whether the grader here may mount (root with CAP_SYS_ADMIN: the box's own tmpfs).
ADMIN = AS_ROOT and _has_capability(CAP_SYS_ADMIN)
#: A grading that takes longer than this is stuck (a generous bound, not a measurement).
GRADING_TIMEOUT_S = Limits().worst_case_s + 600


def mode_unavailable(name: str) -> str | None:
    """Why mode ``name`` cannot be made on this machine (None: it can); may make the
    instructor account."""
    mode = {**MODES, **TEETH}[name]
    if name != AS_GRADED and not AS_ROOT:
        return f"the mode {name!r} needs root (the sandbox users, setpriv, the instructor " \
               "account); this run is not root"
    if mode.wrapper and syscall_filter.unavailable() is not None:
        return f"the mode {name!r} needs the syscall filter: {syscall_filter.unavailable()}"
    if mode.layer == LANDLOCK and landlock.unavailable() is not None:
        return f"the mode {name!r} confines with Landlock: {landlock.unavailable()}"
    reason = ordinary_regrade_unsupported() if name == USER else \
        ordinary_user_unavailable() if mode.ordinary else None
    return None if reason is None else \
        f"the mode {name!r} (gradings and regrades as an ordinary user) cannot be made " \
        f"here: {reason}"


def label(name: str) -> str:
    return name.replace(" ", "-")


def plant_switches(folder: Path) -> None:
    """One folder per switch under ``folder``, holding its ``sitecustomize.py``."""
    for name, mode in {**MODES, **TEETH}.items():
        if mode.switch is not None:
            site = folder / f"site-{label(name)}"
            site.mkdir()
            (site / "sitecustomize.py").write_text(mode.switch, encoding="utf-8")


@dataclass(frozen=True)
class Instructor:
    """The instructor account, and a copy of the grader it can read."""

    entry: Any  # its pwd entry
    install: Path
    pythonpath: str

    @property
    def filter_folder(self) -> Path:
        """The syscall filter's folder in that copy (the keyring wrapper imports it)."""
        return self.install / "project" / "graders" / "sandbox"

    def own(self, *paths: Path) -> None:
        """Give ``paths``, and everything under those that are folders, to the account."""
        for top in paths:
            for path in [top, *(top.rglob("*") if top.is_dir() else ())]:
                os.chown(path, self.entry.pw_uid, self.entry.pw_gid)


def instructor(install: Path) -> Instructor:
    """The instructor account, with a grader copy it can read installed in ``install``."""
    return Instructor(ordinary_user(INSTRUCTOR), install, world_readable_install(install))


def python_of(user: Instructor | None) -> str:
    """The interpreter that runs the grader: the system's for the instructor account."""
    return sys.executable if user is None else str(SYSTEM_PYTHON)


def filter_folder(user: Instructor | None) -> Path:
    """The syscall filter's folder, where the grading's user can read it."""
    return Path(syscall_filter.__file__).parent if user is None else user.filter_folder


@dataclass(frozen=True)
class Run:
    """One CLI run in a mode: its exit code, outputs, and the host's Shmem growth."""

    returncode: int
    stdout: str
    stderr: str
    #: The largest growth of the host's Shmem during the run, in bytes.
    shmem_growth: int


def shmem_bytes() -> int:
    with open("/proc/meminfo", encoding="ascii") as meminfo:
        for line in meminfo:
            if line.startswith("Shmem:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no Shmem line in /proc/meminfo")


class ShmemPeak:
    """The host's largest Shmem growth while the ``with`` block runs (sampled every
    20 ms): ``growth`` once it ends."""

    def __enter__(self) -> ShmemPeak:
        self.before, self._peak, self._done = shmem_bytes(), 0, threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        return self

    def _sample(self) -> None:
        while not self._done.wait(0.02):
            self._peak = max(self._peak, shmem_bytes())

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._sampler.join()

    @property
    def growth(self) -> int:
        return max(self._peak - self.before, 0)


def run_in_mode(base: Path, home: Path, arguments: Sequence[str], name: str, *,
                cwd: Path, inner: Sequence[str] = (), user: Instructor | None = None) -> Run:
    """Run ``python -m graders ARGUMENTS`` from ``cwd`` in mode ``name`` (``base``: where
    :func:`plant_switches` put the switches), through ``inner`` (a command that runs its
    last arguments, run as the grading's user), as ``user`` when given (which the mode
    must name ordinary), sampling the host's Shmem meanwhile. ``home``, the run's folder,
    gets a private TMPDIR, and is given to ``user``, whose HOME is the mode's own (one
    for all its runs, as an account has one)."""
    mode = {**MODES, **TEETH}[name]
    assert mode.ordinary is (user is not None), name
    temp = home / "tmp"
    temp.mkdir(mode=0o755)
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env["TMPDIR"] = str(temp)
    if mode.switch is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(base / f"site-{label(name)}"), str(REPO),
             *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))])
    env["FILTER_FOLDER"] = str(filter_folder(user))
    wrapper = list(mode.wrapper)
    if user is not None:  # the system's Python, on a copy of the grader it can read
        account_home = base / f"home-{label(name)}"  # one, as an account has (its cache)
        account_home.mkdir(mode=0o700, exist_ok=True)
        os.chown(account_home, user.entry.pw_uid, user.entry.pw_gid)
        switches = [str(base / f"site-{label(name)}")] if mode.switch is not None else []
        env["PYTHONPATH"] = os.pathsep.join([*switches, user.pythonpath])
        env["HOME"] = str(account_home)
        wrapper += ["setpriv", f"--reuid={user.entry.pw_uid}", f"--regid={user.entry.pw_gid}",
                    "--clear-groups", "--"]
        user.own(home)
    with ShmemPeak() as shmem:
        completed = subprocess.run(
            [*wrapper, *inner, python_of(user), "-m", "graders", *arguments], cwd=cwd,
            env=env, capture_output=True, text=True, timeout=GRADING_TIMEOUT_S, check=False)
    assert kill_marked(f"{home}/") == []
    return Run(completed.returncode, completed.stdout, completed.stderr, shmem.growth)


@dataclass(frozen=True)
class Graded(Run):
    """One ``graders grade``: its run, and the folder its results.json was written to."""

    out: Path
    #: results.json as written ("" if none was).
    text: str

    @property
    def results(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.text) if self.text else {}
        return document

    @property
    def output(self) -> str:
        """Every text of the results (the submission's output at import is in the top-level
        output, what it prints in serve in serve's tests' outputs)."""
        return json.dumps(self.results, ensure_ascii=False)


def grade(base: Path, case: str, name: str, *, inner: Sequence[str] = (),
          user: Instructor | None = None, page: str | None = None, tag: str = "",
          source: Path | None = None) -> Graded:
    """Grade ``case`` of adversarial/ (or the serving.py in ``source``, named ``case``) in
    mode ``name`` with the CLI (with its HTML page ``page`` beside results.json, when
    given), in a folder of ``base`` named after the case, the mode and ``tag``."""
    home = base / f"{case}-{label(name)}{tag}"
    submission, out = home / "submission", home / "out"
    for folder in (home, out):
        folder.mkdir(mode=0o755, parents=True)
        folder.chmod(0o755)
    submission.mkdir(mode=0o700)
    shutil.copy((source or ADVERSARIAL / case) / "serving.py", submission / "serving.py")
    results = out / "results.json"
    html = ["--html", str(out / page)] if page is not None else []
    run = run_in_mode(base, home, ["grade", str(submission), "--results", str(results), "-q",
                                   *html], name, cwd=out, inner=inner, user=user)
    text = results.read_text(encoding="utf-8") if results.exists() else ""
    return Graded(run.returncode, run.stdout, run.stderr, run.shmem_growth, out, text)


def regrade(base: Path, cases: Sequence[str], name: str, *,
            user: Instructor | None = None, classmates: Mapping[str, Path] | None = None,
            options: Sequence[str] = (), tag: str = "") -> tuple[Path, Run]:
    """Regrade a class of ``cases`` (each a student) and ``classmates`` (a student's name:
    the folder of their serving.py) in mode ``name``, two at a time, with pages and
    ``options``; the output folder and the run."""
    home = base / f"regrade-{label(name)}{tag}"
    home.mkdir(mode=0o755)
    sources = {case: ADVERSARIAL / case for case in cases} | dict(classmates or {})
    for student, source in sources.items():
        (home / "class" / student).mkdir(parents=True)
        shutil.copy(source / "serving.py", home / "class" / student / "serving.py")
    run = run_in_mode(base, home, ["regrade", "class", "--out", "out", "--jobs", "2",
                                   "--pages", "--no-histogram", *options], name, cwd=home,
                      user=user)
    return home / "out", run


def assert_reported(results: dict[str, Any], name: str) -> None:
    """``results`` report the protections of mode ``name``."""
    mode = MODES[name]
    protections = results["extra_data"]["protections"]
    assert protections["syscall_filter"] is (mode.layer is not None), protections
    assert protections["privilege_drop"] is (AS_ROOT and not mode.ordinary), protections
    assert protections["tool"] == (BUBBLEWRAP if mode.layer == BUBBLEWRAP else "none"), \
        protections
    if mode.layer is not None:
        assert mode.layer in protections["layers"], protections
    if mode.row is not None:
        assert protections["mode"] == mode.row, protections
        assert protections["landlock"] == \
            (landlock.abi_version() if mode.layer == LANDLOCK else 0), protections
        # only root with CAP_SYS_ADMIN mounts the box (not NO_ADMIN, DOCKER, the user)
        assert protections["box_mount"] is (name == NO_BUBBLEWRAP and ADMIN), protections
