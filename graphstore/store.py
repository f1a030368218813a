"""`GraphStore`: embeddings + a storage backend + the traversal engine, behind one API.

Every method is async at heart; the sync twins run the coroutine on a private event loop kept
per thread, or in a worker thread when the caller is already inside a running loop (where
`asyncio.run`, as used upstream, would raise), and call the model's sync methods
(`models.embed_documents`), as LangChain's contract has it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import math
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from graphstore.blank import is_blank
from graphstore.closing import Closing
from graphstore.errors import InvalidInputError, StorageError
from graphstore.filters import EVERYTHING, parse_filter
from graphstore.links import TagKey, as_links
from graphstore.metadata import Filter, check_metadata
from graphstore.models import (
    IN_SYNC_CALL,
    EmbeddingModel,
    embed_documents,
    embed_query,
    model_id,
    model_setting,
)
from graphstore.nodes import Hit, Node, StoredNode, Vector, VectorLike, VectorsLike, unit
from graphstore.storage import ScoredNode, Storage, StoreStats
from graphstore.strategy import (
    DEFAULT,
    MAX_DEPTH,
    MMR_TRAVERSAL,
    SEARCH_ARGUMENTS,
    TRAVERSAL_ADJACENT_K,
    TRAVERSAL_DEPTH,
    check_count,
    check_options,
    roots_for,
    search_strategy,
)
from graphstore.traversal import Traversal, TraversalStats
from graphstore.utf8 import check_utf8

T = TypeVar("T")
EarlierLookup = Callable[[list[Node]], Awaitable[Mapping[str, Vector]]]
"""Nodes -> embeddings stored under other ids with their texts, by node id (`aadd_nodes`)."""

MAX_ID_LENGTH = 512
SAME_MODEL_COSINE = 0.99
"""A passage embedded again by the same weights comes within float rounding of its stored
vector (cosine ~1.0); two different models, even of one family, stay far below."""
MODEL_RECHECK_SECONDS = 1.0
"""How long a search trusts the model record it read last.  Another process may empty the
store and fill it with another model's vectors: a store object that stays open (a server,
a notebook) reads the record again before every write, and before a search once this long
has passed, so it refuses its old model instead of ranking, or writing, with it."""
MAX_TOP_TAGS = 1_000_000
"""Most frequent tags `stats` lists at most (a bound, so a typo cannot ask for billions)."""

Query = str | VectorLike
"""What every search takes: the query text (embedded by the store's model) or its vector."""


def listed(name: str, value: Any, items: str) -> list[Any]:
    """The argument `name` as a list, or a one-line error saying it must be a list of
    `items` (a single string is refused: read as a list, "abc" would be "a", "b" and "c";
    a non-iterable was a bare `TypeError`)."""
    wrong = InvalidInputError(f"{name} must be a list of {items}, not {type(value).__name__}")
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise wrong
    try:
        return list(value)
    except TypeError:  # iterable in type only: a 0-d array
        raise wrong from None


def listed_of(name: str, value: Any, kind: type, one: str) -> list[Any]:
    """`listed`, each item checked to be a `kind` (`one`: what a message calls one of them,
    such as "Document"): a wrong item is named by its place, not met deep inside."""
    found = listed(name, value, f"{one}s")
    for position, item in enumerate(found):
        if not isinstance(item, kind):
            raise InvalidInputError(
                f"{name}[{position}] must be a {one}, not {type(item).__name__}"
            )
    return found


def _checked_stats(stats: Any) -> TraversalStats | None:
    """`stats` when it is a `TraversalStats` (or None), else a one-line error: the search
    would fail on it deep inside, after the query was embedded."""
    if stats is not None and not isinstance(stats, TraversalStats):
        raise InvalidInputError(f"stats must be a TraversalStats, not {type(stats).__name__}")
    return stats


def check_ids(ids: Any) -> list[str]:
    """`ids` as a list of non-empty strings, or a one-line error."""
    found = listed("ids", ids, "strings")
    for node_id in found:
        if not isinstance(node_id, str) or not node_id:
            raise InvalidInputError(f"ids must be non-empty strings, got {node_id!r}")
        if len(node_id) > MAX_ID_LENGTH:  # no node has it: said without echoing it whole
            raise InvalidInputError(
                f"an id is {len(node_id)} characters long; the limit is {MAX_ID_LENGTH}"
            )
        check_utf8("an id", node_id)
    return found


_thread_state = threading.local()


def _thread_loop() -> asyncio.AbstractEventLoop:
    """This thread's private event loop, kept between calls: `asyncio.run` costs a new loop
    and, on Python 3.11, a repr of the finished task (every hit) per call, which was a
    third of a small store's similarity search."""
    loop: asyncio.AbstractEventLoop | None = getattr(_thread_state, "loop", None)
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        _thread_state.loop = loop
        weakref.finalize(threading.current_thread(), loop.close)  # the thread's end, or exit
    return loop


def run_sync(awaitable: Awaitable[T]) -> T:
    """Run a coroutine to completion from sync code, inside or outside a running loop."""

    async def wrapper() -> T:
        IN_SYNC_CALL.set(True)  # the model's sync methods, in this task only
        return await awaitable

    if _loop_running():
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, wrapper()).result()
    loop = _thread_loop()
    task = loop.create_task(wrapper())
    try:
        return loop.run_until_complete(task)
    except BaseException:
        if not task.done():  # interrupted (Ctrl-C): no half-run search survives
            task.cancel()
            with contextlib.suppress(BaseException):
                loop.run_until_complete(task)
        raise


def _loop_running() -> bool:
    """Whether this thread runs an event loop.  Asked outside any `except` block, so that
    an error of the call is not chained to the probe's `RuntimeError` (every sync call's
    traceback opened with "no running event loop")."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def check_node(node: Any) -> Node:
    """Validate a node's id, text, metadata and links; return a normalized copy."""
    if not isinstance(node, Node):
        raise InvalidInputError(f"expected a Node, got {type(node).__name__}")
    if not isinstance(node.id, str) or not node.id.strip():
        raise InvalidInputError(f"node id must be a non-empty string, got {node.id!r}")
    if len(node.id) > MAX_ID_LENGTH:
        raise InvalidInputError(
            f"node id is {len(node.id)} characters long; the limit is {MAX_ID_LENGTH}"
        )
    check_utf8("node id", node.id)
    if not isinstance(node.text, str):
        raise InvalidInputError(
            f"text of node {node.id!r} must be a string, not {type(node.text).__name__}"
        )
    if not node.text.strip():
        raise InvalidInputError(f"text of node {node.id!r} is empty")
    check_utf8(f"text of node {node.id!r}", node.text)
    return Node(node.id, node.text, check_metadata(node.metadata), as_links(node.links))


class GraphStore(Closing):
    """A graph vector store whose edges are implied by shared link tags.

    `embeddings` is any LangChain `Embeddings` or a `graphstore.models` model (it needs their
    async calls, `EmbeddingModel`); None for a store used only with vectors (or only for
    reading).
    Every search's `filter` is a metadata filter (`{"chapter": {"$lte": 27}}`, operators and
    their meaning in `graphstore.filters`), checked before anything runs and applied to every
    passage a search returns or passes through.
    """

    def __init__(
        self,
        embeddings: EmbeddingModel | None,
        storage: Storage,
        *,
        batch_size: int = 64,
        concurrency: int = 16,
    ) -> None:
        if not isinstance(storage, Storage):
            raise InvalidInputError(
                f"storage must be a Storage (EmbeddedStorage, CassandraStorage), "
                f"not {type(storage).__name__}"
            )
        if embeddings is not None and not callable(getattr(embeddings, "aembed_query", None)):
            named = isinstance(embeddings, str)
            hint = f"; for a model by name, load_model({embeddings!r})" if named else ""
            raise InvalidInputError(  # a name failed at the first search, in an AttributeError
                "embeddings must be an embedding model (a LangChain Embeddings) or None, not "
                f"{type(embeddings).__name__}{hint}"
            )
        self.embeddings = embeddings
        self.storage = storage
        self._recorded_model: str | None = None
        """The model the store records, as last read (`_record`) or recorded."""
        self._record_read_at: float | None = None
        """When `_recorded_model` was read (`time.monotonic`), None before the first read."""
        self._accepted_model: tuple[str, str] | None = None
        """(record, model): a model named unlike the record and found to embed as it did
        (`_embeds_as_stored`)."""
        self.batch_size = check_count("batch_size", batch_size)
        self.traversal = Traversal(storage, check_count("concurrency", concurrency, 1, 1024))

    # -- writing -------------------------------------------------------------------------

    async def aadd_nodes(
        self,
        nodes: Iterable[Node],
        *,
        vectors: VectorsLike | None = None,
        reuse_embeddings: bool = False,
        earlier_embeddings: EarlierLookup | None = None,
        before_write: Callable[[list[Node]], list[Node]] | None = None,
    ) -> list[str]:
        """Embed (unless `vectors` are given) and upsert nodes; return the ids written.

        The whole input is validated before anything is written.  Writes go in batches of
        `batch_size`; each node is written completely or not at all, so a failure part-way
        leaves earlier batches stored and re-running the same input is idempotent.  Each
        batch starts by yielding to the event loop: a store whose writes never wait (the
        embedded one) would otherwise not see a Ctrl-C or SIGTERM, both delivered as a cancel
        at the next wait, until the whole input was written.  With
        `reuse_embeddings`, a node stored under its id with the same text keeps its stored
        embedding instead of being embedded again: what an ingest does, since the store's
        model made that embedding from that text (a node stored with a vector of its own
        would keep it, so this is not the default).  `earlier_embeddings`, with it, is given
        the nodes of a batch that found no such node and returns, by node id, embeddings of
        their texts stored under other ids: an ingest's passages that moved within their
        file (`earlier_embeddings.EarlierEmbeddings`).  `before_write` is given each batch once
        it is embedded, just before it is written, and returns the nodes still to write: an
        ingest leaves out the passages of a file written again since it read it.
        """
        checked = [check_node(node) for node in listed("nodes", nodes, "Nodes")]
        ids = [node.id for node in checked]
        if len(set(ids)) != len(ids):
            duplicate = next(node_id for node_id in ids if ids.count(node_id) > 1)
            raise InvalidInputError(f"node id {duplicate!r} appears twice in one batch")
        if vectors is not None:
            vectors = listed("vectors", vectors, "vectors or a 2-D array")
            if len(vectors) != len(checked):
                raise InvalidInputError(f"got {len(vectors)} vectors for {len(checked)} nodes")
        dimension = self.storage.dimension
        given: list[Vector] | None = None
        if vectors is not None:
            given = []
            for position, vector in enumerate(vectors):  # all one dimension, even in a new store
                given.append(self._unit(vector, dimension, f"vectors[{position}]"))
                dimension = given[-1].size
        for node in checked:
            self.storage.check_write_size(node, dimension)
        left_out: set[str] = set()
        for start in range(0, len(checked), self.batch_size):
            await asyncio.sleep(0)  # a Ctrl-C or SIGTERM (a cancel) stops the write here
            batch = checked[start : start + self.batch_size]
            if given is not None:
                embedded = given[start : start + self.batch_size]
            else:
                model = await self._checked_model(writing=False)
                kept = await self._stored_embeddings(batch) if reuse_embeddings else {}
                unmatched = [node for node in batch if node.id not in kept]
                if reuse_embeddings and earlier_embeddings is not None and unmatched:
                    kept.update(await earlier_embeddings(unmatched))
                missing = [node.text for node in unmatched if node.id not in kept]
                raw = iter(await self._embed(model, missing))
                embedded = []
                for node in batch:  # all one dimension, even in a new store
                    vector = kept.get(node.id)
                    if vector is None:
                        vector = self._unit(next(raw), dimension, f"the embedding of {node.id!r}")
                    embedded.append(vector)
                    dimension = vector.size
                await self._checked_model(writing=True)  # a model that fails is not recorded
            pairs = list(zip(batch, embedded, strict=True))
            if before_write is not None:
                still = {node.id for node in before_write(batch)}
                left_out.update(node.id for node in batch if node.id not in still)
                pairs = [(node, vector) for node, vector in pairs if node.id in still]
            await self.storage.upsert([StoredNode(node, vector) for node, vector in pairs])
        return [node_id for node_id in ids if node_id not in left_out]

    def add_nodes(
        self,
        nodes: Iterable[Node],
        *,
        vectors: VectorsLike | None = None,
        reuse_embeddings: bool = False,
        before_write: Callable[[list[Node]], list[Node]] | None = None,
    ) -> list[str]:
        """Sync twin of `aadd_nodes`."""
        return run_sync(
            self.aadd_nodes(
                nodes, vectors=vectors, reuse_embeddings=reuse_embeddings, before_write=before_write
            )
        )

    async def _stored_embeddings(self, nodes: Sequence[Node]) -> dict[str, Vector]:
        """The stored embeddings of those of `nodes` stored under their id with their text;
        none when the rows cannot be read (a corrupt row, which this write repairs)."""
        texts = {node.id: node.text for node in nodes}
        try:
            stored = await self.storage.get(list(texts))
        except StorageError:
            return {}
        return {
            item.node.id: item.embedding for item in stored if item.node.text == texts[item.node.id]
        }

    async def adelete(self, ids: Sequence[str]) -> int:
        """Delete nodes and their tag rows; return how many existed."""
        return await self.storage.delete(check_ids(ids))

    def delete(self, ids: Sequence[str]) -> int:
        """Sync twin of `adelete`."""
        return run_sync(self.adelete(ids))

    # -- reading -------------------------------------------------------------------------

    async def anode_ids(self) -> list[str]:
        """Every node id (a full scan: for maintenance, not queries)."""
        return await self.storage.node_ids()

    async def ametadata_values(self, key: str) -> dict[str, object]:
        """The value of metadata `key` of every node that has one, by id (a full scan of the
        metadata alone: for maintenance, not queries)."""
        return await self.storage.metadata_values(key)

    async def aget(self, ids: Sequence[str]) -> list[Node]:
        """The nodes with these ids, in the order asked, skipping unknown ids."""
        return [stored.node for stored in await self.aget_stored(ids)]

    async def aget_stored(self, ids: Sequence[str]) -> list[StoredNode]:
        """The stored nodes with these ids and their embeddings (for adapters), in the order
        asked, skipping unknown ids."""
        return await self.storage.get(check_ids(ids))

    def get(self, ids: Sequence[str]) -> list[Node]:
        """Sync twin of `aget`."""
        return run_sync(self.aget(ids))

    async def asearch_stored(
        self, vector: VectorLike, *, k: int = 4, filter: Filter | None = None
    ) -> list[ScoredNode]:
        """The `k` nearest stored nodes with their embeddings (for adapters)."""
        check_count("k", k)
        where = parse_filter(filter)
        return await self.storage.search(self._unit(vector, self.storage.dimension), k, where)

    async def alinking_in_stored(
        self,
        tags: Sequence[TagKey],
        vector: VectorLike,
        *,
        k: int = 4,
        filter: Filter | None = None,
    ) -> list[StoredNode]:
        """The stored nodes linking in to any of `tags` that pass `filter`, the `k` nearest
        to `vector` under each tag, each once (for adapters: one traversal step, read
        from the tags' rows)."""
        check_count("k", k)
        where = parse_filter(filter)
        if not tags:
            return []
        under_tags = await self.storage.search_tags(
            list(tags), self._unit(vector, self.storage.dimension), k, where
        )
        ids = dict.fromkeys(hit.id for hits in under_tags for hit in hits)
        return await self.storage.get(list(ids))

    async def asimilarity_search(
        self, query: Query, *, k: int = 4, filter: Filter | None = None
    ) -> list[Hit]:
        """The `k` nodes most similar to `query` (a string or a vector) that pass `filter`."""
        check_count("k", k)
        where = parse_filter(filter)
        found = await self.storage.search(await self._query_vector(query), k, where)
        return [Hit(item.stored.node, item.similarity, score=item.similarity) for item in found]

    def similarity_search(
        self, query: Query, *, k: int = 4, filter: Filter | None = None
    ) -> list[Hit]:
        """Sync twin of `asimilarity_search`."""
        return run_sync(self.asimilarity_search(query, k=k, filter=filter))

    async def asimilarity_search_by_vector(
        self, vector: VectorLike, *, k: int = 4, filter: Filter | None = None
    ) -> list[Hit]:
        """`asimilarity_search` with a vector (kept for callers that name the kind)."""
        return await self.asimilarity_search(vector, k=k, filter=filter)

    def similarity_search_by_vector(
        self, vector: VectorLike, *, k: int = 4, filter: Filter | None = None
    ) -> list[Hit]:
        """Sync twin of `asimilarity_search_by_vector`."""
        return run_sync(self.asimilarity_search(vector, k=k, filter=filter))

    async def asearch(
        self,
        query: Query,
        *,
        k: int = DEFAULT.k,
        filter: Filter | None = None,
        stats: TraversalStats | None = None,
        **options: Any,
    ) -> list[Hit]:
        """The default graph search: `k` passages by path-aware relevance.

        Roots are the nearest passages; passages linked to them inherit relevance damped by
        how specific the shared tag is (`graphstore.relevance`).  Returns exactly `k` hits
        unless fewer pass `filter`: `fetch_k` defaults to `max(5, k)` roots
        (`strategy.ROOTS`).  `options` override the other `Strategy` settings (`depth`,
        `adjacent_k`, `expand_k`, `lambda_mult`, `damping`, …); pass
        `stats=TraversalStats(keep_unselected=True)` to see the candidates that lost.
        """
        strategy = search_strategy(k, **options)
        where = parse_filter(filter)
        stats = _checked_stats(stats)
        return await self.traversal.search(
            await self._query_vector(query), strategy, where=where, stats=stats
        )

    def search(
        self,
        query: Query,
        *,
        k: int = DEFAULT.k,
        filter: Filter | None = None,
        stats: TraversalStats | None = None,
        **options: Any,
    ) -> list[Hit]:
        """Sync twin of `asearch`."""
        return run_sync(self.asearch(query, k=k, filter=filter, stats=stats, **options))

    async def atraversal_search(
        self,
        query: Query,
        *,
        k: int = 4,
        depth: int = TRAVERSAL_DEPTH,
        adjacent_k: int = TRAVERSAL_ADJACENT_K,
        start_k: int | None = None,
        filter: Filter | None = None,
        stats: TraversalStats | None = None,
        **options: Any,
    ) -> list[Hit]:
        """`k` nodes breadth-first from the `start_k` nearest (default: half of `k`, rounded
        up) within `depth` tag hops, by depth then similarity; padded with the next-nearest
        when fewer are reached."""
        check_options(options, TRAVERSAL_OPTIONS)
        check_count("k", k)
        roots = check_count("start_k", math.ceil(k / 2) if start_k is None else start_k)
        check_count("depth", depth, 0, MAX_DEPTH)
        check_count("adjacent_k", adjacent_k)
        where = parse_filter(filter)
        stats = _checked_stats(stats)
        return await self.traversal.traversal_search(
            await self._query_vector(query),
            k=k,
            start_k=roots,
            depth=depth,
            adjacent_k=adjacent_k,
            where=where,
            stats=stats,
        )

    def traversal_search(self, query: Query, **options: Any) -> list[Hit]:
        """Sync twin of `atraversal_search` (same keyword arguments)."""
        return run_sync(self.atraversal_search(query, **options))

    async def ammr_traversal_search(
        self,
        query: Query,
        *,
        k: int = MMR_TRAVERSAL.k,
        depth: int = MMR_TRAVERSAL.depth,
        fetch_k: int | None = None,
        adjacent_k: int = MMR_TRAVERSAL.adjacent_k,
        lambda_mult: float = MMR_TRAVERSAL.lambda_mult,
        score_threshold: float = MMR_TRAVERSAL.score_threshold,
        filter: Filter | None = None,
        initial_roots: Sequence[str] = (),
        max_candidates_per_step: int | None = None,
        stats: TraversalStats | None = None,
        **options: Any,
    ) -> list[Hit]:
        """MMR-select `k` nodes among the `fetch_k` nearest (default `max(5, k)`, as `search`)
        and nodes up to `depth` hops away, expanding each node when it is selected.

        Relevance is path-aware, as in `search`.  `max_candidates_per_step` caps how many
        new candidates one expansion adds over all its tags (default: `fetch_k`, at least
        `adjacent_k`), on top of `adjacent_k` per tag; `options` set other `Strategy` fields.
        """
        settings = {
            "k": k,
            "depth": depth,
            "fetch_k": roots_for(check_count("k", k)) if fetch_k is None else fetch_k,
            "adjacent_k": adjacent_k,
            "lambda_mult": lambda_mult,
            "score_threshold": score_threshold,
            "max_candidates_per_step": max_candidates_per_step,
            **options,
        }
        strategy = MMR_TRAVERSAL.with_options(
            SEARCH_ARGUMENTS | {"initial_roots"}, **settings
        ).checked(has_initial_roots=bool(initial_roots))
        where = parse_filter(filter)
        roots = check_ids(initial_roots)
        stats = _checked_stats(stats)
        return await self.traversal.search(
            await self._query_vector(query),
            strategy,
            where=where,
            initial_roots=roots,
            stats=stats,
        )

    def mmr_traversal_search(self, query: Query, **options: Any) -> list[Hit]:
        """Sync twin of `ammr_traversal_search` (same keyword arguments)."""
        return run_sync(self.ammr_traversal_search(query, **options))

    async def astats(self, top_tags: int = 20) -> StoreStats:
        """Counts of nodes, tags and tag rows, and the `top_tags` most frequent tags."""
        return await self.storage.stats(check_count("top_tags", top_tags, 0, MAX_TOP_TAGS))

    def stats(self, top_tags: int = 20) -> StoreStats:
        """Sync twin of `astats`."""
        return run_sync(self.astats(top_tags))

    async def acheck(self) -> list[str]:
        """Consistency problems between node rows and tag rows; empty when sound."""
        return await self.storage.check()

    def check(self) -> list[str]:
        """Sync twin of `acheck`."""
        return run_sync(self.acheck())

    async def arepair(self) -> list[str]:
        """Mend what `acheck` reports that ingesting again would not (`Storage.repair`), one
        line per change; run it while nothing else writes to the store."""
        return await self.storage.repair()

    def repair(self) -> list[str]:
        """Sync twin of `arepair`."""
        return run_sync(self.arepair())

    async def aclose(self) -> None:
        """Close the backend."""
        await self.storage.close()

    def close(self) -> None:
        """Sync twin of `aclose`."""
        run_sync(self.aclose())

    # -- helpers -------------------------------------------------------------------------

    @staticmethod
    async def _embed(model: EmbeddingModel, texts: list[str]) -> list[Any]:
        """The model's vectors of `texts`, one per text (a model returning more or fewer
        would put each vector on another passage's row)."""
        if not texts:
            return []
        vectors = await embed_documents(model, texts)
        if len(vectors) != len(texts):
            raise InvalidInputError(
                f"the embedding model returned {len(vectors)} vectors for {len(texts)} texts"
            )
        return vectors

    @staticmethod
    def _unit(vector: Any, dimension: int | None, whose: str = "") -> Vector:
        """`vector` checked and scaled to unit length; an error names `whose` it is, when
        given (in a batch of a thousand, which embedding was NaN)."""
        try:
            return unit(vector, dimension)
        except (ValueError, TypeError) as error:
            raise InvalidInputError(f"{whose}: {error}" if whose else str(error)) from error

    async def _checked_model(self, *, writing: bool) -> EmbeddingModel:
        """The store's model, once checked against the one its passages were embedded with
        (recorded at the first write): vectors of two models side by side rank at random.
        A model recorded under another name is accepted when it embeds a stored passage as
        its stored vector (the same weights: a moved folder, another wrapper); so is the
        first model recorded in a store that already holds passages.  A model named by its
        class alone (`model_setting` None: two instances may embed apart) is checked that
        way under its own name too.  A store that holds no passage (emptied, or its first
        write failed) takes the model of its next write."""
        if self.embeddings is None:
            raise InvalidInputError("this store has no embedding model; pass vectors instead")
        given = model_id(self.embeddings)
        recorded = await self._record(fresh=writing)
        if recorded is None and writing:
            if await self._embeds_as_stored(self.embeddings) is False:  # from before records
                raise InvalidInputError(
                    f"this store's passages were not embedded with {given} (the store records "
                    "no model: it was written before graphstore recorded one, or from given "
                    "vectors): use the model they were embedded with"
                )
            recorded = self._recorded_model = await self.storage.record_model(given)
            if recorded == given:
                self._accepted_model = (recorded, given)
        if recorded is None or self._accepted_model == (recorded, given):
            return self.embeddings
        if recorded == given and model_setting(self.embeddings) is not None:
            return self.embeddings
        same = await self._embeds_as_stored(self.embeddings)
        if same is None:  # no passage: emptied by deletes, or a first write that failed
            if writing and recorded != given:  # the record follows the write's model
                recorded = await self.storage.record_model(given, replacing=recorded)
                self._recorded_model = recorded
            if not writing or recorded == given:
                return self.embeddings
        if not same and recorded == given:
            raise InvalidInputError(
                f"this store's passages were embedded by another {given} than this one "
                "(it embeds a stored passage differently, and its name tells no setting "
                "apart): use the model they were embedded with"
            )
        if not same:
            raise InvalidInputError(
                f"this store's passages were embedded with {recorded}, not {given}: "
                f"use {recorded} (two models' vectors side by side rank at random)"
            )
        self._accepted_model = (recorded, given)
        return self.embeddings

    async def _record(self, *, fresh: bool) -> str | None:
        """The model the store records: read again when `fresh` (a write), when never read,
        or when read more than `MODEL_RECHECK_SECONDS` ago."""
        now = time.monotonic()
        last = self._record_read_at
        if fresh or last is None or now - last >= MODEL_RECHECK_SECONDS:
            self._recorded_model = await self.storage.recorded_model()
            self._record_read_at = now
        return self._recorded_model

    async def _embeds_as_stored(self, model: EmbeddingModel) -> bool | None:
        """Whether `model` embeds a stored passage as the store holds it (cosine at least
        `SAME_MODEL_COSINE`); None when the store holds no passage."""
        dimension = self.storage.dimension
        if dimension is None:
            return None
        axis = np.zeros(dimension, dtype=np.float32)
        axis[0] = 1.0
        sample = await self.storage.search_hits(axis, 1, EVERYTHING)
        stored = await self.storage.get([hit.id for hit in sample])
        if not stored:
            return None
        embedded = (await embed_documents(model, [stored[0].node.text]))[0]
        try:
            vector = unit(embedded, dimension)
        except ValueError:  # another size, or no direction at all: not this store's model
            return False
        return float(stored[0].embedding @ vector) >= SAME_MODEL_COSINE

    async def aembed_query(self, query: str) -> list[float]:
        """The query's embedding from the store's model."""
        if not isinstance(query, str) or is_blank(query):
            raise InvalidInputError("the query must be a non-empty string or a vector")
        check_utf8("the query", query)
        return await embed_query(await self._checked_model(writing=False), query)

    async def acheck_model(self) -> None:
        """Refuse now a model this store's passages were not embedded with, as its first
        search or write would: `graphstore mcp` started with the wrong one failed every call
        instead of at its start.  A store given no model passes."""
        if self.embeddings is not None:
            await self._checked_model(writing=False)

    async def _query_vector(self, query: Query) -> Any:
        """A unit query vector: embedded when `query` is text, checked when it is a vector."""
        if query is None or isinstance(query, (bool, int, float, bytes, dict)):
            raise InvalidInputError(
                f"the query must be a non-empty string or a vector, not {type(query).__name__}"
            )
        raw = await self.aembed_query(query) if isinstance(query, str) else query
        return self._unit(raw, self.storage.dimension)


TRAVERSAL_OPTIONS = frozenset(
    parameter.name
    for parameter in inspect.signature(GraphStore.atraversal_search).parameters.values()
    if parameter.kind is parameter.KEYWORD_ONLY
)
"""The options `traversal_search` takes (its keyword parameters): any other is refused."""
