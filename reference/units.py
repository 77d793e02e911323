"""The one shared pint registry of the project, with ``param`` defined as a count."""

from __future__ import annotations

import pint

ureg: pint.UnitRegistry[float] = pint.UnitRegistry()
ureg.define("param = 1 * count")

Q_ = ureg.Quantity
