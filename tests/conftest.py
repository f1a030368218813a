"""Shared fixtures: every storage-level test runs on each backend through `backend`.

Cassandra tests need a node: `GRAPHSTORE_TEST_CASSANDRA=127.0.0.1:9042` (start one with
`python -m graphstore.testing.local_cassandra start`).  Without it they skip, except in CI
(`CI=true`), where a missing node is a failure.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from graphstore.embedded import EmbeddedStorage
from graphstore.storage import Storage

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


StorageFactory = Callable[[], Storage]


@pytest.fixture(params=BACKENDS)
async def open_backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StorageFactory]:
    """A factory opening (and reopening) one fresh store of the parametrized backend."""
    opened: list[Storage] = []
    name = request.param
    table = f"t{uuid.uuid4().hex[:12]}"

    def factory() -> Storage:
        storage: Storage
        if name == "memory":
            if opened:
                return opened[0]
            storage = EmbeddedStorage(":memory:")
        elif name == "file":
            storage = EmbeddedStorage(tmp_path / "store.db")
        else:
            host, _, port = cassandra_contact().partition(":")
            from graphstore.cassandra import CassandraStorage

            storage = CassandraStorage.connect(
                contact_points=[host],
                port=int(port or 9042),
                keyspace="graphstore_test",
                table=table,
            )
        opened.append(storage)
        return storage

    yield factory
    if name == "cassandra" and opened:
        # Each table and SAI index costs the node heap: left behind, they exhaust it.
        await opened[0].drop()
    for storage in opened:
        await storage.close()


@pytest.fixture
def backend(open_backend: StorageFactory) -> Storage:
    """One fresh store of the parametrized backend."""
    return open_backend()


@pytest.fixture
def shared_data() -> Path:
    """The public data sets beside the project (`../shared/data`)."""
    if not SHARED_DATA.is_dir():
        (pytest.fail if os.environ.get("CI") else pytest.skip)(f"{SHARED_DATA} is missing")
    return SHARED_DATA
