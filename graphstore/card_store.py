"""Cards in a store: listing them, and writing a set of them linked to each other.

An ingest plans its cards before it writes anything: the cards already stored (less the
stale ones: recorded from files within the card folder ingested that are gone, or that it
read and that no longer declare them) and the new ones must not share a name or alias, and
together they are the names every passage of the ingest is linked by.  Stored cards are
matched to the folder by the file each records, not by their source names, which are
relative to whatever root they were ingested from.  Writing comes last, after the text
passages; a card passage links out to the other cards it names.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from extractors.mentions import MentionLinkExtractor
from extractors.normalize import normalize_tag
from graphstore.card_files import CardFolder, read_cards
from graphstore.cards import (
    CARD,
    Card,
    card_from_node,
    card_id,
    card_mentions,
    card_node,
    check_names,
    is_card,
)
from graphstore.errors import CorruptRowError, InvalidInputError
from graphstore.file_identity import file_identities, file_identity
from graphstore.ingest import (
    IngestReport,
    PassageLinker,
    ingest,
    ingest_root,
    source_name,
    text_linker,
    unchanged_since,
)
from graphstore.nodes import Node
from graphstore.recorded_files import (
    file_scopes,
    is_gone,
    owned_elsewhere,
    recorded_within,
    stale,
)
from graphstore.splitting import FILE
from graphstore.store import GraphStore, Query
from graphstore.strategy import MAX_K

MAX_SCENE_CARDS = MAX_K
"""Cards a prompt considers: the ones nearest to the scene, when a world has more."""


async def astored_cards(store: GraphStore) -> list[Card]:
    """Every card in the store that can be read (a scan of the ids: for ingests, not for
    queries).  A card row changed outside graphstore (a row that cannot be read, card fields
    that are not a card's) is left out, so that it stops no ingest: an ingest of its card
    file writes it again, `delete --id` removes it."""
    return _valid_cards(await _card_rows(store))


def _valid_cards(nodes: Iterable[Node]) -> list[Card]:
    """The cards of card rows `nodes`, but those whose fields are no card's."""
    cards = []
    for node in nodes:
        with suppress(InvalidInputError):
            cards.append(card_from_node(node))
    return cards


async def _card_rows(store: GraphStore) -> list[Node]:
    """The readable rows of the cards (their metadata says so) in the store."""
    ids = [node_id for node_id in await store.anode_ids() if node_id.startswith(f"{CARD}:")]
    return [node for node in await _readable(store, sorted(ids)) if is_card(node)]


async def _readable(store: GraphStore, ids: list[str]) -> list[Node]:
    """The stored nodes of `ids` but those whose rows cannot be read (`CorruptRowError`)."""
    try:
        return await store.aget(ids)
    except CorruptRowError:
        nodes: list[Node] = []
        for node_id in ids:
            with suppress(CorruptRowError):
                nodes.extend(await store.aget([node_id]))
        return nodes


async def acard_ids(store: GraphStore) -> set[str]:
    """The ids of the cards in the store whose rows can be read: cards are counted apart
    from passages, which `StoreStats.nodes` counts with them; on the embedded backend a row
    that cannot be read is in neither count but in `StoreStats.corrupt_rows`."""
    return {node.id for node in await _card_rows(store)}


async def anearest_cards(store: GraphStore, query: Query) -> list[Card]:
    """The cards nearest to `query`, best first (at most `MAX_SCENE_CARDS`); a card row
    whose fields were changed outside graphstore into no card's is left out."""
    hits = await store.asimilarity_search(query, k=MAX_SCENE_CARDS, filter={"kind": CARD})
    return _valid_cards(hit.node for hit in hits if is_card(hit.node))


async def aget_card(store: GraphStore, node_id: str) -> Card | None:
    """The card with this id, if stored."""
    nodes = await store.aget([node_id])
    return card_from_node(nodes[0]) if nodes and is_card(nodes[0]) else None


async def afind_card(store: GraphStore, name: str, *, by_alias: bool = True) -> Card | None:
    """The stored card `name` names: by its name, its id (`card:…`, as a search returns it,
    in any case) or, `by_alias`, one of its aliases (a scan of the store's ids)."""
    names = [name]
    if normalize_tag(name).startswith(f"{CARD}:"):
        names.append(name.strip()[len(CARD) + 1 :])
    for given in names:
        card = await aget_card(store, card_id(given))
        if card is not None:
            return card
    if not by_alias:
        return None
    wanted = {card_id(given) for given in names}
    cards = await astored_cards(store)
    return next((c for c in cards if wanted & {card_id(n) for n in (c.name, *c.aliases)}), None)


@dataclass(frozen=True)
class CardPlan:
    """What an ingest of cards will write and remove, checked before anything is."""

    cards: list[Card]
    """The cards to write."""
    known: list[Card]
    """Every card the store will hold: what passages are linked to."""
    stale: dict[str, str]
    """Stored cards recorded from files within the folder ingested that are gone or no
    longer declare them: their ids and recorded files."""
    new_ids: frozenset[str] = frozenset()
    """The ids of the cards to write that the store did not hold when planned."""

    def mentions(self) -> MentionLinkExtractor | None:
        """The mention extractor over every known card's names."""
        return card_mentions(self.known)

    def as_read(self, unchanged: Collection[str]) -> CardPlan:
        """This plan without the cards of files written again since they were read (not in
        `unchanged`, `ingest.unchanged_since`): it neither writes the cards it read from such
        a file nor removes the stale cards of one that still exists.  Another ingest may have
        stored the file's new cards; the next ingest of the file brings the store up to it."""
        cards = [card for card in self.cards if not card.file or card.file in unchanged]
        stale = {
            card_id: file
            for card_id, file in self.stale.items()
            if file in unchanged or is_gone(file)
        }
        return replace(self, cards=cards, stale=stale)


def _replaceable(stored: Card, card: Card, read: Collection[str]) -> bool:
    """Whether `card` may replace the stored card of its name: one recorded from the same
    file, from a file that is gone (moved) or that this ingest read (it no longer declares
    the card, which moved to another file), or from the same source name: an agent's
    `put_card` (no source) over an agent's card, or a card stored before cards recorded
    their file, whose file cannot be told.  So an agent's card replaces only an agent's
    card or one whose file is gone (the next ingest of that file would silently undo the
    agent's change), and a card file does not replace an agent's card (its aliases and
    attributes would be lost without a word)."""
    if stored.file:
        return stored.file in read or not owned_elsewhere(stored.file, card.file)
    return stored.source == card.source


def _taken(card: Card, other: Card) -> str:
    """The one-line error for `card` when the stored card of its name is not replaceable."""
    where = f"{other.source} ({other.file})" if other.file else other.source
    if card.source and not other.source:
        return (
            f"{card.source}: a card named {card.name!r} is already stored by an agent "
            f"(put_card); delete it first (graphstore delete --id {other.id!r}) to keep it "
            "in this file"
        )
    if card.source:
        return (
            f"{card.source}: a card named {card.name!r} is already stored from {where}; "
            "rename one of them"
        )
    return (
        f"the card {card.name!r} is kept in {where}: change it there and ingest it again "
        "(an ingest of that file would undo a change made here)"
    )


async def aplan_cards(
    store: GraphStore,
    cards: Sequence[Card],
    scopes: Sequence[str] = (),
    read: Collection[str] = (),
) -> CardPlan:
    """Check `cards` against the stored ones (a name or alias owned twice is a one-line
    error) and find the stale cards: those recorded from files within `scopes` (see
    `graphstore.recorded_files.file_scopes`) that are gone or were `read` (the recorded
    paths of the files the ingest read) and no longer declare them.  A stored card without
    the record is never stale: nothing says which folder it came from.

    A card from a file replaces the stored card of its name when `_replaceable`; a stored
    card from another file that still exists is a one-line error, not silently replaced."""
    new = {card.id for card in cards}
    rows = await _card_rows(store)
    every = _valid_cards(rows)
    stored = {card.id: card for card in every}
    for card in cards:
        other = stored.get(card.id)
        if other is not None and not _replaceable(other, card, read):
            raise InvalidInputError(_taken(card, other))
    files = {node.id: node.metadata.get(FILE) for node in rows}
    recorded = {card_id: file for card_id, file in files.items() if isinstance(file, str)}
    within = recorded_within(recorded, scopes)  # the cards with invalid fields too
    gone = {card_id: within[card_id] for card_id in stale(within, new, set(read))}
    kept = [card for card in every if card.id not in new and card.id not in gone]
    gone |= _displaced(kept, cards, read)
    kept = [card for card in kept if card.id not in gone]
    fresh = frozenset(card.id for card in cards if card.id not in stored)
    return CardPlan(list(cards), check_names(cards, kept), gone, fresh)


def _displaced(
    stored: Sequence[Card], cards: Sequence[Card], read: Collection[str]
) -> dict[str, str]:
    """The stored cards, kept in files, that share an alias (or name) with one of `cards`
    and that it may replace (`_replaceable`: their file is gone, or no longer declares
    them), by id with their file.  A card of a gone file gave up its name to a new card but
    kept its aliases, so the new card was refused, naming a file that no longer exists."""
    owners = {spelling: card for card in cards for spelling in card.spellings}
    displaced = {}
    for card in stored:
        rival = next((owners[name] for name in card.spellings if name in owners), None)
        if rival is not None and card.file and _replaceable(card, rival, read):
            displaced[card.id] = card.file
    return displaced


async def awrite_cards(store: GraphStore, plan: CardPlan) -> int:
    """Store the plan's cards, linked to the cards they name; remove its stale cards and
    return how many were removed.

    The plan was checked against the cards stored when it was made, but another process
    (a second agent's `put_card`, an ingest) may have stored a card of the same alias since:
    both passed their checks, and the store held two owners of one name.  So the cards are
    checked again once written, and a new card that now shares a name with another is taken
    out again, with the one-line error its plan would have met (two racing for one name may
    both be refused; neither is half-stored)."""
    mentions = plan.mentions()
    if plan.cards and mentions is not None:
        cards = [card_node(card, mentions) for card in plan.cards]
        await store.aadd_nodes(cards, reuse_embeddings=True)
        await _check_written(store, plan)
    return await store.adelete(list(plan.stale)) if plan.stale else 0


async def _check_written(store: GraphStore, plan: CardPlan) -> None:
    """Refuse, and remove, the plan's new cards that share a name or alias with a card
    another writer stored meanwhile (`awrite_cards`)."""
    if not plan.new_ids:
        return
    planned = {card.id for card in plan.known} | plan.stale.keys()  # stale: removed next
    written = [card for card in plan.cards if card.id in plan.new_ids]
    others = [card for card in _valid_cards(await _card_rows(store)) if card.id not in planned]
    try:
        check_names(written, others)
    except InvalidInputError:
        await store.adelete([card.id for card in written])
        raise


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
    a bad file leaves the store as it was; the cards recorded from files within the folder
    that are gone, or that no longer declare them, are removed (all of them when the folder
    is gone or holds no card file: refused only when no card was stored from it).  A card
    file written again since it was read is left as the store has it, neither its cards
    written nor its stale ones removed (`CardPlan.as_read`).  Card sources are named as
    files are, relative to `root`; each card records its file's absolute path.
    """
    if not paths and cards_folder is None:
        raise InvalidInputError("give files or folders to ingest, or a folder of cards")
    base = ingest_root(root)
    folder = CardFolder([], [], [], {})
    scopes: list[str] = []
    if cards_folder:
        folder = read_cards(
            cards_folder, lambda path: source_name(path, base), store.storage.local_files
        )
        scopes = file_scopes(cards_folder)
    cards = folder.cards
    plan = await aplan_cards(store, cards, scopes, folder.files)
    if cards_folder and not folder.files and not plan.stale:
        raise InvalidInputError(_nothing_in(cards_folder))
    mentions = plan.mentions()
    linked = [*linkers, text_linker(mentions)] if mentions is not None else list(linkers)
    report = IngestReport(files=0, passages=0)
    card_files = [str(path) for path in folder.versions]
    paths = [path for path in paths if not _is_card_file(path, card_files)]
    if paths:
        report = await ingest(
            store, paths, linkers=linked, root=root, card_files=card_files, **options
        )
    plan = plan.as_read(unchanged_since(folder.versions))
    removed = await awrite_cards(store, plan)
    skipped = sorted({*report.skipped, *folder.skipped})
    return replace(report, cards=len(plan.cards), removed_cards=removed, skipped=skipped)


def _is_card_file(path: Path, card_files: Sequence[str]) -> bool:
    """Whether a path given to ingest as text is one of the card files the ingest reads as
    cards, not also as text (a folder holding them is ingested but for them)."""
    return os.path.isfile(path) and file_identity(path) in file_identities(card_files)


def _nothing_in(cards_folder: Path) -> str:
    """Why a card folder with no card file, and no card stored from it, is refused."""
    if not os.path.lexists(cards_folder):
        return f"{cards_folder} does not exist"
    return f"no card files (.md, .yaml) in {cards_folder}"
