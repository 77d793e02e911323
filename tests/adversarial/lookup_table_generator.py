"""Generator: a serving.py that answers from a table of a student bundle's golden file.

    python tests/adversarial/lookup_table_generator.py BUNDLE_DIR OUT/serving.py [--one]

The written submission computes nothing. For every visible case of the bundle's golden
file it keys the inputs exactly as the golden file does (the SHA-256 of their tagged
JSON, rebuilt from the objects the grader's worker hands it) and answers the golden
value; for anything else it answers constants. It is what a student can build from the
repository they are given, and the official grade must pay it no more than constants.

With ``--one`` the table keeps a single case per function, one whose answer holds a real
number other than 0 and 1: a submission right on exactly one case of each function.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SUBMISSION = '''"""Attack: answers every visible case from a table of the student bundle's golden file."""

import hashlib
import json
from types import SimpleNamespace

TABLE = json.loads(TABLE_TEXT)
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


def _lookup(function, args, kwargs):
    encoded = _encode({"args": list(args), "kwargs": dict(kwargs)})
    text = json.dumps(encoded, sort_keys=True, separators=(",", ":"))
    known = TABLE.get(function, {})
    key = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if key not in known:
        return 1.0 if function in SCALARS else SimpleNamespace(**FALLBACK)
    value = _decode(known[key])
    return SimpleNamespace(**value) if isinstance(value, dict) else value
'''

#: The contract's functions, each answering from the table with the arguments as given.
FUNCTIONS = ("serve", "erlang_c", "queueing_latency", "batching_tax", "transformer_state_gb",
             "cache_capacity", "cold_start_latency", "quantity_to_float",
             "serving_track_profile")


def _real_number(value: object) -> bool:
    """Whether ``value`` holds a real number other than 0 and 1."""
    if isinstance(value, dict):
        return any(_real_number(item) for item in value.values())
    if isinstance(value, list):
        return any(_real_number(item) for item in value)
    return isinstance(value, float) and value not in (0.0, 1.0)


def table(golden: dict[str, object], *, one: bool = False) -> dict[str, dict[str, object]]:
    """The golden file's expected values by function, then by input fingerprint (with
    ``one``, a single case per function, whose answer holds a real number)."""
    by_function: dict[str, dict[str, object]] = {}
    cases = golden["cases"]
    assert isinstance(cases, dict)
    for key, entry in sorted(cases.items()):
        function = key.split("/")[1]
        if one and (function in by_function or not _real_number(entry["expected"])):
            continue
        by_function.setdefault(function, {})[entry["inputs"]] = entry["expected"]
    return by_function


def submission(golden: dict[str, object], *, one: bool = False) -> str:
    fields = sorted({name for values in table(golden).values() for value in values.values()
                     if isinstance(value, dict) for name in value})
    source = SUBMISSION.replace("TABLE_TEXT", repr(json.dumps(table(golden, one=one))))
    source = source.replace("**FALLBACK", f"**dict.fromkeys({fields!r}, 1.0)")
    for function in FUNCTIONS:
        source += (f"\n\ndef {function}(*args, **kwargs):\n"
                   f"    return _lookup({function!r}, args, kwargs)\n")
    return source


def main() -> None:
    bundle, target = Path(sys.argv[1]), Path(sys.argv[2])
    golden = json.loads((bundle / "graders" / "golden.json").read_text(encoding="utf-8"))
    target.write_text(submission(golden, one="--one" in sys.argv[3:]), encoding="utf-8")


if __name__ == "__main__":
    main()
