"""The grader's pint registry.

It defines ``param`` as a count, and ``Gbps`` as gigabits per second (pint alone
reads ``Gbps`` ambiguously, as gigabaud or giga-point-seconds). The reference keeps a
registry of its own with the same definitions (it never imports the grader); a test
keeps the two equal.
"""

from __future__ import annotations

import pint

#: The units the lab adds to pint's defaults.
DEFINITIONS = ("param = 1 * count", "Gbps = gigabit / second")

ureg: pint.UnitRegistry[float] = pint.UnitRegistry()
for _definition in DEFINITIONS:
    ureg.define(_definition)

Q_ = ureg.Quantity
