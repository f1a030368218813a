"""Every string the store keeps must be valid UTF-8: SQLite, JSON files and Cassandra's
`text` all refuse a lone surrogate (`"\\ud800"`), so one is refused before any write."""

from __future__ import annotations

from graphstore.errors import InvalidInputError


def is_utf8(text: str) -> bool:
    """Whether UTF-8 can encode `text` (it holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


ESCAPED_BYTES = 0xDC80
"""Where the stand-ins for bytes 0x80-0xFF that are not UTF-8 start: Python decodes the
command line's arguments so (`surrogateescape`), so `$'\\xff'` arrives as '\\udcff'."""


def check_utf8(what: str, text: str) -> str:
    """Return `text`, or raise a one-line error naming `what` if UTF-8 cannot encode it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        bad = text[error.start]
        if ESCAPED_BYTES <= ord(bad) < ESCAPED_BYTES + 0x80:  # Python's stand-in for a byte
            raise InvalidInputError(
                f"{what} contains {bad!r} at position {error.start}: Python's stand-in for "
                f"the byte 0x{ord(bad) - 0xDC00:02x}, which is not UTF-8"
            ) from None
        raise InvalidInputError(
            f"{what} contains {bad!r} at position {error.start}, a lone surrogate that "
            "UTF-8 cannot store"
        ) from None
    return text
