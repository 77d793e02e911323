"""Gradescope's ``submission_metadata.json``: the submission id, for the results' extra_data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def submission_extra(path: Path | None) -> dict[str, Any]:
    """``{"submission_id": ...}`` from the metadata file; ``{}`` when there is none.

    A file that exists but cannot be read is recorded, not fatal: grading goes on.
    """
    if path is None or not path.exists():
        return {}
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        return {"submission_metadata_error": f"{path.name}: {error}"}
    if not isinstance(document, dict):
        return {"submission_metadata_error": f"{path.name}: not a JSON object"}
    submission_id = document.get("id")
    if not isinstance(submission_id, int | str) or isinstance(submission_id, bool):
        return {"submission_metadata_error": f"{path.name}: no submission id"}
    extra: dict[str, Any] = {"submission_id": submission_id}
    assignment = document.get("assignment")
    if isinstance(assignment, dict) and isinstance(assignment.get("id"), int | str):
        extra["assignment_id"] = assignment["id"]
    return extra
