"""Typed filters on every backend against a brute-force reference.

The reference (`oracle` below) is written here from the semantics in `graphstore.filters`,
independently of the library, and walks the metadata itself.  One store of random metadata
per backend answers 520 random filters (searches over the whole store and under a tag, the
top 7, tag sizes) and 60 random traversals, which must never pass through a passage the
filter rejects.
"""

from __future__ import annotations

import json
import math
import operator
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from graphstore import GraphStore
from graphstore.cassandra.filters import ANN_LIMIT
from graphstore.errors import InvalidInputError
from graphstore.filters import EVERYTHING, matches, parse_filter
from graphstore.links import Link
from graphstore.nodes import Node, StoredNode, unit
from graphstore.storage import Storage

SEED = 15
NODES = 200
FILTERS = 520
TRAVERSALS = 60
DIM = 8
BOOKS = ["西游记", "红楼梦", "水浒传"]
WORDS = ["monkey", "pig", "sand", "monk", "demon"]
LONG = "第二十七回 尸魔三戏唐三藏 圣僧恨逐美猴王"  # 61 UTF-8 bytes: past a range column's 40
TAG = ("kw", "all")
RANGE = {"$lt": operator.lt, "$lte": operator.le, "$gt": operator.gt, "$gte": operator.ge}


# -- the reference ------------------------------------------------------------------------


def values_at(metadata: dict[str, Any], key: str) -> list[Any]:
    """The values a filter sees under a dotted key: the value, or a list's elements."""
    value: Any = metadata
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return []
        value = value[part]
    if isinstance(value, list):
        return [item for item in value if item is not None and not isinstance(item, list)]
    return [] if value is None else [value]


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def normal(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: normal(item) for key, item in value.items()}
    return value


def same(left: Any, right: Any) -> bool:
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if is_number(left) and is_number(right):
        return left == right
    return json.dumps(normal(left), sort_keys=True) == json.dumps(normal(right), sort_keys=True)


def operator_holds(name: str, operand: Any, found: list[Any]) -> bool:
    if name == "$eq":
        return any(same(value, operand) for value in found)
    if name == "$ne":
        return not any(same(value, operand) for value in found)
    if name == "$in":
        return any(same(value, item) for value in found for item in operand)
    if name == "$nin":
        return not any(same(value, item) for value in found for item in operand)
    kind: Callable[[Any], bool] = is_number if is_number(operand) else lambda v: isinstance(v, str)
    return any(RANGE[name](value, operand) for value in found if kind(value))


def oracle(metadata_filter: dict[str, Any], metadata: dict[str, Any]) -> bool:
    for key, condition in metadata_filter.items():
        if key == "$and":
            ok = all(oracle(part, metadata) for part in condition)
        elif key == "$or":
            ok = any(oracle(part, metadata) for part in condition)
        elif isinstance(condition, dict) and condition and all(k[0] == "$" for k in condition):
            found = values_at(metadata, key)
            ok = all(operator_holds(name, arg, found) for name, arg in condition.items())
        else:
            ok = any(same(value, condition) for value in values_at(metadata, key))
        if not ok:
            return False
    return True


# -- random metadata and filters ----------------------------------------------------------


def random_metadata(rng: random.Random) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    roll = rng.random()
    if roll < 0.6:
        metadata["chapter"] = rng.randint(1, 40)
    elif roll < 0.7:
        metadata["chapter"] = rng.choice([2.5, 27.0, -0.0, str(rng.randint(1, 40))])
    elif roll < 0.8:
        metadata["chapter"] = rng.sample(range(1, 41), rng.randint(1, 3))
    if rng.random() < 0.8:
        metadata["book"] = rng.choice(BOOKS)
    if rng.random() < 0.6:
        day = f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        metadata["date"] = day if rng.random() < 0.7 else day + f"T{rng.randint(0, 23):02d}:00:00Z"
    if rng.random() < 0.5:
        metadata["words"] = rng.sample(WORDS, rng.randint(0, 3))
    if rng.random() < 0.5:
        metadata["score"] = rng.choice([rng.uniform(-1, 1), rng.randint(-2, 2)])
    if rng.random() < 0.3:
        metadata["flag"] = rng.random() < 0.5
    if rng.random() < 0.3:
        metadata["nested"] = {"level": rng.randint(0, 4)}
    if rng.random() < 0.2:
        metadata["title"] = LONG + rng.choice("甲乙丙丁")
    if rng.random() < 0.15:
        metadata["big"] = 2**53 + rng.randint(-2, 2)
    if rng.random() < 0.05:
        metadata["none"] = None
    return metadata


def random_operand(rng: random.Random, key: str) -> Any:
    """Mostly a value of the key's type, sometimes another type (which must not match)."""
    if rng.random() < 0.12:
        return rng.choice([27, "27", "西游记", 0.5, True, "2024-06-01", LONG])
    return {
        "chapter": lambda: rng.choice([rng.randint(0, 41), rng.randint(0, 41) + 0.5, 27.0]),
        "book": lambda: rng.choice(BOOKS),
        "date": lambda: f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        "words": lambda: rng.choice(WORDS),
        "score": lambda: rng.choice([round(rng.uniform(-1, 1), 2), rng.randint(-2, 2), -0.0]),
        "flag": lambda: rng.random() < 0.5,
        "nested.level": lambda: rng.randint(0, 4),
        "nested": lambda: {"level": rng.randint(0, 4)},
        "title": lambda: LONG + rng.choice("甲乙丙丁"),
        "big": lambda: 2**53 + rng.randint(-2, 2),
        "missing": lambda: 1,
    }[key]()


def random_bound(rng: random.Random, key: str) -> Any:
    """An operand of a range: a number or a string."""
    while True:
        operand = random_operand(rng, key)
        if isinstance(operand, (int, float, str)) and not isinstance(operand, bool):
            return operand


KEYS = ["chapter", "book", "date", "words", "score", "flag", "nested.level", "nested"]
KEYS += ["title", "big", "missing"]
ORDERED = ["chapter", "date", "score", "title", "big", "nested.level", "book", "words"]


def random_leaf(rng: random.Random) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.45:
        key = rng.choice(ORDERED)
        operators = rng.sample(list(RANGE), rng.choice([1, 1, 2]))
        return {key: {name: random_bound(rng, key) for name in operators}}
    key = rng.choice(KEYS)
    if roll < 0.6:
        return {key: random_operand(rng, key)}
    if roll < 0.75:
        name = rng.choice(["$eq", "$ne"])
        return {key: {name: random_operand(rng, key)}}
    name = rng.choice(["$in", "$nin"])
    return {key: {name: [random_operand(rng, key) for _ in range(rng.randint(0, 3))]}}


def random_filter(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    roll = rng.random()
    if depth < 2 and roll < 0.35:
        parts = [random_filter(rng, depth + 1) for _ in range(rng.randint(1, 3))]
        return {rng.choice(["$and", "$or"]): parts}
    combined: dict[str, Any] = {}
    for _ in range(rng.choice([1, 1, 2])):
        combined.update(random_leaf(rng))
    return combined


HAND_PICKED: list[dict[str, Any]] = [
    {"chapter": {"$in": list(range(1, 41))}},  # more branches than Cassandra runs: checked on rows
    {"chapter": {"$in": [1, 2, 3, 4]}, "book": {"$in": [*BOOKS, "x"]}},
    {"book": {"$ne": "西游记"}},
    {"words": {"$nin": ["monkey", "pig"]}},
    {"$or": [{"chapter": {"$lt": 5}}, {"date": {"$gte": "2024-11"}}, {"score": {"$gt": 0.9}}]},
    {"title": {"$gt": LONG + "乙"}},
    {"title": {"$lte": LONG + "乙", "$gt": LONG}},
    {"big": {"$gt": 2**53}, "chapter": {"$gte": 10, "$lt": 30}},
    {"chapter": {"$gte": 10.5, "$lte": 20, "$lt": 15}, "$or": [{"flag": True}, {"flag": False}]},
    {"date": {"$gte": "2024-05-01", "$lt": "2024-06-01T00:00:00Z"}},
    {"score": {"$gte": 0, "$lte": -0.0}},
    {"chapter": {"$gt": "10"}},
]


# -- the tests ----------------------------------------------------------------------------


def random_store(rng: random.Random) -> tuple[list[StoredNode], dict[str, dict[str, Any]]]:
    vectors = np.random.default_rng(SEED).standard_normal((NODES, DIM))
    nodes = []
    for index in range(NODES):
        links = {Link.incoming(*TAG)}
        links |= {Link.bidir("g", f"t{rng.randrange(40)}") for _ in range(rng.randint(0, 2))}
        links |= {Link.outgoing("g", f"t{rng.randrange(40)}") for _ in range(rng.randint(0, 2))}
        node = Node(f"n{index:03d}", f"passage {index}", random_metadata(rng), frozenset(links))
        nodes.append(StoredNode(node, unit(vectors[index])))
    return nodes, {item.node.id: dict(item.node.metadata) for item in nodes}


def reachable(nodes: list[StoredNode], passes: set[str], roots: list[str], depth: int) -> set[str]:
    """Nodes reached from `roots` within `depth` tag hops through passing nodes only."""
    out = {
        item.node.id: {(link.kind, link.tag) for link in item.node.links if link.direction != "in"}
        for item in nodes
    }
    into: dict[tuple[str, str], set[str]] = {}
    for item in nodes:
        for link in item.node.links:
            if link.direction != "out" and item.node.id in passes:
                into.setdefault((link.kind, link.tag), set()).add(item.node.id)
    seen, frontier = set(roots), list(roots)
    for _ in range(depth):
        tags = {tag for node_id in frontier for tag in out[node_id]}
        frontier = [n for tag in tags for n in into.get(tag, ()) if n not in seen]
        seen.update(frontier)
    return seen - set(roots)


async def test_random_filters_match_the_reference_on_every_backend(backend: Storage):
    rng = random.Random(SEED)
    nodes, metadata = random_store(rng)
    await backend.upsert(nodes)
    embedding = {item.node.id: item.embedding for item in nodes}
    query = unit(np.random.default_rng(SEED + 1).standard_normal(DIM))
    by_similarity = sorted(embedding, key=lambda node_id: -float(embedding[node_id] @ query))
    checked = 0
    for number, raw in enumerate([*HAND_PICKED, *(random_filter(rng) for _ in range(FILTERS))]):
        where = parse_filter(raw)
        expected = {node_id for node_id, md in metadata.items() if oracle(raw, md)}
        assert {node_id for node_id, md in metadata.items() if matches(where, md)} == expected, raw
        found = await backend.search(query, NODES, where)
        assert {item.stored.node.id for item in found} == expected, raw
        hits = await backend.search_hits(query, NODES, where)
        assert {hit.id for hit in hits} == expected, raw
        under_tag = await backend.search_tag(TAG, query, NODES, where)
        assert {hit.id for hit in under_tag} == expected, raw
        assert await backend.tag_sizes([TAG], where) == {TAG: len(expected)}, raw
        top = [node_id for node_id in by_similarity if node_id in expected][:7]
        assert [hit.id for hit in await backend.search_hits(query, 7, where)] == top, raw
        assert [hit.id for hit in await backend.search_tag(TAG, query, 7, where)] == top, raw
        if number % 10 == 0:  # beyond an ANN query's largest LIMIT (Cassandra: read and rank)
            many = ANN_LIMIT + 1
            assert {s.stored.node.id for s in await backend.search(query, many, where)} == expected
            assert {hit.id for hit in await backend.search_hits(query, many, where)} == expected
            assert {hit.id for hit in await backend.search_tag(TAG, query, many, where)} == expected
        checked += 1
    assert checked >= 500

    store = GraphStore(None, backend)
    for _ in range(TRAVERSALS):
        raw = random_filter(rng)
        passes = {node_id for node_id, md in metadata.items() if oracle(raw, md)}
        roots = [node_id for node_id in by_similarity if node_id in passes][:3]
        hits = await store.atraversal_search(
            query.tolist(), k=NODES, start_k=3, depth=2, adjacent_k=NODES, filter=raw
        )
        assert {hit.node.id for hit in hits} <= passes, raw
        assert {hit.node.id for hit in hits if hit.depth > 0} == reachable(
            nodes, passes, roots, 2
        ), raw


def chain(chapter_of_middle: int) -> list[Node]:
    """start → middle → end, the only path to `end` running through `middle`."""
    return [
        Node(
            "start", "start", {"chapter": 1, "book": "西游记"}, frozenset({Link.outgoing("p", "a")})
        ),
        Node(
            "middle",
            "middle",
            {"chapter": chapter_of_middle, "book": "西游记"},
            frozenset({Link.incoming("p", "a"), Link.outgoing("p", "b")}),
        ),
        Node("end", "end", {"chapter": 2, "book": "西游记"}, frozenset({Link.incoming("p", "b")})),
    ]


VECTORS = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
AS_OF_27 = {"$and": [{"book": "西游记"}, {"chapter": {"$lte": 27}}]}


@pytest.mark.parametrize("search", ["search", "traversal_search", "mmr_traversal_search"])
async def test_no_path_runs_through_a_filtered_out_passage(backend: Storage, search: str):
    store = GraphStore(None, backend)
    await store.aadd_nodes(chain(30), vectors=VECTORS)
    options: dict[str, Any] = {"k": 3, "depth": 2}
    options |= {"start_k": 1} if search == "traversal_search" else {"fetch_k": 1}
    run = getattr(store, "a" + search)
    unfiltered = await run(VECTORS[0], **options)
    assert {hit.node.id for hit in unfiltered} == {"start", "middle", "end"}
    filtered = await run(VECTORS[0], filter=AS_OF_27, **options)
    assert [(hit.node.id, hit.depth) for hit in filtered][:1] == [("start", 0)]
    # Every search fills k with the next-nearest passages that pass (depth 0, no path)
    assert [hit.node.id for hit in filtered if hit.depth == 0][1:] == ["end"]
    assert [hit.node.id for hit in filtered if hit.depth > 0] == []
    await store.aadd_nodes(chain(27), vectors=VECTORS)  # now the middle passes: end is reached
    assert {hit.node.id for hit in await run(VECTORS[0], filter=AS_OF_27, **options)} == {
        "start",
        "middle",
        "end",
    }


async def test_initial_roots_that_fail_the_filter_are_not_expanded(backend: Storage):
    store = GraphStore(None, backend)
    await store.aadd_nodes(chain(30), vectors=VECTORS)
    hits = await store.ammr_traversal_search(
        VECTORS[2], k=3, fetch_k=0, depth=1, initial_roots=["middle"], filter=AS_OF_27
    )
    assert hits == []
    hits = await store.ammr_traversal_search(
        VECTORS[2], k=3, fetch_k=0, depth=1, initial_roots=["middle"]
    )
    assert [hit.node.id for hit in hits] == ["end"]


async def test_changed_metadata_clears_what_the_filter_saw(backend: Storage):
    tag = [Link.bidir("kw", "t")]
    first = Node(
        "a", "a", {"chapter": 3, "date": "2024-01-01", "words": ["x", "y"]}, frozenset(tag)
    )
    await backend.upsert([StoredNode(first, unit([1, 0, 0]))])
    await backend.upsert(
        [StoredNode(Node("a", "a", {"other": 1}, frozenset(tag)), unit([1, 0, 0]))]
    )
    for raw in [{"chapter": {"$lte": 3}}, {"date": {"$gte": "2024"}}, {"words": {"$gt": "a"}}]:
        where = parse_filter(raw)
        assert await backend.search(unit([1, 0, 0]), 5, where) == []
        assert await backend.search_tag(("kw", "t"), unit([1, 0, 0]), 5, where) == []
    ne = parse_filter({"chapter": {"$ne": 3}})
    assert [hit.id for hit in await backend.search_hits(unit([1, 0, 0]), 5, ne)] == ["a"]


async def test_a_number_in_a_list_in_a_dict_equals_it_written_either_way(backend: Storage):
    """`{"n": {"v": [2]}}` did not find a stored `{"n": {"v": [2.0]}}` (nor the other way
    round): numbers were made canonical inside dicts but not inside their lists."""
    store = GraphStore(None, backend)
    await store.aadd_nodes(
        [
            Node("float", "t", {"n": {"v": [2.0, {"w": 3.0}]}}),
            Node("int", "t", {"n": {"v": [2, {"w": 3}]}}),
        ],
        vectors=[[1.0, 0.0], [1.0, 0.1]],
    )
    for value in ([2, {"w": 3}], [2.0, {"w": 3.0}], (2.0, {"w": 3})):
        hits = await store.asimilarity_search([1.0, 0.0], k=5, filter={"n": {"v": value}})
        assert sorted(hit.node.id for hit in hits) == ["float", "int"]


async def test_a_dotted_key_reaches_into_the_dicts_of_a_list(backend: Storage):
    """As MongoDB reads a list of documents: `{"tags.a": 5}` found nothing in
    `"tags": [{"a": 5, "b": 7}, …]`, where the README says dotted keys reach into dicts."""
    store = GraphStore(None, backend)
    await store.aadd_nodes(
        [
            Node("one", "t", {"tags": [{"a": 5, "b": 7}, {"a": 9, "c": {"d": "x"}}]}),
            Node("two", "t", {"tags": [{"a": 6}], "a": 5}),
        ],
        vectors=[[1.0, 0.0], [1.0, 0.1]],
    )
    for raw, expected in [
        ({"tags.a": 5}, ["one"]),
        ({"tags.a": {"$gt": 8}}, ["one"]),
        ({"tags.a": {"$lt": 7}}, ["one", "two"]),
        ({"tags.c.d": "x"}, ["one"]),
        ({"tags.a": {"$nin": [5, 9]}}, ["two"]),
        ({"tags": {"a": 6}}, ["two"]),
    ]:
        hits = await store.asimilarity_search([1.0, 0.0], k=5, filter=raw)
        assert sorted(hit.node.id for hit in hits) == expected, raw


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"chapter": {"$lte": True}}, "'$lte' for 'chapter' takes a number or a string"),
        ({"chapter": {"$gt": None}}, "'$gt' for 'chapter' takes a number or a string"),
        ({"chapter": {"$lt": [1, 2]}}, "not list"),
        ({"chapter": {"$gte": {"a": 1}}}, "not dict"),
        ({"chapter": {"$lt": math.inf}}, "is inf, which JSON cannot store"),
        ({"chapter": {"$like": 1}}, "unknown filter operator '$like' for 'chapter'"),
        ({"$not": {"chapter": 1}}, "unknown filter operator '$not'"),
        ({"$and": {"chapter": 1}}, "$and takes a non-empty list of filters, not dict"),
        ({"$or": []}, "$or takes a non-empty list of filters, not an empty list"),
        ({"$and": [1]}, "$and takes filters (dicts), not int"),
        ({"chapter": {"$in": 3}}, "'$in' for 'chapter' takes a list of values, not int"),
        ({"chapter": {"$nin": [[1]]}}, "'$nin' for 'chapter' must be a string, number, bool"),
        ({"chapter": {"$lte": 27, "book": "x"}}, "mixes operators with plain keys ('book')"),
        ({"chapter": [1]}, "filter value for 'chapter' must be a string, number, bool or dict"),
        ({"chapter": {"$eq": None}}, "'$eq' for 'chapter' must be a string, number, bool"),
        ({"chapter": {"$gt": "\ud800"}}, "'$gt' for 'chapter' contains"),
        ({"chapter": {"$gt": 10**5000}}, "more than 4300 digits"),
    ],
)
async def test_bad_filters_are_refused_before_anything_runs(backend: Storage, raw, message):
    store = GraphStore(None, backend)  # no model: a search that ran would fail on embedding
    with pytest.raises(InvalidInputError) as error:
        await store.asearch("scene", filter=raw)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_deeply_nested_logic_is_refused():
    raw: dict[str, Any] = {"chapter": 1}
    for _ in range(40):
        raw = {"$and": [raw]}
    with pytest.raises(InvalidInputError, match="nests deeper than 32 levels"):
        parse_filter(raw)


def test_parsing_normalizes_what_means_the_same():
    assert parse_filter(None) == parse_filter({}) == EVERYTHING
    assert parse_filter({"a": 1, "b": 2}) == parse_filter({"$and": [{"a": 1}, {"b": {"$eq": 2}}]})
    assert parse_filter({"a": {"$in": [1]}}) == parse_filter({"a": 1.0})
    assert not matches(parse_filter({"a": {"$in": []}}), {"a": 1})
    assert matches(parse_filter({"a": {"$nin": []}}), {})


async def test_every_entry_point_takes_an_as_of_chapter_filter(backend: Storage):
    """The filter the writer context builds for `--as-of-chapter` (a user filter `$and` a
    chapter bound) through every search, the LangChain store and retriever, and prompts."""
    from graphstore.langchain import GraphStoreVectorStore
    from graphstore.prompt import awriter_context
    from graphstore.testing.embeddings import KeyedEmbeddings

    lc_store = GraphStoreVectorStore(KeyedEmbeddings(), backend)
    store = lc_store.store
    nodes = [
        Node(
            f"{book}-{chapter}",
            f"{book} chapter {chapter}: the pilgrims walk on",
            {"book": book, "chapter": chapter},
            frozenset({Link.bidir("entity", "孙悟空"), Link.bidir("ch", str(chapter // 5))}),
        )
        for book in ["西游记", "红楼梦"]
        for chapter in range(1, 41)
    ]
    await store.aadd_nodes(nodes)

    def allowed(metadata: Any) -> bool:
        return metadata["book"] == "西游记" and metadata["chapter"] <= 27

    scene = "the pilgrims walk on"
    runs = {
        "search": await store.asearch(scene, k=6, filter=AS_OF_27),
        "similarity": await store.asimilarity_search(scene, k=6, filter=AS_OF_27),
        "traversal": await store.atraversal_search(scene, k=6, depth=2, filter=AS_OF_27),
        "mmr": await store.ammr_traversal_search(scene, k=6, filter=AS_OF_27),
    }
    for name, hits in runs.items():
        assert len(hits) == 6, name
        assert all(allowed(hit.node.metadata) for hit in hits), name
    documents = [
        *await lc_store.asimilarity_search(scene, k=6, filter=AS_OF_27),
        *await lc_store.amax_marginal_relevance_search(scene, k=6, filter=AS_OF_27),
        *await lc_store.as_retriever(search_kwargs={"k": 6, "filter": AS_OF_27}).ainvoke(scene),
        *await lc_store.as_retriever(
            search_type="mmr_traversal", search_kwargs={"k": 6, "filter": AS_OF_27}
        ).ainvoke(scene),
    ]
    assert len(documents) == 24
    assert all(allowed(document.metadata) for document in documents)
    context = await awriter_context(store, scene, k=6, filter=AS_OF_27, budget=10_000)
    assert len(context.hits) == 6
    assert all(allowed(hit.node.metadata) for hit in context.hits)
