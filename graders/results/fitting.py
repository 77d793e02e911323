"""results.json within its bound, whatever the submission returned.

Every value a submission returns is bounded where it enters the grader
(:func:`graders.sandbox.wire.bounded`) and every test's feedback is cut to a few
thousand characters, which keeps a results.json far under :data:`MAX_RESULTS_BYTES`
(a quarter of it, measured with every field answered by a 1 MB text). What those cuts do
not bound is how JSON spells a character: ``\\ud83d\\ude00``, twelve bytes, for one emoji.
So the final document is measured as it will be written and, only when it is over the
bound, its test outputs are cut further, then the kept cases of the class report left
out, until it fits; scores are never touched.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

#: The most bytes a results.json may take (docs/security.md).
MAX_RESULTS_BYTES = 1024**2
#: Characters each test's output is cut to, in turn, until the document fits.
OUTPUT_CUTS = (2000, 1000, 300, 100)


def encoded_size(document: Mapping[str, Any]) -> int:
    """Bytes of ``document`` as :func:`graders.results.reports.write_json_atomically`
    writes it."""
    return len(json.dumps(document, indent=2, allow_nan=False).encode()) + 1


def fitted(document: Mapping[str, Any], limit: int = MAX_RESULTS_BYTES) -> Mapping[str, Any]:
    """``document``, or a copy whose tests' outputs (and then kept cases) are cut until
    it takes at most ``limit`` bytes, as far as they can make it."""
    if encoded_size(document) <= limit:
        return document
    tests = [test for test in document.get("tests", []) if isinstance(test, Mapping)]
    candidate: Mapping[str, Any] = document
    for step, cut in enumerate(OUTPUT_CUTS):
        tests = [_cut_output(test, cut) for test in tests]
        if step == len(OUTPUT_CUTS) // 2:  # the class report's cases, before the last cuts
            tests = [_without_cases(test) for test in tests]
        candidate = {**document, "tests": tests}
        if encoded_size(candidate) <= limit:
            return candidate
    return candidate


def _cut_output(test: Mapping[str, Any], limit: int) -> Mapping[str, Any]:
    output = test.get("output")
    if not isinstance(output, str) or len(output) <= limit:
        return test
    return {**test, "output": f"{output[:limit]}\u2026 [cut: {len(output) - limit} more "
                              "characters, to keep results.json under 1 MiB]"}


def _without_cases(test: Mapping[str, Any]) -> Mapping[str, Any]:
    extra = test.get("extra_data")
    if not isinstance(extra, Mapping) or "failed_cases" not in extra:
        return test
    return {**test, "extra_data": {key: value for key, value in extra.items()
                                   if key != "failed_cases"}}
