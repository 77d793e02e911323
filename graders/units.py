"""The one shared pint registry of the project (the reference re-exports it).

It defines ``param`` as a count, and ``Gbps`` as gigabits per second (pint alone
reads ``Gbps`` ambiguously, as gigabaud or giga-point-seconds).
"""

from __future__ import annotations

import pint

ureg: pint.UnitRegistry[float] = pint.UnitRegistry()
ureg.define("param = 1 * count")
ureg.define("Gbps = gigabit / second")

Q_ = ureg.Quantity
