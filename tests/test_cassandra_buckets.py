"""Hot tags in buckets on Cassandra: every path (write, search_tag, tag sizes, delete,
re-upsert, check), concurrent writers, and stores made before buckets existed.

A tiny `TagLayout` (a tag turns hot at 3 rows, a bucket takes 2) keeps every case small.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable

import numpy as np
import pytest
from conftest import cassandra_contact, write_old_cassandra_store

from graphstore import GraphStore, Link, Node
from graphstore.cassandra import CassandraStorage
from graphstore.cassandra.layout import SMALL, TagLayout, bucket_of, plan_rows
from graphstore.cassandra.schema import SCHEMA
from graphstore.cassandra.tables import PARTS
from graphstore.embedded import EmbeddedStorage
from graphstore.errors import InvalidInputError, StoreOpenError
from graphstore.filters import EVERYTHING, matches, parse_filter
from graphstore.nodes import StoredNode, unit

KEYSPACE = "graphstore_test"
TINY = TagLayout(hot_threshold=3, bucket_rows=2, check_every=1, refresh_seconds=3600)
HOT = ("kw", "hot")


def connect(table: str, layout: TagLayout = TINY) -> CassandraStorage:
    host, _, port = cassandra_contact().partition(":")
    return CassandraStorage.connect(
        contact_points=[host],
        port=int(port or 9042),
        keyspace=KEYSPACE,
        table=table,
        layout=layout,
    )


@pytest.fixture
async def storage() -> AsyncIterator[CassandraStorage]:
    opened = connect(f"t{uuid.uuid4().hex[:12]}")
    yield opened
    await opened.drop()
    await opened.close()


def vector(i: int) -> list[float]:
    """Distinct directions, so every ranking has one answer."""
    return [1.0, 0.1 * i, 0.01 * i * i]


def member(i: int, *links: Link, metadata: dict | None = None) -> StoredNode:
    node = Node(f"n{i}", f"text {i}", metadata or {}, frozenset({Link.bidir(*HOT), *links}))
    return StoredNode(node, unit(vector(i)))


def raw(storage: CassandraStorage, cql: str, values: tuple = ()) -> list:
    names = {
        part: f'"{KEYSPACE}"."{storage.table}_{part}"'
        for part in ("nodes", "tags", "hot", "hot_tags")
    }
    return list(storage.session.execute(cql.format(**names), values))


def where_rows_are(storage: CassandraStorage) -> dict[str, int]:
    """node id -> SMALL or bucket, for the rows of the hot tag, read with plain CQL."""
    places = {
        row.node_id: SMALL
        for row in raw(storage, "SELECT node_id FROM {tags} WHERE kind = 'kw' AND tag = 'hot'")
        if row.node_id is not None
    }
    for row in raw(storage, "SELECT bucket, node_id FROM {hot}"):
        assert row.node_id not in places, f"{row.node_id} has two rows"
        places[row.node_id] = row.bucket
    return places


def buckets(storage: CassandraStorage, tag=HOT) -> list[int]:
    """The buckets a tag has, read from its small part's static column."""
    rows = raw(storage, "SELECT buckets FROM {tags} WHERE kind = %s AND tag = %s LIMIT 1", tag)
    return sorted(rows[0].buckets or ()) if rows else []


def directory(storage: CassandraStorage) -> dict:
    return {
        (row.kind, row.tag): row.rows
        for row in raw(storage, "SELECT kind, tag, rows FROM {hot_tags}")
    }


async def exact_ids(
    storage: CassandraStorage, query: list[float], k: int, where=EVERYTHING
) -> list[str]:
    """The `k` members of the hot tag nearest to `query`, ranked here from `get`."""
    places = where_rows_are(storage)
    stored = await storage.get(sorted(places))
    passing = [s for s in stored if matches(where, s.node.metadata)]
    ranked = sorted(passing, key=lambda s: (-float(s.embedding @ unit(query)), s.node.id))
    return [s.node.id for s in ranked[:k]]


async def grow(storage: CassandraStorage, count: int) -> None:
    """Add members n0..n{count-1} one upsert at a time, as an ingest of small files would."""
    for i in range(count):
        await storage.upsert([member(i)])


async def test_a_tag_turns_hot_at_the_threshold_and_gets_buckets_as_it_grows(storage):
    await grow(storage, 3)
    assert set(where_rows_are(storage).values()) == {SMALL}
    assert buckets(storage) == [0]  # the third row reached the threshold
    assert directory(storage) == {HOT: 0}
    await grow(storage, 9)  # n0..n2 again (they move into bucket 0), then 6 new ones
    places = where_rows_are(storage)
    assert buckets(storage) == [0, 1, 2, 3, 4]  # 9 hot rows, 2 a bucket
    assert directory(storage) == {HOT: 9}
    assert all(place != SMALL for place in places.values())
    # every row is where its node row says, so a delete finds it
    for row in raw(storage, "SELECT node_id, tag_buckets FROM {nodes}"):
        assert row.tag_buckets == {HOT: places[row.node_id]}
    assert await storage.check() == []
    stats = await storage.stats()
    assert (stats.nodes, stats.tag_rows, stats.tag_frequencies[HOT]) == (9, 9, 9)


async def test_search_tag_and_sizes_cover_the_small_part_and_every_bucket(storage):
    await grow(storage, 3)  # n0..n2 stay in the small part
    await storage.upsert([member(i) for i in range(3, 8)])  # one call: all to bucket 0
    await storage.upsert([member(i) for i in range(8, 12)])  # bucket count grew after the last
    places = where_rows_are(storage)
    assert {places[f"n{i}"] for i in range(3)} == {SMALL}
    assert len(set(places.values()) - {SMALL}) > 1
    for query in ([1, 0, 0], [1, 1.1, 0.5], [0.2, 1, 1.5]):
        for k in (1, 4, 20):
            hits = await storage.search_tag(HOT, unit(query), k, EVERYTHING)
            assert [hit.id for hit in hits] == await exact_ids(storage, query, k)
            assert [h.similarity for h in hits] == sorted(
                (h.similarity for h in hits), reverse=True
            )
    assert await storage.tag_sizes([HOT, ("kw", "none")]) == {HOT: 12, ("kw", "none"): 0}
    sizes: dict = {}
    await storage.search_tags([HOT], unit([1, 0, 0]), 5, EVERYTHING, sizes=sizes)
    assert sizes == {HOT: 12}
    assert await storage.check() == []


async def test_a_filtered_search_and_count_reach_into_buckets(storage):
    nodes = [member(i, metadata={"color": "red" if i % 3 else "blue"}) for i in range(10)]
    for node in nodes:  # one at a time: the first three stay small
        await storage.upsert([node])
    red = parse_filter({"color": "red"})
    hits = await storage.search_tag(HOT, unit([1, 0.5, 0]), 10, red)
    assert [hit.id for hit in hits] == await exact_ids(storage, [1, 0.5, 0], 10, red)
    assert len(hits) == 6
    assert await storage.tag_sizes([HOT], red) == {HOT: 6}
    assert await storage.tag_sizes([HOT], parse_filter({"color": "blue"})) == {HOT: 4}
    assert await storage.tag_sizes([HOT], parse_filter({"color": {"$ne": "red"}})) == {HOT: 4}


async def test_tag_pages_count_the_small_part_and_every_bucket(storage):
    """A hot tag's pages: its small part's keys and every bucket's members, filter
    included (three pages of four passages each, one page of its own per loose node)."""
    pages = [
        StoredNode(
            Node(
                f"page{i % 3}.txt#{i}",
                "text",
                {"color": "red" if i % 3 else "blue"},
                frozenset({Link.incoming(*HOT)}),
            ),
            unit(vector(i)),
        )
        for i in range(12)
    ]
    for node in pages[:3]:  # one at a time: they stay small
        await storage.upsert([node])
    await storage.upsert(pages[3:])
    await storage.upsert([member(12), member(13)])
    places = where_rows_are(storage)
    assert SMALL in places.values()
    assert len(set(places.values())) > 2  # the small part and two buckets or more
    assert await storage.tag_pages([HOT, ("kw", "none")]) == {HOT: 5, ("kw", "none"): 0}
    assert await storage.tag_pages([HOT], parse_filter({"color": "red"})) == {HOT: 2}


async def test_a_small_tags_pages_come_with_its_read(storage):
    """A small tag is read whole, so the read counts its pages too, filter included: a
    traversal asked for them in a second round trip, which read the tag's keys again.  A hot
    tag's pages are not in the read (its buckets are searched, not read): `tag_pages`."""
    one_page, two_pages = ("href", "a"), ("href", "b")
    cited = [("page0.txt#0", one_page), ("page0.txt#1", one_page)]
    cited += [("page1.txt#0", two_pages), ("page2.txt#0", two_pages)]
    await storage.upsert(
        [
            StoredNode(
                Node(
                    node_id, "text", {"color": "blue" if i == 3 else "red"}, {Link.incoming(*tag)}
                ),
                unit(vector(i)),
            )
            for i, (node_id, tag) in enumerate(cited)
        ]
    )
    await grow(storage, 5)
    assert buckets(storage)  # HOT is hot; the two others are small
    tags = [one_page, two_pages, HOT]
    sizes: dict = {}
    pages: dict = {}
    await storage.search_tags(tags, unit([1, 0, 0]), 1, EVERYTHING, sizes=sizes, pages=pages)
    assert pages == {one_page: 1, two_pages: 2}
    assert sizes == {one_page: 2, two_pages: 2, HOT: 5}
    blue: dict = {}
    await storage.search_tags(tags, unit([1, 0, 0]), 1, parse_filter({"color": "blue"}), pages=blue)
    assert blue == {one_page: 0, two_pages: 1}


async def test_a_reader_counts_the_pages_of_buckets_added_since_it_learned_them(storage):
    """A reader reads the buckets it knows together with the small part, and the buckets
    the small part names beyond them after it: none is left out of the count."""
    await grow(storage, 8)
    reader = connect(storage.table)
    try:
        assert await reader.tag_pages([HOT]) == {HOT: 8}  # one page per member
        before = len(buckets(storage))
        await storage.upsert([member(i) for i in range(8, 30)])
        assert len(buckets(storage)) > before
        assert await reader.tag_pages([HOT]) == {HOT: 30}
        assert await reader.tag_pages([HOT], parse_filter({"color": "red"})) == {HOT: 0}
    finally:
        await reader.close()


async def test_delete_removes_rows_from_the_small_part_and_their_buckets(storage):
    await grow(storage, 10)
    places = where_rows_are(storage)
    gone = ["n1", "n4", "n7", "n9"]  # small and hot ones
    assert {places[node_id] == SMALL for node_id in gone} == {True, False}
    assert await storage.delete(gone) == 4
    assert sorted(where_rows_are(storage)) == sorted(set(places) - set(gone))
    assert directory(storage) == {HOT: sum(place != SMALL for place in places.values()) - 3}
    assert await storage.check() == []


async def test_reupserting_moves_a_node_to_where_a_new_node_would_go(storage):
    await grow(storage, 5)  # n0..n2 small, n3 and n4 in bucket 0
    assert where_rows_are(storage)["n0"] == SMALL
    await storage.upsert([member(i) for i in range(5, 12)])  # all to bucket 0, then it grows
    count = len(buckets(storage))
    assert count == 5
    moved = next(i for i in range(3, 12) if bucket_of(f"n{i}", count) != 0)
    await storage.upsert([member(0), member(moved)])
    after = where_rows_are(storage)
    assert after["n0"] == bucket_of("n0", count)
    assert after[f"n{moved}"] == bucket_of(f"n{moved}", count)
    assert directory(storage) == {HOT: 10}  # n0 joined the buckets; the other only moved
    # dropping the link removes the row wherever it is
    await storage.upsert([StoredNode(Node("n0", "text 0", {}, frozenset()), unit(vector(0)))])
    assert "n0" not in where_rows_are(storage)
    assert directory(storage) == {HOT: 9}
    assert await storage.check() == []


def hot_row_copier(storage: CassandraStorage, node_id: str) -> Callable[[int, str], None]:
    """Writes a copy of `node_id`'s row of the hot tag, behind the store's back, into a
    given bucket under a given node id."""
    [row] = raw(storage, "SELECT embedding, outgoing FROM {nodes} WHERE node_id = %s", (node_id,))
    insert = storage.session.prepare(
        f'INSERT INTO "{KEYSPACE}"."{storage.table}_hot" '
        "(kind, tag, bucket, node_id, embedding, outgoing) VALUES ('kw', 'hot', ?, ?, ?, ?)"
    )
    return lambda bucket, owner: storage.session.execute(
        insert, (bucket, owner, row.embedding, row.outgoing)
    )


async def test_check_reports_rows_out_of_place(storage):
    await grow(storage, 5)  # two hot rows, one bucket
    assert await storage.check() == []
    places = where_rows_are(storage)
    node_id = next(node for node, place in places.items() if place != SMALL)
    insert = hot_row_copier(storage, node_id)
    # a row moved behind the node row's back: a delete would miss it
    raw(
        storage,
        "DELETE FROM {hot} WHERE kind = 'kw' AND tag = 'hot' AND bucket = %s AND node_id = %s",
        (places[node_id], node_id),
    )
    insert(7, node_id)
    problems = await storage.check()
    assert any("beyond its 1 buckets: searches miss it" in problem for problem in problems)
    assert any("deleting the node would leave it" in problem for problem in problems)
    # the same node twice, and a directory count that is off
    insert(0, node_id)
    storage.session.execute(
        f'UPDATE "{KEYSPACE}"."{storage.table}_hot_tags" SET rows = rows + 5 '
        "WHERE directory = 0 AND kind = 'kw' AND tag = 'hot'"
    )
    problems = await storage.check()
    assert any("has 2 rows of tag ('kw', 'hot')" in problem for problem in problems)
    assert any("the directory counts 7" in problem for problem in problems)


async def test_repair_mends_what_check_reports_and_a_write_would_not(storage):
    """A node crash mid-write left a directory count off for good (an increment is never
    retried) and two writers of one passage can leave a row no node row places: no command
    mended either, and a search weighs a tag by that count."""
    await grow(storage, 5)
    extra = StoredNode(Node("e", "e", {}, frozenset({Link.bidir("kw", "x")})), unit([1, 0, 0]))
    await storage.upsert([extra])
    places = where_rows_are(storage)
    node_id = next(node for node, place in places.items() if place != SMALL)
    insert = hot_row_copier(storage, node_id)
    insert(7, node_id)  # beyond the tag's buckets
    insert(0, "ghost")  # of a node that is gone
    raw(storage, "DELETE FROM {tags} WHERE kind = 'kw' AND tag = 'x' AND node_id = 'e'")
    raw(
        storage,
        "UPDATE {hot_tags} SET rows = rows - 36 WHERE directory = 0 AND kind = 'kw' "
        "AND tag = 'hot'",
    )
    assert len(await storage.check()) >= 4
    done = await storage.repair()
    assert any("'ghost'" in line and "the node is gone" in line for line in done)
    assert any(f"{node_id!r}" in line and "bucket 7" in line for line in done)
    assert "wrote node 'e' again with its tag rows" in done
    assert any("hot tag ('kw', 'hot')" in line for line in done)
    assert await storage.check() == []
    assert directory(storage) == {HOT: sum(place != SMALL for place in places.values())}
    assert where_rows_are(storage) == places
    hits = await storage.search_tag(("kw", "x"), unit([1, 0, 0]), 5, EVERYTHING)
    assert [hit.id for hit in hits] == ["e"]
    assert await storage.repair() == []


async def test_two_writers_turning_the_same_tag_hot_at_once_agree(storage):
    other = connect(storage.table)
    try:
        for start in range(0, 24, 4):
            await asyncio.gather(
                storage.upsert([member(i) for i in range(start, start + 2)]),
                other.upsert([member(i) for i in range(start + 2, start + 4)]),
            )
        count = len(buckets(storage))
        assert buckets(storage) == list(range(count))  # contiguous: no bucket is skipped
        assert await storage.check() == []
        assert sorted(where_rows_are(storage)) == sorted(f"n{i}" for i in range(24))
        for reader in (storage, other):
            hits = await reader.search_tag(HOT, unit([1, 1, 1]), 24, EVERYTHING)
            assert len(hits) == 24
    finally:
        await other.close()


async def test_a_writer_unaware_that_a_tag_turned_hot_writes_small_rows_readers_still_find(
    storage,
):
    late = connect(storage.table)
    try:
        await late.upsert([member(0)])  # `late` loads the directory now: no hot tags
        await grow(storage, 5)  # `storage` makes the tag hot: n3, n4 in bucket 0
        assert buckets(storage) == [0]
        await late.upsert([member(i) for i in range(6, 9)])  # within its refresh interval
        places = where_rows_are(storage)
        assert {places[f"n{i}"] for i in range(6, 9)} == {SMALL}
        members = [f"n{i}" for i in (0, 1, 2, 3, 4, 6, 7, 8)]
        hits = await storage.search_tag(HOT, unit([1, 0, 0]), 20, EVERYTHING)
        assert sorted(hit.id for hit in hits) == members
        assert await storage.tag_sizes([HOT]) == {HOT: 8}
        assert await storage.check() == []
    finally:
        await late.close()


async def test_graph_search_gives_the_same_results_with_and_without_buckets(storage):
    """Hot tags change where rows are, never what a search returns (the embedded backend
    has no buckets)."""
    nodes = []
    for i in range(30):
        links = {Link.bidir("kw", f"k{i % 4}"), Link.bidir("kw", "all")}
        links |= {Link.outgoing("ref", f"r{i + 1}"), Link.incoming("ref", f"r{i}")}
        metadata = {"even": i % 2 == 0, "n": i}
        nodes.append(Node(f"p{i}", f"passage {i}", metadata, frozenset(links)))
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(30, 8))
    bucketed = GraphStore(None, storage, batch_size=4)
    embedded = GraphStore(None, EmbeddedStorage(":memory:"), batch_size=4)
    for store in (bucketed, embedded):
        await store.aadd_nodes(nodes, vectors=vectors)
    assert len(buckets(storage, ("kw", "all"))) > 1
    for query in rng.normal(size=(5, 8)):
        for search in ("asearch", "ammr_traversal_search"):
            for metadata_filter in (None, {"even": True}, {"n": {"$lt": 20}, "even": False}):
                got = await getattr(bucketed, search)(query, k=6, filter=metadata_filter)
                want = await getattr(embedded, search)(query, k=6, filter=metadata_filter)
                assert [hit.node.id for hit in got] == [hit.node.id for hit in want]
                assert [hit.score for hit in got] == pytest.approx(
                    [hit.score for hit in want], abs=1e-5
                )
        got = await bucketed.atraversal_search(query, k=8, start_k=2, depth=2)
        want = await embedded.atraversal_search(query, k=8, start_k=2, depth=2)
        assert [hit.node.id for hit in got] == [hit.node.id for hit in want]
    await embedded.aclose()


def make_old_store(session, table: str) -> None:
    """A store as graphstore made them before hot tags, with two nodes under one tag."""
    links = frozenset({Link.bidir("kw", "x")})
    nodes = [(Node(n, f"text {n}", {}, links), v) for n, v in (("a", [1, 0, 0]), ("b", [0, 1, 0]))]
    write_old_cassandra_store(session, KEYSPACE, table, nodes)


async def test_a_store_made_before_buckets_is_upgraded_when_opened_and_keeps_working():
    table = f"t{uuid.uuid4().hex[:12]}"
    first = connect(f"{table}x")  # a session to make the old tables with
    make_old_store(first.session, table)
    storage = connect(table)
    try:
        assert await storage.check() == []
        hits = await storage.search_tag(("kw", "x"), unit([1, 0.2, 0]), 5, EVERYTHING)
        assert [hit.id for hit in hits] == ["a", "b"]
        await grow(storage, 6)
        assert await storage.delete(["a"]) == 1
        assert await storage.check() == []
        assert (await storage.stats()).nodes == 6 + 1
    finally:
        await storage.drop()
        await storage.close()
        await first.close()


async def test_outgoing_tags_are_stored_as_text_and_read_back_as_tags(storage):
    await storage.upsert([member(0, Link.outgoing("kw", "elsewhere")), member(1)])
    rows = raw(storage, "SELECT outgoing FROM {nodes} WHERE node_id = 'n0'")
    assert json.loads(rows[0].outgoing) == [["kw", "elsewhere"], ["kw", "hot"]]
    hits = await storage.search_tag(HOT, unit(vector(0)), 5, EVERYTHING)
    assert {hit.id: hit.outgoing for hit in hits} == {
        "n0": {("kw", "elsewhere"), HOT},
        "n1": {HOT},
    }
    assert [hit.id for hit in await storage.search_hits(unit(vector(1)), 1, EVERYTHING)] == ["n1"]


async def test_a_store_with_outgoing_tags_in_set_columns_keeps_reading_and_writing_them():
    """Stores made before outgoing tags were text have set columns in every table: they
    keep them, and a read decodes either kind to the same tags."""
    table = f"t{uuid.uuid4().hex[:12]}"
    first = connect(f"{table}x")  # a session to make the old tables with
    names = {part: f'"{KEYSPACE}"."{table}_{part}"' for part in PARTS} | {"table": table}
    for statement in SCHEMA:
        old = statement.replace("outgoing text", "outgoing set<frozen<tuple<text, text>>>")
        first.session.execute(old.format(**names, dimension=3), timeout=120)
    storage = connect(table)
    try:
        await grow(storage, 6)  # the hot tag's rows move from the small part to buckets
        await storage.upsert([member(6, Link.outgoing("kw", "elsewhere"))])
        assert await storage.check() == []
        assert set(where_rows_are(storage).values()) != {SMALL}
        for part in ("nodes", "hot"):
            rows = raw(
                storage, f"SELECT outgoing FROM {{{part}}} WHERE node_id = 'n6' ALLOW FILTERING"
            )
            assert rows[0].outgoing == {("kw", "elsewhere"), HOT}  # still a set
        hits = await storage.search_tag(HOT, unit(vector(6)), 3, EVERYTHING)
        assert [hit.id for hit in hits] == await exact_ids(storage, vector(6), 3)
        assert hits[0].outgoing == {("kw", "elsewhere"), HOT}
    finally:
        await storage.drop()
        await storage.close()
        await first.close()


async def test_a_store_that_cannot_be_upgraded_fails_to_open_in_one_line():
    table = f"t{uuid.uuid4().hex[:12]}"
    first = connect(f"{table}x")
    make_old_store(first.session, table)
    # a table of that name that is not ours makes the upgrade fail
    first.session.execute(f'CREATE TABLE "{KEYSPACE}"."{table}_hot" (id int PRIMARY KEY)')
    try:
        with pytest.raises(StoreOpenError) as error:
            connect(table)
        message = str(error.value)
        assert "\n" not in message
        assert "made by an older graphstore" in message
        assert "ALTER" in message
    finally:
        for part in ("nodes", "tags", "hot", "hot_tags"):
            first.session.execute(
                f'DROP TABLE IF EXISTS "{KEYSPACE}"."{table}_{part}"', timeout=120
            )
        await first.close()


# -- placement, without a node ---------------------------------------------------------------


def test_plan_rows_places_moves_and_counts():
    layout = TagLayout(hot_threshold=3, bucket_rows=2, check_every=1)
    small, hot, gone = ("kw", "small"), ("kw", "hot"), ("kw", "gone")
    new = plan_rows("n", frozenset({small, hot}), {}, {hot: 4}, layout)
    assert new.rows == {small: SMALL, hot: bucket_of("n", 4)}
    assert (new.removed, new.hot_rows, new.checked) == ({}, {hot: 1}, frozenset({small}))
    again = plan_rows("n", frozenset({small, hot}), new.rows, {hot: 4}, layout)
    assert (again.removed, again.hot_rows) == ({}, {})  # unchanged: rewritten in place
    moved = plan_rows("n", frozenset({hot}), {hot: SMALL, gone: 1}, {hot: 4}, layout)
    assert moved.removed == {hot: SMALL, gone: 1}
    assert moved.hot_rows == {hot: 1, gone: -1}


def test_layout_settings_are_checked_and_sampling_is_the_same_everywhere():
    with pytest.raises(InvalidInputError, match="hot_threshold"):
        TagLayout(hot_threshold=0)
    layout = TagLayout(check_every=4)
    sampled = [layout.checks(("kw", "t"), f"n{i}") for i in range(400)]
    assert sampled == [layout.checks(("kw", "t"), f"n{i}") for i in range(400)]
    assert 60 < sum(sampled) < 140
    assert TagLayout().buckets_for(0) == 1
    assert TagLayout(bucket_rows=10).buckets_for(25) == 3
