"""Rows of the node and tag tables as model objects."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from graphstore.links import TagKey, decode_links
from graphstore.nodes import Node, StoredNode, TagHit, Vector


def tag_set(values: Any) -> frozenset[TagKey]:
    """A `set<frozen<tuple<text, text>>>` column (None when empty) as tag keys."""
    return frozenset((kind, tag) for kind, tag in values or ())


def tag_hits(rows: Sequence[Any]) -> list[TagHit]:
    """Rows of (node_id, embedding, outgoing, similarity_cosine) as hits, best first by the
    exact score, whatever order the ANN index merge produced."""
    hits = [
        TagHit(node_id, as_vector(embedding), tag_set(outgoing), 2.0 * float(score) - 1.0)
        for node_id, embedding, outgoing, score in rows
    ]
    return sorted(hits, key=lambda hit: -hit.similarity)


def ranked(rows: Sequence[Any], query: Vector) -> list[TagHit]:
    """Rows of (node_id, embedding, outgoing) ranked by exact cosine to `query`."""
    if not rows:
        return []
    embeddings = [as_vector(embedding) for _, embedding, _ in rows]
    scores = np.stack(embeddings) @ query
    hits = [
        TagHit(node_id, embedding, tag_set(outgoing), float(score))
        for (node_id, _, outgoing), embedding, score in zip(rows, embeddings, scores, strict=True)
    ]
    return sorted(hits, key=lambda hit: (-hit.similarity, hit.id))


def as_vector(value: Sequence[float]) -> Vector:
    """A vector column as float32."""
    return np.asarray(value, dtype=np.float32)


def stored_node(row: Sequence[Any]) -> StoredNode:
    """A node row whose first columns are (node_id, text, metadata, links, embedding)."""
    node_id, text, metadata, links, embedding = row[:5]
    node = Node(node_id, text, json.loads(metadata), decode_links(links))
    return StoredNode(node, as_vector(embedding))


def tag_map(values: Any) -> dict[TagKey, int]:
    """A `map<frozen<tuple<text, text>>, int>` column (None when empty) as a dict."""
    return {(kind, tag): int(value) for (kind, tag), value in (values or {}).items()}
