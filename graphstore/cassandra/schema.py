"""The tables and indexes of a store, created idempotently, and the keyspace's replication.

DDL takes no bind markers: only validated identifiers, an integer dimension and a replication
map rebuilt from checked parts are ever formatted into it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from contextlib import suppress
from typing import Any

from cassandra.cluster import EXEC_PROFILE_DEFAULT
from cassandra.policies import HostDistance
from cassandra.query import tuple_factory

from graphstore.errors import InvalidInputError

DDL_TIMEOUT = 120.0
"""Schema changes wait for agreement and SAI index builds: slower than any query."""
POOL_WAIT = 10.0
"""Seconds a session opened a moment ago gets to connect to `schema_host`."""
SELECT_SCHEMA_VERSION = "SELECT schema_version FROM system.local"


def run_ddl(session: Any, statement: str) -> None:
    """Run one schema statement on `schema_host`, then `agree_on_schema`."""
    session.execute(statement, timeout=DDL_TIMEOUT, host=schema_host(session))
    agree_on_schema(session)


def schema_host(session: Any) -> Any:
    """The node every process sends its schema statements to: the first live one by
    address among those the session's load balancing uses, local ones first (None, for the
    driver to choose, when there is none).

    A node applies schema changes one at a time, so a `CREATE … IF NOT EXISTS` sent there
    finds the table another process has just made there.  Sent to two nodes at once, both
    statements made the table, Cassandra 5.0 kept one of the two, and the process whose
    table lost found "table … does not exist" at its next write: two ingests making one
    store on three nodes failed one time in two.  A node the policy ignores (another data
    centre, a node left out of a white list) has no connection from this session."""
    distance = session.cluster.profile_manager.distance
    live = [host for host in session.cluster.metadata.all_hosts() if host.is_up]
    host = None
    for wanted in (HostDistance.LOCAL, HostDistance.REMOTE):
        usable = [candidate for candidate in live if distance(candidate) == wanted]
        if usable:
            host = min(usable, key=lambda candidate: str(candidate.endpoint))
            break
    deadline = time.monotonic() + POOL_WAIT
    while host is not None and host not in session.get_pool_state():
        if time.monotonic() > deadline:  # never connected: the driver chooses
            return None
        time.sleep(0.05)  # a session opened a moment ago is still connecting to it
    return host


def agree_on_schema(session: Any) -> None:
    """Wait (up to `DDL_TIMEOUT`) until every live node this session reaches holds the same
    schema, each asked for its own version (`system.local`).

    A `CREATE … IF NOT EXISTS` that finds what another process has just made changes
    nothing and returns at once, while nodes that have not heard of it yet may serve the
    next request ("keyspace … does not exist").  The driver's own wait compares the
    versions its control node has heard of by gossip, which right after a change made on
    another node are all still the old one: it found them agreed, and the next write failed
    on a node without the table.  When the nodes agree, this is one round trip to each."""
    profile = session.execution_profile_clone_update(
        EXEC_PROFILE_DEFAULT, row_factory=tuple_factory
    )
    deadline = time.monotonic() + DDL_TIMEOUT
    while True:
        versions = set()
        for host in [host for host in session.get_pool_state() if host.is_up]:
            with suppress(Exception):  # a node going down now: the next request says so
                rows = session.execute(SELECT_SCHEMA_VERSION, host=host, execution_profile=profile)
                versions.add(rows.one()[0])
        if len(versions) <= 1 or time.monotonic() > deadline:
            return
        time.sleep(0.1)


DATACENTER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
STRATEGIES = frozenset({"SimpleStrategy", "NetworkTopologyStrategy"})
VECTOR_TYPE = re.compile(r"vector<float,\s*(\d+)>")

SELECT_COLUMN_TYPE = (
    "SELECT type FROM system_schema.columns "
    "WHERE keyspace_name = ? AND table_name = ? AND column_name = ?"
)
SELECT_KEYSPACE = "SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = ?"
SELECT_TABLES = "SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?"
SELECT_TABLE = (
    "SELECT table_name FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?"
)
SELECT_INDEXES = "SELECT index_name FROM system_schema.indexes WHERE keyspace_name = ?"

SCHEMA = [
    # The node table last: a node table is what marks the store as existing.
    "CREATE TABLE IF NOT EXISTS {tags} (kind text, tag text, node_id text, embedding blob, "
    "outgoing text, filter_terms set<text>, buckets set<int> static, "
    "PRIMARY KEY ((kind, tag), node_id))",
    "CREATE TABLE IF NOT EXISTS {hot} (kind text, tag text, bucket int, node_id text, "
    "embedding vector<float, {dimension}>, outgoing text, filter_terms set<text>, "
    "PRIMARY KEY ((kind, tag, bucket), node_id))",
    "CREATE CUSTOM INDEX IF NOT EXISTS {table}_hot_embedding ON {hot} (embedding) "
    "USING 'StorageAttachedIndex' WITH OPTIONS = {{'similarity_function': 'COSINE'}}",
    "CREATE CUSTOM INDEX IF NOT EXISTS {table}_hot_filter_terms ON {hot} "
    "(VALUES(filter_terms)) USING 'StorageAttachedIndex'",
    "CREATE TABLE IF NOT EXISTS {hot_tags} (directory int, kind text, tag text, rows counter, "
    "PRIMARY KEY (directory, kind, tag))",
    "CREATE TABLE IF NOT EXISTS {nodes} (node_id text PRIMARY KEY, text text, metadata text, "
    "links text, embedding vector<float, {dimension}>, outgoing text, filter_terms set<text>, "
    "tag_buckets map<frozen<tuple<text, text>>, int>)",
    "CREATE CUSTOM INDEX IF NOT EXISTS {table}_nodes_embedding ON {nodes} (embedding) "
    "USING 'StorageAttachedIndex' WITH OPTIONS = {{'similarity_function': 'COSINE'}}",
    "CREATE CUSTOM INDEX IF NOT EXISTS {table}_nodes_filter_terms ON {nodes} "
    "(VALUES(filter_terms)) USING 'StorageAttachedIndex'",
]
"""Every table and index of a store: `<table>_tags` holds small tags (no index: read whole;
embeddings as bytes, `rows.embedding_bytes`),
`<table>_hot` the rows of hot tags in buckets (SAI-indexed), `<table>_hot_tags` the hot tags
and how many rows each holds in its buckets, `<table>_nodes` the nodes, each with the bucket
of every tag row it has in `<table>_hot` (`graphstore.cassandra.layout`).  Every table's
`outgoing` tags are JSON text (`rows.encode_tags`): nothing on the server reads them, and
the driver decodes a `set<frozen<tuple<text, text>>>` one element at a time in Python
(100 rows of 15 tags: ~3 ms more than the same tags as text)."""

INDEXES = ("hot_embedding", "hot_filter_terms", "nodes_embedding", "nodes_filter_terms")
"""The SAI indexes `SCHEMA` creates: `<table>_<index>`."""

OUTGOING_PARTS = ("nodes", "tags", "hot")
"""The tables whose rows carry a node's outgoing tags (`<table>_<part>.outgoing`)."""

UPGRADE = [
    "ALTER TABLE {tags} ADD IF NOT EXISTS buckets set<int> static",
    "ALTER TABLE {nodes} ADD IF NOT EXISTS tag_buckets map<frozen<tuple<text, text>>, int>",
    *SCHEMA[1:5],
]
"""What a store made before hot tags lacks: two columns and the hot tables.  Its tag rows
stay where they are, as small parts, with their embeddings in a vector column (new stores:
bytes) and, like its node rows, their outgoing tags in a set column (new stores: text, while
its new hot table has text: `Tables.outgoing_sets`); its old SAI indexes on `<table>_tags`
are left alone (they still cost every write: dropping them is safe, nothing reads them)."""


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


def placements(
    replication: Mapping[str, str | int], nodes: Mapping[str, int]
) -> list[tuple[int, int]]:
    """For each data centre a keyspace replicates to, the replicas of a row it keeps there
    and how many of them the cluster's nodes can hold, from the keyspace's `replication` map
    and the `nodes` of each data centre.  A SimpleStrategy places its replicas on any
    nodes (one entry), a NetworkTopologyStrategy on the nodes of each data centre it names."""
    if str(replication.get("class", "")).endswith("NetworkTopologyStrategy"):
        return [
            (factor, min(factor, nodes.get(key, 0)))
            for key, value in replication.items()
            if key != "class" and (factor := _factor(value)) is not None
        ]
    factor = replication_factor(replication)
    return [(factor, min(factor, sum(nodes.values())))]


def _factor(value: str | int) -> int | None:
    """A data centre's replica count from a replication map value (`3`, `'3'`, `'3/1'`)."""
    count = str(value).split("/")[0]
    return int(count) if count.isdigit() else None


def replication_factor(replication: Mapping[str, str | int]) -> int:
    """The most replicas a keyspace keeps of a row in one data centre.

    From a replication map as given to `replication_cql` or as Cassandra reports it
    (`{'class': '...SimpleStrategy', 'replication_factor': '3'}`; a transient factor reads
    `'3/1'`, three replicas of which one transient).
    """
    factors = [
        factor
        for key, value in replication.items()
        if key != "class" and (factor := _factor(value)) is not None
    ]
    return max(factors, default=1)
