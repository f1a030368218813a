"""Where a tag row lives: a tag's small part, read whole, or one bucket of its hot part.

Every tag starts small: its rows go to `<table>_tags`, partitioned by `(kind, tag)`, with
no vector index, and `search_tag` reads the partition whole and ranks it here.  A vector
index costs every write that feeds it, so only tags too large to read whole have one: once a
tag's small part holds `hot_threshold` rows, the tag turns hot, and its later rows go to
`<table>_hot`, partitioned by `(kind, tag, bucket)` and SAI-indexed, where `search_tag` runs
one partition-restricted ANN query per bucket.  Rows never move because a tag grew: the
small part stays where it is (and is still read whole), and new buckets only receive new
rows.  A re-upserted node is placed afresh, so re-ingesting moves it to where a new node
would go.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from graphstore.errors import InvalidInputError
from graphstore.links import TagKey

SMALL = -1
"""The placement of a row in its tag's small part (hot rows are placed in bucket 0, 1, …)."""


@dataclass(frozen=True)
class TagLayout:
    """When a tag turns hot and how many buckets it gets.

    The defaults come from the shared test node (benchmarks/README.md): reading 128 rows of
    384-d embeddings costs about as much as one partition-restricted ANN query, and a bucket
    of 20,000 such rows is a ~30 MiB partition.
    """

    hot_threshold: int = 128
    """Rows in a tag's small part at which the tag turns hot."""
    bucket_rows: int = 20_000
    """Hot rows per bucket before the tag gets more buckets."""
    check_every: int = 64
    """How a writer learns that a small tag reached `hot_threshold`, without reading its
    size at every write (reading a small part costs as much as writing a row): it checks
    when the rows it wrote to the tag itself reach a multiple of `hot_threshold`, and at one
    written row in `check_every` (chosen by hash, so every process agrees), which bounds the
    overshoot to about that many rows when many processes share a tag."""
    refresh_seconds: float = 10.0
    """How often a writing process reloads the directory of hot tags: for that long it may go
    on writing rows of a tag another process made hot to the tag's small part."""

    def __post_init__(self) -> None:
        for name in ("hot_threshold", "bucket_rows", "check_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInputError(f"{name} must be a positive integer, got {value!r}")
        if not self.refresh_seconds >= 0:
            raise InvalidInputError(f"refresh_seconds must be >= 0, got {self.refresh_seconds!r}")

    def buckets_for(self, hot_rows: int) -> int:
        """How many buckets a tag with `hot_rows` rows in its hot part should have."""
        return max(1, -(-hot_rows // self.bucket_rows))

    def checks(self, tag: TagKey, node_id: str) -> bool:
        """Whether writing `node_id`'s row of a small `tag` should check the tag's size."""
        return self.check_every == 1 or _hash(tag[0], tag[1], node_id) % self.check_every == 0


def bucket_of(node_id: str, buckets: int) -> int:
    """The bucket of a node's row in a tag with `buckets` buckets: the same in every process."""
    return _hash(node_id) % buckets


def _hash(*parts: str) -> int:
    return zlib.crc32("\x1f".join(parts).encode("utf-8", "surrogatepass"))


@dataclass(frozen=True)
class RowPlan:
    """What writing one node does to its tag rows."""

    rows: dict[TagKey, int]
    """Where each of its incoming tags' rows goes: `SMALL` or a bucket."""
    removed: dict[TagKey, int]
    """Rows it had that go: tags it no longer links in to, and rows moving elsewhere."""
    hot_rows: dict[TagKey, int]
    """The change in each tag's count of hot rows (+1, -1; 0 for a move between buckets)."""
    checked: frozenset[TagKey]
    """Small tags whose size this write checks (`TagLayout.checks`)."""


def plan_rows(
    node_id: str,
    incoming: frozenset[TagKey],
    old: Mapping[TagKey, int],
    buckets: Mapping[TagKey, int],
    layout: TagLayout,
) -> RowPlan:
    """Place a node's tag rows (`buckets`: each tag's bucket count, 0 for small) given where
    its previous version's rows are (`old`; empty for a new node)."""
    rows = {
        tag: bucket_of(node_id, buckets.get(tag, 0)) if buckets.get(tag, 0) else SMALL
        for tag in incoming
    }
    removed = {tag: place for tag, place in old.items() if rows.get(tag) != place}
    hot_rows = {
        tag: (rows.get(tag, SMALL) != SMALL) - (old.get(tag, SMALL) != SMALL)
        for tag in rows.keys() | old.keys()
    }
    checked = frozenset(
        tag for tag, place in rows.items() if place == SMALL and layout.checks(tag, node_id)
    )
    return RowPlan(rows, removed, {tag: n for tag, n in hot_rows.items() if n}, checked)


def placements(
    incoming: frozenset[TagKey], tag_buckets: Mapping[TagKey, int] | None
) -> dict[TagKey, int]:
    """Where a stored node's rows are: its `tag_buckets` column says which are hot."""
    hot = tag_buckets or {}
    return {tag: hot.get(tag, SMALL) for tag in incoming}
