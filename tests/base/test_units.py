"""The grader's pint registry: the lab's units, and unit expressions parsed once."""

from __future__ import annotations

from typing import Any

import pint
import pytest

from graders import units

EXPRESSIONS = ["GB/s", "GB", "GiB", "TB/s", "W", "Wh", "param", "Gbps", "MB", "kWh",
               "gigabyte / second", "ms"]
QUANTITIES = [(3.35, "TB/s"), (80.0, "GiB"), (1.0, "Gbps"), (7e9, "param"), (350.0, "W"),
              (0.5, "kWh"), (12.0, "MB"), (900.0, "GB/s")]


@pytest.fixture(scope="module")
def remembered() -> pint.UnitRegistry[float]:
    return units.new_registry()


@pytest.fixture(scope="module")
def plain() -> pint.UnitRegistry[float]:
    """A registry with the same units that parses every expression every time."""
    registry: pint.UnitRegistry[float] = pint.UnitRegistry()
    for definition in units.DEFINITIONS:
        registry.define(definition)
    return registry


@pytest.mark.parametrize(("magnitude", "unit"), QUANTITIES)
def test_conversions_are_those_of_a_registry_that_parses_every_time(
        remembered: pint.UnitRegistry[float], plain: pint.UnitRegistry[float],
        magnitude: float, unit: str) -> None:
    for target in EXPRESSIONS:
        given, reference = remembered.Quantity(magnitude, unit), plain.Quantity(magnitude, unit)
        try:
            expected = reference.m_as(target)
        except pint.DimensionalityError:
            with pytest.raises(pint.DimensionalityError):
                given.m_as(target)
            continue
        for _ in range(2):  # parsed, then remembered
            assert given.m_as(target) == expected


def _parser_cache(registry: pint.UnitRegistry[float]) -> Any:
    closure = registry.parse_units_as_container.__closure__
    assert closure is not None
    return next(cell.cell_contents for cell in closure
                if hasattr(cell.cell_contents, "cache_info"))


def test_an_expression_is_parsed_once() -> None:
    registry = units.new_registry()
    for _ in range(5):
        registry.Quantity(2.0, "TB/s").m_as("GB/s")
    info = _parser_cache(registry).cache_info()
    assert info.misses == 2  # "TB/s" and "GB/s", once each
    assert info.hits >= 8
