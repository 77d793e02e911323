"""The diagnosis measured on bugs nobody wrote a hint for: mutants of ``reference/``.

Usage: ``python bench/diagnosis.py [--limit N] [--operator NAME] [--write FILE] [--verbose]``

Every mutant of ``tests/mutants.py`` is diagnosed on the visible cases of the tracks, as a
grading diagnoses a submission (in process: the mutant is trusted code), and each is put
in one class:

- **invisible**: no visible case fails (the mutation changes nothing the lab asks, or
  only its hidden cases);
- **wrong**: a hint names a cause the mutation does not have: a finding about a function
  the mutation's code does not run in, or one that is false on 40 unseen inputs of its
  function with three times the experiments (``diagnosis_lab.falsified``);
- **named**: a finding names a cause, on the mutated function;
- **observed**: only what was observed is said ("wrong on 3 of 6 cases; right whenever");
- **silent**: the cases fail and nothing but the field's where-to-look is said.

The table is per operator, with the totals; ``--verbose`` prints every wrong one.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import diagnosis_lab  # noqa: E402
import mutants  # noqa: E402

from graders.grading.cases import CONTRACT_FUNCTIONS, Case, visible_cases  # noqa: E402
from graders.grading.function_diagnosis import WHERE_TO_LOOK, FunctionDiagnosis  # noqa: E402
from graders.trackfiles.tracks import Track  # noqa: E402

CLASSES = ("named", "observed", "silent", "wrong", "invisible")


def classify(mutant: mutants.Mutant, loaded_tracks: tuple[Track, ...],
             cases: dict[str, list[Case]]) -> tuple[str, list[str]]:
    """The mutant's class (see the module) and, for a wrong one, why."""
    loaded = mutants.load(mutant)
    try:
        module = loaded.module
        found: dict[str, FunctionDiagnosis] = {}
        lab = diagnosis_lab.InProcessLab(module)
        for function in CONTRACT_FUNCTIONS:
            if function not in cases:
                continue
            diagnosis, lab = diagnosis_lab.diagnose(module, function, loaded_tracks)
            if diagnosis.cases:
                found[function] = diagnosis
        if not found:
            return "invisible", []
        why: list[str] = []
        named = observed = False
        for function, diagnosis in found.items():
            own = function in mutant.functions
            for name, finding in diagnosis.findings.items():
                if not finding.named:
                    observed = observed or own
                    continue
                if not own:
                    why.append(f"{function}.{name}: {finding.text} (the mutation is in "
                               f"{', '.join(sorted(mutant.functions)) or mutant.function})")
                    continue
                wide = diagnosis_lab.observe(
                    module, [*cases[function], *diagnosis_lab.twins(function, loaded_tracks)],
                    lab)
                if diagnosis_lab.falsified(function, name, finding.key, wide, lab):
                    why.append(f"{function}.{name}: {finding.text} (false on unseen inputs)")
                else:
                    named = True
            for case in diagnosis.cases.values():
                hint = case.error_hint
                if hint and not hint.startswith(WHERE_TO_LOOK):
                    if own:
                        named = True
                    else:
                        why.append(f"{function} error: {hint}")
        if why:
            return "wrong", why
        return ("named" if named else "observed" if observed else "silent"), []
    finally:
        loaded.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=0, help="the first N mutants only")
    parser.add_argument("--operator", default="", help="one operator's mutants only")
    parser.add_argument("--write", type=Path, help="also write the table here (markdown)")
    parser.add_argument("--verbose", action="store_true", help="print every wrong mutant")
    options = parser.parse_args(argv)
    loaded_tracks = diagnosis_lab.tracks()
    cases: dict[str, list[Case]] = collections.defaultdict(list)
    for case in visible_cases(loaded_tracks):
        cases[case.function].append(case)
    chosen = [m for m in mutants.mutants()
              if not options.operator or m.operator == options.operator]
    if options.limit:
        chosen = chosen[:options.limit]
    table: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    started = time.monotonic()
    for index, mutant in enumerate(chosen, start=1):
        try:
            kind, why = classify(mutant, loaded_tracks, cases)
        except Exception as error:  # noqa: BLE001 - a mutant that does not import
            kind, why = "invisible", [f"{type(error).__name__}"]
        table[mutant.operator][kind] += 1
        if kind == "wrong" and options.verbose:
            print(f"WRONG {mutant.name}", *(f"    {line}" for line in why), sep="\n")
        if index % 25 == 0:
            print(f"... {index} of {len(chosen)} mutants, {time.monotonic() - started:.0f} s",
                  file=sys.stderr)
    lines = ["| operator | mutants | named | observed only | silent | wrong | invisible |",
             "|---|---|---|---|---|---|---|"]
    total: collections.Counter[str] = collections.Counter()
    for operator in mutants.OPERATORS:
        counts = table.get(operator, collections.Counter())
        total.update(counts)
        lines.append(f"| {operator} | {sum(counts.values())} | "
                     + " | ".join(str(counts[kind]) for kind in CLASSES) + " |")
    lines.append(f"| **all** | {sum(total.values())} | "
                 + " | ".join(str(total[kind]) for kind in CLASSES) + " |")
    print("\n".join(lines))
    print(f"({time.monotonic() - started:.0f} s)")
    if options.write:
        options.write.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
