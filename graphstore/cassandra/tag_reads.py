"""Reading tags: small parts whole, hot buckets by ANN, both in one concurrent wave.

A wave of tags (one traversal step) reads the small parts of all its tags with one `IN`
query per kind and `IN_TAGS` tags on one node (a request per tag on a cluster, each routed to a
replica), which also returns each tag's static bucket count, and, at the
same time, runs the filtered ANN queries (`graphstore.cassandra.filters`) on every bucket of
the tags this storage already knows to be hot, with a read of their hot-row count.  A tag
found hot that was not known, or with more buckets than known, gets its other buckets
queried in a second wave.  Small rows are checked against the filter and ranked by exact
cosine here; bucket hits come ranked by SAI; the two are merged by similarity.

Because a small part is read whole, its size is known exactly, filter included: `search`
returns it, so a traversal needs no count for it.  A hot tag's size is its small part plus
the directory's count of its hot rows (without a filter; with one, `sizes` counts).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from graphstore.cassandra.filters import Branch, Plan
from graphstore.cassandra.hot_tags import HotTags, bucket_count
from graphstore.cassandra.queries import (
    COUNT_HOT,
    HOT_MEMBERS,
    READ_HOT_ROWS,
    READ_TAG_KEYS,
    READ_TAGS,
)
from graphstore.cassandra.rows import ranked_groups
from graphstore.cassandra.session import Requests
from graphstore.filters import EVERYTHING, Condition, FilterValues, holds
from graphstore.links import TagKey
from graphstore.nodes import TagHit, Vector, page_of

IN_TAGS = 10
"""Tags read by one `IN` query.  A node looks up the partitions of one `IN` one after the
other, and concurrent requests in parallel: on the shared test node 48 small tags took
6.4-7.3 ms in one request, 4.6-5.0 ms in chunks of 16 and 3.1-4.4 ms in chunks of 8-12."""

BucketHits = Callable[[Vector, int, Condition, tuple[str, str, int]], Awaitable[list[TagHit]]]
"""The `k` hits of one bucket `(kind, tag, bucket)` nearest a query that pass a filter."""
Planner = Callable[[Condition], Awaitable[Plan]]
"""The queries of a filter (`filters.plan`, knowing the store's range columns)."""


def passes(where: Condition, row_terms: Any) -> bool:
    """Whether a row with this `filter_terms` column passes `where`."""
    return where == EVERYTHING or holds(where, FilterValues.of_terms(row_terms or ()))


def _best(hits: list[TagHit], k: int) -> list[TagHit]:
    """The `k` best hits by similarity (then id), each node once (a row caught mid-move
    between the small part and a bucket is found twice)."""
    best: dict[str, TagHit] = {}
    for hit in sorted(hits, key=lambda hit: (-hit.similarity, hit.id)):
        best.setdefault(hit.id, hit)
    return list(best.values())[:k]


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


class TagReads(NamedTuple):
    """What one wave of tag reads found: each tag's hits, in the order asked, and the
    sizes and pages (`nodes.page_of`) the reads counted, filter included."""

    hits: list[list[TagHit]]
    sizes: dict[TagKey, int]
    pages: dict[TagKey, int]


class TagReader:
    """Reads tags for one storage (see the module docstring)."""

    def __init__(
        self, requests: Requests, hot: HotTags, bucket_hits: BucketHits, planner: Planner
    ) -> None:
        self._requests = requests
        self._hot = hot
        self._bucket_hits = bucket_hits
        self._plan = planner

    async def search(
        self, tags: Sequence[TagKey], query: Vector, k: int, where: Condition
    ) -> TagReads:
        """The `k` nodes nearest to `query` under each tag passing `where`, every size the
        reads gave, and the pages of the tags read whole (small ones)."""
        found = {tag: _Tag() for tag in tags}
        known = {tag: self._hot.buckets(tag) for tag in found if self._hot.buckets(tag)}

        async def search_hot(tag: TagKey, buckets: int) -> None:
            """ANN on the tag's buckets not queried yet, and its hot-row count if not read."""
            state = found[tag]
            first, state.searched = state.searched, max(state.searched, buckets)
            queries = [
                self._bucket_hits(query, k, where, (*tag, bucket))
                for bucket in range(first, buckets)
            ]
            if state.hot_rows is None and where == EVERYTHING:
                rows, *pages = await asyncio.gather(
                    self._requests.run(READ_HOT_ROWS, tag), *queries
                )
                state.hot_rows = int(rows[0][0]) if rows else 0
            else:
                pages = list(await asyncio.gather(*queries))
            state.hits.extend(hit for page in pages for hit in page)

        await asyncio.gather(
            self._read_small(found, where),
            *(search_hot(tag, buckets) for tag, buckets in known.items()),
        )
        await asyncio.gather(
            *(
                search_hot(tag, state.buckets)
                for tag, state in found.items()
                if state.buckets > state.searched
            )
        )
        small = ranked_groups([found[tag].small for tag in tags], query, k)
        read = TagReads([], {}, {})
        for tag, small_hits in zip(tags, small, strict=True):
            state = found[tag]
            read.hits.append(_best(small_hits + state.hits, k) if state.hits else small_hits)
            if not state.buckets:
                read.sizes[tag] = len(state.small)
                read.pages[tag] = len({page_of(node_id) for node_id, _, _ in state.small})
            elif state.hot_rows is not None:
                read.sizes[tag] = len(state.small) + state.hot_rows
        return read

    async def _read_small(self, found: dict[TagKey, _Tag], where: Condition) -> None:
        """Every small part, by `IN` on one node (`kind = ? AND tag IN ?`, a request per kind
        and chunk of `IN_TAGS`)."""
        rows = await self._requests.run_keys(READ_TAGS, sorted(found), IN_TAGS)
        for kind, name, buckets, node_id, embedding, outgoing, terms in rows:
            state = found[(kind, name)]
            state.buckets = bucket_count(buckets)
            if node_id is not None and passes(where, terms):
                state.small.append((node_id, embedding, outgoing))
        for tag, state in found.items():
            self._hot.learn(tag, state.buckets)

    async def sizes(self, tags: Sequence[TagKey], where: Condition) -> dict[TagKey, int]:
        """How many nodes passing `where` link in to each tag: the small part read (keys
        only) and checked here, plus each hot tag's hot-row count (with a filter: a count
        per bucket and query of the filter's plan)."""
        small = await asyncio.gather(*(self._requests.run(READ_TAG_KEYS, tag) for tag in tags))
        sizes: dict[TagKey, int] = {}
        hot: dict[TagKey, int] = {}
        for tag, rows in zip(tags, small, strict=True):
            sizes[tag] = sum(
                1 for _, _, node_id, terms in rows if node_id is not None and passes(where, terms)
            )
            buckets = bucket_count(rows[0][1] if rows else None)
            self._hot.learn(tag, buckets)
            if buckets:
                hot[tag] = buckets
        counted = await asyncio.gather(
            *(self._hot_size(tag, buckets, where) for tag, buckets in hot.items())
        )
        for tag, count in zip(hot, counted, strict=True):
            sizes[tag] += count
        return sizes

    async def pages(self, tags: Sequence[TagKey], where: Condition) -> dict[TagKey, int]:
        """How many pages the nodes passing `where` under each tag belong to: the small
        part's keys and each hot bucket's members, read and counted here.  The buckets
        already known (a traversal's read of the tag learned them) are read together with
        the small part; a bucket the small part names beyond them, after it."""

        async def members(tag: TagKey) -> set[str]:
            known = self._hot.buckets(tag)
            rows, hot = await asyncio.gather(
                self._requests.run(READ_TAG_KEYS, tag), self._hot_members(tag, known, where)
            )
            found: set[str] = hot | {
                node_id
                for _, _, node_id, terms in rows
                if node_id is not None and passes(where, terms)
            }
            buckets = bucket_count(rows[0][1] if rows else None)
            self._hot.learn(tag, buckets)
            if buckets > known:
                found |= await self._hot_members(tag, buckets, where, first=known)
            return found

        counted = await asyncio.gather(*(members(tag) for tag in tags))
        return {
            tag: len({page_of(node_id) for node_id in ids})
            for tag, ids in zip(tags, counted, strict=True)
        }

    async def _hot_size(self, tag: TagKey, buckets: int, where: Condition) -> int:
        """Rows of a hot tag's buckets passing `where`: the directory's count unfiltered;
        else a COUNT per bucket when one exact query answers the filter, or the members of
        each query read and checked here."""
        if where == EVERYTHING:
            rows = await self._requests.run(READ_HOT_ROWS, tag)
            return int(rows[0][0]) if rows else 0
        planned = await self._plan(where)
        exact = planned.single_exact
        if exact is not None:
            counts = await asyncio.gather(
                *(
                    self._requests.run(COUNT_HOT, (*tag, bucket, *exact.values), exact.cql)
                    for bucket in range(buckets)
                )
            )
            return sum(int(rows[0][0]) for rows in counts)
        return len(await self._hot_members(tag, buckets, where, planned))

    async def _hot_members(
        self,
        tag: TagKey,
        buckets: int,
        where: Condition,
        planned: Plan | None = None,
        *,
        first: int = 0,
    ) -> set[str]:
        """The ids of a hot tag's rows passing `where`, each of its buckets from `first` on
        read by each query of the filter's plan."""
        if buckets <= first:
            return set()
        plan = planned or await self._plan(where)

        async def members(bucket: int, branch: Branch) -> set[str]:
            rows = await self._requests.run(HOT_MEMBERS, (*tag, bucket, *branch.values), branch.cql)
            return {node_id for node_id, terms in rows if branch.exact or passes(where, terms)}

        found = await asyncio.gather(
            *(members(b, branch) for b in range(first, buckets) for branch in plan.branches)
        )
        return set().union(*found)
