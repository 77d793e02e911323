"""The grader's pint registry, built once per process on first use.

It defines ``param`` as a count, and ``Gbps`` as gigabits per second (pint alone
reads ``Gbps`` ambiguously, as gigabaud or giga-point-seconds). The reference keeps a
registry of its own with the same definitions (it never imports the grader); a test
keeps the two equal.

Parsing pint's definition files costs about 0.4 s; a grading reads them parsed from a
definitions cache instead (:func:`build_definitions_cache`), which
``graders.sandbox.runtime`` builds once, keeps read-only to others and checks against
its manifest before every use.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported on first use: a grading starts its worker first
    import pint

#: The units the lab adds to pint's defaults.
DEFINITIONS = ("param = 1 * count", "Gbps = gigabit / second")


def _pint() -> Any:
    """pint, imported without numpy unless numpy is already loaded.

    pint imports numpy when it can, which costs a grading about 0.17 s; the grader's
    quantities are plain numbers, and the worker's pint never sees numpy (its runtime
    holds pint's own dependencies only), so the grader's pint works as the worker's does.
    """
    if "pint" in sys.modules or "numpy" in sys.modules:
        import pint

        return pint
    sys.modules["numpy"] = None  # type: ignore[assignment]  # makes "import numpy" fail
    try:
        import pint
    finally:
        if sys.modules.get("numpy", 0) is None:
            del sys.modules["numpy"]  # numpy stays importable for everything else
    return pint


def new_registry(cache: Path | None = None) -> pint.UnitRegistry[float]:
    """A registry with the lab's units. pint's parsed default definitions are read from
    ``cache`` when it holds them (pint keys them by the definition files' contents and
    the Python version); a cache that cannot be read is ignored."""
    units = _pint()
    built: pint.UnitRegistry[float] | None = None
    if cache is not None and cache.is_dir():
        try:
            built = units.UnitRegistry(cache_folder=cache)
        except Exception:  # a damaged cache costs time, never the grading
            built = None
    if built is None:
        built = units.UnitRegistry()
    for definition in DEFINITIONS:
        built.define(definition)
    _remember_parsed_units(built)
    return built


#: Unit expressions parsed by one registry and remembered (a grading converts to a few).
PARSED_UNITS_KEPT = 256


def _remember_parsed_units(built: Any) -> None:
    """Have ``built`` parse each unit expression once. pint caches a parsed unit name, but
    parses an expression such as ``GB/s`` again at every conversion (about 0.05 ms each,
    thousands of times in a grading). The registry's definitions are complete by now and
    it uses no contexts, so an expression always parses to the same units."""
    parse = built.parse_units_as_container
    remembered = functools.lru_cache(maxsize=PARSED_UNITS_KEPT)(parse)

    def parse_units_as_container(input_string: Any, as_delta: bool | None = None,
                                 case_sensitive: bool | None = None) -> Any:
        if isinstance(input_string, str):
            return remembered(input_string, as_delta, case_sensitive)
        return parse(input_string, as_delta, case_sensitive)

    built.parse_units_as_container = parse_units_as_container


def build_definitions_cache(folder: Path) -> None:
    """Write pint's parsed default definitions into the empty folder ``folder``."""
    _pint().UnitRegistry(cache_folder=folder)


_REGISTRY: list[pint.UnitRegistry[float]] = []


def registry(cache: Path | None = None) -> pint.UnitRegistry[float]:
    """The grader's one registry. The first call builds it (reading ``cache`` if given);
    every later call returns the same registry, whatever it passes."""
    if not _REGISTRY:
        _REGISTRY.append(new_registry(cache))
    return _REGISTRY[0]


def __getattr__(name: str) -> Any:
    """``ureg`` (the registry) and ``Q_`` (its Quantity), built on first use."""
    if name == "ureg":
        return registry()
    if name == "Q_":
        return registry().Quantity
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
