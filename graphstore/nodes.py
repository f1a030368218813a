"""Nodes (passages with links) and the records the store hands back."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from graphstore.links import Link, TagKey

SUFFIXES = {
    ".txt": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
}
"""The files an ingest reads, by suffix, and their format."""


def passage_source(node_id: str) -> str | None:
    """The source of a passage id made by the splitters (`source#position`), else None."""
    source, mark, position = node_id.rpartition("#")
    if (
        mark
        and position.isascii()
        and position.isdigit()
        and os.path.splitext(source)[1].lower() in SUFFIXES
    ):
        return source
    return None


def page_of(node_id: str) -> str:
    """The page a passage belongs to: the file of an ingested passage (`source#position`);
    any other node is a page of its own."""
    return passage_source(node_id) or node_id


Vector = NDArray[np.float32]
"""A unit-length float32 embedding: cosine similarity is a dot product."""
VectorLike = Sequence[float] | NDArray[np.floating[Any]]
"""An embedding as a caller gives it: a list of floats or a NumPy array of any float type
(checked and normalized to a `Vector` by `unit`)."""
VectorsLike = Iterable[VectorLike] | NDArray[np.floating[Any]]
"""Several embeddings as a caller gives them: a list (or any iterable) of vectors or a 2-D
NumPy array."""


@dataclass(frozen=True)
class Node:
    """A passage: its id, text, JSON metadata and link tags."""

    id: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    links: frozenset[Link] = frozenset()


@dataclass(frozen=True)
class StoredNode:
    """A node together with its (unit-length) embedding, as the backends hold it."""

    node: Node
    embedding: Vector


class TagHit(NamedTuple):
    """One row of a tag's posting list: enough to rank and expand a node without reading it.

    The embedding and outgoing tags are denormalized into the tag row, so a traversal step
    never needs a follow-up read of the node.  A backend that knows no other node links in
    to one of the node's outgoing tags may leave that tag out: a step on it could return
    only this node.

    A named tuple, not a frozen dataclass: a search makes dozens, and a frozen dataclass
    costs three times as much to build.
    """

    id: str
    embedding: Vector
    outgoing: frozenset[TagKey]
    similarity: float


@dataclass(frozen=True)
class Hit:
    """A search result and how it was reached.

    `similarity` is the cosine to the query; `score` the relevance the search ranked by
    (the similarity for plain searches; path-aware for graph searches, see
    `graphstore.relevance`).  `depth` is the number of tag hops from a root (0 for roots),
    `path` the `(kind, tag)` pairs followed from the root and `via` the last of them (None for
    roots), `mmr_score` the MMR score when the node was selected.
    """

    node: Node
    similarity: float
    depth: int = 0
    via: TagKey | None = None
    mmr_score: float | None = None
    score: float | None = None
    path: tuple[TagKey, ...] = ()
    raised_by: tuple[TagKey, ...] = ()
    """When a link found after the passage raised `score` (a root that another passage
    names): the tags of that link's path from a root; `path` stays the shortest one."""


def hit_json(hit: Hit) -> dict[str, Any]:
    """A hit for scripts and agents: id, scores, how it was reached, metadata and text."""
    return {**_reach_json(hit.node.id, hit), "metadata": hit.node.metadata, "text": hit.node.text}


def candidate_json(candidate: Candidate) -> dict[str, Any]:
    """A candidate that lost, for scripts: `hit_json`'s keys except metadata and text
    (a search never reads them for a loser), and `unselected` true."""
    copy = {"copy_of": candidate.copy_of} if candidate.copy_of is not None else {}
    return {"unselected": True, **_reach_json(candidate.id, candidate), **copy}


def _reach_json(node_id: str, found: Hit | Candidate) -> dict[str, Any]:
    """The keys a hit and a losing candidate share: id, scores and how it was reached (one
    list, so the two cannot drift apart: a loser's line once lacked `via`)."""
    return {
        "id": node_id,
        "score": found.score,
        "similarity": found.similarity,
        "mmr_score": found.mmr_score,
        "depth": found.depth,
        "via": found.via,
        "path": found.path,
        "raised_by": found.raised_by,
    }


@dataclass(frozen=True)
class Candidate:
    """A passage a graph search considered and did not return, with its scores (for
    `debug=True`: why it lost).  `mmr_score` is None for `traversal_search`, which ranks by
    depth, then similarity."""

    id: str
    similarity: float
    score: float
    mmr_score: float | None
    depth: int
    path: tuple[TagKey, ...]
    raised_by: tuple[TagKey, ...] = ()
    """As `Hit.raised_by`: the path of the link that raised its score above its similarity."""
    copy_of: str | None = None
    """The selected passage it copies (`mmr.COPY_SIMILARITY`): it was never selectable, and
    has no `mmr_score`."""

    @property
    def via(self) -> TagKey | None:
        """The last tag of its path, as `Hit.via` (None for a root)."""
        return self.path[-1] if self.path else None


NORM_RANGE = (1e-15, 1e15)
"""Norms taken directly: their squares stay well inside float32's normal range."""


def unit(vector: Any, dimension: int | None = None) -> Vector:
    """A float32 unit vector, or a ValueError naming what is wrong with `vector`.

    A float32 vector is normalized in float32, anything else in float64 (a finite 1e39 was
    refused as infinite once cast); a norm outside `NORM_RANGE`, where its squares may
    overflow or underflow (`[0, 1e20]` in float32 became the zero vector, `[1e-22, 1e-22]`
    got norm 1.01), is taken again after scaling by the largest component."""
    array = np.asarray(vector)
    if np.iscomplexobj(array):  # a cast keeps the real parts: [1j, 2j] was "the zero vector"
        raise ValueError("an embedding must be a vector of real numbers, not complex ones")
    if array.dtype == object and any(item is None for item in array.flat):
        raise ValueError("an embedding must be a vector of numbers, not None")  # cast: NaN
    if array.dtype != np.float32:
        try:
            array = array.astype(np.float64)
        except (TypeError, ValueError, OverflowError) as error:
            raise ValueError(f"an embedding must be a vector of numbers: {error}") from error
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"an embedding must be a non-empty 1-D vector, got shape {array.shape}")
    if dimension is not None and array.size != dimension:
        raise ValueError(f"embedding has dimension {array.size}; the store holds {dimension}")
    if not np.all(np.isfinite(array)):
        raise ValueError("embedding contains NaN or infinite values")
    with np.errstate(over="ignore", under="ignore"):  # both are handled below
        norm = float(np.linalg.norm(array))
    if not NORM_RANGE[0] < norm < NORM_RANGE[1]:
        largest = float(np.max(np.abs(array)))
        if largest == 0.0:
            raise ValueError("embedding is the zero vector; cosine similarity is undefined")
        array = array / largest
        norm = float(np.linalg.norm(array))
    unit_vector: Vector = (array / norm).astype(np.float32, copy=False)
    return unit_vector
