"""Names shown on one line (ids, file names, tags, sections): as they are when printable,
else JSON-quoted, so a newline or a terminal escape in a file name can neither split one
entry in two nor reach the terminal raw (`graphstore search`, `graphstore prompt`, and
the names an error message quotes)."""

from __future__ import annotations

import json
import textwrap
import unicodedata
from collections.abc import Callable

SNIPPET = 240
"""Characters of a passage's start that a listing shows (`graphstore search`)."""


def inline(text: str) -> str:
    """`text` as is when it prints on one line, else JSON-quoted."""
    return text if text.isprintable() else json.dumps(text, ensure_ascii=False)


def escaped(text: str, shows: Callable[[str], bool] = str.isprintable) -> str:
    """`text` with each character that `shows` refuses (by default, each that does not
    print) escaped: for a message quoting names (an error naming a file), which stays
    readable around them.  A byte of a file name that is not UTF-8 (a surrogate escape)
    reads `\\xNN`, as ids spell it (`path_text`)."""
    if text.isprintable():  # a character that prints is shown by every `shows`
        return text
    return "".join(char if shows(char) else _escape(char) for char in text)


def _escape(char: str) -> str:
    code = ord(char)
    if SURROGATE_ESCAPES[0] <= code <= SURROGATE_ESCAPES[1]:
        return f"\\x{code - 0xDC00:02x}"
    return json.dumps(char)[1:-1]


SURROGATE_ESCAPES = (0xDC80, 0xDCFF)
"""Where Python puts the bytes of a file name that are not UTF-8 (`surrogateescape`)."""


def snippet(text: str, width: int = SNIPPET) -> str:
    """The start of a passage on one line: whitespace collapsed, cut at a word when the text
    has words, else at `width` characters (`textwrap.shorten` alone drops a first word
    longer than `width` whole: a Chinese passage, which has no spaces, showed as "…"), and
    control characters and surrogates escaped (a terminal escape in a passage reached the
    terminal raw; the zero-width joiners and soft hyphens of real text stay as they are)."""
    flat = " ".join(text.split())
    if len(flat) > width:
        cut = textwrap.shorten(flat, width, placeholder=" …")
        flat = cut if len(cut) > width // 2 else flat[: width - 2] + " …"
    return escaped(flat, _shown_in_snippet)


UNSHOWN = frozenset({"Cc", "Cs"})
"""Unicode categories a snippet escapes: controls (a terminal reads them as commands) and
surrogates (which no terminal encoding takes)."""


def _shown_in_snippet(char: str) -> bool:
    return unicodedata.category(char) not in UNSHOWN


def printed_whole(text: str) -> str:
    """A passage's text as a command prints it whole (`graphstore show`, `graphstore
    prompt`): line breaks and tabs kept, other control characters and surrogates escaped as
    in a snippet (an ingested file could recolour the terminal or retitle its window)."""
    return escaped(text, _shown_whole)


def _shown_whole(char: str) -> bool:
    return char in "\n\t" or _shown_in_snippet(char)
