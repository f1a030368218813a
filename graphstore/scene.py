"""What a scene's context is made of: the cards of the entities in the scene and the
passages the search found, each as a cited entry.

The cards are those of the entities the scene names (by name or alias), then those the
search reached: a card it returned, or one named by a passage it returned, in the order the
search ranked them.  Passages are cited with source, chapter and id and with how they were
reached (`via card 孙悟空`); cards with their file and the chapter they are shown as of.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeGuard

from graphstore.cards import Card, card_from_node, card_mentions, is_card, render_card
from graphstore.inline import inline
from graphstore.nodes import Hit
from graphstore.sections import Entry


def citation(hit: Hit) -> str:
    """Where a passage comes from: source, place in the text and passage id, each on one
    line (`inline`).  The place is the whole section path (`Chapter 3 › At the harbour`:
    the innermost heading alone did not say which chapter), else the chapter number of a
    passage without headings (an agent's `put_passages`)."""
    metadata = hit.node.metadata
    parts = [str(metadata.get("source", ""))]
    section, chapter = metadata.get("section"), metadata.get("chapter")
    if isinstance(section, list) and section:
        parts.append(" › ".join(inline(str(heading)) for heading in section))
    elif isinstance(chapter, int) and not isinstance(chapter, bool):
        parts.append(f"chapter {chapter}")
    parts.append(hit.node.id)
    return " · ".join(inline(part) for part in parts if part)


def provenance(hit: Hit) -> str:
    """How the search reached a passage."""
    if hit.via is None and hit.raised_by:
        kind, tag = hit.raised_by[-1]
        return f"similar to the scene, raised via {inline(kind)} {inline(tag)}"
    if hit.via is None:
        return "similar to the scene"
    kind, tag = hit.via
    return f"via {inline(kind)} {inline(tag)}"


def passage_entry(hit: Hit) -> Entry:
    """A found passage as a prompt entry, placed by source, position and chapter for story
    order."""
    metadata = hit.node.metadata
    position, chapter = metadata.get("position"), metadata.get("chapter")
    return Entry(
        hit.node.id,
        hit.node.text,
        citation(hit),
        provenance(hit),
        str(metadata.get("source", "")),
        position if _is_integer(position) else 0,
        chapter if _is_integer(chapter) else None,
    )


def _is_integer(value: object) -> TypeGuard[int]:
    """Whether a metadata value is an integer (a bool is not one)."""
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class SceneCard:
    """A card in a scene's context and why it is there."""

    card: Card
    provenance: str


def scene_cards(cards: Sequence[Card], scene: str, hits: Sequence[Hit]) -> list[SceneCard]:
    """The cards of the entities in a scene: named in `scene`, then reached by the search
    (`hits`, best first: a card hit, or the cards a passage names).  `cards` are the
    candidates nearest to the scene first; that order breaks ties."""
    mentions = card_mentions(cards)
    rank = {card.tag[1]: index for index, card in enumerate(cards)}
    by_tag = {card.tag[1]: card for card in cards}
    found: dict[str, SceneCard] = {}

    def named(text: str, why: str) -> None:
        tags = mentions.mentioned(text) if mentions is not None else set()
        for tag in sorted(tags, key=rank.__getitem__):
            found.setdefault(by_tag[tag].id, SceneCard(by_tag[tag], why))

    named(scene, "named in the scene")
    for hit in hits:
        if is_card(hit.node):
            card = card_from_node(hit.node)
            # over its own tag: from a passage naming it (it read "card:花果山 (via card 花果山)")
            why = "named in a passage found" if hit.via == card.tag else provenance(hit)
            found.setdefault(card.id, SceneCard(by_tag.get(card.tag[1], card), why))
        else:
            named(hit.node.text, f"named in {inline(hit.node.id)}")
    return list(found.values())


def card_entry(chosen: SceneCard, position: int, as_of_chapter: int | None) -> Entry:
    """A scene card as a prompt entry, rendered as of `as_of_chapter` (latest when None);
    an agent's card, kept in no file, is cited by its id alone (it read `card · card:…`)."""
    card = chosen.card
    parts = [inline(card.source), inline(card.id)] if card.source else [inline(card.id)]
    if as_of_chapter is not None:
        parts.append(f"as of chapter {as_of_chapter}")
    text = render_card(card, as_of_chapter)
    return Entry(card.id, text, " · ".join(parts), chosen.provenance, "", position)
