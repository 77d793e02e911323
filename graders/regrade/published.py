"""The grades already in an output folder are published grades: a regrade into that folder
whose settings differ from the run recorded there (tracks, points, the secret, the grader)
would overwrite its ``grades.csv`` with grades made differently. It says so, and goes on
only with ``--new-settings``; a preview goes into a new folder with ``--compare``."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from graders.errors import GraderError
from graders.regrade.changes import setting_changes

FLAG = "--new-settings"


def check_settings(out: Path, previous: Mapping[str, Any] | None,
                   settings: Mapping[str, Any], *, accepted: bool) -> str | None:
    """None when OUT holds no earlier run or this run's settings are that run's; else the
    line to say before grading (when ``accepted``), or a refusal naming what differs."""
    if previous is None:
        return None
    differences = setting_changes(previous.get("settings", {}), settings)
    if not differences:
        return None
    listed = "; ".join(differences)
    if accepted:
        return (f"this regrade's settings differ from the run in {str(out)!r} ({listed}): "
                f"its grades.csv is replaced, and changes.csv says who moves")
    folder = shlex.quote(str(out))
    raise GraderError(
        f"this regrade's settings differ from the run whose grades are in {str(out)!r} "
        f"({listed}), so it would overwrite that grades.csv with grades made differently. "
        f"To see what would change first, regrade into a new folder with --compare "
        f"{folder}; to replace those grades, run the same command with {FLAG}")
