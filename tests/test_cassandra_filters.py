"""Cassandra-only filter behaviour: the query plan, range columns added as keys appear, a
store written before range columns, the cap on range columns, and other processes' columns."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from conftest import write_old_cassandra_store
from test_cassandra import connect

from graphstore.cassandra import CassandraStorage
from graphstore.cassandra.filters import (
    ANN_LIMIT,
    ANN_OVERFETCH,
    ANN_ROWS,
    Branch,
    Plan,
    RangeColumn,
    Ranking,
    first_limit,
    plan,
    top_k,
)
from graphstore.filters import EVERYTHING, parse_filter
from graphstore.links import Link
from graphstore.nodes import Node, StoredNode, unit

CHAPTER = RangeColumn(True, "chapter")
NODES = [
    Node(f"c{chapter}", f"chapter {chapter}", {"chapter": chapter, "day": f"2024-01-{chapter:02d}"})
    for chapter in range(1, 11)
]


def ids(found) -> list[str]:
    return sorted(item.stored.node.id for item in found)


@pytest.fixture
async def table() -> AsyncIterator[str]:
    name = f"t{uuid.uuid4().hex[:12]}"
    yield name
    cleanup = connect(name)
    await cleanup.drop()
    await cleanup.close()


def test_or_and_in_become_one_query_each_negations_are_checked_on_rows():
    where = parse_filter({"$or": [{"chapter": {"$lte": 3}}, {"book": {"$in": ["a", "b"]}}]})
    branches = plan(where, {CHAPTER}, complete=True).branches
    assert [branch.cql for branch in branches] == [
        f'"{CHAPTER.lo}" <= ?',
        "filter_terms CONTAINS ?",
        "filter_terms CONTAINS ?",
    ]
    assert all(branch.exact for branch in branches)
    negated = plan(parse_filter({"chapter": {"$ne": 3}, "book": "a"}), {CHAPTER}, True)
    assert [(b.cql, b.exact) for b in negated.branches] == [("filter_terms CONTAINS ?", False)]


def test_a_range_on_a_key_no_node_has_runs_no_query_unless_columns_overflowed():
    where = parse_filter({"year": {"$gt": 2000}})
    assert plan(where, {CHAPTER}, complete=True).branches == ()
    [branch] = plan(where, {CHAPTER}, complete=False).branches
    assert (branch.cql, branch.exact) == ("", False)


def test_bounds_on_one_column_keep_the_tightest_and_stay_exact_when_precise():
    where = parse_filter(
        {"chapter": {"$lte": 9, "$lt": 9, "$gte": 2}, "$and": [{"chapter": {"$gt": 1}}]}
    )
    [branch] = plan(where, {CHAPTER}, complete=True).branches
    assert branch.restrictions == (f'"{CHAPTER.hi}" >= ?', f'"{CHAPTER.lo}" < ?')
    assert branch.values == (2.0, 9.0)
    assert branch.exact
    [loose] = plan(parse_filter({"chapter": {"$lt": 2**60}}), {CHAPTER}, True).branches
    assert (loose.restrictions, loose.exact) == ((f'"{CHAPTER.lo}" <= ?',), False)


def test_an_ann_search_asks_for_more_rows_than_it_returns_within_the_limit():
    assert ANN_OVERFETCH > 1
    assert [first_limit(10), first_limit(10, ANN_OVERFETCH)] == [10, 10 * ANN_OVERFETCH]
    assert first_limit(ANN_LIMIT // 2, ANN_OVERFETCH) == ANN_LIMIT  # never above the limit
    assert first_limit(ANN_LIMIT + 1, ANN_OVERFETCH) is None  # beyond it: rows read and ranked
    # A nearest-passage query (similarity, a graph search's roots): at least ANN_ROWS.
    assert [first_limit(k, ANN_OVERFETCH, ANN_ROWS) for k in (5, 10, 20)] == [40, 40, 80]


async def test_an_overfetched_search_asks_again_only_while_fewer_than_k_rows_pass():
    """Rows ranked by score, one in five passing an inexact branch: with k 10 and over-fetch
    4 the first query (40 rows) keeps 8, the second (160) keeps 32 and is the last."""
    rows = [(f"n{i:04d}", 1.0 - i / 2000, i % 5 == 0) for i in range(2000)]
    limits: list[int | None] = []

    async def fetch(branch: Branch, limit: int | None) -> list[tuple[str, float, bool]]:
        limits.append(limit)
        return rows if limit is None else rows[:limit]

    ranking = Ranking[tuple[str, float, bool]](
        lambda row: row[0], lambda row: row[1], lambda row: row[2]
    )
    found = await top_k(Plan((Branch((), (), False),), EVERYTHING), 10, fetch, ranking, overfetch=4)
    assert limits == [40, 160]
    assert [row[0] for row in found] == [f"n{i:04d}" for i in range(0, 50, 5)]


async def test_similarity_asks_sai_for_as_many_rows_as_a_graph_search_roots(table: str):
    """SAI misses true neighbours at a small LIMIT: similarity at k = 2 asks for ANN_ROWS
    rows, as a graph search's roots do, not 4 × k (8); each keeps the k best by exact score."""
    store = connect(table)
    limits: list[int] = []

    def record(future: Any) -> None:
        prepared = getattr(future.query, "prepared_statement", None)
        if prepared is not None and "ANN OF" in prepared.query_string:
            limits.append(int.from_bytes(future.query.values[-1], "big", signed=True))

    try:
        await store.upsert([StoredNode(n, unit([1, i, 0])) for i, n in enumerate(NODES)])
        store.session.add_request_init_listener(record)
        similar = await store.search(unit([1, 0, 0]), 2, EVERYTHING)
        roots = await store.search_hits(unit([1, 0, 0]), 2, EVERYTHING)
        assert limits == [ANN_ROWS, ANN_ROWS]
        assert ids(similar) == ["c1", "c2"] == sorted(hit.id for hit in roots)
    finally:
        store.session.remove_request_init_listener(record)
        await store.close()


async def test_a_store_written_before_range_columns_gets_them_on_first_use(table: str):
    links = frozenset({Link.bidir("kw", "all")})
    old = connect(f"{table}x")  # a session to write the tables as the version before did
    write_old_cassandra_store(
        old.session,
        "graphstore_test",
        table,
        [(Node(n.id, n.text, n.metadata, links), unit([1, i, 0])) for i, n in enumerate(NODES)],
    )
    await old.close()

    store = connect(table)
    try:
        where = parse_filter({"chapter": {"$lte": 3}, "day": {"$gt": "2024-01-01"}})
        assert ids(await store.search(unit([1, 0, 0]), 10, where)) == ["c2", "c3"]
        hits = await store.search_tag(("kw", "all"), unit([1, 0, 0]), 10, where)
        assert sorted(hit.id for hit in hits) == ["c2", "c3"]
        meta = store.session.execute(f'SELECT name FROM "graphstore_test"."{table}_meta"')
        assert "format" in {row.name for row in meta}
        assert await store.check() == []
    finally:
        await store.close()


async def test_past_the_cap_ranges_are_checked_on_rows(table: str):
    store = connect(table, max_range_columns=1)
    try:
        nodes = [
            StoredNode(Node(f"n{i}", "x", {"a": i, "b": 10 - i, "s": f"v{i}"}), unit([1, i, 0]))
            for i in range(6)
        ]
        await store.upsert(nodes)
        assert store._ranges.overflowing
        for raw, expected in [
            ({"a": {"$lt": 2}}, ["n0", "n1"]),
            ({"b": {"$lt": 6}}, ["n5"]),
            ({"s": {"$gte": "v4"}}, ["n4", "n5"]),
            ({"zzz": {"$gte": 0}}, []),
        ]:
            assert ids(await store.search(unit([1, 0, 0]), 3, parse_filter(raw))) == expected
    finally:
        await store.close()


async def test_columns_another_process_added_are_used(table: str):
    writer = connect(table)
    await writer.upsert([StoredNode(NODES[0], unit([1, 0, 0]))])
    reader = connect(table)
    try:
        assert ids(await reader.search(unit([1, 0, 0]), 5, parse_filter({"chapter": 1}))) == ["c1"]
        late = StoredNode(Node("late", "late", {"year": 2024}), unit([0, 1, 0]))
        await writer.upsert([late])
        await asyncio.sleep(1.1)  # a reader looks for new columns at most once a second
        year = parse_filter({"year": {"$gt": 2000}})
        assert ids(await reader.search(unit([1, 0, 0]), 5, year)) == ["late"]
    finally:
        await reader.close()
        await writer.close()


def test_storage_option_is_documented():
    assert "max_range_columns" in (CassandraStorage.__doc__ or "")
