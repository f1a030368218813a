"""LangChain integration: a `GraphVectorStore` and its retriever over any graphstore backend.

This module is the only place that knows LangChain's graph API (deprecated upstream, due for
removal in langchain-community 0.5); the store itself does not depend on it.  Differences
from upstream, on purpose: `ids=` is honoured by `add_documents`/`add_texts`, `filter` by
every search (MMR included), `similarity_score_threshold` works, sync methods work inside a
running event loop, an option a search or write does not take is refused rather than ignored
(a typo, or `score_threshold` on `similarity`, used to return unfiltered results), and documents
round-trip exactly: plain searches add no metadata keys and `links` appears only on
documents that have links (as a set: sorted, each link once).  Graph search results add
`similarity_score`, `score` (the path-aware relevance they were ranked by), `mmr_score`,
`depth`, `via` (the `(kind, tag)` that led to the document, None for roots), `path` and
`raised_by` (`PROVENANCE_KEYS`), but never over a key the document itself has: a document's
own metadata always wins, `links` included (a node stored outside LangChain with its own
`links` metadata shows that, not its link tags).  So a search result written back stores
these keys as its own, and later results show them, stale: drop them first.

The extra search type `graph` is `GraphStore.search`, the default graph search, and the
retriever's default.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import AsyncIterable, Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

from langchain_community.graph_vectorstores.base import GraphVectorStore, GraphVectorStoreRetriever
from langchain_community.graph_vectorstores.base import Node as LangChainNode
from langchain_community.graph_vectorstores.links import METADATA_LINKS_KEY
from langchain_community.graph_vectorstores.links import Link as LangChainLink
from langchain_core._api import LangChainBetaWarning
from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from pydantic import ConfigDict

from graphstore.closing import Closing
from graphstore.embedded import EmbeddedStorage
from graphstore.errors import InvalidInputError
from graphstore.filters import parse_filter
from graphstore.links import as_links
from graphstore.nodes import Hit, Node
from graphstore.storage import Storage
from graphstore.store import (
    TRAVERSAL_OPTIONS,
    GraphStore,
    Query,
    check_ids,
    listed,
    listed_of,
    run_sync,
)
from graphstore.strategy import (
    DEFAULT,
    MMR_TRAVERSAL,
    SEARCH_ARGUMENTS,
    STRATEGY_SETTINGS,
    check_count,
    check_fraction,
    check_options,
)

SIMILARITY_OPTIONS = ("k", "filter")
MMR_OPTIONS = ("k", "fetch_k", "lambda_mult", "filter")
"""What the similarity and MMR searches take: any other keyword is refused (LangChain's
stores ignore it, so a typo or a `score_threshold` returned unfiltered results)."""

SEARCH_OPTIONS: Mapping[str, frozenset[str]] = {
    "graph": STRATEGY_SETTINGS | SEARCH_ARGUMENTS,
    "similarity": frozenset(SIMILARITY_OPTIONS),
    "similarity_score_threshold": frozenset({*SIMILARITY_OPTIONS, "score_threshold"}),
    "mmr": frozenset(MMR_OPTIONS),
    "traversal": TRAVERSAL_OPTIONS,
    "mmr_traversal": STRATEGY_SETTINGS | SEARCH_ARGUMENTS | {"initial_roots"},
}
"""Each search type and the options it takes, so that a retriever refuses a misspelt one
when it is made, not at its first question."""

SEARCH_TYPES = tuple(SEARCH_OPTIONS)


def check_search(search_type: Any, options: Any) -> None:
    """A one-line error for an unknown search type (naming every one: LangChain's own list
    has three, not `graph` or the traversals), for an option it does not take, or for
    options it cannot run with.

    `similarity_score_threshold` needs a `score_threshold` between 0 and 1: LangChain's
    store search returned every passage without one and none for NaN, and its retriever
    refused both in a multi-line validation error."""
    if search_type not in SEARCH_TYPES:
        raise InvalidInputError(
            f"unknown search_type {search_type!r}; use one of {', '.join(SEARCH_TYPES)}"
        )
    if not isinstance(options, Mapping):
        raise InvalidInputError(f"search options must be a dict, not {type(options).__name__}")
    check_options(options, SEARCH_OPTIONS[search_type])
    if search_type == "similarity_score_threshold":
        if "score_threshold" not in options:
            raise InvalidInputError(
                "similarity_score_threshold needs a score_threshold between 0 and 1"
            )
        check_fraction("score_threshold", options["score_threshold"])


def check_search_values(options: Mapping[str, Any]) -> None:
    """A one-line error for a search option's value out of range (`lambda_mult=2`), for a
    retriever when it is made: a search checks its own when it runs, and the retriever's
    were refused only at its first question, in the middle of a chain."""
    settings = {name: value for name, value in options.items() if name in STRATEGY_SETTINGS}
    DEFAULT.with_options(**settings).checked(
        has_initial_roots=options.get("initial_roots") is not None
    )
    parse_filter(options.get("filter"))


def check_retriever_k(k: Any, search_kwargs: Mapping[str, Any]) -> None:
    """A one-line error for a retriever's own `k` out of range, or given with another value
    in `search_kwargs` (the retriever's used to win without a word)."""
    if k is None:
        return
    check_count("k", k)
    if "k" in search_kwargs and search_kwargs["k"] != k:
        raise InvalidInputError(
            f"k is given twice, as k={k} and search_kwargs['k']={search_kwargs['k']}: give one"
        )


def _given_or_new_id(node_id: str | None) -> str:
    """`node_id`, or a new one when None (LangChain's "make an id"); an empty id stays empty
    for `check_node` to refuse: read as None, re-adding the text would duplicate it."""
    return uuid.uuid4().hex if node_id is None else node_id


def document_to_node(document: Document, node_id: str | None = None) -> Node:
    """A LangChain document as a node, named by `node_id`, else by its own id; links come
    out of `metadata["links"]`."""
    metadata = dict(document.metadata)
    links = metadata.pop(METADATA_LINKS_KEY, [])
    chosen = _given_or_new_id(document.id if node_id is None else node_id)
    try:
        node_links = as_links(links)
    except InvalidInputError as error:  # say which document and key, as a batch has many
        named = (
            "a document without an id"
            if document.id is None and node_id is None
            else (f"document {chosen!r}")
        )
        raise InvalidInputError(f"{named}: metadata[{METADATA_LINKS_KEY!r}]: {error}") from None
    return Node(chosen, document.page_content, metadata, node_links)


ADD_DOCUMENTS_OPTIONS = ("ids", "batch_size")
ADD_TEXTS_OPTIONS = ("metadatas", "ids", "batch_size")
FROM_DOCUMENTS_OPTIONS = ("ids", "storage")
FROM_TEXTS_OPTIONS = ("metadatas", "ids", "storage")
"""What each writing and constructing method takes: any other keyword is refused, as by the
searches (LangChain's signatures end in `**kwargs`, so a typo was silently dropped).
`batch_size`, which LangChain's `index()` passes, is checked and has no effect: the store
writes in batches of its own."""


MAX_BATCH_SIZE = 1_000_000_000
"""The largest `batch_size` a write takes (it has no effect: any positive integer is one)."""


def check_write_options(options: Mapping[str, Any], known: Sequence[str], what: str) -> None:
    """A one-line error for an option `known` does not hold, or for a `batch_size` that is no
    positive integer (one that could not have been a batch size was accepted silently)."""
    check_options(options, known, what)
    if "batch_size" in options:
        check_count("batch_size", options["batch_size"], 1, MAX_BATCH_SIZE)


PROVENANCE_KEYS = frozenset(
    {"similarity_score", "score", "mmr_score", "depth", "via", "path", "raised_by"}
)
"""The metadata keys a graph search result gains (where the document has none of its own)."""
warnings.filterwarnings("ignore", category=LangChainBetaWarning, module=__name__)
"""The documents this store returns carry LangChain's `Link`s, a class marked beta: every
search of a linked store warned so, about a choice the caller did not make."""


def node_to_document(node: Node, extra: dict[str, Any] | None = None) -> Document:
    """A node as a LangChain document with LangChain `Link`s (unless its own metadata has a
    `links` key); `extra` adds metadata keys the node's own metadata does not have."""
    metadata = dict(node.metadata)
    if node.links and METADATA_LINKS_KEY not in metadata:
        metadata[METADATA_LINKS_KEY] = [
            LangChainLink(kind=link.kind, direction=link.direction, tag=link.tag)
            for link in sorted(node.links)
        ]
    return Document(id=node.id, page_content=node.text, metadata=(extra or {}) | metadata)


def hit_to_document(hit: Hit) -> Document:
    """A graph search hit as a document that says how it was reached."""
    extra: dict[str, Any] = {
        "similarity_score": hit.similarity,
        "score": hit.score,
        "depth": hit.depth,
        "via": hit.via,
        "path": list(hit.path),
    }
    if hit.mmr_score is not None:
        extra["mmr_score"] = hit.mmr_score
    if hit.raised_by:
        extra["raised_by"] = list(hit.raised_by)
    return node_to_document(hit.node, extra)


async def _collect(documents: AsyncIterable[Document]) -> list[Document]:
    return [document async for document in documents]


class GraphStoreVectorStore(GraphVectorStore, Closing):
    """LangChain's `GraphVectorStore` on graphstore (embedded by default, or any `Storage`)."""

    def __init__(self, embedding: Embeddings, storage: Storage | None = None) -> None:
        self.embedding = embedding
        self.store = GraphStore(embedding, storage or EmbeddedStorage(":memory:"))

    @property
    def embeddings(self) -> Embeddings | None:
        """The embedding model."""
        return self.embedding

    async def aclose(self) -> None:
        """Close the storage: a Cassandra store's driver cluster and its threads, an
        embedded store's file."""
        await self.store.aclose()

    def close(self) -> None:
        """Sync twin of `aclose`."""
        self.store.close()

    # -- writing -------------------------------------------------------------------------

    async def aadd_nodes(self, nodes: Iterable[LangChainNode], **kwargs: Any) -> AsyncIterable[str]:
        """Add LangChain nodes (ids are generated for nodes without one)."""
        check_options(kwargs, (), "add_nodes option")
        for node_id in await self.store.aadd_nodes(self._from_langchain(nodes)):
            yield node_id

    def add_nodes(self, nodes: Iterable[LangChainNode], **kwargs: Any) -> Iterable[str]:
        """Sync twin of `aadd_nodes`."""
        check_options(kwargs, (), "add_nodes option")
        return self.store.add_nodes(self._from_langchain(nodes))

    async def aadd_documents(
        self,
        documents: Iterable[Document],
        *,
        ids: Iterable[str | None] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Add documents; `ids=` (or each `Document.id`) names them, else (None) ids are
        generated; an empty id is refused, as `GraphStore.add_nodes` refuses it."""
        check_write_options(kwargs, ADD_DOCUMENTS_OPTIONS, "add_documents option")
        return await self.store.aadd_nodes(self._nodes(documents, ids))

    def add_documents(
        self,
        documents: Iterable[Document],
        *,
        ids: Iterable[str | None] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Sync twin of `aadd_documents`."""
        return run_sync(self.aadd_documents(documents, ids=ids, **kwargs))

    async def aadd_texts(
        self,
        texts: Iterable[str],
        metadatas: Iterable[dict[str, Any]] | None = None,
        *,
        ids: Iterable[str | None] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Add texts with optional metadata (links in `metadata["links"]`) and ids (see
        `aadd_documents`)."""
        check_write_options(kwargs, ADD_TEXTS_OPTIONS, "add_texts option")
        return await self.aadd_documents(self._documents(texts, metadatas), ids=ids)

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: Iterable[dict[str, Any]] | None = None,
        *,
        ids: Iterable[str | None] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Sync twin of `aadd_texts`."""
        return run_sync(self.aadd_texts(texts, metadatas, ids=ids, **kwargs))

    async def adelete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Delete documents by id; unknown ids are ignored.  No ids is refused rather than
        read as "everything" (as some LangChain stores do) or as nothing."""
        if ids is None:
            raise InvalidInputError("delete needs the ids of the documents to delete")
        check_options(kwargs, (), "delete option")
        await self.store.adelete(ids)
        return True

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Sync twin of `adelete`."""
        return run_sync(self.adelete(ids, **kwargs))

    async def aget_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The documents with these ids (unknown ids skipped, duplicates once)."""
        unique = list(dict.fromkeys(check_ids(ids)))
        return [node_to_document(node) for node in await self.store.aget(unique)]

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """Sync twin of `aget_by_ids`."""
        return run_sync(self.aget_by_ids(ids))

    # -- similarity ----------------------------------------------------------------------

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        # Cosine similarity in [-1, 1] to LangChain's relevance in [0, 1], clipped: float32
        # rounding gives some vectors a cosine of 1.0000001 with themselves.
        return lambda score: min(1.0, max(0.0, (score + 1.0) / 2.0))

    async def asimilarity_search_with_score(
        self, query: str, k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """Documents most similar to `query` with their cosine similarity."""
        check_options(kwargs, SIMILARITY_OPTIONS)
        hits = await self.store.asimilarity_search(query, k=k, filter=filter)
        return [(node_to_document(hit.node), hit.similarity) for hit in hits]

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """Sync twin of `asimilarity_search_with_score`."""
        return run_sync(self.asimilarity_search_with_score(query, k, filter, **kwargs))

    async def asimilarity_search(
        self, query: str, k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        """Documents most similar to `query`."""
        pairs = await self.asimilarity_search_with_score(query, k, filter, **kwargs)
        return [doc for doc, _ in pairs]

    def similarity_search(
        self, query: str, k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        """Sync twin of `asimilarity_search`."""
        return run_sync(self.asimilarity_search(query, k, filter, **kwargs))

    async def asimilarity_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """Documents most similar to `embedding`."""
        check_options(kwargs, SIMILARITY_OPTIONS)
        hits = await self.store.asimilarity_search_by_vector(embedding, k=k, filter=filter)
        return [node_to_document(hit.node) for hit in hits]

    def similarity_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """Sync twin of `asimilarity_search_by_vector`."""
        return run_sync(self.asimilarity_search_by_vector(embedding, k, filter, **kwargs))

    async def amax_marginal_relevance_search(
        self,
        query: str,
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """MMR over the `fetch_k` nearest documents (no traversal), honouring `filter`."""
        return await self._ammr(query, k, fetch_k, lambda_mult, filter, options=kwargs)

    async def _ammr(
        self,
        query: Query,
        k: int,
        fetch_k: int,
        lambda_mult: float,
        filter: dict[str, Any] | None,
        *,
        options: dict[str, Any],
    ) -> list[Document]:
        check_options(options, MMR_OPTIONS)
        hits = await self.store.ammr_traversal_search(
            query, k=k, depth=0, fetch_k=fetch_k, lambda_mult=lambda_mult, filter=filter
        )
        return [node_to_document(hit.node) for hit in hits]

    def max_marginal_relevance_search(
        self,
        query: str,
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """Sync twin of `amax_marginal_relevance_search`."""
        return run_sync(
            self.amax_marginal_relevance_search(query, k, fetch_k, lambda_mult, filter, **kwargs)
        )

    async def amax_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """`amax_marginal_relevance_search` with the query's embedding."""
        return await self._ammr(embedding, k, fetch_k, lambda_mult, filter, options=kwargs)

    def max_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """Sync twin of `amax_marginal_relevance_search_by_vector`."""
        return run_sync(
            self.amax_marginal_relevance_search_by_vector(
                embedding, k, fetch_k, lambda_mult, filter, **kwargs
            )
        )

    # -- graph searches ------------------------------------------------------------------

    async def agraph_search(
        self, query: str, *, k: int = 5, filter: dict[str, Any] | None = None, **options: Any
    ) -> list[Document]:
        """The default graph search (`GraphStore.search`): `k` documents by path-aware
        relevance, each saying how it was reached."""
        hits = await self.store.asearch(query, k=k, filter=filter, **options)
        return [hit_to_document(hit) for hit in hits]

    def graph_search(self, query: str, **options: Any) -> list[Document]:
        """Sync twin of `agraph_search` (same keyword arguments)."""
        return run_sync(self.agraph_search(query, **options))

    def search(self, query: str, search_type: str, **kwargs: Any) -> list[Document]:
        """Any search type; `graph` is the default graph search."""
        check_search(search_type, kwargs)
        if search_type == "graph":
            return self.graph_search(query, **kwargs)
        return super().search(query, search_type, **kwargs)

    async def asearch(self, query: str, search_type: str, **kwargs: Any) -> list[Document]:
        """Async twin of `search`."""
        check_search(search_type, kwargs)
        if search_type == "graph":
            return await self.agraph_search(query, **kwargs)
        return await super().asearch(query, search_type, **kwargs)

    async def atraversal_search(
        self,
        query: str,
        *,
        k: int = 4,
        depth: int = 1,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[Document]:
        """`k` documents breadth-first from the nearest ones, within `depth` tag hops."""
        for hit in await self.store.atraversal_search(
            query, k=k, depth=depth, filter=filter, **kwargs
        ):
            yield hit_to_document(hit)

    def traversal_search(self, query: str, **kwargs: Any) -> Iterable[Document]:
        """Sync twin of `atraversal_search` (same keyword arguments)."""
        return run_sync(_collect(self.atraversal_search(query, **kwargs)))

    async def ammr_traversal_search(
        self,
        query: str,
        *,
        initial_roots: Sequence[str] = (),
        k: int = MMR_TRAVERSAL.k,
        depth: int = MMR_TRAVERSAL.depth,
        fetch_k: int | None = None,
        adjacent_k: int = MMR_TRAVERSAL.adjacent_k,
        lambda_mult: float = MMR_TRAVERSAL.lambda_mult,
        score_threshold: float = MMR_TRAVERSAL.score_threshold,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[Document]:
        """MMR-guided traversal (see `GraphStore.ammr_traversal_search`)."""
        hits = await self.store.ammr_traversal_search(
            query,
            initial_roots=initial_roots,
            k=k,
            depth=depth,
            fetch_k=fetch_k,
            adjacent_k=adjacent_k,
            lambda_mult=lambda_mult,
            score_threshold=score_threshold,
            filter=filter,
            **kwargs,
        )
        for hit in hits:
            yield hit_to_document(hit)

    def mmr_traversal_search(self, query: str, **kwargs: Any) -> Iterable[Document]:
        """Sync twin of `ammr_traversal_search` (same keyword arguments)."""
        return run_sync(_collect(self.ammr_traversal_search(query, **kwargs)))

    def as_retriever(self, **kwargs: Any) -> GraphStoreRetriever:
        """A retriever for any search type (`search_type=`, default `graph`; `search_kwargs=`);
        a setting the retriever does not have is a one-line error, not dropped (a misspelt
        `search_kwargs` used to leave the defaults in force).  Its tags name the store and
        the embeddings for tracing, as LangChain's own retrievers' do."""
        settings = set(GraphStoreRetriever.model_fields) - {"vectorstore"}
        check_options(kwargs, settings, "retriever setting")
        search_kwargs = kwargs.get("search_kwargs", {})
        check_search(kwargs.get("search_type", "graph"), search_kwargs)
        check_search_values(search_kwargs)
        check_retriever_k(kwargs.get("k"), search_kwargs)
        tags = [*(kwargs.pop("tags", None) or []), *self._get_retriever_tags()]
        return GraphStoreRetriever(vectorstore=self, tags=tags, **kwargs)

    # -- construction --------------------------------------------------------------------

    @classmethod
    async def afrom_texts(
        cls: type[GraphStoreVectorStore],
        texts: Iterable[str],
        embedding: Embeddings,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        storage: Storage | None = None,
        **kwargs: Any,
    ) -> GraphStoreVectorStore:
        """A store holding `texts`."""
        check_options(kwargs, FROM_TEXTS_OPTIONS, "from_texts option")
        documents = cls._documents(texts, metadatas)
        return await cls.afrom_documents(documents, embedding, ids=ids, storage=storage)

    @classmethod
    def from_texts(
        cls: type[GraphStoreVectorStore],
        texts: Iterable[str],
        embedding: Embeddings,
        metadatas: list[dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> GraphStoreVectorStore:
        """Sync twin of `afrom_texts` (same keyword arguments)."""
        return run_sync(cls.afrom_texts(texts, embedding, metadatas, **kwargs))

    @classmethod
    def from_documents(
        cls: type[GraphStoreVectorStore],
        documents: list[Document],
        embedding: Embeddings,
        **kwargs: Any,
    ) -> GraphStoreVectorStore:
        """Sync twin of `afrom_documents` (same keyword arguments)."""
        return run_sync(cls.afrom_documents(documents, embedding, **kwargs))

    @classmethod
    async def afrom_documents(
        cls: type[GraphStoreVectorStore],
        documents: list[Document],
        embedding: Embeddings,
        *,
        ids: list[str] | None = None,
        storage: Storage | None = None,
        **kwargs: Any,
    ) -> GraphStoreVectorStore:
        """A store holding `documents`."""
        check_options(kwargs, FROM_DOCUMENTS_OPTIONS, "from_documents option")
        store = cls(embedding, storage)
        await store.aadd_documents(documents, ids=ids)
        return store

    # -- helpers -------------------------------------------------------------------------

    @staticmethod
    def _from_langchain(nodes: Iterable[LangChainNode]) -> list[Node]:
        found = listed_of("nodes", nodes, LangChainNode, "LangChain graph Node")
        return [
            Node(_given_or_new_id(node.id), node.text, node.metadata, as_links(node.links))
            for node in found
        ]

    @staticmethod
    def _documents(
        texts: Iterable[str], metadatas: Iterable[dict[str, Any]] | None
    ) -> list[Document]:
        found = listed_of("texts", texts, str, "string")
        given = (
            [{}] * len(found)
            if metadatas is None
            else listed_of("metadatas", metadatas, Mapping, "dict")
        )
        if len(given) != len(found):
            raise InvalidInputError(f"got {len(given)} metadatas for {len(found)} texts")
        for position, text in enumerate(found):
            if not text.strip():  # named by its place: its id would be one made up here
                raise InvalidInputError(f"texts[{position}] is empty")
        pairs = zip(found, given, strict=True)
        return [Document(text, metadata=dict(meta)) for text, meta in pairs]

    @staticmethod
    def _nodes(documents: Iterable[Document], ids: Iterable[str | None] | None) -> list[Node]:
        found = listed_of("documents", documents, Document, "Document")  # not strings
        names = [None] * len(found) if ids is None else listed("ids", ids, "strings")
        if len(names) != len(found):
            raise InvalidInputError(f"got {len(names)} ids for {len(found)} documents")
        return [document_to_node(doc, name) for doc, name in zip(found, names, strict=True)]


class GraphStoreRetriever(GraphVectorStoreRetriever):
    """LangChain retriever over a `GraphStoreVectorStore`.

    Unlike upstream's, keyword arguments given at `invoke` time (e.g. `k=3`) reach every
    search type, and `k` can be set on the retriever itself.
    """

    model_config = ConfigDict(extra="forbid")
    """A setting the retriever does not have is refused, not dropped."""

    k: int | None = None
    """Number of documents to return, as `search_kwargs["k"]`; giving both with two values is
    refused (the retriever's used to win without a word)."""

    allowed_search_types: ClassVar[Sequence[str]] = SEARCH_TYPES
    search_type: str = "graph"
    """`graph` (the default graph search), or any of LangChain's graph store search types."""

    def model_post_init(self, context: Any, /) -> None:
        """Refuse a `k` out of range, or given twice with two values (`check_retriever_k`)."""
        super().model_post_init(context)
        check_retriever_k(self.k, self.search_kwargs)

    def _search_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        merged = dict(self.search_kwargs)
        if self.k is not None:
            merged["k"] = self.k
        return merged | kwargs

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return self.vectorstore.search(query, self.search_type, **self._search_kwargs(kwargs))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return await self.vectorstore.asearch(
            query, self.search_type, **self._search_kwargs(kwargs)
        )
