"""Cards in a store: listing them, and writing a set of them linked to each other.

An ingest plans its cards before it writes anything: the cards already stored (less those
of the folders ingested again that the new files no longer hold) and the new ones must not
share a name or alias, and together they are the names every passage of the ingest is
linked by.  Writing comes last, after the text passages; a card passage links out to the
other cards it names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from extractors.mentions import MentionLinkExtractor
from graphstore.card_files import CardFolder, read_cards
from graphstore.cards import CARD, Card, card_from_node, card_mentions, card_node, check_names
from graphstore.errors import InvalidInputError
from graphstore.ingest import (
    IngestReport,
    PassageLinker,
    covers,
    ingest,
    ingest_root,
    scope,
    source_name,
    text_linker,
)
from graphstore.store import GraphStore, Query
from graphstore.strategy import MAX_K

MAX_SCENE_CARDS = MAX_K
"""Cards a prompt considers: the ones nearest to the scene, when a world has more."""


async def astored_cards(store: GraphStore) -> list[Card]:
    """Every card in the store (a scan of the ids: for ingests, not for queries)."""
    ids = [node_id for node_id in await store.anode_ids() if node_id.startswith(f"{CARD}:")]
    nodes = await store.aget(sorted(ids))
    return [card_from_node(node) for node in nodes if node.metadata.get("kind") == CARD]


async def anearest_cards(store: GraphStore, query: Query) -> list[Card]:
    """The cards nearest to `query`, best first (at most `MAX_SCENE_CARDS`)."""
    hits = await store.asimilarity_search(query, k=MAX_SCENE_CARDS, filter={"kind": CARD})
    return [card_from_node(hit.node) for hit in hits]


async def aget_card(store: GraphStore, card_id: str) -> Card | None:
    """The card with this id, if stored."""
    nodes = await store.aget([card_id])
    return card_from_node(nodes[0]) if nodes and nodes[0].metadata.get("kind") == CARD else None


@dataclass(frozen=True)
class CardPlan:
    """What an ingest of cards will write and remove, checked before anything is."""

    cards: list[Card]
    """The cards to write."""
    known: list[Card]
    """Every card the store will hold: what passages are linked to."""
    stale: list[str]
    """Ids of stored cards from the folders ingested that their files no longer hold."""

    def mentions(self) -> MentionLinkExtractor | None:
        """The mention extractor over every known card's names."""
        return card_mentions(self.known)


async def aplan_cards(
    store: GraphStore, cards: Sequence[Card], scopes: Sequence[str] = ()
) -> CardPlan:
    """Check `cards` against the stored ones (a name or alias owned twice is a one-line
    error) and find the stale cards within `scopes` (see `graphstore.ingest.scope`).

    A card replaces the stored card of its name when that card came from the same file,
    from a folder being ingested (where its file may have moved) or from no file (an
    agent's `put_card`); a stored card from a file elsewhere is a one-line error, not
    silently replaced."""

    def ingested(source: str) -> bool:
        """Whether a stored card's file lies in a folder being ingested."""
        return source != "" and any(covers(s, source) for s in scopes)

    new = {card.id for card in cards}
    every = await astored_cards(store)
    sources = {card.id: card.source for card in every}
    for card in cards:
        other = sources.get(card.id)
        replaceable = not other or other == card.source or ingested(other)
        if card.source and not replaceable:
            raise InvalidInputError(
                f"{card.source}: a card named {card.name!r} is already stored from {other}; "
                "rename one of them"
            )
    stored = [card for card in every if card.id not in new]
    stale = [c.id for c in stored if ingested(c.source)]
    kept = [card for card in stored if card.id not in stale]
    return CardPlan(list(cards), check_names([*kept, *cards]), stale)


async def awrite_cards(store: GraphStore, plan: CardPlan) -> int:
    """Store the plan's cards, linked to the cards they name; remove its stale cards and
    return how many were removed."""
    mentions = plan.mentions()
    if plan.cards and mentions is not None:
        await store.aadd_nodes([card_node(card, mentions) for card in plan.cards])
    return await store.adelete(plan.stale) if plan.stale else 0


async def aingest_with_cards(
    store: GraphStore,
    paths: Sequence[Path],
    cards_folder: Path | None,
    *,
    linkers: Sequence[PassageLinker],
    root: Path | None = None,
    **options: Any,
) -> IngestReport:
    """Ingest files (`graphstore.ingest.ingest`, with `options`) and a folder of cards.

    Cards are read and checked first, then the files are ingested with one more linker:
    mentions of every card the store will hold.  Cards are written last, so a bad card or
    a bad file leaves the store as it was; cards of the folder whose files are gone are
    removed.  Card sources are named as files are, relative to `root`.
    """
    if not paths and cards_folder is None:
        raise InvalidInputError("give files or folders to ingest, or a folder of cards")
    base = ingest_root(root)
    folder = (
        read_cards(cards_folder, lambda path: source_name(path, base))
        if cards_folder
        else CardFolder([], [])
    )
    cards = folder.cards
    plan = await aplan_cards(store, cards, [scope(cards_folder, base)] if cards_folder else [])
    mentions = plan.mentions()
    linked = [*linkers, text_linker(mentions)] if mentions is not None else list(linkers)
    report = IngestReport(files=0, passages=0)
    if paths:
        report = await ingest(store, paths, linkers=linked, root=root, **options)
    removed = await awrite_cards(store, plan)
    skipped = sorted({*report.skipped, *folder.skipped})
    return replace(report, cards=len(cards), removed=report.removed + removed, skipped=skipped)
