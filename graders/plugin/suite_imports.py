"""The grading suite's modules, imported as Python imports any module, before pytest does.

They opt out of assertion rewriting (``PYTEST_DONT_REWRITE``: they assert with messages of
their own, and ``graders grade`` runs them without rewriting), yet pytest's import hook
still reads, parses and compiles each one at every run where it cannot cache the result
(``PYTHONDONTWRITEBYTECODE``): about 25 ms of a student's plain ``pytest``. Imported here
first, they come from their bytecode (:mod:`graders.plugin.bytecode`), and pytest's
collection takes them from ``sys.modules``: the same modules, the same tests.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

#: The docstring marker by which a module opts out of pytest's assertion rewriting.
DONT_REWRITE = "PYTEST_DONT_REWRITE"


def import_suite_module(path: Path, name: str) -> None:
    """Import the module at ``path`` as ``name``, unless it is imported already. One that
    does not opt out of rewriting, or fails to import, is left to pytest, which imports
    it (rewritten) and reports its errors as it always does."""
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception:  # noqa: BLE001 - pytest imports it again and reports the error
        del sys.modules[name]
        return
    except BaseException:
        del sys.modules[name]
        raise
    if DONT_REWRITE not in (module.__doc__ or ""):
        del sys.modules[name]
        return
    parent, _, child = name.rpartition(".")
    if parent in sys.modules:
        setattr(sys.modules[parent], child, module)
