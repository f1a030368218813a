"""Embedded-only behaviour: the file layout and files written by earlier versions."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from graphstore.embedded import EmbeddedStorage
from graphstore.errors import InvalidInputError, StorageError, StoreOpenError
from graphstore.filters import EVERYTHING
from graphstore.links import Link
from graphstore.nodes import Node, StoredNode, unit
from graphstore.store import GraphStore, run_sync
from graphstore.testing.embeddings import KeyedEmbeddings
from graphstore.traversal import TraversalStats

EARLIER_TAGS_TABLE = """
DROP TABLE tags;
CREATE TABLE tags (
    kind TEXT NOT NULL, tag TEXT NOT NULL, node_id TEXT NOT NULL,
    PRIMARY KEY (kind, tag, node_id)
) WITHOUT ROWID;
CREATE INDEX tags_by_node ON tags (node_id);
"""


def stored(node_id: str, *tags: str) -> StoredNode:
    links = frozenset(Link.bidir("kw", tag) for tag in tags)
    return StoredNode(Node(node_id, node_id, {}, links), unit([1.0, 0.0]))


def tag_rows(path: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(path) as db:
        return sorted(db.execute("SELECT kind, tag, node_id FROM tags"))


def test_a_file_with_tag_rows_keyed_by_tag_still_works(tmp_path: Path):
    """Earlier versions keyed the tag table by (kind, tag, node_id) with an index by node."""
    path = tmp_path / "earlier.db"
    run_sync(EmbeddedStorage(path).close())
    with sqlite3.connect(path) as db:
        db.executescript(EARLIER_TAGS_TABLE)
    storage = EmbeddedStorage(path)
    run_sync(storage.upsert([stored("a", "x", "y"), stored("b", "x")]))
    run_sync(storage.upsert([stored("a", "y", "z")]))
    assert run_sync(storage.delete(["b"])) == 1
    assert tag_rows(path) == [("kw", "y", "a"), ("kw", "z", "a")]
    assert run_sync(storage.check()) == []
    run_sync(storage.close())
    reopened = EmbeddedStorage(path)
    hits = run_sync(reopened.search_tag(("kw", "z"), unit([1.0, 0.0]), 5, EVERYTHING))
    assert [hit.id for hit in hits] == ["a"]
    assert run_sync(reopened.search_tag(("kw", "x"), unit([1.0, 0.0]), 5, EVERYTHING)) == []
    run_sync(reopened.close())


V1_SCHEMA = [
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE nodes (id TEXT PRIMARY KEY, text TEXT NOT NULL, metadata TEXT NOT NULL, "
    "links TEXT NOT NULL, embedding BLOB NOT NULL)",
    "CREATE TABLE tags (kind TEXT NOT NULL, tag TEXT NOT NULL, node_id TEXT NOT NULL, "
    "PRIMARY KEY (node_id, kind, tag)) WITHOUT ROWID",
    "INSERT INTO meta VALUES ('format', 'graphstore-embedded')",
    "INSERT INTO meta VALUES ('version', '1')",
]


FIRST_TAGS = (
    "CREATE TABLE tags (kind TEXT NOT NULL, tag TEXT NOT NULL, node_id TEXT NOT NULL, "
    "PRIMARY KEY (kind, tag, node_id)) WITHOUT ROWID"
)
"""The first version's `tags`, keyed in another order."""


@pytest.mark.parametrize(
    "schema", [V1_SCHEMA[:1], V1_SCHEMA[:2], V1_SCHEMA[:3], [*V1_SCHEMA[:2], FIRST_TAGS]]
)
def test_a_file_whose_creation_was_cut_short_is_finished(tmp_path: Path, schema: list[str]):
    """Version 1 committed its schema statement by statement; a kill between two left these."""
    path = tmp_path / "cut.db"
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode = WAL")
        for statement in schema:
            db.execute(statement)
    storage = EmbeddedStorage(path)
    run_sync(storage.upsert([stored("a", "x")]))
    assert run_sync(storage.check()) == []
    run_sync(storage.close())


def test_a_version_1_file_is_upgraded_and_keeps_its_nodes(tmp_path: Path):
    path = tmp_path / "v1.db"
    with sqlite3.connect(path) as db:
        for statement in V1_SCHEMA:
            db.execute(statement)
        db.execute(
            "INSERT INTO nodes VALUES ('old', 'old', '{}', ?, ?)",
            ('[["kw", "bidir", "x"]]', unit([1.0, 0.0]).tobytes()),
        )
        db.execute("INSERT INTO meta VALUES ('dimension', '2')")
        db.execute("INSERT INTO tags VALUES ('kw', 'x', 'old')")
    storage = EmbeddedStorage(path)
    reader = EmbeddedStorage(path)
    run_sync(storage.upsert([stored("new", "x")]))
    run_sync(storage.delete(["old"]))
    hits = run_sync(reader.search_tag(("kw", "x"), unit([1.0, 0.0]), 5, EVERYTHING))
    assert [hit.id for hit in hits] == ["new"]
    assert run_sync(reader.check()) == []
    run_sync(storage.close())
    run_sync(reader.close())


def test_a_file_locked_by_another_connection_is_not_called_foreign(tmp_path: Path):
    path = tmp_path / "busy.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreOpenError) as error:
            EmbeddedStorage(path)
        assert "another connection holds the write lock" in str(error.value)
        assert "not a graphstore file" not in str(error.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    run_sync(EmbeddedStorage(path).close())


def test_a_store_emptied_by_delete_takes_the_dimension_of_its_next_write(tmp_path: Path):
    """An emptied store takes the model of its next ingest; it kept its first embeddings'
    dimension for good, so a model of another size was refused ("the store holds 16") in
    this connection, in one opened later and in one left open throughout."""
    path = tmp_path / "emptied.db"
    writer, left_open = EmbeddedStorage(path), EmbeddedStorage(path)
    run_sync(writer.upsert([stored("a", "x")]))
    assert left_open.dimension == 2
    run_sync(writer.delete(["a"]))
    assert writer.dimension is None
    assert left_open.dimension is None
    wider = StoredNode(Node("b", "b", {}, frozenset({Link.bidir("kw", "x")})), unit([0, 0, 1.0]))
    run_sync(writer.upsert([wider]))
    for storage in (writer, left_open):
        assert storage.dimension == 3
        hits = run_sync(storage.search_tag(("kw", "x"), unit([0, 0, 1.0]), 5, EVERYTHING))
        assert [hit.id for hit in hits] == ["b"]
    with pytest.raises(InvalidInputError, match="holds 3"):
        run_sync(left_open.upsert([stored("c")]))  # the store holds b: its dimension stays
    run_sync(writer.close())
    run_sync(left_open.close())
    reopened = EmbeddedStorage(path)
    assert reopened.dimension == 3
    assert run_sync(reopened.check()) == []
    run_sync(reopened.close())


@pytest.mark.parametrize("name", [":memory:", "memory:"])
def test_memory_is_a_store_in_memory_by_either_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
):
    """`memory:` is the command line's name for it; here it created a file named so."""
    monkeypatch.chdir(tmp_path)
    storage = EmbeddedStorage(name)
    run_sync(storage.upsert([stored("a")]))
    assert storage.local_files == ()
    run_sync(storage.close())
    assert list(tmp_path.iterdir()) == []


def test_repair_mends_tag_rows_that_disagree_with_the_node_rows(tmp_path: Path):
    """Only a change made outside graphstore leaves them so in a file (a write is one
    transaction), and no command mended them: `check` kept failing."""
    path = tmp_path / "s.db"
    storage = EmbeddedStorage(path)
    run_sync(storage.upsert([stored("a", "x", "y"), stored("b", "x")]))
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO tags VALUES ('kw', 'x', 'ghost')")
        db.execute("DELETE FROM tags WHERE node_id = 'a' AND tag = 'y'")
    assert len(run_sync(storage.check())) == 2
    assert run_sync(storage.repair()) == [
        "deleted the row of missing node 'ghost' under tag ('kw', 'x')",
        "wrote the tag rows of node 'a' again",
    ]
    assert run_sync(storage.check()) == []
    assert tag_rows(path) == [("kw", "x", "a"), ("kw", "x", "b"), ("kw", "y", "a")]
    assert run_sync(storage.repair()) == []
    run_sync(storage.close())


def tag_hit_ids(storage: EmbeddedStorage, tag: str) -> list[str]:
    hits = run_sync(storage.search_tag(("kw", tag), unit([1.0, 0.0]), 5, EVERYTHING))
    return sorted(hit.id for hit in hits)


def test_reads_in_a_reading_span_rank_with_the_index_taken_at_its_start(tmp_path: Path):
    """A search ranks with one version of the index: another connection's write committed
    during the span shows after it; this connection's own writes show at once."""
    path = tmp_path / "store.db"
    reader, writer = EmbeddedStorage(path), EmbeddedStorage(path)
    run_sync(reader.upsert([stored("a", "t")]))
    with reader.reading():
        run_sync(writer.upsert([stored("b", "t")]))
        assert tag_hit_ids(reader, "t") == ["a"]
        roots = run_sync(reader.search_hits(unit([1.0, 0.0]), 5, EVERYTHING))
        assert [hit.id for hit in roots] == ["a"]
        run_sync(reader.upsert([stored("c", "t")]))
        assert tag_hit_ids(reader, "t") == ["a", "b", "c"]
    run_sync(writer.upsert([stored("d", "t")]))
    assert tag_hit_ids(reader, "t") == ["a", "b", "c", "d"]
    run_sync(reader.close())
    run_sync(writer.close())


def test_a_graph_search_checks_for_other_connections_writes_once(tmp_path: Path):
    """Each check is an SQLite statement (`PRAGMA data_version`); a default search made one
    per storage call (roots, each wave of tags, the final read), now one for the search
    besides the one that reads the store's dimension to check the query vector."""
    storage = EmbeddedStorage(tmp_path / "store.db")
    store = GraphStore(None, storage)
    chain = [("a", "x"), ("b", "x", "y"), ("c", "y", "z"), ("d", "z")]
    store.add_nodes(
        [
            Node(node_id, node_id, {}, {Link.bidir("kw", t) for t in tags})
            for node_id, *tags in chain
        ],
        vectors=[[1.0, 0.0], [0.6, 0.8], [0.0, 1.0], [-0.6, 0.8]],
    )
    checks: list[str] = []
    storage._db.set_trace_callback(
        lambda statement: checks.append(statement) if "data_version" in statement else None
    )
    stats = TraversalStats()
    assert len(store.search([1.0, 0.0], k=3, stats=stats)) == 3
    assert stats.tag_waves >= 1
    assert checks == ["PRAGMA data_version"] * 2
    run_sync(storage.close())


REPLACED = r"\bs\.db was deleted or replaced since this store opened it"


async def test_a_write_to_a_store_file_deleted_or_replaced_since_it_opened_is_refused(
    tmp_path: Path,
):
    """An MCP server kept writing to a store whose file was deleted: each write was
    reported done and went to a file no one could open, lost when the server stopped."""
    path = tmp_path / "s.db"
    storage = EmbeddedStorage(path)
    await storage.upsert([stored("a")])
    for name in ("s.db", "s.db-wal", "s.db-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    with pytest.raises(StorageError, match=REPLACED):
        await storage.upsert([stored("b")])
    with pytest.raises(StorageError, match=REPLACED):
        await storage.delete(["a"])
    replacement = EmbeddedStorage(path)  # another store made at the same path
    await replacement.upsert([stored("c")])
    with pytest.raises(StorageError, match=REPLACED):
        await storage.upsert([stored("b")])
    with pytest.raises(StorageError) as error:  # it reads the model record first
        await GraphStore(KeyedEmbeddings(dimension=2), storage).aadd_nodes([Node("b", "beta")])
    assert re.search(REPLACED, str(error.value))  # said "reading s.db failed"
    await storage.close()
    assert await replacement.node_ids() == ["c"]
    await replacement.close()


async def test_a_read_of_a_store_file_deleted_or_replaced_since_it_opened_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A long-running `graphstore mcp` kept answering from a store file that `rm demo.db &&
    graphstore ingest` had replaced: passages gone from the new store came back.  A store
    opened by a relative path still reads after the process changes folder."""
    monkeypatch.chdir(tmp_path)
    storage = EmbeddedStorage("s.db")
    await storage.upsert([stored("a")])
    monkeypatch.chdir(tmp_path.parent)
    assert await storage.node_ids() == ["a"]
    for name in ("s.db", "s.db-wal", "s.db-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    replacement = EmbeddedStorage(tmp_path / "s.db")
    await replacement.upsert([stored("c")])
    reads = [
        storage.node_ids(),
        storage.get(["a"]),
        storage.search(unit([1.0, 0.0]), 1, EVERYTHING),
        storage.search_hits(unit([1.0, 0.0]), 1, EVERYTHING),
    ]
    for read in reads:
        with pytest.raises(StorageError) as error:
            await read
        assert str(error.value) == (
            "s.db was deleted or replaced since this store opened it: what it holds is gone "
            "or another store's, and a write would go to a file no one reads; open the store "
            "again"
        )
    await storage.close()
    assert await replacement.node_ids() == ["c"]
    await replacement.close()


def test_opening_a_missing_file_without_creating_refuses_and_leaves_no_file(tmp_path: Path):
    """`EmbeddedStorage(path, create=False)` left an empty file behind, which the next open
    with the default `create=True` made a store of, and called it "an SQLite file"."""
    path = tmp_path / "nope.db"
    with pytest.raises(StoreOpenError) as error:
        EmbeddedStorage(path, create=False)
    assert str(error.value) == f"no store at {path}"
    assert not path.exists()
    sqlite3.connect(path).close()  # an SQLite file, empty: not a store either
    with pytest.raises(StoreOpenError, match=r"an SQLite file without one$"):
        EmbeddedStorage(path, create=False)
    run_sync(EmbeddedStorage(path).close())
    run_sync(EmbeddedStorage(path, create=False).close())


async def test_a_call_after_close_says_the_store_was_closed(tmp_path: Path):
    """Searches in flight when a web worker closed its store failed with SQLite's own
    words, "Cannot operate on a closed database"."""
    store = GraphStore(KeyedEmbeddings(), EmbeddedStorage(tmp_path / "s.db"))
    await store.aadd_nodes([Node("a", "alpha")])
    await store.aclose()
    for call in (store.asearch("alpha"), store.aadd_nodes([Node("b", "beta")])):
        with pytest.raises(StorageError, match=r" failed: the store was closed$"):
            await call
    with pytest.raises(StorageError, match=r" failed: the store was closed$"):
        await store.storage.node_ids()


async def test_a_closed_immutable_reader_does_not_connect_again(tmp_path: Path):
    """A reader opened `immutable` connects again once the file changed
    (`_reopen_if_written`); after `close` it did too, and served on a connection no one
    would close."""
    path = tmp_path / "s.db"
    run_sync(EmbeddedStorage(path).close())
    storage = EmbeddedStorage(path)
    storage._immutable_stamp = (0, 0)  # as if opened immutable before the file changed
    await storage.close()
    with pytest.raises(StorageError, match=r" failed: the store was closed$"):
        await storage.stats()
