"""The narrow interface every backend implements; the traversal engine sees nothing else.

The data model is the bipartite node–tag graph.  A backend keeps one record per node
(text, embedding, metadata, links) and one record per (incoming tag, node) that carries the
node's embedding, outgoing tags and filter terms, so `search_tag` answers "the nearest nodes
under this tag" from the tag's own rows.  No edge between two nodes is ever stored.
"""

from __future__ import annotations

import asyncio
import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

from graphstore.errors import CorruptRowError
from graphstore.filters import EVERYTHING, Condition
from graphstore.links import TagKey, decode_links
from graphstore.nodes import Node, StoredNode, TagHit, Vector
from graphstore.utf8 import is_utf8

CORRUPT_ROW = "is corrupt (changed outside graphstore?)"


def corrupt_row(node_id: str, reason: object) -> str:
    """What is said of a node row that was changed outside graphstore and cannot be read."""
    told = str(reason).splitlines()[0] if str(reason) else type(reason).__name__
    return f"the row of {node_id!r} {CORRUPT_ROW}: {told}"


def check_utf8_columns(node_id: str, **columns: str | bytes) -> None:
    """A one-line `CorruptRowError` naming the first of a row's `columns` that is not UTF-8
    (read through `sqlite_file.lenient_text`) or not text at all (a BLOB, which SQLite
    returns as bytes whatever the column's type)."""
    for column, value in columns.items():
        if isinstance(value, bytes):
            raise CorruptRowError(corrupt_row(node_id, f"its {column} is a BLOB, not text"))
        if not value.isascii() and not is_utf8(value):
            raise CorruptRowError(corrupt_row(node_id, f"its {column} is not UTF-8"))


def decode_node(node_id: str, text: str, metadata: str, links: str) -> Node:
    """A node from its row's JSON columns; a row that is not graphstore's (metadata that is
    no JSON object, links that are no link list, a column that is not UTF-8: see
    `sqlite_file.lenient_text`) is a one-line `CorruptRowError`."""
    check_utf8_columns(node_id, text=text, metadata=metadata, links=links)
    try:
        decoded = json.loads(metadata)
        if not isinstance(decoded, dict):
            raise TypeError("metadata is not a JSON object")
        return Node(node_id, text, decoded, decode_links(links))
    except RecursionError:
        raise CorruptRowError(corrupt_row(node_id, "metadata nested too deep")) from None
    except (ValueError, TypeError) as error:
        raise CorruptRowError(corrupt_row(node_id, error)) from None


def values_by_id(rows: Iterable[tuple[str, str]], key: str) -> dict[str, object]:
    """The value of metadata `key` by node id, from (id, metadata JSON) rows, for the nodes
    whose metadata holds it.  A row changed outside graphstore that cannot be decoded holds
    none: `check` reports it, and a scan for bookkeeping must not stop at it."""
    found: dict[str, object] = {}
    for node_id, metadata in rows:
        try:
            decoded = json.loads(metadata)
        except (ValueError, TypeError, RecursionError):
            continue
        if isinstance(decoded, dict) and key in decoded:
            found[node_id] = decoded[key]
    return found


@dataclass(frozen=True)
class ScoredNode:
    """A node from a vector search, with its cosine similarity to the query."""

    stored: StoredNode
    similarity: float


@dataclass(frozen=True)
class StoreStats:
    """Counts for `graphstore stats` and for consistency checks."""

    nodes: int
    tag_rows: int
    tags: int
    dimension: int | None
    tag_frequencies: dict[TagKey, int] = field(default_factory=dict)
    """How many nodes link in to each tag (only the most frequent, when the backend caps it)."""
    corrupt_rows: int = 0
    """Node rows changed outside graphstore that cannot be read (left out of searches;
    `check` lists them).  Backends that decode rows only when reading them count none."""


class Storage(ABC):
    """A backend: node rows plus per-tag rows, searched by cosine similarity.

    Vectors passed in are unit length (see `graphstore.nodes.unit`).  `where` is a parsed
    filter (`graphstore.filters.parse_filter`); a node passes when `filters.matches` says so
    of its metadata, and every search returns only nodes that pass.
    """

    check_note = ""
    """Said after `check` reports problems: what may explain them on this backend."""

    def check_note_for(self, problems: Sequence[str]) -> str:
        """`check_note` when `problems` hold one it may explain ("" otherwise): a corrupt
        row (`corrupt_row`) is explained only by a change made outside graphstore."""
        explained = any(CORRUPT_ROW not in problem for problem in problems)
        return self.check_note if explained else ""

    local_files: tuple[str, ...] = ()
    """The files this backend keeps on this machine, as absolute paths: an ingest of the
    folder holding one does not read it as a document (a store named `notes.txt`)."""

    def check_write_size(self, node: Node, dimension: int | None) -> None:
        """Refuse in one line (`InvalidInputError`) a node whose write this backend is sure
        to refuse as too large, so that `add_nodes` and an ingest refuse it before their
        first write; `dimension` is the store's, when known.  No limit by default."""
        return

    read_ahead = 0
    """How many of the likeliest next selections a traversal step also reads the tags of.
    Worth it where a round trip costs more than reading a few more tags in the same one (a
    server); a read-ahead never changes a result, since a tag's page depends only on the
    tag, the query, `k` and the filter."""

    def reading(self) -> AbstractContextManager[None]:
        """A span of reads that may all be served from one view of the store: one search.

        The embedded backend checks for other connections' writes once, at the start, not
        at each of a search's five or so calls (those checks were ~8 % of a default search's
        graph work on 2WikiMultihopQA), so a search ranks with one version of its index.  A
        server backend has nothing to pin.  The embedded backend holds its lock for the
        span: nothing inside may await anything that waits."""
        return nullcontext()

    @property
    @abstractmethod
    def dimension(self) -> int | None:
        """The dimension of the embeddings the store takes, or None while any will do: the
        embedded backend's is that of the passages it holds (an emptied store takes its next
        write's); Cassandra's is fixed by its tables' vector column once they exist."""

    @abstractmethod
    async def upsert(self, nodes: Sequence[StoredNode]) -> None:
        """Write nodes with their tag rows, replacing earlier versions with the same ids.

        A node whose links changed keeps no tag row of a link it no longer has.  Each node is
        written completely or not at all.
        """

    @abstractmethod
    async def delete(self, ids: Sequence[str]) -> int:
        """Remove nodes and all their tag rows; return how many nodes existed."""

    @abstractmethod
    async def get(self, ids: Sequence[str]) -> list[StoredNode]:
        """The stored nodes with these ids, in the order asked, skipping unknown ids."""

    @abstractmethod
    async def search(self, vector: Vector, k: int, where: Condition) -> list[ScoredNode]:
        """The `k` nodes nearest to `vector` among those that pass `where`."""

    @abstractmethod
    async def search_hits(self, vector: Vector, k: int, where: Condition) -> list[TagHit]:
        """`search` as `TagHit`s (id, embedding, outgoing tags, similarity): what traversal
        needs of a root, without reading its text and metadata.  Unlike `search`'s, a hit may
        name a node deleted since (a vector index's rows need not be current), so a search
        reads the nodes it returns with `get`."""

    @abstractmethod
    async def search_tag(
        self, tag: TagKey, vector: Vector, k: int, where: Condition
    ) -> list[TagHit]:
        """The `k` nodes linking in to `tag` that pass `where` nearest to `vector`, read from
        the tag's rows."""

    async def search_tags(
        self,
        tags: Sequence[TagKey],
        vector: Vector,
        k: int,
        where: Condition,
        concurrency: int = 16,
        *,
        sizes: dict[TagKey, int] | None = None,
        pages: dict[TagKey, int] | None = None,
    ) -> list[list[TagHit]]:
        """`search_tag` for each of `tags` (in order), at most `concurrency` at once.

        One traversal step asks for all its tags together; a backend that can answer them
        in one pass (the embedded one) overrides this.  A backend that learns a tag's size
        (as `tag_sizes` counts it) or its pages (as `tag_pages` counts them) from the same
        reads puts them in `sizes` and `pages` when given, sparing a traversal a round of
        counts (Cassandra, which reads small tags whole).
        """
        gate = asyncio.Semaphore(concurrency)

        async def one(tag: TagKey) -> list[TagHit]:
            async with gate:
                return await self.search_tag(tag, vector, k, where)

        return list(await asyncio.gather(*(one(tag) for tag in tags)))

    @abstractmethod
    async def tag_sizes(
        self, tags: Sequence[TagKey], where: Condition = EVERYTHING
    ) -> dict[TagKey, int]:
        """How many nodes that pass `where` link in to each tag (0 for none): how
        specific a tag is among the passages a search may return, for path-aware relevance."""

    @abstractmethod
    async def tag_pages(
        self, tags: Sequence[TagKey], where: Condition = EVERYTHING
    ) -> dict[TagKey, int]:
        """How many pages (`nodes.page_of`: the files of ingested passages) the nodes that
        pass `where` and link in to each tag belong to (0 for none): a tag citing a page
        split into passages names one thing, however many passages it leads to
        (`relevance.page_leads`)."""

    @abstractmethod
    async def recorded_model(self) -> str | None:
        """The embedding model the store's passages were embedded with
        (`graphstore.models.model_id`), or None when none is recorded."""

    @abstractmethod
    async def record_model(self, model: str, replacing: str | None = None) -> str:
        """Record `model` as the store's embedding model unless one is recorded already (by
        any process, atomically); return the one recorded.  With `replacing`, replace the
        record while it still names `replacing` (a store holding no passage takes the model
        of the next write)."""

    @abstractmethod
    async def stats(self, top_tags: int = 20) -> StoreStats:
        """Node, tag and tag-row counts, and the `top_tags` most frequent tags."""

    @abstractmethod
    async def node_ids(self) -> list[str]:
        """Every node id: a full scan, for maintenance (a card ingest finding the stored
        cards)."""

    @abstractmethod
    async def metadata_values(self, key: str) -> dict[str, object]:
        """The value of metadata `key` of every node that has one, by id: a full scan of the
        metadata alone (`storage.values_by_id`), for maintenance (an ingest finding the
        files its passages were read from) without reading texts and embeddings."""

    @abstractmethod
    async def check(self) -> list[str]:
        """Problems found comparing node rows with tag rows; empty when consistent."""

    @abstractmethod
    async def repair(self) -> list[str]:
        """Make the tag rows agree with the node rows again where `check` finds they do not
        and writing the passages again would not mend it (a row whose node is gone, a count
        left off by a crash); one line per change.  Node rows are kept as they are (one that
        cannot be read is left with its tag rows: ingest it again).  Run it while nothing
        else writes to the store."""

    @abstractmethod
    async def close(self) -> None:
        """Release files, sessions and threads."""
