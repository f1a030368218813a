"""Reading tags: small parts whole, hot buckets by ANN, both in one concurrent wave.

A wave of tags (one traversal step) reads the small parts of all its tags with one `IN`
query (per `IN_TAGS` tags), which also returns each tag's static bucket count, and, at the
same time, runs a partition-restricted ANN query on every bucket of the
tags this storage already knows to be hot (with a read of their hot-row count).  A tag found
hot that was not known, or with more buckets than known, gets its other buckets queried in a
second wave.  Small rows are ranked by exact cosine here (filtered here too); bucket hits come
ranked by SAI; the two are merged by similarity.

Because a small part is read whole, its size is known exactly, filter included: `search`
returns it, so a traversal needs no count for it.  A hot tag's size is its small part plus
the directory's count of its hot rows (without a filter; with one, `sizes` counts).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from graphstore.cassandra.hot_tags import HotTags, bucket_count
from graphstore.cassandra.queries import (
    COUNT_HOT,
    READ_HOT_ROWS,
    READ_TAG_KEYS,
    READ_TAGS,
    READ_TAGS_FILTERED,
    SEARCH_HOT,
)
from graphstore.cassandra.rows import ranked, tag_hits
from graphstore.cassandra.session import Requests
from graphstore.links import TagKey
from graphstore.nodes import TagHit, Vector

IN_TAGS = 32
"""Tags read by one `IN` query: fewer requests, responses of bounded size."""


def passes(row_terms: Any, wanted: frozenset[str]) -> bool:
    """Whether a row's `filter_terms` column holds every wanted term."""
    return wanted <= frozenset(row_terms or ())


@dataclass(frozen=True)
class _Ask:
    """One wave's question: the query vector, how many hits per tag, the filter terms."""

    vector: Vector
    k: int
    terms: frozenset[str]

    @property
    def ordered(self) -> list[str]:
        return sorted(self.terms)


@dataclass
class _Tag:
    """What the reads of one tag found."""

    buckets: int = 0
    small: list[Any] = field(default_factory=list)
    """Small rows passing the filter: (node_id, embedding, outgoing)."""
    hits: list[TagHit] = field(default_factory=list)
    searched: int = 0
    """Buckets queried so far (0..searched-1)."""
    hot_rows: int | None = None


def _best(hits: list[TagHit], k: int) -> list[TagHit]:
    """The `k` best hits by similarity (then id), each node once (a row caught mid-move
    between the small part and a bucket is found twice)."""
    best: dict[str, TagHit] = {}
    for hit in sorted(hits, key=lambda hit: (-hit.similarity, hit.id)):
        best.setdefault(hit.id, hit)
    return list(best.values())[:k]


class TagReader:
    """Reads tags for one storage (see the module docstring)."""

    def __init__(self, requests: Requests, hot: HotTags) -> None:
        self._requests = requests
        self._hot = hot

    async def search(
        self, tags: Sequence[TagKey], query: Vector, k: int, terms: frozenset[str]
    ) -> tuple[list[list[TagHit]], dict[TagKey, int]]:
        """The `k` nodes nearest to `query` under each tag, and every size the reads gave."""
        ask = _Ask(query, k, terms)
        found = {tag: _Tag() for tag in tags}
        known = {tag: self._hot.buckets(tag) for tag in found if self._hot.buckets(tag)}
        await asyncio.gather(
            self._read_small(found, terms),
            *(self._search_hot(tag, found[tag], buckets, ask) for tag, buckets in known.items()),
        )
        await asyncio.gather(
            *(
                self._search_hot(tag, state, state.buckets, ask)
                for tag, state in found.items()
                if state.buckets > state.searched
            )
        )
        pages: list[list[TagHit]] = []
        sizes: dict[TagKey, int] = {}
        for tag in tags:
            state = found[tag]
            pages.append(_best(ranked(state.small, query, k) + state.hits, k))
            if not state.buckets:
                sizes[tag] = len(state.small)
            elif state.hot_rows is not None:
                sizes[tag] = len(state.small) + state.hot_rows
        return pages, sizes

    async def _read_small(self, found: dict[TagKey, _Tag], terms: frozenset[str]) -> None:
        """Every small part in one request per `IN_TAGS` tags: `kind IN ? AND tag IN ?` also
        looks up the (absent, cheap) partitions of the other pairs, which are skipped."""
        tags = sorted(found)
        chunks = [tags[i : i + IN_TAGS] for i in range(0, len(tags), IN_TAGS)]
        pages = await asyncio.gather(
            *(
                self._requests.run(
                    READ_TAGS_FILTERED if terms else READ_TAGS,
                    (sorted({kind for kind, _ in chunk}), sorted({name for _, name in chunk})),
                )
                for chunk in chunks
            )
        )
        for rows in pages:
            for kind, name, buckets, node_id, embedding, outgoing, *row_terms in rows:
                state = found.get((kind, name))
                if state is None:
                    continue
                state.buckets = bucket_count(buckets)
                if node_id is not None and (not terms or passes(row_terms[0], terms)):
                    state.small.append((node_id, embedding, outgoing))
        for tag, state in found.items():
            self._hot.learn(tag, state.buckets)

    async def _search_hot(self, tag: TagKey, state: _Tag, buckets: int, ask: _Ask) -> None:
        """ANN on buckets `state.searched`..`buckets`-1, and the hot-row count if not read."""
        first, state.searched = state.searched, max(state.searched, buckets)
        terms, vector = ask.ordered, ask.vector
        queries = [
            self._requests.run(
                SEARCH_HOT, (vector, *tag, bucket, *terms, vector, ask.k), len(terms)
            )
            for bucket in range(first, buckets)
        ]
        if state.hot_rows is None and not terms:
            rows, *pages = await asyncio.gather(self._requests.run(READ_HOT_ROWS, tag), *queries)
            state.hot_rows = int(rows[0][0]) if rows else 0
        else:
            pages = list(await asyncio.gather(*queries))
        state.hits.extend(hit for page in pages for hit in tag_hits(page))

    async def sizes(self, tags: Sequence[TagKey], terms: frozenset[str]) -> dict[TagKey, int]:
        """How many nodes with all `terms` link in to each tag: the small part read (keys
        only), plus each hot tag's hot-row count (with a filter: a count per bucket)."""
        small = await asyncio.gather(*(self._requests.run(READ_TAG_KEYS, tag) for tag in tags))
        ordered = sorted(terms)
        sizes: dict[TagKey, int] = {}
        hot: dict[TagKey, int] = {}
        for tag, rows in zip(tags, small, strict=True):
            sizes[tag] = sum(
                1
                for _, _, node_id, row_terms in rows
                if node_id is not None and passes(row_terms, terms)
            )
            buckets = bucket_count(rows[0][1] if rows else None)
            self._hot.learn(tag, buckets)
            if buckets:
                hot[tag] = buckets

        async def hot_count(tag: TagKey, buckets: int) -> int:
            if not ordered:
                rows = await self._requests.run(READ_HOT_ROWS, tag)
                return int(rows[0][0]) if rows else 0
            counts = await asyncio.gather(
                *(
                    self._requests.run(COUNT_HOT, (*tag, bucket, *ordered), len(ordered))
                    for bucket in range(buckets)
                )
            )
            return sum(int(rows[0][0]) for rows in counts)

        counted = await asyncio.gather(*(hot_count(tag, b) for tag, b in hot.items()))
        for tag, count in zip(hot, counted, strict=True):
            sizes[tag] += count
        return sizes
