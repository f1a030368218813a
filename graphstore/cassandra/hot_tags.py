"""What one storage knows of hot tags, and the only code that changes a tag's buckets.

What is true of a tag is kept in two places, both only ever added to:
- the static `buckets` column of its small part (`<table>_tags`): its hot rows are in
  buckets 0..B-1.  Readers get it with every small-part read, so a search never depends on
  what this cache remembers;
- its row in the directory `<table>_hot_tags` (one partition, one row per hot tag): a
  counter of the rows in its buckets, for growing B and for the tag's size.

Buckets are added as a set union, so two processes turning the same tag hot or growing it at
once add the same buckets, and no write ever lowers B: a row is never put in a bucket readers
do not query.  A writer whose knowledge is stale puts a row in the small part or in a bucket
below the current B, where readers find it too.  Counter increments are not idempotent, so
they are never retried: a failed one leaves the count off by that call's rows, which only
changes the tag's weight and which `check` reports and `repair` corrects.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterable, Mapping
from typing import Any

from graphstore.cassandra.layout import TagLayout
from graphstore.cassandra.queries import (
    ADD_BUCKETS,
    ADD_HOT_ROWS,
    READ_BUCKETS,
    READ_HOT_ROWS,
    READ_HOT_TAGS,
    READ_TAG_KEYS,
)
from graphstore.cassandra.session import Requests
from graphstore.links import TagKey

MAX_REMEMBERED = 100_000
"""Bucket counts remembered before the memory is cleared (and refilled by later reads)."""


def bucket_count(buckets: Iterable[int] | None) -> int:
    """B from the static `buckets` set (0: a small tag)."""
    return max(buckets, default=-1) + 1 if buckets else 0


class HotTags:
    """The hot tags one storage knows of (see the module docstring)."""

    def __init__(self, requests: Requests, layout: TagLayout) -> None:
        self._requests = requests
        self.layout = layout
        self._buckets: dict[TagKey, int] = {}
        self._hot_rows: dict[TagKey, int] = {}
        """The directory as last loaded, plus this process's own increments since."""
        self._small_rows: dict[TagKey, int] = {}
        """Rows this process wrote to each small tag (`wrote_small`)."""
        self._loaded_at = -math.inf

    def buckets(self, tag: TagKey) -> int:
        """The bucket count known for `tag` (0: small, or not known to be hot)."""
        return self._buckets.get(tag, 0)

    def learn(self, tag: TagKey, buckets: int) -> None:
        """Remember a bucket count read from the store (only ever raised)."""
        if buckets > self._buckets.get(tag, 0):
            if len(self._buckets) >= MAX_REMEMBERED:
                self._buckets.clear()
            self._buckets[tag] = buckets

    def wrote_small(self, tag: TagKey, rows: int) -> bool:
        """Count `rows` written to `tag`'s small part by this process; True when the count
        passes a multiple of `hot_threshold` (time to check the tag's size)."""
        if len(self._small_rows) >= MAX_REMEMBERED and tag not in self._small_rows:
            self._small_rows.clear()
        before = self._small_rows.get(tag, 0)
        self._small_rows[tag] = before + rows
        threshold = self.layout.hot_threshold
        return (before + rows) // threshold > before // threshold

    def forget(self) -> None:
        """Forget everything (after the tables were dropped)."""
        self._buckets.clear()
        self._hot_rows.clear()
        self._small_rows.clear()
        self._loaded_at = -math.inf

    async def prepare_writes(self, tags: Iterable[TagKey]) -> Mapping[TagKey, int]:
        """The bucket count to place each of `tags` by (0: the small part).

        Reloads the directory when older than `layout.refresh_seconds`, then reads the bucket count
        of the directory's tags among `tags` that it does not know yet.
        """
        now = time.monotonic()
        if now - self._loaded_at > self.layout.refresh_seconds:
            rows = await self._requests.run(READ_HOT_TAGS, ())
            self._hot_rows = {(kind, tag): int(count) for kind, tag, count in rows}
            self._buckets.clear()  # learn the growth other processes made
            self._loaded_at = now
        wanted = set(tags)
        unknown = sorted(tag for tag in wanted if tag in self._hot_rows and not self.buckets(tag))
        found = await asyncio.gather(*(self._requests.run(READ_BUCKETS, tag) for tag in unknown))
        for tag, rows in zip(unknown, found, strict=True):
            self.learn(tag, bucket_count(rows[0][0] if rows else None))
        return {tag: self.buckets(tag) for tag in wanted}

    async def check_sizes(self, writing: Mapping[TagKey, set[str]]) -> None:
        """Turn hot the tags (small when placed) whose small part, with the rows `writing`
        puts there (node ids per tag), reaches `hot_threshold`.  Run beside those writes:
        rows of other writers landing meanwhile only let the small part overshoot a little."""
        await asyncio.gather(
            *(self._promote_if_large(tag, ids) for tag, ids in sorted(writing.items()))
        )

    async def count_hot_rows(self, hot_rows: Mapping[TagKey, int]) -> None:
        """Count the hot rows written (+) and removed (-) in the directory, then give more
        buckets to the tags that outgrew theirs."""
        changed = {tag: delta for tag, delta in hot_rows.items() if delta}
        await asyncio.gather(*(self._count(tag, delta) for tag, delta in changed.items()))
        await asyncio.gather(
            *(self._grow_if_full(tag) for tag, delta in changed.items() if delta > 0)
        )

    async def _count(self, tag: TagKey, delta: int) -> None:
        statement = await self._requests.prepared(ADD_HOT_ROWS)
        bound = statement.bind((delta, *tag))
        bound.is_idempotent = False  # a retried increment would count twice
        await self._requests.execute(bound)
        if tag in self._hot_rows:
            self._hot_rows[tag] += delta

    async def _promote_if_large(self, tag: TagKey, writing: set[str]) -> None:
        rows: list[Any] = await self._requests.run(READ_TAG_KEYS, tag)
        buckets = bucket_count(rows[0][1] if rows else None)
        if buckets:  # another process made it hot already
            self.learn(tag, buckets)
            return
        stored = {row[2] for row in rows if row[2] is not None}
        if len(stored | writing) < self.layout.hot_threshold:
            return
        # Buckets first: readers query them from now on.  The directory entry second: until
        # it exists, other writers keep to the small part and a later check repeats this.
        await self._add_buckets(tag, 0, 1)
        await self._count(tag, 0)
        self._hot_rows.setdefault(tag, 0)

    async def _grow_if_full(self, tag: TagKey) -> None:
        buckets = self.buckets(tag)
        if not buckets or self._hot_rows.get(tag, 0) <= buckets * self.layout.bucket_rows:
            return
        rows = await self._requests.run(READ_HOT_ROWS, tag)
        hot_rows = int(rows[0][0]) if rows else 0
        self._hot_rows[tag] = hot_rows
        wanted = self.layout.buckets_for(hot_rows)
        if wanted > buckets:
            await self._add_buckets(tag, buckets, wanted)

    async def _add_buckets(self, tag: TagKey, first: int, end: int) -> None:
        await self._requests.run(ADD_BUCKETS, (set(range(first, end)), *tag))
        self.learn(tag, end)
