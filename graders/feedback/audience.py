"""Who an HTML feedback page is for, and how a command line names it."""

from __future__ import annotations

import argparse
from typing import Literal, TypeAlias

#: ``student``: a page made before the hidden tests are released (their results, and any
#: total that counts them, left out); ``staff``: every result, labelled as a staff page.
Audience: TypeAlias = Literal["student", "staff"]
AUDIENCES: tuple[Audience, ...] = ("student", "staff")


def page_audience(text: str) -> Audience:
    """An argparse type: one of :data:`AUDIENCES`."""
    if text not in AUDIENCES:
        raise argparse.ArgumentTypeError(f"must be one of {', '.join(AUDIENCES)}, "
                                         f"got {text!r}")
    return text
