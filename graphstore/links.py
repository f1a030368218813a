"""Link tags: the only graph structure the store keeps.

A node links *out* to a tag and another node links *in* to the same tag; the edge between
them is implied and found at query time, never stored.  `Link` mirrors LangChain's
`langchain_community.graph_vectorstores.links.Link` field for field, so links made by
LangChain's extractors are accepted as they are (see `as_link`).
"""

from __future__ import annotations

import hashlib
import json
import reprlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, get_args

from graphstore.errors import InvalidInputError
from graphstore.utf8 import check_utf8

Direction = Literal["in", "out", "bidir"]
DIRECTIONS: frozenset[str] = frozenset(get_args(Direction))

MAX_TAG_LENGTH = 1024
"""Longest accepted kind or tag, in characters: tags are keys, not payloads."""

TagKey = tuple[str, str]
"""A `(kind, tag)` pair: the unit the store indexes and the traversal visits."""


@dataclass(frozen=True, order=True)
class Link:
    """A link from or to the tag `tag` of the namespace `kind`."""

    kind: str
    direction: Direction
    tag: str

    @staticmethod
    def incoming(kind: str, tag: str) -> Link:
        """A link that lets nodes linking out to `(kind, tag)` reach this node."""
        return Link(kind, "in", tag)

    @staticmethod
    def outgoing(kind: str, tag: str) -> Link:
        """A link that lets this node reach nodes linking in to `(kind, tag)`."""
        return Link(kind, "out", tag)

    @staticmethod
    def bidir(kind: str, tag: str) -> Link:
        """A link in both directions: nodes sharing it reach each other."""
        return Link(kind, "bidir", tag)

    @property
    def key(self) -> TagKey:
        """The `(kind, tag)` pair this link points at."""
        return (self.kind, self.tag)

    @property
    def is_outgoing(self) -> bool:
        """True when traversal may leave the node through this link."""
        return self.direction in ("out", "bidir")

    @property
    def is_incoming(self) -> bool:
        """True when traversal may arrive at the node through this link."""
        return self.direction in ("in", "bidir")


def as_link(value: Any) -> Link:
    """Convert a `Link`, LangChain `Link` or `{"kind", "direction", "tag"}` dict, validating it."""
    kind: Any
    direction: Any
    tag: Any
    if isinstance(value, dict):
        kind, direction, tag = value.get("kind"), value.get("direction"), value.get("tag")
    elif all(hasattr(value, name) for name in ("kind", "direction", "tag")):
        kind, direction, tag = value.kind, value.direction, value.tag
    else:
        raise InvalidInputError(
            "a link must be a Link or a {kind, direction, tag} dict, "
            f"not {type(value).__name__} {_brief(value)}"
        )
    if direction not in DIRECTIONS:
        raise InvalidInputError(f"link direction must be one of in, out, bidir, not {direction!r}")
    for name, text in (("kind", kind), ("tag", tag)):
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError(f"link {name} must be a non-empty string, got {text!r}")
        if len(text) > MAX_TAG_LENGTH:
            raise InvalidInputError(
                f"link {name} is {len(text)} characters long; the limit is {MAX_TAG_LENGTH}"
            )
        check_utf8(f"link {name}", text)
    return Link(kind, direction, tag)


def _brief(value: Any, limit: int = 60) -> str:
    """`value`'s repr on one line, cut to `limit` characters, so that a one-line error names
    what it refused (`reprlib`: a container's repr is built only as far as shown, and a repr
    that fails names the value's type)."""
    text = " ".join(BRIEF.repr(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


BRIEF = reprlib.Repr()
"""How `_brief` writes a value: strings and other values cut at 60 characters."""
BRIEF.maxstring = BRIEF.maxother = 60


def bounded(link: Link) -> Link:
    """`link` with a tag over `MAX_TAG_LENGTH` shortened to its start and a hash of the whole.

    Extractors derive tags from file content (a heading, an href), which may be any length;
    the hash keeps equal long tags equal, so they still link.
    """
    if len(link.tag) <= MAX_TAG_LENGTH:
        return link
    digest = hashlib.sha256(link.tag.encode("utf-8", "surrogatepass")).hexdigest()
    start = link.tag[: MAX_TAG_LENGTH - len(digest) - 1]
    return Link(link.kind, link.direction, f"{start}…{digest}")


def as_links(values: Iterable[Any] | None) -> frozenset[Link]:
    """Validate a collection of links; duplicates collapse."""
    if values is None:
        return frozenset()
    if isinstance(values, (str, bytes, dict)) or not isinstance(values, Iterable):
        raise InvalidInputError(f"links must be a list of Link, not {type(values).__name__}")
    return frozenset(as_link(value) for value in values)


def outgoing_tags(links: Iterable[Link]) -> frozenset[TagKey]:
    """The tags traversal may leave through."""
    return frozenset(link.key for link in links if link.is_outgoing)


def incoming_tags(links: Iterable[Link]) -> frozenset[TagKey]:
    """The tags traversal may arrive through: one tag row each."""
    return frozenset(link.key for link in links if link.is_incoming)


def encode_links(links: Iterable[Link]) -> str:
    """Links as a JSON list of `[kind, direction, tag]`, sorted so equal sets encode equally."""
    return json.dumps([[link.kind, link.direction, link.tag] for link in sorted(links)])


def decode_links(text: str) -> frozenset[Link]:
    """Inverse of `encode_links`.  Text it did not write (a row changed outside graphstore)
    raises ValueError or TypeError, as callers expect of an unreadable row: a link of no
    known direction, or with a kind or tag that is not text, was read as a link that goes
    nowhere, and JSON nested too deep raised RecursionError."""
    try:
        decoded = json.loads(text)
    except RecursionError:
        raise ValueError("links nested too deep") from None
    if not isinstance(decoded, list):
        raise ValueError("links are not a JSON list")
    links = frozenset(Link(kind, direction, tag) for kind, direction, tag in decoded)
    for link in links:
        if link.direction not in DIRECTIONS or not (
            isinstance(link.kind, str) and isinstance(link.tag, str)
        ):
            raise ValueError(f"not a link: {[link.kind, link.direction, link.tag]!r}")
    return links
