"""pint's parsed definitions, built once for the grader and once for the worker's runtime,
read (never written) by every later grading, and never trusted once tampered with."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from graders import units
from graders.sandbox import runtime
from graders.sandbox.runner import StudentRunner


def contents(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


@pytest.fixture
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache folder of this test's own: tampering with the machine's would slow down
    every later grading on it."""
    monkeypatch.setattr(runtime.tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(runtime, "cache_folder", lambda: tmp_path, raising=False)
    run = tmp_path / "run"
    run.mkdir()
    return run


def test_the_grader_reads_its_definitions_without_writing_them(own_cache: Path) -> None:
    folder = runtime.grader_definitions(own_cache)
    assert folder.parent == own_cache.parent  # shared by later gradings
    before = contents(folder)
    assert any(name.endswith(".pickle") for name in before)
    registry = units.new_registry(folder)
    assert registry._diskcache is not None  # read through pint's cache (a private name)
    assert contents(folder) == before  # complete: nothing was parsed again, nothing added
    assert registry.Quantity(3, "Gbps").m_as("GB/s") == pytest.approx(0.375)
    assert registry.Quantity(7e10, "param").m_as("count") == 7e10
    assert runtime.grader_definitions(own_cache) == folder  # reused, not rebuilt


def test_a_damaged_cache_costs_time_never_the_registry(tmp_path: Path) -> None:
    units.build_definitions_cache(tmp_path)
    for path in tmp_path.glob("*.pickle"):
        path.write_bytes(b"not a pickle")
    registry = units.new_registry(tmp_path)
    assert registry.Quantity(80, "GiB").m_as("GB") == pytest.approx(85.899345920)


def test_tampered_definitions_are_never_used(own_cache: Path) -> None:
    folder = runtime.grader_definitions(own_cache)
    pickle = next(folder.glob("*.pickle"))
    pickle.chmod(0o644)
    pickle.write_bytes(pickle.read_bytes() + b"TAMPERED")
    replacement = runtime.grader_definitions(own_cache)
    assert replacement == own_cache / "grader-units"  # private to the run
    assert all(b"TAMPERED" not in data for data in contents(replacement).values())


def test_the_worker_builds_its_registry_from_the_runtime_definitions(own_cache: Path) -> None:
    probe = textwrap.dedent("""
        import sys
        def quantity_to_float(value, unit, default):
            worker = sys.modules["__main__"]
            registry = worker.REGISTRY[0] if worker.REGISTRY else None
            cached = registry is not None and getattr(registry, "_diskcache", None) is not None
            return value.m_as(unit) if cached else -1.0
    """).encode()
    with StudentRunner(probe) as runner:
        folder = runtime.worker_definitions(runtime.cached_runtime(own_cache), own_cache)
        before = contents(folder)
        quantity = units.new_registry().Quantity(2, "GiB")
        outcome = runner.call("quantity_to_float", (quantity, "MiB", 0.0))
    assert outcome.value == pytest.approx(2048.0)
    assert contents(folder) == before


@pytest.mark.skipif(importlib.util.find_spec("numpy") is None, reason="numpy not installed")
def test_numpy_stays_importable_after_the_grader_imports_pint_without_it() -> None:
    code = ("from graders.units import registry; registry(); import pint.compat, numpy; "
            "print(pint.compat.HAS_NUMPY, numpy.__name__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == ["False", "numpy"]
