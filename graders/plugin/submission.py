"""Which file of what a student submitted is graded: ``serving.py`` itself, the one a
folder holds, or the one its subfolders hold (students often zip a folder); what
``--student``, ``graders grade`` and the regrade roster name; and how it is read (a
regular file only, never a link, within a size cap)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from graders.errors import SubmissionError
from graders.sandbox.limits import MAX_SUBMISSION_BYTES
from graders.sandbox.submission import SUBMISSION_NAME

#: Folders never searched for a nested ``serving.py`` (besides hidden ones).
SKIPPED_FOLDERS = ("__MACOSX",)
#: How deep below a submission folder a nested ``serving.py`` is looked for.
SEARCH_DEPTH = 3


def locate_submission(path: str | os.PathLike[str]) -> Path:
    """The ``serving.py`` named by ``path``: the file itself, the one at the top of a folder,
    the only one in its subfolders, or else its only ``.py`` file named ``serving...``."""
    candidate = Path(path)
    if not os.path.lexists(candidate):
        raise SubmissionError(f"submission {str(path)!r} not found: give a serving.py or a "
                              "folder holding one")
    if candidate.is_symlink():
        return candidate  # refused when read
    if not candidate.is_dir():
        if candidate.suffix != ".py" and candidate.is_file():
            raise SubmissionError(f"submission {str(path)!r} is not a Python file; "
                                  f"{not_python(candidate.name)}; {SUBMIT_ONE}")
        return candidate
    if os.path.lexists(candidate / SUBMISSION_NAME):
        return candidate / SUBMISSION_NAME
    return _nested(candidate)


#: How a submission that holds no usable ``serving.py`` is told what to submit.
SUBMIT_ONE = (f"submit one file named {SUBMISSION_NAME}, or one .py file whose name starts "
              "with 'serving'")
#: Files students submit instead of ``serving.py``, by suffix: what each is, and its fix.
OTHER_FORMATS = {
    ".ipynb": "a Jupyter notebook, not Python source (download it as a .py file: File > "
              "Download as > Python, and submit that)",
    **dict.fromkeys((".zip", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar"),
                    "an archive, not Python source (unpack it and submit the folder or "
                    "its serving.py)"),
}


def not_python(name: str) -> str:
    """Why the file ``name`` is not a submission, and what to do instead."""
    what = OTHER_FORMATS.get(Path(name).suffix.lower(),
                             "not a .py file (if it holds your code, rename it serving.py)")
    return f"{name!r} is {what}"


def _files(folder: Path, wanted: Callable[[str], bool]) -> list[Path]:
    """The files of ``folder`` and its subfolders (down to :data:`SEARCH_DEPTH`) whose
    name is ``wanted``, hidden and skipped ones left out; links are listed, never followed."""
    found = []
    for parent, subfolders, files in os.walk(folder):  # never follows links
        depth = len(Path(parent).relative_to(folder).parts)
        subfolders[:] = sorted(name for name in subfolders if not name.startswith(".")
                               and name not in SKIPPED_FOLDERS and depth < SEARCH_DEPTH)
        found += [Path(parent) / name for name in sorted(files)
                  if not name.startswith(".") and wanted(name)]
    return found


def _nested(folder: Path) -> Path:
    files = _files(folder, lambda name: name.endswith(".py"))
    exact = [path for path in files if path.name == SUBMISSION_NAME]
    near = [path for path in files if path.name.startswith("serving")]
    if len(exact) == 1:
        return exact[0]
    if exact:
        listed = ", ".join(str(path.relative_to(folder)) for path in exact[:3])
        raise SubmissionError(f"{len(exact)} {SUBMISSION_NAME} files in submission folder "
                              f"{str(folder)!r} ({listed}); keep one")
    if len(near) == 1:  # a renamed download: "serving (1).py", "serving_final.py"
        return near[0]
    shown = near or files
    listed = ", ".join(repr(str(path.relative_to(folder))) for path in shown[:5])
    more = f" and {len(shown) - 5} more" if len(shown) > 5 else ""
    what = (f"found {len(near)} .py files named serving...: {listed}{more}; keep one"
            if near else f"found {listed}{more}" if files else "found no .py file")
    # a notebook, an archive or a file named serving... the student may have meant
    others = [] if files else _files(folder, lambda name: name.startswith("serving")
                                     or Path(name).suffix.lower() in OTHER_FORMATS)
    meant = f"{not_python(str(others[0].relative_to(folder)))}; " if others else ""
    raise SubmissionError(f"{SUBMISSION_NAME} not found in submission folder {str(folder)!r} "
                          f"or its subfolders ({what}); {meant}{SUBMIT_ONE}")


def read_submission(path: Path) -> bytes:
    """The bytes of ``path`` if it is a regular file (not a link) within the size cap."""
    try:
        info = path.lstat()
    except OSError as error:
        raise SubmissionError(f"cannot read submission {str(path)!r}: {error.strerror}") from None
    if stat.S_ISLNK(info.st_mode):
        raise SubmissionError(f"submission {str(path)!r} is a symbolic link; submit "
                              "serving.py itself")
    if not stat.S_ISREG(info.st_mode):
        raise SubmissionError(f"submission {str(path)!r} is not a regular file")
    if info.st_size > MAX_SUBMISSION_BYTES:
        raise SubmissionError(f"submission {str(path)!r} is {info.st_size} bytes; the limit "
                              f"is {MAX_SUBMISSION_BYTES} bytes")
    with os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)), "rb") as handle:
        data = handle.read(MAX_SUBMISSION_BYTES + 1)
    if len(data) > MAX_SUBMISSION_BYTES:
        raise SubmissionError(f"submission {str(path)!r} grew past the size limit while read")
    return data
