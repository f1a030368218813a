"""The offline models (`graphstore.models`) as LangChain `Embeddings`, for LangChain code.

A store takes a model as it is; LangChain components that check for an `Embeddings` (a
vector store's `embeddings`, a chunker's model) take these.  Kept apart from the models so
that a command line search never imports LangChain.
"""

from __future__ import annotations

from langchain_core.embeddings import Embeddings

from graphstore.models import DEFAULT_MODEL, LocalModel, load_model


class LocalEmbeddings(Embeddings):
    """A `LocalModel` as LangChain `Embeddings`: every call is the model's own (its async
    calls on its own thread), and `model_id` is the model's."""

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
