"""The typed keys under which the plugin keeps its state in ``config.stash`` and
``item.stash`` (one module, so that hooks and fixtures share them without importing each
other)."""

from __future__ import annotations

import pytest

from graders.grading.checks import Tally
from graders.grading.scoring import TestScore
from graders.plugin.session import GradingSession
from graders.plugin.settings import Settings

SETTINGS_KEY = pytest.StashKey[Settings]()
SESSION_KEY = pytest.StashKey[GradingSession]()
SCORE_KEY = pytest.StashKey[TestScore]()
#: The cases run and passed by one case test, for partial credit.
TALLY_KEY = pytest.StashKey[Tally]()
