"""Which layers confine the student's worker in which mode: one table, as data (shown
in docs/security.md, "Supported systems"). A mode is who runs the grader and what the
machine allows; the protections report the row in effect, less any layer it lacks."""

from __future__ import annotations

from typing import NamedTuple

BUBBLEWRAP = "bubblewrap"  # graders.sandbox.bubblewrap: allowlist, namespaces
LANDLOCK = "landlock"  # graders.sandbox.landlock: allowlist, TCP and scopes, no namespaces
FILTER = "syscall filter"  # graders.sandbox.syscall_filter
DROP = "privilege drop"  # graders.sandbox.privileges
RLIMITS = "rlimits"  # worker_main.set_limits
SWEEP = "process sweep"  # graders.sandbox.cleanup, through /proc
LAYERS = (BUBBLEWRAP, LANDLOCK, FILTER, DROP, RLIMITS, SWEEP)


class Mode(NamedTuple):
    """One row: a mode's name, when it applies, and its layers."""

    name: str
    when: str
    layers: tuple[str, ...]


ROOT = Mode("root with CAP_SYS_ADMIN", "bubblewrap runs as the sandbox user",
            (BUBBLEWRAP, FILTER, DROP, RLIMITS, SWEEP))
ROOT_NO_ADMIN = Mode("root without CAP_SYS_ADMIN", "bubblewrap runs as the sandbox user",
                     (BUBBLEWRAP, FILTER, DROP, RLIMITS, SWEEP))
ROOT_NO_BUBBLEWRAP = Mode("root, no bubblewrap",
                          "bubblewrap missing or refused (Docker's default profile)",
                          (LANDLOCK, FILTER, DROP, RLIMITS, SWEEP))
USER = Mode("ordinary user", "bubblewrap runs as this user",
            (BUBBLEWRAP, FILTER, RLIMITS, SWEEP))
USER_REFUSED = Mode("ordinary user, namespaces refused",
                    "no bubblewrap, or no unprivileged user namespaces",
                    (LANDLOCK, FILTER, RLIMITS, SWEEP))
ROOT_ALONE = Mode("root without a sandbox user", "the runner's own tests",
                  (FILTER, RLIMITS, SWEEP))
PORTABLE = Mode("portable runner", "pwd, grp, fcntl, resource or /proc missing",
                (LANDLOCK, FILTER, RLIMITS))
MODES = (ROOT, ROOT_NO_ADMIN, ROOT_NO_BUBBLEWRAP, USER, USER_REFUSED, ROOT_ALONE, PORTABLE)


def hardened_mode(*, root: bool, sandbox: bool, cap_sys_admin: bool, bubblewrap: bool
                  ) -> Mode:
    """The hardened runner's row: who runs the grader, and which tool can run here."""
    if not root:
        return USER if bubblewrap else USER_REFUSED
    if not sandbox:
        return ROOT_ALONE
    if not bubblewrap:
        return ROOT_NO_BUBBLEWRAP
    return ROOT if cap_sys_admin else ROOT_NO_ADMIN
