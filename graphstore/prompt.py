"""Passages for a writer's prompt: the default graph search, then a block within a budget.

A scene description retrieves the most relevant passages plus linked ones (the same
characters, the place, the object) through the default graph search.  The block is
deduplicated, kept within `budget` tokens (CJK-aware by default; any `str -> int` counter
can be plugged in), put in story order (by position within a source; sources in the order
of their best passage) and cites every passage with how it was reached, e.g. `via
entity:person 孙悟空`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableLambda

from graphstore.errors import InvalidInputError
from graphstore.nodes import Hit
from graphstore.store import GraphStore, run_sync
from graphstore.strategy import check_count

TokenCounter = Callable[[str], int]

CJK = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]"
)
WORD = re.compile(r"[^\W\d_]+|\d+|[^\w\s]", re.UNICODE)

DEFAULT_TEMPLATE = "[{number}] {citation} ({provenance})\n{text}"
PROMPT_K = 12
"""Passages searched for a prompt; the budget decides how many fit."""
DEFAULT_SEPARATOR = "\n\n"


def count_tokens(text: str) -> int:
    """A tokenizer-free estimate close to BPE counts: one per CJK character, about one per
    four letters of other words, one per punctuation mark."""
    cjk = len(CJK.findall(text))
    rest = CJK.sub(" ", text)
    return cjk + sum(max(1, math.ceil(len(piece) / 4)) for piece in WORD.findall(rest))


def citation(hit: Hit) -> str:
    """Where a passage comes from: source, section (chapter) and passage id."""
    metadata = hit.node.metadata
    parts = [str(metadata.get("source", ""))]
    section = metadata.get("section")
    if isinstance(section, list) and section:
        parts.append(str(section[-1]))
    parts.append(hit.node.id)
    return " · ".join(part for part in parts if part)


def provenance(hit: Hit) -> str:
    """How the search reached a passage."""
    if hit.via is None:
        return "similar to the scene"
    kind, tag = hit.via
    return f"via {kind} {tag}"


def story_order(hits: Sequence[Hit]) -> list[Hit]:
    """Hits grouped by source (the source of the best hit first), by position within one."""
    sources: dict[str, int] = {}
    for hit in hits:
        sources.setdefault(str(hit.node.metadata.get("source", "")), len(sources))

    def key(hit: Hit) -> tuple[int, int, str]:
        position = hit.node.metadata.get("position")
        return (
            sources[str(hit.node.metadata.get("source", ""))],
            position if isinstance(position, int) else 0,
            hit.node.id,
        )

    return sorted(hits, key=key)


@dataclass(frozen=True)
class PromptContext:
    """The assembled block and what went into it."""

    text: str
    hits: list[Hit]
    tokens: int
    budget: int


def assemble(
    hits: Sequence[Hit],
    *,
    budget: int,
    count: TokenCounter = count_tokens,
    template: str = DEFAULT_TEMPLATE,
    separator: str = DEFAULT_SEPARATOR,
) -> PromptContext:
    """Fit `hits` (best first) into `budget` tokens, drop duplicates, order them as in the story.

    Passages are taken in the order given (the MMR selection order) while they fit; a passage
    too long for the remaining budget is skipped so a shorter later one can still fit.
    The budget covers the whole rendered block, citations and separators included.
    """
    chosen: list[Hit] = []
    seen_ids: set[str] = set()
    seen_texts: set[str] = set()
    for hit in hits:
        key = " ".join(hit.node.text.split())
        if hit.node.id in seen_ids or key in seen_texts:
            continue
        trial = [*chosen, hit]
        if count(render(story_order(trial), template, separator)) <= budget:
            chosen = trial
            seen_ids.add(hit.node.id)
            seen_texts.add(key)
    ordered = story_order(chosen)
    text = render(ordered, template, separator)
    return PromptContext(text, ordered, count(text), budget)


def render(hits: Sequence[Hit], template: str, separator: str) -> str:
    """Fill `template` (fields: number, citation, provenance, text, id) for each hit."""
    try:
        return separator.join(
            template.format(
                number=number,
                citation=citation(hit),
                provenance=provenance(hit),
                text=hit.node.text.strip(),
                id=hit.node.id,
            )
            for number, hit in enumerate(hits, 1)
        )
    except (KeyError, IndexError, ValueError) as error:
        raise InvalidInputError(f"bad prompt template: {error!r}") from error


async def awriter_context(
    store: GraphStore,
    scene: str,
    *,
    budget: int = 1500,
    k: int = PROMPT_K,
    filter: dict[str, Any] | None = None,
    count: TokenCounter = count_tokens,
    template: str = DEFAULT_TEMPLATE,
    **options: Any,
) -> PromptContext:
    """Retrieve `k` passages for `scene` with the default graph search (`GraphStore.search`;
    `options` override its settings) and assemble them within `budget`."""
    check_count("budget", budget, 1, 1_000_000)
    hits = await store.asearch(scene, k=k, filter=filter, **options)
    return assemble(hits, budget=budget, count=count, template=template)


def writer_context_runnable(store: GraphStore, **options: Any) -> RunnableLambda[str, str]:
    """A LangChain Runnable: scene description in, context block out (for use in a chain)."""

    async def run(scene: str) -> str:
        return (await awriter_context(store, scene, **options)).text

    def run_blocking(scene: str) -> str:
        return run_sync(run(scene))

    return RunnableLambda(run_blocking, afunc=run)
