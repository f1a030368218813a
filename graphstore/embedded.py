"""The embedded backend: one SQLite file on disk, exact cosine ranking in NumPy in memory.

SQLite gives the durability: every `upsert` or `delete` is one transaction (WAL journal), so
a process killed mid-write leaves the previous state, never a node without its tag rows.
Memory holds what ranking needs: a unit-embedding matrix, per tag the set of node slots (a
tag's posting list), and the filter index (`graphstore.filter_index`).  In one process a tag
row's denormalized embedding would be a second copy of the same bytes, so the posting list
points at the node's row of the matrix instead; the read path is the same as Cassandra's: one
lookup per tag, no node reads.  ``path=":memory:"`` (or ``"memory:"``) gives the same store
without a file, for tests.

On disk the tag rows are keyed by node, not by tag: the posting lists are rebuilt in memory
when the store opens, so the file is only ever read by node (re-writes, deletes, `check`),
and a node's rows land on one page.  Keyed by tag, as files from earlier versions have them
(they still work: every statement here reads by node or scans), each row went to a random
page of a growing B-tree: over a 12k-passage load the WAL pages written per tag row rose
from 0.33 to 1.24, and the time per passage with them.

Several processes may hold one file open.  Each write transaction stamps what it writes with
the next number of a change sequence (`nodes.seq`, and a tombstone per deleted node in
`deleted`), so before every operation a process asks SQLite whether another connection has
committed since it last looked (`PRAGMA data_version`, answered from the WAL index) and, if
so, reads only the rows stamped after the last number it has seen.  A write starts with the
same refresh under the write lock and updates memory only after its COMMIT, from entries
computed before its first statement.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from graphstore.errors import (
    CorruptRowError,
    InvalidInputError,
    StorageError,
    StoreOpenError,
    StoreReplacedError,
)
from graphstore.file_identity import file_identity, file_version
from graphstore.filter_index import FilterIndex, Mask
from graphstore.filters import EVERYTHING, Condition, FilterValues
from graphstore.links import TagKey, encode_links, incoming_tags, outgoing_tags
from graphstore.nodes import Node, StoredNode, TagHit, Vector, page_of
from graphstore.sqlite_file import cause, open_file, rows_where_in
from graphstore.storage import (
    ScoredNode,
    Storage,
    StoreStats,
    check_utf8_columns,
    corrupt_row,
    decode_node,
    values_by_id,
)

STAMPED = (
    "SELECT EXISTS (SELECT 1 FROM nodes WHERE seq = ?) "
    "OR EXISTS (SELECT 1 FROM deleted WHERE seq = ?)"
)
"""Whether a write transaction stamped any row with its change-sequence number."""


def _top_k(scores: NDArray[np.float32], k: int) -> NDArray[np.intp]:
    """Indices of the `k` largest scores, best first."""
    if k < scores.size:
        best = np.argpartition(-scores, k - 1)[:k]
        return best[np.argsort(-scores[best], kind="stable")]
    return np.argsort(-scores, kind="stable")


RANKED = 1024
"""How many of a query's best slots are kept in order with its scores (see `_QueryScores`)."""
WALK_HITS = 2
"""A tag is looked up in the ranked slots when they should hold this many times `k` of its
members (its share of the store × `RANKED` ≥ `WALK_HITS` × k); otherwise its own slots are
ranked.  At 100k passages a walk takes 2-30 µs, a failed one (members ranked low) ~30 µs,
ranking a 1.6k-member tag's own scores ~40 µs and a 75k-member one's ~1 ms."""
FULL_SCAN_SHARE = 8
"""A tag holding at least 1/`FULL_SCAN_SHARE` of the store is ranked from the scores of the
whole matrix (computed once per query vector) when none are kept yet: gathered rows cost
5-15× more per row than a scan in place (at 100k, 7.5k gathered rows ~9 ms, a scan ~18 ms
on a busy machine)."""
MEMO_QUERIES = 4
"""Query vectors whose scores are kept (concurrent searches each keep theirs)."""
BATCHED_TAG = 256
"""Tags with at most this many members are ranked together (`_Index.nearest_in_tags`)."""
SORTED_IN_PYTHON = 128
"""Small tags with at most this many members in all are sorted in Python: below that, the
dozen NumPy calls that rank many together cost more (2 tags of 10 members: 5 µs against
14 µs; 4 tags of 160 members: 24 against 22 µs)."""


@dataclass(frozen=True)
class _QueryScores:
    """One query vector scored against every slot (free slots -inf), and its `RANKED` best
    slots, best first.  One search asks for the same vector's roots and its tags' nearest:
    the matrix is scanned once, and a tag on most of the store is answered from the best
    slots overall (its k best members are among them) instead of gathering its rows."""

    version: int
    scores: NDArray[np.float32]
    live: int

    @cached_property
    def ranked(self) -> list[int]:
        """Ranked when a tag first needs it: a similarity search, and a graph search that
        meets no tag on much of the store, never do.  Ranked with every query's scores, it
        cost similarity at k = 10 an eighth of its time (HotpotQA, 994 passages: 406 µs
        against 345; 2WikiMultihopQA, 7,005: 1,001 against 891; A/B in one process)."""
        ranked: list[int] = _top_k(self.scores, min(RANKED, self.live)).tolist()
        return ranked


@dataclass(frozen=True)
class _Entry:
    """What the index keeps of one node, computed before the write that stores it."""

    id: str
    embedding: Vector
    outgoing: frozenset[TagKey]
    incoming: frozenset[TagKey]
    values: FilterValues

    @classmethod
    def of(cls, stored: StoredNode) -> _Entry:
        node = stored.node
        outgoing, incoming = outgoing_tags(node.links), incoming_tags(node.links)
        return cls(
            node.id,
            stored.embedding,
            outgoing,
            outgoing if incoming == outgoing else incoming,  # bidirectional links: one set
            FilterValues.of_metadata(node.metadata),
        )


class _Index:
    """The in-memory ranking structures, loaded from the file and refreshed from its changes."""

    def __init__(self, dimension: int | None) -> None:
        self.dimension = dimension
        self.matrix = np.zeros((0, dimension or 0), dtype=np.float32)
        self.ids: list[str | None] = []
        self.page_at: list[str] = []
        """Per slot, the page of its node (`nodes.page_of`), for `pages`."""
        self.slot_of: dict[str, int] = {}
        self.free: list[int] = []
        self.outgoing: dict[int, frozenset[TagKey]] = {}
        self.incoming: dict[int, frozenset[TagKey]] = {}
        self.postings: dict[TagKey, set[int]] = {}
        self.filters = FilterIndex()
        self._posting_arrays: dict[TagKey, NDArray[np.intp]] = {}
        self._page_counts: dict[TagKey, int] = {}
        self._leads: dict[int, frozenset[TagKey]] = {}
        """Per slot, the outgoing tags that lead to another node (see `leads`)."""
        self.version = 0
        """Bumped by every change, so a query's scores are never reused across one."""
        self._scored: dict[bytes, _QueryScores] = {}

    def _slot(self) -> int:
        if self.free:
            return self.free.pop()
        slot = len(self.ids)
        self.ids.append(None)
        self.page_at.append("")
        if slot >= self.matrix.shape[0]:
            grown = np.zeros((max(16, 2 * self.matrix.shape[0]), self.matrix.shape[1]), np.float32)
            grown[: self.matrix.shape[0]] = self.matrix
            self.matrix = grown
        return slot

    def set_dimension(self, dimension: int) -> None:
        if self.dimension is None:
            self.dimension = dimension
            self.matrix = np.zeros((0, dimension), dtype=np.float32)

    def put(self, entry: _Entry) -> None:
        self.set_dimension(entry.embedding.size)
        self.remove(entry.id)
        self.version += 1
        self._leads.clear()
        slot = self._slot()
        self.ids[slot] = entry.id
        self.page_at[slot] = page_of(entry.id)
        self.slot_of[entry.id] = slot
        self.matrix[slot] = entry.embedding
        self.outgoing[slot] = entry.outgoing
        self.incoming[slot] = entry.incoming
        self.filters.add(slot, entry.values)
        for tag in self.incoming[slot]:
            self.postings.setdefault(tag, set()).add(slot)
            self._posting_arrays.pop(tag, None)
            self._page_counts.pop(tag, None)

    def remove(self, node_id: str) -> bool:
        slot = self.slot_of.pop(node_id, None)
        if slot is None:
            return False
        self.version += 1
        self._leads.clear()
        for tag in self.incoming.pop(slot):
            self.postings[tag].discard(slot)
            self._posting_arrays.pop(tag, None)
            self._page_counts.pop(tag, None)
            if not self.postings[tag]:
                del self.postings[tag]
        self.filters.discard(slot)
        del self.outgoing[slot]
        self.ids[slot] = None
        self.matrix[slot] = 0.0
        self.free.append(slot)
        return True

    def leads(self, slot: int) -> frozenset[TagKey]:
        """The slot's outgoing tags that some other node links in to.  A traversal step on
        any other tag could return only this node, so it is left out of the slot's hits:
        with keyword links most tags a passage carries are its alone.  Kept until the next
        change."""
        known = self._leads.get(slot)
        if known is None:
            outgoing, postings = self.outgoing[slot], self.postings
            known = frozenset(
                tag
                for tag in outgoing
                if len(posting := postings.get(tag, ())) > 1 or (posting and slot not in posting)
            )
            known = outgoing if len(known) == len(outgoing) else known
            self._leads[slot] = known
        return known

    def tag_hits(self, ranked: Sequence[Sequence[tuple[int, float]]]) -> list[list[TagHit]]:
        """Ranked `(slot, score)` pages as hits: embeddings copied in one gather, and the
        tags that lead on (`leads`) read from its cache where known."""
        rows = iter(self.matrix[[slot for page in ranked for slot, _ in page]])
        ids, known, leads = self.ids, self._leads, self.leads
        return [
            [
                TagHit(ids[slot] or "", next(rows), known.get(slot) or leads(slot), score)
                for slot, score in page
            ]
            for page in ranked
        ]

    def pages(self, tag: TagKey, allowed: Mask | None) -> int:
        """How many pages the `allowed` slots under `tag` belong to (kept until the tag
        changes when no filter applies)."""
        if allowed is not None:
            return len({self.page_at[slot] for slot in self.candidates(tag, allowed)})
        count = self._page_counts.get(tag)
        if count is None:
            count = len({self.page_at[slot] for slot in self.postings.get(tag, ())})
            self._page_counts[tag] = count
        return count

    def allowed(self, where: Condition) -> Mask | None:
        """Which slots pass `where` (None: all, no filter): computed once per search call."""
        return self.filters.mask(where, len(self.ids))

    def candidates(self, tag: TagKey | None, allowed: Mask | None) -> NDArray[np.intp]:
        """The slots under `tag` (all live slots when None) that are `allowed`."""
        if tag is None:
            slots = np.fromiter(self.slot_of.values(), dtype=np.intp, count=len(self.slot_of))
        else:
            cached = self._posting_arrays.get(tag)
            if cached is None:
                posting = self.postings.get(tag, set())
                cached = np.fromiter(posting, dtype=np.intp, count=len(posting))
                self._posting_arrays[tag] = cached
            slots = cached
        return slots if allowed is None else slots[allowed[slots]]

    def query_scores(self, vector: Vector, *, fresh: bool = False) -> _QueryScores:
        """`vector` scored against the whole matrix in place, kept until the next change or
        the next `fresh` request (a search's roots: one scan per search, never one search's
        scores reused by another, so every search pays for its own)."""
        known = None if fresh else self._scored_now(vector)
        if known is not None:
            return known
        scores = self.matrix[: len(self.ids)] @ vector
        if self.free:
            scores[self.free] = -np.inf
        current = {k: v for k, v in self._scored.items() if v.version == self.version}
        self._scored = dict(list(current.items())[1 - MEMO_QUERIES :]) if current else {}
        scored = _QueryScores(self.version, scores, len(self.slot_of))
        self._scored[vector.tobytes()] = scored
        return scored

    def nearest(
        self, vector: Vector, k: int, tag: TagKey | None, allowed: Mask | None
    ) -> list[tuple[int, float]]:
        live = len(self.slot_of)
        if live == 0 or k <= 0:
            return []
        if tag is None and allowed is None:
            scores = self.query_scores(vector, fresh=True).scores
            return [(int(i), float(scores[i])) for i in _top_k(scores, min(k, live))]
        scored = None if tag is None else self._scored_now(vector)
        if tag is not None and allowed is None:
            members = self.postings.get(tag, set())
            if scored is None and len(members) * FULL_SCAN_SHARE >= live:
                scored = self.query_scores(vector)
            if scored is not None and len(members) * RANKED >= WALK_HITS * k * live:
                found = self._walk(scored, members, k)
                if found is not None:
                    return found
        slots = self.candidates(tag, allowed)
        if slots.size == 0:
            return []
        if scored is None and slots.size * FULL_SCAN_SHARE >= live:
            scored = self.query_scores(vector, fresh=tag is None)
        scores = self.matrix[slots] @ vector if scored is None else scored.scores[slots]
        return [(int(slots[i]), float(scores[i])) for i in _top_k(scores, k)]

    def nearest_in_tags(
        self, vector: Vector, k: int, tags: Sequence[TagKey | None], allowed: Mask | None
    ) -> list[list[tuple[int, float]]]:
        """`nearest` for each of `tags`; the small ones (at most `BATCHED_TAG` members) are
        ranked together in one pass, since a traversal step asks for dozens of tags whose
        members are a handful each, and per-tag NumPy calls cost more than the ranking
        (together a few dozen members: sorted in Python, `SORTED_IN_PYTHON`)."""
        found: list[list[tuple[int, float]]] = [[] for _ in tags]
        if not self.slot_of or k <= 0:
            return found
        batched: list[int] = []
        members: list[NDArray[np.intp]] = []
        for position, tag in enumerate(tags):
            if tag is None or len(self.postings.get(tag, ())) > BATCHED_TAG:
                found[position] = self.nearest(vector, k, tag, allowed)
                continue
            slots = self.candidates(tag, allowed)
            if slots.size:
                batched.append(position)
                members.append(slots)
        if not members:
            return found
        slots = members[0] if len(members) == 1 else np.concatenate(members)
        scored = self._scored_now(vector)
        scores = self.matrix[slots] @ vector if scored is None else scored.scores[slots]
        if slots.size <= SORTED_IN_PYTHON:
            pairs = list(zip(slots.tolist(), scores.tolist(), strict=True))
            offset = 0
            for tag_slots, position in zip(members, batched, strict=True):
                page = pairs[offset : offset + tag_slots.size]
                page.sort(key=lambda pair: -pair[1])  # best first, ties in stored order
                found[position] = page[:k]
                offset += tag_slots.size
            return found
        sizes = np.array([part.size for part in members])
        group = np.repeat(np.arange(len(members)), sizes)
        order = np.lexsort((-scores, group))  # by tag, then best first (ties: stored order)
        starts = np.cumsum(sizes) - sizes
        kept = order[np.arange(order.size) - starts[group] < k]
        bounds = np.searchsorted(group[kept], np.arange(len(members) + 1))
        kept_slots, kept_scores = slots[kept].tolist(), scores[kept].tolist()
        for part, position in enumerate(batched):
            start, end = bounds[part], bounds[part + 1]
            found[position] = list(zip(kept_slots[start:end], kept_scores[start:end], strict=True))
        return found

    def _scored_now(self, vector: Vector) -> _QueryScores | None:
        """This search's scores of `vector`, when its roots (or a large tag) scanned them."""
        known = self._scored.get(vector.tobytes())
        return known if known is not None and known.version == self.version else None

    @staticmethod
    def _walk(query: _QueryScores, members: set[int], k: int) -> list[tuple[int, float]] | None:
        """The `k` best of `members` read off the query's best slots overall, or None when
        fewer than `k` of them are there (then some member outside could beat them)."""
        found = []
        for slot in query.ranked:
            if slot in members:
                found.append((slot, float(query.scores[slot])))
                if len(found) == k:
                    return found
        return found if len(found) == len(members) else None


ORPHANS = "FROM tags WHERE node_id NOT IN (SELECT id FROM nodes)"
"""The tag rows of nodes that are not stored (`check` reports them, `repair` deletes them)."""
TEXT_ID_ROWS = "FROM nodes WHERE typeof(id) = 'text'"
"""The node rows graphstore can have written: an id SQLite holds as a BLOB (hand-written
SQL) names no passage, so reads leave it out, `check` reports it and `repair` deletes it."""
OTHER_ID_ROWS = "FROM nodes WHERE typeof(id) != 'text'"
"""The node rows `TEXT_ID_ROWS` leaves out."""
MEMORY = ":memory:"
"""SQLite's name for a store in memory; `memory:`, the command line's, means the same (it
created a file of that name)."""


class EmbeddedStorage(Storage):
    """A file-backed (or `:memory:`) store that needs no server.

    `timeout` is how long a write waits for another connection's write lock; `create`
    whether a missing file, or an SQLite file without a store, may be made a store.
    """

    read_ahead = 4
    """Reading ahead the tags of the 4 likeliest next selections cut a keyword-linked
    search's storage calls from 9 to 2.7 and its time by a tenth (a call costs ~30 µs) while
    hits still listed every outgoing tag; since they list only tags that lead elsewhere
    (`_Index.leads`) a search reads a few tags, and 0 and 4 measure the same."""

    def __init__(
        self, path: str | Path = MEMORY, *, timeout: float = 5.0, create: bool = True
    ) -> None:
        if not isinstance(path, (str, os.PathLike)) or not os.fspath(path).strip():
            raise InvalidInputError(f"the store path must be a non-empty path, got {path!r}")
        self.path = MEMORY if os.fspath(path) in (MEMORY, "memory:") else str(path)
        self.local_files = () if self.path == MEMORY else (os.path.abspath(self.path),)
        self.timeout = timeout
        self._lock = threading.RLock()
        self._in_transaction = False
        """Whether a `_transaction` of this storage is open (`_db.in_transaction` may also
        be true after an interrupt)."""
        self._closed = False
        """Set by `close`: a call after it says so, not SQLite's "Cannot operate on a
        closed database"."""
        stamp = file_version(self.path)  # before opening: a write from then on is seen
        opened = open_file(self.path, timeout, create=create)
        self._db = opened.connection
        self._file = None if self.path == MEMORY else file_identity(self.path)
        """The file opened (device, inode): a write checks the path still names it."""
        self.read_only = opened.read_only
        self._has_change_log = opened.has_change_log
        self._immutable_stamp = stamp if opened.immutable else None
        """The file as an `immutable` connection opened it (`_reopen_if_written`)."""
        self._index = _Index(None)
        self._corrupt: dict[str, str] = {}
        """Rows changed outside graphstore that cannot be decoded, with the reason: left out
        of the index (no search returns them), so the rest of the store stays usable;
        `check` and `stats` report them, and writing the node again repairs it."""
        self._seq = -1
        self._data_version: int | None = None
        self._reading = 0
        """Open `reading` spans (in the thread holding the lock): reads skip `_refresh`."""
        try:
            self._refresh()
        except sqlite3.Error as error:
            self._db.close()
            raise StoreOpenError(f"cannot open {self.path}: {cause(error, timeout)}") from error
        except BaseException:
            self._db.close()
            raise

    @contextmanager
    def _failures(self, action: str) -> Iterator[None]:
        """SQLite errors as one-line `StorageError`s naming the action, the file and the cause."""
        try:
            yield
        except sqlite3.Error as error:
            said = "the store was closed" if self._closed else cause(error, self.timeout)
            raise StorageError(f"{action} {self.path} failed: {said}") from error

    @contextmanager
    def _transaction(self, begin: str = "BEGIN") -> Iterator[None]:
        """One transaction (joined when this storage has one open), rolled back on any
        failure.

        SQLite has already rolled back after some errors (a full disk): ROLLBACK then only
        runs while a transaction is really open, so it never hides the cause.  A transaction
        open on the connection that is not this storage's was left by an interrupt (Ctrl-C
        between BEGIN and the handler that rolls back): it is rolled back here, since joining
        it, as any open transaction once was, left every later write uncommitted and the
        file locked until the store was closed, which then lost them.
        """
        if self._in_transaction:
            yield
            return
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")
        try:
            self._in_transaction = True
            self._db.execute(begin)
            yield
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                with suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
            raise
        finally:
            self._in_transaction = False

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Other connections' writes are taken in once, here; until the span ends, reads
        rank with that version of the index (this connection's own writes still show), and
        other threads wait for the lock (a search holds it about a millisecond)."""
        with self._lock, self._failures("reading"):
            self._refresh()
            self._reading += 1
            try:
                yield
            finally:
                self._reading -= 1

    def _fresh(self) -> None:
        """`_refresh`, unless a `reading` span did it at its start."""
        if not self._reading:
            self._refresh()

    def _check_file(self) -> None:
        """Refuse any read or write when the path no longer names the file opened: a
        long-running process (`graphstore mcp`) kept reading a store file deleted or replaced
        by a new ingest, answering from what was gone, and writing where no one would read.
        One message for both: a write reads the store's model record first, and was told
        "reading … failed"."""
        if self._file is not None and file_identity(self.local_files[0]) != self._file:
            raise StoreReplacedError(
                f"{self.path} was deleted or replaced since this store opened it: what it "
                "holds is gone or another store's, and a write would go to a file no one "
                "reads; open the store again",
                str(self.path),
            )

    def _reopen_if_written(self) -> None:
        """Connect again when another process has written a file opened `immutable` (read
        only, where no `-wal` or `-shm` could be made beside it): SQLite reads such a file as
        if no one changed it, and once the writer's commits reached it, reads of pages
        changed under it failed as "database disk image is malformed".  The new connection
        reads the file as it is now, through the writer's `-wal` and `-shm` when they are
        there (then it sees every later commit), and `_refresh` reads what changed."""
        if self._closed or self._immutable_stamp is None:
            return
        stamp = file_version(self.path)
        if stamp == self._immutable_stamp:
            return
        opened = open_file(self.path, self.timeout, create=False)
        self._db.close()
        self._db = opened.connection
        self._has_change_log = opened.has_change_log
        self._immutable_stamp = stamp if opened.immutable else None
        self._data_version = None

    def _refresh(self) -> None:
        """Bring memory up to what other connections committed, reading only what changed."""
        self._check_file()
        self._reopen_if_written()
        version = self._db.execute("PRAGMA data_version").fetchone()[0]
        if version == self._data_version:
            return
        with self._transaction():
            dimension = self._meta("dimension")
            if self._has_change_log:
                rows = self._db.execute(
                    f"SELECT id, metadata, links, embedding, seq {TEXT_ID_ROWS} AND seq > ?",
                    (self._seq,),
                ).fetchall()
                gone = self._db.execute(
                    "SELECT id, seq FROM deleted WHERE seq > ?", (self._seq,)
                ).fetchall()
            else:
                rows = self._db.execute(
                    f"SELECT id, metadata, links, embedding, 0 {TEXT_ID_ROWS}"
                ).fetchall()
                gone = []
        if not self._has_change_log:
            self._index = _Index(None)
            self._corrupt = {}
        if dimension is not None:
            if self._index.dimension not in (None, int(dimension)):
                self._index = _Index(int(dimension))  # emptied, then written at another
            self._index.set_dimension(int(dimension))
        for node_id, _ in gone:
            self._index.remove(node_id)
            self._corrupt.pop(node_id, None)
        for node_id, metadata, links, blob, _ in rows:
            entry = self._entry(node_id, metadata, links, blob)
            if isinstance(entry, str):
                self._index.remove(node_id)
                self._corrupt[node_id] = entry
            else:
                self._index.put(entry)
                self._corrupt.pop(node_id, None)
        self._seq = max([self._seq, *(row[-1] for row in rows), *(seq for _, seq in gone)])
        self._data_version = version

    def _node(self, node_id: str, text: str, metadata: str, links: str) -> Node:
        """A stored row as a node; a row changed outside graphstore is a one-line error."""
        try:
            return decode_node(node_id, text, metadata, links)
        except CorruptRowError as error:
            raise CorruptRowError(f"{self.path}: {error}") from None

    def _wrong_size(self, node_id: str, blob: bytes) -> str:
        """Why a row's embedding `blob` does not fit the store's dimension ("" when it fits)."""
        dimension = self._index.dimension
        if dimension is None or len(blob) == 4 * dimension:
            return ""
        return corrupt_row(node_id, f"its embedding has {len(blob)} bytes, not {4 * dimension}")

    def _entry(self, node_id: str, metadata: str, links: str, blob: bytes) -> _Entry | str:
        """A stored row's index entry, or why the row cannot be indexed (see `_corrupt`)."""
        wrong_size = self._wrong_size(node_id, blob)
        if wrong_size:
            return wrong_size
        try:
            node = decode_node(node_id, "", metadata, links)
        except CorruptRowError as error:
            return str(error)
        return _Entry.of(StoredNode(node, np.frombuffer(blob, dtype=np.float32)))

    def _meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    @property
    def dimension(self) -> int | None:
        with self._lock, self._failures("reading"):
            self._fresh()
            return self._index.dimension if self._index.slot_of or self._corrupt else None

    @contextmanager
    def _writing(self, action: str) -> Iterator[int]:
        """A write transaction that first takes in other connections' changes; yields the
        change-sequence number this write stamps its rows with."""
        if self.read_only:
            raise StorageError(
                f"{action} {self.path} failed: it is open read-only "
                "(the file or its folder is not writable)"
            )
        self._check_file()
        with self._failures(action), self._transaction("BEGIN IMMEDIATE"):
            self._refresh()
            seq = self._seq + 1
            yield seq
            stamped = (
                not self._has_change_log or self._db.execute(STAMPED, (seq, seq)).fetchone()[0]
            )
        if stamped:  # a write that stamped nothing (a delete of unknown ids) leaves `seq`
            self._seq = seq  # to the next writer: skipping it would miss that writer's rows

    @contextmanager
    def _refusing(self, node_id: str) -> Iterator[None]:
        """A node SQLite or JSON cannot take (a lone surrogate, an int too long to print) as a
        one-line `InvalidInputError`; the write it is part of then rolls back whole."""
        try:
            yield
        except (ValueError, OverflowError, RecursionError) as error:
            raise InvalidInputError(
                f"node {node_id!r} cannot be stored in {self.path}: {error}"
            ) from error

    async def upsert(self, nodes: Sequence[StoredNode]) -> None:
        entries: list[_Entry] = []
        for stored in nodes:
            with self._refusing(stored.node.id):
                entries.append(_Entry.of(stored))
        with self._lock:
            with self._writing("writing to") as seq:
                if nodes:
                    self._set_dimension(nodes[0].embedding.size)
                for stored in nodes:  # all of one dimension, or the write rolls back
                    if stored.embedding.size != nodes[0].embedding.size:
                        raise InvalidInputError(
                            f"embedding of node {stored.node.id!r} has dimension "
                            f"{stored.embedding.size}; the write's first has "
                            f"{nodes[0].embedding.size}"
                        )
                    self._write(stored, seq)
            if entries and self._index.dimension != entries[0].embedding.size:
                self._index = _Index(entries[0].embedding.size)  # it held nothing
            for entry in entries:
                self._index.put(entry)
                self._corrupt.pop(entry.id, None)

    def _set_dimension(self, size: int) -> None:
        """Record `size` as the store's dimension: in a new store, or in one emptied by
        `delete`, which takes the dimension of its next write as it takes its model (a store
        emptied once refused another model's vectors for good)."""
        dimension = self._meta("dimension")
        if dimension is None:
            self._db.execute("INSERT INTO meta VALUES ('dimension', ?)", (str(size),))
        elif int(dimension) != size:
            if self._db.execute("SELECT 1 FROM nodes LIMIT 1").fetchone() is not None:
                raise InvalidInputError(
                    f"embeddings have {size} dimensions but {self.path} holds {dimension}"
                )
            self._db.execute("UPDATE meta SET value = ? WHERE key = 'dimension'", (str(size),))

    def _write(self, stored: StoredNode, seq: int) -> None:
        node = stored.node
        with self._refusing(node.id):
            self._db.execute("DELETE FROM tags WHERE node_id = ?", (node.id,))
            self._db.execute(
                "INSERT OR REPLACE INTO nodes (id, text, metadata, links, embedding, seq) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    node.id,
                    node.text,
                    json.dumps(node.metadata, ensure_ascii=False),
                    encode_links(node.links),
                    stored.embedding.astype(np.float32).tobytes(),
                    seq,
                ),
            )
            self._write_tag_rows(node.id, incoming_tags(node.links))

    def _write_tag_rows(self, node_id: str, tags: Iterable[TagKey]) -> None:
        self._db.executemany(
            "INSERT INTO tags VALUES (?, ?, ?)",
            [(kind, tag, node_id) for kind, tag in sorted(tags)],
        )

    async def delete(self, ids: Sequence[str]) -> int:
        with self._lock:
            removed: list[str] = []
            with self._writing("deleting nodes in") as seq:
                for node_id in dict.fromkeys(ids):
                    self._db.execute("DELETE FROM tags WHERE node_id = ?", (node_id,))
                    if self._db.execute("DELETE FROM nodes WHERE id = ?", (node_id,)).rowcount:
                        self._db.execute(
                            "INSERT OR REPLACE INTO deleted VALUES (?, ?)", (node_id, seq)
                        )
                        removed.append(node_id)
            for node_id in removed:
                self._index.remove(node_id)
                self._corrupt.pop(node_id, None)
            return len(removed)

    def _rows(self, ids: Sequence[str]) -> list[StoredNode]:
        found: dict[str, StoredNode] = {}
        unique = list(dict.fromkeys(ids))
        select = "SELECT id, text, metadata, links, embedding FROM nodes"
        for node_id, text, metadata, links, blob in rows_where_in(self._db, select, "id", unique):
            wrong_size = self._wrong_size(node_id, blob)
            if wrong_size:
                raise CorruptRowError(f"{self.path}: {wrong_size}")
            node = self._node(node_id, text, metadata, links)
            found[node_id] = StoredNode(node, np.frombuffer(blob, dtype=np.float32))
        return [found[node_id] for node_id in ids if node_id in found]

    async def get(self, ids: Sequence[str]) -> list[StoredNode]:
        with self._lock, self._failures("reading"), self._transaction():
            self._fresh()
            return self._rows(ids)

    async def search(self, vector: Vector, k: int, where: Condition) -> list[ScoredNode]:
        with self._lock, self._failures("reading"), self._transaction():
            self._fresh()
            ranked = self._index.nearest(vector, k, None, self._index.allowed(where))
            ids = [self._index.ids[slot] or "" for slot, _ in ranked]
            stored = {item.node.id: item for item in self._rows(ids)}
        return [
            ScoredNode(stored[node_id], score)
            for node_id, (_, score) in zip(ids, ranked, strict=True)
            if node_id in stored
        ]

    async def search_tag(
        self, tag: TagKey, vector: Vector, k: int, where: Condition
    ) -> list[TagHit]:
        return (await self.search_tags([tag], vector, k, where))[0]

    async def search_hits(self, vector: Vector, k: int, where: Condition) -> list[TagHit]:
        return (await self.search_tags([None], vector, k, where))[0]

    async def search_tags(
        self,
        tags: Sequence[TagKey | None],
        vector: Vector,
        k: int,
        where: Condition,
        concurrency: int = 16,
        *,
        sizes: dict[TagKey, int] | None = None,
        pages: dict[TagKey, int] | None = None,
    ) -> list[list[TagHit]]:
        """One pass for all `tags` (`_Index.nearest_in_tags`); unfiltered, their sizes come
        with it.  `pages` is left alone: counting every tag's pages costs more than the
        few `tag_pages` calls a traversal makes, each a lookup in memory."""
        with self._lock, self._failures("reading"):
            self._fresh()
            index = self._index
            allowed = index.allowed(where)
            found = index.tag_hits(index.nearest_in_tags(vector, k, tags, allowed))
            if sizes is not None and allowed is None:
                postings = index.postings
                sizes.update((tag, len(postings.get(tag, ()))) for tag in tags if tag is not None)
            return found

    async def tag_sizes(
        self, tags: Sequence[TagKey], where: Condition = EVERYTHING
    ) -> dict[TagKey, int]:
        with self._lock, self._failures("reading"):
            self._fresh()
            allowed = self._index.allowed(where)
            if allowed is None:  # the posting lists' own counts, nothing rebuilt
                return {tag: len(self._index.postings.get(tag, ())) for tag in tags}
            return {tag: len(self._index.candidates(tag, allowed)) for tag in tags}

    async def tag_pages(
        self, tags: Sequence[TagKey], where: Condition = EVERYTHING
    ) -> dict[TagKey, int]:
        with self._lock, self._failures("reading"):
            self._fresh()
            allowed = self._index.allowed(where)
            return {tag: self._index.pages(tag, allowed) for tag in tags}

    async def recorded_model(self) -> str | None:
        with self._lock, self._failures("reading"):
            self._check_file()
            return self._meta("model")

    async def record_model(self, model: str, replacing: str | None = None) -> str:
        with self._lock:
            if self.read_only:  # reading what is recorded still works
                return self._meta("model") or model
            with self._failures("writing to"), self._transaction("BEGIN IMMEDIATE"):
                if replacing is None:
                    self._db.execute("INSERT OR IGNORE INTO meta VALUES ('model', ?)", (model,))
                else:
                    self._db.execute(
                        "UPDATE meta SET value = ? WHERE key = 'model' AND value = ?",
                        (model, replacing),
                    )
                return self._meta("model") or model

    async def stats(self, top_tags: int = 20) -> StoreStats:
        with self._lock, self._failures("reading"):
            self._refresh()
            postings = self._index.postings
            frequent = sorted(postings, key=lambda tag: (-len(postings[tag]), tag))[:top_tags]
            return StoreStats(
                nodes=len(self._index.slot_of),
                tag_rows=sum(len(slots) for slots in postings.values()),
                tags=len(postings),
                dimension=self._index.dimension,
                tag_frequencies={tag: len(postings[tag]) for tag in frequent},
                corrupt_rows=len(self._corrupt),
            )

    async def node_ids(self) -> list[str]:
        with self._lock, self._failures("reading"):
            self._check_file()
            return [row[0] for row in self._db.execute(f"SELECT id {TEXT_ID_ROWS}")]

    async def metadata_values(self, key: str) -> dict[str, object]:
        with self._lock, self._failures("reading"), self._transaction():
            self._check_file()
            rows = self._db.execute(f"SELECT id, metadata {TEXT_ID_ROWS}")
            return values_by_id(rows, key)

    async def check(self) -> list[str]:
        with self._lock, self._failures("checking"), self._transaction():
            self._refresh()
            problems = [
                f"tag row ({kind!r}, {tag!r}) points at missing node {node_id!r}"
                for kind, tag, node_id in self._db.execute(f"SELECT kind, tag, node_id {ORPHANS}")
            ]
            problems += [
                corrupt_row(node_id, "its id is not text; `check --repair` deletes it")
                for (node_id,) in self._db.execute(f"SELECT id {OTHER_ID_ROWS}")
            ]
            rows = self._tag_rows_by_node()
            for node_id, text, metadata, links, blob in self._db.execute(
                f"SELECT id, text, metadata, links, embedding {TEXT_ID_ROWS}"
            ):
                entry = self._entry(node_id, metadata, links, blob)
                if isinstance(entry, str):
                    problems.append(f"{entry}: left out of searches; ingest it again to repair")
                    continue
                try:  # the index reads no text: a search returning this row fails
                    check_utf8_columns(node_id, text=text)
                except CorruptRowError as error:
                    problems.append(f"{error}: ingest it again to repair")
                actual = rows.get(node_id, set())
                if entry.incoming != actual:
                    problems.append(
                        f"node {node_id!r} has tag rows {sorted(actual)} "
                        f"but incoming links {sorted(entry.incoming)}"
                    )
            return problems

    def _tag_rows_by_node(self) -> dict[str, set[TagKey]]:
        """The tags each node has rows of, from the tag table (for `check` and `repair`)."""
        rows: dict[str, set[TagKey]] = {}
        for kind, tag, node_id in self._db.execute("SELECT kind, tag, node_id FROM tags"):
            rows.setdefault(node_id, set()).add((kind, tag))
        return rows

    async def repair(self) -> list[str]:
        """Delete the tag rows of missing nodes and write a readable node's rows again where
        they are not its incoming tags (on disk only: searches read the node rows)."""
        with self._lock, self._writing("repairing"):
            done = [
                f"deleted the row of missing node {node_id!r} under tag ({kind!r}, {tag!r})"
                for kind, tag, node_id in self._db.execute(f"SELECT kind, tag, node_id {ORPHANS}")
            ]
            self._db.execute(f"DELETE {ORPHANS}")
            done += [
                f"deleted the row of id {node_id!r}, which is not text"
                for (node_id,) in self._db.execute(f"SELECT id {OTHER_ID_ROWS}")
            ]
            self._db.execute(f"DELETE {OTHER_ID_ROWS}")
            rows = self._tag_rows_by_node()
            for node_id, metadata, links, blob in self._db.execute(
                f"SELECT id, metadata, links, embedding {TEXT_ID_ROWS}"
            ).fetchall():
                entry = self._entry(node_id, metadata, links, blob)
                if isinstance(entry, str) or entry.incoming == rows.get(node_id, set()):
                    continue
                self._db.execute("DELETE FROM tags WHERE node_id = ?", (node_id,))
                self._write_tag_rows(node_id, entry.incoming)
                done.append(f"wrote the tag rows of node {node_id!r} again")
            return sorted(done)

    async def close(self) -> None:
        with self._lock:
            self._closed = True
            self._db.close()
