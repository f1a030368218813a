"""Faults: a write that fails part-way, and a process killed while writing."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from graphstore import GraphStore, GraphStoreError, InvalidInputError, Link, Node, StorageError
from graphstore.embedded import EmbeddedStorage
from graphstore.location import close_unused, new_store_file, open_storage
from graphstore.nodes import StoredNode, unit
from graphstore.store import run_sync
from graphstore.testing.embeddings import KeyedEmbeddings


class FailingEmbeddings(KeyedEmbeddings):
    """Raises on the `fail_on`-th call of `embed_documents` (counting from 1)."""

    def __init__(self, fail_on: int) -> None:
        super().__init__(dimension=8)
        self.calls = 0
        self.fail_on = fail_on

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls == self.fail_on:
            raise RuntimeError("embedding service unavailable")
        return super().embed_documents(texts)


def passages(count: int, keywords: int = 7) -> list[Node]:
    """Passages with two incoming tags each: a keyword shared by every `keywords`-th passage
    and one of their own (2 x `count` tag rows, `keywords` + `count` tags)."""
    return [
        Node(
            f"p{i}",
            f"passage {i}",
            {"i": i},
            frozenset({Link.bidir("kw", f"k{i % keywords}"), Link.incoming("own", f"p{i}")}),
        )
        for i in range(count)
    ]


async def test_failed_batch_leaves_whole_nodes_only_and_rerun_completes(backend):
    store = GraphStore(FailingEmbeddings(fail_on=3), backend, batch_size=10)
    with pytest.raises(RuntimeError, match="embedding service unavailable"):
        await store.aadd_nodes(passages(50))
    stats = await backend.stats()
    assert (stats.nodes, stats.tag_rows) == (20, 40)
    assert await backend.check() == []
    await GraphStore(KeyedEmbeddings(dimension=8), backend, batch_size=10).aadd_nodes(passages(50))
    stats = await backend.stats()
    assert (stats.nodes, stats.tag_rows) == (50, 100)
    assert await backend.check() == []


WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from graphstore import GraphStore, GraphStoreError, InvalidInputError, Link, Node, StorageError
    from graphstore.embedded import EmbeddedStorage
    from graphstore.testing.embeddings import KeyedEmbeddings

    async def main():
        store = GraphStore(KeyedEmbeddings(dimension=32), EmbeddedStorage(sys.argv[1]), batch_size=50)
        for batch in range(10_000):
            nodes = [
                Node(f"b{batch}-{i}", f"text {batch} {i}", {"batch": batch},
                     frozenset({Link.bidir("kw", f"k{i % 13}"), Link.incoming("own", f"{batch}-{i}")}))
                for i in range(50)
            ]
            await store.aadd_nodes(nodes)
            print(batch, flush=True)

    asyncio.run(main())
    """
)


def test_process_killed_mid_write_leaves_a_consistent_store(tmp_path: Path):
    path = tmp_path / "store.db"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert writer.stdout is not None
    deadline = time.monotonic() + 60
    for line in writer.stdout:
        if int(line) >= 20 or time.monotonic() > deadline:
            break
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    storage = EmbeddedStorage(path)
    try:
        stats = run_sync(storage.stats())
        assert stats.nodes >= 21 * 50
        assert stats.nodes % 50 == 0
        assert stats.tag_rows == 2 * stats.nodes
        assert run_sync(storage.check()) == []
    finally:
        run_sync(storage.close())


def keyed(node_id: str, text: str = "text", metadata=None, tag: str = "t") -> StoredNode:
    node = Node(node_id, text, metadata or {}, frozenset({Link.bidir("kw", tag)}))
    return StoredNode(node, unit([1.0, 0.0]))


OTHER_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from graphstore.embedded import EmbeddedStorage
    from graphstore.nodes import Node, StoredNode, unit

    storage = EmbeddedStorage(sys.argv[1], timeout=2.0)
    asyncio.run(storage.upsert([StoredNode(Node("other", "other"), unit([0.0, 1.0]))]))
    """
)


@pytest.mark.parametrize(
    "bad",
    [
        keyed("x\ud800"),
        keyed("bad", text="x\ud800"),
        keyed("bad", metadata={"m": "x\ud800"}),
        keyed("bad", metadata={"big": 10**5000}),
        keyed("bad", tag="x\ud800"),
    ],
    ids=["surrogate id", "surrogate text", "surrogate metadata", "huge int", "surrogate tag"],
)
def test_a_node_sqlite_cannot_take_rolls_back_its_batch_and_frees_the_file(tmp_path: Path, bad):
    path = tmp_path / "store.db"
    storage = EmbeddedStorage(path)
    valid = [keyed(f"p{i}") for i in range(70)]
    with pytest.raises(InvalidInputError, match="cannot be stored") as error:
        run_sync(storage.upsert([*valid, bad]))
    assert "\n" not in str(error.value)
    assert run_sync(storage.stats()).nodes == 0
    other = subprocess.run(
        [sys.executable, "-c", OTHER_WRITER, str(path)], capture_output=True, text=True, check=False
    )
    assert other.returncode == 0, other.stderr
    run_sync(storage.upsert(valid))
    assert run_sync(storage.stats()).nodes == 71
    assert run_sync(storage.check()) == []
    run_sync(storage.close())


def test_a_transaction_an_interrupt_left_open_is_rolled_back_not_joined(tmp_path: Path):
    """Ctrl-C between BEGIN and the handler that rolls back left the transaction open, and
    every later write joined it: uncommitted, the file locked for other processes, and lost
    when the store was closed."""
    path = tmp_path / "store.db"
    storage = EmbeddedStorage(path)
    run_sync(storage.upsert([keyed("first")]))
    storage._db.execute("BEGIN IMMEDIATE")  # the interrupted write's transaction
    storage._db.execute("DELETE FROM nodes")
    run_sync(storage.upsert([keyed("second")]))
    other = subprocess.run(
        [sys.executable, "-c", OTHER_WRITER, str(path)], capture_output=True, text=True, check=False
    )
    assert other.returncode == 0, other.stderr
    run_sync(storage.close())
    reopened = EmbeddedStorage(path)
    assert sorted(run_sync(reopened.node_ids())) == ["first", "other", "second"]
    run_sync(reopened.close())


def test_a_full_disk_is_one_line_and_keeps_earlier_writes(tmp_path: Path):
    storage = EmbeddedStorage(tmp_path / "store.db")
    run_sync(storage.upsert([keyed("first")]))
    # SQLite's own page limit on this connection: the same SQLITE_FULL as a full disk.
    pages = storage._db.execute("PRAGMA page_count").fetchone()[0]
    storage._db.execute(f"PRAGMA max_page_count = {pages + 2}")
    big = [keyed(f"p{i}", text="x" * 4000) for i in range(50)]
    with pytest.raises(StorageError, match="database or disk is full") as error:
        run_sync(storage.upsert(big))
    assert "\n" not in str(error.value)
    assert "rollback" not in str(error.value)
    assert [s.node.id for s in run_sync(storage.get(["first", "p0"]))] == ["first"]
    storage._db.execute("PRAGMA max_page_count = 1073741823")
    run_sync(storage.upsert(big))
    assert run_sync(storage.stats()).nodes == 51
    run_sync(storage.close())


def test_a_write_lock_held_too_long_is_one_line_and_reads_go_on(tmp_path: Path):
    path = tmp_path / "store.db"
    storage = EmbeddedStorage(path)
    run_sync(storage.upsert([keyed("first")]))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        assert run_sync(storage.stats()).nodes == 1
        with pytest.raises(StorageError, match="another connection holds the write lock") as e:
            run_sync(storage.upsert([keyed("second")]))
        assert "\n" not in str(e.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    run_sync(storage.upsert([keyed("second")]))
    assert run_sync(storage.stats()).nodes == 2
    run_sync(storage.close())


def test_a_corrupt_page_is_one_line(tmp_path: Path):
    path = tmp_path / "store.db"
    storage = EmbeddedStorage(path)
    run_sync(storage.upsert([keyed(f"p{i}", text="x" * 3000) for i in range(100)]))
    run_sync(storage.close())
    data = bytearray(path.read_bytes())
    page = 4096
    data[10 * page : 20 * page] = b"\xff" * (10 * page)
    path.write_bytes(bytes(data))
    with pytest.raises(GraphStoreError, match="malformed") as error:
        EmbeddedStorage(path)
    assert "\n" not in str(error.value)


def test_a_failing_clean_up_hides_no_error_keeps_the_file_and_closes_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """After a failed command the CLI removes the store file it created if nothing was
    stored; when even counting fails (the disk went away), the file is kept, the store is
    still closed, and the clean-up raises nothing that would replace the command's error."""
    path = tmp_path / "new.db"
    new_file = new_store_file(str(path))
    storage = open_storage(str(path))

    async def unreadable(top_tags: int = 20) -> None:
        raise StorageError(f"reading {path} failed: disk I/O error")

    monkeypatch.setattr(storage, "stats", unreadable)
    run_sync(close_unused(storage, new_file))
    assert path.exists()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        storage._db.execute("SELECT 1")


async def test_a_cancel_stops_a_write_between_batches(backend):
    """Ctrl-C and SIGTERM reach a command as a cancel of its task, delivered at its next
    wait; the embedded store's writes never wait, so an ingest that had nothing to embed ran
    to its end, wrote everything, and only then said it was interrupted (or, after SIGTERM,
    exited 0)."""
    store = GraphStore(None, backend, batch_size=1)
    nodes = [Node(f"n{i}", f"passage {i}") for i in range(3)]
    await store.aadd_nodes(nodes[:1], vectors=[[1.0, 0.0]])
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().call_soon(task.cancel)  # what the signal handlers do
    with pytest.raises(asyncio.CancelledError):
        await store.aadd_nodes(nodes, vectors=[[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    task.uncancel()
    assert (await store.astats()).nodes == 1
