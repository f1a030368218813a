"""`repair` for the Cassandra layout: what `check` reports that writing the passages again
does not mend.

- A tag row its node row does not place there (the node is gone, or no longer links in on
  the tag, or records the row elsewhere): left by two writers of one passage at once.  A
  write reads where the node's rows are from its node row, so it never finds such a row.
- A node whose rows are missing, stale (outgoing tags or filter terms) or in a bucket beyond
  its tag's buckets: it is written again from its stored row, which puts its rows where they
  belong and deletes those its node row records elsewhere.
- A hot tag whose directory count is off: a counter increment is never retried (it is not
  idempotent), so a node that crashed mid-write leaves the count off for good, and a search
  weighs the tag by that count.  The count is corrected by the difference to the rows in
  the tag's buckets.

A node row that cannot be read is left alone, with its rows (`check` says to ingest it
again).  Run while nothing else writes to the store: a row written between the scans and
the repair could be taken for a stray one, and a count for one off.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from graphstore.cassandra.check import directory_counts, place_name, tag_rows
from graphstore.cassandra.hot_tags import HotTags
from graphstore.cassandra.layout import SMALL, placements
from graphstore.cassandra.queries import (
    READ_HOT_TAGS,
    SCAN_HOT,
    SCAN_HOT_KEYS,
    SCAN_NODES,
    SCAN_TAGS,
)
from graphstore.cassandra.rows import tag_map, tag_set
from graphstore.cassandra.session import Requests
from graphstore.cassandra.writes import row_delete
from graphstore.errors import StorageError
from graphstore.filters import FilterValues
from graphstore.links import TagKey, incoming_tags
from graphstore.nodes import StoredNode
from graphstore.storage import decode_node

Row = tuple[TagKey, int, str]
"""A tag row's key: its tag, its place (`SMALL` or a bucket) and its node."""


def stray_rows_and_stale_nodes(
    node_rows: Sequence[Any], small_rows: Sequence[Any], hot_rows: Sequence[Any]
) -> tuple[list[Row], list[str]]:
    """From scans of the node table, the small parts and the buckets (as `check` reads
    them): the tag rows to delete, and the nodes to write again (see the module docstring)."""
    placed: dict[str, dict[TagKey, int]] = {}
    carried: dict[str, tuple[frozenset[TagKey], frozenset[str]]] = {}
    unreadable = set()
    stale: set[str] = set()
    for node_id, links, outgoing, terms, tag_buckets, metadata in node_rows:
        try:
            node = decode_node(node_id, "", metadata, links)
        except StorageError:
            unreadable.add(node_id)
            continue
        placed[node_id] = placements(incoming_tags(node.links), tag_map(tag_buckets))
        carried[node_id] = (tag_set(outgoing), frozenset(terms or ()))
        if carried[node_id][1] != FilterValues.of_metadata(node.metadata).terms:
            stale.add(node_id)  # filter terms of an older graphstore
    rows, buckets = tag_rows(small_rows, hot_rows)
    stray: list[Row] = []
    found: set[tuple[str, TagKey]] = set()
    for tag, place, node_id, outgoing, terms in rows:
        if node_id in unreadable:
            continue
        if placed.get(node_id, {}).get(tag) != place:
            stray.append((tag, place, node_id))
            continue
        found.add((node_id, tag))
        beyond = place != SMALL and place >= buckets.get(tag, 0)
        if beyond or (tag_set(outgoing), frozenset(terms or ())) != carried[node_id]:
            stale.add(node_id)
    stale.update(
        node_id
        for node_id, tags in placed.items()
        if any((node_id, tag) not in found for tag in tags)
    )
    return sorted(stray), sorted(stale)


def count_corrections(hot_keys: Sequence[Any], counted: Mapping[TagKey, int]) -> dict[TagKey, int]:
    """Per hot tag whose directory count is off, what to add to it: the rows in its buckets
    (a scan of their keys) less its count."""
    in_buckets = Counter((kind, tag) for kind, tag in hot_keys)
    return {
        tag: in_buckets[tag] - counted.get(tag, 0)
        for tag in sorted(in_buckets.keys() | counted.keys())
        if in_buckets[tag] != counted.get(tag, 0)
    }


async def repair_layout(
    requests: Requests,
    hot: HotTags,
    read: Callable[[Sequence[str]], Awaitable[list[StoredNode]]],
    write: Callable[[Sequence[StoredNode]], Awaitable[None]],
) -> list[str]:
    """Repair the store (see the module docstring), reading nodes with `read` and writing
    them with `write`; one line per change made."""
    nodes, small, hot_rows = await asyncio.gather(
        requests.run(SCAN_NODES, ()), requests.run(SCAN_TAGS, ()), requests.run(SCAN_HOT, ())
    )
    stray, stale = stray_rows_and_stale_nodes(nodes, small, hot_rows)
    deletes = [await row_delete(requests, *row) for row in stray]
    await asyncio.gather(*(requests.execute(*delete) for delete in deletes))
    stored_ids = {row[0] for row in nodes}
    done = [
        f"deleted the row of node {node_id!r} under tag {tag} {place_name(place)}: "
        + ("the node is gone" if node_id not in stored_ids else "its node row places none there")
        for tag, place, node_id in stray
    ]
    rewritten = await read(stale) if stale else []
    if rewritten:
        await write(rewritten)
    done += [f"wrote node {stored.node.id!r} again with its tag rows" for stored in rewritten]
    hot_keys, directory = await asyncio.gather(
        requests.run(SCAN_HOT_KEYS, ()), requests.run(READ_HOT_TAGS, ())
    )
    counted = directory_counts(directory)
    corrections = count_corrections(hot_keys, counted)
    await hot.count_hot_rows(corrections)
    done += [
        f"hot tag {tag}: the directory counted {counted.get(tag, 0)} rows, now "
        f"{counted.get(tag, 0) + delta}"
        for tag, delta in corrections.items()
    ]
    return done
