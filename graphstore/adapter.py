"""An `Adapter` for `graph_retriever`, so `GraphRetriever` (Eager, Mmr, …) runs on graphstore.

`graph_retriever` walks metadata edges (`MetadataEdge("habitat", "habitat")`) by issuing
filtered vector searches; graphstore's filters (`graphstore.filters`: operators, lists,
nested keys and dicts in lists) run natively on either backend through the `Storage`
interface.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graph_retriever import Content
from graph_retriever.adapters import Adapter

from graphstore.filters import matches, parse_filter
from graphstore.nodes import StoredNode
from graphstore.store import GraphStore, check_ids, run_sync


def to_content(stored: StoredNode) -> Content:
    """A stored node as graph_retriever content.  Its metadata is the node's own: link tags
    are not metadata, so graph_retriever's edges (metadata fields) do not see them."""
    node = stored.node
    return Content(node.id, node.text, stored.embedding.tolist(), dict(node.metadata))


class GraphStoreAdapter(Adapter):
    """graph_retriever's view of a `GraphStore`."""

    def __init__(self, store: GraphStore) -> None:
        super().__init__()
        self.store = store

    async def asearch_with_embedding(
        self, query: str, k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> tuple[list[float], list[Content]]:
        """Embed `query` and return it with the `k` most similar contents."""
        embedding = await self.store.aembed_query(query)
        return embedding, await self.asearch(embedding, k, filter)

    def search_with_embedding(
        self, query: str, k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> tuple[list[float], list[Content]]:
        """Sync twin of `asearch_with_embedding`."""
        return run_sync(self.asearch_with_embedding(query, k, filter))

    async def asearch(
        self,
        embedding: list[float],
        k: int = 4,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Content]:
        """The `k` contents nearest to `embedding` that pass `filter`."""
        if k == 0:
            return []
        found = await self.store.asearch_stored(embedding, k=k, filter=filter)
        return [to_content(item.stored) for item in found]

    def search(
        self,
        embedding: list[float],
        k: int = 4,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Content]:
        """Sync twin of `asearch`."""
        return run_sync(self.asearch(embedding, k, filter))

    async def aget(
        self, ids: Sequence[str], filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Content]:
        """Contents by id (unknown ids skipped, duplicates once) that pass `filter`."""
        where = parse_filter(filter)
        found = await self.store.aget_stored(list(dict.fromkeys(check_ids(ids))))
        return [to_content(s) for s in found if matches(where, s.node.metadata)]

    def get(
        self, ids: Sequence[str], filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Content]:
        """Sync twin of `aget`."""
        return run_sync(self.aget(ids, filter))
