"""Issue 16, input half: bad input is refused whole, before the first write, on every backend;
ordinary files ingest; the CLI prints one line, never a password, and creates no stray file.

Each test names the issue's case it reproduces.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from graphstore import GraphStore, InvalidInputError, Link, Node
from graphstore.embedded import EmbeddedStorage
from graphstore.metadata import MAX_DEPTH
from graphstore.testing.embeddings import KeyedEmbeddings

DIM = 4


def nested(levels: int) -> Any:
    """A dict nested `levels` deep (built without recursion)."""
    value: Any = "leaf"
    for _ in range(levels):
        value = {"d": value}
    return value


def vector(seed: int) -> list[float]:
    return [math.cos(seed), math.sin(seed), 1.0, 0.5]


# -- case 1: nesting depth ----------------------------------------------------------------


async def test_case1_metadata_at_the_depth_limit_round_trips_and_deeper_is_refused(
    open_backend, tmp_path
):
    store = GraphStore(None, open_backend())
    deepest = Node("deepest", "x", {"deep": nested(MAX_DEPTH - 1)})
    await store.aadd_nodes([deepest], vectors=[vector(1)])
    with pytest.raises(InvalidInputError, match=f"nests deeper than {MAX_DEPTH} levels"):
        await store.aadd_nodes(
            [Node("deeper", "x", {"deep": nested(MAX_DEPTH)})], vectors=[vector(2)]
        )
    reopened = GraphStore(None, open_backend())  # the file store is read back from disk
    assert await reopened.aget(["deepest", "deeper"]) == [deepest]
    assert await reopened.acheck() == []
    hits = await reopened.asimilarity_search_by_vector(
        vector(1), k=2, filter={"deep": nested(MAX_DEPTH - 1)}
    )
    assert [hit.node.id for hit in hits] == ["deepest"]


# -- case 2: the whole input is validated before the first write --------------------------

BAD_NODES = {
    "id": Node("bad\ud800", "text"),
    "text": Node("bad", "text \ud800"),
    "metadata value": Node("bad", "text", {"a": {"b": "\udcff"}}),
    "tag": Node("bad", "text", {}, frozenset({Link.bidir("kw", "t\ud800")})),
    "big int": Node("bad", "text", {"n": -(10**4300)}),
    "depth": Node("bad", "text", {"deep": nested(500)}),
}


@pytest.mark.parametrize("bad", BAD_NODES.values(), ids=BAD_NODES.keys())
async def test_case2_a_bad_node_after_seventy_good_ones_writes_nothing(backend, bad: Node):
    store = GraphStore(KeyedEmbeddings(dimension=DIM), backend, batch_size=64)
    good = [Node(f"n{i}", f"passage {i}", {"i": i}) for i in range(70)]
    with pytest.raises(InvalidInputError) as error:
        await store.aadd_nodes([*good, bad])
    assert "\n" not in str(error.value)
    assert (await store.astats()).nodes == 0
    assert await store.aget([node.id for node in good]) == []
    await store.aadd_nodes(good)  # no transaction or lock was left behind
    assert (await store.astats()).nodes == 70
    assert await store.acheck() == []


async def test_case2_vectors_of_two_dimensions_are_refused_before_a_new_store_is_written(
    backend,
):
    store = GraphStore(None, backend, batch_size=2)
    nodes = [Node(f"n{i}", "text") for i in range(3)]
    vectors = [vector(0), vector(1), [*vector(2), 1.0]]
    with pytest.raises(InvalidInputError, match="embedding has dimension 5; the store holds 4"):
        await store.aadd_nodes(nodes, vectors=vectors)
    assert (await store.astats()).nodes == 0


def test_case2_a_refused_batch_leaves_the_file_writable_by_another_connection(tmp_path):
    path = tmp_path / "store.db"
    first = GraphStore(None, EmbeddedStorage(path))
    with pytest.raises(InvalidInputError):
        first.add_nodes([Node("a", "ok"), Node("b", "x\ud800")], vectors=[vector(0), vector(1)])
    second = GraphStore(None, EmbeddedStorage(path))
    second.add_nodes([Node("c", "ok")], vectors=[vector(2)])
    first.add_nodes([Node("a", "ok")], vectors=[vector(0)])
    assert sorted(node.id for node in second.get(["a", "b", "c"])) == ["a", "c"]
    first.close()
    second.close()
