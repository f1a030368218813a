"""Roles confined to one keyspace, on a node with password login and authorization.

A node (`PasswordAuthenticator`, `CassandraAuthorizer`) starts for this module on a free
port next to the test node, and stops after it.  Every command used to send `CREATE
KEYSPACE IF NOT EXISTS`, and every first write of a process the tables' DDL, whatever
existed; Cassandra checks CREATE permission on all keyspaces (or on the keyspace's tables)
before it reads `IF NOT EXISTS`, so a role granted only its store's keyspace could not
even search it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import cassandra_contact

from graphstore import GraphStore, Link, Node
from graphstore.errors import StorageError
from graphstore.testing.embeddings import KeyedEmbeddings

pytestmark = pytest.mark.cassandra

KEYSPACE = "confined"
ROLES = {
    "owner": ["ALL PERMISSIONS"],
    "reader": ["SELECT"],
    "writer": ["SELECT", "MODIFY"],
}


@pytest.fixture(scope="module")
def node_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    cassandra_contact()  # skip without Cassandra tooling (fail in CI)
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import Cluster

    from graphstore.testing.local_cassandra import CassandraNode, free_port

    node = CassandraNode(
        Path(tmp_path_factory.mktemp("access")),
        port=free_port(),
        heap="512M",
        authenticator="PasswordAuthenticator",
        authorizer="CassandraAuthorizer",
        jvm_options=["-Dcassandra.superuser_setup_delay_ms=0"],
    )
    node.start()
    try:
        auth = PlainTextAuthProvider("cassandra", "cassandra")
        deadline = time.monotonic() + 60
        while True:  # the default superuser is set up just after CQL answers
            # A new Cluster each time: the driver shuts one down when its connect fails, and
            # retrying it only said "Cluster is already shut down" (seen on a busy machine).
            cluster = Cluster(["127.0.0.1"], port=node.port, auth_provider=auth)
            try:
                session = cluster.connect()
                break
            except Exception:
                cluster.shutdown()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        session.execute(
            f"CREATE KEYSPACE {KEYSPACE} WITH replication = "
            "{'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        for role, permissions in ROLES.items():
            session.execute(f"CREATE ROLE {role} WITH PASSWORD = '{role}-pw' AND LOGIN = true")
            for permission in permissions:
                session.execute(f"GRANT {permission} ON KEYSPACE {KEYSPACE} TO {role}")
        cluster.shutdown()
        yield node.port
    finally:
        node.stop()


def store_as(role: str, port: int, **options) -> GraphStore:
    from graphstore.cassandra import CassandraStorage

    storage = CassandraStorage.connect(
        ["127.0.0.1"],
        port,
        keyspace=KEYSPACE,
        table="notes",
        username=role,
        password=f"{role}-pw",
        **options,
    )
    return GraphStore(KeyedEmbeddings(dimension=4), storage)


async def test_a_role_confined_to_its_keyspace_creates_reads_and_writes_its_store(node_port):
    owner = store_as("owner", node_port)
    await owner.aadd_nodes(
        [Node("a", "alpha", {}, frozenset({Link.bidir("kw", "x")}))], vectors=[[1, 0, 0, 0]]
    )
    await owner.aclose()

    reader = store_as("reader", node_port, create=False)
    assert [h.node.id for h in await reader.asearch([1, 0, 0, 0], k=1)] == ["a"]
    assert (await reader.astats()).nodes == 1
    with pytest.raises(StorageError, match="Unauthorized"):
        await reader.aadd_nodes([Node("r", "refused")], vectors=[[0, 1, 0, 0]])
    await reader.aclose()

    writer = store_as("writer", node_port)  # SELECT and MODIFY: rows only, no DDL
    await writer.aadd_nodes(
        [Node("b", "beta", {}, frozenset({Link.bidir("kw", "x")}))], vectors=[[0.9, 0.1, 0, 0]]
    )
    assert [h.node.id for h in await writer.asearch([1, 0, 0, 0], k=2)] == ["a", "b"]
    assert await writer.adelete(["b"]) == 1
    await writer.aclose()
