"""The reference's pint registry: ``param`` as a count and ``Gbps`` as gigabits per second.

The reference stands alone (it never imports the grader). ``graders.units`` defines the
same two units for the grader's registry; a test keeps the two definitions equal.
Reference functions read quantities of any registry through ``m_as``.
"""

from __future__ import annotations

import pint

#: The units the lab adds to pint's defaults (pint alone reads ``Gbps`` ambiguously).
DEFINITIONS = ("param = 1 * count", "Gbps = gigabit / second")

ureg: pint.UnitRegistry[float] = pint.UnitRegistry()
for _definition in DEFINITIONS:
    ureg.define(_definition)

Q_ = ureg.Quantity

__all__ = ["DEFINITIONS", "Q_", "ureg"]
