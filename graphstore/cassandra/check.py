"""`check` and `stats` for the Cassandra layout: full scans of every table.

`layout_problems` is a pure function of the scans, so every rule is visible in one place:
each node row's filter terms are those of its metadata; each node has exactly one row per
incoming tag, in the place its node row records (a delete looks only there), in a bucket
readers query, carrying the node's current outgoing tags and filter terms; every tag row
belongs to a stored node; the directory counts each hot tag's bucket rows exactly.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from graphstore.cassandra.hot_tags import bucket_count
from graphstore.cassandra.layout import SMALL, placements
from graphstore.cassandra.queries import (
    READ_HOT_TAGS,
    SCAN_HOT,
    SCAN_HOT_KEYS,
    SCAN_NODE_IDS,
    SCAN_NODES,
    SCAN_TAG_KEYS,
    SCAN_TAGS,
)
from graphstore.cassandra.rows import tag_map, tag_set
from graphstore.cassandra.session import Requests
from graphstore.errors import StorageError
from graphstore.filters import FilterValues
from graphstore.links import TagKey, incoming_tags
from graphstore.storage import StoreStats, decode_node


def place_name(place: int) -> str:
    return "in the small part" if place == SMALL else f"in bucket {place}"


TagRow = tuple[TagKey, int, str, Any, Any]
"""A tag row as scanned: its tag, its place (`SMALL` or a bucket), its node, and the node's
outgoing tags and filter terms it carries."""


def tag_rows(
    small_rows: Iterable[Any], hot_rows: Iterable[Any]
) -> tuple[list[TagRow], dict[TagKey, int]]:
    """The rows of scans of the small parts and the buckets (as `layout_problems` takes
    them) as `TagRow`s, and each tag's bucket count."""
    rows: list[TagRow] = []
    buckets: dict[TagKey, int] = {}
    for kind, tag, static, node_id, outgoing, terms in small_rows:
        buckets[(kind, tag)] = bucket_count(static)
        if node_id is not None:
            rows.append(((kind, tag), SMALL, node_id, outgoing, terms))
    rows.extend(((kind, tag), bucket, *rest) for kind, tag, bucket, *rest in hot_rows)
    return rows, buckets


def layout_problems(
    node_rows: Iterable[Any],
    small_rows: Iterable[Any],
    hot_rows: Iterable[Any],
    directory: Mapping[TagKey, int],
) -> list[str]:
    """Problems found in scans of the node table (node_id, links, outgoing, filter_terms,
    tag_buckets, metadata), the small parts (kind, tag, buckets, node_id, outgoing,
    filter_terms), the buckets (kind, tag, bucket, node_id, outgoing, filter_terms) and the
    directory.  A node row that cannot be read is reported once, not its tag rows."""
    problems: list[str] = []
    nodes = {}
    corrupt = set()
    for node_id, links, outgoing, terms, tag_buckets, metadata in node_rows:
        try:
            node = decode_node(node_id, "", metadata, links)
        except StorageError as error:
            problems.append(f"{error}: ingest it again to repair")
            corrupt.add(node_id)
            continue
        placed = placements(incoming_tags(node.links), tag_map(tag_buckets))
        nodes[node_id] = (placed, tag_set(outgoing), frozenset(terms or ()))
        if nodes[node_id][2] != FilterValues.of_metadata(node.metadata).terms:
            problems.append(
                f"node {node_id!r} carries filter terms that are not its metadata's (written "
                "by an older graphstore?): filters may miss it; write it again to repair"
            )
    rows, buckets = tag_rows(small_rows, hot_rows)
    found: dict[str, dict[TagKey, list[int]]] = {}
    in_buckets: Counter[TagKey] = Counter()
    for key, place, node_id, outgoing, terms in rows:
        if place != SMALL:
            in_buckets[key] += 1
            if place >= buckets.get(key, 0):
                problems.append(
                    f"tag {key} has a row of node {node_id!r} in bucket {place}, "
                    f"beyond its {buckets.get(key, 0)} buckets: searches miss it"
                )
        if node_id in corrupt:
            continue
        if node_id not in nodes:
            problems.append(f"tag row {key} points at missing node {node_id!r}")
            continue
        found.setdefault(node_id, {}).setdefault(key, []).append(place)
        _, node_outgoing, node_terms = nodes[node_id]
        if tag_set(outgoing) != node_outgoing or frozenset(terms or ()) != node_terms:
            problems.append(
                f"tag row {key} of node {node_id!r} carries stale outgoing tags or filter terms"
            )
    for node_id, (placed, _, _) in nodes.items():
        actual = found.get(node_id, {})
        if set(placed) != set(actual):
            problems.append(
                f"node {node_id!r} has tag rows {sorted(actual)} "
                f"but incoming links {sorted(placed)}"
            )
        for tag, places in sorted(actual.items()):
            if len(places) > 1:
                where = ", ".join(place_name(place) for place in sorted(places))
                problems.append(f"node {node_id!r} has {len(places)} rows of tag {tag} ({where})")
            elif tag in placed and places[0] != placed[tag]:
                problems.append(
                    f"node {node_id!r} records its row of tag {tag} {place_name(placed[tag])}, "
                    f"but it is {place_name(places[0])}: deleting the node would leave it"
                )
    for tag in sorted(in_buckets.keys() | directory.keys()):
        if in_buckets[tag] != directory.get(tag, 0):
            problems.append(
                f"hot tag {tag} holds {in_buckets[tag]} rows in its buckets but the directory "
                f"counts {directory.get(tag, 0)} (a search weighs the tag by that count)"
            )
    return problems


async def scanned_problems(requests: Requests) -> list[str]:
    """Scan the node table, both tag tables and the directory, and compare them."""
    nodes, small, hot, directory = await asyncio.gather(
        requests.run(SCAN_NODES, ()),
        requests.run(SCAN_TAGS, ()),
        requests.run(SCAN_HOT, ()),
        requests.run(READ_HOT_TAGS, ()),
    )
    return layout_problems(nodes, small, hot, directory_counts(directory))


def directory_counts(directory: Iterable[Any]) -> dict[TagKey, int]:
    """The hot-tag directory as read (`READ_HOT_TAGS`): each hot tag's count of its rows."""
    return {(kind, tag): int(rows) for kind, tag, rows in directory}


async def scanned_stats(requests: Requests, dimension: int, top_tags: int) -> StoreStats:
    """Node, tag and tag-row counts (small parts and buckets together), the most frequent."""
    nodes, small, hot = await asyncio.gather(
        requests.run(SCAN_NODE_IDS, ()),
        requests.run(SCAN_TAG_KEYS, ()),
        requests.run(SCAN_HOT_KEYS, ()),
    )
    counts = Counter((kind, tag) for kind, tag, node_id in small if node_id is not None)
    counts.update((kind, tag) for kind, tag in hot)
    frequent = sorted(counts, key=lambda key: (-counts[key], key))[:top_tags]
    return StoreStats(
        nodes=len(nodes),
        tag_rows=counts.total(),
        tags=len(counts),
        dimension=dimension,
        tag_frequencies={key: counts[key] for key in frequent},
    )
