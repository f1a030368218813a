"""The traversal engine: finds edges at query time through the `Storage` interface only.

Both searches remember which `(kind, tag)` pairs they have visited, so each tag is queried
once per search however many selected nodes link out to it, and the queries of one step run
concurrently under a bound.  `depth` means the same in both: the largest number of tag hops
between a root and a returned node.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from graphstore.links import TagKey, outgoing_tags
from graphstore.mmr import MmrSelector, Selection
from graphstore.nodes import Hit, StoredNode, TagHit, Vector
from graphstore.storage import Storage


@dataclass
class TraversalStats:
    """What a search cost: backend queries issued and candidates considered."""

    vector_searches: int = 0
    tag_queries: int = 0
    candidates: int = 0


@dataclass(frozen=True)
class _Reached:
    depth: int
    via: TagKey | None
    similarity: float
    outgoing: frozenset[TagKey]


class Traversal:
    """Runs searches against one storage with a bound on concurrent tag queries."""

    def __init__(self, storage: Storage, concurrency: int = 16) -> None:
        self.storage = storage
        self._concurrency = concurrency

    async def _search_tags(
        self,
        tags: Iterable[TagKey],
        query: Vector,
        adjacent_k: int,
        filter_terms: frozenset[str],
        stats: TraversalStats,
    ) -> list[tuple[TagKey, list[TagHit]]]:
        """Query every tag concurrently (at most `concurrency` at once), in sorted tag order."""
        ordered = sorted(tags)
        stats.tag_queries += len(ordered)
        gate = asyncio.Semaphore(self._concurrency)

        async def one(tag: TagKey) -> list[TagHit]:
            async with gate:
                return await self.storage.search_tag(tag, query, adjacent_k, filter_terms)

        results = await asyncio.gather(*(one(tag) for tag in ordered))
        return list(zip(ordered, results, strict=True))

    async def _hits(
        self,
        order: Sequence[str],
        reached: dict[str, _Reached],
        mmr_scores: dict[str, float] | None = None,
    ) -> list[Hit]:
        """Read the nodes of the result once, at the end, and attach how each was reached."""
        stored = {item.node.id: item for item in await self.storage.get(order)}
        mmr = mmr_scores or {}
        return [
            Hit(
                node=stored[node_id].node,
                similarity=reached[node_id].similarity,
                depth=reached[node_id].depth,
                via=reached[node_id].via,
                mmr_score=mmr.get(node_id),
            )
            for node_id in order
            if node_id in stored
        ]

    async def traversal_search(
        self,
        query: Vector,
        *,
        k: int,
        depth: int,
        adjacent_k: int,
        filter_terms: frozenset[str],
        stats: TraversalStats | None = None,
    ) -> list[Hit]:
        """Breadth-first from the `k` nearest nodes, up to `depth` hops, `adjacent_k` per tag.

        Returns every node reached, ordered by depth and then similarity to the query.
        """
        stats = stats if stats is not None else TraversalStats()
        stats.vector_searches += 1
        roots = await self.storage.search(query, k, filter_terms)
        reached = {
            root.stored.node.id: _Reached(
                0, None, root.similarity, outgoing_tags(root.stored.node.links)
            )
            for root in roots
        }
        visited: set[TagKey] = set()
        frontier = list(reached)
        for hop in range(1, depth + 1):
            tags = set().union(*(reached[node_id].outgoing for node_id in frontier)) - visited
            if not tags:
                break
            visited |= tags
            frontier = []
            for tag, tag_hits in await self._search_tags(
                tags, query, adjacent_k, filter_terms, stats
            ):
                for hit in tag_hits:
                    if hit.id not in reached:
                        reached[hit.id] = _Reached(hop, tag, hit.similarity, hit.outgoing)
                        frontier.append(hit.id)
        stats.candidates += len(reached)
        order = sorted(
            reached,
            key=lambda node_id: (reached[node_id].depth, -reached[node_id].similarity, node_id),
        )
        return await self._hits(order, reached)

    async def mmr_traversal_search(
        self,
        query: Vector,
        *,
        k: int,
        depth: int,
        fetch_k: int,
        adjacent_k: int,
        lambda_mult: float,
        score_threshold: float,
        filter_terms: frozenset[str],
        initial_roots: Sequence[str] = (),
        max_candidates_per_step: int,
        stats: TraversalStats | None = None,
    ) -> list[Hit]:
        """Select `k` nodes by MMR from the `fetch_k` nearest and the nodes reached from them.

        Each selected node at depth < `depth` has its unvisited outgoing tags queried
        (`adjacent_k` nearest per tag); of the nodes found, at most `max_candidates_per_step`
        new ones, the most similar to the query, join the pool.  A candidate found again by a
        shorter path takes the shorter depth, so it is expanded as a node at that depth.
        Nodes adjacent to `initial_roots` start at depth 1; the roots themselves are not
        returned.
        """
        stats = stats if stats is not None else TraversalStats()
        selector = MmrSelector(query, lambda_mult, score_threshold)
        reached: dict[str, _Reached] = {}
        visited: set[TagKey] = set()

        async def expand(tags: frozenset[TagKey], hop: int) -> None:
            fresh_tags = tags - visited
            visited.update(fresh_tags)
            found: dict[str, tuple[TagKey, TagHit]] = {}
            for tag, tag_hits in await self._search_tags(
                fresh_tags, query, adjacent_k, filter_terms, stats
            ):
                for hit in tag_hits:
                    known = reached.get(hit.id)
                    if known is not None:
                        if hop < known.depth:
                            reached[hit.id] = _Reached(hop, tag, known.similarity, known.outgoing)
                    elif hit.id not in found:
                        found[hit.id] = (tag, hit)
            best = sorted(found.values(), key=lambda pair: (-pair[1].similarity, pair[1].id))
            admit(best[:max_candidates_per_step], hop)

        def admit(pairs: Sequence[tuple[TagKey | None, TagHit]], hop: int) -> None:
            for via, hit in pairs:
                reached[hit.id] = _Reached(hop, via, hit.similarity, hit.outgoing)
            if pairs:
                selector.add(
                    [hit.id for _, hit in pairs], np.stack([hit.embedding for _, hit in pairs])
                )
                stats.candidates += len(pairs)

        if initial_roots:
            roots = await self.storage.get(list(initial_roots))
            for root in roots:
                reached[root.node.id] = _Reached(0, None, 0.0, frozenset())
            await expand(frozenset().union(*(outgoing_tags(r.node.links) for r in roots)), 1)
        if fetch_k > 0:
            stats.vector_searches += 1
            nearest = await self.storage.search(query, fetch_k, filter_terms)
            admit(
                [
                    (None, _as_tag_hit(item.stored, item.similarity))
                    for item in nearest
                    if item.stored.node.id not in reached
                ],
                0,
            )

        selections: list[Selection] = []
        while len(selections) < k:
            chosen = selector.pop_best()
            if chosen is None:
                break
            selections.append(chosen)
            node_depth = reached[chosen.id].depth
            if node_depth < depth:
                await expand(reached[chosen.id].outgoing, node_depth + 1)
        return await self._hits(
            [chosen.id for chosen in selections],
            reached,
            {chosen.id: chosen.mmr_score for chosen in selections},
        )


def _as_tag_hit(stored: StoredNode, similarity: float) -> TagHit:
    return TagHit(stored.node.id, stored.embedding, outgoing_tags(stored.node.links), similarity)
