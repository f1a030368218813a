"""Entity cards: a writer's world bible, one card per character, place, organization or item.

A card has a name, aliases (行者 = 孙悟空), a kind, a description and attributes whose
values may change as the story goes on: each value optionally says the chapter from which
it holds, and so may an alias (a name earned later: 齐天大圣 from chapter 4).  Rendered "as
of" chapter N, a card shows per attribute the latest value whose chapter is N or earlier (a
value without a chapter holds from the start) and the aliases held by then, so nothing a
later chapter establishes leaks into a prompt for an earlier one.  Every alias, dated or
not, links the passages that name it.

A card is stored as a passage of its own (metadata `kind: card`, id `card:<name>`) that
links in to the tag `(card, <name>)`; a passage naming the entity, or any alias, links out
to it (`card_mentions`, the mention extractor fed from the cards).  A card read from a file
records the file's absolute path (metadata `file`, as passages do), by which an ingest of a
card folder knows which stored cards are its own.
"""

from __future__ import annotations

import datetime
import math
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from extractors.mentions import MentionLinkExtractor
from extractors.normalize import is_cjk, normalize_tag
from graphstore.chapters import check_chapter
from graphstore.errors import InvalidInputError
from graphstore.inline import inline
from graphstore.links import TagKey
from graphstore.nodes import Node
from graphstore.splitting import FILE
from graphstore.utf8 import check_utf8

CARD = "card"
"""The metadata `kind` of a card passage, and the link kind of its tag."""
FIELDS = ("name", "aliases", "kind", "attributes", "description")
MAX_NAME = 200
DATED = {"value", "chapter"}
DATED_ALIAS = {"name", "chapter"}
LIST_SEPARATORS = ("，", "、", "；", ";")
"""Separators no name holds (`_aliases`)."""
Scalar = str | int | float | bool
Value = Scalar | list[Scalar]


@dataclass(frozen=True)
class Fact:
    """One value of an attribute, true from `chapter` on (from the start when None)."""

    value: Value
    chapter: int | None = None


@dataclass(frozen=True)
class Card:
    """One entity of the story world."""

    name: str
    kind: str = ""
    aliases: tuple[str, ...] = ()
    alias_chapters: tuple[tuple[str, int], ...] = ()
    """The aliases that hold from a chapter on, with that chapter (the others always do)."""
    attributes: tuple[tuple[str, tuple[Fact, ...]], ...] = ()
    description: str = ""
    source: str = ""
    file: str = ""
    """The absolute path of the card's file (`graphstore.splitting.recorded_file`), "" when
    unknown (an agent's card, or one stored before cards recorded it): a relative `source`
    does not say which root it was named from."""

    @property
    def id(self) -> str:
        """The card's passage id: the same for every spelling of the name that folds alike."""
        return card_id(self.name)

    @property
    def tag(self) -> TagKey:
        """The tag the card defines and passages naming the entity link out to."""
        return (CARD, normalize_tag(self.name))

    @property
    def spellings(self) -> frozenset[str]:
        """Its name and aliases as they fold (`normalize_tag`): what no other card may use."""
        return frozenset(normalize_tag(alias) for alias in (self.name, *self.aliases))


def card_id(name: str) -> str:
    """The passage id of the card named `name`."""
    return f"{CARD}:{normalize_tag(name)}"


def is_card(node: Node) -> bool:
    """Whether a stored passage is a card: its id is a card id and its kind `card` (a
    passage of the user's own with metadata `kind: card`, a flash card, is not one)."""
    return node.id.startswith(f"{CARD}:") and node.metadata.get("kind") == CARD


def _not(value: Any) -> str:
    """A refused value as an error shows it.  Unquoted in YAML, a date, yes/no or a number
    is read as a value of another type than text, so the message says so."""
    if isinstance(value, datetime.date):
        return f"not the date {value.isoformat()} (in YAML, quote it to keep it text)"
    if isinstance(value, (bool, int, float)):
        return f"not {value!r} (in YAML, quote it to keep it text)"
    return f"not {value!r}"


def _text(where: str, value: Any, *, limit: int | None = None) -> str:
    if not isinstance(value, str) or not normalize_tag(value):
        raise InvalidInputError(f"{where} must be non-empty text, {_not(value)}")
    if limit is not None and len(value) > limit:
        raise InvalidInputError(f"{where} is {len(value)} characters long; the limit is {limit}")
    check_utf8(where, value)  # refused when stored, after the ingest wrote the text
    control = next((char for char in value if _is_control(char)), None)
    if control is not None:  # no text names it, and a prompt would show it raw
        raise InvalidInputError(
            f"{where} {value.strip()!r} holds the control character U+{ord(control):04X}"
        )
    return " ".join(value.split())  # a name over two lines reads, and prints, as one


def _is_control(char: str) -> bool:
    """A control character other than white space (a tab or a line break folds to a space)."""
    return unicodedata.category(char) == "Cc" and not char.isspace()


def _value(where: str, value: Any) -> Value:
    if value == []:
        raise InvalidInputError(f"{where} is an empty list: give a value, or leave it out")
    items = value if isinstance(value, list) else [value]
    for item in items:
        if (
            not isinstance(item, (str, int, float, bool))
            or (isinstance(item, str) and not item.strip())
            or (isinstance(item, float) and not math.isfinite(item))
        ):
            raise InvalidInputError(
                f"{where} must be text, a number, true/false or a list of them, {_not(item)}"
            )
        if isinstance(item, str):
            check_utf8(where, item)
    return list(items) if isinstance(value, list) else value


def _facts(where: str, given: Any) -> tuple[Fact, ...]:
    """An attribute's history: a plain value, one `{value, chapter}`, or a list of those."""
    listed = given if isinstance(given, list) else [given]
    if not (isinstance(given, Mapping) or (listed and all(isinstance(x, Mapping) for x in listed))):
        return (Fact(_value(where, given)),)
    facts: list[Fact] = []
    for entry in listed:
        if not isinstance(entry, Mapping) or "value" not in entry or set(entry) - DATED:
            raise InvalidInputError(f"{where}: each dated value is {{value: …, chapter: N}}")
        chapter = entry.get("chapter")
        if chapter is not None:
            check_chapter(f"{where}: chapter", chapter)
        if any(fact.chapter == chapter for fact in facts):
            when = "without a chapter" if chapter is None else f"for chapter {chapter}"
            raise InvalidInputError(f"{where} has two values {when}")
        facts.append(Fact(_value(where, entry["value"]), chapter))
    return tuple(sorted(facts, key=lambda fact: -1 if fact.chapter is None else fact.chapter))


def _given(data: Mapping[str, Any], field: str, empty: Any) -> Any:
    """A card field's value, `empty` when missing or null (`kind:`): a false value of
    another type (`kind: no`, `aliases: off`, `description: 0`) is refused, not emptied."""
    value = data.get(field)
    return empty if value is None else value


def _alias(where: str, entry: Any) -> tuple[Any, int | None]:
    """One alias entry: a name, or `{name: …, chapter: N}` for a name held from chapter N."""
    if not isinstance(entry, Mapping):
        return entry, None
    if "name" not in entry or set(entry) - DATED_ALIAS:
        raise InvalidInputError(f"{where}a dated alias is {{name: …, chapter: N}}")
    chapter = entry.get("chapter")
    if chapter is not None:
        check_chapter(f"{where}alias {entry['name']!r}: chapter", chapter)
    return entry["name"], chapter


def _aliases(where: str, given: Any, *, stored: bool) -> list[tuple[str, int | None]]:
    """A card's aliases with the chapter each holds from (None: always): a list of names
    and dated names, or one name.  In new input (not `stored`), a name holding a list
    separator (`aliases: 悟空, 行者`, or `[悟空，行者]` typed with a Chinese comma) is
    refused: it would be one alias that no text names, shown exactly like two.  In a list a
    comma may be part of a name ("Smith, John").  A stored card was checked by the rules of
    its write, and is read as it is."""
    separators = () if stored else LIST_SEPARATORS + ((",",) if isinstance(given, str) else ())
    listed = [given] if isinstance(given, str) else given
    if not isinstance(listed, list):
        raise InvalidInputError(f"{where}aliases must be a list of names")
    aliases = [
        (_text(f"{where}alias", name, limit=MAX_NAME), chapter)
        for name, chapter in (_alias(where, entry) for entry in listed)
    ]
    for alias, _ in aliases:
        separator = next((char for char in separators if char in alias), None)
        if separator is not None:
            raise InvalidInputError(
                f"{where}alias {alias!r} holds the list separator {separator!r}: "
                "give one name per alias, as aliases: [name, other name]"
            )
    return aliases


def card_from_mapping(data: Any, source: str = "", *, stored: bool = False) -> Card:
    """A validated card from its fields (a card file's front matter, a tool call, or a
    `stored` card passage's metadata)."""
    where = f"{source}: " if source else ""
    if not isinstance(data, Mapping):
        raise InvalidInputError(f"{where}a card is a mapping of {', '.join(FIELDS)}")
    unknown = sorted(str(key) for key in data if key not in FIELDS)
    if unknown:
        fields = ", ".join(FIELDS)
        raise InvalidInputError(f"{where}unknown card field {unknown[0]!r}; use {fields}")
    name = _text(f"{where}name", data.get("name"), limit=MAX_NAME)
    if not stored and normalize_tag(name).startswith(f"{CARD}:"):  # its id: another card's
        raise InvalidInputError(f"{where}a card's name may not start with '{CARD}:': {name!r}")
    aliases = _aliases(where, _given(data, "aliases", []), stored=stored)
    kind = _given(data, "kind", "")
    description = _given(data, "description", "")
    for field, text in (("kind", kind), ("description", description)):
        if not isinstance(text, str):
            raise InvalidInputError(f"{where}{field} must be text, {_not(text)}")
        check_utf8(f"{where}{field}", text)
    attributes = _given(data, "attributes", {})
    if not isinstance(attributes, Mapping):
        raise InvalidInputError(f"{where}attributes must be a mapping of name to value")
    checked = tuple(
        (_text(f"{where}attribute name", key), _facts(f"{where}attribute {key}", value))
        for key, value in attributes.items()
    )
    unique: dict[str, tuple[str, int | None]] = {normalize_tag(name): (name, None)}
    for alias, chapter in aliases:  # spellings that fold alike are one name
        unique.setdefault(normalize_tag(alias), (alias, chapter))
    listed = list(unique.values())[1:]
    return Card(
        name,
        kind.strip(),
        tuple(alias for alias, _ in listed),
        tuple((alias, chapter) for alias, chapter in listed if chapter is not None),
        checked,
        description.strip(),
        source,
    )


def check_names(cards: Iterable[Card], stored: Iterable[Card] = ()) -> list[Card]:
    """Every card, `stored` then `cards`, or a one-line error when one of `cards` shares a
    name or an alias with another card: cards are told apart by identity, not by name,
    since two files may declare the very same name.  Stored cards that share one are let
    be (two writers racing can leave a store so, `card_store.awrite_cards`): refusing every
    later write over them would leave the store unwritable."""
    owner: dict[str, Card] = {}
    kept = list(stored)
    for card in kept:
        for spelling in card.spellings:
            owner.setdefault(spelling, card)
    listed = list(cards)
    for card in listed:
        for alias in (card.name, *card.aliases):
            other = owner.setdefault(normalize_tag(alias), card)
            if other is not card:
                raise InvalidInputError(_clash(card, alias, other))
    return [*kept, *listed]


def _clash(card: Card, alias: str, other: Card) -> str:
    """The one-line error for `card` naming `alias`, which `other` owns; the card is named
    when the alias is not its name (a file may list several cards)."""
    where = f" ({other.source})" if other.source else " (a card of no file)"
    if card.source and normalize_tag(alias) != normalize_tag(card.name):
        return (
            f"{card.source}: {card.name!r} has the alias {alias!r}, which already names "
            f"{other.name!r}{where}"
        )
    return f"{card.source or card.name}: {alias!r} already names {other.name!r}{where}"


def _scalar(value: Scalar) -> str:
    """A value as the card gives it: true/false as YAML and JSON write them, not Python."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _join(items: Sequence[Scalar]) -> str:
    texts = [_scalar(item) for item in items]
    return ("、" if any(is_cjk(char) for text in texts for char in text) else ", ").join(texts)


def _shown(value: Value) -> str:
    return _join(value) if isinstance(value, list) else _scalar(value)


def fact_as_of(facts: Sequence[Fact], chapter: int | None) -> Fact | None:
    """The value that holds in `chapter` (the latest dated one when None), if any does."""
    holding = [f for f in facts if f.chapter is None or chapter is None or f.chapter <= chapter]
    return holding[-1] if holding else None


def aliases_as_of(card: Card, chapter: int | None) -> list[str]:
    """The aliases the entity holds in `chapter` (every one when None)."""
    since = dict(card.alias_chapters)
    return [
        alias
        for alias in card.aliases
        if chapter is None or alias not in since or since[alias] <= chapter
    ]


def alias_entries(card: Card, chapter: int | None = None) -> list[str | dict[str, Any]]:
    """The aliases held in `chapter` (every one when None) as a card file writes them: a
    name, or `{name, chapter}` for one that holds from a chapter on.  What is read back
    this way can be written back without losing the dates."""
    since = dict(card.alias_chapters)
    return [
        {"name": alias, "chapter": since[alias]} if alias in since else alias
        for alias in aliases_as_of(card, chapter)
    ]


def _heading(card: Card, aliases: Sequence[str]) -> str:
    kind = f"{card.kind}; " if card.kind else ""
    also = f"also {_join(aliases)}" if aliases else ""
    inside = f"{kind}{also}".rstrip("; ")
    return f"{card.name} ({inside})" if inside else card.name


def render_card(card: Card, as_of_chapter: int | None = None) -> str:
    """The card as a prompt shows it: per attribute the value that holds in `as_of_chapter`
    (the latest when None) and the aliases held by then; attributes with no value yet are
    left out."""
    lines = [_heading(card, aliases_as_of(card, as_of_chapter))]
    for name, facts in card.attributes:
        fact = fact_as_of(facts, as_of_chapter)
        if fact is not None:
            lines.append(f"{name}: {_shown(fact.value)}")
    if card.description:
        lines.append(card.description)
    return "\n".join(lines)


def card_history(card: Card) -> str:
    """The card with every value and alias and the chapter it holds from: the stored,
    embedded text."""
    since = dict(card.alias_chapters)
    aliases = [
        alias + (f" (chapter {since[alias]})" if alias in since else "") for alias in card.aliases
    ]
    lines = [_heading(card, aliases)]
    for name, facts in card.attributes:
        shown = [
            _shown(f.value) + ("" if f.chapter is None else f" (chapter {f.chapter})")
            for f in facts
        ]
        lines.append(f"{name}: {'; '.join(shown)}")
    if card.description:
        lines.append(card.description)
    return "\n".join(lines)


def _dated(fact: Fact) -> dict[str, Any]:
    return {"value": fact.value} | ({} if fact.chapter is None else {"chapter": fact.chapter})


def card_metadata(card: Card) -> dict[str, Any]:
    """The card's fields as passage metadata (no `chapter`: a card is of every chapter)."""
    return {
        "kind": CARD,
        "name": card.name,
        "entity_kind": card.kind,
        "aliases": alias_entries(card),
        "attributes": {name: [_dated(fact) for fact in facts] for name, facts in card.attributes},
        "description": card.description,
        "source": card.source,
    } | ({FILE: card.file} if card.file else {})


def card_from_node(node: Node) -> Card:
    """The card a stored card passage holds."""
    data = node.metadata
    fields = {
        "name": data.get("name"),
        "kind": data.get("entity_kind"),
        "aliases": data.get("aliases"),
        "attributes": data.get("attributes"),
        "description": data.get("description"),
    }
    file = data.get(FILE)
    try:
        card = card_from_mapping(fields, str(data.get("source", "")), stored=True)
    except InvalidInputError as error:
        remedy = (
            f"ingest {inline(file)} again"
            if isinstance(file, str) and file
            else f"it has no card file: delete it (graphstore delete --id {inline(node.id)})"
        )
        raise InvalidInputError(
            f"the stored card {inline(node.id)} was changed outside graphstore: {error}; {remedy}"
        ) from None
    return replace(card, file=file) if isinstance(file, str) else card


def card_mentions(cards: Iterable[Card]) -> MentionLinkExtractor | None:
    """Links out to the card of every entity a text names, by name or alias (None when
    there are no cards)."""
    names = {alias: card.name for card in cards for alias in (card.name, *card.aliases)}
    return MentionLinkExtractor(names, kind=CARD, direction="out") if names else None


def card_node(card: Card, mentions: MentionLinkExtractor) -> Node:
    """A card as a passage: it defines its tag and links out to the other cards it names."""
    text = card_history(card)
    links = mentions.extract_titled(text, card.name)
    return Node(card.id, text, card_metadata(card), frozenset(links))
