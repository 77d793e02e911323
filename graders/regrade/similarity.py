"""Shared code: submissions whose code is the same once comments, whitespace, names and
literals are set aside, for staff to look at beside the class's mistake clusters.

Each ``serving.py`` is read with Python's own tokenizer (:mod:`tokenize`): comments,
docstrings, blank lines and layout are dropped, every name that is not a keyword, a
builtin or an attribute becomes ``V``, every number ``N`` and every string ``S``.
Two submissions with the same normalised tokens are *the same code after normalising*.
Otherwise their likeness is Moss's: the hashes of every run of :data:`K` tokens,
winnowed (the smallest hash of each :data:`WINDOW` consecutive ones is kept; Schleimer,
Wilkerson and Aiken, "Winnowing", SIGMOD 2003), the template's own fingerprints set
aside, and the share of the smaller submission's fingerprints found in the other. At
:data:`NEAR` or above, two submissions are *near-identical*. A submission with fewer than
:data:`MIN_FINGERPRINTS` fingerprints beyond the template's (the template itself, or
little more) is never compared: it has nothing of its own to share.

A pair is never a verdict: the same short formula written twice is likely in a lab
that fixes every function's signature, and the page says so. The evidence shown is the
share, and the lines that differ once normalised.
"""

from __future__ import annotations

import builtins
import difflib
import hashlib
import io
import keyword
import tokenize
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

#: Tokens per fingerprinted run, and the window of runs each fingerprint is chosen from.
K = 12
WINDOW = 8
#: The share of the smaller submission's fingerprints found in the other at which the two
#: are near-identical.
NEAR = 0.9
#: Fingerprints a submission must have, beyond the template's, to be compared at all.
MIN_FINGERPRINTS = 20
#: Normalised lines of difference shown as evidence.
DIFF_LINES = 40
_KEPT_NAMES = frozenset(dir(builtins)) | frozenset(keyword.kwlist)
_SKIPPED = (tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER)
#: An f-string's tokens from Python 3.12 on (before, one STRING token): one ``S`` in all.
_FSTRING_START = getattr(tokenize, "FSTRING_START", -1)
_FSTRING_REST = (getattr(tokenize, "FSTRING_MIDDLE", -1), getattr(tokenize, "FSTRING_END", -1))


@dataclass(frozen=True)
class Code:
    """One submission's normalised code: its tokens, and the line each comes from."""

    tokens: tuple[str, ...]
    lines: tuple[int, ...]

    def text(self) -> list[str]:
        """The normalised code, one line per source line that has tokens."""
        rows: dict[int, list[str]] = {}
        for token, line in zip(self.tokens, self.lines, strict=True):
            if token not in ("<newline>", "<indent>", "<dedent>"):
                rows.setdefault(line, []).append(token)
        return [" ".join(row) for _, row in sorted(rows.items())]


def normalised(source: str) -> Code | None:
    """``source``'s tokens with comments, docstrings, layout, names and literals set aside
    (see the module); None when it does not tokenize (then it is not compared)."""
    tokens: list[str] = []
    lines: list[int] = []
    previous = tokenize.NEWLINE
    after_dot = False
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            kind = token.type
            if kind in _SKIPPED:
                continue
            statement_start = previous in (tokenize.NEWLINE, tokenize.INDENT,
                                           tokenize.DEDENT)
            previous = kind
            if kind == tokenize.STRING and statement_start:
                continue  # a docstring (or a bare string): a comment in effect
            if kind == tokenize.NAME:
                text = token.string if after_dot or token.string in _KEPT_NAMES else "V"
            elif kind == tokenize.NUMBER:
                text = "N"
            elif kind in (tokenize.STRING, _FSTRING_START):
                text = "S"
            elif kind in _FSTRING_REST:
                continue
            elif kind == tokenize.NEWLINE:
                text = "<newline>"
            elif kind == tokenize.INDENT:
                text = "<indent>"
            elif kind == tokenize.DEDENT:
                text = "<dedent>"
            else:
                text = token.string
            after_dot = token.string == "."
            if text == "<newline>" and tokens and tokens[-1] == "<newline>":
                continue
            tokens.append(text)
            lines.append(token.start[0])
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    return Code(tuple(tokens), tuple(lines))


def fingerprints(code: Code) -> set[int]:
    """The winnowed hashes of ``code``'s runs of :data:`K` tokens (see the module)."""
    hashes = [int.from_bytes(hashlib.blake2b("\0".join(code.tokens[at:at + K]).encode(),
                                             digest_size=8).digest(), "big")
              for at in range(len(code.tokens) - K + 1)]
    if len(hashes) <= WINDOW:
        return set(hashes)
    chosen: set[int] = set()
    for at in range(len(hashes) - WINDOW + 1):
        chosen.add(min(hashes[at:at + WINDOW]))
    return chosen


def template_fingerprints() -> set[int]:
    """The student template's fingerprints (empty when the template is not installed):
    code every student starts from is never evidence."""
    template = Path(__file__).resolve().parents[2] / "student_template" / "serving.py"
    try:
        code = normalised(template.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return set()
    return fingerprints(code) if code is not None else set()


@dataclass(frozen=True)
class Pair:
    """Two submissions whose code is alike."""

    first: str
    second: str
    #: The share of the smaller one's fingerprints found in the other (1.0 when identical).
    share: float
    identical: bool
    #: The normalised lines that differ (a unified diff; empty when identical).
    diff: tuple[str, ...]


@dataclass(frozen=True)
class Group:
    """Submissions linked by alike pairs (each one alike to at least one other)."""

    members: tuple[str, ...]
    pairs: tuple[Pair, ...]

    @property
    def identical(self) -> bool:
        return all(pair.identical for pair in self.pairs)


def alike_pairs(sources: Mapping[str, str], base: set[int] | None = None) -> list[Pair]:
    """Every pair of ``sources`` (id to source text) that is the same code after
    normalising, or near-identical (see the module), in id order."""
    base = template_fingerprints() if base is None else base
    codes = {ident: code for ident, text in sorted(sources.items())
             if (code := normalised(text)) is not None and code.tokens}
    prints = {ident: fingerprints(code) - base for ident, code in codes.items()}
    pairs = []
    idents = list(codes)
    for index, first in enumerate(idents):
        for second in idents[index + 1:]:
            smaller = min(len(prints[first]), len(prints[second]))
            if smaller < MIN_FINGERPRINTS:  # little beyond the template: nothing to tell
                continue
            same = codes[first].tokens == codes[second].tokens
            if same:
                share = 1.0
            else:
                share = len(prints[first] & prints[second]) / smaller
                if share < NEAR:
                    continue
            pairs.append(Pair(first, second, round(share, 4), same,
                              () if same else _diff(codes[first], codes[second])))
    return pairs


def groups(pairs: Iterable[Pair]) -> list[Group]:
    """The pairs joined into groups (connected components), largest first."""
    parent: dict[str, str] = {}

    def root(ident: str) -> str:
        while parent.setdefault(ident, ident) != ident:
            ident = parent[ident]
        return ident

    listed = list(pairs)
    for pair in listed:
        parent[root(pair.first)] = root(pair.second)
    members: dict[str, list[str]] = {}
    for ident in sorted(parent):
        members.setdefault(root(ident), []).append(ident)
    found = [Group(tuple(names), tuple(pair for pair in listed if pair.first in names))
             for names in members.values()]
    return sorted(found, key=lambda group: (-len(group.members), group.members))


def _diff(first: Code, second: Code) -> tuple[str, ...]:
    lines = list(difflib.unified_diff(first.text(), second.text(), lineterm="", n=1))
    return tuple(lines[2:2 + DIFF_LINES])  # without the ---/+++ header


def shared_between(group: Group, members: Sequence[str]) -> list[str]:
    """The group's members among ``members`` (a cluster's), in the group's order."""
    inside = set(members)
    return [ident for ident in group.members if ident in inside]
