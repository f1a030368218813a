"""The settings of a graph search, validated once, with the defaults users get.

One traversal engine runs every graph search; a `Strategy` says how far it goes and how it
selects.  `DEFAULT` is what `graphstore search`, `graphstore prompt`, the writer context and
the LangChain retriever's `graph` search type run with no options; `MMR_TRAVERSAL` keeps the
classic MMR-traversal semantics (expand a node when it is selected).  Both were chosen on
the dev sets in `../shared/data/` (HotpotQA train, 2WikiMultihopQA dev) and are the same for
every data set and every k (`benchmarks/quality.py`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from typing import Any

from graphstore.errors import InvalidArgumentError, InvalidInputError
from graphstore.relevance import STRUCTURAL_KINDS

MAX_K = 1000
"""Largest k anywhere: Cassandra's SAI refuses ANN queries with LIMIT above 1000."""
MAX_DEPTH = 10


def check_count(name: str, value: Any, minimum: int = 1, maximum: int = MAX_K) -> int:
    """Validate an integer search parameter such as `k`, `depth` or `adjacent_k`; return it
    as an `int` (a NumPy integer, as a k computed with NumPy is, is one too)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgumentError(name, f"must be an integer, not {type(value).__name__}")
    count = int(value)
    if not minimum <= count <= maximum:
        raise InvalidArgumentError(name, f"must be between {minimum} and {maximum}, got {count}")
    return count


def check_fraction(name: str, value: Any) -> float:
    """Validate a number between 0 and 1, such as `lambda_mult` or `damping`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidArgumentError(name, "must be a number between 0 and 1")
    fraction = float(value)
    if not 0.0 <= fraction <= 1.0:
        raise InvalidArgumentError(name, f"must be between 0 and 1, got {fraction}")
    return fraction


def check_kinds(name: str, value: Any) -> frozenset[str]:
    """Validate a collection of link kinds, such as `structural_kinds` (a single string is
    refused: it would read as a set of its characters)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidInputError(f"{name} must be a collection of link kinds, such as ['hierarchy']")
    kinds = list(value)
    if not all(isinstance(kind, str) and kind for kind in kinds):
        raise InvalidInputError(f"{name} must hold non-empty strings")
    return frozenset(kinds)


def check_options(
    options: Iterable[str], known: Iterable[str], what: str = "search option"
) -> None:
    """A one-line error naming the first of `options` not in `known` (each a `what`), and
    the known ones."""
    names = set(known)
    unknown = sorted(set(options) - names)
    if unknown:
        listed = ", ".join(sorted(names)) or "none"
        raise InvalidInputError(f"unknown {what} {unknown[0]!r}; known: {listed}")


SEARCH_ARGUMENTS = frozenset({"filter", "stats"})
"""What every graph search takes besides its `Strategy` settings (`mmr_traversal_search`
also `initial_roots`)."""


ROOTS = 5
"""The fewest roots a search starts from: by default it takes the max(`ROOTS`, k) nearest.

From k roots up, a store without links returns exactly the k passages nearest to the query
and a link can only swap one of them for a passage it leads to, so plain similarity is the
floor by construction.  Below k = 5, MMR picks among the 5 nearest (above similarity at
k = 2 on both dev sets).  Ten roots let MMR trade a near root for a less similar one at
k = 5, which cost gold passages without links (`benchmarks/README.md`, quality)."""


@dataclass(frozen=True)
class Strategy:
    """How one graph search finds and selects passages.

    The search takes the `fetch_k` passages nearest to the query as roots, then, level by
    level up to `depth` hops, expands the `expand_k` most relevant passages of the level
    (all their unvisited outgoing tags in one concurrent wave, `adjacent_k` nearest passages
    per tag); a passage reached over a link gets a path-aware relevance
    (`graphstore.relevance`, leaning on its parent by the tag's specificity, and on each
    hop after the first from a root `damping` times less).
    It then selects `k` passages by MMR over that relevance (`lambda_mult` 1: by relevance
    alone), expanding each selected passage not yet expanded; when the candidates run out
    first, the next-nearest passages join as roots.  With `expand_k` 0 only
    selected passages are expanded: classic MMR traversal.  One expansion admits at most
    `max_candidates_per_step` new passages (the most relevant; default
    `max(fetch_k, adjacent_k)`).  A hop over a link whose kind is in `structural_kinds`
    passes no relevance (`relevance.STRUCTURAL_KINDS`).
    """

    k: int = 5
    fetch_k: int = ROOTS
    depth: int = 2
    adjacent_k: int = 5
    expand_k: int = 0
    lambda_mult: float = 0.9
    damping: float = 0.8
    score_threshold: float = float("-inf")
    max_candidates_per_step: int | None = None
    structural_kinds: frozenset[str] = STRUCTURAL_KINDS

    def checked(self, *, has_initial_roots: bool = False) -> Strategy:
        """This strategy validated, with the step cap filled in; one-line errors."""
        counts = {
            "k": check_count("k", self.k),
            "fetch_k": check_count("fetch_k", self.fetch_k, 0 if has_initial_roots else 1),
            "depth": check_count("depth", self.depth, 0, MAX_DEPTH),
            "adjacent_k": check_count("adjacent_k", self.adjacent_k),
            "expand_k": check_count("expand_k", self.expand_k, 0),
        }
        threshold = self.score_threshold
        if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real):
            raise InvalidInputError("score_threshold must be a number")
        if math.isnan(threshold):
            raise InvalidInputError("score_threshold must be a number")
        cap = self.max_candidates_per_step
        cap = max(counts["fetch_k"], counts["adjacent_k"]) if cap is None else cap
        return replace(
            self,
            **counts,
            lambda_mult=check_fraction("lambda_mult", self.lambda_mult),
            damping=check_fraction("damping", self.damping),
            score_threshold=float(threshold),
            max_candidates_per_step=check_count("max_candidates_per_step", cap),
            structural_kinds=check_kinds("structural_kinds", self.structural_kinds),
        )

    def with_options(
        self, arguments: frozenset[str] = SEARCH_ARGUMENTS, /, **options: Any
    ) -> Strategy:
        """A copy with some settings replaced.  An unknown name is a one-line error naming
        every option of the search: the settings and the search's own `arguments`, which a
        user may have meant (one passed here is no setting, and refused as such)."""
        check_options(options, STRATEGY_SETTINGS | arguments)
        check_options(options, STRATEGY_SETTINGS, "strategy setting")
        return replace(self, **options)


STRATEGY_SETTINGS = frozenset(field.name for field in fields(Strategy))
"""The names of a `Strategy`'s settings: options every graph search takes."""


DEFAULT = Strategy()
"""The default graph search (`GraphStore.search`): MMR traversal over path-aware relevance."""

MMR_TRAVERSAL = replace(DEFAULT, k=4)
"""`mmr_traversal_search`'s defaults: the same search, with LangChain's usual k."""


TRAVERSAL_DEPTH = 1
TRAVERSAL_ADJACENT_K = 10
"""`traversal_search`'s own defaults (LangChain's): one hop, ten passages per tag."""


def roots_for(k: int) -> int:
    """How many nearest passages a search of `k` starts from by default: max(`ROOTS`, k)."""
    return max(ROOTS, k)


def search_strategy(k: int, **options: Any) -> Strategy:
    """The default search (`GraphStore.search`) at `k` with `options` (other `Strategy`
    fields), validated; `fetch_k` defaults to max(`ROOTS`, k) roots, so that k passages
    come back.  Without options the strategy is built once per k: nearly every search asks for
    one, and building it costs what a tag step does."""
    if options:
        return _with_options(k, options)
    return _plain(check_count("k", k))


def _with_options(k: int, options: dict[str, Any]) -> Strategy:
    options.setdefault("fetch_k", roots_for(check_count("k", k)))
    return DEFAULT.with_options(k=k, **options).checked()


@lru_cache(maxsize=64)
def _plain(k: int) -> Strategy:
    return _with_options(k, {})
