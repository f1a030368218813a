"""Faults: a write that fails part-way, and a process killed while writing."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from graphstore import GraphStore, Link, Node
from graphstore.embedded import EmbeddedStorage
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


def passages(count: int) -> list[Node]:
    return [
        Node(
            f"p{i}",
            f"passage {i}",
            {"i": i},
            frozenset({Link.bidir("kw", f"k{i % 7}"), Link.incoming("own", f"p{i}")}),
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
    from graphstore import GraphStore, Link, Node
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
