"""The Cassandra 5.0 backend: a node table and a tag table, each with SAI vector indexes.

`<table>_nodes` holds one row per node (text, metadata and links as JSON, the embedding);
`<table>_tags` holds one row per (incoming tag, node), partitioned by tag and carrying the
node's embedding, outgoing tags and filter terms, so a traversal step reads no node rows.
`search_tag` reads a small tag's partition whole (at most k + 1 rows) and ranks it by exact
cosine here; only a tag holding more than k rows, or a filtered search, takes the
partition-restricted ANN query:

    SELECT node_id, embedding, outgoing, similarity_cosine(embedding, ?) FROM <table>_tags
    WHERE kind = ? AND tag = ? [AND filter_terms CONTAINS ? ...]
    ORDER BY embedding ANN OF ? LIMIT ?

Both partition-restricted ANN and ANN with `CONTAINS` on an SAI `VALUES` index were checked
on Cassandra 5.0.9.  SAI's `similarity_cosine` is (1 + cos) / 2; scores are mapped back to
plain cosine so they equal the embedded backend's.

Hot tags: a tag that a large share of nodes link in to makes one wide partition, and its
ANN query walks one large per-partition candidate set on one replica set.  The design scales
past that by bucketing hot tags: `PRIMARY KEY ((kind, tag, bucket), node_id)` with
`bucket = hash(node_id) % B` for tags above a frequency threshold (B recorded per tag), where
`search_tag` queries all B buckets concurrently and merges their top-k.  Not done yet: every
tag is one partition.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import threading
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import numpy as np
from cassandra import ConsistencyLevel
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import RetryPolicy
from cassandra.query import BatchStatement, BatchType, tuple_factory

from graphstore import vector_codec
from graphstore.embedded import decode_links, encode_links
from graphstore.errors import InvalidInputError, StorageError, StoreOpenError
from graphstore.links import TagKey, incoming_tags, outgoing_tags
from graphstore.metadata import filter_terms
from graphstore.nodes import Node, StoredNode, TagHit, Vector
from graphstore.storage import ScoredNode, Storage, StoreStats

DEFAULT_PORT = 9042
DEFAULT_TABLE = "graphstore"
DEFAULT_MAX_IN_FLIGHT = 32
DEFAULT_TIMEOUT = 10.0
DEFAULT_RETRIES = 2
DDL_TIMEOUT = 120.0
"""Schema changes wait for agreement and SAI index builds: slower than any query."""
PASSWORD_ENV = "GRAPHSTORE_CASSANDRA_PASSWORD"

IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,47}")
DATACENTER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
STRATEGIES = frozenset({"SimpleStrategy", "NetworkTopologyStrategy"})
VECTOR_TYPE = re.compile(r"vector<float,\s*(\d+)>")

# Query templates.  Only the quoted, validated table names ({nodes}, {tags}) and "?" markers
# are ever formatted in; every value is bound.
SELECT_LINKS = "SELECT links FROM {nodes} WHERE node_id = ?"
SELECT_NODE = "SELECT node_id, text, metadata, links, embedding FROM {nodes} WHERE node_id = ?"
INSERT_NODE = (
    "INSERT INTO {nodes} (node_id, text, metadata, links, embedding, outgoing, filter_terms) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
DELETE_NODE = "DELETE FROM {nodes} WHERE node_id = ?"
INSERT_TAG = (
    "INSERT INTO {tags} (kind, tag, node_id, embedding, outgoing, filter_terms) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
DELETE_TAG = "DELETE FROM {tags} WHERE kind = ? AND tag = ? AND node_id = ?"
SEARCH_NODES = (
    "SELECT node_id, text, metadata, links, embedding, similarity_cosine(embedding, ?) "
    "FROM {nodes}{where} ORDER BY embedding ANN OF ? LIMIT ?"
)
SEARCH_HITS = (
    "SELECT node_id, embedding, outgoing, similarity_cosine(embedding, ?) "
    "FROM {nodes}{where} ORDER BY embedding ANN OF ? LIMIT ?"
)
SEARCH_TAG = (
    "SELECT node_id, embedding, outgoing, similarity_cosine(embedding, ?) FROM {tags} "
    "WHERE kind = ? AND tag = ?{where} ORDER BY embedding ANN OF ? LIMIT ?"
)
READ_TAG = "SELECT node_id, embedding, outgoing FROM {tags} WHERE kind = ? AND tag = ? LIMIT ?"
COUNT_TAG = "SELECT COUNT(*) FROM {tags} WHERE kind = ? AND tag = ?{where}"
LARGE_TAGS_REMEMBERED = 100_000
"""How many tags known to be larger than a page `search_tag` remembers (skipping the read)."""
SCAN_NODES = "SELECT node_id, links, outgoing, filter_terms FROM {nodes}"
SCAN_TAGS = "SELECT kind, tag, node_id, outgoing, filter_terms FROM {tags}"
SCAN_TAG_KEYS = "SELECT kind, tag FROM {tags}"
SCAN_NODE_IDS = "SELECT node_id FROM {nodes}"
SELECT_DIMENSION = (
    "SELECT type FROM system_schema.columns "
    "WHERE keyspace_name = ? AND table_name = ? AND column_name = 'embedding'"
)
SELECT_KEYSPACE = "SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?"

SCHEMA = [
    # Tag table first, node table last: a node table is what marks the store as existing.
    "CREATE TABLE IF NOT EXISTS {tags} (kind text, tag text, node_id text, "
    "embedding vector<float, {dimension}>, outgoing set<frozen<tuple<text, text>>>, "
    "filter_terms set<text>, PRIMARY KEY ((kind, tag), node_id))",
    "CREATE CUSTOM INDEX IF NOT EXISTS {table}_tags_embedding ON {tags} (embedding) "
    "USING 'StorageAttachedIndex' WITH OPTIONS = {{'similarity_function': 'COSINE'}}",
    "CREATE CUSTOM INDEX IF NOT EXISTS {table}_tags_filter_terms ON {tags} "
    "(VALUES(filter_terms)) USING 'StorageAttachedIndex'",
    "CREATE TABLE IF NOT EXISTS {nodes} (node_id text PRIMARY KEY, text text, metadata text, "
    "links text, embedding vector<float, {dimension}>, outgoing set<frozen<tuple<text, text>>>, "
    "filter_terms set<text>)",
    "CREATE CUSTOM INDEX IF NOT EXISTS {table}_nodes_embedding ON {nodes} (embedding) "
    "USING 'StorageAttachedIndex' WITH OPTIONS = {{'similarity_function': 'COSINE'}}",
    "CREATE CUSTOM INDEX IF NOT EXISTS {table}_nodes_filter_terms ON {nodes} "
    "(VALUES(filter_terms)) USING 'StorageAttachedIndex'",
]


def identifier(what: str, name: Any) -> str:
    """`name` lower-cased (CQL folds unquoted names), or InvalidInputError if not an identifier."""
    if not isinstance(name, str) or not IDENTIFIER.fullmatch(name):
        raise InvalidInputError(
            f"Cassandra {what} name must be a letter followed by up to 47 letters, digits "
            f"or underscores, got {name!r}"
        )
    return name.lower()


def replication_cql(replication: Mapping[str, str | int] | None) -> str:
    """The replication map literal for CREATE KEYSPACE, from checked parts only.

    DDL takes no bind markers, so the map is rebuilt from a known strategy name, data centre
    names matching a strict pattern, and integer factors.
    """
    if replication is None:
        return "{'class': 'SimpleStrategy', 'replication_factor': 1}"
    strategy = replication.get("class", "SimpleStrategy")
    if strategy not in STRATEGIES:
        raise InvalidInputError(f"replication class must be one of {sorted(STRATEGIES)}")
    parts = [f"'class': '{strategy}'"]
    for key, value in replication.items():
        if key == "class":
            continue
        if not isinstance(key, str) or not DATACENTER.fullmatch(key):
            raise InvalidInputError(f"replication option {key!r} is not a data centre name")
        factor = int(value) if isinstance(value, int | str) and str(value).isdigit() else 0
        if factor < 1:
            raise InvalidInputError(f"replication factor for {key!r} must be a positive integer")
        parts.append(f"'{key}': {factor}")
    return "{" + ", ".join(parts) + "}"


@dataclass(frozen=True)
class CassandraURL:
    """The parts of `cassandra://[user[:password]@]host[:port][,host…]/keyspace[?table=…]`."""

    hosts: list[str]
    port: int
    keyspace: str
    table: str
    username: str | None
    password: str | None

    def __repr__(self) -> str:  # never show the password
        return (
            f"CassandraURL(hosts={self.hosts!r}, port={self.port}, keyspace={self.keyspace!r}, "
            f"table={self.table!r}, username={self.username!r})"
        )


def parse_url(url: str) -> CassandraURL:
    """Split a `cassandra://` URL; a missing password is read from $GRAPHSTORE_CASSANDRA_PASSWORD.

    Error messages name the faulty part only, never the URL, which may hold a password.
    """
    try:
        parts = urlsplit(url)
    except ValueError as error:  # e.g. an unclosed "[" of an IPv6 address
        raise InvalidInputError(f"the cassandra:// URL is malformed: {error}") from None
    if parts.scheme != "cassandra":
        raise InvalidInputError("a Cassandra store URL must start with cassandra://")
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    username: str | None = None
    password: str | None = None
    if userinfo:
        user, has_password, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if has_password else None
    if username is not None and password is None:
        password = os.environ.get(PASSWORD_ENV)
    hosts: list[str] = []
    ports: set[int] = set()
    for item in hostlist.split(","):
        host, port = _host_port(item.strip())
        hosts.append(host)
        ports.add(port)
    if len(ports) > 1:
        raise InvalidInputError("all hosts of a cassandra:// URL must use the same port")
    keyspace = unquote(parts.path.strip("/"))
    if not keyspace:
        raise InvalidInputError("a cassandra:// URL must name a keyspace: cassandra://host/ks")
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - {"table"})
    if unknown:
        raise InvalidInputError(f"unknown cassandra:// URL option(s): {', '.join(unknown)}")
    table = query.get("table", [DEFAULT_TABLE])[-1]
    return CassandraURL(
        hosts=hosts,
        port=ports.pop(),
        keyspace=identifier("keyspace", keyspace),
        table=identifier("table", table),
        username=username,
        password=password,
    )


def _host_port(item: str) -> tuple[str, int]:
    """`host`, `host:port`, `[ipv6]` or `[ipv6]:port`."""
    if item.startswith("["):
        host, _, rest = item[1:].partition("]")
        port = rest.removeprefix(":")
    else:
        host, _, port = item.partition(":")
    if not host:
        raise InvalidInputError("a cassandra:// URL needs at least one host")
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        raise InvalidInputError(f"port of Cassandra host {host!r} must be a number 1-65535")
    return host, int(port) if port else DEFAULT_PORT


Decision = tuple[int, Any]
"""A retry policy's answer: RETRY, RETRY_NEXT_HOST or RETHROW, and a consistency level."""


class IdempotentRetryPolicy(RetryPolicy):  # type: ignore[misc]
    """Retry timeouts and request errors, but only of statements marked idempotent.

    Every statement this backend sends is idempotent (reads, and upserts and deletes with
    client timestamps), so a retry can neither duplicate a row nor resurrect a deleted one.
    """

    def __init__(self, max_retries: int = DEFAULT_RETRIES) -> None:
        self.max_retries = max_retries

    def _decide(self, query: Any, retry_num: int, decision: int) -> Decision:
        if retry_num < self.max_retries and getattr(query, "is_idempotent", False):
            return decision, None  # None: keep the consistency level
        return self.RETHROW, None

    # The driver passes `retry_num` and the error's details by keyword.
    def on_read_timeout(self, query: Any, *args: Any, retry_num: int, **info: Any) -> Decision:
        return self._decide(query, retry_num, self.RETRY)

    def on_write_timeout(self, query: Any, *args: Any, retry_num: int, **info: Any) -> Decision:
        return self._decide(query, retry_num, self.RETRY)

    def on_unavailable(self, query: Any, *args: Any, retry_num: int, **info: Any) -> Decision:
        return self._decide(query, retry_num, self.RETRY_NEXT_HOST)

    def on_request_error(self, query: Any, *args: Any, retry_num: int, **info: Any) -> Decision:
        return self._decide(query, retry_num, self.RETRY_NEXT_HOST)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class InFlightGate:
    """A bound on driver requests in flight, shared by every event loop and thread.

    The sync API of `GraphStore` runs coroutines on fresh event loops, possibly in worker
    threads, so the bound cannot be an asyncio.Semaphore made at construction.  It is a
    lock-protected counter; a waiter is a future of its own loop, woken thread-safely by
    whichever thread (usually a driver thread, when a response arrives) frees a slot.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise InvalidInputError(f"max_in_flight must be at least 1, got {limit}")
        self.limit = limit
        self.peak = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    @property
    def in_flight(self) -> int:
        """Requests holding a slot now."""
        return self._in_flight

    async def acquire(self) -> None:
        """Wait for a slot, first come first served."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._in_flight < self.limit and not self._waiters:
                self._in_flight += 1
                self.peak = max(self.peak, self._in_flight)
                return
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append((loop, waiter))
        try:
            await waiter
        except asyncio.CancelledError:
            with self._lock:
                handed_over = (loop, waiter) not in self._waiters
                if not handed_over:
                    self._waiters.remove((loop, waiter))
            if handed_over:  # a slot was passed to us as we were cancelled: pass it on
                self.release()
            raise

    def release(self) -> None:
        """Free a slot, handing it straight to the oldest waiter whose loop still runs."""
        with self._lock:
            while self._waiters:
                loop, waiter = self._waiters.popleft()
                try:
                    loop.call_soon_threadsafe(_wake, waiter)
                except RuntimeError:  # that loop is closed: nobody waits there any more
                    continue
                return
            self._in_flight -= 1


class _Page:
    """Delivers each page of one driver request to the event loop that awaits it.

    The driver calls back from its own threads; the slot is freed there, when the response
    arrives, so the gate counts exactly the requests the driver has outstanding.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, gate: InFlightGate) -> None:
        self.loop = loop
        self.gate = gate
        self.waiter: asyncio.Future[list[Any]] = loop.create_future()

    def rows(self, rows: list[Any] | None) -> None:
        self.gate.release()
        self._settle(self.waiter, rows or [], None)

    def error(self, error: BaseException) -> None:
        self.gate.release()
        self._settle(self.waiter, [], error)

    def _settle(
        self, waiter: asyncio.Future[list[Any]], rows: list[Any], error: BaseException | None
    ) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            self.loop.call_soon_threadsafe(_resolve, waiter, rows, error)


def _resolve(
    waiter: asyncio.Future[list[Any]], rows: list[Any], error: BaseException | None
) -> None:
    if waiter.done():
        return
    if error is None:
        waiter.set_result(rows)
    else:
        waiter.set_exception(error)


def _one_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


def _tags(values: Any) -> frozenset[TagKey]:
    """A `set<frozen<tuple<text, text>>>` column (None when empty) as tag keys."""
    return frozenset((kind, tag) for kind, tag in values or ())


def _tag_hits(rows: Sequence[Any]) -> list[TagHit]:
    """Rows of (node_id, embedding, outgoing, similarity_cosine) as hits, best first by the
    exact score, whatever order the ANN index merge produced."""
    hits = [
        TagHit(node_id, _vector(embedding), _tags(outgoing), 2.0 * float(score) - 1.0)
        for node_id, embedding, outgoing, score in rows
    ]
    return sorted(hits, key=lambda hit: -hit.similarity)


def _ranked(rows: Sequence[Any], query: Vector) -> list[TagHit]:
    """Rows of (node_id, embedding, outgoing) ranked by exact cosine to `query`."""
    if not rows:
        return []
    embeddings = [_vector(embedding) for _, embedding, _ in rows]
    scores = np.stack(embeddings) @ query
    hits = [
        TagHit(node_id, embedding, _tags(outgoing), float(score))
        for (node_id, _, outgoing), embedding, score in zip(rows, embeddings, scores, strict=True)
    ]
    return sorted(hits, key=lambda hit: (-hit.similarity, hit.id))


def _vector(value: Sequence[float]) -> Vector:
    return np.asarray(value, dtype=np.float32)


class CassandraStorage(Storage):
    """The `Storage` interface over a cassandra-driver session (Cassandra 5.0+, SAI).

    - Every value is bound to a prepared statement (prepared once, cached); only the
      validated keyspace and table names are formatted into CQL text.
    - Float vectors are encoded and decoded with NumPy (`vector_codec`, installed when a
      storage is created): the driver's per-element codec made decoding most of a
      traversal's time.
    - Queries run with a clone of the session's default execution profile: tuple rows,
      LOCAL_QUORUM (read-your-writes within a data centre), `timeout` seconds per request,
      and `IdempotentRetryPolicy` (up to `max_retries` retries, idempotent statements only;
      all of ours are marked idempotent).
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
    ) -> None:
        vector_codec.install()
        self.keyspace = identifier("keyspace", keyspace)
        self.table = identifier("table", table)
        self.session = session
        self.timeout = timeout
        self._gate = InFlightGate(max_in_flight)
        self._cluster: Any = None
        self._lock = threading.RLock()  # _create_schema prepares while holding it
        self._statements: dict[str, Any] = {}
        self._large_tags: set[TagKey] = set()
        """Tags seen holding more rows than a `search_tag` page: queried by ANN directly."""
        self._schema_ready = False
        self._names = {
            "nodes": f'"{self.keyspace}"."{self.table}_nodes"',
            "tags": f'"{self.keyspace}"."{self.table}_tags"',
            "table": self.table,
        }
        self._profile = session.execution_profile_clone_update(
            EXEC_PROFILE_DEFAULT,
            row_factory=tuple_factory,
            consistency_level=ConsistencyLevel.LOCAL_QUORUM,
            request_timeout=timeout,
            retry_policy=IdempotentRetryPolicy(max_retries),
        )
        try:
            found = session.execute(
                self._prepare(SELECT_KEYSPACE), (self.keyspace,), execution_profile=self._profile
            )
            if not list(found):
                raise StoreOpenError(
                    f"Cassandra keyspace {self.keyspace!r} does not exist "
                    "(CassandraStorage.connect creates it)"
                )
            self._dimension = self._read_dimension()
        except StoreOpenError:
            raise
        except Exception as error:
            raise StoreOpenError(f"cannot read the Cassandra schema: {_one_line(error)}") from error

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
        `options` go to the constructor (`max_in_flight`, `timeout`, `max_retries`).
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
                execution_profiles={EXEC_PROFILE_DEFAULT: ExecutionProfile()},
            )
        except Exception as error:
            raise StoreOpenError(f"cannot open Cassandra at {where}: {_one_line(error)}") from error
        try:
            session = cluster.connect()
            session.execute(
                f'CREATE KEYSPACE IF NOT EXISTS "{keyspace}" WITH replication = {replication_map}',
                timeout=DDL_TIMEOUT,
            )
            storage = cls(session, keyspace, table, **options)
        except (InvalidInputError, StoreOpenError):
            cluster.shutdown()
            raise
        except Exception as error:
            cluster.shutdown()
            raise StoreOpenError(f"cannot open Cassandra at {where}: {_one_line(error)}") from error
        storage._cluster = cluster
        return storage

    @classmethod
    def from_url(cls, url: str, **options: Any) -> CassandraStorage:
        """Open `cassandra://[user[:password]@]host[:port][,host…]/keyspace[?table=prefix]`."""
        parsed = parse_url(url)
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
    def dimension(self) -> int | None:
        return self._dimension

    @property
    def max_in_flight(self) -> int:
        """The bound on outstanding requests."""
        return self._gate.limit

    @property
    def in_flight(self) -> int:
        """Requests outstanding now."""
        return self._gate.in_flight

    @property
    def peak_in_flight(self) -> int:
        """The most requests ever outstanding at once (never above `max_in_flight`)."""
        return self._gate.peak

    @property
    def prepared_queries(self) -> list[str]:
        """The CQL text of every statement prepared so far (for audits: no values in it)."""
        with self._lock:
            return list(self._statements)

    def _cql(self, template: str, terms: int = 0, prefix: str = " AND ") -> str:
        """Fill a template with the table names and `terms` CONTAINS conditions."""
        where = prefix + " AND ".join(["filter_terms CONTAINS ?"] * terms) if terms else ""
        return template.format(**self._names, where=where)

    def _prepare(self, query: str) -> Any:
        """The prepared statement for `query`, preparing it on first use (blocking)."""
        with self._lock:
            prepared = self._statements.get(query)
            if prepared is None:
                prepared = self.session.prepare(query)
                prepared.is_idempotent = True
                self._statements[query] = prepared
            return prepared

    async def _prepared(self, query: str) -> Any:
        prepared = self._statements.get(query)
        if prepared is not None:
            return prepared
        try:
            return await asyncio.to_thread(self._prepare, query)
        except Exception as error:
            raise StorageError(f"Cassandra refused a statement: {_one_line(error)}") from error

    async def _execute(self, statement: Any, values: Sequence[Any] | None = None) -> list[Any]:
        """Run one statement under the in-flight bound; return the rows of every page."""
        loop = asyncio.get_running_loop()
        await self._gate.acquire()
        page = _Page(loop, self._gate)
        try:
            future = self.session.execute_async(statement, values, execution_profile=self._profile)
        except Exception as error:
            self._gate.release()
            raise StorageError(f"Cassandra request failed: {_one_line(error)}") from error
        future.add_callbacks(page.rows, page.error)
        rows: list[Any] = []
        try:
            while True:
                rows.extend(await page.waiter)
                if not future.has_more_pages:
                    return rows
                await self._gate.acquire()
                page.waiter = loop.create_future()
                future.start_fetching_next_page()
        except Exception as error:
            raise StorageError(f"Cassandra request failed: {_one_line(error)}") from error

    async def _run(self, template: str, values: Sequence[Any], terms: int = 0) -> list[Any]:
        return await self._execute(await self._prepared(self._cql(template, terms)), values)

    def _read_dimension(self) -> int | None:
        """D of the node table's `vector<float, D>` column, or None if there is no table."""
        rows = list(
            self.session.execute(
                self._prepare(SELECT_DIMENSION),
                (self.keyspace, f"{self.table}_nodes"),
                execution_profile=self._profile,
            )
        )
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
        with self._lock:
            if self._schema_ready:
                return
            size = int(self._dimension or dimension)  # an int: nothing else reaches the DDL
            for statement in SCHEMA:
                self.session.execute(
                    statement.format(**self._names, dimension=size), timeout=DDL_TIMEOUT
                )
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
                    f"creating the Cassandra tables failed: {_one_line(error)}"
                ) from error
        for stored in latest.values():
            if stored.embedding.size != self._dimension:
                raise InvalidInputError(
                    f"embedding of node {stored.node.id!r} has dimension "
                    f"{stored.embedding.size}; the store holds {self._dimension}"
                )
        await asyncio.gather(*(self._write(stored) for stored in latest.values()))

    async def _write(self, stored: StoredNode) -> None:
        """One node: read its old links, then one atomic batch."""
        node = stored.node
        old = await self._run(SELECT_LINKS, (node.id,))
        stale = incoming_tags(decode_links(old[0][0])) if old else frozenset()
        current = incoming_tags(node.links)
        vector = stored.embedding.astype(np.float32)
        outgoing = sorted(outgoing_tags(node.links))
        terms = sorted(filter_terms(node.metadata))
        delete_tag = await self._prepared(self._cql(DELETE_TAG))
        insert_tag = await self._prepared(self._cql(INSERT_TAG))
        insert_node = await self._prepared(self._cql(INSERT_NODE))
        batch = BatchStatement(batch_type=BatchType.LOGGED)
        batch.is_idempotent = True
        for kind, tag in sorted(stale - current):
            batch.add(delete_tag, (kind, tag, node.id))
        for kind, tag in sorted(current):
            batch.add(insert_tag, (kind, tag, node.id, vector, outgoing, terms))
        metadata = json.dumps(node.metadata, ensure_ascii=False)
        links = encode_links(node.links)
        batch.add(insert_node, (node.id, node.text, metadata, links, vector, outgoing, terms))
        try:
            await self._execute(batch)
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
        rows = await self._run(SELECT_LINKS, (node_id,))
        if not rows:
            return False
        delete_tag = await self._prepared(self._cql(DELETE_TAG))
        batch = BatchStatement(batch_type=BatchType.LOGGED)
        batch.is_idempotent = True
        for kind, tag in sorted(incoming_tags(decode_links(rows[0][0]))):
            batch.add(delete_tag, (kind, tag, node_id))
        batch.add(await self._prepared(self._cql(DELETE_NODE)), (node_id,))
        await self._execute(batch)
        return True

    async def get(self, ids: Sequence[str]) -> list[StoredNode]:
        if self._dimension is None or not ids:
            return []
        unique = list(dict.fromkeys(ids))
        pages = await asyncio.gather(*(self._run(SELECT_NODE, (node_id,)) for node_id in unique))
        found = {row[0]: self._stored(row) for rows in pages for row in rows}
        return [found[node_id] for node_id in ids if node_id in found]

    @staticmethod
    def _stored(row: Sequence[Any]) -> StoredNode:
        node_id, text, metadata, links, embedding = row[:5]
        node = Node(node_id, text, json.loads(metadata), decode_links(links))
        return StoredNode(node, _vector(embedding))

    async def search(
        self, vector: Vector, k: int, filter_terms: frozenset[str]
    ) -> list[ScoredNode]:
        if self._dimension is None or k <= 0:
            return []
        query = vector.astype(np.float32)
        terms = sorted(filter_terms)
        template = self._cql(SEARCH_NODES, len(terms), prefix=" WHERE ")
        rows = await self._execute(await self._prepared(template), (query, *terms, query, k))
        found = [ScoredNode(self._stored(row), 2.0 * float(row[5]) - 1.0) for row in rows]
        # Best first by the exact score, whatever order the ANN index merge produced.
        return sorted(found, key=lambda scored: -scored.similarity)

    async def search_hits(
        self, vector: Vector, k: int, filter_terms: frozenset[str]
    ) -> list[TagHit]:
        if self._dimension is None or k <= 0:
            return []
        query = vector.astype(np.float32)
        terms = sorted(filter_terms)
        template = self._cql(SEARCH_HITS, len(terms), prefix=" WHERE ")
        rows = await self._execute(await self._prepared(template), (query, *terms, query, k))
        return _tag_hits(rows)

    async def search_tag(
        self, tag: TagKey, vector: Vector, k: int, filter_terms: frozenset[str]
    ) -> list[TagHit]:
        if self._dimension is None or k <= 0:
            return []
        query = vector.astype(np.float32)
        terms = sorted(filter_terms)
        kind, name = tag
        if not terms and tag not in self._large_tags:
            # A small partition read whole and ranked here costs the node far less than an
            # ANN query; most tags (a title, a name) hold a few rows.
            rows = await self._run(READ_TAG, (kind, name, k + 1))
            if len(rows) <= k:
                return _ranked(rows, query)
            if len(self._large_tags) < LARGE_TAGS_REMEMBERED:
                self._large_tags.add(tag)
        rows = await self._run(SEARCH_TAG, (query, kind, name, *terms, query, k), len(terms))
        return _tag_hits(rows)

    async def tag_sizes(
        self, tags: Sequence[TagKey], filter_terms: frozenset[str] = frozenset()
    ) -> dict[TagKey, int]:
        """One count per tag partition (with the filter's CONTAINS terms), concurrently."""
        if self._dimension is None:
            return dict.fromkeys(tags, 0)
        terms = sorted(filter_terms)
        pages = await asyncio.gather(
            *(self._run(COUNT_TAG, (*tag, *terms), len(terms)) for tag in tags)
        )
        return {tag: int(rows[0][0]) for tag, rows in zip(tags, pages, strict=True)}

    async def stats(self, top_tags: int = 20) -> StoreStats:
        """Counts by full scans of both tables (see the class docstring)."""
        if self._dimension is None:
            return StoreStats(nodes=0, tag_rows=0, tags=0, dimension=None)
        nodes, tag_keys = await asyncio.gather(
            self._run(SCAN_NODES, ()), self._run(SCAN_TAG_KEYS, ())
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
        return [row[0] for row in await self._run(SCAN_NODE_IDS, ())]

    async def check(self) -> list[str]:
        """Compare both tables in full: tag rows per node, and their denormalized columns."""
        if self._dimension is None:
            return []
        node_rows, tag_rows = await asyncio.gather(
            self._run(SCAN_NODES, ()), self._run(SCAN_TAGS, ())
        )
        nodes = {
            node_id: (incoming_tags(decode_links(links)), _tags(outgoing), frozenset(terms or ()))
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
            if _tags(outgoing) != node_outgoing or frozenset(terms or ()) != node_terms:
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
            with self._lock:
                for table in (self._names["nodes"], self._names["tags"]):
                    self.session.execute(f"DROP TABLE IF EXISTS {table}", timeout=DDL_TIMEOUT)
                self._statements.clear()
                self._dimension = None
                self._schema_ready = False

        await asyncio.to_thread(drop_tables)

    async def close(self) -> None:
        """Shut the cluster down if `connect` made it; a caller's session is left open."""
        if self._cluster is not None:
            cluster, self._cluster = self._cluster, None
            await asyncio.to_thread(cluster.shutdown)
