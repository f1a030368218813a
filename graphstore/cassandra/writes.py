"""The write path: each node in one logged batch, its tag rows placed by `layout`.

Per `upsert` call: one wave of reads (where the nodes' previous rows are, by `IN`, and the
bucket counts of the hot tags being written); one wave of logged batches, one per node (its
node row, its tag rows where `plan_rows` puts them, deletes of rows it no longer has or that
move), beside the size checks of small tags due for one; then, only when hot rows were
written or removed, the directory's counts (`HotTags.count_hot_rows`).  Small tags carry no
vector index, so a tag row costs a plain write; a request costs the client more than a row,
so reads are grouped.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from cassandra.query import BatchStatement, BatchType

from graphstore.cassandra.hot_tags import HotTags
from graphstore.cassandra.layout import SMALL, RowPlan, placements, plan_rows
from graphstore.cassandra.queries import (
    DELETE_HOT,
    DELETE_NODE,
    DELETE_TAG,
    INSERT_HOT,
    INSERT_NODE,
    INSERT_TAG,
    SELECT_PLACEMENTS,
)
from graphstore.cassandra.rows import embedding_bytes, tag_map
from graphstore.cassandra.session import Requests
from graphstore.errors import StorageError
from graphstore.links import TagKey, decode_links, encode_links, incoming_tags, outgoing_tags
from graphstore.metadata import filter_terms
from graphstore.nodes import StoredNode


class Writer:
    """Upserts and deletes nodes with their tag rows (see the module docstring)."""

    def __init__(self, requests: Requests, hot: HotTags) -> None:
        self._requests = requests
        self._hot = hot
        self.small_as_vectors = False
        """Whether the small parts' embedding column is a vector (a store made before hot
        tags) rather than bytes."""

    async def _placements(self, node_ids: Sequence[str]) -> list[dict[TagKey, int] | None]:
        """Where each stored node's tag rows are (None for a node not stored)."""
        rows = await self._requests.run_in(SELECT_PLACEMENTS, node_ids)
        found = {
            node_id: placements(incoming_tags(decode_links(links)), tag_map(tag_buckets))
            for node_id, links, tag_buckets in rows
        }
        return [found.get(node_id) for node_id in node_ids]

    async def upsert(self, nodes: Sequence[StoredNode]) -> None:
        """Write `nodes` (distinct ids); raise the first failure after counting the rest."""
        wanted = {tag for stored in nodes for tag in incoming_tags(stored.node.links)}
        old, buckets = await asyncio.gather(
            self._placements([stored.node.id for stored in nodes]),
            self._hot.prepare_writes(wanted),
        )
        plans = [
            plan_rows(
                stored.node.id,
                incoming_tags(stored.node.links),
                previous or {},
                buckets,
                self._hot.layout,
            )
            for stored, previous in zip(nodes, old, strict=True)
        ]
        results, _ = await asyncio.gather(
            asyncio.gather(
                *(self._write(stored, plan) for stored, plan in zip(nodes, plans, strict=True)),
                return_exceptions=True,
            ),
            self._hot.check_sizes(checked_tags(nodes, plans, self._hot)),
        )
        written = [plan for plan, result in zip(plans, results, strict=True) if result is None]
        await self._hot.count_hot_rows(hot_rows_of(written))
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _write(self, stored: StoredNode, plan: RowPlan) -> None:
        node = stored.node
        vector = stored.embedding.astype(np.float32)
        outgoing = sorted(outgoing_tags(node.links))
        terms = sorted(filter_terms(node.metadata))
        batch = _logged_batch()
        for tag, place in sorted(plan.removed.items()):
            batch.add(*await self._delete_row(tag, place, node.id))
        insert_tag = await self._requests.prepared(INSERT_TAG)
        insert_hot = await self._requests.prepared(INSERT_HOT)
        small = vector if self.small_as_vectors else embedding_bytes(vector)
        for (kind, name), place in sorted(plan.rows.items()):
            if place == SMALL:
                batch.add(insert_tag, (kind, name, node.id, small, outgoing, terms))
            else:
                batch.add(insert_hot, (kind, name, place, node.id, vector, outgoing, terms))
        hot = {tag: place for tag, place in plan.rows.items() if place != SMALL}
        metadata = json.dumps(node.metadata, ensure_ascii=False)
        batch.add(
            await self._requests.prepared(INSERT_NODE),
            (node.id, node.text, metadata, encode_links(node.links), vector, outgoing, terms, hot),
        )
        try:
            await self._requests.execute(batch)
        except StorageError as error:
            if "too large" not in str(error).lower():
                raise
            raise StorageError(
                f"node {node.id!r} with {len(plan.rows)} incoming tags is too large for one "
                "batch; raise batch_size_fail_threshold in cassandra.yaml"
            ) from error

    async def delete(self, node_ids: Sequence[str]) -> int:
        """Remove nodes (distinct ids), each with its tag rows in one logged batch; return
        how many were stored."""
        placed = dict(zip(node_ids, await self._placements(node_ids), strict=True))
        stored = {node_id: rows for node_id, rows in placed.items() if rows is not None}
        await asyncio.gather(*(self._delete(node_id, rows) for node_id, rows in stored.items()))
        hot_rows: Counter[TagKey] = Counter()
        for rows in stored.values():
            hot_rows.update(tag for tag, place in rows.items() if place != SMALL)
        await self._hot.count_hot_rows({tag: -count for tag, count in hot_rows.items()})
        return len(stored)

    async def _delete(self, node_id: str, placed: Mapping[TagKey, int]) -> None:
        batch = _logged_batch()
        for tag, place in sorted(placed.items()):
            batch.add(*await self._delete_row(tag, place, node_id))
        batch.add(await self._requests.prepared(DELETE_NODE), (node_id,))
        await self._requests.execute(batch)

    async def _delete_row(
        self, tag: TagKey, place: int, node_id: str
    ) -> tuple[Any, tuple[Any, ...]]:
        if place == SMALL:
            return await self._requests.prepared(DELETE_TAG), (*tag, node_id)
        return await self._requests.prepared(DELETE_HOT), (*tag, place, node_id)


def _logged_batch() -> BatchStatement:
    """A batch applied whole or not at all, safe to retry (client timestamps)."""
    batch = BatchStatement(batch_type=BatchType.LOGGED)
    batch.is_idempotent = True
    return batch


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
