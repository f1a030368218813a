"""`CassandraStorage`: the `Storage` interface on a node table and a per-tag table.

`<table>_nodes` holds one row per node (text, metadata and links as JSON, the embedding);
`<table>_tags` holds one row per (incoming tag, node), partitioned by tag and carrying the
node's embedding, outgoing tags and filter terms, so a traversal step reads no node rows.
`search_tag` reads a small tag's partition whole (at most k + 1 rows) and ranks it by exact
cosine here, checking each row against the filter; only a tag holding more than k rows takes
the partition-restricted ANN query (`queries.SEARCH_TAG`).

Both partition-restricted ANN and ANN with `CONTAINS` on an SAI `VALUES` index were checked
on Cassandra 5.0.9.  SAI's `similarity_cosine` is (1 + cos) / 2; scores are mapped back to
plain cosine so they equal the embedded backend's.  Filters: `graphstore.cassandra.filters`
(the queries) and `graphstore.cassandra.ranges` (the range columns they use).

Hot tags: a tag that a large share of nodes link in to makes one wide partition, and its
ANN query walks one large per-partition candidate set on one replica set.  The design scales
past that by bucketing hot tags: `PRIMARY KEY ((kind, tag, bucket), node_id)` with
`bucket = hash(node_id) % B` for tags above a frequency threshold (B recorded per tag), where
`search_tag` queries all B buckets concurrently and merges their top-k.  Not done yet: every
tag is one partition.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy

from graphstore import vector_codec
from graphstore.cassandra.consistency import Consistency
from graphstore.cassandra.filters import Branch, Plan, Ranking, plan, range_columns, top_k
from graphstore.cassandra.queries import (
    COUNT_TAG,
    DELETE_NODE,
    DELETE_TAG,
    INSERT_NODE,
    INSERT_TAG,
    READ_TAG,
    SCAN_HITS,
    SCAN_NODE_IDS,
    SCAN_NODES,
    SCAN_SEARCH,
    SCAN_TAG,
    SCAN_TAG_KEYS,
    SCAN_TAGS,
    SEARCH_HITS,
    SEARCH_NODES,
    SEARCH_TAG,
    SELECT_LINKS,
    SELECT_NODE,
    TAG_MEMBERS,
)
from graphstore.cassandra.ranges import MAX_RANGE_COLUMNS, RangeColumns, cells, updates, wanted
from graphstore.cassandra.rows import ranked, stored_node, tag_hits, tag_set
from graphstore.cassandra.schema import (
    DDL_TIMEOUT,
    SCHEMA,
    SELECT_DIMENSION,
    SELECT_KEYSPACE,
    VECTOR_TYPE,
    replication_cql,
    replication_factor,
)
from graphstore.cassandra.session import (
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_RETRIES,
    DEFAULT_RETRY_WINDOW,
    DEFAULT_TIMEOUT,
    Requests,
    one_line,
)
from graphstore.cassandra.url import DEFAULT_PORT, DEFAULT_TABLE, identifier, parse_url
from graphstore.errors import InvalidInputError, StorageError, StoreOpenError
from graphstore.filters import EVERYTHING, Condition, FilterValues, holds, matches
from graphstore.links import TagKey, decode_links, encode_links, incoming_tags, outgoing_tags
from graphstore.metadata import filter_terms
from graphstore.nodes import StoredNode, TagHit, Vector
from graphstore.storage import ScoredNode, Storage, StoreStats

LARGE_TAGS_REMEMBERED = 100_000
"""How many tags known to be larger than a page `search_tag` remembers (skipping the read)."""


class CassandraStorage(Storage):
    """The `Storage` interface over a cassandra-driver session (Cassandra 5.0+, SAI).

    - Every value is bound to a prepared statement (prepared once, cached); only the
      validated keyspace and table names are formatted into CQL text.
    - Float vectors are encoded and decoded with NumPy (`vector_codec`, installed when a
      storage is created): the driver's per-element codec made decoding most of a
      traversal's time.
    - Queries run with a clone of the session's default execution profile: tuple rows,
      `timeout` seconds per request, and `IdempotentRetryPolicy` (up to `max_retries`
      retries, idempotent statements only; all of ours are marked idempotent).
    - `consistency` sets the levels of writes and key reads (default LOCAL_QUORUM for
      both); ANN queries run at LOCAL_ONE / ONE, the only level Cassandra 5.0 allows them.
      What a search sees after a write follows from that (`graphstore.cassandra.consistency`):
      when the keyspace keeps more than one replica, `search` reads the rows it returns
      again at the read level, as every graph search does at its end, so a deleted passage
      a stale replica still offers is never returned and a changed one is returned as it is.
    - Writes use the driver's client-side timestamp, fixed when a request is built and kept
      on retries, so a retried batch never duplicates or resurrects rows.  (A session with
      `use_client_timestamp = False` loses that guarantee.)
    - Each node is one LOGGED batch: stale tag rows deleted, current tag rows and the node
      row written, atomically.  Its size is about tags x dimension x 4 bytes, which passes
      Cassandra's default `batch_size_fail_threshold` (50 KiB) at ~8 tags of 1536-d vectors;
      the local test node raises it to 1 MiB, and production nodes need the same.  Batches
      over `batch_size_warn_threshold` (5 KiB) are expected: the driver logs the server's
      warning on the `cassandra.protocol` logger when an application enables logging.  Upserts
      read a node's old links first, so two processes writing the same node at the same
      time may leave a stale tag row (`check` reports it).
    - At most `max_in_flight` requests are outstanding at once across all event loops and
      threads; `peak_in_flight` records the most seen.
    - `stats` and `check` scan whole tables: fine for tests and the CLI, not for huge stores.
    - Filters: equality on the indexed `filter_terms`, ranges on range columns (a pair per
      metadata key and value type, at most `max_range_columns` pairs, each with four SAI
      indexes; `graphstore.cassandra.ranges`), the rest checked on rows
      (`graphstore.cassandra.filters`).
    """

    def __init__(
        self,
        session: Any,
        keyspace: str,
        table: str = DEFAULT_TABLE,
        *,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_RETRIES,
        retry_window: float = DEFAULT_RETRY_WINDOW,
        consistency: Consistency | str | None = None,
        max_range_columns: int = MAX_RANGE_COLUMNS,
    ) -> None:
        vector_codec.install()
        self.keyspace = identifier("keyspace", keyspace)
        self.table = identifier("table", table)
        self.session = session
        self.timeout = timeout
        self._cluster: Any = None
        self._large_tags: set[TagKey] = set()
        """Tags seen holding more rows than a `search_tag` page: queried by ANN directly."""
        self._schema_ready = False
        names = {
            "nodes": f'"{self.keyspace}"."{self.table}_nodes"',
            "tags": f'"{self.keyspace}"."{self.table}_tags"',
            "meta": f'"{self.keyspace}"."{self.table}_meta"',
            "table": self.table,
        }
        self._requests = Requests(
            session,
            names,
            max_in_flight=max_in_flight,
            timeout=timeout,
            max_retries=max_retries,
            retry_window=retry_window,
            consistency=Consistency.of(consistency),
        )
        self._ranges = RangeColumns(self._requests, session, max_range_columns)
        try:
            keyspace_rows = self._requests.execute_now(SELECT_KEYSPACE, (self.keyspace,))
            if not keyspace_rows:
                raise StoreOpenError(
                    f"Cassandra keyspace {self.keyspace!r} does not exist "
                    "(CassandraStorage.connect creates it)"
                )
            self.replicas = replication_factor(keyspace_rows[0][0])
            """Replicas of each row (in one data centre): above 1, ANN results are checked."""
            self._dimension = self._read_dimension()
            if self._dimension is not None:
                self._ranges.open_now()
        except StoreOpenError:
            raise
        except Exception as error:
            raise StoreOpenError(f"cannot read the Cassandra schema: {one_line(error)}") from error

    @classmethod
    def connect(
        cls,
        contact_points: Sequence[str],
        port: int = DEFAULT_PORT,
        *,
        keyspace: str,
        table: str = DEFAULT_TABLE,
        username: str | None = None,
        password: str | None = None,
        ssl_context: Any = None,
        replication: Mapping[str, str | int] | None = None,
        **options: Any,
    ) -> CassandraStorage:
        """Open a cluster connection, create the keyspace if missing, and own the cluster.

        `replication` is the keyspace's replication map (default SimpleStrategy, factor 1);
        an existing keyspace with another replication factor is refused rather than used as
        if it had the one asked for.  Requests go to a replica of the row they touch
        (token-aware routing, round robin within the local data centre).  `options` go to
        the constructor (`consistency`, `max_in_flight`, `timeout`, `max_retries`,
        `retry_window`).
        """
        keyspace = identifier("keyspace", keyspace)
        identifier("table", table)
        replication_map = replication_cql(replication)
        auth = PlainTextAuthProvider(username, password or "") if username else None
        where = ", ".join(f"{host}:{port}" for host in contact_points)
        try:
            # Cluster() resolves the host names: an unknown one fails here.
            cluster = Cluster(
                list(contact_points),
                port=port,
                auth_provider=auth,
                ssl_context=ssl_context,
                execution_profiles={
                    EXEC_PROFILE_DEFAULT: ExecutionProfile(
                        load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy())
                    )
                },
            )
        except Exception as error:
            raise StoreOpenError(f"cannot open Cassandra at {where}: {one_line(error)}") from error
        try:
            session = cluster.connect()
            session.execute(
                f'CREATE KEYSPACE IF NOT EXISTS "{keyspace}" WITH replication = {replication_map}',
                timeout=DDL_TIMEOUT,
            )
            storage = cls(session, keyspace, table, **options)
            if replication is not None and storage.replicas != replication_factor(replication):
                raise StoreOpenError(
                    f"Cassandra keyspace {keyspace!r} exists with replication factor "
                    f"{storage.replicas}, not {replication_factor(replication)}: change it with "
                    "ALTER KEYSPACE, then run a full repair"
                )
        except (InvalidInputError, StoreOpenError):
            cluster.shutdown()
            raise
        except Exception as error:
            cluster.shutdown()
            raise StoreOpenError(f"cannot open Cassandra at {where}: {one_line(error)}") from error
        storage._cluster = cluster
        return storage

    @classmethod
    def from_url(cls, url: str, **options: Any) -> CassandraStorage:
        """Open `cassandra://[user[:password]@]host[:port][,host…]/keyspace[?options]`.

        The URL's `replication_factor` and consistency options apply unless `options`
        give `replication` or `consistency`.
        """
        parsed = parse_url(url)
        options.setdefault("replication", parsed.replication)
        options.setdefault("consistency", parsed.consistency)
        return cls.connect(
            parsed.hosts,
            parsed.port,
            keyspace=parsed.keyspace,
            table=parsed.table,
            username=parsed.username,
            password=parsed.password,
            **options,
        )

    # -- plumbing --------------------------------------------------------------------------

    @property
    def prepared_queries(self) -> list[str]:
        """The CQL text of every statement prepared so far (for audits: no values in it)."""
        return self._requests.prepared_queries

    @property
    def dimension(self) -> int | None:
        return self._dimension

    @property
    def max_in_flight(self) -> int:
        """The bound on outstanding requests."""
        return self._requests.gate.limit

    @property
    def in_flight(self) -> int:
        """Requests outstanding now."""
        return self._requests.gate.in_flight

    @property
    def peak_in_flight(self) -> int:
        """The most requests ever outstanding at once (never above `max_in_flight`)."""
        return self._requests.gate.peak

    def _read_dimension(self) -> int | None:
        """D of the node table's `vector<float, D>` column, or None if there is no table."""
        rows = self._requests.execute_now(SELECT_DIMENSION, (self.keyspace, f"{self.table}_nodes"))
        if not rows:
            return None
        match = VECTOR_TYPE.fullmatch(rows[0][0])
        if match is None:
            raise StoreOpenError(
                f"table {self.keyspace}.{self.table}_nodes is not a graphstore table "
                f"(its embedding column is {rows[0][0]})"
            )
        return int(match.group(1))

    def _create_schema(self, dimension: int) -> None:
        """Create whatever tables and indexes are missing (IF NOT EXISTS: safe to repeat).

        Run at the first write of each storage object, so an earlier interrupted creation
        is completed; the dimension of an existing node table wins over `dimension`.
        """
        with self._requests.lock:
            if self._schema_ready:
                return
            size = int(self._dimension or dimension)  # an int: nothing else reaches the DDL
            new = self._dimension is None
            for statement in SCHEMA:
                self.session.execute(
                    statement.format(**self._requests.names, dimension=size), timeout=DDL_TIMEOUT
                )
            if new:
                self._ranges.mark_new()
            self._dimension = self._read_dimension()
            self._schema_ready = True

    # -- Storage ---------------------------------------------------------------------------

    async def upsert(self, nodes: Sequence[StoredNode]) -> None:
        latest = {stored.node.id: stored for stored in nodes}  # a repeated id: the last wins
        if not latest:
            return
        if not self._schema_ready:
            first = next(iter(latest.values())).embedding.size
            try:
                await asyncio.to_thread(self._create_schema, first)
            except StoreOpenError:
                raise
            except Exception as error:
                raise StorageError(
                    f"creating the Cassandra tables failed: {one_line(error)}"
                ) from error
        for stored in latest.values():
            if stored.embedding.size != self._dimension:
                raise InvalidInputError(
                    f"embedding of node {stored.node.id!r} has dimension "
                    f"{stored.embedding.size}; the store holds {self._dimension}"
                )
        values = {
            node_id: FilterValues.of_metadata(s.node.metadata) for node_id, s in latest.items()
        }
        usable = await self._ranges.ensure(set().union(*map(wanted, values.values())))
        await asyncio.gather(
            *(
                self._write(stored, cells(values[node_id], usable))
                for node_id, stored in latest.items()
            )
        )

    async def _write(self, stored: StoredNode, filled: dict[str, Any]) -> None:
        """One node: read its old links and filter terms, then one atomic batch (`filled`:
        the node's range columns)."""
        node = stored.node
        old = await self._requests.run(SELECT_LINKS, (node.id,))
        stale = incoming_tags(decode_links(old[0][0])) if old else frozenset()
        current = incoming_tags(node.links)
        if old:  # clear the range columns of values the node no longer has
            before = wanted(FilterValues.of_terms(old[0][1] or ())) & self._ranges.known
            filled = {name: None for column in before for name in (column.lo, column.hi)} | filled
        vector = stored.embedding.astype(np.float32)
        outgoing = sorted(outgoing_tags(node.links))
        terms = sorted(filter_terms(node.metadata))
        delete_tag = await self._requests.prepared(DELETE_TAG)
        insert_tag = await self._requests.prepared(INSERT_TAG)
        insert_node = await self._requests.prepared(INSERT_NODE)
        batch = self._requests.batch()
        metadata = json.dumps(node.metadata, ensure_ascii=False)
        links = encode_links(node.links)
        # The node row first: the batch is routed by its first statement's partition.
        batch.add(insert_node, (node.id, node.text, metadata, links, vector, outgoing, terms))
        for kind, tag in sorted(stale - current):
            batch.add(delete_tag, (kind, tag, node.id))
        for kind, tag in sorted(current):
            batch.add(insert_tag, (kind, tag, node.id, vector, outgoing, terms))
        for template, bound in updates(node.id, current, filled):
            batch.add(await self._requests.prepared(template), bound)
        try:
            await self._requests.execute(batch)
        except StorageError as error:
            if "too large" not in str(error).lower():
                raise
            raise StorageError(
                f"node {node.id!r} with {len(current)} incoming tags is too large for one "
                "batch; raise batch_size_fail_threshold in cassandra.yaml"
            ) from error

    async def delete(self, ids: Sequence[str]) -> int:
        if self._dimension is None:
            return 0
        found = await asyncio.gather(*(self._delete(node_id) for node_id in dict.fromkeys(ids)))
        return sum(found)

    async def _delete(self, node_id: str) -> bool:
        """One node: read its links, then one atomic batch removing it and its tag rows."""
        rows = await self._requests.run(SELECT_LINKS, (node_id,))
        if not rows:
            return False
        delete_tag = await self._requests.prepared(DELETE_TAG)
        batch = self._requests.batch()
        batch.add(await self._requests.prepared(DELETE_NODE), (node_id,))
        for kind, tag in sorted(incoming_tags(decode_links(rows[0][0]))):
            batch.add(delete_tag, (kind, tag, node_id))
        await self._requests.execute(batch)
        return True

    async def get(self, ids: Sequence[str]) -> list[StoredNode]:
        if self._dimension is None or not ids:
            return []
        unique = list(dict.fromkeys(ids))
        pages = await asyncio.gather(
            *(self._requests.run(SELECT_NODE, (node_id,)) for node_id in unique)
        )
        found = {row[0]: stored_node(row) for rows in pages for row in rows}
        return [found[node_id] for node_id in ids if node_id in found]

    async def _plan(self, where: Condition) -> Plan:
        """The queries for `where`, knowing the range columns other processes added."""
        if range_columns(where) - self._ranges.known:
            await self._ranges.refresh()
        return plan(where, self._ranges.known, self._ranges.complete)

    async def search(self, vector: Vector, k: int, where: Condition) -> list[ScoredNode]:
        if self._dimension is None or k <= 0:
            return []
        query = vector.astype(np.float32)

        async def fetch(branch: Branch, limit: int | None) -> list[ScoredNode]:
            if limit is None:
                rows = await self._requests.run(SCAN_SEARCH, branch.values, branch.cql, " WHERE ")
                scored = [
                    ScoredNode(item, float(item.embedding @ query))
                    for item in map(stored_node, rows)
                ]
                return sorted(scored, key=lambda found: (-found.similarity, found.stored.node.id))
            rows = await self._requests.run(
                SEARCH_NODES, (query, *branch.values, query, limit), branch.cql, " WHERE "
            )
            found = [ScoredNode(stored_node(row), 2.0 * float(row[5]) - 1.0) for row in rows]
            # Best first by the exact score, whatever order the ANN index merge produced.
            return sorted(found, key=lambda scored: -scored.similarity)

        ranking = Ranking[ScoredNode](
            lambda found: found.stored.node.id,
            lambda found: found.similarity,
            lambda found: matches(where, found.stored.node.metadata),
        )
        found = await top_k(await self._plan(where), k, fetch, ranking)
        return found if self.replicas == 1 else await self._current(found, query, where)

    async def _current(
        self, found: list[ScoredNode], query: Vector, where: Condition
    ) -> list[ScoredNode]:
        """`found` read again at the read level: an ANN query read one replica, which may
        still hold a passage deleted or changed since (`graphstore.cassandra.consistency`)."""
        current = await self.get([item.stored.node.id for item in found])
        rescored = [
            ScoredNode(stored, float(stored.embedding @ query))
            for stored in current
            if matches(where, stored.node.metadata)
        ]
        return sorted(rescored, key=lambda item: (-item.similarity, item.stored.node.id))

    async def search_hits(self, vector: Vector, k: int, where: Condition) -> list[TagHit]:
        if self._dimension is None or k <= 0:
            return []
        query = vector.astype(np.float32)
        return await self._hits(query, k, where, (SEARCH_HITS, SCAN_HITS, " WHERE "), ())

    async def _hits(
        self,
        query: Vector,
        k: int,
        where: Condition,
        templates: tuple[str, str, str],
        keys: tuple[Any, ...],
    ) -> list[TagHit]:
        """The `k` hits nearest `query` passing `where`: `templates` are an ANN query, the
        same without ANN (beyond the ANN limit) and the prefix of their filter restrictions,
        both restricted by the bound `keys` first."""
        search, scan, prefix = templates
        terms: dict[str, frozenset[str]] = {}

        async def fetch(branch: Branch, limit: int | None) -> list[TagHit]:
            if limit is None:
                rows = await self._requests.run(scan, (*keys, *branch.values), branch.cql, prefix)
                hits = ranked(rows, query)
            else:
                bound = (query, *keys, *branch.values, query, limit)
                rows = await self._requests.run(search, bound, branch.cql, prefix)
                hits = tag_hits(rows)
            terms.update((row[0], frozenset(row[-1] or ())) for row in rows)
            return hits

        ranking = Ranking[TagHit](
            lambda hit: hit.id,
            lambda hit: hit.similarity,
            lambda hit: holds(where, FilterValues.of_terms(terms[hit.id])),
        )
        return await top_k(await self._plan(where), k, fetch, ranking)

    async def search_tag(
        self, tag: TagKey, vector: Vector, k: int, where: Condition
    ) -> list[TagHit]:
        if self._dimension is None or k <= 0:
            return []
        query = vector.astype(np.float32)
        kind, name = tag
        if tag not in self._large_tags:
            # A small partition read whole, checked against the filter and ranked here costs
            # the node far less than an ANN query; most tags (a title, a name) hold a few rows.
            rows = await self._requests.run(READ_TAG, (kind, name, k + 1))
            if len(rows) <= k:
                hits = ranked(rows, query)
                if where == EVERYTHING:
                    return hits
                passing = {
                    row[0] for row in rows if holds(where, FilterValues.of_terms(row[3] or ()))
                }
                return [hit for hit in hits if hit.id in passing]
            if len(self._large_tags) < LARGE_TAGS_REMEMBERED:
                self._large_tags.add(tag)
        return await self._hits(query, k, where, (SEARCH_TAG, SCAN_TAG, " AND "), (kind, name))

    async def tag_sizes(
        self, tags: Sequence[TagKey], where: Condition = EVERYTHING
    ) -> dict[TagKey, int]:
        """One count per tag partition and query of the filter's plan, concurrently (rows
        read and checked here when the plan is not one exact query)."""
        if self._dimension is None:
            return dict.fromkeys(tags, 0)
        planned = await self._plan(where)
        exact = planned.single_exact
        if exact is not None:
            pages = await asyncio.gather(
                *(self._requests.run(COUNT_TAG, (*tag, *exact.values), exact.cql) for tag in tags)
            )
            return {tag: int(rows[0][0]) for tag, rows in zip(tags, pages, strict=True)}

        async def members(tag: TagKey, branch: Branch) -> set[str]:
            rows = await self._requests.run(TAG_MEMBERS, (*tag, *branch.values), branch.cql)
            return {
                node_id
                for node_id, terms in rows
                if branch.exact or holds(where, FilterValues.of_terms(terms or ()))
            }

        async def size(tag: TagKey) -> int:
            found = await asyncio.gather(*(members(tag, branch) for branch in planned.branches))
            return len(set().union(*found))

        return dict(zip(tags, await asyncio.gather(*(size(tag) for tag in tags)), strict=True))

    async def stats(self, top_tags: int = 20) -> StoreStats:
        """Counts by full scans of both tables (see the class docstring)."""
        if self._dimension is None:
            return StoreStats(nodes=0, tag_rows=0, tags=0, dimension=None)
        nodes, tag_keys = await asyncio.gather(
            self._requests.run(SCAN_NODES, ()), self._requests.run(SCAN_TAG_KEYS, ())
        )
        counts = Counter((kind, tag) for kind, tag in tag_keys)
        frequent = sorted(counts, key=lambda key: (-counts[key], key))[:top_tags]
        return StoreStats(
            nodes=len(nodes),
            tag_rows=len(tag_keys),
            tags=len(counts),
            dimension=self._dimension,
            tag_frequencies={key: counts[key] for key in frequent},
        )

    check_note = (
        "after a node was stopped or restarted, Cassandra may still be replaying logged batches "
        "(its batchlog, usually within a few minutes): run check again before repairing anything"
    )

    async def node_ids(self) -> list[str]:
        if self._dimension is None:
            return []
        return [row[0] for row in await self._requests.run(SCAN_NODE_IDS, ())]

    async def check(self) -> list[str]:
        """Compare both tables in full: tag rows per node, and their denormalized columns."""
        if self._dimension is None:
            return []
        node_rows, tag_rows = await asyncio.gather(
            self._requests.run(SCAN_NODES, ()), self._requests.run(SCAN_TAGS, ())
        )
        nodes = {
            node_id: (incoming_tags(decode_links(links)), tag_set(outgoing), frozenset(terms or ()))
            for node_id, links, outgoing, terms in node_rows
        }
        problems: list[str] = []
        rows: dict[str, set[TagKey]] = {}
        for kind, tag, node_id, outgoing, terms in tag_rows:
            if node_id not in nodes:
                problems.append(f"tag row ({kind!r}, {tag!r}) points at missing node {node_id!r}")
                continue
            rows.setdefault(node_id, set()).add((kind, tag))
            _, node_outgoing, node_terms = nodes[node_id]
            if tag_set(outgoing) != node_outgoing or frozenset(terms or ()) != node_terms:
                problems.append(
                    f"tag row ({kind!r}, {tag!r}) of node {node_id!r} carries stale "
                    "outgoing tags or filter terms"
                )
        for node_id, (expected, _, _) in nodes.items():
            actual = rows.get(node_id, set())
            if expected != actual:
                problems.append(
                    f"node {node_id!r} has tag rows {sorted(actual)} "
                    f"but incoming links {sorted(expected)}"
                )
        return problems

    async def drop(self) -> None:
        """Drop both tables with their indexes: every node is gone and the dimension unset.

        Not part of `Storage`: for tests and resets, since each table and SAI index costs the
        server heap whether or not it holds data.
        """

        def drop_tables() -> None:
            with self._requests.lock:
                names = self._requests.names
                for table in (names["nodes"], names["tags"], names["meta"]):
                    self.session.execute(f"DROP TABLE IF EXISTS {table}", timeout=DDL_TIMEOUT)
                self._requests.forget()
                self._ranges.reset()
                self._dimension = None
                self._schema_ready = False

        await asyncio.to_thread(drop_tables)

    async def close(self) -> None:
        """Shut the cluster down if `connect` made it; a caller's session is left open."""
        if self._cluster is not None:
            cluster, self._cluster = self._cluster, None
            await asyncio.to_thread(cluster.shutdown)
