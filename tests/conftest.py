"""Shared fixtures: every storage-level test runs on each backend through `backend`.

Cassandra tests need a node: `GRAPHSTORE_TEST_CASSANDRA=127.0.0.1:9042` (start one with
`python -m graphstore.testing.local_cassandra start`).  Without it they skip, except in CI
(`CI=true`), where a missing node is a failure.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from graphstore.embedded import EmbeddedStorage
from graphstore.link_cache import CACHE_DIR_VARIABLE
from graphstore.nodes import Node
from graphstore.storage import Storage
from graphstore.store import run_sync

CASSANDRA_ENV = "GRAPHSTORE_TEST_CASSANDRA"
BACKENDS = ["memory", "file", "cassandra"]
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def cassandra_contact() -> str:
    """host:port of the test node, or skip (fail in CI) when none is configured."""
    contact = os.environ.get(CASSANDRA_ENV)
    if contact:
        return contact
    message = (
        f"no Cassandra node: run `python -m graphstore.testing.local_cassandra start` "
        f"and set {CASSANDRA_ENV}=127.0.0.1:9042"
    )
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(autouse=True, scope="session")
def link_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tests' ingests (their commands' too) keep extracted links in a cache of their
    own, never the user's (`graphstore.link_cache`)."""
    folder = tmp_path_factory.mktemp("link-cache")
    os.environ[CACHE_DIR_VARIABLE] = str(folder)
    return folder


StorageFactory = Callable[[], Storage]


STORES_PER_KEYSPACE = 10


class CassandraKeyspaces:
    """The keyspaces the shared fixtures' Cassandra stores go in, `STORES_PER_KEYSPACE` each.

    Every table and SAI index costs the node heap, so a store's tables cannot be left behind;
    but dropping them costs five schema changes (~1.5 s a store), while dropping a keyspace
    of ten stores costs one (~0.4 s a store).  A keyspace is dropped once it is full and
    every store in it is released; those left at the end of the session, then."""

    def __init__(self) -> None:
        self.number = 0
        self.taken = 0
        self.open: dict[str, int] = {}
        """Stores not released yet, by keyspace (every keyspace not dropped yet)."""

    def _current(self) -> str:
        return f"graphstore_test_{self.number}"

    def take(self, backend: str) -> str:
        """The keyspace of one new store of `backend` ("" unless it is Cassandra)."""
        if backend != "cassandra":
            return ""
        cassandra_contact()
        if self.taken == STORES_PER_KEYSPACE:
            self.number, self.taken = self.number + 1, 0
        self.taken += 1
        keyspace = self._current()
        self.open[keyspace] = self.open.get(keyspace, 0) + 1
        return keyspace

    def release(self, keyspace: str, session: Any) -> None:
        """One store of `keyspace` is released (`session` still open): drop the keyspace
        when it is full and this was its last open store."""
        self.open[keyspace] -= 1
        full = keyspace != self._current() or self.taken == STORES_PER_KEYSPACE
        if full and not self.open[keyspace]:
            del self.open[keyspace]
            _drop_keyspace(session, keyspace)

    def drop_all(self) -> None:
        """Drop the keyspaces still there (the session's end: every store is released)."""
        if not self.open:
            return
        from cassandra.cluster import Cluster

        host, _, port = cassandra_contact().partition(":")
        cluster = Cluster([host], port=int(port or 9042))
        try:
            session = cluster.connect()
            for keyspace in self.open:
                _drop_keyspace(session, keyspace)
        finally:
            cluster.shutdown()
        self.open.clear()


def _drop_keyspace(session: Any, keyspace: str) -> None:
    """Drop a test keyspace (a name `CassandraKeyspaces` made) with all its tables."""
    session.execute(f'DROP KEYSPACE IF EXISTS "{keyspace}"', timeout=120)


@pytest.fixture(scope="session")
def cassandra_keyspaces() -> Iterator[CassandraKeyspaces]:
    keyspaces = CassandraKeyspaces()
    yield keyspaces
    keyspaces.drop_all()


def open_storage(name: str, directory: Path, table: str, keyspace: str = "") -> Storage:
    """A new storage object of backend `name` on the store in `directory` or in `table` of
    `keyspace`."""
    if name == "memory":
        return EmbeddedStorage(":memory:")
    if name == "file":
        return EmbeddedStorage(directory / "store.db")
    host, _, port = cassandra_contact().partition(":")
    from graphstore.cassandra import CassandraStorage

    return CassandraStorage.connect(
        contact_points=[host], port=int(port or 9042), keyspace=keyspace, table=table
    )


async def release(opened: Sequence[Storage], keyspaces: CassandraKeyspaces) -> None:
    """Close the storage objects of one store; a Cassandra store's tables go with its
    keyspace (`CassandraKeyspaces`)."""
    from graphstore.cassandra import CassandraStorage

    if opened and isinstance(opened[0], CassandraStorage):
        keyspaces.release(opened[0].keyspace, opened[0].session)
    for storage in opened:
        await storage.close()


@pytest.fixture(params=BACKENDS)
async def open_backend(
    request: pytest.FixtureRequest, tmp_path: Path, cassandra_keyspaces: CassandraKeyspaces
) -> AsyncIterator[StorageFactory]:
    """A factory opening (and reopening) one fresh store of the parametrized backend."""
    opened: list[Storage] = []
    name = request.param
    table = f"t{uuid.uuid4().hex[:12]}"
    keyspace = ""

    def factory() -> Storage:
        nonlocal keyspace
        if name == "memory" and opened:
            return opened[0]
        if not opened:
            keyspace = cassandra_keyspaces.take(name)
        opened.append(open_storage(name, tmp_path, table, keyspace))
        return opened[-1]

    yield factory
    await release(opened, cassandra_keyspaces)


@pytest.fixture(scope="module", params=BACKENDS)
def module_backend(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    cassandra_keyspaces: CassandraKeyspaces,
) -> Iterator[Storage]:
    """One store of the parametrized backend shared by a module's read-only tests (loading
    it once per test would create a Cassandra table, its indexes and range columns each
    time: most of the suite's run time)."""
    name = request.param
    table = f"t{uuid.uuid4().hex[:12]}"
    keyspace = cassandra_keyspaces.take(name)
    storage = open_storage(name, tmp_path_factory.mktemp(name), table, keyspace)
    yield storage
    run_sync(release([storage], cassandra_keyspaces))


@pytest.fixture
def backend(open_backend: StorageFactory) -> Storage:
    """One fresh store of the parametrized backend."""
    return open_backend()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The public data sets beside the project (`../shared/data`)."""
    if not SHARED_DATA.is_dir():
        (pytest.fail if os.environ.get("CI") else pytest.skip)(f"{SHARED_DATA} is missing")
    return SHARED_DATA


OLD_CASSANDRA_SCHEMA = [
    "CREATE TABLE {tags} (kind text, tag text, node_id text, embedding vector<float, 3>, "
    "outgoing set<frozen<tuple<text, text>>>, filter_terms set<text>, "
    "PRIMARY KEY ((kind, tag), node_id))",
    "CREATE CUSTOM INDEX {table}_tags_embedding ON {tags} (embedding) "
    "USING 'StorageAttachedIndex' WITH OPTIONS = {{'similarity_function': 'COSINE'}}",
    "CREATE TABLE {nodes} (node_id text PRIMARY KEY, text text, metadata text, links text, "
    "embedding vector<float, 3>, outgoing set<frozen<tuple<text, text>>>, "
    "filter_terms set<text>)",
    "CREATE CUSTOM INDEX {table}_nodes_embedding ON {nodes} (embedding) "
    "USING 'StorageAttachedIndex' WITH OPTIONS = {{'similarity_function': 'COSINE'}}",
    "CREATE CUSTOM INDEX {table}_nodes_filter_terms ON {nodes} (VALUES(filter_terms)) "
    "USING 'StorageAttachedIndex'",
]
"""The tables of a 3-d Cassandra store as graphstore made them before range columns and hot
tags (commit 11bb94c): one tag table with an SAI-indexed vector, no meta table."""


def write_old_cassandra_store(
    session: Any, keyspace: str, table: str, nodes: Sequence[tuple[Node, Sequence[float]]]
) -> None:
    """Create the tables of `OLD_CASSANDRA_SCHEMA` and write `nodes` (with 3-d unit vectors)
    as that version did: a node row and one tag row per incoming tag."""
    from graphstore.links import encode_links, incoming_tags, outgoing_tags
    from graphstore.metadata import filter_terms

    names = {
        "nodes": f'"{keyspace}"."{table}_nodes"',
        "tags": f'"{keyspace}"."{table}_tags"',
        "table": table,
    }
    for statement in OLD_CASSANDRA_SCHEMA:
        session.execute(statement.format(**names), timeout=120)
    insert_node = session.prepare(
        f"INSERT INTO {names['nodes']} (node_id, text, metadata, links, embedding, outgoing, "
        "filter_terms) VALUES (?, ?, ?, ?, ?, ?, ?)"
    )
    insert_tag = session.prepare(
        f"INSERT INTO {names['tags']} (kind, tag, node_id, embedding, outgoing, filter_terms) "
        "VALUES (?, ?, ?, ?, ?, ?)"
    )
    for node, vector in nodes:
        terms = sorted(filter_terms(node.metadata))
        outgoing = sorted(outgoing_tags(node.links))
        metadata = json.dumps(node.metadata)
        embedding = [float(x) for x in vector]
        row = (node.id, node.text, metadata, encode_links(node.links), embedding, outgoing, terms)
        session.execute(insert_node, row)
        for kind, tag in incoming_tags(node.links):
            session.execute(insert_tag, (kind, tag, node.id, embedding, outgoing, terms))
