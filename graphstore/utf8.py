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


def check_utf8(what: str, text: str) -> str:
    """Return `text`, or raise a one-line error naming `what` if UTF-8 cannot encode it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        bad = text[error.start]
        raise InvalidInputError(
            f"{what} contains {bad!r} at position {error.start}, a lone surrogate that "
            "UTF-8 cannot store"
        ) from None
    return text
