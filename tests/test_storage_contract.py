"""The storage contract, run unchanged on every backend (see `backend` in conftest)."""

from __future__ import annotations

import numpy as np
import pytest

from graphstore.filters import EVERYTHING, parse_filter
from graphstore.links import Link
from graphstore.metadata import filter_terms
from graphstore.nodes import Node, StoredNode, unit
from graphstore.storage import Storage


def stored(node_id: str, vector: list[float], links=(), metadata=None, text=None) -> StoredNode:
    node = Node(node_id, text or f"text of {node_id}", metadata or {}, frozenset(links))
    return StoredNode(node, unit(vector))


async def tag_ids(storage: Storage, kind: str, tag: str, k: int = 10) -> list[str]:
    return [hit.id for hit in await storage.search_tag((kind, tag), unit([1, 0, 0]), k, EVERYTHING)]


async def test_round_trip_keeps_text_metadata_types_and_links(backend: Storage):
    metadata = {
        "n": 3,
        "x": 2.5,
        "ok": True,
        "none": None,
        "tags": ["a", "b"],
        "nested": {"k": [1]},
    }
    links = {Link.incoming("kw", "a"), Link.outgoing("url", "http://x/"), Link.bidir("kw", "b")}
    await backend.upsert([stored("n1", [1, 0, 0], links, metadata, text="héllo 世界 \"q\" 'q'")])
    [got] = await backend.get(["n1"])
    assert got.node == Node("n1", "héllo 世界 \"q\" 'q'", metadata, frozenset(links))
    assert isinstance(got.node.metadata["n"], int)
    np.testing.assert_allclose(got.embedding, unit([1, 0, 0]), atol=1e-6)
    assert backend.dimension == 3


async def test_get_keeps_requested_order_and_skips_unknown_ids(backend: Storage):
    await backend.upsert([stored("a", [1, 0, 0]), stored("b", [0, 1, 0])])
    assert [s.node.id for s in await backend.get(["b", "missing", "a"])] == ["b", "a"]
    assert await backend.get([]) == []


async def test_metadata_values_scan_one_key_of_every_node(backend: Storage):
    assert await backend.metadata_values("file") == {}
    await backend.upsert(
        [
            stored("a", [1, 0, 0], metadata={"file": "/x/a.md", "n": 1}),
            stored("b", [0, 1, 0], metadata={"file": ["/x/b.md"]}),
            stored("c", [0, 0, 1], metadata={"n": 2}),
        ]
    )
    await backend.delete(["b"])
    assert await backend.metadata_values("file") == {"a": "/x/a.md"}
    assert await backend.metadata_values("n") == {"a": 1, "c": 2}


async def test_search_tag_finds_incoming_and_bidir_links_only(backend: Storage):
    await backend.upsert(
        [
            stored("in", [1, 0, 0], [Link.incoming("kw", "t")]),
            stored("bidir", [0.9, 0.1, 0], [Link.bidir("kw", "t")]),
            stored("out", [1, 0, 0], [Link.outgoing("kw", "t")]),
            stored("other-kind", [1, 0, 0], [Link.incoming("ent", "t")]),
        ]
    )
    assert await tag_ids(backend, "kw", "t") == ["in", "bidir"]
    assert await tag_ids(backend, "kw", "t", k=1) == ["in"]
    assert await tag_ids(backend, "ent", "t") == ["other-kind"]


async def test_tag_rows_carry_embedding_and_outgoing_tags(backend: Storage):
    links = [Link.incoming("kw", "t"), Link.outgoing("kw", "u"), Link.bidir("ent", "v")]
    others = [Link.incoming("kw", "u"), Link.incoming("ent", "v")]
    await backend.upsert([stored("a", [0, 1, 0], links), stored("b", [1, 0, 0], others)])
    [hit] = await backend.search_tag(("kw", "t"), unit([0, 1, 0]), 5, EVERYTHING)
    assert hit.outgoing == {("kw", "u"), ("ent", "v")}
    np.testing.assert_allclose(hit.embedding, unit([0, 1, 0]), atol=1e-6)
    assert hit.similarity == pytest.approx(1.0, abs=1e-5)


async def test_upsert_with_changed_links_leaves_no_stale_tag_rows(backend: Storage):
    await backend.upsert(
        [stored("a", [1, 0, 0], [Link.bidir("kw", "old"), Link.incoming("kw", "kept")])]
    )
    await backend.upsert(
        [stored("a", [1, 0, 0], [Link.bidir("kw", "new"), Link.incoming("kw", "kept")])]
    )
    assert await tag_ids(backend, "kw", "old") == []
    assert await tag_ids(backend, "kw", "new") == ["a"]
    assert await tag_ids(backend, "kw", "kept") == ["a"]
    stats = await backend.stats()
    assert (stats.nodes, stats.tag_rows, stats.tags) == (1, 2, 2)
    assert await backend.check() == []


async def test_reupserting_the_same_nodes_is_idempotent(backend: Storage):
    batch = [
        stored(f"n{i}", [1, i, 0], [Link.bidir("kw", "shared"), Link.incoming("kw", f"own{i}")])
        for i in range(5)
    ]
    await backend.upsert(batch)
    first = await backend.stats()
    await backend.upsert(batch)
    second = await backend.stats()
    assert first == second
    assert (second.nodes, second.tag_rows) == (5, 10)
    assert second.tag_frequencies[("kw", "shared")] == 5


async def test_delete_removes_node_and_every_tag_row(backend: Storage):
    await backend.upsert(
        [
            stored("a", [1, 0, 0], [Link.bidir("kw", "t")]),
            stored("b", [0, 1, 0], [Link.bidir("kw", "t")]),
        ]
    )
    assert await backend.delete(["a", "never-there"]) == 1
    assert await backend.get(["a"]) == []
    assert await tag_ids(backend, "kw", "t") == ["b"]
    assert [s.stored.node.id for s in await backend.search(unit([1, 0, 0]), 5, EVERYTHING)] == ["b"]
    stats = await backend.stats()
    assert (stats.nodes, stats.tag_rows) == (1, 1)
    assert await backend.check() == []


async def test_search_ranks_by_cosine_and_limits_to_k(backend: Storage):
    await backend.upsert(
        [
            stored("x", [1, 0, 0]),
            stored("xy", [1, 1, 0]),
            stored("y", [0, 1, 0]),
            stored("z", [0, 0, 1]),
        ]
    )
    found = await backend.search(unit([1, 0.1, 0]), 3, EVERYTHING)
    assert [s.stored.node.id for s in found] == ["x", "xy", "y"]
    assert found[0].similarity > found[1].similarity > found[2].similarity
    hits = await backend.search_hits(unit([1, 0.1, 0]), 3, EVERYTHING)
    assert [h.id for h in hits] == [s.stored.node.id for s in found]
    assert [h.similarity for h in hits] == pytest.approx([s.similarity for s in found], abs=1e-5)
    assert all(
        np.allclose(h.embedding, s.stored.embedding) for h, s in zip(hits, found, strict=True)
    )
    await backend.delete(["xy"])  # a free slot must never be ranked
    after = await backend.search_hits(unit([0.1, 0, 1]), 4, EVERYTHING)
    assert [h.id for h in after] == ["z", "x", "y"]


@pytest.mark.parametrize(
    ("metadata_filter", "expected"),
    [
        ({"color": "red"}, ["red-2", "red-list"]),
        ({"color": "red", "size": 2}, ["red-2"]),
        ({"size": 2.0}, ["red-2", "blue-2"]),
        ({"flag": True}, ["blue-2"]),
        ({"flag": 1}, []),
        ({"color": "green"}, []),
        ({"missing-key": "x"}, []),
    ],
)
async def test_search_and_search_tag_apply_the_same_filter(
    backend: Storage, metadata_filter, expected
):
    tag = [Link.bidir("kw", "t")]
    await backend.upsert(
        [
            stored("red-2", [1, 0, 0], tag, {"color": "red", "size": 2}),
            stored("blue-2", [0.9, 0.1, 0], tag, {"color": "blue", "size": 2, "flag": True}),
            stored("red-list", [0.8, 0.2, 0], tag, {"color": ["green-ish", "red"]}),
        ]
    )
    where = parse_filter(metadata_filter)
    by_search = [s.stored.node.id for s in await backend.search(unit([1, 0, 0]), 10, where)]
    by_tag = [h.id for h in await backend.search_tag(("kw", "t"), unit([1, 0, 0]), 10, where)]
    by_hits = [h.id for h in await backend.search_hits(unit([1, 0, 0]), 10, where)]
    assert by_search == expected
    assert by_tag == expected
    assert by_hits == expected


async def test_stats_report_tag_frequencies(backend: Storage):
    await backend.upsert(
        [
            stored(
                f"n{i}",
                [1, i, 0],
                [Link.bidir("kw", "common")] + ([Link.incoming("kw", "rare")] if i == 0 else []),
            )
            for i in range(4)
        ]
    )
    stats = await backend.stats(top_tags=1)
    assert stats.tag_frequencies == {("kw", "common"): 4}
    assert (stats.tags, stats.tag_rows) == (2, 5)


async def test_unicode_and_awkward_tags_round_trip(backend: Storage):
    awkward = ['it\'s "quoted"', "a:b", "line\nbreak", "孙悟空", "🐒", "x" * 1000]
    await backend.upsert([stored("a", [1, 0, 0], [Link.bidir("kw", tag) for tag in awkward])])
    for tag in awkward:
        assert await tag_ids(backend, "kw", tag) == ["a"]


def test_filter_terms_of_lists_numbers_and_nested_dicts():
    terms = filter_terms({"a": [1, "x"], "b": 2.0, "c": {"d": 1}})
    expected = [{"a": 1}, {"a": "x"}, {"b": 2}, {"c": {"d": 1.0}}, {"c.d": 1}]
    assert terms == {parse_filter(f).term for f in expected}


async def test_filters_reach_into_nested_dicts_and_dicts_in_lists(backend: Storage):
    await backend.upsert(
        [
            stored(
                "a",
                [1, 0, 0],
                metadata={"nested": {"a": 5, "b": {"c": "x"}}, "tags": [{"a": 5, "b": 7}]},
            ),
            stored(
                "b",
                [0.9, 0.1, 0],
                metadata={"nested": {"a": 6}, "tags": [{"b": 7, "a": 5.0}, {"a": 1}]},
            ),
        ]
    )

    async def ids(metadata_filter):
        return [
            s.stored.node.id
            for s in await backend.search(unit([1, 0, 0]), 5, parse_filter(metadata_filter))
        ]

    assert await ids({"nested.a": 5}) == ["a"]
    assert await ids({"nested.b.c": "x"}) == ["a"]
    assert await ids({"tags": {"a": 5, "b": 7}}) == ["a", "b"]
    assert await ids({"tags": {"a": 5, "b": 10}}) == []
    assert await ids({"nested": {"a": 6}}) == ["b"]


async def test_tag_sizes_count_the_nodes_linking_in_that_pass_the_filter(backend: Storage):
    await backend.upsert(
        [
            stored("a", [1, 0, 0], [Link.bidir("kw", "t")], {"color": "red"}),
            stored("b", [0, 1, 0], [Link.incoming("kw", "t")], {"color": "blue"}),
            stored("c", [0, 0, 1], [Link.outgoing("kw", "t")], {"color": "red"}),
        ]
    )
    tags = [("kw", "t"), ("kw", "none")]
    assert await backend.tag_sizes(tags) == {("kw", "t"): 2, ("kw", "none"): 0}
    red = parse_filter({"color": "red"})
    assert await backend.tag_sizes(tags, red) == {("kw", "t"): 1, ("kw", "none"): 0}


async def test_tag_pages_count_the_pages_of_the_nodes_linking_in(backend: Storage):
    """Passages `page#n` of one file are one page; a node of another id is its own."""
    cite = Link.incoming("mention", "p")
    await backend.upsert(
        [
            stored("p.txt#0", [1, 0, 0], [cite], {"color": "red"}),
            stored("p.txt#1", [0, 1, 0], [cite], {"color": "blue"}),
            stored("p.txt#2", [0, 0, 1], [cite], {"color": "red"}),
            stored("q.md#0", [1, 1, 0], [cite], {"color": "blue"}),
            stored("loose", [1, 0, 1], [cite], {"color": "red"}),
            stored("out.txt#0", [0, 1, 1], [Link.outgoing("mention", "p")]),
        ]
    )
    tags = [("mention", "p"), ("mention", "none")]
    assert await backend.tag_pages(tags) == {("mention", "p"): 3, ("mention", "none"): 0}
    blue = parse_filter({"color": "blue"})
    assert await backend.tag_pages(tags, blue) == {("mention", "p"): 2, ("mention", "none"): 0}
    await backend.delete(["q.md#0", "p.txt#1"])  # counts follow writes
    await backend.upsert([stored("r.txt#4", [1, 1, 1], [cite]), stored("s.txt#0", [1, 0, 0])])
    assert await backend.tag_pages(tags) == {("mention", "p"): 3, ("mention", "none"): 0}
    assert await backend.tag_pages(tags, blue) == {("mention", "p"): 0, ("mention", "none"): 0}


async def test_the_first_model_recorded_stays_recorded(open_backend):
    first = open_backend()
    assert await first.recorded_model() is None
    assert await first.record_model("minilm") == "minilm"
    assert await first.record_model("e5") == "minilm"
    await first.upsert([stored("a", [1, 0, 0])])
    assert await first.recorded_model() == "minilm"
    assert await open_backend().recorded_model() == "minilm"  # as another process sees it
