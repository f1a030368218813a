"""`CassandraStorage`: the `Storage` interface on a node table and per-tag tables.

`<table>_nodes` holds one row per node (text, metadata and links as JSON, the embedding, and
the bucket of each of its rows in a hot tag); the tag tables hold one row per (incoming tag,
node) carrying the node's embedding, outgoing tags and filter terms, so a traversal step reads
no node rows.  A tag's rows are in its small part (`<table>_tags`, no vector index, read whole
and checked against the filter and ranked here) until it turns hot, and in its buckets
(`<table>_hot`, SAI-indexed, partition-restricted ANN queries) after: `layout` says where a
row goes, `hot_tags` keeps the directory of hot tags, `writes` writes, `tag_reads` reads,
`check` compares.

Both partition-restricted ANN and ANN with `CONTAINS` on an SAI `VALUES` index were checked
on Cassandra 5.0.9.  SAI's `similarity_cosine` is (1 + cos) / 2; scores are mapped back to
plain cosine so they equal the embedded backend's.  Filters: `graphstore.cassandra.filters`
(the queries) and `graphstore.cassandra.ranges` (the range columns they use).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from contextlib import suppress
from typing import Any

import numpy as np
from cassandra import AlreadyExists, ProtocolVersion, UnresolvableContactPoints
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy

from graphstore import vector_codec
from graphstore.cassandra.check import scanned_problems, scanned_stats
from graphstore.cassandra.consistency import Consistency, replicas_needed
from graphstore.cassandra.filters import (
    ANN_OVERFETCH,
    ANN_ROWS,
    Branch,
    Plan,
    Ranking,
    plan,
    range_columns,
    top_k,
)
from graphstore.cassandra.hot_tags import HotTags
from graphstore.cassandra.layout import TagLayout
from graphstore.cassandra.queries import (
    CREATE_META,
    INSERT_MODEL,
    REPLACE_MODEL,
    SCAN_HITS,
    SCAN_HOT_BUCKET,
    SCAN_METADATA,
    SCAN_NODE_IDS,
    SEARCH_HITS,
    SEARCH_HOT,
    SELECT_MODEL,
    SELECT_NODES,
)
from graphstore.cassandra.ranges import MAX_RANGE_COLUMNS, RangeColumns
from graphstore.cassandra.repair import repair_layout
from graphstore.cassandra.rows import ranked, stored_node, tag_hits
from graphstore.cassandra.schema import (
    DDL_TIMEOUT,
    SCHEMA,
    SELECT_KEYSPACE,
    SELECT_TABLES,
    UPGRADE,
    agree_on_schema,
    placements,
    replication_cql,
    replication_factor,
    run_ddl,
    schema_host,
)
from graphstore.cassandra.server_warnings import DRIVER_LOGGER, OwnServerWarnings
from graphstore.cassandra.session import (
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_RETRIES,
    DEFAULT_RETRY_WINDOW,
    DEFAULT_TIMEOUT,
    Requests,
    nodes_by_data_centre,
    said,
)
from graphstore.cassandra.tables import PARTS, Tables, check_new_prefix
from graphstore.cassandra.tag_reads import TagReader
from graphstore.cassandra.url import DEFAULT_PORT, DEFAULT_TABLE, identifier, parse_url
from graphstore.cassandra.writes import Writer, batch_limit, check_batch_size
from graphstore.errors import InvalidInputError, StorageError, StoreOpenError
from graphstore.filters import EVERYTHING, Condition, FilterValues, holds, matches
from graphstore.links import TagKey
from graphstore.nodes import Node, StoredNode, TagHit, Vector
from graphstore.storage import ScoredNode, Storage, StoreStats, values_by_id

logger = logging.getLogger(__name__)


def _drop_if_new(cluster: Cluster, keyspace: str, created: bool) -> None:
    """Shut down a cluster whose store could not be opened, first dropping the keyspace
    this opening `created` while it holds no table (a consistency level the cluster cannot
    serve failed right after it was made, and the keyspace stayed, refusing the next try
    with other settings)."""
    if created:
        with suppress(Exception):
            session = cluster.connect()
            if not session.execute(session.prepare(SELECT_TABLES), (keyspace,)).all():
                session.execute(f'DROP KEYSPACE IF EXISTS "{keyspace}"', timeout=DDL_TIMEOUT)
    cluster.shutdown()


def _create_keyspace(session: Any, keyspace: str, replication_map: str) -> bool:
    """Create the keyspace; false when another process made it first (then it is theirs
    too, and a failure of this process must not drop it: `drop_created_keyspace`)."""
    try:
        run_ddl(session, f'CREATE KEYSPACE "{keyspace}" WITH replication = {replication_map}')
    except AlreadyExists:
        return False
    return True


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
    - Each node is one LOGGED batch (`writes`: its size, and concurrent writers).  Only hot
      tags' rows are vector-indexed; `layout` (a `TagLayout`) sets when a tag turns hot and
      how many rows a bucket takes (tests make both small).
    - A store made before hot tags existed is upgraded when opened: two columns added, the
      hot tables created, no row rewritten (a role that may not ALTER gets a one-line error).
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
        layout: TagLayout | None = None,
    ) -> None:
        vector_codec.install()
        self.keyspace = identifier("keyspace", keyspace)
        self.table = identifier("table", table)
        self.session = session
        self.timeout = timeout
        self._cluster: Any = None
        self._schema_ready = False
        self.created_keyspace = False
        """Whether `connect` created the keyspace (`drop_created_keyspace`)."""
        names = {part: f'"{self.keyspace}"."{self.table}_{part}"' for part in PARTS}
        self._server_warnings = OwnServerWarnings(
            f"{self.keyspace}.{self.table}_{part}" for part in PARTS
        )
        logging.getLogger(DRIVER_LOGGER).addFilter(self._server_warnings)
        self._requests = Requests(
            session,
            names | {"table": self.table},
            max_in_flight=max_in_flight,
            timeout=timeout,
            max_retries=max_retries,
            retry_window=retry_window,
            consistency=Consistency.of(consistency),
        )
        self._ranges = RangeColumns(self._requests, session, max_range_columns)
        self._tables = Tables(session, self._requests, self.keyspace, self.table)
        self._hot = HotTags(self._requests, layout or TagLayout())
        self._writer = Writer(self._requests, self._hot, self._ranges)
        self._reader = TagReader(self._requests, self._hot, self._bucket_hits, self._plan)
        try:
            keyspace_rows = self._requests.execute_now(SELECT_KEYSPACE, (self.keyspace,))
            if not keyspace_rows:
                raise StoreOpenError(
                    f"Cassandra keyspace {self.keyspace!r} does not exist "
                    "(CassandraStorage.connect creates it)"
                )
            replication = keyspace_rows[0][0]
            self.replicas = replication_factor(replication)
            """Replicas of each row (in one data centre)."""
            self.max_write_bytes = batch_limit(self._requests)
            """The node's `batch_size_fail_threshold` (None: not known)."""
            placed = placements(replication, nodes_by_data_centre(session))
            self._check_levels(placed)
            self._warn_if_short_of_nodes(placed)
            self._dimension: int | None = None
            self._open_tables()
        except StoreOpenError:
            raise
        except Exception as error:
            raise StoreOpenError(f"cannot open the Cassandra store: {said(error)}") from error

    def _check_levels(self, placed: list[tuple[int, int]]) -> None:
        """Refuse consistency levels that no request can meet: they wait for more replicas
        than the keyspace keeps, or than the cluster has nodes to hold (`placements`)."""
        consistency = self._requests.consistency
        level = consistency.beyond(placed)
        if level is None:
            return
        kept, held = max(placed, key=lambda placement: (placement[1], placement[0]))
        needs = f"consistency {level} needs {replicas_needed(level, kept)} replicas of each row"
        if held >= kept:
            raise StoreOpenError(
                f"{needs}, but keyspace {self.keyspace!r} keeps {kept}: choose another "
                "level, or a keyspace with a higher replication_factor"
            )
        raise StoreOpenError(
            f"{needs}, but keyspace {self.keyspace!r} keeps {kept} on {held} "
            f"{'node' if held == 1 else 'nodes'}: add nodes, or choose a lower "
            "replication_factor or another level"
        )

    def _warn_if_short_of_nodes(self, placed: list[tuple[int, int]]) -> None:
        """Log a warning when the keyspace keeps more replicas of a row than the cluster
        has nodes to hold: Cassandra accepts it (nodes may join later), but a quorum of the
        factor then needs every node, so one node down stops QUORUM reads and writes."""
        for kept, held in placed:
            if held >= kept:
                continue
            quorum = replicas_needed("QUORUM", kept)
            logger.warning(
                "graphstore: keyspace %r keeps %d replicas of each row, but the cluster has "
                "%d %s to hold them: %s",
                self.keyspace,
                kept,
                held,
                "node" if held == 1 else "nodes",
                f"QUORUM cannot be met until {quorum - held} more join"
                if quorum > held
                else f"QUORUM needs {quorum} of those {held} up",
            )

    def _open_tables(self) -> None:
        """Read the store's tables, when they exist: their dimension and layout (blocking)."""
        with self._requests.lock:
            if self._dimension is not None:
                return
            dimension = self._tables.dimension()
            if dimension is None:
                return
            self._tables.upgrade(dimension)
            self._writer.small_as_vectors = self._tables.small_as_vectors()
            self._writer.outgoing_sets = self._tables.outgoing_sets()
            self._ranges.open_now()
            self._dimension = dimension

    async def _present(self) -> bool:
        """Whether the store's tables exist.  While they do not, each call looks again, so a
        process opened on an empty keyspace sees another process's first write."""
        if self._dimension is None:
            try:
                await asyncio.to_thread(self._open_tables)
            except StoreOpenError:
                raise
            except Exception as error:
                raise StorageError(f"cannot open the Cassandra store: {said(error)}") from error
        return self._dimension is not None

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
        create: bool = True,
        **options: Any,
    ) -> CassandraStorage:
        """Open a cluster connection, create the keyspace if missing, and own the cluster.

        With `create` false, a store that does not exist (no keyspace, or no node table in
        it) is a `StoreOpenError` instead: a mistyped name is not an empty store.

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
                # Cassandra 5's own protocol: the driver starts from DSE's versions and
                # logged two "Downgrading core protocol version" warnings on every open.
                protocol_version=ProtocolVersion.V5,
                auth_provider=auth,
                ssl_context=ssl_context,
                execution_profiles={
                    EXEC_PROFILE_DEFAULT: ExecutionProfile(
                        load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy())
                    )
                },
            )
        except UnresolvableContactPoints as error:  # its message is an empty dict
            raise StoreOpenError(
                f"cannot open Cassandra at {where}: no host name resolves to an address"
            ) from error
        except Exception as error:
            raise StoreOpenError(f"cannot open Cassandra at {where}: {said(error)}") from error
        created = False
        try:
            session = cluster.connect()
            select_keyspace = session.prepare(SELECT_KEYSPACE)
            host = schema_host(session)
            existed = bool(session.execute(select_keyspace, (keyspace,), host=host).all())
            if not existed and not create:
                raise StoreOpenError(f"no store at {where}: keyspace {keyspace!r} does not exist")
            if not existed:  # a role confined to an existing keyspace may not CREATE one
                created = _create_keyspace(session, keyspace, replication_map)
            if not created:  # made by another process a moment ago, perhaps: on every node?
                agree_on_schema(session)
            storage = cls(session, keyspace, table, **options)
            storage.created_keyspace = created
            if storage.dimension is None and not create:
                raise StoreOpenError(
                    f"no store at {where}: keyspace {keyspace!r} has no table {table}_nodes "
                    "(no passage was ever stored under that table name)"
                )
            if replication is not None and storage.replicas != replication_factor(replication):
                raise StoreOpenError(
                    f"Cassandra keyspace {keyspace!r} exists with replication factor "
                    f"{storage.replicas}, not {replication_factor(replication)}: change it with "
                    "ALTER KEYSPACE, then run a full repair"
                )
        except (InvalidInputError, StoreOpenError):
            _drop_if_new(cluster, keyspace, created)
            raise
        except Exception as error:
            _drop_if_new(cluster, keyspace, created)
            raise StoreOpenError(f"cannot open Cassandra at {where}: {said(error)}") from error
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

    def _create_schema(self, dimension: int) -> None:
        """Create whatever tables, columns and indexes are missing (safe to repeat).

        Run at the first write of each storage object, so an earlier interrupted creation
        is completed; the dimension of an existing node table wins over `dimension`.  A
        complete store runs no DDL, so a role that may only modify rows can write to it.
        """
        with self._requests.lock:
            if self._schema_ready:
                return
            self._open_tables()
            if self._dimension is None:
                check_new_prefix(self.table)
                self._tables.run([*SCHEMA, *UPGRADE], dimension)
                self._ranges.mark_new()
                self._open_tables()  # what was made, or what another process made first
            elif not self._tables.complete():
                self._tables.run([*SCHEMA, *UPGRADE], self._dimension)
            self._schema_ready = True

    # -- Storage ---------------------------------------------------------------------------

    def check_write_size(self, node: Node, dimension: int | None) -> None:
        check_batch_size(node, dimension or self._dimension, self.max_write_bytes)

    async def upsert(self, nodes: Sequence[StoredNode]) -> None:
        latest = {stored.node.id: stored for stored in nodes}  # a repeated id: the last wins
        if not latest:
            return
        if not self._schema_ready:
            first = next(iter(latest.values())).embedding.size
            try:
                await asyncio.to_thread(self._create_schema, first)
            except (StoreOpenError, InvalidInputError):
                raise
            except Exception as error:
                raise StorageError(
                    f"creating the Cassandra tables failed: {said(error)}"
                ) from error
        for stored in latest.values():
            if stored.embedding.size != self._dimension:
                raise InvalidInputError(
                    f"embedding of node {stored.node.id!r} has dimension "
                    f"{stored.embedding.size}; the store holds {self._dimension}"
                )
        await self._writer.upsert(list(latest.values()))

    async def delete(self, ids: Sequence[str]) -> int:
        if not await self._present():
            return 0
        return await self._writer.delete(list(dict.fromkeys(ids)))

    async def get(self, ids: Sequence[str]) -> list[StoredNode]:
        if not ids or not await self._present():
            return []
        rows = await self._requests.run_keys(
            SELECT_NODES, [(node_id,) for node_id in dict.fromkeys(ids)]
        )
        found = {row[0]: stored_node(row) for row in rows}
        return [found[node_id] for node_id in ids if node_id in found]

    async def _plan(self, where: Condition) -> Plan:
        """The queries for `where`, knowing the range columns other processes added."""
        if range_columns(where) - self._ranges.known:
            await self._ranges.refresh()
        return plan(where, self._ranges.known, self._ranges.complete)

    async def search(self, vector: Vector, k: int, where: Condition) -> list[ScoredNode]:
        """The nearest passages as `search_hits` finds them, then read by key (`_current`),
        taking more in place of those the read finds gone."""
        if k <= 0 or not await self._present():
            return []
        query = vector.astype(np.float32)
        wanted = k
        while True:
            hits = await self.search_hits(query, wanted, where)
            current = await self._current([hit.id for hit in hits], query, where)
            if len(current) >= k or len(hits) < wanted:
                return current[:k]
            wanted += len(hits) - len(current)

    async def _current(
        self, node_ids: list[str], query: Vector, where: Condition
    ) -> list[ScoredNode]:
        """The passages of `node_ids` read by key at the read level, scored and filtered.  ANN
        rows are not current: a query reads one replica, which may lag the others
        (`graphstore.cassandra.consistency`), and after a restart Cassandra 5.0.9's vector
        index offers rows deleted since, even on a single node, where key reads and
        `count(*)` see them gone."""
        current = await self.get(node_ids)
        rescored = [
            ScoredNode(stored, float(stored.embedding @ query))
            for stored in current
            if matches(where, stored.node.metadata)
        ]
        return sorted(rescored, key=lambda item: (-item.similarity, item.stored.node.id))

    async def search_hits(self, vector: Vector, k: int, where: Condition) -> list[TagHit]:
        if k <= 0 or not await self._present():
            return []
        # The hits carry no nodes: a search reads those it returns by key at its end, since
        # ANN rows may be gone (see `_current`).
        templates = (SEARCH_HITS, SCAN_HITS, " WHERE ")
        return await self._hits(
            vector.astype(np.float32, copy=False),
            k,
            where,
            templates,
            (),
            overfetch=ANN_OVERFETCH,
            least=ANN_ROWS,
        )

    async def _hits(
        self,
        query: Vector,
        k: int,
        where: Condition,
        templates: tuple[str, str, str],
        keys: tuple[Any, ...],
        *,
        overfetch: int = 1,
        least: int = 0,
    ) -> list[TagHit]:
        """The `k` hits nearest `query` passing `where`: `templates` are an ANN query, the
        same without ANN (beyond the ANN limit) and the prefix of their filter restrictions,
        both restricted by the bound `keys` first; `overfetch` and `least` as in `top_k`."""
        search, scan, prefix = templates
        terms: dict[str, frozenset[str]] = {}

        async def fetch(branch: Branch, limit: int | None) -> list[TagHit]:
            if limit is None:
                rows = await self._requests.run(scan, (*keys, *branch.values), branch.cql, prefix)
                hits = ranked(rows, query, len(rows))
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
        return await top_k(
            await self._plan(where), k, fetch, ranking, overfetch=overfetch, least=least
        )

    async def _bucket_hits(
        self, query: Vector, k: int, where: Condition, bucket: tuple[str, str, int]
    ) -> list[TagHit]:
        """The `k` hits of one hot tag's bucket nearest `query` that pass `where`."""
        return await self._hits(query, k, where, (SEARCH_HOT, SCAN_HOT_BUCKET, " AND "), bucket)

    async def search_tag(
        self, tag: TagKey, vector: Vector, k: int, where: Condition
    ) -> list[TagHit]:
        return (await self.search_tags([tag], vector, k, where))[0]

    async def search_tags(
        self,
        tags: Sequence[TagKey],
        vector: Vector,
        k: int,
        where: Condition,
        concurrency: int = 16,
        *,
        sizes: dict[TagKey, int] | None = None,
        pages: dict[TagKey, int] | None = None,
    ) -> list[list[TagHit]]:
        """One wave for all `tags` (`tag_reads`): small parts by `IN`, buckets by ANN; the
        bound on requests is `max_in_flight`, not `concurrency`.  The sizes and pages of
        small tags (and, unfiltered, the sizes of hot ones) come with it."""
        if k <= 0 or not await self._present():
            return [[] for _ in tags]
        read = await self._reader.search(tags, vector.astype(np.float32), k, where)
        if sizes is not None:
            sizes.update(read.sizes)
        if pages is not None:
            pages.update(read.pages)
        return read.hits

    async def tag_sizes(
        self, tags: Sequence[TagKey], where: Condition = EVERYTHING
    ) -> dict[TagKey, int]:
        """Each small part read (keys only) and checked here, plus each hot tag's directory
        count (or, with a filter, counts per bucket), concurrently."""
        if not await self._present():
            return dict.fromkeys(tags, 0)
        return await self._reader.sizes(tags, where)

    async def tag_pages(
        self, tags: Sequence[TagKey], where: Condition = EVERYTHING
    ) -> dict[TagKey, int]:
        """Each tag's keys read (the small part, and a hot tag's buckets) and counted here,
        concurrently."""
        if not await self._present():
            return dict.fromkeys(tags, 0)
        return await self._reader.pages(tags, where)

    async def recorded_model(self) -> str | None:
        if not await self._present():  # no passages yet, so nothing to mix with
            return None
        rows = await self._requests.run(SELECT_MODEL, ())
        return str(rows[0][0]) if rows else None

    async def record_model(self, model: str, replacing: str | None = None) -> str:
        """One lightweight transaction, so two first writers agree on one model."""
        if not await self._present():  # the settings table comes before the first node
            try:
                await asyncio.to_thread(run_ddl, self.session, self._requests.cql(CREATE_META))
            except Exception as error:
                raise StorageError(f"creating the store failed: {said(error)}") from error
        if replacing is None:
            (applied, *current) = (await self._requests.run(INSERT_MODEL, (model,)))[0]
        else:
            replace = (model, replacing)
            (applied, *current) = (await self._requests.run(REPLACE_MODEL, replace))[0]
        return model if applied else str(current[-1])

    async def stats(self, top_tags: int = 20) -> StoreStats:
        """Counts by full scans of the node table and both tag tables."""
        await self._present()
        if self._dimension is None:
            return StoreStats(nodes=0, tag_rows=0, tags=0, dimension=None)
        return await scanned_stats(self._requests, self._dimension, top_tags)

    read_ahead = 16
    """A traversal step also reads the tags of the 16 likeliest next selections: a round
    trip costs more than the extra tags, which are read in concurrent chunks (`IN_TAGS`).
    Widths 4, 8 and 16 measure the same on both dev sets; 0 costs a third more (HotpotQA)."""

    check_note = (
        "after a node was stopped or restarted, Cassandra may still be replaying logged batches "
        "(its batchlog, usually within a few minutes): run check again, and if the problems "
        "stay, check --repair while nothing else writes"
    )

    async def node_ids(self) -> list[str]:
        if not await self._present():
            return []
        return [row[0] for row in await self._requests.run(SCAN_NODE_IDS, ())]

    async def metadata_values(self, key: str) -> dict[str, object]:
        if not await self._present():
            return {}
        return values_by_id(await self._requests.run(SCAN_METADATA, ()), key)

    async def check(self) -> list[str]:
        """Scan every table and compare (`check.scanned_problems`)."""
        if not await self._present():
            return []
        return await scanned_problems(self._requests)

    async def repair(self) -> list[str]:
        """Scan every table and mend the tag rows and counts (`repair.repair_layout`)."""
        if not await self._present():
            return []
        return await repair_layout(self._requests, self._hot, self.get, self.upsert)

    async def drop(self) -> None:
        """Drop every table with its indexes: every node is gone and the dimension unset.

        Not part of `Storage`: for tests and resets, since each table and SAI index costs the
        server heap whether or not it holds data.
        """

        def drop_tables() -> None:
            with self._requests.lock:
                self._tables.drop()
                self._requests.forget()
                self._ranges.reset()
                self._hot.forget()
                self._dimension = None
                self._schema_ready = False

        await asyncio.to_thread(drop_tables)

    async def drop_created_keyspace(self) -> None:
        """Drop the keyspace `connect` created, if it holds no table yet: a command that
        failed before its first write leaves nothing behind.  (Once a table is there, another
        process may be using the keyspace: a check and a drop cannot be one step.)"""
        if not self.created_keyspace:
            return

        def drop_if_unused() -> None:
            if not self._requests.execute_now(SELECT_TABLES, (self.keyspace,)):
                self.session.execute(
                    f'DROP KEYSPACE IF EXISTS "{self.keyspace}"', timeout=DDL_TIMEOUT
                )

        await asyncio.to_thread(drop_if_unused)

    async def close(self) -> None:
        """Shut the cluster down if `connect` made it; a caller's session is left open."""
        logging.getLogger(DRIVER_LOGGER).removeFilter(self._server_warnings)
        if self._cluster is not None:
            cluster, self._cluster = self._cluster, None
            await asyncio.to_thread(cluster.shutdown)
