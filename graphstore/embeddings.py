"""The offline models (`graphstore.models`) as LangChain `Embeddings`, for LangChain code.

A store takes a model as it is; LangChain components that check for an `Embeddings` (a
vector store's `embeddings`, a chunker's model) take these.  Kept apart from the models so
that a command line search never imports LangChain.  The names this module held before the
models moved to `graphstore.models` still import from here.
"""

from __future__ import annotations

from pathlib import Path

from langchain_core.embeddings import Embeddings

from graphstore.models import (
    DEFAULT_MODEL,
    BertModel,
    E5Model,
    LocalModel,
    SentenceTransformerModel,
    load_model,
    load_recorded,
    minilm_dir,
    model_id,
    offline_quietly,
    quiet_transformers,
)

__all__ = [
    "DEFAULT_MODEL",
    "BertEmbeddings",
    "E5Embeddings",
    "LocalEmbeddings",
    "SentenceTransformerEmbeddings",
    "load_embeddings",
    "load_recorded",
    "minilm_dir",
    "model_id",
    "offline_quietly",
    "quiet_transformers",
]


class LocalEmbeddings(Embeddings):
    """A `LocalModel` as LangChain `Embeddings`: every call is the model's own (its async
    calls on its own thread), and `model_id` is the model's."""

    own_thread = True
    """The model's calls run on its own thread (`models.LocalModel`)."""

    def __init__(self, model: LocalModel) -> None:
        self.model = model
        self.model_id = model.model_id

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """The model's embeddings of `texts`."""
        return self.model.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        """The model's embedding of a query."""
        return self.model.embed_query(text)

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """`embed_documents` on the model's thread."""
        return await self.model.aembed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        """`embed_query` on the model's thread."""
        return await self.model.aembed_query(text)


def load_embeddings(name: str = DEFAULT_MODEL) -> LocalEmbeddings:
    """An embedding model by name (`minilm`, `e5`) or by local sentence-transformers
    directory, as LangChain `Embeddings` (`graphstore.models.load_model`)."""
    return LocalEmbeddings(load_model(name))


class BertEmbeddings(LocalEmbeddings):
    """`graphstore.models.BertModel` (a BERT folder run in NumPy) as LangChain `Embeddings`."""

    def __init__(self, folder: str | Path, *, model_id: str | None = None) -> None:
        super().__init__(BertModel(folder, model_id=model_id))


class E5Embeddings(LocalEmbeddings):
    """`graphstore.models.E5Model` (multilingual-e5-small) as LangChain `Embeddings`."""

    def __init__(self) -> None:
        super().__init__(E5Model())


class SentenceTransformerEmbeddings(LocalEmbeddings):
    """`graphstore.models.SentenceTransformerModel` as LangChain `Embeddings`."""

    def __init__(
        self, model_dir: str | Path, *, batch_size: int = 64, model_id: str | None = None
    ) -> None:
        super().__init__(
            SentenceTransformerModel(model_dir, batch_size=batch_size, model_id=model_id)
        )
