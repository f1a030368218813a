"""An `Adapter` for `graph_retriever`, so `GraphRetriever` (Eager, Mmr, …) runs on graphstore.

`graph_retriever` walks metadata edges (`MetadataEdge("habitat", "habitat")`) by issuing
filtered vector searches; graphstore's filters (`graphstore.filters`: operators, lists,
nested keys and dicts in lists) run natively on either backend through the `Storage`
interface.  A store's own link tags are edges too: each content shows its tags of a kind
as the fields `out:<kind>` and `in:<kind>` (`link_fields`), and an edge into an `in:`
field is read from the tag's rows, as the store's own traversal reads it (`link_edges`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from graph_retriever import Content
from graph_retriever.adapters import Adapter
from graph_retriever.edges import Edge, MetadataEdge
from graph_retriever.utils.top_k import top_k

from graphstore.errors import InvalidArgumentError, InvalidInputError
from graphstore.filters import matches, parse_filter
from graphstore.links import Link, TagKey
from graphstore.nodes import StoredNode
from graphstore.store import GraphStore, check_ids, run_sync
from graphstore.strategy import MAX_K, check_options

OUT = "out:"
IN = "in:"
"""The prefixes of the fields that show a content's link tags of one kind (`link_fields`)."""


def link_fields(links: Iterable[Link]) -> dict[str, list[str]]:
    """A node's link tags as graph_retriever metadata fields: `out:<kind>` lists the tags of
    `kind` it links out on, `in:<kind>` those it links in on (a `bidir` link is in both).

    graph_retriever's edges are metadata fields, and a store's tags are not metadata: a store
    ingested with `--links titles` showed it no edge at all.  An edge from `out:mention` to
    `in:mention` is the store's own edge, A links out and B links in on the same tag."""
    fields: dict[str, set[str]] = {}
    for link in links:
        if link.direction in ("out", "bidir"):
            fields.setdefault(OUT + link.kind, set()).add(link.tag)
        if link.direction in ("in", "bidir"):
            fields.setdefault(IN + link.kind, set()).add(link.tag)
    return {field: sorted(tags) for field, tags in sorted(fields.items())}


def link_edges(*kinds: str) -> list[tuple[str, str]]:
    """graph_retriever edge specs that follow the store's link tags of `kinds`, e.g.
    `GraphRetriever(..., edges=link_edges("mention", "hyperlink"))`."""
    return [(OUT + kind, IN + kind) for kind in kinds]


def to_content(stored: StoredNode) -> Content:
    """A stored node as graph_retriever content: its metadata, and its link tags as
    `link_fields` (a metadata key of the node's own of the same name keeps its value)."""
    node = stored.node
    metadata = {**link_fields(node.links), **node.metadata}
    return Content(node.id, node.text, stored.embedding.tolist(), metadata)


def is_link_edge(edge: Edge) -> bool:
    """Whether `edge` leads into an `in:<kind>` field: a store tag, not metadata."""
    return isinstance(edge, MetadataEdge) and edge.incoming_field.startswith(IN)


def link_tags(edges: Iterable[Edge]) -> list[TagKey]:
    """The store tags that link edges stand for (a value that is not a string names none)."""
    return sorted(
        {
            (edge.incoming_field[len(IN) :], edge.value)
            for edge in edges
            if isinstance(edge, MetadataEdge) and isinstance(edge.value, str)
        }
    )


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
    and `adjacent_k` have no cap, and its own adapters return what exists.  A negative `k`
    is refused as what it is (the store's own check said "between 1 and 1000", though the
    adapter takes 0 and more than 1000)."""
    if isinstance(k, int) and not isinstance(k, bool) and k < 0:
        raise InvalidArgumentError("k", f"must be 0 or more, got {k}")
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
        if self.store.embeddings is None:  # graph_retriever has no way to pass a vector
            raise InvalidInputError(
                "this store has no embedding model: open the GraphStore with the model its "
                "passages were embedded with (graphstore.models.load_model(name))"
            )
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

    async def aadjacent(
        self,
        edges: set[Edge],
        query_embedding: list[float],
        k: int,
        filter: dict[str, Any] | None,
        **kwargs: Any,
    ) -> list[Content]:
        """The `k` contents nearest to `query_embedding` with an incoming edge of `edges`:
        an edge into an `in:<kind>` field is read from its tag's rows (`is_link_edge`), the
        others by filtered search as graph_retriever's base adapter does."""
        check_store_kwargs(kwargs)
        tags = link_tags(edge for edge in edges if is_link_edge(edge))
        others = {edge for edge in edges if not is_link_edge(edge)}
        found: list[Content] = []
        if tags and k > 0:
            linked = await self.store.alinking_in_stored(
                tags, query_embedding, k=store_k(k), filter=filter
            )
            found = [to_content(stored) for stored in linked]
        if others:
            found.extend(await super().aadjacent(others, query_embedding, k, filter))
        return top_k(found, embedding=query_embedding, k=k)

    def adjacent(
        self,
        edges: set[Edge],
        query_embedding: list[float],
        k: int,
        filter: dict[str, Any] | None,
        **kwargs: Any,
    ) -> list[Content]:
        """Sync twin of `aadjacent`."""
        return run_sync(self.aadjacent(edges, query_embedding, k, filter, **kwargs))

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
