"""The write path: each node in one logged batch, its tag rows placed by `layout`.

Per `upsert` call: one wave of reads (where the nodes' previous rows are and their old filter
terms, by `IN`, and the bucket counts of the hot tags being written); one wave of logged
batches, one per node (its node row first, its tag rows where `plan_rows` puts them, deletes
of rows it no longer has or that move, and the range columns of the node row and its bucket
rows, `graphstore.cassandra.ranges`), beside the size checks of small tags due for one; then,
only when hot rows were written or removed, the directory's counts
(`HotTags.count_hot_rows`).  Small tags carry no vector index and no range columns, so a
tag row costs a plain write; a request costs the client more than a row, so reads are
grouped.

A node's batch is applied atomically: stale tag rows deleted, current tag rows and the node
row written.  Its size is about the text plus tags x dimension x 4 bytes, which passes
Cassandra's default `batch_size_fail_threshold` (50 KiB) at ~8 tags of 1536-d vectors; the
local test node raises it to 1 MiB, and production nodes need the same.  Batches over
`batch_size_warn_threshold` (5 KiB) are expected: the server's warning about them, which the
driver logs on `cassandra.protocol`, is dropped there (`server_warnings`).  An upsert reads where a
node's old rows are first, so two processes writing the same node at the same time may leave
a stale tag row (`check` reports it).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from graphstore.cassandra.hot_tags import HotTags
from graphstore.cassandra.layout import SMALL, RowPlan, placements, plan_rows
from graphstore.cassandra.queries import (
    DELETE_HOT,
    DELETE_NODE,
    DELETE_TAG,
    INSERT_HOT,
    INSERT_NODE,
    INSERT_TAG,
    SCAN_HOT,
    SCAN_TAG_KEYS,
    SELECT_PLACEMENTS,
)
from graphstore.cassandra.ranges import Cells, RangeColumns, cells, updates, wanted
from graphstore.cassandra.rows import embedding_bytes, encode_tags, tag_map
from graphstore.cassandra.schema import OUTGOING_PARTS
from graphstore.cassandra.session import Requests
from graphstore.errors import InvalidInputError, StorageError
from graphstore.filters import FilterValues
from graphstore.links import TagKey, decode_links, encode_links, incoming_tags, outgoing_tags
from graphstore.metadata import filter_terms
from graphstore.nodes import Node, StoredNode

SELECT_SETTING = "SELECT value FROM system_views.settings WHERE name = ?"
SIZE_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def batch_limit(requests: Requests) -> int | None:
    """The node's `batch_size_fail_threshold` in bytes, the most one node's logged batch may
    hold (`check_batch_size`); None when the server does not say (a role that may not
    read `system_views`, a value in another form): a batch over it is then refused by the
    server alone."""
    try:
        rows = requests.execute_now(SELECT_SETTING, ("batch_size_fail_threshold",))
    except Exception:  # an unknown limit, not a store that cannot open
        return None
    found = re.fullmatch(r"(\d+)\s*(B|KiB|MiB|GiB)", str(rows[0][0]).strip()) if rows else None
    return int(found[1]) * SIZE_UNITS[found[2]] if found else None


def check_batch_size(node: Node, dimension: int | None, limit: int | None) -> None:
    """Refuse a node whose logged batch is sure to exceed `limit` (`batch_limit`), counted
    low: its text and metadata, and a vector for its row and each of its tag rows (what else
    a batch holds is left out), so only a node certain to fail is refused before the first
    write; one near the limit is refused by its own write (`Writer._write`)."""
    if limit is None:
        return
    rows = 1 + len(incoming_tags(node.links))
    metadata = json.dumps(node.metadata, ensure_ascii=False)
    size = len(node.text.encode()) + len(metadata.encode()) + rows * 4 * (dimension or 0)
    if size > limit:
        raise InvalidInputError(
            f"node {node.id!r} needs at least {size:,} bytes in one write, above the store's "
            f"limit of {limit:,} (Cassandra's batch_size_fail_threshold): split the passage, "
            "or raise the threshold in cassandra.yaml"
        )


Stored = tuple[dict[TagKey, int], FilterValues]
"""Of a stored node: where its tag rows are (`layout.placements`) and its filter values."""


class Writer:
    """Upserts and deletes nodes with their tag rows (see the module docstring)."""

    def __init__(self, requests: Requests, hot: HotTags, ranges: RangeColumns) -> None:
        self._requests = requests
        self._hot = hot
        self._ranges = ranges
        self.small_as_vectors = False
        """Whether the small parts' embedding column is a vector (a store made before hot
        tags) rather than bytes."""
        self.outgoing_sets: frozenset[str] = frozenset()
        """The tables (`nodes`, `tags`, `hot`) whose `outgoing` column is a set (a store
        made before outgoing tags were text: `Tables.outgoing_sets`)."""

    async def _stored(self, node_ids: Sequence[str]) -> dict[str, Stored]:
        """Where each stored node's tag rows are, and its filter terms (absent: not stored)."""
        rows = await self._requests.run_keys(
            SELECT_PLACEMENTS, [(node_id,) for node_id in node_ids]
        )
        stored: dict[str, Stored] = {}
        unreadable: dict[str, FilterValues] = {}
        for node_id, links, tag_buckets, terms in rows:
            values = FilterValues.of_terms(terms or ())
            try:
                tags = incoming_tags(decode_links(links))
            except (ValueError, TypeError):  # changed outside graphstore (`check` names it)
                unreadable[node_id] = values
                continue
            stored[node_id] = (placements(tags, tag_map(tag_buckets)), values)
        if unreadable:
            found = await self._tag_rows_of(unreadable.keys())
            for node_id, values in unreadable.items():
                stored[node_id] = (found[node_id], values)
        return stored

    async def _tag_rows_of(self, node_ids: Iterable[str]) -> dict[str, dict[TagKey, int]]:
        """Where the tag rows of nodes whose `links` cannot be read are, from scans of both tag
        tables: a repair, rare and slow, so that writing such a node again or deleting it
        leaves none behind (its links used to end both in a JSON traceback)."""
        found: dict[str, dict[TagKey, int]] = {node_id: {} for node_id in node_ids}
        small, hot = await asyncio.gather(
            self._requests.run(SCAN_TAG_KEYS, ()), self._requests.run(SCAN_HOT, ())
        )
        for kind, tag, node_id in small:
            if node_id in found:
                found[node_id][(kind, tag)] = SMALL
        for kind, tag, bucket, node_id, *_ in hot:
            if node_id in found:
                found[node_id][(kind, tag)] = bucket
        return found

    async def upsert(self, nodes: Sequence[StoredNode]) -> None:
        """Write `nodes` (distinct ids); raise the first failure after counting the rest."""
        values = [FilterValues.of_metadata(stored.node.metadata) for stored in nodes]
        usable = await self._ranges.ensure(set().union(*map(wanted, values)))
        tags = {tag for stored in nodes for tag in incoming_tags(stored.node.links)}
        old, buckets = await asyncio.gather(
            self._stored([stored.node.id for stored in nodes]), self._hot.prepare_writes(tags)
        )
        plans, filled = [], []
        for stored, node_values in zip(nodes, values, strict=True):
            previous, old_values = old.get(stored.node.id, ({}, None))
            layout = self._hot.layout
            incoming = incoming_tags(stored.node.links)
            plans.append(plan_rows(stored.node.id, incoming, previous, buckets, layout))
            found = cells(node_values, usable)
            if old_values is not None:  # clear the range columns of values no longer held
                before = wanted(old_values) & self._ranges.known
                found = {name: None for column in before for name in (column.lo, column.hi)} | found
            filled.append(found)
        writes = zip(nodes, plans, filled, strict=True)
        results, _ = await asyncio.gather(
            asyncio.gather(*(self._write(*write) for write in writes), return_exceptions=True),
            self._hot.check_sizes(checked_tags(nodes, plans, self._hot)),
        )
        written = [plan for plan, result in zip(plans, results, strict=True) if result is None]
        await self._hot.count_hot_rows(hot_rows_of(written))
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _write(self, stored: StoredNode, plan: RowPlan, filled: Cells) -> None:
        """One node in one logged batch (`filled`: its range columns)."""
        node = stored.node
        vector = stored.embedding.astype(np.float32)
        tags = sorted(outgoing_tags(node.links))
        encoded = encode_tags(tags)
        outgoing = {
            part: tags if part in self.outgoing_sets else encoded for part in OUTGOING_PARTS
        }
        terms = sorted(filter_terms(node.metadata))
        hot = {tag: place for tag, place in plan.rows.items() if place != SMALL}
        metadata = json.dumps(node.metadata, ensure_ascii=False)
        batch = self._requests.batch()
        # The node row first: the batch is routed by its first statement's partition.
        links = encode_links(node.links)
        node_row = (node.id, node.text, metadata, links, vector, outgoing["nodes"], terms, hot)
        batch.add(await self._requests.prepared(INSERT_NODE), node_row)
        for tag, place in sorted(plan.removed.items()):
            batch.add(*await row_delete(self._requests, tag, place, node.id))
        insert_tag = await self._requests.prepared(INSERT_TAG)
        insert_hot = await self._requests.prepared(INSERT_HOT)
        small = vector if self.small_as_vectors else embedding_bytes(vector)
        for (kind, name), place in sorted(plan.rows.items()):
            if place == SMALL:
                batch.add(insert_tag, (kind, name, node.id, small, outgoing["tags"], terms))
            else:
                row = (kind, name, place, node.id, vector, outgoing["hot"], terms)
                batch.add(insert_hot, row)
        for template, bound in updates(node.id, hot, filled):
            batch.add(await self._requests.prepared(template), bound)
        try:
            await self._requests.execute(batch)
        except StorageError as error:
            message = str(error).lower()
            if "too large" not in message and "exceeds allowed maximum" not in message:
                raise
            raise StorageError(
                f"node {node.id!r} ({len(node.text.encode())} bytes of text, "
                f"{len(plan.rows)} incoming tags) is too large for one batch; raise "
                "batch_size_fail_threshold (above 16 MiB also native_transport_max_message_size)"
                " in cassandra.yaml, or split the passage"
            ) from error

    async def delete(self, node_ids: Sequence[str]) -> int:
        """Remove nodes (distinct ids), each with its tag rows in one logged batch; return
        how many were stored."""
        stored = {node_id: rows for node_id, (rows, _) in (await self._stored(node_ids)).items()}
        await asyncio.gather(*(self._delete(node_id, rows) for node_id, rows in stored.items()))
        hot_rows: Counter[TagKey] = Counter()
        for rows in stored.values():
            hot_rows.update(tag for tag, place in rows.items() if place != SMALL)
        await self._hot.count_hot_rows({tag: -count for tag, count in hot_rows.items()})
        return len(stored)

    async def _delete(self, node_id: str, placed: Mapping[TagKey, int]) -> None:
        batch = self._requests.batch()
        batch.add(await self._requests.prepared(DELETE_NODE), (node_id,))
        for tag, place in sorted(placed.items()):
            batch.add(*await row_delete(self._requests, tag, place, node_id))
        await self._requests.execute(batch)


async def row_delete(
    requests: Requests, tag: TagKey, place: int, node_id: str
) -> tuple[Any, tuple[Any, ...]]:
    """The statement and values deleting `node_id`'s row of `tag` at `place` (`SMALL` or a
    bucket)."""
    if place == SMALL:
        return await requests.prepared(DELETE_TAG), (*tag, node_id)
    return await requests.prepared(DELETE_HOT), (*tag, place, node_id)


def checked_tags(
    nodes: Sequence[StoredNode], plans: Sequence[RowPlan], hot: HotTags
) -> dict[TagKey, set[str]]:
    """The small tags these writes check (`TagLayout.check_every`), each with the nodes the
    writes put there."""
    writing: dict[TagKey, set[str]] = {}
    for stored, plan in zip(nodes, plans, strict=True):
        for tag, place in plan.rows.items():
            if place == SMALL:
                writing.setdefault(tag, set()).add(stored.node.id)
    sampled = {tag for plan in plans for tag in plan.checked}
    return {
        tag: ids for tag, ids in writing.items() if hot.wrote_small(tag, len(ids)) or tag in sampled
    }


def hot_rows_of(plans: Sequence[RowPlan]) -> Mapping[TagKey, int]:
    """The net change in hot rows per tag over several plans."""
    total: Counter[TagKey] = Counter()
    for plan in plans:
        total.update(plan.hot_rows)
    return total
