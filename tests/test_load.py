"""Load: 50 concurrent MMR traversals while an ingest runs, on every backend."""

from __future__ import annotations

import asyncio

from graphstore import GraphStore, Link, Node
from graphstore.testing.embeddings import KeyedEmbeddings


def group(name: str, count: int) -> list[Node]:
    return [
        Node(
            f"{name}{i}",
            f"{name} passage {i}",
            {"group": name},
            frozenset(
                {
                    Link.bidir("kw", f"k{i % 11}"),
                    Link.outgoing("seq", f"{name}{i + 1}"),
                    Link.incoming("seq", f"{name}{i}"),
                }
            ),
        )
        for i in range(count)
    ]


async def test_concurrent_traversals_during_an_ingest_match_the_same_queries_alone(backend):
    store = GraphStore(KeyedEmbeddings(dimension=16), backend, batch_size=25)
    await store.aadd_nodes(group("a", 120))
    queries = [f"a passage {i}" for i in range(0, 100, 2)]

    async def search(query: str) -> list[tuple[str, int]]:
        hits = await store.ammr_traversal_search(
            query, k=6, depth=2, fetch_k=8, adjacent_k=4, filter={"group": "a"}
        )
        return [(hit.node.id, hit.depth) for hit in hits]

    alone = [await search(query) for query in queries]
    # The ingest adds group "b": linked to the same tags, but filtered out of every query.
    together = await asyncio.gather(
        store.aadd_nodes(group("b", 150)), *(search(q) for q in queries)
    )
    assert together[1:] == alone
    stats = await store.astats()
    assert stats.nodes == 270
    assert await store.acheck() == []
    peak = getattr(backend, "peak_in_flight", None)
    if peak is not None:
        assert 1 < peak <= backend.max_in_flight
