"""Bad input, table-driven: each case must raise a one-line `InvalidInputError` naming the
problem and leave the store exactly as it was.  Add a row to `CASES` to add a case."""

from __future__ import annotations

import math
import pickle
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from graphstore import GraphStore, InvalidInputError, Link, Node, StoreOpenError
from graphstore.embedded import EmbeddedStorage
from graphstore.errors import InvalidArgumentError
from graphstore.links import as_links
from graphstore.nodes import StoredNode, unit
from graphstore.strategy import search_strategy
from graphstore.testing.embeddings import KeyedEmbeddings

DIM = 8
GOOD = Node("good", "a good passage", {"n": 1}, frozenset({Link.bidir("kw", "t")}))


@dataclass(frozen=True)
class Case:
    id: str
    action: Callable[[GraphStore], Awaitable[Any]]
    message: str


def add(*nodes: Any, **options: Any) -> Callable[[GraphStore], Awaitable[Any]]:
    return lambda store: store.aadd_nodes([GOOD, *nodes], **options)


def node(**changes: Any) -> Node:
    fields = {"id": "bad", "text": "text", "metadata": {}, "links": frozenset()} | changes
    return Node(**fields)


def nested(levels: int) -> Any:
    """A dict nested `levels` deep (built without recursion)."""
    value: Any = "leaf"
    for _ in range(levels):
        value = {"d": value}
    return value


def search(query: str = "a query", **options: Any) -> Callable[[GraphStore], Awaitable[Any]]:
    return lambda store: store.ammr_traversal_search(query, **options)


CASES = [
    Case("empty text", add(node(text="")), "text of node 'bad' is empty"),
    Case("whitespace text", add(node(text=" \n\t ")), "text of node 'bad' is empty"),
    Case("non-string text", add(node(text=42)), "must be a string, not int"),
    Case("None metadata", add(node(metadata=None)), "metadata must be a dict, not NoneType"),
    Case("list metadata", add(node(metadata=["a"])), "metadata must be a dict, not list"),
    Case("bytes in metadata", add(node(metadata={"b": b"x"})), "metadata.b is a bytes"),
    Case("set in metadata", add(node(metadata={"s": {1}})), "metadata.s is a set"),
    Case(
        "NumPy bool in metadata",  # was refused as "a bool", which the store keeps
        add(node(metadata={"flag": np.bool_(True)})),
        "metadata.flag is a numpy.bool (convert it with .item()), which the store cannot keep",
    ),
    Case(
        "NumPy array in metadata",  # .item() raises for more than one element
        add(node(metadata={"v": np.arange(3)})),
        "metadata.v is a numpy.ndarray (convert it with .tolist()), which the store cannot keep",
    ),
    Case("NaN in metadata", add(node(metadata={"x": math.nan})), "metadata.x is nan"),
    Case("non-string key", add(node(metadata={1: "x"})), "non-string key 1"),
    Case(
        "nested bad value",
        add(node(metadata={"a": [{"b": object()}]})),
        "metadata.a[0].b is a object",
    ),
    Case(
        "link is a string",
        add(node(links=["kw:t"])),
        "a link must be a Link or a {kind, direction, tag} dict, not str 'kw:t'",
    ),
    Case("links is a string", add(node(links="kw:t")), "links must be a list of Link, not str"),
    Case(
        "unknown direction",
        add(node(links=[Link("kw", "sideways", "t")])),
        "direction must be one of",
    ),
    Case(
        "empty kind", add(node(links=[Link("", "in", "t")])), "link kind must be a non-empty string"
    ),
    Case(
        "empty tag", add(node(links=[Link("kw", "in", " ")])), "link tag must be a non-empty string"
    ),
    Case(
        "10,000-char tag",
        add(node(links=[Link.bidir("kw", "x" * 10_000)])),
        "link tag is 10000 characters long",
    ),
    Case("duplicate ids", add(node(id="good")), "node id 'good' appears twice"),
    Case("empty id", add(node(id="")), "node id must be a non-empty string"),
    Case("huge id", add(node(id="i" * 10_000)), "node id is 10000 characters long"),
    Case("non-string id", add(node(id=7)), "node id must be a non-empty string"),
    Case("not a node", lambda s: s.aadd_nodes([GOOD, {"id": "x"}]), "expected a Node, got dict"),
    Case(
        "wrong dimension",
        add(node(), vectors=[[1.0] * DIM, [1.0] * (DIM + 1)]),
        "embedding has dimension 9",
    ),
    Case(
        "NaN embedding",
        add(node(), vectors=[[1.0] * DIM, [math.nan] * DIM]),
        "vectors[1]: embedding contains NaN or infinite",
    ),
    Case("zero embedding", add(node(), vectors=[[1.0] * DIM, [0.0] * DIM]), "zero vector"),
    Case(
        "None in a vector",  # was called NaN, which the caller never gave
        add(node(), vectors=[[1.0] * DIM, [None, *[1.0] * (DIM - 1)]]),
        "vectors[1]: an embedding must be a vector of numbers, not None",
    ),
    Case("None in a query vector", search(query=[None] * DIM), "a vector of numbers, not None"),
    Case("vector count", add(node(), vectors=[[1.0] * DIM]), "got 1 vectors for 2 nodes"),
    Case(
        "complex embedding",  # its real parts, all 0, were called "the zero vector"
        add(node(), vectors=[[1.0] * DIM, [1j] * DIM]),
        "a vector of real numbers, not complex ones",
    ),
    Case("vectors a number", add(node(), vectors=3), "a list of vectors or a 2-D array, not int"),
    Case("vectors a 0-d array", add(node(), vectors=np.array(5.0)), "2-D array, not ndarray"),
    Case("nodes one node", lambda s: s.aadd_nodes(GOOD), "nodes must be a list of Nodes, not Node"),
    Case("nodes None", lambda s: s.aadd_nodes(None), "nodes must be a list of Nodes, not NoneType"),
    Case("stats a number", search(stats=1), "stats must be a TraversalStats, not int"),
    Case("search stats", lambda s: s.asearch("q", stats={}), "stats must be a TraversalStats"),
    Case(
        "traversal stats",
        lambda s: s.atraversal_search("q", stats=[]),
        "stats must be a TraversalStats, not list",
    ),
    Case("filter value list", search(filter={"n": [1]}), "filter value for 'n'"),
    Case("filter not a dict", search(filter="n=1"), "filter must be a dict, not str"),
    Case("filter empty key", search(filter={"": 1}), "filter keys must be non-empty strings"),
    Case("filter NaN", search(filter={"n": math.nan}), "filter value for 'n'"),
    Case("k zero", search(k=0), "k must be between 1 and 1000, got 0"),
    Case("k negative", search(k=-3), "k must be between 1 and 1000, got -3"),
    Case("k enormous", search(k=10**12), "k must be between 1 and 1000"),
    Case("k not an int", search(k=2.5), "k must be an integer, not float"),
    Case("k a string", search(k="2"), "k must be an integer, not str"),  # was a TypeError
    Case("k None", search(k=None), "k must be an integer, not NoneType"),
    Case("depth negative", search(depth=-1), "depth must be between 0 and 10"),
    Case("depth enormous", search(depth=10**6), "depth must be between 0 and 10"),
    Case("fetch_k zero", search(fetch_k=0), "fetch_k must be between 1 and 1000, got 0"),
    Case("adjacent_k zero", search(adjacent_k=0), "adjacent_k must be between 1 and 1000"),
    Case("adjacent_k enormous", search(adjacent_k=10**9), "adjacent_k must be between 1 and 1000"),
    Case("lambda above 1", search(lambda_mult=1.5), "lambda_mult must be between 0 and 1"),
    Case("lambda below 0", search(lambda_mult=-0.1), "lambda_mult must be between 0 and 1"),
    Case("lambda a string", search(lambda_mult="0.5"), "lambda_mult must be a number"),
    Case(
        "step cap zero",
        search(max_candidates_per_step=0),
        "max_candidates_per_step must be between",
    ),
    Case("empty query", search(query=""), "the query must be a non-empty string"),
    Case(  # str.strip keeps a zero-width space and a byte-order mark
        "invisible query",
        search(query="\u200b\ufeff \n"),
        "the query must be a non-empty string",
    ),
    Case(
        "traversal depth",
        lambda s: s.atraversal_search("q", depth=11),
        "depth must be between 0 and 10",
    ),
    Case("ids as a string", lambda s: s.adelete("good"), "ids must be a list of strings, not str"),
    Case(
        "None among ids",
        lambda s: s.aget(["good", None]),
        "ids must be non-empty strings, got None",
    ),
    Case("initial root None", search(initial_roots=[None]), "ids must be non-empty strings"),
    Case("surrogate in id", add(node(id="x\ud800")), "node id contains '\\ud800'"),
    Case("surrogate in text", add(node(text="x\ud800")), "text of node 'bad' contains"),
    Case("surrogate in metadata", add(node(metadata={"a": ["x\udfff"]})), "metadata.a[0] contains"),
    Case("surrogate in a key", add(node(metadata={"k\ud800": 1})), "a key of metadata contains"),
    Case("surrogate in a tag", add(node(links=[Link.bidir("kw", "\ud800")])), "link tag contains"),
    Case(
        "surrogate in a kind", add(node(links=[Link.bidir("k\ud800", "t")])), "link kind contains"
    ),
    Case("huge int in metadata", add(node(metadata={"n": 10**5000})), "more than 4300 digits"),
    Case("metadata 500 deep", add(node(metadata={"deep": nested(500)})), "nests deeper than 32"),
    Case("metadata 3000 deep", add(node(metadata={"deep": nested(3000)})), "nests deeper than 32"),
    Case("filter huge int", search(filter={"n": 10**5000}), "more than 4300 digits"),
    Case("filter 3000 deep", search(filter={"n": nested(3000)}), "nests deeper than 32"),
    Case("filter surrogate value", search(filter={"n": "\ud800"}), "filter value for 'n' contains"),
    Case("filter surrogate key", search(filter={"\ud800": 1}), "a filter key contains"),
    Case("None query", search(query=None), "a non-empty string or a vector, not NoneType"),
    Case("int query", search(query=5), "the query must be a non-empty string or a vector, not int"),
    Case("surrogate in a query", search(query="x\ud800"), "the query contains '\\ud800'"),
    Case("surrogate in get", lambda s: s.aget(["x\udc80"]), "an id contains '\\udc80'"),
    Case(
        "huge id in get",  # echoed whole in the error, and in an MCP server's log
        lambda s: s.aget(["x" * 100_000]),
        "an id is 100000 characters long; the limit is 512",
    ),
    Case("surrogate in delete", lambda s: s.adelete(["x\udc80"]), "an id contains '\\udc80'"),
    Case("surrogate root", search(initial_roots=["\udc80"]), "an id contains '\\udc80'"),
    Case(
        "unknown traversal option",
        lambda s: s.atraversal_search("q", k=3, foo=2),
        "unknown search option 'foo'",
    ),
]


async def snapshot(store: GraphStore) -> tuple[Any, ...]:
    stats = await store.astats(top_tags=100)
    nodes = await store.aget(["good", "bad", "other"])
    return stats, nodes, await store.acheck()


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
async def test_bad_input_is_refused_and_changes_nothing(backend, case: Case):
    store = GraphStore(KeyedEmbeddings(dimension=DIM), backend)
    await store.aadd_nodes(
        [Node("other", "already stored", {"n": 2}, frozenset({Link.bidir("kw", "t")}))]
    )
    before = await snapshot(store)
    with pytest.raises(InvalidInputError) as error:
        await case.action(store)
    assert case.message in str(error.value)
    assert "\n" not in str(error.value)
    assert await snapshot(store) == before


def test_at_least_thirty_cases():
    assert len(CASES) >= 30


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x00\x01 random bytes " * 100, "is not a graphstore file"),
        (b"SQLite format 3\x00" + b"\x00" * 200, "is not a graphstore file"),
    ],
)
def test_corrupt_file_at_store_path_is_refused_and_left_alone(tmp_path: Path, content, message):
    path = tmp_path / "store.db"
    path.write_bytes(content)
    with pytest.raises(StoreOpenError, match=message):
        EmbeddedStorage(path)
    assert path.read_bytes() == content


def test_foreign_sqlite_file_is_refused_and_left_alone(tmp_path: Path):
    import sqlite3

    path = tmp_path / "other.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
        db.execute("INSERT INTO invoices VALUES (1, 9.5)")
    content = path.read_bytes()
    with pytest.raises(StoreOpenError, match="an SQLite file of another program"):
        EmbeddedStorage(path)
    assert path.read_bytes() == content


def test_directory_or_missing_parent_is_refused(tmp_path: Path):
    with pytest.raises(StoreOpenError, match="is a directory"):
        EmbeddedStorage(tmp_path)
    with pytest.raises(StoreOpenError, match="does not exist"):
        EmbeddedStorage(tmp_path / "missing" / "store.db")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: GraphStore(KeyedEmbeddings(), None), "storage must be a Storage"),
        (lambda: EmbeddedStorage(""), "the store path must be a non-empty path, got ''"),
        (lambda: EmbeddedStorage(5), "the store path must be a non-empty path, got 5"),
    ],
)
def test_a_store_built_from_the_wrong_parts_is_refused_at_once(
    tmp_path, monkeypatch, make, message
):
    """These used to be accepted and fail later (None storage), create a file named `5`, or
    say " is a directory" of an empty path."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInputError, match=message):
        make()
    assert list(tmp_path.iterdir()) == []


def test_a_model_name_given_as_the_embeddings_is_refused_at_once():
    """`GraphStore("minilm", storage)` was accepted and the first search ended in
    "AttributeError: 'str' object has no attribute 'aembed_query'"."""
    for embeddings, message in (
        ("minilm", "not str; for a model by name, load_model('minilm')"),
        (5, "an embedding model (a LangChain Embeddings) or None, not int"),
    ):
        with pytest.raises(InvalidInputError, match=re.escape(message)):
            GraphStore(embeddings, EmbeddedStorage(":memory:"))


async def test_numpy_numbers_are_counts_and_fractions(backend):
    """A k computed with NumPy (`np.int64`) was refused as "not int64"."""
    store = GraphStore(KeyedEmbeddings(dimension=DIM), backend)
    await store.aadd_nodes([GOOD, node(id="b"), node(id="c")])
    plain = await store.asearch("a query", k=2, lambda_mult=0.5)
    numpy = await store.asearch("a query", k=np.int64(2), lambda_mult=np.float32(0.5))
    assert [hit.node.id for hit in numpy] == [hit.node.id for hit in plain]
    assert search_strategy(np.int64(3), depth=np.int8(1)).k == 3
    assert type(search_strategy(np.int64(3), depth=np.int8(1)).depth) is int
    assert search_strategy(2, score_threshold=np.float32(0.25)).score_threshold == 0.25
    with pytest.raises(InvalidInputError, match="k must be an integer, not bool"):
        await store.asearch("a query", k=np.bool_(True))


def test_an_argument_error_names_the_argument_and_survives_pickling() -> None:
    """A range error carries the argument's name apart, for the CLI to name its option, and
    crosses a process boundary (a worker's error) with its message intact."""
    with pytest.raises(InvalidArgumentError) as raised:
        search_strategy(k=5, lambda_mult=1.5)
    error = raised.value
    assert (error.argument, error.problem) == ("lambda_mult", "must be between 0 and 1, got 1.5")
    copy = pickle.loads(pickle.dumps(error))
    assert isinstance(copy, InvalidInputError)
    assert str(copy) == str(error) == "lambda_mult must be between 0 and 1, got 1.5"


@pytest.mark.parametrize("scale", [1e20, 1e-22, 1e-30])
async def test_a_vector_of_huge_or_tiny_values_keeps_its_direction(backend, scale):
    """Normalized in float32, the norm of `[0, 1e20, 0]` overflowed and the vector became
    zero (every score 0, and stored so); the norm of `[0, 1e-30, 0]` underflowed to 0, and
    that of `[0, 1e-22, 1e-22]` came out 1 % off."""
    store = GraphStore(None, backend)
    vectors = [[1.0, 0.0, 0.0], np.array([0.0, scale, 0.0], dtype=np.float32)]
    await store.aadd_nodes([Node("a", "x"), Node("b", "y")], vectors=vectors)
    query = np.array([0.0, scale, scale], dtype=np.float32)
    hits = await store.asimilarity_search(query, k=2)
    assert [(hit.node.id, round(hit.similarity, 4)) for hit in hits] == [("b", 0.7071), ("a", 0.0)]
    assert unit(np.array([1e39, 0.0])).tolist() == [1.0, 0.0]  # finite, though not in float32
    with pytest.raises(ValueError, match="a vector of numbers"):
        unit([10**400, 1])


async def test_vectors_may_come_from_any_iterable(backend):
    """A generator of vectors was a bare `TypeError: object of type 'generator' has no len()`."""
    store = GraphStore(None, backend)
    await store.aadd_nodes([Node("a", "x"), Node("b", "y")], vectors=(v for v in ([1, 0], [0, 1])))
    hits = await store.asimilarity_search([0.0, 1.0], k=1)
    assert [hit.node.id for hit in hits] == ["b"]


class MisbehavingEmbeddings(KeyedEmbeddings):
    """A model whose vectors do not match its texts: sizes that differ in one call (a
    ragged wrapper), or one vector more or fewer than texts."""

    def __init__(self, fault: str) -> None:
        super().__init__(dimension=DIM)
        self.fault = fault

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors = super().embed_documents(texts)
        if self.fault == "ragged":
            return [vector + [1.0] * position for position, vector in enumerate(vectors)]
        if self.fault == "NaN":  # in a batch of a thousand, which one?
            return [vectors[0], [math.nan] * DIM]
        if self.fault == "one more":
            return [*vectors, [1.0] * DIM]
        return vectors[:-1]


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("ragged", "the embedding of 'b': embedding has dimension 9; the store holds 8"),
        ("NaN", "the embedding of 'b': embedding contains NaN or infinite values"),
        ("one more", "the embedding model returned 3 vectors for 2 texts"),
        ("one fewer", "the embedding model returned 1 vectors for 2 texts"),
    ],
)
async def test_a_model_whose_vectors_do_not_match_its_texts_writes_nothing(backend, fault, message):
    """On a new store, vectors of two sizes in the first batch were written (the second
    row corrupt, and the embedded index broken until the store was reopened: every later
    search failed); one vector too many shifted every vector onto the wrong passage, and
    one too few raised `RuntimeError: coroutine raised StopIteration`."""
    store = GraphStore(MisbehavingEmbeddings(fault), backend)
    with pytest.raises(InvalidInputError) as error:
        await store.aadd_nodes([Node("a", "first"), Node("b", "second")])
    assert str(error.value) == message
    assert (await store.astats()).nodes == 0
    assert await store.aget(["a", "b"]) == []
    store.embeddings = KeyedEmbeddings(dimension=DIM)
    await store.aadd_nodes([Node("a", "first"), Node("b", "second")])
    assert {hit.node.id for hit in await store.asimilarity_search("first", k=2)} == {"a", "b"}
    assert await store.acheck() == []


async def test_a_storage_write_of_two_dimensions_is_refused_whole(backend):
    """The storage itself refuses a write whose vectors differ in size, before writing any
    (the embedded backend checked only the first against the store's dimension)."""
    rows = [
        StoredNode(Node("a", "first"), unit([1.0, 0.0])),
        StoredNode(Node("b", "second"), unit([1.0, 0.0, 0.0])),
    ]
    with pytest.raises(InvalidInputError, match=r"^embedding of node 'b' has dimension 3; "):
        await backend.upsert(rows)
    assert await backend.get(["a", "b"]) == []
    await backend.upsert(rows[:1])
    assert [stored.node.id for stored in await backend.get(["a", "b"])] == ["a"]


def test_a_refused_link_is_named_on_one_line_however_it_prints():
    """The error quoted the value's repr whole: a NumPy array's spans lines, and a repr that
    raises turned the one-line error into its own exception."""

    class Unprintable:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    for value, shown in [
        (np.zeros((3, 3)), "ndarray array([[0., 0., 0.],"),
        (Unprintable(), "Unprintable <Unprintable instance at"),
        ("x" * 500, "str 'xxx"),
    ]:
        with pytest.raises(InvalidInputError) as refused:
            as_links([value])
        message = str(refused.value)
        assert "\n" not in message
        assert message.startswith(
            f"a link must be a Link or a {{kind, direction, tag}} dict, not {shown}"
        )
        assert len(message) < 140
