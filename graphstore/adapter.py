"""An `Adapter` for `graph_retriever`, so `GraphRetriever` (Eager, Mmr, …) runs on graphstore.

`graph_retriever` walks metadata edges (`MetadataEdge("habitat", "habitat")`) by issuing
filtered vector searches; graphstore's filters (`graphstore.filters`: operators, lists,
nested keys and dicts in lists) run natively on either backend through the `Storage`
interface.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from graph_retriever import Content
from graph_retriever.adapters import Adapter
from graph_retriever.edges import Edge, MetadataEdge

from graphstore.errors import InvalidInputError
from graphstore.filters import matches, parse_filter
from graphstore.nodes import StoredNode
from graphstore.store import GraphStore, check_ids, run_sync
from graphstore.strategy import MAX_K, check_options


def to_content(stored: StoredNode) -> Content:
    """A stored node as graph_retriever content.  Its metadata is the node's own: link tags
    are not metadata, so graph_retriever's edges (metadata fields) do not see them."""
    node = stored.node
    return Content(node.id, node.text, stored.embedding.tolist(), dict(node.metadata))


def check_store(store: Any) -> GraphStore:
    """`store` if it is a `GraphStore`, else a one-line error (a wrong object used to fail
    only at query time, with an AttributeError from inside the traversal)."""
    if isinstance(store, GraphStore):
        return store
    hint = " (pass its .store)" if isinstance(getattr(store, "store", None), GraphStore) else ""
    raise InvalidInputError(f"store must be a GraphStore, not {type(store).__name__}{hint}")


def check_store_kwargs(kwargs: Mapping[str, Any]) -> None:
    """graph_retriever's `store_kwargs` reach every call; graphstore takes none, so any is a
    one-line error rather than silently dropped."""
    check_options(kwargs, (), "store option")


def findable_ids(ids: Any) -> list[str]:
    """`ids` once each, checked as `check_ids` does but without the empty id: no node has it,
    an id edge may hold it, and graph_retriever's `get` skips ids it cannot find."""
    if isinstance(ids, Iterable) and not isinstance(ids, str):
        ids = [node_id for node_id in ids if node_id != ""]
    return list(dict.fromkeys(check_ids(ids)))


def store_k(k: int) -> int:
    """`k` capped at `MAX_K`, the most one store search returns: graph_retriever's `start_k`
    and `adjacent_k` have no cap, and its own adapters return what exists."""
    return MAX_K if isinstance(k, int) and k > MAX_K else k


class GraphStoreAdapter(Adapter):
    """graph_retriever's view of a `GraphStore`."""

    def __init__(self, store: GraphStore) -> None:
        super().__init__()
        self.store = check_store(store)

    async def asearch_with_embedding(
        self, query: str, k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> tuple[list[float], list[Content]]:
        """Embed `query` and return it with the `k` most similar contents."""
        check_store_kwargs(kwargs)
        embedding = await self.store.aembed_query(query)
        return embedding, await self.asearch(embedding, k, filter)

    def search_with_embedding(
        self, query: str, k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> tuple[list[float], list[Content]]:
        """Sync twin of `asearch_with_embedding`."""
        return run_sync(self.asearch_with_embedding(query, k, filter, **kwargs))

    async def asearch(
        self,
        embedding: list[float],
        k: int = 4,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Content]:
        """The `k` contents (at most `MAX_K`) nearest to `embedding` that pass `filter`."""
        check_store_kwargs(kwargs)
        if k == 0:
            return []
        found = await self.store.asearch_stored(embedding, k=store_k(k), filter=filter)
        return [to_content(item.stored) for item in found]

    def search(
        self,
        embedding: list[float],
        k: int = 4,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Content]:
        """Sync twin of `asearch`."""
        return run_sync(self.asearch(embedding, k, filter, **kwargs))

    async def aget(
        self, ids: Sequence[str], filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Content]:
        """Contents by id (unknown ids skipped, duplicates once) that pass `filter`."""
        check_store_kwargs(kwargs)
        where = parse_filter(filter)
        found = await self.store.aget_stored(findable_ids(ids))
        return [to_content(s) for s in found if matches(where, s.node.metadata)]

    def get(
        self, ids: Sequence[str], filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Content]:
        """Sync twin of `aget`."""
        return run_sync(self.aget(ids, filter, **kwargs))

    def _metadata_filter(
        self, edge: Edge, base_filter: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The filter for nodes with an incoming `edge`, within `base_filter`.  The edge's
        value is an `$eq` operand, so a dict value whose keys start with `$` is a value and
        not operators; and the base filter is joined by `$and`, since graph_retriever's own
        merge let a base filter on the edge's field replace the edge."""
        if not isinstance(edge, MetadataEdge):
            raise TypeError(f"not a metadata edge: {edge!r}")
        value = dict(edge.value) if isinstance(edge.value, Mapping) else edge.value
        found = {edge.incoming_field: {"$eq": value}}
        return {"$and": [found, base_filter]} if base_filter else found
