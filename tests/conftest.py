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


def open_storage(name: str, directory: Path, table: str) -> Storage:
    """A new storage object of backend `name` on the store in `directory` or `table`."""
    if name == "memory":
        return EmbeddedStorage(":memory:")
    if name == "file":
        return EmbeddedStorage(directory / "store.db")
    host, _, port = cassandra_contact().partition(":")
    from graphstore.cassandra import CassandraStorage

    return CassandraStorage.connect(
        contact_points=[host], port=int(port or 9042), keyspace="graphstore_test", table=table
    )


async def release(name: str, opened: Sequence[Storage]) -> None:
    """Close the storage objects of one store, dropping a Cassandra store's tables first."""
    if name == "cassandra" and opened:
        # Each table and SAI index costs the node heap: left behind, they exhaust it.
        await opened[0].drop()
    for storage in opened:
        await storage.close()


@pytest.fixture(params=BACKENDS)
async def open_backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StorageFactory]:
    """A factory opening (and reopening) one fresh store of the parametrized backend."""
    opened: list[Storage] = []
    name = request.param
    table = f"t{uuid.uuid4().hex[:12]}"

    def factory() -> Storage:
        if name == "memory" and opened:
            return opened[0]
        opened.append(open_storage(name, tmp_path, table))
        return opened[-1]

    yield factory
    await release(name, opened)


@pytest.fixture(scope="module", params=BACKENDS)
def module_backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Storage]:
    """One store of the parametrized backend shared by a module's read-only tests (loading
    it once per test would create a Cassandra table, its indexes and range columns each
    time: most of the suite's run time)."""
    name = request.param
    storage = open_storage(name, tmp_path_factory.mktemp(name), f"t{uuid.uuid4().hex[:12]}")
    yield storage
    run_sync(release(name, [storage]))


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
