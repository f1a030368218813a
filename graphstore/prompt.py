"""A writer's prompt for a scene: entity cards, then passages, within one token budget.

A scene description retrieves the most relevant passages plus linked ones (the same
characters, the place, the object) through the default graph search; the cards of the
entities the scene names or the search reaches come first (`graphstore.scene`).  The
block is deduplicated, kept within `budget` tokens (CJK-aware by default; any
`str -> int` counter can be plugged in) shared between the sections
(`graphstore.sections`), puts passages in story order (by position within a source;
sources by chapter, else in the order of their best passage) and cites every item with how it was
reached, e.g. `via entity:person 孙悟空`.  With `as_of_chapter`, nothing from a later
chapter is shown: no passage, no card value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from graphstore.blank import is_blank
from graphstore.card_store import anearest_cards
from graphstore.cards import is_card
from graphstore.chapters import as_of_filter, check_chapter
from graphstore.errors import InvalidInputError
from graphstore.inline import inline
from graphstore.nodes import Hit
from graphstore.scene import SceneCard, card_entry, passage_entry, scene_cards
from graphstore.sections import Section, TokenCounter, check_layout, fill
from graphstore.store import GraphStore, run_sync
from graphstore.strategy import (
    MAX_K,
    SEARCH_ARGUMENTS,
    Strategy,
    check_count,
    check_fraction,
    check_options,
)
from graphstore.utf8 import check_utf8

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableLambda

CJK = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]"
)
WORD = re.compile(r"[^\W\d_]+|\d+|[^\w\s]", re.UNICODE)

DEFAULT_TEMPLATE = "[{number}] {citation} ({provenance})\n{text}"
PROMPT_K = 12
"""Passages searched for a prompt; the budget decides how many fit."""
BUDGET = 1500
"""Tokens of a prompt's block by default."""
DEFAULT_SEPARATOR = "\n\n"
CARD_SHARE = 0.3
"""The cards' share of a prompt's budget by default; the passages get the rest."""


def count_tokens(text: str) -> int:
    """A tokenizer-free estimate close to BPE counts: one per CJK character, about one per
    four letters of other words, one per punctuation mark."""
    cjk = len(CJK.findall(text))
    rest = CJK.sub(" ", text)
    return cjk + sum(max(1, math.ceil(len(piece) / 4)) for piece in WORD.findall(rest))


@dataclass(frozen=True)
class PromptContext:
    """The assembled block and what went into it."""

    text: str
    hits: list[Hit]
    """The passages shown, in story order."""
    tokens: int
    budget: int
    cards: list[SceneCard] = field(default_factory=list)
    """The cards shown, in order."""
    needed: int | None = None
    """When cards or passages were found and none fit: the budget the shortest needs."""
    first_needed: tuple[str, int] | None = None
    """Then too: the id of the best card or passage found (the first) and the budget it
    needs, which may be more than `needed`."""
    card_left_out: tuple[str, int] | None = None
    """The best card (the first offered) when it is longer alone than the budget, and the
    budget it needs: only its peers (cards of the same provenance, such as the others the
    scene names) were offered in its place, no lesser card."""

    def check_shown(self) -> None:
        """A one-line error when something was found and nothing fit the budget, naming
        the budget the best card or passage needs, and the shortest's when that is less
        (the command line and MCP: an empty block with no reason looked like an empty
        store)."""
        if self.needed is None:
            return
        nothing = f"nothing fits in {self.budget} token{'s' if self.budget != 1 else ''}"
        if self.first_needed is None or self.first_needed[1] == self.needed:
            raise InvalidInputError(
                f"{nothing}: the shortest card or passage found needs {self.needed}; "
                f"give a budget of at least {self.needed}"
            )
        first, tokens = self.first_needed
        raise InvalidInputError(  # the shortest may be the one least to the point
            f"{nothing}: the best card or passage found, {inline(first)}, needs {tokens}; "
            f"give a budget of at least {tokens} (at {self.needed} only a shorter, lesser "
            "one fits)"
        )


def assemble(
    hits: Sequence[Hit],
    *,
    budget: int,
    count: TokenCounter = count_tokens,
    template: str = DEFAULT_TEMPLATE,
    separator: str = DEFAULT_SEPARATOR,
    cards: Sequence[SceneCard] = (),
    as_of_chapter: int | None = None,
    card_share: float = CARD_SHARE,
) -> PromptContext:
    """Fit `cards`, then `hits` (each best first), into `budget` tokens without duplicates.

    The cards section may use `card_share` of the budget and the passages the rest plus
    whatever the cards leave; cards that did not fit then get what the passages leave
    (`graphstore.sections`; `card_share` 0: no cards).  Cards are rendered as of
    `as_of_chapter`.  Without cards the block is the passages alone, untitled.  Passages are
    taken in the order given (the MMR selection order) while they fit, skipping one too
    long for what is left, and shown in story order.  The budget covers the whole rendered
    block, citations, titles and separators included.
    """
    check_layout(budget, template, separator)
    share = check_fraction("card_share", card_share)
    if as_of_chapter is not None:
        check_chapter("as_of_chapter", as_of_chapter)
    card_entries = [card_entry(card, n, as_of_chapter) for n, card in enumerate(cards)]
    passages = [hit for hit in hits if not is_card(hit.node)]
    filled = fill(
        [
            Section("Cards", share, card_entries),
            Section("Passages", 1 - share, [passage_entry(hit) for hit in passages]),
        ],
        budget=budget,
        count=count,
        template=template,
        separator=separator,
    )
    by_id = {hit.node.id: hit for hit in passages}
    by_card = {entry.id: card for entry, card in zip(card_entries, cards, strict=True)}
    shown_cards, shown_passages = filled.chosen
    return PromptContext(
        filled.text,
        [by_id[entry.id] for entry in shown_passages],
        count(filled.text),
        budget,
        [by_card[entry.id] for entry in shown_cards],
        filled.needed,
        filled.first,
        filled.left_out,
    )


WRITER_OPTIONS = frozenset(
    {"budget", "k", "filter", "count", "template", "as_of_chapter", "card_share"}
)
"""`awriter_context`'s own options; any other is a setting of its search."""


def check_writer_options(options: Mapping[str, Any]) -> None:
    """A one-line error for an option neither `awriter_context` nor its search takes,
    listing every one they do (the search alone listed its own, not `budget`)."""
    searched = {setting.name for setting in fields(Strategy)} | SEARCH_ARGUMENTS
    check_options(options, WRITER_OPTIONS | searched, "writer context option")


async def awriter_context(
    store: GraphStore,
    scene: str,
    *,
    budget: int = BUDGET,
    k: int = PROMPT_K,
    filter: dict[str, Any] | None = None,
    count: TokenCounter = count_tokens,
    template: str = DEFAULT_TEMPLATE,
    as_of_chapter: int | None = None,
    card_share: float = CARD_SHARE,
    **options: Any,
) -> PromptContext:
    """The context of a scene within `budget`: the cards of the entities in it, then the
    `k` passages the default graph search finds (`GraphStore.search`; `options` override
    its settings).

    With `as_of_chapter`, passages come only from that chapter and earlier (combined with
    `filter` by `$and`) and cards show the values that hold then.  `filter` applies to
    passages; cards are found by name (see `graphstore.scene`).
    """
    check_writer_options(options)
    check_layout(budget, template, DEFAULT_SEPARATOR)
    check_fraction("card_share", card_share)
    if not isinstance(scene, str) or is_blank(scene):
        raise InvalidInputError("the scene must be a non-empty string")
    check_utf8("the scene", scene)
    vector = await store.aembed_query(scene)
    hits = await _search(store, vector, k, as_of_filter(filter, as_of_chapter), options)
    cards = scene_cards(await anearest_cards(store, vector), scene, hits)
    return assemble(
        hits,
        budget=budget,
        count=count,
        template=template,
        cards=cards,
        as_of_chapter=as_of_chapter,
        card_share=card_share,
    )


async def _search(
    store: GraphStore,
    vector: list[float],
    k: int,
    metadata_filter: Mapping[str, Any] | None,
    options: dict[str, Any],
) -> list[Hit]:
    """The default graph search for `k` passages besides the cards it finds (a card is
    similar to any scene naming its entity): searched again for as many more as it found
    cards, until `k` passages are among the hits or nothing more is there."""
    wanted = check_count("k", k)
    while True:
        hits = await store.asearch(vector, k=wanted, filter=metadata_filter, **options)
        cards = sum(is_card(hit.node) for hit in hits)
        if len(hits) - cards >= k or len(hits) < wanted or wanted >= MAX_K:
            return hits
        wanted = min(MAX_K, wanted + cards)


def writer_context_runnable(store: GraphStore, **options: Any) -> RunnableLambda[str, str]:
    """A LangChain Runnable: scene description in, context block out (for use in a chain).

    LangChain's runnables are imported here, not with the module: importing them took
    longer than everything else a command line `prompt` or `search` does."""
    from langchain_core.runnables import RunnableLambda

    check_writer_options(options)  # a typo is refused here, not at the first scene

    async def run(scene: str) -> str:
        return (await awriter_context(store, scene, **options)).text

    def run_blocking(scene: str) -> str:
        return run_sync(run(scene))

    return RunnableLambda(run_blocking, afunc=run)
