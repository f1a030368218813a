"""Maximal marginal relevance over a candidate pool that grows while selecting.

score(c) = λ · rel(c) − (1 − λ) · max_{s ∈ selected, s ∉ cited(c)} sim(c, s)

rel(c) is the candidate's relevance: its similarity to the query unless the caller gives
another (the traversal gives a path-aware one, `graphstore.relevance`), and it may be raised
later when a better path to the candidate is found.  cited(c) is the selected passage that
led to c by naming it (a mention, a hyperlink), when there is one: a passage that names
another resembles it because it talks about it, not because it says the same thing, so that
resemblance is not redundancy.  (Counting it sent the song a singer is known for below
unrelated singers, since the song's page resembles the singer's.)

A candidate whose embedding is that of a selected one (cosine ≥ `COPY_SIMILARITY`: the same
text, as a page's footer or an included paragraph is on every page) is a copy and is never
selected: MMR's redundancy term, weighted by 1 − λ (0.1 by default), only lowered it a
little, and copies took places a user and a writer's prompt would rather give to more.

Both terms keep their weights for the whole search.  (LangChain's `MmrHelper` weights the
redundancy by 1 − λ when a candidate is added but overwrites it with the raw similarity
after each selection, so its λ silently stops applying; `test_mmr.py` pins the difference.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from graphstore.nodes import Vector

COPY_SIMILARITY = 0.99999
"""The cosine from which two candidates are one text (a copy is closed, never selected):
one text's embeddings agree to float32 rounding, and distinct texts stay below (the closest
two passages of HotpotQA's corpus: 0.977; of 2WikiMultihopQA's 7,005: 0.996)."""

INITIAL_CAPACITY = 64
"""Pool rows allocated up front (a default search considers a few dozen candidates)."""
INITIAL_CHOSEN = 16
"""Rows allocated up front for the selected embeddings (a default search selects 5 or 10)."""


def _with_room(rows: NDArray[np.float32], size: int, kept: int) -> NDArray[np.float32]:
    """`rows`, or when it has fewer than `size` rows a copy with at least twice as many that
    keeps its first `kept` rows (growth by doubling: appends cost O(1) on average)."""
    if size <= rows.shape[0]:
        return rows
    grown = np.empty((max(size, 2 * rows.shape[0]), *rows.shape[1:]), dtype=rows.dtype)
    grown[:kept] = rows[:kept]
    return grown


class Selection(NamedTuple):
    """A candidate with its similarity to the query, its relevance and its MMR score (when
    selected: the score it was chosen with; otherwise its score at the end).  A named tuple:
    a search makes one per selection, and a frozen dataclass costs several times as much."""

    id: str
    similarity: float
    relevance: float
    mmr_score: float


class MmrSelector:
    """Greedy MMR selection; candidates may be added between selections.

    The traversal makes k selections per search, so each costs one subtraction over the
    pool: the weighted relevance (-inf once selected) and the weighted redundancy are kept
    up to date as they change, instead of being recomputed and masked at each selection.
    The pool's arrays are over-allocated and grow by doubling, so adding a handful of
    candidates copies nothing already there (a search adds several times)."""

    def __init__(
        self, query: Vector, lambda_mult: float, score_threshold: float = float("-inf")
    ) -> None:
        self.query = query
        self.lambda_mult = lambda_mult
        self._redundancy_weight = np.float32(1.0 - lambda_mult)
        """1 − λ as a NumPy scalar: scaling by a Python float costs a type resolution."""
        self.score_threshold = score_threshold
        self._ids: list[str] = []
        self._position: dict[str, int] = {}
        self._embeddings = np.empty((INITIAL_CAPACITY, query.size), dtype=np.float32)
        self._similarity = np.empty(INITIAL_CAPACITY, dtype=np.float32)
        self._relevance = np.empty(INITIAL_CAPACITY, dtype=np.float32)
        self._weighted_relevance = np.empty(INITIAL_CAPACITY, dtype=np.float32)
        """λ · relevance for open candidates, -inf for selected ones."""
        self._penalty = np.empty(INITIAL_CAPACITY, dtype=np.float32)
        """(1 − λ) · the largest similarity to a selected candidate (0 before any is)."""
        self._open_count = 0
        self._chosen = np.empty((INITIAL_CHOSEN, query.size), dtype=np.float32)
        """The selected candidates' embeddings in the order chosen, over-allocated too."""
        self._chosen_count = 0
        self._chosen_rank: dict[str, int] = {}
        """Each selected candidate's row in `_chosen`."""
        self.copies: dict[str, str] = {}
        """Candidates closed as copies (`COPY_SIMILARITY`), with the selected one they copy."""

    def __contains__(self, node_id: str) -> bool:
        """True for every id ever added, selected or not."""
        return node_id in self._position

    @property
    def open_count(self) -> int:
        """Candidates still waiting to be selected."""
        return self._open_count

    def _reserve(self, size: int) -> None:
        """Make room for `size` candidates in every pool array, keeping their contents."""
        if size <= self._similarity.size:
            return
        count = len(self._ids)
        for name in ("_embeddings", "_similarity", "_relevance", "_weighted_relevance", "_penalty"):
            setattr(self, name, _with_room(getattr(self, name), size, count))

    def add(
        self,
        ids: list[str],
        embeddings: Sequence[Vector] | NDArray[np.float32],
        relevance: Sequence[float] | None = None,
        cited_by: Sequence[str | None] | None = None,
        similarity: Sequence[float] | None = None,
    ) -> None:
        """Add unit-embedding candidates (relevance: their similarity unless given); ids
        already known are ignored.  `cited_by[i]`, when set, is the selected candidate that
        names candidate i: i's resemblance to it is not counted as redundancy.
        `similarity`, when the caller knows it (a storage's hits), spares computing it."""
        if not ids:
            return
        position = self._position
        if not position.keys().isdisjoint(ids):
            fresh = [i for i, node_id in enumerate(ids) if node_id not in position]
            if not fresh:
                return
            ids, embeddings = [ids[i] for i in fresh], [embeddings[i] for i in fresh]
            relevance = None if relevance is None else [relevance[i] for i in fresh]
            cited_by = None if cited_by is None else [cited_by[i] for i in fresh]
            similarity = None if similarity is None else [similarity[i] for i in fresh]
        start, end = len(self._ids), len(self._ids) + len(ids)
        self._reserve(end)
        position.update(zip(ids, range(start, end), strict=True))
        self._ids.extend(ids)
        rows = self._embeddings[start:end]
        rows[:] = embeddings
        known = self._similarity[start:end]
        if similarity is None:
            np.matmul(rows, self.query, out=known)
        else:
            known[:] = similarity
        given = self._relevance[start:end]
        given[:] = known if relevance is None else relevance
        np.multiply(given, self.lambda_mult, out=self._weighted_relevance[start:end])
        penalty = self._penalty[start:end]
        opened = len(ids)
        if self._chosen_count:
            redundancy = rows @ self._chosen[: self._chosen_count].T
            if redundancy.max() >= COPY_SIMILARITY:  # rare: one test before any other work
                nearest = redundancy.argmax(axis=1)
                chosen_ids = list(self._chosen_rank)
                copied = redundancy[np.arange(len(ids)), nearest] >= COPY_SIMILARITY
                for copy in np.flatnonzero(copied):
                    self._weighted_relevance[start + copy] = -np.inf
                    self.copies[ids[copy]] = chosen_ids[nearest[copy]]
                    opened -= 1
            ranks = self._chosen_rank
            citations = [
                (row, ranks[citing]) for row, citing in enumerate(cited_by or ()) if citing in ranks
            ]
            for row, rank in citations:
                redundancy[row, rank] = -np.inf
            np.maximum.reduce(redundancy, axis=1, out=penalty)
            if citations:
                penalty[penalty == -np.inf] = 0.0  # cited by the only selection: nothing redundant
            penalty *= self._redundancy_weight
        else:
            penalty[:] = 0.0
        self._open_count += opened

    def raise_relevance(self, node_id: str, relevance: float) -> bool:
        """Raise a known candidate's relevance (a better path to it was found); true when
        the candidate is still open, so its score at selection will be the raised one."""
        position = self._position[node_id]
        if relevance <= self._relevance[position]:
            return False
        self._relevance[position] = relevance
        if self._weighted_relevance[position] == -np.inf:
            return False
        self._weighted_relevance[position] = self.lambda_mult * self._relevance[position]
        return True

    def relevance(self, node_id: str) -> float:
        """A known candidate's current relevance."""
        return float(self._relevance[self._position[node_id]])

    def scores(self) -> NDArray[np.float32]:
        """The current MMR score of every candidate (closed ones are -inf)."""
        count = len(self._ids)
        return self._weighted_relevance[:count] - self._penalty[:count]

    def leading(self, count: int) -> list[str]:
        """The `count` open candidates with the best MMR scores now, best first: the ones
        the next selections will most likely take."""
        scores = self.scores()
        count = min(count, self._open_count)
        if count <= 0:
            return []
        best = (-scores).argpartition(count - 1)[:count]
        return [self._ids[i] for i in best[(-scores[best]).argsort(kind="stable")]]

    def unselected(self) -> list[Selection]:
        """The candidates never selected, with their current scores, best first; copies
        (`copies`) last, with a score of -inf."""
        scores = self.scores()
        copies = [self._position[node_id] for node_id in self.copies]
        rows = [
            Selection(
                self._ids[i],
                float(self._similarity[i]),
                float(self._relevance[i]),
                float(scores[i]),
            )
            for i in [*np.flatnonzero(scores != -np.inf), *copies]
        ]
        return sorted(rows, key=lambda row: (-row.mmr_score, row.id))

    def pop_best(self) -> Selection | None:
        """Select the best open candidate, or None when none reaches the threshold."""
        if not self._open_count:
            return None
        count = len(self._ids)
        penalty = self._penalty[:count]
        scores = self._weighted_relevance[:count] - penalty
        best = int(scores.argmax())
        score = float(scores[best])
        if score < self.score_threshold:
            return None
        self._weighted_relevance[best] = -np.inf
        self._open_count -= 1
        chosen = self._embeddings[best]
        redundancy = self._embeddings[:count] @ chosen
        node_id = self._ids[best]
        copied = redundancy >= COPY_SIMILARITY  # the chosen one itself, and its copies
        if np.count_nonzero(copied) > 1:
            copied &= self._weighted_relevance[:count] != -np.inf
            for row in np.flatnonzero(copied):
                self._weighted_relevance[row] = -np.inf
                self.copies[self._ids[row]] = node_id
                self._open_count -= 1
        redundancy *= self._redundancy_weight
        if self._chosen_count:
            np.maximum(penalty, redundancy, out=penalty)
        else:
            penalty[:] = redundancy
        if self._chosen_count == len(self._chosen):
            self._chosen = _with_room(self._chosen, self._chosen_count + 1, self._chosen_count)
        self._chosen[self._chosen_count] = chosen
        self._chosen_rank[node_id] = self._chosen_count
        self._chosen_count += 1
        return Selection(
            node_id, float(self._similarity[best]), float(self._relevance[best]), score
        )
