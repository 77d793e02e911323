"""The lab's answers at the invariant suite's examples: what a falsified example is
compared with.

A call an invariant check asks is named by a :class:`Case` whose id carries the digest of
its inputs as the worker receives them (``Answer.asked``), so an official grading (the
reference) and a student bundle (the probes file, built by
:func:`graders.export.invariant_answers.lab_cases`) give it the same key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from graders.grading.cases import Case
from graders.grading.probes import PROBE_MARK

#: How an invariant example's call is named (a probe's mark follows: no golden case).
INVARIANT_MARK = "invariant example"


def example_case(function: str, args: Iterable[Any], kwargs: dict[str, Any],
                 asked: str) -> Case:
    """The case of one call of an invariant example (``asked``: its inputs as sent)."""
    digest = hashlib.sha256(asked.encode("utf-8")).hexdigest()[:24]
    return Case(f"{INVARIANT_MARK}{PROBE_MARK}{digest}", function, tuple(args), dict(kwargs))
