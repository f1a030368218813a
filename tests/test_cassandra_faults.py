"""A Cassandra node stopped in the middle of an ingest, on a node of the test's own."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import cassandra_contact
from test_faults import passages

from graphstore import GraphStore, StorageError
from graphstore.store import run_sync
from graphstore.testing.embeddings import HookedEmbeddings, KeyedEmbeddings

PASSAGES = passages(200, keywords=9)


@pytest.mark.cassandra
def test_stopped_node_fails_the_ingest_and_a_rerun_completes_it_exactly_once(tmp_path: Path):
    cassandra_contact()  # skip without Cassandra tooling (fail in CI)
    from graphstore.cassandra import CassandraStorage
    from graphstore.testing.local_cassandra import free_port, running_cassandra

    port = free_port()

    def connect() -> CassandraStorage:
        return CassandraStorage.connect(
            ["127.0.0.1"], port, keyspace="faults", table="ingest", timeout=5.0
        )

    with running_cassandra(tmp_path / "node", port=port) as node:
        storage = connect()
        with pytest.raises(StorageError) as error:
            GraphStore(HookedEmbeddings({4: node.stop}), storage, batch_size=20).add_nodes(PASSAGES)
        assert "\n" not in str(error.value)
        with pytest.raises(StorageError, match=r"^Cassandra request failed: ") as stats_error:
            run_sync(storage.stats())  # statements it never prepared: no node to prepare them
        assert "refused" not in str(stats_error.value)
        run_sync(storage.close())

        node.start()
        storage = connect()
        try:
            partial = run_sync(storage.stats())
            assert partial.nodes == 60
            assert partial.tag_rows == 120
            GraphStore(KeyedEmbeddings(dimension=8), storage, batch_size=20).add_nodes(PASSAGES)
            stats = run_sync(storage.stats())
            assert (stats.nodes, stats.tag_rows, stats.tags) == (200, 400, 209)
            assert run_sync(storage.check()) == []
        finally:
            run_sync(storage.close())
