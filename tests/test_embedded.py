"""Embedded-only behaviour: the file layout and files written by earlier versions."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from graphstore.embedded import EmbeddedStorage
from graphstore.links import Link
from graphstore.nodes import Node, StoredNode, unit
from graphstore.store import run_sync

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
    hits = run_sync(reopened.search_tag(("kw", "z"), unit([1.0, 0.0]), 5, frozenset()))
    assert [hit.id for hit in hits] == ["a"]
    assert run_sync(reopened.search_tag(("kw", "x"), unit([1.0, 0.0]), 5, frozenset())) == []
    run_sync(reopened.close())
