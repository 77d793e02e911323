"""Student text made safe for each medium it reaches: pure functions, one per medium.

Student text is anything a submission controls: exception messages, string results,
printed output, names from Gradescope's metadata, file and folder names. Every function
here first escapes control characters *visibly* (``"\\x1b"``, ``"\\ud800"``), so that a
reader sees that something was there and nothing acts on it:

- C0 controls but newline and tab, DEL, C1 controls (ESC, CSI and OSC start terminal
  escape sequences; CR rewrites a line);
- lone surrogates (they cannot be encoded as UTF-8: writing one raises);
- bidirectional overrides, embeddings, isolates and marks (U+061C, U+200E, U+200F,
  U+202A-U+202E, U+2066-U+2069): they reorder what a reader sees ("Trojan source");
- the line and paragraph separators U+2028 and U+2029, which some readers take as line
  breaks and others do not.

Then each medium gets its own escaping on top: Markdown markup, HTML, spreadsheet
formulas in CSV cells, and Gradescope's ``output_format``.
"""

from __future__ import annotations

import html
import re
import sys

#: Characters escaped in every medium (see the module docstring).
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u2028\u2029"
    "\u202a-\u202e\u2066-\u2069]")
#: Characters with a meaning in Markdown (CommonMark and GitHub's extensions), escaped with
#: a backslash wherever they are: emphasis, code, links and images, autolinks (``:`` and
#: ``.`` break ``https://`` and ``www.``), raw HTML, headings, lists, quotes, tables,
#: strikethrough, setext underlines and math.
_MARKDOWN = re.compile(r"([\\`*_{}\[\]<>()#+\-.!|~=:&$^])")
#: Cells a spreadsheet would read as a formula (OWASP: CSV injection).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
#: Gradescope's ``output_format`` values (results.json spec, "Output String Formatting").
GRADESCOPE_FORMATS = ("text", "html", "simple_format", "md", "ansi")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """``text`` with every control character escaped visibly; newlines and tabs kept."""
    return _CONTROL.sub(_visible, text)


def single_line(text: str) -> str:
    """``text`` on one line: controls escaped, and newlines and tabs too (``"\\n"``), so
    that student text embedded in a message cannot start a line of its own."""
    return escape_controls(text).replace("\n", "\\n").replace("\t", "\\t")


#: Readable ASCII for the symbols the grader's own texts use (hints, rules), for a stream
#: that cannot show them (a Windows console or file in cp1252, a Latin-1 locale).
ASCII_SPELLINGS = {
    "λ": "lambda", "μ": "mu", "µ": "u", "ρ": "rho", "σ": "sigma", "≥": ">=", "≤": "<=",
    "≠": "!=", "≈": "~", "−": "-", "–": "-", "—": "--", "·": "*", "×": "x", "÷": "/",
    "→": "->", "←": "<-", "…": "...", "²": "^2", "³": "^3", "√": "sqrt", "∞": "inf",
    "±": "+/-", "‘": "'", "’": "'", "“": '"', "”": '"', "°": " deg", "⌈": "ceil(",
    "⌉": ")", "⌊": "floor(", "⌋": ")",
}


def encodable(text: str, encoding: str | None) -> str:
    """``text`` as a stream in ``encoding`` can show it: each character it cannot encode
    spelled in ASCII (:data:`ASCII_SPELLINGS`, else its compatibility decomposition's
    ASCII letters, else ``?``), so a line never turns into ``\u2265`` or a crash."""
    if not encoding:
        return text
    try:
        text.encode(encoding)
        return text
    except UnicodeEncodeError:
        pass
    except LookupError:  # an encoding Python does not know: ASCII is safe
        encoding = "ascii"
    import unicodedata

    def shown(character: str) -> str:
        try:
            character.encode(encoding)
            return character
        except UnicodeEncodeError:
            spelled = ASCII_SPELLINGS.get(character)
            if spelled is None:
                decomposed = unicodedata.normalize("NFKD", character)
                spelled = decomposed.encode("ascii", "ignore").decode("ascii") or "?"
            return spelled

    return "".join(shown(character) for character in text)


def for_terminal(text: str, encoding: str | None = None) -> str:
    """``text`` for a terminal: no escape sequence (colours, cursor moves, a window title)
    or carriage return reaches it, and what its encoding (``encoding``, else the
    interpreter's standard output's) cannot show is spelled in ASCII; nothing else is
    changed."""
    stream = getattr(sys, "__stdout__", None)
    return encodable(escape_controls(text),
                     encoding or getattr(stream, "encoding", None) or "utf-8")


def for_markdown(text: str) -> str:
    """``text`` as literal Markdown: every markup character is backslash-escaped, so no
    link, image, HTML, heading, list or table cell boundary can be formed."""
    return _MARKDOWN.sub(r"\\\1", escape_controls(text))


#: What needs escaping inside a Markdown table cell (inline content, never a line start):
#: code, emphasis, links and images, raw HTML and entities, cell boundaries,
#: strikethrough, math and e-mail autolinks; ``_`` only at a word's edge (GitHub ignores
#: it inside a word), ``:`` only in ``://`` and ``.`` only after ``www`` (autolinks).
_MARKDOWN_INLINE = re.compile(r"[\\`*\[\]<>|~&$@]|(?<!\w)_|_(?!\w)|:(?=//)|(?<=www)\.",
                              re.IGNORECASE)


def for_markdown_cell(text: str) -> str:
    """``text`` inside one cell of a Markdown table: one line, and only what Markdown
    would read as markup there escaped, so that it stays readable as plain text
    (``total_p99_ms: expected #``, not ``total\\_p99\\_ms\\: expected \\#``)."""
    line = escape_controls(" ".join(text.split()))
    return _MARKDOWN_INLINE.sub(lambda match: "\\" + match.group(), line)


def for_html(text: str) -> str:
    """``text`` as HTML text or attribute content (quotes escaped too)."""
    return html.escape(escape_controls(text), quote=True)


def for_csv_cell(text: str) -> str:
    """``text`` as a CSV cell that no spreadsheet evaluates: a cell starting with
    ``= + - @``, a tab or a carriage return (after any spaces) gets a leading ``'``
    (OWASP's CSV injection advice)."""
    if text.lstrip(" ").startswith(_FORMULA_START):
        text = "'" + text
    return escape_controls(text)


def for_actions_log(text: str) -> str:
    """``text`` for a GitHub Actions log: as for a terminal, and no line can start a
    workflow command (``::error::``, ``::add-mask::``, ``::stop-commands::``)."""
    lines = for_terminal(text).split("\n")
    return "\n".join("\\" + line if line.lstrip().startswith("::") else line
                     for line in lines)


def for_gradescope(text: str, output_format: str) -> str:
    """``text`` for a results.json ``output`` shown in ``output_format``.

    ``text`` and ``ansi``: controls escaped (Gradescope renders nothing in ``text``; an
    escaped ESC starts no colour in ``ansi``); ``md``: Markdown escaped; ``html`` and
    ``simple_format``: HTML escaped.
    """
    if output_format in ("text", "ansi"):
        return escape_controls(text)
    if output_format == "md":
        return for_markdown(text)
    if output_format in ("html", "simple_format"):
        return for_html(text)
    raise ValueError(f"unknown Gradescope output_format {output_format!r}: expected one "
                     f"of {', '.join(GRADESCOPE_FORMATS)}")


def has_controls(text: str) -> bool:
    """Whether ``text`` holds a character :func:`escape_controls` would escape."""
    return _CONTROL.search(text) is not None
