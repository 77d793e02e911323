"""The grader's own version and the exact versions of the packages it grades with.

``constraints.txt`` beside this module pins every grading dependency as CI tested it.
Both distributions install exactly those versions; :func:`drift` names any installed
package that differs, because a different Hypothesis, pytest or pint can change a
verdict.
"""

from __future__ import annotations

import importlib.metadata
import platform
import re
from pathlib import Path

from graders import __version__

CONSTRAINTS = Path(__file__).with_name("constraints.txt")
#: The packages whose versions are reported with every grading.
REPORTED = ("pytest", "hypothesis", "pint")
#: The packages a grading needs (the project's dependencies), and the report extra's.
GRADING_PACKAGES = ("pytest", "pytest-json-report", "hypothesis", "pint")
REPORT_PACKAGES = ("matplotlib",)
#: What a drift warning advises.
REINSTALL = f"reinstall the pinned versions with: pip install -r {CONSTRAINTS}"


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned(path: Path | None = None) -> dict[str, str]:
    """The pinned versions (of ``path``, default :data:`CONSTRAINTS`), by normalized
    package name; empty when the file is absent."""
    try:
        text = (path or CONSTRAINTS).read_text(encoding="utf-8")
    except OSError:
        return {}
    pins: dict[str, str] = {}
    for line in text.splitlines():
        requirement = line.split("#", 1)[0].split(";", 1)[0].strip()  # markers apart
        if "==" in requirement:
            name, _, version = requirement.partition("==")
            pins[_normalized(name)] = version.strip()
    return pins


def installed(name: str) -> str | None:
    """The installed version of ``name``, or None when it is not installed."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def grading_versions() -> dict[str, str]:
    """The grader's version, the reported packages' versions and Python's."""
    versions = {"serving-lab-grader": __version__}
    for name in REPORTED:
        versions[name] = installed(name) or "absent"
    versions["python"] = platform.python_version()
    return versions


def drift(pins: dict[str, str] | None = None) -> list[tuple[str, str, str]]:
    """(package, installed, pinned) for every installed package whose version differs
    from its pin; packages that are not installed (matplotlib without the report extra)
    are not drift."""
    found = []
    for name, version in sorted((pins if pins is not None else pinned()).items()):
        have = installed(name)
        if have is not None and have != version:
            found.append((name, have, version))
    return found


def drift_listed(pins: dict[str, str] | None = None) -> str | None:
    """:func:`drift` as one phrase (``pint 0.24.4 (official: 0.25.3), ...``), or None."""
    differing = drift(pins)
    if not differing:
        return None
    return ", ".join(f"{name} {have} (official: {want})" for name, have, want in differing)


def drift_warning(pins: dict[str, str] | None = None) -> str | None:
    """One line warning about :func:`drift`, with the command that fixes it, or None."""
    listed = drift_listed(pins)
    if listed is None:
        return None
    return (f"WARNING: {listed}: your local score may differ from the official one; "
            f"{REINSTALL}")


def regrade_drift_warning(pins: dict[str, str] | None = None) -> str | None:
    """:func:`drift_warning` for a class regrade, whose grades are meant to be official."""
    listed = drift_listed(pins)
    if listed is None:
        return None
    return (f"{listed}: these scores may differ from Gradescope's, which grades with the "
            f"pinned versions; {REINSTALL}")


def _requirement_name(requirement: str) -> str | None:
    """The distribution a requirement names, or ``None`` when it only applies to an extra."""
    if "extra" in requirement.partition(";")[2]:
        return None
    match = re.match(r"[A-Za-z0-9._-]+", requirement.strip())
    return match.group(0) if match else None


def distribution_closure(roots: tuple[str, ...]) -> list[importlib.metadata.Distribution]:
    """The installed distributions ``roots`` need, found through their metadata."""
    seen: dict[str, importlib.metadata.Distribution] = {}
    pending = list(roots)
    while pending:
        name = pending.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        seen[key] = dist
        for requirement in dist.requires or ():
            dependency = _requirement_name(requirement)
            if dependency:
                pending.append(dependency)
    return list(seen.values())


def pinned_requirements(roots: tuple[str, ...], *, without: tuple[str, ...] = ()
                        ) -> list[str]:
    """``name==version`` for every pinned package ``roots`` install (as installed here),
    leaving out what ``without`` installs: a distribution's exact dependencies."""
    def names(packages: tuple[str, ...]) -> set[str]:
        return {_normalized(dist.metadata["Name"]) for dist in distribution_closure(packages)}

    pins = pinned()
    wanted = names(roots) - (names(without) if without else set())
    return [f"{name}=={pins[name]}" for name in sorted(wanted) if name in pins]


def version_report() -> str:
    """What ``graders --version`` prints: one ``name version`` line each for the grader,
    pytest, Hypothesis, pint and Python."""
    return "\n".join(f"{name} {version}" for name, version in grading_versions().items())
