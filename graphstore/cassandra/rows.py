"""Rows of the node and tag tables as model objects."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from graphstore.links import TagKey
from graphstore.nodes import StoredNode, TagHit, Vector
from graphstore.storage import decode_node

TAG_SETS_KEPT = 4096
"""Decoded `outgoing` texts kept, the most recently read (~4 KB each at 15 tags)."""


def encode_tags(tags: Iterable[TagKey]) -> str:
    """An `outgoing` text column: the tags as a sorted JSON list of [kind, tag] pairs."""
    return json.dumps(sorted(tags), ensure_ascii=False)


@lru_cache(maxsize=TAG_SETS_KEPT)
def _decoded_tags(text: str) -> frozenset[TagKey]:
    return frozenset((kind, tag) for kind, tag in json.loads(text))


def tag_set(values: Any) -> frozenset[TagKey]:
    """An `outgoing` column as tag keys: JSON text (`encode_tags`), or in a store made before
    that a `set<frozen<tuple<text, text>>>` (None when empty).  Decoded texts are kept: a
    node's row comes back under each of its tags and in search after search."""
    if isinstance(values, str):
        return _decoded_tags(values)
    return frozenset(values or ())  # the driver gives the tuples as Python tuples


def tag_hits(rows: Sequence[Any]) -> list[TagHit]:
    """Rows of (node_id, embedding, outgoing, similarity_cosine, …) as hits, best first by
    the exact score, whatever order the ANN index merge produced."""
    hits = [
        TagHit(row[0], as_vector(row[1]), tag_set(row[2]), 2.0 * float(row[3]) - 1.0)
        for row in rows
    ]
    return sorted(hits, key=lambda hit: -hit.similarity)


def ranked(rows: Sequence[Any], query: Vector, k: int) -> list[TagHit]:
    """The `k` rows of (node_id, embedding, outgoing, …) nearest to `query` by exact cosine
    (ties by id); only those are turned into hits."""
    return ranked_groups([rows], query, k)[0]


def ranked_groups(groups: Sequence[Sequence[Any]], query: Vector, k: int) -> list[list[TagHit]]:
    """`ranked` for each group of rows (the tags of one wave), scored in one product: a wave
    has ~50 tags of a few rows each, where a product per tag cost more than the rows."""
    rows = [row for group in groups for row in group]
    if not rows:
        return [[] for _ in groups]
    embeddings = as_vectors([row[1] for row in rows])
    scores = (embeddings @ query).tolist()
    found: list[list[TagHit]] = []
    start = 0
    for group in groups:
        end = start + len(group)
        best = sorted(range(start, end), key=lambda i: (-scores[i], rows[i][0]))[:k]
        found.append(
            [TagHit(rows[i][0], embeddings[i], tag_set(rows[i][2]), scores[i]) for i in best]
        )
        start = end
    return found


LITTLE_ENDIAN_FLOAT = np.dtype("<f4")


def embedding_bytes(vector: Vector) -> bytes:
    """A small part's `embedding blob`: float32, little-endian.  A small part has no vector
    index, so its column need not be a vector; the driver decodes a vector one Python float
    at a time (~30 µs a row even with `vector_codec`), bytes for nothing."""
    return vector.astype(LITTLE_ENDIAN_FLOAT).tobytes()


def as_vector(value: bytes | Sequence[float]) -> Vector:
    """An embedding column as float32: a small part's bytes, or a vector column's floats."""
    if isinstance(value, bytes):
        return np.frombuffer(value, dtype=LITTLE_ENDIAN_FLOAT).astype(np.float32)
    return np.asarray(value, dtype=np.float32)


def as_vectors(values: Sequence[bytes | Sequence[float]]) -> np.ndarray:
    """Embedding columns as one float32 matrix (bytes joined and read at once)."""
    if all(isinstance(value, bytes) for value in values):
        joined = np.frombuffer(b"".join(values), dtype=LITTLE_ENDIAN_FLOAT)  # type: ignore[arg-type]
        return joined.reshape(len(values), -1).astype(np.float32)
    return np.stack([as_vector(value) for value in values])


def stored_node(row: Sequence[Any]) -> StoredNode:
    """A node row whose first columns are (node_id, text, metadata, links, embedding)."""
    return StoredNode(decode_node(*row[:4]), as_vector(row[4]))


def tag_map(values: Any) -> dict[TagKey, int]:
    """A `map<frozen<tuple<text, text>>, int>` column (None when empty) as a dict."""
    return {(kind, tag): int(value) for (kind, tag), value in (values or {}).items()}
