"""The embedded backend's exact ranking: a tag on most of the store, roots and filters give
the brute-force answer whichever path ranks them (the query's whole-matrix scores, the walk
down its best slots, a gather of the tag's own rows), and deleted rows never come back."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from graphstore.embedded import RANKED, EmbeddedStorage
from graphstore.filters import EVERYTHING, Condition, matches, parse_filter
from graphstore.links import Link
from graphstore.nodes import Node, StoredNode, unit
from graphstore.store import run_sync

DIMENSION = 8
PASSAGES = 3 * RANKED
"""More passages than a query keeps ranked, so a walk down them can come up short."""


class Model:
    """What the store should hold, kept by the test: vectors, tags and metadata by id."""

    def __init__(self) -> None:
        self.vectors: dict[str, NDArray[np.float32]] = {}
        self.tags: dict[str, set[str]] = {}
        self.metadata: dict[str, dict[str, int]] = {}

    def node(self, node_id: str, vector: NDArray[np.float32], tags: set[str], parity: int):
        self.vectors[node_id], self.tags[node_id] = unit(vector), tags
        self.metadata[node_id] = {"parity": parity}
        links = frozenset(Link.bidir("kw", tag) for tag in tags)
        return StoredNode(Node(node_id, node_id, {"parity": parity}, links), self.vectors[node_id])

    def nearest(
        self, query: NDArray[np.float32], k: int, tag: str | None, where: Condition
    ) -> list[tuple[str, float]]:
        """Brute force: every matching node scored, best first."""
        scored = [
            (node_id, float(vector @ query))
            for node_id, vector in self.vectors.items()
            if (tag is None or tag in self.tags[node_id]) and matches(where, self.metadata[node_id])
        ]
        return sorted(scored, key=lambda item: -item[1])[:k]


def found(hits) -> list[tuple[str, float]]:
    return [(hit.id, hit.similarity) for hit in hits]


def assert_same(actual: list[tuple[str, float]], expected: list[tuple[str, float]]) -> None:
    assert [node_id for node_id, _ in actual] == [node_id for node_id, _ in expected]
    assert np.allclose([s for _, s in actual], [s for _, s in expected], atol=1e-5)


def check_everything(
    storage: EmbeddedStorage, model: Model, queries: NDArray[np.float32], tags: list[str]
) -> None:
    """Tag searches before any root search of the query (no scores kept yet), the roots,
    then the same tag searches again (now from the kept scores), filtered and not."""
    even = parse_filter({"parity": 0})
    for query in queries:
        for k in (1, 10, 100):
            for where in (EVERYTHING, even):
                keys = [("kw", tag) for tag in tags]
                first = run_sync(storage.search_tags(keys, query, k, where))
                roots = run_sync(storage.search_hits(query, k, where))
                again = run_sync(storage.search_tags(keys, query, k, where))
                assert_same(found(roots), model.nearest(query, k, None, where))
                for tag, before, after in zip(tags, first, again, strict=True):
                    expected = model.nearest(query, k, tag, where)
                    assert_same(found(before), expected)
                    assert_same(found(after), expected)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(13)


def test_tag_searches_equal_brute_force_from_a_hub_tag_down_to_a_small_one(rng):
    """'hub' is on 80 % of the store, 'half' on 50 %, 'mid' on 5 %, 'few' on 21 nodes;
    'away' holds a third of the store, all pointing away from the first query, so none of
    them is among that query's best slots overall."""
    query = unit(np.eye(DIMENSION, dtype=np.float32)[0])
    model, nodes = Model(), []
    for i in range(PASSAGES):
        vector = rng.standard_normal(DIMENSION).astype(np.float32)
        away = i % 3 == 0
        vector[0] = -abs(vector[0]) - 1.0 if away else abs(vector[0])
        tags = {f"own{i}"}
        tags |= {"hub"} if rng.random() < 0.8 else set()
        tags |= {"half"} if rng.random() < 0.5 else set()
        tags |= {"mid"} if rng.random() < 0.05 else set()
        tags |= {"few"} if i % (PASSAGES // 20) == 0 else set()
        tags |= {"away"} if away else set()
        nodes.append(model.node(f"n{i}", vector, tags, i % 2))
    storage = EmbeddedStorage(":memory:")
    run_sync(storage.upsert(nodes))
    queries = np.stack([query, *(unit(v) for v in rng.standard_normal((3, DIMENSION)))])
    check_everything(storage, model, queries, ["hub", "half", "mid", "few", "away", "own7"])
    keys = [("kw", "hub"), ("kw", "few"), ("kw", "none")]
    sizes = run_sync(storage.tag_sizes(keys))
    learned: dict[tuple[str, str], int] = {}
    run_sync(storage.search_tags(keys, query, 10, EVERYTHING, sizes=learned))
    assert learned == sizes  # unfiltered, a search reports each tag's size with its hits
    expected = {tag: sum(tag in tags for tags in model.tags.values()) for tag in ("hub", "few")}
    assert sizes == {
        ("kw", "hub"): expected["hub"],
        ("kw", "few"): expected["few"],
        ("kw", "none"): 0,
    }
    run_sync(storage.close())


def test_deleted_rows_are_never_returned_and_reused_slots_rank_by_their_new_vector(rng):
    """Every live node scores below zero against the query, so a deleted node's row, zeroed
    in the matrix, would beat them all if it were not masked out."""
    query = unit(np.ones(DIMENSION, dtype=np.float32))
    model, nodes = Model(), []
    for i in range(2 * RANKED):
        vector = -query + 0.3 * rng.standard_normal(DIMENSION).astype(np.float32)
        nodes.append(model.node(f"n{i}", vector, {"hub", f"own{i}"}, i % 2))
    storage = EmbeddedStorage(":memory:")
    run_sync(storage.upsert(nodes))
    best = [node_id for node_id, _ in model.nearest(query, 300, None, EVERYTHING)]
    gone = best[::2] + [f"n{i}" for i in rng.choice(len(nodes), 200, replace=False)]
    for node_id in gone:
        model.vectors.pop(node_id, None)
    assert run_sync(storage.delete(gone)) == len(set(gone))
    check_everything(storage, model, query[None, :], ["hub"])
    hits = run_sync(storage.search_tag(("kw", "hub"), query, len(nodes), EVERYTHING))
    assert set(gone).isdisjoint(hit.id for hit in hits)
    assert len(hits) == len(nodes) - len(set(gone))
    back = [
        model.node(node_id, -query + rng.standard_normal(DIMENSION), {"hub"}, 0)
        for node_id in gone[:100]
    ]
    run_sync(storage.upsert(back))
    check_everything(storage, model, query[None, :], ["hub"])
    count = sum("hub" in model.tags[node_id] for node_id in model.vectors)
    assert run_sync(storage.tag_sizes([("kw", "hub")])) == {("kw", "hub"): count}
    run_sync(storage.close())


def test_a_write_between_two_tag_searches_of_one_query_is_seen(rng):
    """The same query vector before and after a write: scores kept for it are not reused."""
    query = unit(rng.standard_normal(DIMENSION))
    model = Model()
    storage = EmbeddedStorage(":memory:")
    run_sync(
        storage.upsert(
            [
                model.node(f"n{i}", rng.standard_normal(DIMENSION), {"hub"}, 0)
                for i in range(2 * RANKED)
            ]
        )
    )
    check_everything(storage, model, query[None, :], ["hub"])
    run_sync(storage.upsert([model.node("exact", query, {"hub"}, 0)]))
    assert found(run_sync(storage.search_tag(("kw", "hub"), query, 1, EVERYTHING)))[0][0] == (
        "exact"
    )
    run_sync(storage.delete(["exact"]))
    del model.vectors["exact"]
    check_everything(storage, model, query[None, :], ["hub"])
    run_sync(storage.close())


def test_hits_leave_out_the_tags_only_their_own_node_links_in_to_until_another_does(tmp_path):
    """A step on such a tag could return only the node itself; the kept set follows every
    write, this process's and another's."""
    path = tmp_path / "store.db"
    storage, other = EmbeddedStorage(path), EmbeddedStorage(path)
    mine = {Link.bidir("kw", "own"), Link.bidir("kw", "shared"), Link.outgoing("ent", "nowhere")}

    def outgoing(store: EmbeddedStorage) -> frozenset[tuple[str, str]]:
        [hit] = run_sync(store.search_tags([("kw", "shared")], unit([1, 0]), 1, EVERYTHING))[0]
        return hit.outgoing

    run_sync(storage.upsert([StoredNode(Node("a", "a", {}, frozenset(mine)), unit([1, 0]))]))
    assert outgoing(storage) == frozenset()
    shared = frozenset({Link.incoming("kw", "shared"), Link.incoming("ent", "nowhere")})
    run_sync(other.upsert([StoredNode(Node("b", "b", {}, shared), unit([0, 1]))]))
    assert outgoing(storage) == {("kw", "shared"), ("ent", "nowhere")}
    run_sync(other.delete(["b"]))
    assert outgoing(storage) == frozenset()
    run_sync(storage.close())
    run_sync(other.close())
