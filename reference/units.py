"""The shared pint registry, as the reference sees it (defined in :mod:`graders.units`)."""

from __future__ import annotations

from graders.units import Q_, ureg

__all__ = ["Q_", "ureg"]
