"""The grader's own bytecode, written after a grading where Python may not write it
(graders.plugin.bytecode), on a throwaway package imported with bytecode writing off."""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from graders.plugin.bytecode import stale_bytecode, write_bytecode

PACKAGE = "bytecode_probe_pkg"


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A package of two modules, and a module outside it, imported without bytecode."""
    root = tmp_path / "site"
    folder = root / PACKAGE
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("from . import inner\n", encoding="utf-8")
    (folder / "inner.py").write_text("VALUE = 1\n", encoding="utf-8")
    (root / f"{PACKAGE}_outsider.py").write_text("VALUE = 2\n", encoding="utf-8")
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.syspath_prepend(str(root))
    importlib.import_module(PACKAGE)
    importlib.import_module(f"{PACKAGE}_outsider")
    yield folder
    for name in [n for n in sys.modules if n.startswith(PACKAGE)]:
        del sys.modules[name]


def cached(source: Path) -> Path:
    return Path(importlib.util.cache_from_source(str(source)))


def test_the_imported_modules_of_the_package_without_bytecode_are_stale(package: Path) -> None:
    assert stale_bytecode(PACKAGE) == [
        (package / "__init__.py", cached(package / "__init__.py")),
        (package / "inner.py", cached(package / "inner.py")),
    ]


def test_writing_gives_every_stale_module_bytecode_that_python_then_reads(
        package: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_bytecode(PACKAGE)
    assert stale_bytecode(PACKAGE) == []
    assert cached(package / "inner.py").is_file()
    assert not cached(package.parent / f"{PACKAGE}_outsider.py").exists()  # not the package's

    def no_compiling(*args: object, **kwargs: object) -> None:
        raise AssertionError("compiled from source: the bytecode was not used")

    # imported again, the module comes from its bytecode: nothing is compiled
    monkeypatch.setattr(importlib.machinery.SourceFileLoader, "source_to_code", no_compiling)
    del sys.modules[f"{PACKAGE}.inner"]
    assert importlib.import_module(f"{PACKAGE}.inner").VALUE == 1


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_bytecode_is_as_private_as_its_source(package: Path) -> None:
    inner = package / "inner.py"
    inner.chmod(0o600)
    write_bytecode(PACKAGE)
    assert stat.S_IMODE(cached(inner).stat().st_mode) == 0o600
    assert stat.S_IMODE(cached(package / "__init__.py").stat().st_mode) == \
        stat.S_IMODE((package / "__init__.py").stat().st_mode)


def test_a_source_newer_than_its_bytecode_is_stale_again(package: Path) -> None:
    write_bytecode(PACKAGE)
    inner = package / "inner.py"
    later = cached(inner).stat().st_mtime + 10
    os.utime(inner, (later, later))
    assert stale_bytecode(PACKAGE) == [(inner, cached(inner))]


def test_nothing_is_written_where_python_writes_bytecode_itself(
        package: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    write_bytecode(PACKAGE)
    assert len(stale_bytecode(PACKAGE)) == 2


def test_a_package_where_bytecode_cannot_be_written_is_left_as_it_is(package: Path) -> None:
    blocker = package / "__pycache__"  # a file where the bytecode's folder would go
    blocker.write_text("not a folder\n", encoding="utf-8")
    write_bytecode(PACKAGE)  # no error: the next run compiles in memory, as before
    assert blocker.read_text(encoding="utf-8") == "not a folder\n"
    assert len(stale_bytecode(PACKAGE)) == 2
