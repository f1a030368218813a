"""Whether a query or a scene says anything: `str.strip` keeps a zero-width space (U+200B),
a byte-order mark or a joiner, so a query of one was searched for and answered with
whatever passages its near-empty vector lies closest to."""

from __future__ import annotations

import unicodedata

INVISIBLE = frozenset({"Cc", "Cf"})
"""Unicode categories that show nothing: controls and format characters (U+200B, U+FEFF)."""


def is_blank(text: str) -> bool:
    """Whether `text` holds only spaces, line breaks, controls and format characters."""
    return all(char.isspace() or unicodedata.category(char) in INVISIBLE for char in text)
