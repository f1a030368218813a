"""LangChain's own conformance suites, graph_retriever's adapter suite, and the upstream fixes.

Every suite runs on each backend through the parametrized `backend` fixture.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import subprocess
import sys
import warnings
from pathlib import Path
from types import MappingProxyType

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

pytest.importorskip("langchain_community.graph_vectorstores")
pytest.importorskip("langchain_tests")
pytest.importorskip("graph_retriever")

from graph_retriever import atraverse, traverse
from graph_retriever.edges import IdEdge, MetadataEdge
from graph_retriever.strategies import Eager
from graph_retriever.testing.adapter_tests import AdapterComplianceSuite
from graph_retriever.testing.embeddings import AnimalEmbeddings
from langchain_community.graph_vectorstores.base import Node as LangChainNode
from langchain_community.graph_vectorstores.links import Link as LangChainLink
from langchain_tests.integration_tests import (
    RetrieversIntegrationTests,
    VectorStoreIntegrationTests,
)

from graphstore import GraphStore, InvalidInputError, Node, StorageError, TraversalStats
from graphstore.adapter import GraphStoreAdapter, link_edges
from graphstore.embedded import EmbeddedStorage
from graphstore.langchain import SEARCH_TYPES, GraphStoreRetriever, GraphStoreVectorStore
from graphstore.strategy import DEFAULT, MAX_K
from graphstore.testing.embeddings import KeyedEmbeddings

warnings.filterwarnings("ignore", message=".*GraphVectorStore.*deprecated.*")
ROOT = Path(__file__).resolve().parents[1]


class CallableEmbeddings(Embeddings):
    """LangChain `Embeddings` around a text -> vector function."""

    def __init__(self, function):
        self.function = function

    def embed_documents(self, texts):
        return [self.function(text) for text in texts]

    def embed_query(self, text):
        return self.function(text)


class LoopBoundEmbeddings(DeterministicFakeEmbedding):
    """Embeddings whose async calls, like OpenAI's and Ollama's async client, work only on
    the event loop that first made one."""

    loop: object = None

    async def aembed_documents(self, texts):
        return self._on_first_loop(self.embed_documents(texts))

    async def aembed_query(self, text):
        return self._on_first_loop(self.embed_query(text))

    def _on_first_loop(self, result):
        loop = asyncio.get_running_loop()
        self.loop = self.loop or loop
        if loop is not self.loop:
            raise RuntimeError("the async client is bound to a different event loop")
        return result


class TestVectorStoreConformance(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self, backend):
        return GraphStoreVectorStore(self.get_embeddings(), backend)


class TestRetrieverConformance(RetrieversIntegrationTests):
    @pytest.fixture(autouse=True)
    def _store(self, backend):
        store = GraphStoreVectorStore(DeterministicFakeEmbedding(size=8), backend)
        store.add_texts(
            [f"passage {i} about topic {i % 3}" for i in range(8)],
            [{"links": [LangChainLink.bidir("topic", str(i % 3))]} for i in range(8)],
        )
        self.vectorstore = store

    @property
    def retriever_constructor(self):
        return GraphStoreRetriever

    @property
    def retriever_constructor_params(self):
        return {
            "vectorstore": self.vectorstore,
            "search_type": "mmr_traversal",
            "search_kwargs": {"fetch_k": 4},
        }

    @property
    def retriever_query_example(self):
        return "passage about topic 1"


@pytest.fixture(scope="module")
def animals(module_backend, shared_data):
    """graph_retriever's animals, loaded once per backend: its adapter suite only reads."""
    store = GraphStore(CallableEmbeddings(AnimalEmbeddings()), module_backend)
    vectorstore = GraphStoreVectorStore(store.embeddings, module_backend)
    rows = [json.loads(line) for line in (shared_data / "graph-rag" / "animals.jsonl").open()]
    vectorstore.add_documents(
        [Document(id=r["id"], page_content=r["text"], metadata=r["metadata"]) for r in rows]
    )
    return store


class TestGraphRetrieverAdapter(AdapterComplianceSuite):
    @pytest.fixture
    def adapter(self, animals):
        return GraphStoreAdapter(animals)


@pytest.fixture
def vectorstore(backend):
    return GraphStoreVectorStore(DeterministicFakeEmbedding(size=8), backend)


def test_a_search_of_a_linked_store_does_not_warn_that_langchains_link_is_beta(tmp_path):
    """Every result carries LangChain `Link`s, a class marked beta: a search printed
    `LangChainBetaWarning: The class Link is in beta` about a choice the caller never made.
    Run as a user runs it, with Python's default warning filters (pytest's show them all)."""
    script = (
        "from langchain_core.documents import Document\n"
        "from graphstore.langchain import GraphStoreVectorStore\n"
        "from graphstore.testing.embeddings import KeyedEmbeddings\n"
        "store = GraphStoreVectorStore(KeyedEmbeddings(dimension=4))\n"
        "links = {'links': [{'kind': 'kw', 'direction': 'bidir', 'tag': 't'}]}\n"
        "store.add_documents([Document('alpha', metadata=links, id='a')])\n"
        "print(store.similarity_search('alpha', k=1)[0].metadata['links'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert "Link(kind='kw'" in done.stdout
    assert "beta" not in done.stderr


def test_add_documents_honours_ids_and_round_trips_exactly(vectorstore):
    docs = [
        Document(
            "alpha",
            metadata={
                "n": 1,
                "x": 1.5,
                "tags": ["a", "b"],
                "links": [LangChainLink.bidir("kw", "t")],
            },
        ),
        Document("beta", metadata={"n": 2}),
    ]
    assert vectorstore.add_documents(docs, ids=["a", "b"]) == ["a", "b"]
    got = vectorstore.get_by_ids(["a", "b"])
    assert got == [
        Document(
            id="a",
            page_content="alpha",
            metadata={
                "n": 1,
                "x": 1.5,
                "tags": ["a", "b"],
                "links": [LangChainLink.bidir("kw", "t")],
            },
        ),
        Document(id="b", page_content="beta", metadata={"n": 2}),
    ]
    assert isinstance(got[0].metadata["n"], int)
    assert isinstance(got[0].metadata["links"][0], LangChainLink)
    assert "id" not in docs[1].metadata
    assert docs[1].id is None


async def test_an_empty_id_is_refused_as_add_nodes_refuses_it(vectorstore):
    """`ids=[""]` and `Document(id="")` used to get a random id, so adding the text again
    stored it twice; None still means "make an id"."""
    refusal = re.escape("node id must be a non-empty string, got ''")
    adds = [
        lambda: vectorstore.add_texts(["alpha", "beta"], ids=["a", ""]),
        lambda: vectorstore.add_documents([Document("alpha", id="")]),
        lambda: vectorstore.add_documents([Document("alpha", id="a")], ids=[""]),
        lambda: vectorstore.add_nodes([LangChainNode(id="", text="alpha")]),
    ]
    for add in adds:
        with pytest.raises(InvalidInputError, match=f"^{refusal}$"):
            add()
    with pytest.raises(InvalidInputError, match=f"^{refusal}$"):
        await vectorstore.aadd_texts(["alpha"], ids=[""])
    with pytest.raises(InvalidInputError, match=f"^{refusal}$"):
        await vectorstore.aadd_documents([Document("alpha", id="")])
    assert await vectorstore.store.anode_ids() == []
    made = vectorstore.add_texts(["alpha"], ids=[None]) + vectorstore.add_texts(["alpha"])
    assert len(set(made)) == 2
    assert sorted(await vectorstore.store.anode_ids()) == sorted(made)


def test_delete_without_ids_is_refused_rather_than_reported_done(vectorstore):
    """`delete()` used to return True and delete nothing; LangChain stores differ on
    whether no ids means everything, so none is refused."""
    vectorstore.add_documents([Document("alpha"), Document("beta")], ids=["a", "b"])
    with pytest.raises(InvalidInputError, match="delete needs the ids"):
        vectorstore.delete()
    with pytest.raises(InvalidInputError, match="unknown delete option 'where'"):
        vectorstore.delete(["a"], where={"n": 1})
    assert vectorstore.delete(["a"]) is True
    assert [doc.id for doc in vectorstore.get_by_ids(["a", "b"])] == ["b"]


def test_max_marginal_relevance_search_honours_filter(vectorstore):
    vectorstore.add_texts(
        ["foo", "foo bar", "bar"],
        [{"lang": "en"}, {"lang": "fr"}, {"lang": "en"}],
        ids=["1", "2", "3"],
    )
    docs = vectorstore.max_marginal_relevance_search("foo", k=3, fetch_k=3, filter={"lang": "en"})
    assert sorted(doc.id for doc in docs) == ["1", "3"]


@pytest.mark.parametrize(
    "search_type", ["similarity", "similarity_score_threshold", "mmr", "traversal", "mmr_traversal"]
)
async def test_retriever_supports_all_five_search_types(vectorstore, search_type):
    vectorstore.add_texts(
        ["root text", "linked text", "other text"],
        [
            {"links": [LangChainLink.outgoing("kw", "t")]},
            {"links": [LangChainLink.incoming("kw", "t")]},
            {},
        ],
        ids=["root", "linked", "other"],
    )
    kwargs = {"score_threshold": 0.0} if search_type == "similarity_score_threshold" else {}
    retriever = vectorstore.as_retriever(search_type=search_type, search_kwargs={"k": 2, **kwargs})
    docs = retriever.invoke("root text")
    assert docs[0].id == "root"
    assert len(docs) <= 3
    assert [d.id for d in await retriever.ainvoke("root text")] == [d.id for d in docs]


def test_traversal_documents_say_how_they_were_reached(vectorstore):
    vectorstore.add_texts(
        ["root text", "linked text"],
        [
            {"links": [LangChainLink.outgoing("kw", "t")]},
            {"links": [LangChainLink.incoming("kw", "t")]},
        ],
        ids=["root", "linked"],
    )
    docs = list(vectorstore.mmr_traversal_search("root text", k=2, fetch_k=1))
    assert [(d.id, d.metadata["depth"], d.metadata["via"]) for d in docs] == [
        ("root", 0, None),
        ("linked", 1, ("kw", "t")),
    ]
    assert {"similarity_score", "mmr_score"} <= docs[1].metadata.keys()


async def test_sync_api_inside_a_running_loop(vectorstore):
    vectorstore.add_texts(["a", "b"], ids=["1", "2"])
    assert len(vectorstore.similarity_search("a", k=2)) == 2
    assert len(list(vectorstore.traversal_search("a", k=1))) == 1


def test_sync_calls_use_the_models_sync_methods_leaving_its_async_client_to_async_code(backend):
    vectorstore = GraphStoreVectorStore(LoopBoundEmbeddings(size=8), backend)
    vectorstore.add_texts(["a", "b"], ids=["1", "2"])
    assert [doc.id for doc in vectorstore.similarity_search("b", k=1)] == ["2"]
    assert len(vectorstore.store.search("a", k=2)) == 2
    found = asyncio.run(vectorstore.asimilarity_search("a", k=1))
    assert [doc.id for doc in found] == ["1"]


async def test_sync_calls_inside_a_running_loop_leave_the_models_async_client_alone(backend):
    vectorstore = GraphStoreVectorStore(LoopBoundEmbeddings(size=8), backend)
    vectorstore.add_texts(["a", "b"], ids=["1", "2"])
    assert [doc.id for doc in vectorstore.similarity_search("a", k=1)] == ["1"]
    assert [doc.id for doc in vectorstore.similarity_search("b", k=1)] == ["2"]
    assert [doc.id for doc in await vectorstore.asimilarity_search("a", k=1)] == ["1"]


def test_link_extractor_transformer_output_loads_unchanged(vectorstore):
    from langchain_community.graph_vectorstores.extractors import (
        HtmlInput,
        HtmlLinkExtractor,
        LinkExtractorAdapter,
        LinkExtractorTransformer,
    )

    pages = [
        Document(
            "<p>see <a href='b.html'>b</a></p>", id="a", metadata={"url": "https://x.org/a.html"}
        ),
        Document("<p>page b</p>", id="b", metadata={"url": "https://x.org/b.html"}),
    ]
    extractor = LinkExtractorAdapter(
        HtmlLinkExtractor(), lambda d: HtmlInput(d.page_content, d.metadata["url"])
    )
    linked = LinkExtractorTransformer([extractor]).transform_documents(pages)
    vectorstore.add_documents(linked, ids=["a", "b"])  # the transformer drops Document.id
    docs = list(vectorstore.traversal_search("<p>see <a href='b.html'>b</a></p>", k=2, depth=1))
    assert [d.id for d in docs] == ["a", "b"]
    assert docs[1].metadata["via"] == ("hyperlink", "https://x.org/b.html")
    assert [d.id for d in vectorstore.as_retriever(k=2).invoke("see b")] == ["a", "b"]


def test_provenance_never_overwrites_a_documents_own_metadata(vectorstore):
    own: dict[str, object] = {
        "depth": "deep",
        "via": "the pass",
        "similarity_score": 5,
        "mmr_score": 1,
        "path": "x",
    }
    vectorstore.add_documents(
        [
            Document(
                "alpha",
                metadata=own | {"links": [LangChainLink(kind="kw", direction="out", tag="t")]},
            ),
            Document(
                "beta", metadata={"links": [LangChainLink(kind="kw", direction="in", tag="t")]}
            ),
        ],
        ids=["a", "b"],
    )
    for search_type in ("graph", "traversal", "mmr_traversal"):
        docs = vectorstore.search("alpha", search_type, k=2)
        assert [d.id for d in docs] == ["a", "b"], search_type
        assert {key: docs[0].metadata[key] for key in own} == own, search_type
        assert "score" in docs[0].metadata
    reached = vectorstore.search("alpha", "traversal", k=2, start_k=1)[1]
    assert (reached.metadata["depth"], reached.metadata["via"]) == (1, ("kw", "t"))


def test_a_retriever_is_tagged_with_the_store_and_the_embeddings_for_tracing(vectorstore):
    """`as_retriever` left LangChain's default tags out (None): traces did not name the
    store and the model, as LangChain's own retrievers' do."""
    assert vectorstore.as_retriever().tags == [
        "GraphStoreVectorStore",
        "DeterministicFakeEmbedding",
    ]
    assert vectorstore.as_retriever(tags=["mine"]).tags == [
        "mine",
        "GraphStoreVectorStore",
        "DeterministicFakeEmbedding",
    ]


async def test_an_unknown_search_type_is_refused_naming_every_type(vectorstore):
    """LangChain's own error listed three types, leaving out `graph` (the default) and the
    traversals."""
    message = (
        "unknown search_type 'bogus'; use one of graph, similarity, "
        "similarity_score_threshold, mmr, traversal, mmr_traversal"
    )
    with pytest.raises(InvalidInputError) as error:
        vectorstore.search("alpha", "bogus")
    assert str(error.value) == message
    with pytest.raises(InvalidInputError) as error:
        await vectorstore.asearch("alpha", "bogus")
    assert str(error.value) == message


async def test_mmr_search_by_vector_matches_the_search_by_text(vectorstore):
    vectorstore.add_texts(["alpha", "beta", "gamma"], ids=["a", "b", "c"])
    vector = vectorstore.embeddings.embed_query("alpha")
    by_text = vectorstore.max_marginal_relevance_search("alpha", k=2, fetch_k=3)
    by_vector = vectorstore.max_marginal_relevance_search_by_vector(vector, k=2, fetch_k=3)
    assert [d.id for d in by_vector] == [d.id for d in by_text]
    assert [
        d.id
        for d in await vectorstore.amax_marginal_relevance_search_by_vector(vector, k=2, fetch_k=3)
    ] == [d.id for d in by_text]


def test_a_single_string_id_is_refused_not_read_as_its_characters(vectorstore):
    """`get_by_ids("abc")` used to look up "a", "b" and "c" and return the document "a"."""
    vectorstore.add_texts(["one", "two"], ids=["a", "abc"])
    adapter = GraphStoreAdapter(vectorstore.store)
    for lookup in (vectorstore.get_by_ids, adapter.get):
        with pytest.raises(InvalidInputError, match=r"^ids must be a list of strings, not str$"):
            lookup("abc")
    assert [d.id for d in vectorstore.get_by_ids(["abc", "abc"])] == ["abc"]
    assert [c.id for c in adapter.get(["abc"])] == ["abc"]


def test_writes_of_the_wrong_kind_of_thing_are_refused_in_one_line(vectorstore):
    """Strings given to `add_documents` (which takes Documents) were an `AttributeError`
    from inside the conversion, a non-list a bare `TypeError`, and an empty text among
    `add_texts` was named by the id made up for it; nothing is written either way."""
    vectorstore.add_texts(["kept"], ids=["kept"])
    embedding = vectorstore.embeddings
    refused = [
        (
            lambda: vectorstore.add_documents(["Dogs bark."]),
            "documents[0] must be a Document, not str",
        ),
        (
            lambda: vectorstore.add_documents([None]),
            "documents[0] must be a Document, not NoneType",
        ),
        (lambda: vectorstore.add_documents(5), "documents must be a list of Documents, not int"),
        (lambda: vectorstore.add_texts(None), "texts must be a list of strings, not NoneType"),
        (lambda: vectorstore.add_texts(["ok", " "]), "texts[1] is empty"),
        (lambda: vectorstore.add_texts(["a"], metadatas=3), "metadatas must be a list of dicts"),
        (lambda: vectorstore.add_nodes(["x"]), "nodes[0] must be a LangChain graph Node, not str"),
        (
            lambda: GraphStoreVectorStore.from_documents(["x"], embedding),
            "documents[0] must be a Document, not str",
        ),
        (  # named neither the document nor its key: "a link must be a Link, not str"
            lambda: vectorstore.add_documents(
                [
                    Document("Cats purr.", id="cats"),
                    Document("Dogs bark.", id="dogs", metadata={"links": ["https://dogs.org"]}),
                ]
            ),
            "document 'dogs': metadata['links']: a link must be a Link or a "
            "{kind, direction, tag} dict, not str 'https://dogs.org'",
        ),
        (  # not by the id made up for it, which the user never saw
            lambda: vectorstore.add_documents([Document("Owls.", metadata={"links": [3]})]),
            "a document without an id: metadata['links']: a link must be",
        ),
    ]
    for write, message in refused:
        with pytest.raises(InvalidInputError, match=f"^{re.escape(message)}"):
            write()
    assert vectorstore.store.stats().nodes == 1


def test_a_score_threshold_search_needs_a_threshold_between_0_and_1(vectorstore):
    """Without one the store's `search` returned every passage, and NaN none (LangChain's
    own range check misses it); the retriever refused a missing or out-of-range one in a
    multi-line validation error.  All are one line now, on every path."""
    vectorstore.add_texts(["cats purr", "dogs bark"], ids=["c", "d"])
    needs = "similarity_score_threshold needs a score_threshold between 0 and 1"
    for threshold, message in [
        (None, needs),
        (math.nan, "got nan"),
        (2, "got 2.0"),
        ("x", "number"),
    ]:
        options = {} if threshold is None else {"score_threshold": threshold}
        with pytest.raises(InvalidInputError, match=re.escape(message)):
            vectorstore.search("cats", "similarity_score_threshold", **options)
        with pytest.raises(InvalidInputError, match=re.escape(message)):
            vectorstore.as_retriever(
                search_type="similarity_score_threshold", search_kwargs=options
            )
    with pytest.raises(InvalidInputError, match=r"^search options must be a dict, not NoneType$"):
        vectorstore.as_retriever(search_kwargs=None)
    found = vectorstore.search("cats purr", "similarity_score_threshold", score_threshold=0.0)
    assert {document.id for document in found} == {"c", "d"}


def test_a_passages_relevance_to_its_own_text_stays_within_0_and_1(backend):
    """float32 rounding makes the cosine of some vectors with themselves 1.0000001 (here
    "text 8" among these 32 on the embedded backend), and LangChain warned that the
    relevance score (cos + 1) / 2 was above 1."""
    store = GraphStoreVectorStore(KeyedEmbeddings(dimension=384), backend)
    texts = [f"text {number}" for number in range(32)]
    store.add_texts(texts, ids=texts)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for text in texts:
            ((document, relevance),) = store.similarity_search_with_relevance_scores(text, k=1)
            assert document.id == text
            assert 1.0 - 1e-6 < relevance <= 1.0


def test_a_nodes_own_links_metadata_is_not_hidden_by_its_link_tags(vectorstore):
    """A node added from Python with metadata `links` (its URLs) and link tags used to show
    the tags in place of the URLs through LangChain."""
    from graphstore import Link, Node

    urls = ["https://docs.python.org/3/tutorial/classes.html"]
    vectorstore.store.add_nodes(
        [
            Node("page", "generators", {"links": urls}, frozenset({Link.bidir("topic", "gen")})),
            Node("other", "iterators", {}, frozenset({Link.bidir("topic", "gen")})),
        ]
    )
    page, other = vectorstore.get_by_ids(["page", "other"])
    assert page.metadata == {"links": urls}
    assert other.metadata["links"] == [LangChainLink(kind="topic", direction="bidir", tag="gen")]


async def test_an_option_a_search_does_not_take_is_refused_not_ignored(vectorstore):
    """`score_threshold` on `similarity` or `mmr`, `depth` on `mmr`, or a misspelt option
    used to be dropped: the search returned what it would without it, unfiltered."""
    vectorstore.add_texts(["alpha", "beta", "gamma"], ids=["a", "b", "c"])
    vector = vectorstore.embeddings.embed_query("alpha")
    refused = [
        (lambda: vectorstore.similarity_search("alpha", score_threshold=0.9), "score_threshold"),
        (lambda: vectorstore.similarity_search_with_score("alpha", bogus=1), "bogus"),
        (lambda: vectorstore.similarity_search_by_vector(vector, depth=2), "depth"),
        (lambda: vectorstore.max_marginal_relevance_search("alpha", depth=2), "depth"),
        (
            lambda: vectorstore.max_marginal_relevance_search_by_vector(vector, lamda_mult=1),
            "lamda_mult",
        ),
        (
            lambda: vectorstore.as_retriever(
                search_type="similarity", search_kwargs={"score_threshold": 0.9}
            ).invoke("alpha"),
            "score_threshold",
        ),
        (
            lambda: vectorstore.as_retriever(
                search_type="mmr", search_kwargs={"lamda_mult": 0.2}
            ).invoke("alpha"),
            "lamda_mult",
        ),
    ]
    for search, option in refused:
        with pytest.raises(InvalidInputError, match=rf"^unknown search option '{option}'; known: "):
            search()
    with pytest.raises(InvalidInputError, match=r"^unknown search option 'bogus'"):
        await vectorstore.asimilarity_search("alpha", bogus=1)
    with pytest.raises(InvalidInputError, match=r"^unknown retriever setting 'search_kwrgs'"):
        vectorstore.as_retriever(search_kwrgs={"k": 1})
    with pytest.raises(InvalidInputError, match=r"^unknown search_type 'bogus'"):
        vectorstore.as_retriever(search_type="bogus")
    with pytest.raises(ValueError, match="search_kwrgs"):  # pydantic's error, built directly
        GraphStoreRetriever(vectorstore=vectorstore, search_kwrgs={"k": 1})
    kept = vectorstore.as_retriever(
        search_type="similarity_score_threshold", search_kwargs={"score_threshold": 0.99}
    )
    assert [d.id for d in kept.invoke("alpha")] == ["a"]


@pytest.mark.parametrize("search_type", SEARCH_TYPES)
def test_a_retriever_refuses_an_option_its_search_does_not_take_when_it_is_made(
    vectorstore, search_type
):
    """A misspelt search option was refused only at the retriever's first question: a
    retriever built at start-up failed later, in the middle of a chain."""
    needed = {"score_threshold": 0.5} if search_type == "similarity_score_threshold" else {}
    with pytest.raises(InvalidInputError, match=r"^unknown search option 'kk'; known: .*\bk\b"):
        vectorstore.as_retriever(search_type=search_type, search_kwargs={"kk": 2, **needed})
    with pytest.raises(InvalidInputError, match=r"^unknown search option 'kk'; known: "):
        vectorstore.search("alpha", search_type, kk=2, **needed)


@pytest.mark.parametrize(
    ("search_type", "options", "message"),
    [
        ("graph", {"lambda_mult": 2}, "lambda_mult must be between 0 and 1, got 2.0"),
        ("mmr_traversal", {"depth": -1}, "depth must be between 0 and 10, got -1"),
        ("traversal", {"adjacent_k": 0}, "adjacent_k must be between 1 and 1000, got 0"),
        ("mmr", {"fetch_k": "20"}, "fetch_k must be an integer, not str"),
        ("similarity", {"k": 0}, "k must be between 1 and 1000, got 0"),
        ("similarity", {"filter": 3}, "filter must be a dict, not int"),
    ],
)
def test_a_retriever_refuses_an_option_value_its_search_cannot_run_with_when_it_is_made(
    vectorstore, search_type, options, message
):
    """Such a value was refused only at the retriever's first question."""
    with pytest.raises(InvalidInputError) as error:
        vectorstore.as_retriever(search_type=search_type, search_kwargs=options)
    assert str(error.value) == message


def test_a_retriever_refuses_k_given_twice_with_two_values(vectorstore):
    """`as_retriever(k=1, search_kwargs={"k": 3})` returned one document, without a word."""
    with pytest.raises(InvalidInputError) as error:
        vectorstore.as_retriever(k=1, search_kwargs={"k": 3})
    assert str(error.value) == "k is given twice, as k=1 and search_kwargs['k']=3: give one"
    with pytest.raises(InvalidInputError, match=r"^k must be between 1 and 1000, got 0$"):
        vectorstore.as_retriever(k=0)
    vectorstore.add_texts(["alpha", "beta", "gamma"], ids=["a", "b", "c"])
    assert len(vectorstore.as_retriever(k=2, search_kwargs={"k": 2}).invoke("alpha")) == 2


async def test_a_batch_size_that_is_no_positive_integer_is_refused_writing_nothing(vectorstore):
    """`batch_size` (passed by LangChain's `index()`) has no effect, but one of 0, -5 or
    "abc" was accepted without a word."""
    for bad, message in [
        (0, "batch_size must be between 1 and 1000000000, got 0"),
        (-5, "batch_size must be between 1 and 1000000000, got -5"),
        ("abc", "batch_size must be an integer, not str"),
    ]:
        with pytest.raises(InvalidInputError) as error:
            vectorstore.add_texts(["alpha"], ids=["a"], batch_size=bad)
        assert str(error.value) == message
        with pytest.raises(InvalidInputError) as error:
            vectorstore.add_documents([Document("alpha", id="a")], batch_size=bad)
        assert str(error.value) == message
        with pytest.raises(InvalidInputError):
            await vectorstore.aadd_texts(["alpha"], ids=["a"], batch_size=bad)
    assert vectorstore.store.stats().nodes == 0
    assert vectorstore.add_texts(["alpha"], ids=["a"], batch_size=100) == ["a"]


def test_texts_ids_and_metadatas_of_the_wrong_type_are_refused_writing_nothing(vectorstore):
    """A single string of ids or texts was split into characters (`ids="ab"` named two
    documents "a" and "b", `add_texts("hello")` added five); a None text or metadata raised pydantic's multi-line validation error."""
    cases = [
        (
            lambda: vectorstore.add_texts(["one", "two"], ids="ab"),
            "ids must be a list of strings, not str",
        ),
        (
            lambda: vectorstore.add_documents([Document("x")], ids="k"),
            "ids must be a list of strings, not str",
        ),
        (lambda: vectorstore.add_texts("hello"), "texts must be a list of strings, not str"),
        (lambda: vectorstore.add_texts(["one", None]), "texts[1] must be a string, not NoneType"),
        (
            lambda: vectorstore.add_texts(["one"], [None]),
            "metadatas[0] must be a dict, not NoneType",
        ),
    ]
    for add, message in cases:
        with pytest.raises(InvalidInputError) as error:
            add()
        assert str(error.value) == message
    assert vectorstore.get_by_ids(["a", "b", "k", "ab"]) == []
    assert vectorstore.store.stats().nodes == 0
    vectorstore.add_texts(["m"], [MappingProxyType({"a": 1})], ids=["m"])  # any mapping
    assert vectorstore.get_by_ids(["m"])[0].metadata == {"a": 1}


def mentioning(vectorstore):
    """Two documents linked by an id edge (`mentions` -> `$id`), one mention unresolved."""
    vectorstore.add_documents(
        [
            Document("alpha", id="a", metadata={"mentions": ["b", ""]}),
            Document("beta", id="b", metadata={"mentions": []}),
        ]
    )
    return GraphStoreAdapter(vectorstore.store)


async def test_the_adapter_finds_no_empty_id_rather_than_refusing_it(vectorstore):
    """An id edge holding "" aborted the whole traversal: the adapter's `get` refused the
    id, where graph_retriever asks it to skip ids it cannot find."""
    adapter = mentioning(vectorstore)
    walk = {"edges": [("mentions", "$id")], "strategy": Eager(select_k=5, start_k=1)}
    assert [n.id for n in traverse("alpha", store=adapter, **walk)] == ["a", "b"]
    assert [n.id for n in await atraverse("alpha", store=adapter, **walk)] == ["a", "b"]
    assert [c.id for c in adapter.get(["a", "", "a"])] == ["a"]
    assert [c.id for c in await adapter.aget(["", "b"])] == ["b"]
    assert adapter.get([""]) == []
    with pytest.raises(InvalidInputError, match=r"^ids must be non-empty strings, got None$"):
        adapter.get(["a", None])


async def test_graph_retriever_follows_the_stores_own_link_tags(vectorstore):
    """A store's link tags are not metadata, so graph_retriever's edges (metadata fields)
    found none: over a store ingested with `--links titles` every edge spec returned the
    roots alone.  Each content now shows its tags as `out:<kind>` / `in:<kind>` fields, and
    an edge into an `in:` field reads the tag's rows, within the base filter."""
    vectorstore.add_documents(
        [
            Document("alpha", id="a", metadata={"links": [LangChainLink.outgoing("mention", "b")]}),
            Document(
                "beta",
                id="b",
                metadata={
                    "links": [
                        LangChainLink.incoming("mention", "b"),
                        LangChainLink.bidir("kw", "greek"),
                    ]
                },
            ),
            Document(
                "gamma",
                id="c",
                metadata={"links": [LangChainLink.bidir("kw", "greek")], "in:kw": "own value"},
            ),
            Document(
                "delta",
                id="d",
                metadata={"side": "x", "links": [LangChainLink.incoming("mention", "b")]},
            ),
        ]
    )
    adapter = GraphStoreAdapter(vectorstore.store)
    mentions = {"edges": link_edges("mention"), "strategy": Eager(select_k=5, start_k=1)}
    assert {n.id: n.depth for n in traverse("alpha", store=adapter, **mentions)} == {
        "a": 0,
        "b": 1,
        "d": 1,
    }
    assert {n.id for n in await atraverse("alpha", store=adapter, **mentions)} == {"a", "b", "d"}
    keywords = {"edges": link_edges("kw"), "strategy": Eager(select_k=5, start_k=1)}
    assert {n.id for n in traverse("beta", store=adapter, **keywords)} == {"b", "c"}
    beta, gamma = adapter.get(["b", "c"])
    assert {key: beta.metadata[key] for key in ("in:kw", "in:mention", "out:kw")} == {
        "in:kw": ["greek"],
        "in:mention": ["b"],
        "out:kw": ["greek"],
    }
    assert (gamma.metadata["in:kw"], gamma.metadata["out:kw"]) == ("own value", ["greek"])
    vector = vectorstore.embeddings.embed_query("alpha")
    into_b = {MetadataEdge("in:mention", "b")}
    assert [c.id for c in adapter.adjacent(into_b, vector, k=5, filter={"side": "x"})] == ["d"]
    assert [c.id for c in await adapter.aadjacent(into_b, vector, k=1, filter=None)] in (
        ["b"],
        ["d"],
    )
    assert adapter.adjacent({MetadataEdge("in:mention", 5)}, vector, k=5, filter=None) == []


async def test_the_langchain_store_closes_its_storage_as_a_context_manager(open_backend):
    """The LangChain store had no `close`: a Cassandra store's driver cluster (and its
    threads) stayed open unless the caller found `.store.close()`."""
    open_backend()  # the first storage opened stays open: the fixture drops the store with it
    with GraphStoreVectorStore(DeterministicFakeEmbedding(size=8), open_backend()) as synced:
        synced.add_texts(["alpha"], ids=["a"])
    with pytest.raises(StorageError):
        synced.similarity_search("alpha", k=1)
    async with GraphStoreVectorStore(DeterministicFakeEmbedding(size=8)) as opened:
        await opened.aadd_texts(["alpha"], ids=["a"])
    with pytest.raises(StorageError):
        await opened.asimilarity_search("alpha", k=1)
    with GraphStore(DeterministicFakeEmbedding(size=8), EmbeddedStorage(":memory:")) as plain:
        plain.add_nodes([Node("a", "alpha")])
    with pytest.raises(StorageError):
        plain.similarity_search("alpha", k=1)
    async with GraphStore(DeterministicFakeEmbedding(size=8), EmbeddedStorage(":memory:")) as a:
        await a.aadd_nodes([Node("a", "alpha")])
    with pytest.raises(StorageError):
        await a.asimilarity_search("alpha", k=1)


def test_a_graph_retriever_over_a_store_without_a_model_says_how_to_give_it_one(backend):
    """The store's error said "pass vectors instead", which graph_retriever cannot do."""
    adapter = GraphStoreAdapter(GraphStore(None, backend))
    with pytest.raises(InvalidInputError, match=r"^this store has no embedding model: open "):
        traverse("alpha", store=adapter, edges=[("g", "g")], strategy=Eager(select_k=2))


def test_an_adapter_edge_value_is_a_value_and_stays_within_the_base_filter(vectorstore):
    """An edge value that is a dict with `$` keys was read as operators (`{"$gt": 0}`
    reached a node whose `ref` is 5), and a base filter on the edge's own field replaced
    the edge (graph_retriever merges the two into one dict)."""
    vectorstore.add_texts(
        ["five", "dict"], [{"ref": 5, "h": "x"}, {"ref": {"$gt": 0}, "h": "y"}], ids=["a", "b"]
    )
    adapter = GraphStoreAdapter(vectorstore.store)
    vector = vectorstore.embeddings.embed_query("five")
    operand = adapter.adjacent([MetadataEdge("ref", {"$gt": 0})], vector, k=5, filter=None)
    assert [c.id for c in operand] == ["b"]
    assert adapter.adjacent([MetadataEdge("h", "x")], vector, k=5, filter={"h": "y"}) == []


async def test_a_graph_retriever_k_above_the_store_maximum_gets_what_exists(vectorstore):
    """`start_k` or `adjacent_k` above 1000 was refused as `k must be between 1 and 1000`,
    naming an argument the user never set; one store search returns at most `MAX_K`."""
    vectorstore.add_texts(
        [f"passage {i}" for i in range(MAX_K + 1)], [{"g": i % 2} for i in range(MAX_K + 1)]
    )
    adapter = GraphStoreAdapter(vectorstore.store)
    for strategy in (Eager(select_k=4, start_k=1500), Eager(select_k=4, adjacent_k=2000)):
        assert len(traverse("passage 1", edges=[("g", "g")], strategy=strategy, store=adapter)) == 4
    vector = vectorstore.embeddings.embed_query("passage 1")
    assert len(adapter.search(vector, k=1500)) == MAX_K
    assert adapter.search(vector, k=0) == []
    with pytest.raises(InvalidInputError, match=r"^k must be 0 or more, got -1$"):
        adapter.search(vector, k=-1)
    with pytest.raises(InvalidInputError, match=r"^k must be 0 or more, got -1$"):
        await adapter.aadjacent({MetadataEdge("g", 1)}, vector, k=-1, filter=None)
    assert len(await adapter.asearch(vector, k=1500, filter={"g": 0})) == 501  # every even one


async def test_an_option_the_adapter_does_not_take_is_refused_not_ignored(vectorstore):
    """graph_retriever's `store_kwargs` reach every adapter call, and were dropped."""
    adapter = mentioning(vectorstore)
    vector = vectorstore.embeddings.embed_query("alpha")
    edges = {IdEdge("b"), MetadataEdge("mentions", "b")}
    refused = r"^unknown store option 'bogus'; known: none$"
    with pytest.raises(InvalidInputError, match=refused):
        traverse(
            "alpha",
            edges=[("mentions", "$id")],
            strategy=Eager(),
            store=adapter,
            store_kwargs={"bogus": 1},
        )
    arguments = {
        "search_with_embedding": ("alpha",),
        "search": (vector,),
        "get": (["a"],),
        "adjacent": (edges, vector, 2, None),
    }
    for name, args in arguments.items():
        with pytest.raises(InvalidInputError, match=refused):
            getattr(adapter, name)(*args, bogus=1)
        with pytest.raises(InvalidInputError, match=refused):
            await getattr(adapter, f"a{name}")(*args, bogus=1)
    assert sorted(c.id for c in adapter.adjacent(edges, vector, 2, None)) == ["a", "b"]


async def test_langchain_indexing_writes_through_the_store(vectorstore):
    """`index()` passes `batch_size` to `add_documents`, which the option check refused."""
    from langchain_core.indexing import InMemoryRecordManager, aindex, index

    manager = InMemoryRecordManager("ns")
    manager.create_schema()
    docs = [Document("alpha", metadata={"source": "a"}), Document("beta", metadata={"source": "b"})]
    options = {"cleanup": "full", "source_id_key": "source"}
    assert index(docs, manager, vectorstore, **options)["num_added"] == 2
    assert (await aindex(docs, manager, vectorstore, **options))["num_skipped"] == 2
    assert sorted(d.page_content for d in vectorstore.similarity_search("alpha", k=5)) == [
        "alpha",
        "beta",
    ]


async def test_an_option_a_write_does_not_take_is_refused_writing_nothing(vectorstore, backend):
    """Every write and constructor read `ids` (and `storage`) and silently dropped anything
    else, a typo included, where the searches and `delete` refuse it."""
    embedding = vectorstore.embeddings
    docs = [Document("alpha", id="a")]
    refused = [
        (lambda: vectorstore.add_documents(docs, bogus=1), "add_documents", "batch_size, ids"),
        (
            lambda: vectorstore.add_texts(["alpha"], ids=["a"], bogus=1),
            "add_texts",
            "batch_size, ids, metadatas",
        ),
        (
            lambda: vectorstore.add_nodes([LangChainNode(text="alpha")], bogus=1),
            "add_nodes",
            "none",
        ),
        (lambda: vectorstore.delete(["a"], bogus=1), "delete", "none"),
        (
            lambda: GraphStoreVectorStore.from_texts(
                ["alpha"], embedding, storage=backend, bogus=1
            ),
            "from_texts",
            "ids, metadatas, storage",
        ),
        (
            lambda: GraphStoreVectorStore.from_documents(docs, embedding, storage=backend, bogus=1),
            "from_documents",
            "ids, storage",
        ),
    ]
    for call, method, known in refused:
        with pytest.raises(InvalidInputError) as error:
            call()
        assert str(error.value) == f"unknown {method} option 'bogus'; known: {known}"
    async_refused = [
        lambda: vectorstore.aadd_documents(docs, bogus=1),
        lambda: vectorstore.aadd_texts(["alpha"], bogus=1),
        lambda: anext(vectorstore.aadd_nodes([LangChainNode(text="alpha")], bogus=1)),
        lambda: GraphStoreVectorStore.afrom_texts(["alpha"], embedding, storage=backend, bogus=1),
        lambda: GraphStoreVectorStore.afrom_documents(docs, embedding, storage=backend, bogus=1),
    ]
    for acall in async_refused:
        with pytest.raises(InvalidInputError, match=r"^unknown \w+ option 'bogus'; known: "):
            await acall()
    assert vectorstore.store.stats().nodes == 0


async def test_the_constructors_keep_the_ids_langchain_passes(backend):
    """LangChain's own `afrom_documents` passed each `Document.id` as `ids=`; ours names
    the documents by them too, and every constructor still takes `ids` and `storage`."""
    embedding = DeterministicFakeEmbedding(size=8)
    docs = [Document("alpha", id="a"), Document("beta", id="b")]
    built = await GraphStoreVectorStore.afrom_documents(docs, embedding, storage=backend)
    assert [d.id for d in built.get_by_ids(["a", "b"])] == ["a", "b"]
    again = await GraphStoreVectorStore.afrom_texts(
        ["gamma"], embedding, [{"n": 1}], ids=["c"], storage=backend
    )
    assert again.get_by_ids(["c"]) == [Document(id="c", page_content="gamma", metadata={"n": 1})]
    assert sorted(await again.store.anode_ids()) == ["a", "b", "c"]


def test_the_adapter_refuses_anything_but_a_graph_store_at_once(vectorstore):
    """The LangChain store (an easy slip for its `.store`) or None used to be accepted and
    fail at query time with an AttributeError from inside the traversal."""
    with pytest.raises(InvalidInputError) as error:
        GraphStoreAdapter(vectorstore)
    assert str(error.value) == (
        "store must be a GraphStore, not GraphStoreVectorStore (pass its .store)"
    )
    with pytest.raises(InvalidInputError, match=r"^store must be a GraphStore, not NoneType$"):
        GraphStoreAdapter(None)
    assert GraphStoreAdapter(vectorstore.store).store is vectorstore.store


SETTINGS = (
    "adjacent_k, damping, depth, expand_k, fetch_k, filter, {}k, lambda_mult, "
    "max_candidates_per_step, score_threshold, stats, structural_kinds"
)


async def test_an_unknown_graph_search_option_names_every_option_the_search_takes(vectorstore):
    """The list named only the `Strategy` settings, leaving out `filter` and `stats` (and
    `initial_roots` of `mmr_traversal`), which the same call takes."""
    vectorstore.add_texts(
        ["alpha", "beta"],
        [
            {"x": 1, "links": [LangChainLink.outgoing("kw", "t")]},
            {"x": 1, "links": [LangChainLink.incoming("kw", "t")]},
        ],
        ids=["a", "b"],
    )
    searches = [
        (vectorstore.graph_search, SETTINGS.format("")),
        (vectorstore.store.search, SETTINGS.format("")),
        (vectorstore.mmr_traversal_search, SETTINGS.format("initial_roots, ")),
        (vectorstore.store.mmr_traversal_search, SETTINGS.format("initial_roots, ")),
    ]
    for search, known in searches:
        with pytest.raises(InvalidInputError) as error:
            search("alpha", fliter={"x": 1})
        assert str(error.value) == f"unknown search option 'fliter'; known: {known}"
    options = {"filter": {"x": 1}, "stats": TraversalStats()}
    assert [d.id for d in vectorstore.graph_search("alpha", k=1, **options)] == ["a"]
    roots = {"initial_roots": ["a"], "fetch_k": 0}  # reached from the roots, not them
    assert [d.id for d in vectorstore.mmr_traversal_search("alpha", **options, **roots)] == ["b"]
    with pytest.raises(InvalidInputError, match=r"^unknown strategy setting 'filter'; known: "):
        DEFAULT.with_options(filter={"x": 1})
