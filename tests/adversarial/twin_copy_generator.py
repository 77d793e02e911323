"""Generator: a serving.py that copies the golden file and knows what a twin is.

    python tests/adversarial/twin_copy_generator.py BUNDLE_DIR OUT/serving.py [--multiply]

The written submission computes nothing. It holds every visible case of the bundle's
golden file with its inputs (rebuilt, as the worker hands them over, by the bundle's own
``graders`` package from the bundle's tracks) and its golden answer. A visible case gets
its golden answer. Any other input is taken for a twin (docs/students.md: a visible case
with its numbers moved by a factor of 2/3 to 3/2, text, flags, 0 and 1 kept): it gets the
golden answer of the nearest visible case it could have been moved from (the same text,
flags and shape; every number equal or within the factor; the least total |log ratio|).
Anything else gets constants.

With ``--multiply`` a single-number answer is also multiplied by the ratio of each moved
input (twin over visible case): one multiplication, which is right wherever the answer is
a product of the moved inputs (``transformer_state_gb``, ``quantity_to_float``).

It is what a student can build from the repository they are given, knowing how the
official grade draws its unseen inputs (issue 33); the official grade must pay it no
more than constants (and the multiplying copy no more than the points of the functions
whose answers are products of their inputs).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

SUBMISSION = '''"""Attack: answers twins with the golden answer of the nearest visible case."""

import json
import math
from types import SimpleNamespace

CASES = json.loads(TABLE_TEXT)
MULTIPLY = MULTIPLY_FLAG
#: A moved number is within this factor of the one it was moved from.
SPREAD = 1.5 * (1 + 1e-9)
SCALARS = ("transformer_state_gb", "quantity_to_float")


def _encode(value):
    """The tagged JSON the grader sent, rebuilt from the decoded objects."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "m_as") and hasattr(value, "units"):
        return {"$q": [_encode(value.magnitude), str(value.units)]}
    if isinstance(value, dict):
        return {"$map": {str(key): _encode(item) for key, item in value.items()}}
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return {"$tuple": [_encode(item) for item in value]}
    if isinstance(value, list):
        return [_encode(item) for item in value]
    return {"$ns": {key: _encode(item) for key, item in vars(value).items()}}


def _decode(value):
    if isinstance(value, list):
        return [_decode(item) for item in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"$float"}:
        return float(value["$float"])
    if set(value) == {"$tuple"}:
        return tuple(_decode(item) for item in value["$tuple"])
    if set(value) == {"$ns"}:
        return SimpleNamespace(**{k: _decode(v) for k, v in value["$ns"].items()})
    return {key: _decode(item) for key, item in value.items()}


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _moved_from(asked, visible):
    """(distance, product of ratios) when ``asked`` can be ``visible`` moved, else None."""
    if _number(asked) and _number(visible):
        if asked == visible:
            return 0.0, 1.0
        if asked == 0 or visible == 0 or (asked > 0) != (visible > 0) \\
                or not math.isfinite(asked) or not math.isfinite(visible):
            return None
        ratio = asked / visible
        if not 1 / SPREAD <= ratio <= SPREAD:
            return None
        return abs(math.log(ratio)), ratio
    if isinstance(asked, dict) and isinstance(visible, dict):
        if set(asked) != set(visible):
            return None
        parts = [_moved_from(asked[key], visible[key]) for key in asked]
    elif isinstance(asked, list) and isinstance(visible, list):
        if len(asked) != len(visible):
            return None
        parts = [_moved_from(a, v) for a, v in zip(asked, visible)]
    else:
        return (0.0, 1.0) if type(asked) is type(visible) and asked == visible else None
    if any(part is None for part in parts):
        return None
    product = 1.0
    for _, ratio in parts:
        product *= ratio
    return sum(distance for distance, _ in parts), product


def _answer(function, args, kwargs):
    asked = [_encode(list(args)), {name: _encode(item) for name, item in kwargs.items()}]
    best = None
    for inputs, expected in CASES.get(function, ()):
        found = _moved_from(asked, inputs)
        if found is not None and (best is None or found[0] < best[0][0]):
            best = (found, expected)
    if best is None:
        return 1.0 if function in SCALARS else SimpleNamespace(**FALLBACK)
    (distance, ratio), expected = best
    value = _decode(expected)
    if MULTIPLY and _number(value) and distance > 0:
        value = value * ratio
    return SimpleNamespace(**value) if isinstance(value, dict) else value
'''

#: The contract's functions, each answering as above with the arguments as given.
FUNCTIONS = ("serve", "erlang_c", "queueing_latency", "batching_tax", "transformer_state_gb",
             "cache_capacity", "cold_start_latency", "quantity_to_float",
             "serving_track_profile")


def visible_inputs(bundle: Path) -> dict[str, Any]:
    """Each visible case's inputs as the worker receives them (tagged JSON), by case key,
    made by the bundle's own ``graders`` package from the bundle's tracks."""
    sys.path.insert(0, str(bundle))
    from graders.grading.cases import visible_cases  # noqa: PLC0415  # the bundle's
    from graders.sandbox.wire import encode_argument  # noqa: PLC0415
    from graders.trackfiles.tracks import load_tracks  # noqa: PLC0415

    assert Path(sys.modules["graders"].__file__ or "").is_relative_to(bundle.resolve())
    return {case.key: [[encode_argument(item) for item in case.args],
                       {name: encode_argument(item) for name, item in case.kwargs.items()}]
            for case in visible_cases(load_tracks(bundle / "tracks"))}


def table(golden: dict[str, Any], inputs: dict[str, Any]) -> dict[str, list[Any]]:
    """Each function's visible cases: [inputs, golden answer]."""
    by_function: dict[str, list[Any]] = {}
    for key, entry in sorted(golden["cases"].items()):
        if key in inputs:
            by_function.setdefault(key.split("/")[1], []).append([inputs[key],
                                                                  entry["expected"]])
    return by_function


def submission(golden: dict[str, Any], inputs: dict[str, Any], *, multiply: bool) -> str:
    cases = table(golden, inputs)
    fields = sorted({name for entries in cases.values() for _, value in entries
                     if isinstance(value, dict) for name in value})
    source = SUBMISSION.replace("TABLE_TEXT", repr(json.dumps(cases, separators=(",", ":"))))
    source = source.replace("MULTIPLY_FLAG", repr(multiply))
    source = source.replace("**FALLBACK", f"**dict.fromkeys({fields!r}, 1.0)")
    for function in FUNCTIONS:
        source += (f"\n\ndef {function}(*args, **kwargs):\n"
                   f"    return _answer({function!r}, args, kwargs)\n")
    return source


def main() -> None:
    bundle, target = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
    golden = json.loads((bundle / "graders" / "golden.json").read_text(encoding="utf-8"))
    target.write_text(submission(golden, visible_inputs(bundle),
                                 multiply="--multiply" in sys.argv[3:]), encoding="utf-8")


if __name__ == "__main__":
    main()
