"""The materialized-edges baseline: the original content-centric design graphstore replaces.

Every edge is a stored row `(source_id, target_id, target_embedding)` keyed by source,
written when the later of its two passages is inserted.  Adding a passage therefore finds
every earlier passage sharing one of its tags (either direction) and writes an edge row for
each pair: O(passages sharing its tags), where graphstore writes O(its tags).  Traversal
reads one edge partition per visited node.

A search ends by reading the texts of the passages it returns (one query), as every store
that returns documents does.

Two backends with graphstore's own durability settings: SQLite (one transaction per batch,
WAL, synchronous=NORMAL; exact cosine ranking of roots in NumPy) and Cassandra (prepared
statements, the driver's concurrent execution with 32 requests in flight, SAI indexes).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from graphstore.links import TagKey, encode_links, incoming_tags, outgoing_tags
from graphstore.mmr import MmrSelector
from graphstore.nodes import Node, Vector
from graphstore.traversal import TraversalStats

Edge = tuple[str, str, np.ndarray]
"""(source id, target id, target embedding)."""
Neighbour = tuple[str, np.ndarray]
"""(node id, embedding): a search result or an edge's target."""
Lookup = tuple[str, TagKey]
"""("in" or "out", tag): the nodes linking that way to that tag."""


def _tag(key: TagKey) -> str:
    """One text per (kind, tag), for index columns that hold strings."""
    return f"{key[0]}\x1f{key[1]}"


class MaterializedEdgeStore(ABC):
    """Writes edges at insert time; traverses by reading each visited node's edge rows.

    `stats.tag_queries` of a search counts its edge-row reads, one per expanded node.
    """

    edges_written = 0

    async def add(self, nodes: Sequence[Node], vectors: np.ndarray) -> None:
        """Write nodes, then one edge row per (new node, earlier node) sharing a tag.

        The tag lookups of a batch are deduplicated and (on Cassandra) run concurrently, so
        the baseline pays for the edges it must write, not for a naive query pattern.
        """
        self._write_nodes(nodes, vectors)
        wanted = {
            (direction, tag)
            for node in nodes
            for direction, tags in (
                ("out", incoming_tags(node.links)),
                ("in", outgoing_tags(node.links)),
            )
            for tag in tags
        }
        linking = self._nodes_linking(sorted(wanted))
        edges: dict[tuple[str, str], np.ndarray] = {}
        for node, vector in zip(nodes, vectors, strict=True):
            for tag in incoming_tags(node.links):
                for source, _ in linking[("out", tag)]:
                    if source != node.id:
                        edges[(source, node.id)] = vector
            for tag in outgoing_tags(node.links):
                for target, embedding in linking[("in", tag)]:
                    if target != node.id:
                        edges[(node.id, target)] = embedding
        self._write_edges([(s, t, e) for (s, t), e in edges.items()])
        self.edges_written += len(edges)

    @abstractmethod
    def _write_nodes(self, nodes: Sequence[Node], vectors: np.ndarray) -> None:
        """Store node rows and their tag memberships (needed to find future edges)."""

    @abstractmethod
    def _nodes_linking(self, wanted: list[Lookup]) -> dict[Lookup, list[Neighbour]]:
        """For each (direction, tag), the stored nodes linking that way ("in"/"out") to it."""

    @abstractmethod
    def _write_edges(self, edges: list[Edge]) -> None:
        """Store edge rows."""

    @abstractmethod
    async def search(self, query: Vector, k: int) -> list[Neighbour]:
        """The `k` nodes nearest to `query`."""

    @abstractmethod
    async def edges(self, source_id: str) -> list[Neighbour]:
        """The targets of every edge leaving `source_id`: one query."""

    @abstractmethod
    async def texts(self, ids: Sequence[str]) -> dict[str, str]:
        """The texts of these nodes: one query."""

    @abstractmethod
    async def close(self) -> None:
        """Release the backend."""

    async def _documents(self, ids: list[str], stats: TraversalStats) -> list[str]:
        """`ids` after reading their texts (one query), as a store returning documents does."""
        stats.tag_queries += 1
        found = await self.texts(ids)
        return [node_id for node_id in ids if node_id in found]

    async def _adjacent(
        self, ids: Sequence[str], query: Vector, adjacent_k: int, stats: TraversalStats
    ) -> list[list[Neighbour]]:
        """Each node's `adjacent_k` edge targets nearest to the query, one query per node."""
        stats.tag_queries += len(ids)
        found = await asyncio.gather(*(self.edges(node_id) for node_id in ids))
        return [
            sorted(targets, key=lambda t: -float(t[1] @ query))[:adjacent_k] for targets in found
        ]

    async def traversal_search(
        self, query: Vector, *, k: int, depth: int, adjacent_k: int, stats: TraversalStats
    ) -> list[str]:
        """Breadth-first from the `k` nearest nodes; ids by depth, then similarity."""
        stats.vector_searches += 1
        roots = await self.search(query, k)
        reached = {node_id: (0, -float(e @ query)) for node_id, e in roots}
        frontier = list(reached)
        for hop in range(1, depth + 1):
            if not frontier:
                break
            next_frontier = []
            for targets in await self._adjacent(frontier, query, adjacent_k, stats):
                for node_id, embedding in targets:
                    if node_id not in reached:
                        reached[node_id] = (hop, -float(embedding @ query))
                        next_frontier.append(node_id)
            frontier = next_frontier
        stats.candidates += len(reached)
        return await self._documents(sorted(reached, key=lambda node_id: reached[node_id]), stats)

    async def mmr_traversal_search(
        self,
        query: Vector,
        *,
        k: int,
        depth: int,
        fetch_k: int,
        adjacent_k: int,
        lambda_mult: float,
        stats: TraversalStats,
    ) -> list[str]:
        """MMR over the `fetch_k` nearest, expanding each selected node's edges (graphstore's
        MMR math, so only the storage layout differs)."""
        selector = MmrSelector(query, lambda_mult)
        depths: dict[str, int] = {}

        def admit(found: list[Neighbour], hop: int) -> None:
            fresh = [(i, e) for i, e in found if i not in depths]
            for node_id, _ in fresh:
                depths[node_id] = hop
            if fresh:
                selector.add([i for i, _ in fresh], np.stack([e for _, e in fresh]))
                stats.candidates += len(fresh)

        stats.vector_searches += 1
        admit(await self.search(query, fetch_k), 0)
        selected: list[str] = []
        while len(selected) < k:
            chosen = selector.pop_best()
            if chosen is None:
                break
            selected.append(chosen.id)
            if depths[chosen.id] < depth:
                [targets] = await self._adjacent([chosen.id], query, adjacent_k, stats)
                admit(targets, depths[chosen.id] + 1)
        return await self._documents(selected, stats)


EMBEDDED_SCHEMA = """
CREATE TABLE nodes (id TEXT PRIMARY KEY, text TEXT NOT NULL, links TEXT NOT NULL,
                    embedding BLOB NOT NULL);
CREATE TABLE node_tags (direction TEXT NOT NULL, tag TEXT NOT NULL, node_id TEXT NOT NULL,
                        PRIMARY KEY (direction, tag, node_id)) WITHOUT ROWID;
CREATE TABLE edges (source_id TEXT NOT NULL, target_id TEXT NOT NULL,
                    target_embedding BLOB NOT NULL,
                    PRIMARY KEY (source_id, target_id)) WITHOUT ROWID;
"""


class EmbeddedEdgeStore(MaterializedEdgeStore):
    """SQLite file + an in-memory matrix for root search, like `EmbeddedStorage`."""

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")
        self._db.executescript(EMBEDDED_SCHEMA)
        self._ids: list[str] = []
        self._rows: list[np.ndarray] = []
        self._matrix: np.ndarray | None = None

    async def add(self, nodes: Sequence[Node], vectors: np.ndarray) -> None:
        """One transaction per batch: nodes and their edges are written together."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            await super().add(nodes, vectors)
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._ids.extend(node.id for node in nodes)
        self._rows.extend(np.asarray(vectors, dtype=np.float32))
        self._matrix = None

    def _write_nodes(self, nodes: Sequence[Node], vectors: np.ndarray) -> None:
        self._db.executemany(
            "INSERT OR REPLACE INTO nodes VALUES (?, ?, ?, ?)",
            [
                (n.id, n.text, encode_links(n.links), np.asarray(v, np.float32).tobytes())
                for n, v in zip(nodes, vectors, strict=True)
            ],
        )
        self._db.executemany(
            "INSERT OR REPLACE INTO node_tags VALUES (?, ?, ?)",
            [
                (direction, _tag(tag), n.id)
                for n in nodes
                for direction, tags in (
                    ("in", incoming_tags(n.links)),
                    ("out", outgoing_tags(n.links)),
                )
                for tag in tags
            ],
        )

    def _nodes_linking(self, wanted: list[Lookup]) -> dict[Lookup, list[Neighbour]]:
        query = (
            "SELECT n.id, n.embedding FROM node_tags t JOIN nodes n ON n.id = t.node_id "
            "WHERE t.direction = ? AND t.tag = ?"
        )
        return {
            (direction, tag): [
                (node_id, np.frombuffer(blob, np.float32))
                for node_id, blob in self._db.execute(query, (direction, _tag(tag)))
            ]
            for direction, tag in wanted
        }

    def _write_edges(self, edges: list[Edge]) -> None:
        self._db.executemany(
            "INSERT OR REPLACE INTO edges VALUES (?, ?, ?)",
            [(s, t, e.astype(np.float32).tobytes()) for s, t, e in edges],
        )

    async def search(self, query: Vector, k: int) -> list[Neighbour]:
        if self._matrix is None:
            self._matrix = np.stack(self._rows)
        scores = self._matrix @ query
        best = np.argsort(-scores, kind="stable")[:k]
        return [(self._ids[i], self._matrix[i]) for i in best]

    async def edges(self, source_id: str) -> list[Neighbour]:
        rows = self._db.execute(
            "SELECT target_id, target_embedding FROM edges WHERE source_id = ?", (source_id,)
        )
        return [(target, np.frombuffer(blob, np.float32)) for target, blob in rows]

    async def texts(self, ids: Sequence[str]) -> dict[str, str]:
        query = "SELECT id, text FROM nodes WHERE id IN (SELECT value FROM json_each(?))"
        return dict(self._db.execute(query, (json.dumps(list(ids)),)))

    async def close(self) -> None:
        self._db.close()


# Only the generated keyspace/table names and the integer dimension are formatted in.
CASSANDRA_SCHEMA = [
    "CREATE TABLE {nodes} (id text PRIMARY KEY, text text, links text, "
    "embedding vector<float, {dimension}>, tags_in set<text>, tags_out set<text>)",
    "CREATE CUSTOM INDEX ON {nodes} (embedding) USING 'StorageAttachedIndex' "
    "WITH OPTIONS = {{'similarity_function': 'COSINE'}}",
    "CREATE CUSTOM INDEX ON {nodes} (VALUES(tags_in)) USING 'StorageAttachedIndex'",
    "CREATE CUSTOM INDEX ON {nodes} (VALUES(tags_out)) USING 'StorageAttachedIndex'",
    "CREATE TABLE {edges} (source_id text, target_id text, "
    "target_embedding vector<float, {dimension}>, PRIMARY KEY (source_id, target_id))",
]
CQL = {
    "insert_node": "INSERT INTO {nodes} (id, text, links, embedding, tags_in, tags_out) "
    "VALUES (?, ?, ?, ?, ?, ?)",
    "linking_in": "SELECT id, embedding FROM {nodes} WHERE tags_in CONTAINS ?",
    "linking_out": "SELECT id, embedding FROM {nodes} WHERE tags_out CONTAINS ?",
    "insert_edge": "INSERT INTO {edges} (source_id, target_id, target_embedding) VALUES (?, ?, ?)",
    "search": "SELECT id, embedding FROM {nodes} ORDER BY embedding ANN OF ? LIMIT ?",
    "edges": "SELECT target_id, target_embedding FROM {edges} WHERE source_id = ?",
    "texts": "SELECT id, text FROM {nodes} WHERE id IN ?",
}


class CassandraEdgeStore(MaterializedEdgeStore):
    """A node table (SAI on the embedding and on both tag sets) and an edge table
    `PRIMARY KEY (source_id, target_id)` carrying the target's embedding."""

    CONCURRENCY = 32

    def __init__(self, session: Any, keyspace: str, table: str, dimension: int) -> None:
        self.session = session
        names = {"nodes": f"{keyspace}.{table}_nodes", "edges": f"{keyspace}.{table}_edges"}
        for statement in CASSANDRA_SCHEMA:
            session.execute(statement.format(**names, dimension=int(dimension)), timeout=120)
        prepared = {name: session.prepare(cql.format(**names)) for name, cql in CQL.items()}
        self._insert_node, self._insert_edge = prepared["insert_node"], prepared["insert_edge"]
        self._linking = {"in": prepared["linking_in"], "out": prepared["linking_out"]}
        self._search, self._select_edges = prepared["search"], prepared["edges"]
        self._texts = prepared["texts"]

    def _concurrently(self, statement: Any, rows: list[tuple[Any, ...]]) -> list[Any]:
        """Run `statement` once per row, `CONCURRENCY` at a time; the result sets in order."""
        from cassandra.concurrent import execute_concurrent_with_args

        results = execute_concurrent_with_args(
            self.session, statement, rows, concurrency=self.CONCURRENCY, raise_on_first_error=True
        )
        return [result for _, result in results]

    def _write_nodes(self, nodes: Sequence[Node], vectors: np.ndarray) -> None:
        self._concurrently(
            self._insert_node,
            [
                (
                    n.id,
                    n.text,
                    encode_links(n.links),
                    [float(x) for x in v],
                    {_tag(t) for t in incoming_tags(n.links)},
                    {_tag(t) for t in outgoing_tags(n.links)},
                )
                for n, v in zip(nodes, vectors, strict=True)
            ],
        )

    def _nodes_linking(self, wanted: list[Lookup]) -> dict[Lookup, list[Neighbour]]:
        found: dict[Lookup, list[Neighbour]] = {}
        for direction in ("in", "out"):
            keys = [key for key in wanted if key[0] == direction]
            results = self._concurrently(self._linking[direction], [(_tag(t),) for _, t in keys])
            for key, rows in zip(keys, results, strict=True):
                found[key] = [(node_id, np.asarray(e, np.float32)) for node_id, e in rows]
        return found

    def _write_edges(self, edges: list[Edge]) -> None:
        self._concurrently(self._insert_edge, [(s, t, [float(x) for x in e]) for s, t, e in edges])

    async def search(self, query: Vector, k: int) -> list[Neighbour]:
        vector = [float(x) for x in query]
        rows = await asyncio.to_thread(self.session.execute, self._search, (vector, k))
        return [(node_id, np.asarray(e, np.float32)) for node_id, e in rows]

    async def edges(self, source_id: str) -> list[Neighbour]:
        rows = await asyncio.to_thread(self.session.execute, self._select_edges, (source_id,))
        return [(target, np.asarray(e, np.float32)) for target, e in rows]

    async def texts(self, ids: Sequence[str]) -> dict[str, str]:
        rows = await asyncio.to_thread(self.session.execute, self._texts, (list(ids),))
        return dict(rows)

    async def close(self) -> None:
        """The session belongs to the benchmark's backend; nothing to release."""


def open_baseline(backend: Any, label: str, dimension: int) -> MaterializedEdgeStore:
    """A fresh baseline store on the run's backend (`benchmarks.common.Backend`)."""
    if backend.name == "embedded":
        return EmbeddedEdgeStore(backend.sqlite_path(label))
    return CassandraEdgeStore(backend.session, backend.keyspace, backend.table(label), dimension)
