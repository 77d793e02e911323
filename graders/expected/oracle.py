"""Where expected values come from: the reference when installed, else a golden file."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from graders.errors import GoldenError
from graders.expected.golden import GOLDEN_NAME, GoldenOracle
from graders.expected.reference import reference_expected
from graders.grading.cases import Case

if TYPE_CHECKING:
    from graders.trackfiles.tracks import Track


class Oracle(Protocol):
    """Expected values of cases, and the tracks they are computed on."""

    @property
    def golden(self) -> bool:
        """True when values come from a golden file (hidden tests cannot be graded)."""

    @property
    def default_max_score(self) -> float:
        """The suite's total points unless set: 100, or a golden file's visible points."""

    def expected(self, case: Case) -> Any:
        """The expected plain value of ``case``."""

    def bind(self, tracks: tuple[Track, ...]) -> tuple[Track, ...]:
        """The tracks, ready to generate cases (with golden profiles when golden)."""


@dataclass(frozen=True)
class ReferenceOracle:
    """Expected values computed by :mod:`reference` in the grader process."""

    golden: bool = False
    default_max_score: float = 100.0

    def expected(self, case: Case) -> Any:
        return reference_expected(case)

    def bind(self, tracks: tuple[Track, ...]) -> tuple[Track, ...]:
        return tracks


def bundled_golden_file() -> Path:
    """Where a student bundle keeps its golden file: inside the ``graders`` package."""
    return Path(__file__).parents[1] / GOLDEN_NAME


def choose_oracle(golden: Path | None) -> Oracle:
    """The golden file when one is named; else the reference; else the bundled golden file."""
    if golden is not None:
        return GoldenOracle.load(golden)
    if importlib.util.find_spec("reference") is not None:
        return ReferenceOracle()
    bundled = bundled_golden_file()
    if bundled.is_file():
        return GoldenOracle.load(bundled)
    raise GoldenError("the reference implementation is not installed and there is no golden "
                      f"file at {bundled}; pass --grader-golden FILE")
