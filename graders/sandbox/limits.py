"""The bounds of one grading's worker: deadlines, the time budget, rlimits, reply and
output sizes, and the default sandbox user. Pure data, cheap to import (the plugin's
option table reads its defaults from here)."""

from __future__ import annotations

import math
from dataclasses import dataclass

#: The longest single wait (in a selector or a queue): a longer deadline is waited for in
#: several of them, since an epoll timeout, for one, overflows past 2**31 - 1 ms.
MAX_WAIT_S = 3600.0
#: The sandbox user name that means "a free user of the pool serving-sandbox-1 to -64".
DEFAULT_SANDBOX_USER = "serving-sandbox"
#: The largest ``serving.py`` accepted, in bytes (a grading's and the notebook's alike).
MAX_SUBMISSION_BYTES = 1_000_000
#: The most CPU seconds asked of the worker's rlimit (68 years).
MAX_CPU_S = 2**31 - 1


@dataclass(frozen=True)
class Limits:
    """Deadlines and resource limits of the student worker."""

    call_timeout_s: float = 3.0
    import_timeout_s: float = 10.0
    #: Wall time the student's code may cost one grading in all (calls, imports, restarts);
    #: past it calls are refused. An honest slow submission (0.05 s a call, ~1,650 calls)
    #: needs 83 s; the worst case (:attr:`worst_case_s`) stays far under Gradescope's 10 min.
    total_budget_s: float = 150.0
    #: Wall time timed-out calls and the restarts after them may spend (a part of the total).
    hang_budget_s: float = 30.0
    #: Timeouts of one function after which it is not called again.
    timeouts_per_function: int = 2
    #: Crashes (or unreadable replies) of one function after which it is not called again.
    crashes_per_function: int = 20
    #: CPU seconds one worker may use; None: :attr:`worst_case_s` (the wall budget bounds).
    cpu_s: int | None = None
    address_space_bytes: int = 2 * 1024**3
    processes: int = 0
    #: Largest file the submission may write (its printed output goes to a pipe).
    file_size_bytes: int = 4 * 1024**2
    open_files: int = 64
    #: Longest reply line the grader reads; a longer one fails its call as garbage.
    max_reply_bytes: int = 64 * 1024
    #: Bytes of the submission's stdout and stderr kept for feedback; the rest is counted.
    output_keep_bytes: int = 64 * 1024

    @property
    def worst_case_s(self) -> float:
        """The most wall time the student's code can cost one grading: the budget, then a
        restart, pint's import and the one call that may start just before it runs out."""
        return self.total_budget_s + 2 * self.import_timeout_s + self.call_timeout_s

    @property
    def hang_worst_case_s(self) -> float:
        """The most wall time a submission that hangs everywhere can cost: the first import,
        the hang budget, and one call and one restart just before it runs out (53 s)."""
        return 2 * self.import_timeout_s + self.hang_budget_s + self.call_timeout_s

    def worker_limits(self) -> dict[str, int]:
        """The rlimits the worker applies to itself, and the reply limit it stops at."""
        return {
            "reply_bytes": self.max_reply_bytes,
            # any budget, however large (inf included), gives a limit every rlim_t holds
            "cpu_s": self.cpu_s if self.cpu_s is not None else
            MAX_CPU_S if not self.worst_case_s < MAX_CPU_S else math.ceil(self.worst_case_s),
            "address_space_bytes": self.address_space_bytes,
            "processes": self.processes,
            "file_size_bytes": self.file_size_bytes,
            "open_files": self.open_files,
            "core_bytes": 0,
        }

