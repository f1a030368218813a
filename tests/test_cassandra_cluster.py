"""Three Cassandra nodes, replication factor 3: what holds while one of them is lost.

The cluster (`graphstore.testing.local_cluster`) starts once for this module on 127.0.0.2-4
and free ports, next to the single test node, and stops afterwards;
`GRAPHSTORE_TEST_CLUSTER=DIR` reuses one started with `python -m
graphstore.testing.local_cassandra start --nodes 3 --dir DIR` (its `cluster.json` needs
`"hinted_handoff": false, "dynamic_snitch": false`).  Those two settings make the tests
strict: without hints, a replica that was down stays stale until a read repairs it, so
nothing heals it behind a test's back; without the dynamic snitch, a read at ONE asks the
first replica in ring order, which is the stale one for about a third of the rows.

`GRAPHSTORE_TEST_CLUSTER_CONSISTENCY=ONE` runs the same tests with writes and reads at ONE:
the ingest and delete tests fail (passages missing from reads, deleted passages returned).
At `ALL` every test that loses a node fails (Unavailable).  The guarantees rest on quorums.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from functools import partial

import numpy as np
import pytest
from conftest import cassandra_contact
from test_faults import passages
from test_load import group

from graphstore import GraphStore, Link, Node
from graphstore.embedded import EmbeddedStorage
from graphstore.filters import EVERYTHING
from graphstore.store import run_sync
from graphstore.testing.embeddings import HookedEmbeddings, KeyedEmbeddings

pytestmark = pytest.mark.cassandra

CLUSTER_ENV = "GRAPHSTORE_TEST_CLUSTER"
LEVEL = os.environ.get("GRAPHSTORE_TEST_CLUSTER_CONSISTENCY", "QUORUM")
KEYSPACE = "cluster_test"
REPLICATION = {"class": "SimpleStrategy", "replication_factor": 3}
VICTIM = 3
"""The node killed in every test (not the seed)."""
DIMENSION = 16


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    cassandra_contact()  # skip without Cassandra tooling (fail in CI)
    from graphstore.testing.local_cluster import CassandraCluster, running_cluster

    given = os.environ.get(CLUSTER_ENV)
    if given:
        reused = CassandraCluster.open(given)
        assert not reused.layout.hinted_handoff
        assert not reused.layout.dynamic_snitch
        reused.start()
        yield reused
        return
    directory = tmp_path_factory.mktemp("cluster")
    with running_cluster(3, directory, hinted_handoff=False, dynamic_snitch=False) as started:
        yield started


@pytest.fixture
def all_up(cluster):
    """Every node running and seen up by the others, before and after the test."""

    def restore() -> None:
        cluster.start()
        for index in range(1, len(cluster.nodes) + 1):
            cluster.wait_until_seen_as(index, "UP")

    restore()
    yield cluster
    restore()


def connect(cluster, table: str, consistency: str = LEVEL):
    from graphstore.cassandra import CassandraStorage

    return CassandraStorage.connect(
        cluster.hosts,
        cluster.port,
        keyspace=KEYSPACE,
        table=table,
        replication=REPLICATION,
        consistency=consistency,
    )


def test_an_ingest_survives_a_killed_node_and_stores_every_row_exactly_once(all_up):
    """2,000 passages in 20 batches: node 3 is SIGKILLed at batch 4 (the others notice only
    after 10-30 s, while batches keep coming), restarted in the background at batch 10,
    and back before batch 16.  The ingest raises nothing; afterwards every passage and tag
    row is there once, as a clean ingest of the same passages into the embedded store has
    them, read through every node (the restarted one missed batches 4-15)."""
    cluster = all_up
    corpus = passages(2000, keywords=97)
    restart = threading.Thread(target=cluster.start_node, args=(VICTIM,))
    actions = {4: partial(cluster.kill_node, VICTIM), 10: restart.start, 16: restart.join}
    storage = connect(cluster, f"ingest_{LEVEL.lower()}")
    try:
        run_sync(storage.drop())
        GraphStore(HookedEmbeddings(actions, DIMENSION), storage, batch_size=100).add_nodes(corpus)
        cluster.wait_until_seen_as(VICTIM, "UP")

        clean = EmbeddedStorage(":memory:")
        GraphStore(KeyedEmbeddings(dimension=DIMENSION), clean).add_nodes(corpus)
        expected = run_sync(clean.stats(top_tags=0))
        stats = run_sync(storage.stats(top_tags=0))
        assert (stats.nodes, stats.tag_rows, stats.tags) == (
            expected.nodes,
            expected.tag_rows,
            expected.tags,
        )
        assert run_sync(storage.check()) == []
        ids = [node.id for node in corpus]
        assert sorted(run_sync(storage.node_ids())) == sorted(ids)
        assert [stored.node.id for stored in run_sync(storage.get(ids))] == ids
        run_sync(clean.close())
    finally:
        run_sync(storage.drop())
        run_sync(storage.close())


def mmr_results(store: GraphStore, queries: np.ndarray) -> list[list[tuple[str, float]]]:
    """Every query's MMR traversal at once, as (id, score) lists."""

    async def all_at_once() -> list[list[tuple[str, float]]]:
        found = await asyncio.gather(
            *(
                store.ammr_traversal_search(query, k=5, fetch_k=10, adjacent_k=10, depth=2)
                for query in queries
            )
        )
        return [[(hit.node.id, round(hit.score, 5)) for hit in hits] for hits in found]

    return run_sync(all_at_once())


def test_concurrent_mmr_traversals_with_a_node_down_equal_those_with_all_nodes_up(all_up):
    """50 MMR traversals at once, right after node 3 is killed (before the others notice)
    and again once they have: no error, and the same passages and scores as with all three
    nodes up."""
    cluster = all_up
    storage = connect(cluster, f"mmr_{LEVEL.lower()}")
    store = GraphStore(KeyedEmbeddings(dimension=DIMENSION), storage, batch_size=100)
    try:
        run_sync(storage.drop())
        store.add_nodes(group("p", 600))
        rng = np.random.default_rng(7)
        queries = rng.normal(size=(50, DIMENSION)).astype(np.float32)
        all_nodes = mmr_results(store, queries)
        assert all(len(hits) == 5 for hits in all_nodes)

        cluster.kill_node(VICTIM)
        assert mmr_results(store, queries) == all_nodes
        cluster.wait_until_seen_as(VICTIM, "DOWN")
        assert mmr_results(store, queries) == all_nodes
    finally:
        cluster.start_node(VICTIM)
        cluster.wait_until_seen_as(VICTIM, "UP")
        run_sync(storage.drop())
        run_sync(storage.close())


def relinked(nodes: list[Node], tag: str) -> list[Node]:
    """The same passages with one incoming link only, to `tag` + their id."""
    return [
        Node(n.id, n.text, n.metadata, frozenset({Link.incoming("moved", tag + n.id)}))
        for n in nodes
    ]


def test_a_passage_deleted_while_a_replica_is_down_is_never_returned_after_it_is_back(all_up):
    """Passages are deleted while node 3 is down, so node 3 keeps them live (no hints);
    once it is back, an ANN query that reads node 3 still offers them (checked first: the
    stale replica is real), yet no search returns them: every search reads the passages it
    returns at QUORUM, where the other replica's tombstone wins (and read repair then
    copies it to node 3).  Other passages are relinked while node 3 is down and again once
    it is back: the second upsert's read of the old links (QUORUM) sees the first one's, so
    it leaves no stale tag row, which a read of node 3's old links would."""
    cluster = all_up
    storage = connect(cluster, f"delete_{LEVEL.lower()}")
    embeddings = KeyedEmbeddings(dimension=DIMENSION)
    store = GraphStore(embeddings, storage, batch_size=100)
    try:
        run_sync(storage.drop())
        corpus = group("p", 300)
        store.add_nodes(corpus)
        deleted = [node.id for node in corpus[::10]]
        queries = [embeddings.embed_query(node.text) for node in corpus[::10]]
        moved = corpus[5::10]

        cluster.kill_node(VICTIM)
        cluster.wait_until_seen_as(VICTIM, "DOWN")
        assert store.delete(deleted) == len(deleted)
        store.add_nodes(relinked(moved, "b"))
        cluster.start_node(VICTIM)
        cluster.wait_until_seen_as(VICTIM, "UP")

        offered = set()
        for query in queries:
            hits = run_sync(storage.search_hits(np.asarray(query, np.float32), 1, EVERYTHING))
            offered.update(hit.id for hit in hits)
        assert offered & set(deleted), "no ANN query read the stale replica"

        store.add_nodes(relinked(moved, "c"))
        before = run_sync(storage.tag_sizes([("moved", "b" + node.id) for node in moved]))
        after = run_sync(storage.tag_sizes([("moved", "c" + node.id) for node in moved]))
        assert (set(before.values()), set(after.values())) == ({0}, {1})
        assert run_sync(storage.check()) == []

        gone = set(deleted)
        for query in queries:
            searches = [
                store.similarity_search(query, k=5),
                store.search(query, k=5),
                store.mmr_traversal_search(query, k=5),
                store.traversal_search(query, k=5),
            ]
            returned = {hit.node.id for hits in searches for hit in hits}
            assert not returned & gone
        assert store.get(deleted) == []
    finally:
        run_sync(storage.drop())
        run_sync(storage.close())


def test_each_request_goes_to_a_replica_of_its_row(all_up):
    """With one replica per row, token-aware routing sends each node read to the node that
    holds the row (round robin over three nodes would find it a third of the time)."""
    from graphstore.cassandra import CassandraStorage
    from graphstore.cassandra.queries import SELECT_NODES

    cluster = all_up
    storage = CassandraStorage.connect(
        cluster.hosts,
        cluster.port,
        keyspace=f"{KEYSPACE}_rf1",
        table="routing",
        replication={"class": "SimpleStrategy", "replication_factor": 1},
    )
    try:
        GraphStore(KeyedEmbeddings(dimension=DIMENSION), storage).add_nodes(passages(60))
        requests = storage._requests
        select = requests.prepare(requests.cql(SELECT_NODES[1]))  # one key: routed
        metadata = storage.session.cluster.metadata
        coordinators = set()
        for i in range(60):
            bound = select.bind((f"p{i}",))
            future = storage.session.execute_async(bound, execution_profile=requests.profile)
            assert len(future.result().all()) == 1
            replicas = metadata.get_replicas(storage.keyspace, bound.routing_key)
            assert [host.address for host in replicas] == [future.coordinator_host.address]
            coordinators.add(future.coordinator_host.address)
        assert coordinators == set(cluster.hosts)
    finally:
        run_sync(storage.drop())
        run_sync(storage.close())


def test_a_store_at_consistency_three_opens_and_answers_on_three_healthy_nodes(all_up):
    """Its schema was read at THREE, from tables each node keeps alone: "too few replicas
    for consistency THREE: 1 of 3 alive" with every node up."""
    storage = connect(all_up, "three", consistency="THREE")
    try:
        store = GraphStore(KeyedEmbeddings(dimension=DIMENSION), storage)
        store.add_nodes(passages(5))
        assert len(store.similarity_search("passage 1", k=3)) == 3
    finally:
        run_sync(storage.drop())
        run_sync(storage.close())


def _ingest_through(cluster, host: str, keyspace: str):
    """A new store's first ingest, connected through `host` alone."""
    from graphstore.cassandra import CassandraStorage

    storage = CassandraStorage.connect(
        [host], cluster.port, keyspace=keyspace, replication=REPLICATION
    )
    corpus = [
        Node(f"p{i}", f"passage {i}", {"year": 2000 + i}, {Link.bidir("kw", "k")}) for i in range(4)
    ]
    GraphStore(KeyedEmbeddings(dimension=DIMENSION), storage).add_nodes(corpus)
    return storage


def test_two_processes_making_one_new_store_at_once_both_succeed(all_up):
    """Two ingests making a new keyspace at once, each through its own node: the second's
    `CREATE … IF NOT EXISTS` found what the first had made and returned before the other
    nodes knew of it, so its next request failed ("keyspace … does not exist", "table
    … does not exist", a range index asking for ALLOW FILTERING, or a traceback) in most
    tries.  Each now waits for the nodes to agree on the schema."""
    cluster = all_up
    for attempt in range(3):
        keyspace = f"race_{attempt}_{os.getpid()}"
        with ThreadPoolExecutor(2) as pool:
            futures = [
                pool.submit(_ingest_through, cluster, host, keyspace) for host in cluster.hosts[::2]
            ]
            wait(futures)
        stores = [future.result() for future in futures if future.exception() is None]
        try:
            errors = [future.exception() for future in futures if future.exception()]
            assert not errors, f"attempt {attempt}: {errors}"
            assert sorted(run_sync(stores[0].node_ids())) == ["p0", "p1", "p2", "p3"]
            assert run_sync(stores[0].check()) == []
        finally:
            if stores:
                stores[0].session.execute(f'DROP KEYSPACE IF EXISTS "{keyspace}"', timeout=120)
            for storage in stores:
                run_sync(storage.close())


def test_schema_statements_go_to_a_node_the_session_connects_to(all_up):
    """Schema statements and reads go to one node, the first live one by address
    (`schema.schema_host`); a session whose policy leaves that node out (a white list,
    another data centre) has no connection to it, and each schema read waited for one."""
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import WhiteListRoundRobinPolicy

    from graphstore.cassandra import CassandraStorage
    from graphstore.cassandra.schema import schema_host

    cluster = all_up
    last = cluster.hosts[-1]
    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([last]))
    client = Cluster([last], port=cluster.port, execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    try:
        session = client.connect()
        assert schema_host(session).address == last
        default = connect(cluster, "schema_host")
        try:
            assert schema_host(default.session).address == min(cluster.hosts)
            storage = CassandraStorage(session, KEYSPACE, "schema_host")
            assert storage.dimension is None
        finally:
            run_sync(default.close())
    finally:
        client.shutdown()
