"""The worker's start cost in each confinement mode this machine can make, as ratios
against a bare interpreter start measured in the same run.

Usage: ``python bench/modes.py [--repeat N]`` (as root: the modes need a sandbox user).

Each mode is made in this process as the tests make it, by switching layers off:
bubblewrap (as graded here), Landlock in a box that is a tmpfs of its own (bubblewrap off:
root with CAP_SYS_ADMIN and no bubblewrap), Landlock in a host folder (CAP_SYS_ADMIN off
too, as in Docker's default profile) and the privilege drop alone (Landlock off too).
Each figure is the median time from starting a worker (no pint preloaded, as the hidden
tests' worker starts) to its first answer; the rounds interleave the modes, after one
warm-up round.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import graders.sandbox.confinement as confinement  # noqa: E402
from graders.sandbox import landlock  # noqa: E402
from graders.sandbox.privileges import claim_sandbox_user  # noqa: E402
from graders.sandbox.runner import StudentRunner  # noqa: E402

CORRECT = REPO / "tests" / "corpus" / "correct" / "serving.py"
OFF = "switched off by the benchmark"


def switches() -> dict[str, Callable[[], None]]:
    """Each mode, and what makes it (switching layers off, from the most to the least)."""
    real = (confinement.bubblewrap_support, confinement._has_capability, landlock.unavailable)

    def mode(bubblewrap: bool, admin: bool, landlocked: bool) -> Callable[[], None]:
        def make() -> None:
            confinement.bubblewrap_support = real[0] if bubblewrap else (  # type: ignore[assignment]
                lambda uid, gid, drop: OFF)
            confinement._has_capability = real[1] if admin else lambda bit: False
            landlock.unavailable = real[2] if landlocked else lambda: OFF
        return make

    return {"bubblewrap": mode(True, True, True),
            "landlock, box mounted": mode(False, True, True),
            "landlock, host box": mode(False, False, True),
            "privilege drop alone": mode(False, False, False)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    repeat = parser.parse_args().repeat
    code = CORRECT.read_bytes()
    modes = switches()
    seconds: dict[str, list[float]] = {name: [] for name in ["bare interpreter", *modes]}
    sandbox = claim_sandbox_user()
    try:
        for round_number in range(repeat + 1):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-S", "-c", "pass"], check=True)
            if round_number:
                seconds["bare interpreter"].append(time.perf_counter() - started)
            for name, make in modes.items():
                make()
                with StudentRunner(code, sandbox=sandbox) as runner:
                    started = time.perf_counter()
                    runner.start(preload_pint=False)
                    runner.call("erlang_c", (200.0, 20.0, 16))
                    if round_number:
                        seconds[name].append(time.perf_counter() - started)
                    row = runner.protections.mode, runner.protections.box_mount
                if round_number == 0:
                    print(f"{name}: {row[0]} (box mounted: {row[1]})")
    finally:
        sandbox.release()
    floor = statistics.median(seconds["bare interpreter"])
    print(f"| mode | worker start (median of {repeat}) | ratio to a bare interpreter |")
    print("|---|---|---|")
    for name, times in seconds.items():
        median = statistics.median(times)
        print(f"| {name} | {median * 1000:.1f} ms | {median / floor:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
