"""The grader's error hierarchy: every message names the value, its source, the rule and the fix."""

from __future__ import annotations


class GraderError(Exception):
    """Base of every error the grader raises on purpose."""


class TrackError(ValueError, GraderError):
    """A track file is malformed, incomplete or inconsistent."""


class SubmissionError(ValueError, GraderError):
    """A submission path is missing, unsafe or not a ``serving.py``."""


class SettingsError(ValueError, GraderError):
    """An option, ini key or marker has a value outside its rule."""


class GoldenError(ValueError, GraderError):
    """A golden file is missing, malformed, or does not match the tracks or cases."""
