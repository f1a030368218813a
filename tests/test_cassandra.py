"""Cassandra-only behaviour: tag rows on disk, CQL hygiene, and the in-flight bound."""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import struct
import uuid
from collections.abc import AsyncIterator

import numpy as np
import pytest
from cassandra import (
    ConsistencyLevel,
    InvalidRequest,
    OperationTimedOut,
    ReadFailure,
    Unavailable,
)
from cassandra.cluster import NoHostAvailable
from cassandra.connection import ConnectionBusy, ProtocolError
from cassandra.cqltypes import lookup_casstype
from cassandra.query import BatchStatement
from conftest import cassandra_contact

from graphstore import GraphStore, Link, Node, vector_codec
from graphstore.cassandra import CassandraStorage, parse_url
from graphstore.cassandra.consistency import Consistency
from graphstore.cassandra.rows import ranked_groups
from graphstore.cassandra.schema import placements
from graphstore.cassandra.server_warnings import DRIVER_LOGGER
from graphstore.cassandra.session import key_chunks, retry_pauses, said, transient
from graphstore.cassandra.tag_reads import IN_TAGS
from graphstore.errors import InvalidInputError, StorageError, StoreOpenError
from graphstore.filters import EVERYTHING, parse_filter
from graphstore.ingest import ingest
from graphstore.nodes import StoredNode, unit
from graphstore.store import run_sync
from graphstore.testing.embeddings import KeyedEmbeddings

KEYSPACE = "graphstore_test"


def connect(table: str, **options) -> CassandraStorage:
    host, _, port = cassandra_contact().partition(":")
    return CassandraStorage.connect(
        contact_points=[host], port=int(port or 9042), keyspace=KEYSPACE, table=table, **options
    )


@pytest.fixture
async def storage() -> AsyncIterator[CassandraStorage]:
    opened = connect(f"t{uuid.uuid4().hex[:12]}", max_in_flight=3)
    yield opened
    await opened.drop()
    await opened.close()


def tag_rows(storage: CassandraStorage) -> list[tuple[str, str, str]]:
    """Every row of the tag table, read with plain CQL."""
    rows = storage.session.execute(
        f'SELECT kind, tag, node_id FROM "{KEYSPACE}"."{storage.table}_tags"'
    )
    return sorted((row.kind, row.tag, row.node_id) for row in rows)


async def test_readding_a_node_with_changed_links_leaves_no_stale_tag_row(storage):
    def version(links):
        return [StoredNode(Node("a", "text", {}, frozenset(links)), unit([1, 0, 0]))]

    await storage.upsert(version([Link.bidir("kw", "old"), Link.incoming("kw", "kept")]))
    assert tag_rows(storage) == [("kw", "kept", "a"), ("kw", "old", "a")]
    await storage.upsert(version([Link.bidir("kw", "new"), Link.incoming("kw", "kept")]))
    assert tag_rows(storage) == [("kw", "kept", "a"), ("kw", "new", "a")]
    await storage.upsert(version([Link.outgoing("kw", "kept")]))
    assert tag_rows(storage) == []
    assert await storage.check() == []


async def test_the_servers_warning_that_a_stores_batch_is_large_is_not_logged(storage, caplog):
    """Every node is written in one batch with its tag rows, over the server's 5 KiB warning
    threshold by design: `graphstore mcp`, whose SDK logs warnings, printed the server's
    warning on stderr for every card written.  A warning about other tables still shows."""
    caplog.set_level(logging.WARNING, logger=DRIVER_LOGGER)
    links = frozenset({Link.bidir("kw", "x")})
    await storage.upsert([StoredNode(Node("big", "word " * 2000, {}, links), unit([1, 0, 0]))])
    assert [node.node.id for node in await storage.get(["big"])] == ["big"]
    assert [r.getMessage() for r in caplog.records if "Batch for" in r.getMessage()] == []
    other = f"Server warning: Batch for [{KEYSPACE}.other_tags] is of size 6000"
    logging.getLogger(DRIVER_LOGGER).warning(other)
    assert caplog.records[-1].getMessage() == other


async def test_a_new_metadata_key_says_it_adds_range_columns_and_not_the_vector_notice(
    storage, caplog
):
    """A write bringing three new metadata keys logged Cassandra's notice that SAI vector
    indexes are experimental eighteen times (once per schema change of a table with one),
    and nothing said what the write was waiting on."""
    caplog.set_level(logging.INFO)
    node = Node("keys", "text", {"year": 1999, "genre": "novel", "rating": 4.5})
    await storage.upsert([StoredNode(node, unit([1, 0, 0]))])
    messages = [record.getMessage() for record in caplog.records]
    assert [m for m in messages if "experimental" in m] == []
    added = [m for m in messages if m.startswith("graphstore: adding range columns")]
    assert added == [
        f"graphstore: adding range columns for metadata key {key!r} ({kind} values): "
        "a schema change, once per key and type"
        for key, kind in (("genre", "string"), ("rating", "number"), ("year", "number"))
    ]


def replay(storage: CassandraStorage, batch: BatchStatement, timestamp: int | None) -> None:
    """Send `batch` again as the driver's retry does: same statements, same client timestamp."""
    cluster = storage.session.cluster
    own = cluster.timestamp_generator
    cluster.timestamp_generator = lambda: timestamp
    try:
        storage.session.execute(batch)
    finally:
        cluster.timestamp_generator = own


@pytest.mark.parametrize("client_timestamps", [True, False])
async def test_a_retried_write_never_duplicates_or_resurrects_a_tag_row(storage, client_timestamps):
    """A retry re-sends the batch with the timestamp it was built with (the driver keeps the
    message).  Replayed at once it rewrites the same rows; delivered late, after a newer
    write of the node, it must lose to it.  Only client timestamps make the second hold:
    with server timestamps the late retry brings back the stale tag row and the old text."""

    def version(text, *tags):
        links = frozenset(Link.bidir("kw", tag) for tag in tags)
        return [StoredNode(Node("n", text, {}, links), unit([1, 0, 0]))]

    sent: list[tuple[BatchStatement, int | None]] = []

    def record(future) -> None:
        if isinstance(future.query, BatchStatement):
            sent.append((future.query, future.message.timestamp))

    storage.session.use_client_timestamp = client_timestamps
    storage.session.add_request_init_listener(record)
    try:
        await storage.upsert(version("first", "a", "b"))
        first = sent[-1]
        replay(storage, *first)
        replay(storage, *first)
        assert tag_rows(storage) == [("kw", "a", "n"), ("kw", "b", "n")]
        await storage.upsert(version("second", "b", "c"))
        replay(storage, *first)  # the first write's retry, arriving after the second write
        rows = tag_rows(storage)
        [stored] = await storage.get(["n"])
    finally:
        storage.session.remove_request_init_listener(record)
        storage.session.use_client_timestamp = True
    if client_timestamps:
        assert rows == [("kw", "b", "n"), ("kw", "c", "n")]
        assert stored.node.text == "second"
        assert await storage.check() == []
    else:
        assert ("kw", "a", "n") in rows
        assert stored.node.text == "first"


def test_the_numpy_vector_codec_encodes_and_decodes_as_the_protocol_says():
    vector_codec.install()
    float5 = lookup_casstype(
        "org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal.FloatType, 5)"
    )
    values = np.array([0.1, -2.5, 3.0e38, 1.0e-45, 0.0], dtype=np.float32)
    encoded = float5.serialize(values, 4)
    assert encoded == struct.pack(">5f", *values.tolist())
    decoded = float5.deserialize(encoded, 4)
    assert decoded == list(struct.unpack(">5f", encoded))
    assert all(type(x) is float for x in decoded)
    # anything but a float32 array of the right size is the driver's business, errors too
    assert float5.serialize([1.0, 2.0, 3.0, 4.0, 5.0], 4) == struct.pack(">5f", 1, 2, 3, 4, 5)
    with pytest.raises(ValueError, match="Expected sequence of size 5"):
        float5.serialize(np.zeros(3, dtype=np.float32), 4)
    with pytest.raises(struct.error):
        float5.serialize(["a"] * 5, 4)


def test_key_chunks_ask_for_no_partition_outside_the_chunk():
    """An `IN` per column asks for every combination of the chunk's values: chunks that
    mixed kinds (`kw`/`a`…, `mention`/`x`) made the node look up absent partitions too."""
    keys = [("kw", f"a{i:02d}") for i in range(IN_TAGS + 3)] + [("mention", "x"), ("kw", "a00")]
    chunks = key_chunks(sorted(keys), IN_TAGS)
    for chunk in chunks:
        assert len(chunk) <= IN_TAGS
        assert len({kind for kind, _ in chunk}) == 1  # so kinds × names is the chunk
    assert sorted(key for chunk in chunks for key in chunk) == sorted(set(keys))
    assert key_chunks([("n1",), ("n2",), ("n1",)], 100) == [[("n1",), ("n2",)]]


def test_a_wave_ranks_each_tag_as_if_alone():
    """One product for a wave's rows gives each tag the ranking it would get by itself:
    best cosine first, ties by id, at most k, embeddings and tags kept with their row."""
    rng = np.random.default_rng(7)
    query = unit(rng.normal(size=8))
    groups = [
        [
            (f"n{g}-{i}", unit(rng.normal(size=8)).astype("<f4").tobytes(), {("kw", f"t{i}")})
            for i in range(size)
        ]
        for g, size in enumerate([3, 0, 12, 1])
    ]
    best = max(groups[2], key=lambda row: float(np.frombuffer(row[1], "<f4") @ query))
    groups[2].append(("a-tie", best[1], None))  # the best vector again: the id breaks the tie
    pages = ranked_groups(groups, query, 10)
    assert [len(page) for page in pages] == [3, 0, 10, 1]
    assert [hit.id for hit in pages[2][:2]] == ["a-tie", best[0]]
    for group, page in zip(groups, pages, strict=True):
        rows = {node_id: (np.frombuffer(blob, "<f4"), tags) for node_id, blob, tags in group}
        order = sorted(rows, key=lambda node_id: (-float(rows[node_id][0] @ query), node_id))
        assert [hit.id for hit in page] == order[:10]
        for hit in page:
            vector, tags = rows[hit.id]
            assert np.array_equal(hit.embedding, vector)
            assert hit.outgoing == frozenset(tags or ())
            assert hit.similarity == pytest.approx(float(vector @ query), abs=1e-6)


BAD_NAMES = [
    "x; DROP KEYSPACE y",
    'x"; DROP KEYSPACE y; --',
    "x' OR '1'='1",
    "1starts_with_digit",
    "_underscore_first",
    "has-dash",
    "has space",
    "système",
    "",
    "a" * 49,
]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_names_that_are_not_identifiers_are_refused(name):
    # Refused before any connection is made, so no node is needed.
    with pytest.raises(InvalidInputError, match="must be a letter followed by"):
        CassandraStorage.connect(["127.0.0.1"], keyspace=name, table="t")
    with pytest.raises(InvalidInputError, match="must be a letter followed by"):
        CassandraStorage.connect(["127.0.0.1"], keyspace="ks", table=name)


@pytest.mark.parametrize(
    "replication",
    [
        {"class": "SimpleStrategy', 'replication_factor': 1}; DROP KEYSPACE y; --"},
        {"class": "SimpleStrategy", "replication_factor": "1}; DROP KEYSPACE y"},
        {"class": "NetworkTopologyStrategy", "dc1': 1} --": 1},
        {"class": "SimpleStrategy", "replication_factor": 0},
    ],
)
def test_replication_maps_that_could_inject_cql_are_refused(replication):
    with pytest.raises(InvalidInputError):
        CassandraStorage.connect(["127.0.0.1"], keyspace="ks", replication=replication)


@pytest.mark.parametrize(
    ("replication", "nodes", "level", "refused"),
    [
        ({"class": "SimpleStrategy", "replication_factor": "3"}, {"dc1": 1}, "LOCAL_QUORUM", True),
        ({"class": "SimpleStrategy", "replication_factor": "3"}, {"dc1": 2}, "LOCAL_QUORUM", False),
        ({"class": "SimpleStrategy", "replication_factor": "3"}, {"dc1": 2}, "ALL", True),
        ({"class": "SimpleStrategy", "replication_factor": "3"}, {"dc1": 1}, "ONE", False),
        ({"class": "SimpleStrategy", "replication_factor": "1"}, {"dc1": 3}, "TWO", True),
        ({"class": "SimpleStrategy", "replication_factor": "2"}, {"a": 1, "b": 1}, "TWO", False),
        (
            {"class": "org.apache.cassandra.locator.NetworkTopologyStrategy", "a": "3", "b": "1"},
            {"a": 1, "b": 5},
            "LOCAL_QUORUM",
            False,  # a client in b finds its quorum of 1
        ),
        (
            {"class": "org.apache.cassandra.locator.NetworkTopologyStrategy", "a": "3/1"},
            {"a": 1, "b": 5},
            "LOCAL_QUORUM",
            True,  # b holds none of the keyspace
        ),
    ],
)
def test_levels_no_request_can_meet_on_the_clusters_nodes_are_found(
    replication, nodes, level, refused
):
    """A replication factor above the nodes a data centre has keeps fewer replicas than it
    says: a quorum of 3 on one node waits for a second replica that does not exist."""
    beyond = Consistency.of(level).beyond(placements(replication, nodes))
    assert beyond == (level if refused else None)


def test_urls_are_parsed_without_leaking_the_password(monkeypatch):
    parsed = parse_url("cassandra://me:p%40ss@h1:9043,h2:9043/Graph_KS?table=docs")
    assert (parsed.hosts, parsed.port, parsed.keyspace, parsed.table) == (
        ["h1", "h2"],
        9043,
        "graph_ks",
        "docs",
    )
    assert (parsed.username, parsed.password) == ("me", "p@ss")
    assert "p@ss" not in repr(parsed)
    monkeypatch.delenv("GRAPHSTORE_CASSANDRA_PASSWORD", raising=False)
    with pytest.raises(InvalidInputError, match=r"names user 'me' but no password: .*PASSWORD"):
        parse_url("cassandra://me@h/ks")  # was the driver's "Password must not be null"
    with pytest.raises(InvalidInputError, match="needs a host: cassandra://host/keyspace"):
        parse_url("cassandra:///me:s3cret@h/ks")  # was "… must be percent-encoded …"
    monkeypatch.setenv("GRAPHSTORE_CASSANDRA_PASSWORD", "from-env")
    assert parse_url("cassandra://me@[::1]/ks").password == "from-env"
    assert parse_url("cassandra://[::1]/ks").hosts == ["::1"]
    spread = parse_url("cassandra://h1,h2:19042/ks")  # refused: "must use the same port"
    assert (spread.hosts, spread.port) == (["h1", "h2"], 19042)
    assert parse_url("cassandra://h1,h2/ks").port == 9042
    for bad in [
        "cassandra://h/x;DROP KEYSPACE y",
        "cassandra://h/ks?table=t;DROP",
        "cassandra://h",
        "cassandra://h1:1,h2:2/ks",
        "cassandra://h/ks?tabel=t",
    ]:
        with pytest.raises(InvalidInputError) as error:
            parse_url(bad.replace("://", "://me:s3cret@"))
        assert "s3cret" not in str(error.value)


async def test_prepared_statements_hold_no_user_values(storage):
    secret = uuid.uuid4().hex
    values = [f"id-{secret}", f"tag-{secret}", f"kind-{secret}", f"meta-{secret}", secret]
    links = [Link.bidir(f"kind-{secret}", f"tag-{secret}"), Link.outgoing("kw", f"x-{secret}")]
    metadata = {"color": f"meta-{secret}", f"n-{secret}": 3, f"s-{secret}": f"v-{secret}"}
    node = Node(f"id-{secret}", f"text {secret}", metadata, frozenset(links))
    await storage.upsert([StoredNode(node, unit([1, 0, 0]))])
    where = parse_filter(
        {
            "color": f"meta-{secret}",
            f"n-{secret}": {"$lte": 3, "$ne": 4},
            f"s-{secret}": {"$gte": f"v-{secret}"},
        }
    )
    assert len(await storage.search(unit([1, 0, 0]), 3, where)) == 1
    hits = await storage.search_tag((f"kind-{secret}", f"tag-{secret}"), unit([1, 0, 0]), 3, where)
    assert [hit.id for hit in hits] == [f"id-{secret}"]
    assert await storage.tag_sizes([(f"kind-{secret}", f"tag-{secret}")], where) == {
        (f"kind-{secret}", f"tag-{secret}"): 1
    }
    assert len(await storage.get([f"id-{secret}"])) == 1
    await storage.stats()
    assert await storage.check() == []
    assert await storage.delete([f"id-{secret}"]) == 1
    queries = storage.prepared_queries
    assert any("ANN OF" in query for query in queries)
    assert any(query.startswith("INSERT") for query in queries)
    for query in queries:
        for value in values:
            assert value not in query


async def test_in_flight_requests_never_exceed_the_bound(storage):
    spokes = {f"N{i}": [0.5, 0.1 * (i + 1), 0.0] for i in range(24)}  # H alone is nearest
    vectors = {"q": [1.0, 0.0, 0.0], "text H": [1.0, 0.0, 0.0]}
    vectors |= {f"text {name}": vector for name, vector in spokes.items()}
    store = GraphStore(KeyedEmbeddings(vectors), storage, concurrency=16)
    nodes = [Node("H", "text H", {}, frozenset(Link.outgoing("kw", n) for n in spokes))]
    nodes += [Node(n, f"text {n}", {}, frozenset([Link.incoming("kw", n)])) for n in spokes]
    await store.aadd_nodes(nodes)
    hits = await store.atraversal_search("q", k=25, start_k=1, depth=1, adjacent_k=2)
    assert len(hits) == 25
    # Many loops at once: the sync API runs each search on a fresh loop in a worker thread.
    await asyncio.gather(
        *(
            asyncio.to_thread(store.traversal_search, "q", k=25, start_k=1, depth=1)
            for _ in range(4)
        )
    )
    assert storage.max_in_flight == 3
    assert 1 < storage.peak_in_flight <= storage.max_in_flight
    assert storage.in_flight == 0


async def test_a_wave_reads_each_tag_once_when_two_kinds_share_a_tag_name(storage):
    """One `IN` chunk asks for `kw`/`x` and the next for `kw`/`y` and `mention`/`x`: the
    second's kinds × names cover `kw`/`x` again, whose rows must not count twice (they did:
    its size came back 4, so a step over it passed on half the relevance it should)."""
    fillers = [("kw", f"a{i:02d}") for i in range(IN_TAGS - 1)]
    wave = [*fillers, ("kw", "x"), ("kw", "y"), ("mention", "x")]  # sorted: chunks as above
    await storage.upsert(
        [
            StoredNode(Node("p", "p", {}, frozenset([Link.bidir("kw", "x")])), unit([1, 0, 0])),
            StoredNode(Node("q", "q", {}, frozenset([Link.bidir("kw", "x")])), unit([0, 1, 0])),
            StoredNode(
                Node("m", "m", {}, frozenset([Link.incoming("mention", "x")])), unit([0, 0, 1])
            ),
            StoredNode(Node("y", "y", {}, frozenset([Link.incoming("kw", "y")])), unit([1, 1, 0])),
        ]
    )
    sizes: dict = {}
    pages = await storage.search_tags(wave, unit([1, 0, 0]), 10, EVERYTHING, sizes=sizes)
    found = dict(zip(wave, ([hit.id for hit in page] for page in pages), strict=True))
    assert found[("kw", "x")] == ["p", "q"]
    assert found[("mention", "x")] == ["m"]
    assert found[("kw", "y")] == ["y"]
    assert (sizes[("kw", "x")], sizes[("mention", "x")], sizes[("kw", "y")]) == (2, 1, 1)


async def test_check_says_a_batch_replay_may_be_pending_when_rows_disagree(storage, capsys):
    """A tag row missing from the tag table is what a logged batch not yet replayed leaves."""
    from graphstore.cli import main

    await storage.upsert(
        [StoredNode(Node("a", "text", {}, frozenset({Link.bidir("kw", "x")})), unit([1, 0]))]
    )
    assert await asyncio.to_thread(main, ["--store", store_url(storage), "check"]) == 0
    assert "batch" not in capsys.readouterr().out
    storage.session.execute(
        f'DELETE FROM "{KEYSPACE}"."{storage.table}_tags" WHERE kind = %s AND tag = %s AND node_id = %s',
        ("kw", "x", "a"),
    )
    assert await asyncio.to_thread(main, ["--store", store_url(storage), "check"]) == 1
    out = capsys.readouterr().out
    assert "1 problem found" in out
    assert "replaying logged batches" in out
    assert "check --repair" in out
    assert await asyncio.to_thread(main, ["--store", store_url(storage), "check", "--repair"]) == 0
    out = capsys.readouterr().out
    assert "repaired: wrote node 'a' again with its tag rows" in out
    assert "0 problems found" in out


def store_url(storage: CassandraStorage) -> str:
    host, _, port = cassandra_contact().partition(":")
    return f"cassandra://{host}:{port or 9042}/{KEYSPACE}?table={storage.table}"


def test_url_options_set_replication_and_consistency_and_refuse_anything_else():
    parsed = parse_url("cassandra://h/ks?replication_factor=3&consistency=quorum")
    assert parsed.replication == {"class": "SimpleStrategy", "replication_factor": 3}
    assert parsed.consistency == Consistency(read="QUORUM", write="QUORUM")
    split = parse_url("cassandra://h/ks?consistency=ONE&write_consistency=ALL")
    assert split.consistency == Consistency(read="ONE", write="ALL")
    assert parse_url("cassandra://h/ks").consistency == Consistency("LOCAL_QUORUM", "LOCAL_QUORUM")
    assert parse_url("cassandra://h/ks").replication is None
    for bad in [
        "replication_factor=0",
        "replication_factor=3;DROP",
        "replication_factor=",
        "consistency=SERIAL",
        "consistency=ONE'; DROP KEYSPACE y",
        "read_consistency=ANY",
        "write_consistency=",
        "table=a&table=b",
        "table=a#part",
        "table=a#",
    ]:
        with pytest.raises(InvalidInputError) as error:
            parse_url(f"cassandra://me:s3cret@h/ks?{bad}")
        assert "s3cret" not in str(error.value)
        assert "\n" not in str(error.value)
    assert parse_url("cassandra://h/ks?write_consistency=ANY").consistency.write == "ANY"


async def test_each_kind_of_request_runs_at_its_level_and_ann_is_not_downgraded(caplog):
    """Writes and key reads at the levels asked for; ANN queries at LOCAL_ONE, so the server
    has nothing to downgrade (it warns on every query it does downgrade)."""
    opened = connect(f"t{uuid.uuid4().hex[:12]}", consistency=Consistency("LOCAL_QUORUM", "ALL"))
    try:
        store = GraphStore(KeyedEmbeddings(dimension=3), opened)
        nodes = [
            Node(f"n{i}", f"text {i}", {}, frozenset({Link.bidir("kw", "x")})) for i in range(20)
        ]
        await store.aadd_nodes(nodes)
        caplog.clear()
        with caplog.at_level("WARNING", logger="cassandra"):
            assert len(await store.asimilarity_search("text 1", k=3)) == 3
            assert len(await store.atraversal_search("text 1", k=5, adjacent_k=2)) == 5
        assert "Top-K queries can only be run" not in caplog.text
        levels = {
            query: opened._requests.prepare(query).consistency_level
            for query in opened.prepared_queries
        }
        ann = {level for query, level in levels.items() if "ANN OF" in query}
        reads = {
            level
            for query, level in levels.items()
            if query.startswith("SELECT") and "ANN" not in query
        }
        writes = {level for query, level in levels.items() if not query.startswith("SELECT")}
        assert ann == {ConsistencyLevel.LOCAL_ONE}
        assert reads == {ConsistencyLevel.LOCAL_QUORUM}
        assert writes == {ConsistencyLevel.ALL}
        assert opened._requests.batch().consistency_level == ConsistencyLevel.ALL
    finally:
        await opened.drop()
        await opened.close()


async def test_a_keyspace_keeping_more_replicas_than_nodes_is_warned_about(caplog):
    """A replication factor above the node count was accepted in silence (Cassandra accepts
    it, and nodes may join later), though a quorum of it may need every node or more.  Nor
    does the driver warn that it downgraded its protocol version: it starts from v5."""
    caplog.set_level(logging.WARNING)
    host, _, port = cassandra_contact().partition(":")
    keyspace = f"graphstore_rf3_{uuid.uuid4().hex[:8]}"
    opened = CassandraStorage.connect(
        contact_points=[host],
        port=int(port or 9042),
        keyspace=keyspace,
        table="t",
        replication={"class": "SimpleStrategy", "replication_factor": 3},
        consistency="ONE",
    )
    try:
        assert [r.getMessage() for r in caplog.records if "Downgrading" in r.getMessage()] == []
        assert [r.getMessage() for r in caplog.records if r.name.startswith("graphstore")] == [
            f"graphstore: keyspace {keyspace!r} keeps 3 replicas of each row, but the cluster "
            "has 1 node to hold them: QUORUM cannot be met until 1 more join"
        ]
    finally:
        await opened.drop_created_keyspace()
        await opened.close()


def test_an_existing_keyspace_with_another_replication_factor_is_refused():
    """`graphstore_test` keeps one replica: asking for three must not pretend it has them."""
    run_sync(connect("t_unused").close())  # the keyspace exists, with one replica
    with pytest.raises(StoreOpenError, match="exists with replication factor 1, not 3"):
        connect("t_unused", replication={"class": "SimpleStrategy", "replication_factor": 3})


async def test_a_search_reads_every_passage_it_returns_by_key_even_on_one_node(storage):
    """The roots came with their rows from the ANN query, which after a restart may offer a
    row deleted since (`test_cassandra_restart.py`); a search reads what it returns by key."""
    nodes = [
        StoredNode(
            Node("a", "text a", {"n": 1}, frozenset({Link.outgoing("m", "far")})), unit([1, 0, 0])
        ),
        StoredNode(Node("b", "text b", {}, frozenset()), unit([0.9, 0.1, 0])),
        StoredNode(
            Node("far", "text far", {}, frozenset({Link.incoming("m", "far")})), unit([0, 0, 1])
        ),
    ]
    await storage.upsert(nodes)
    asked: list[list[str]] = []
    get = storage.get

    async def counted_get(ids):
        asked.append(list(ids))
        return await get(ids)

    storage.get = counted_get
    store = GraphStore(None, storage)
    hits = await store.asearch(unit([1, 0, 0]), k=3, fetch_k=2)
    assert [hit.node for hit in hits] == [nodes[0].node, nodes[2].node, nodes[1].node]
    assert asked == [["a", "far", "b"]]
    found = await store.asimilarity_search(unit([1, 0, 0]), k=2)
    assert [hit.node.id for hit in found] == ["a", "b"]
    assert asked[1:] == [["a", "b"]]


async def test_a_row_changed_outside_graphstore_is_a_one_line_error_that_check_names(storage):
    """A node row whose metadata is not graphstore's JSON used to end a search that
    returned it, and `show`, with a JSONDecodeError traceback; check passed it."""
    link = Link.bidir("kw", "shared")
    store = GraphStore(None, storage)
    await store.aadd_nodes(
        [Node("a", "text", {"x": 1}, frozenset({link})), Node("b", "more", {}, frozenset({link}))],
        vectors=[[1.0, 0.0], [0.9, 0.1]],
    )
    storage.session.execute(
        f'UPDATE "{KEYSPACE}"."{storage.table}_nodes" SET metadata = %s WHERE node_id = %s',
        ("{not json", "a"),
    )
    message = "the row of 'a' is corrupt (changed outside graphstore?)"
    with pytest.raises(StorageError, match=re.escape(message)):
        await store.aget(["a"])
    with pytest.raises(StorageError, match=re.escape(message)):
        await store.asimilarity_search([1.0, 0.0], k=2)
    problems = await store.acheck()
    assert len(problems) == 1
    assert problems[0].startswith(message)
    assert storage.check_note_for(problems) == ""  # no batchlog replay explains it
    missing = "tag row ('kw', 'shared') points at missing node 'c'"
    assert storage.check_note_for([*problems, missing]) == storage.check_note != ""
    await store.aadd_nodes([Node("a", "text", {"x": 1}, frozenset({link}))], vectors=[[1.0, 0.0]])
    assert [hit.node.id for hit in await store.asimilarity_search([1.0, 0.0], k=2)] == ["a", "b"]
    assert await store.acheck() == []


async def test_check_names_a_node_whose_filter_terms_are_not_its_metadatas(storage):
    """Filter terms are written with a node; a version that made `{"v": [2.0]}` the term of
    `[2.0]`, not of `[2]`, left rows that filters written `[2]` miss, and check passed them."""
    store = GraphStore(None, storage)
    await store.aadd_nodes([Node("a", "text", {"n": {"v": [2.0]}})], vectors=[[1.0, 0.0]])
    storage.session.execute(
        f'UPDATE "{KEYSPACE}"."{storage.table}_nodes" SET filter_terms = %s WHERE node_id = %s',
        ({'["n", {"v": [2.0]}]', '["n.v", 2]'}, "a"),
    )
    assert await store.acheck() == [
        "node 'a' carries filter terms that are not its metadata's (written by an older "
        "graphstore?): filters may miss it; write it again to repair"
    ]
    await store.aadd_nodes([Node("a", "text", {"n": {"v": [2.0]}})], vectors=[[1.0, 0.0]])
    assert await store.acheck() == []
    hits = await store.asimilarity_search([1.0, 0.0], k=1, filter={"n": {"v": [2]}})
    assert [hit.node.id for hit in hits] == ["a"]


async def test_a_store_opened_before_its_first_write_sees_another_processs_passages():
    """The dimension was read once at open: a server or agent started on an empty keyspace
    returned nothing, for its whole life, of what an ingest wrote after it started."""
    table = f"t{uuid.uuid4().hex[:12]}"
    early, writer = connect(table), connect(table)
    try:
        reader = GraphStore(KeyedEmbeddings(dimension=4), early)
        assert await reader.asimilarity_search([1, 0, 0, 0], k=1) == []
        await GraphStore(KeyedEmbeddings(dimension=4), writer).aadd_nodes(
            [Node("a", "alpha", {}, frozenset({Link.bidir("kw", "x")}))], vectors=[[1, 0, 0, 0]]
        )
        assert [h.node.id for h in await reader.asimilarity_search([1, 0, 0, 0], k=1)] == ["a"]
        assert [n.id for n in await reader.aget(["a"])] == ["a"]
        assert (await reader.astats()).nodes == 1
    finally:
        await writer.drop()
        await writer.close()
        await early.close()


async def test_a_table_name_whose_tables_another_stores_could_be_is_refused_when_new():
    """`notes_hot` + `_tags` is `notes` + `_hot_tags`: the second of the two stores failed
    with a raw server error, and left half its tables behind."""
    table = f"t{uuid.uuid4().hex[:12]}_hot"
    storage = connect(table)
    try:
        store = GraphStore(KeyedEmbeddings(dimension=4), storage)
        with pytest.raises(InvalidInputError, match=r"ends in '_hot': its tables would share"):
            await store.aadd_nodes([Node("a", "alpha")], vectors=[[1, 0, 0, 0]])
        made = storage.session.execute(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (KEYSPACE,)
        )
        assert not [row.table_name for row in made if row.table_name.startswith(table)]
    finally:
        await storage.close()


async def test_a_filter_on_a_value_too_long_for_sai_to_index_still_matches(storage):
    """SAI leaves terms over 8 KiB out of its index: such an equality matched nothing (and
    over 64 KiB failed after a minute) where the embedded store found the passage."""
    long, longer = "y" * 8200, "z" * 70_000
    store = GraphStore(KeyedEmbeddings(dimension=4), storage)
    await store.aadd_nodes(
        [
            Node("long", "a", {"v": long, "tags": [longer, "short"]}),
            Node("other", "b", {"v": "y", "tags": ["short"]}),
        ],
        vectors=[[1, 0, 0, 0], [0.9, 0.1, 0, 0]],
    )
    for where in ({"v": long}, {"tags": longer}, {"v": {"$in": [long, "nothing"]}}):
        assert [h.node.id for h in await store.asimilarity_search([1, 0, 0, 0], filter=where)] == [
            "long"
        ], where
        assert [h.node.id for h in await store.asearch([1, 0, 0, 0], filter=where)] == ["long"]
    assert {h.node.id for h in await store.asearch([1, 0, 0, 0], filter={"tags": "short"})} == {
        "long",
        "other",
    }


async def test_a_passage_sure_to_be_too_large_for_one_batch_is_refused_before_any_write(
    storage, tmp_path
):
    """A passage over the node's `batch_size_fail_threshold` (1 MiB on the test node) was
    refused by the server when its batch was written, after the passages written beside it:
    an ingest that ended in that error had stored them (probe).  One certain to be over is
    refused before the first write now; one near the limit, by the write, naming its size."""
    assert storage.max_write_bytes == 1 << 20
    store = GraphStore(KeyedEmbeddings(dimension=4), storage)
    small = Node("small", "a small passage", {}, frozenset())
    big = Node("big", "x" * 2_000_000, {}, frozenset({Link.bidir("kw", "t")}))
    with pytest.raises(InvalidInputError, match=r"^node 'big' needs at least 2,000,034 bytes"):
        await store.aadd_nodes([small, big], vectors=[[1, 0, 0, 0], [0, 1, 0, 0]])
    assert await store.aget(["small", "big"]) == []

    (tmp_path / "a.txt").write_text("A small first file about monkeys.")
    (tmp_path / "z.txt").write_text("monkey " * 200_000)
    with pytest.raises(InvalidInputError, match=r"^z.txt: node 'z.txt#0' needs at least "):
        await ingest(store, [tmp_path], linkers=[], max_chars=2_000_000, root=tmp_path)
    assert await store.aget(["a.txt#0"]) == []

    tags = frozenset(Link.bidir("kw", f"keyword number {n}") for n in range(60))
    near = Node("near", "x" * 1_040_000, {}, tags)
    with pytest.raises(StorageError) as error:
        await store.aadd_nodes([near], vectors=[[1, 0, 0, 0]])
    assert str(error.value).startswith(
        "node 'near' (1040000 bytes of text, 60 incoming tags) is too large for one batch"
    )
    assert await store.aget(["near"]) == []


@pytest.mark.parametrize("links", ["[[1,2", "[1]", "null"])
async def test_a_node_whose_links_were_changed_outside_graphstore_is_repaired_or_deleted(
    storage, links
):
    """`check` said to ingest such a node again, but writing it again or deleting it ended
    in a JSONDecodeError or TypeError traceback: its old tag rows are found by where they
    are, not by its links."""

    def version(*tags: str) -> list[StoredNode]:
        links = frozenset(Link.incoming("kw", tag) for tag in tags)
        return [StoredNode(Node("a", "text", {}, links), unit([1, 0, 0]))]

    def corrupt() -> None:
        storage.session.execute(
            f'UPDATE "{KEYSPACE}"."{storage.table}_nodes" SET links = %s WHERE node_id = %s',
            (links, "a"),
        )

    await storage.upsert(version("old", "kept"))
    corrupt()
    assert (await storage.check())[0].startswith("the row of 'a' is corrupt")
    await storage.upsert(version("new", "kept"))
    assert tag_rows(storage) == [("kw", "kept", "a"), ("kw", "new", "a")]
    assert await storage.check() == []
    corrupt()
    assert await storage.delete(["a"]) == 1
    assert tag_rows(storage) == []
    assert await storage.check() == []


async def test_large_passages_written_at_once_wait_for_a_busy_connection():
    """Passages of hundreds of KB written at once filled the driver's connection, whose
    `ConnectionBusy` was not retried: forty of 330 KB failed with 29 stored, in two runs of
    three; eighty of 400 KB failed in three of three."""
    storage = connect(f"t{uuid.uuid4().hex[:12]}")
    try:
        rng = np.random.default_rng(1)
        words = np.array(["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"])
        nodes = [Node(f"n{i}", " ".join(rng.choice(words, 66_000)), {}) for i in range(80)]
        store = GraphStore(None, storage)
        for _ in range(3):  # the connection fills in about one write of two
            await store.aadd_nodes(nodes, vectors=rng.normal(size=(80, 16)))
        assert len(await store.aget([node.id for node in nodes])) == 80
    finally:
        await storage.drop()
        await storage.close()


def test_requests_are_sent_again_after_doubling_pauses_within_the_window():
    """The schedule sync (opening a store) and async requests share (`retry_pauses`)."""
    assert list(itertools.islice(retry_pauses(60.0), 7)) == [0.25, 0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert list(retry_pauses(0.1)) == []  # not even one pause fits: the error comes at once


def test_a_busy_connection_is_transient_and_a_refusal_is_not():
    """Which driver errors a request is sent again after (`session.transient`)."""
    host = "127.0.0.1:9042"
    busy = NoHostAvailable("no host", {host: ConnectionBusy("overloaded")})
    assert transient(busy)
    assert transient(OperationTimedOut("timed out"))
    assert not transient(NoHostAvailable("no host", {host: ConnectionBusy("x"), "b": OSError()}))
    assert not transient(NoHostAvailable("no host", {}))
    assert not transient(InvalidRequest("batch too large"))
    assert not transient(None)


def test_a_lightweight_transaction_of_unknown_outcome_is_sent_again():
    """Two processes making one store on three nodes recorded its model at once, and one
    failed with the server's "CAS operation result is unknown - proposal accepted by 1 but
    not a quorum" (code 0x1700, which the driver has no class for).  Sent again, Paxos
    completes the accepted proposal first, so the answer is the one recorded."""
    from cassandra.protocol import ErrorMessage

    unknown = ErrorMessage(0x1700, "CAS operation result is unknown - proposal accepted by 1", None)
    assert transient(unknown)
    assert not transient(ErrorMessage(0x2200, "unconfigured table", None))


def test_a_request_no_node_could_take_says_so():
    """A node stopped mid-ingest left the driver's `('Unable to complete the operation
    against any hosts', {})`, which named no host and no cause."""
    gone = NoHostAvailable("Unable to complete the operation against any hosts", {})
    assert said(gone) == (
        "no Cassandra node is up (all it knew stopped answering: is the node running?)"
    )
    busy = NoHostAvailable("no host", {"127.0.0.1:9042": ConnectionBusy("overloaded")})
    assert said(busy) == "overloaded (127.0.0.1:9042)"


def test_the_drivers_errors_are_said_plainly_not_as_its_reprs():
    """A node not listening, or too few replicas for the consistency asked, printed the
    driver's tuple of a dict of exception reprs; a connection that timed out said "from
    None", another server on the port "protocol version 72", and a read a replica failed
    (a node just restarted) the server's code 1300 and a dict (probe)."""
    refused = ConnectionRefusedError(111, "Tried connecting to [('h', 9049)]. Connection refused")
    down = NoHostAvailable(
        "Unable to connect to any servers", {"h2:9049": refused, "h1:9049": refused}
    )
    assert (
        said(down) == "connection refused: is a Cassandra node listening there? (h1:9049, h2:9049)"
    )
    paused = OperationTimedOut("Timed out creating connection (5 seconds)", last_host=None)
    assert said(NoHostAvailable("x", {"h1:9042": paused})) == "no answer in time (h1:9042)"
    http = ProtocolError("This version of the driver does not support protocol version 72")
    assert said(NoHostAvailable("x", {"h1:9042": http})) == (
        "the server there does not speak Cassandra's protocol: is it a Cassandra node? (h1:9042)"
    )
    replica = ReadFailure(
        "Operation failed - received 1 responses and 1 failures: UNKNOWN from /127.0.0.3:7000",
        consistency=ConsistencyLevel.LOCAL_QUORUM,
        required_responses=2,
        received_responses=1,
        failures=1,
        error_code_map={"127.0.0.3": 0},
    )
    assert said(replica) == (
        "the read failed on 127.0.0.3 (1 of 2 replicas answered for LOCAL_QUORUM); a node that "
        "has just started may not be ready: try again"
    )
    few = Unavailable("Cannot achieve consistency level THREE", ConsistencyLevel.THREE, 3, 1)
    assert said(few) == "too few replicas alive: consistency THREE needs 3, 1 alive"
    assert said(NoHostAvailable("x", {"h1:9042": few})) == f"{said(few)} (h1:9042)"
