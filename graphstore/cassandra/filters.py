"""Filters on Cassandra: a condition (`graphstore.filters`) as SAI restrictions, one query per
branch, and the rows checked against the whole condition.

What SAI on Cassandra 5.0.9 answers (each checked on a node):
- `CONTAINS` on an indexed `set<text>`: equality, on the `filter_terms` column;
- a range (`<`, `<=`, `>`, `>=`) on a scalar numeric column (`double`, `varint`, …), also in
  an ANN query and within a partition, together with `CONTAINS`;
- not a range on a map entry (ENTRIES index: "Only EQ relations are supported on map
  entries"), not a range on `text` or `ascii` (equality only), no `OR`, `!=`, `NOT IN`,
  `NOT CONTAINS`, no `IN` on an indexed column; an ANN query's LIMIT is at most 1,000.

So ranges use *range columns*, a pair per metadata key and value type holding the smallest
and largest value of that type under the key (`lo`, `hi`; `graphstore.cassandra.ranges`):
"some value <= b" is `lo <= b`, "some value >= a" is `hi >= a`, for a list as for a scalar.
Numbers are `double`; strings are `varint`s of their first 40 UTF-8 bytes, each plus one,
which orders them as their text orders (exactly for shorter strings).

A condition becomes its disjunctive normal form, at most `MAX_BRANCHES` conjunctions; each
conjunction is one query whose restrictions are its equalities and ranges.  `$or` and `$in`
thus run as several ANN queries, merged by score: each branch's top k holds every member of
the union's top k that it matches, so the merge is exact.  `$ne`, `$nin` and ranges that a
column cannot answer exactly (and equalities too long for SAI to index,
`INDEXED_TERM_BYTES`) are checked on the rows returned (from their filter terms);
when that drops rows from a full page, the branch is asked again for 4x as many (up to the
1,000 ANN limit) and finally read without ANN, restricted by its indexable conditions and
ranked here: a full scan only when nothing in the condition is indexable (a lone `$ne`).
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from graphstore.filters import EVERYTHING, AllOf, AnyOf, Compare, Condition, Equals, Not

ANN_LIMIT = 1000
"""The largest LIMIT Cassandra 5.0 accepts in an ANN query."""
ANN_OVERFETCH = 4
"""A search for the k passages nearest a query asks SAI for this many times k and keeps the
k best by exact score: SAI's graph search misses true neighbours at a small LIMIT.  On the
2Wiki dev set (7,005 passages) similarity R@5 was 0.51 / 0.55 / 0.57 at 1 / 2 / 4 × k
against 0.60 exact, and the default search 0.74 / 0.775 / 0.81 against 0.82, for ~4.5 ms
more per query at 4 × k (benchmarks/README.md)."""
ANN_ROWS = 40
"""The fewest rows a nearest-passage query asks SAI for, however few it keeps: similarity's
results and a graph search's roots (which decide what the traversal reaches) alike, so the
two start from the same neighbours.  At a small LIMIT SAI misses true neighbours: on 2Wiki
similarity R@2 / R@5 was 0.445 / 0.576 from 8 / 20 rows and 0.473 / 0.592 from 40 (0.476 /
0.598 exact), for 1.5-2.9 ms more per query at k = 5; the default search with mention links
at k = 5 (5 roots) found R@5 0.803 from 20 rows, 0.816 from 30 and 0.825 from 40
(benchmarks/README.md, quality)."""
MAX_BRANCHES = 16
"""Most queries one condition becomes; a larger normal form runs as one inexact query."""
STRING_PREFIX_BYTES = 40
"""UTF-8 bytes of a string a range column keeps."""
EXACT_DOUBLE = 2**53
"""Below this magnitude every integer is a double: a strict range stays strict."""
INDEXED_TERM_BYTES = 4096
"""The longest filter term (UTF-8) a query restricts by: SAI leaves terms over 8 KiB out of
its index (`sai_string_term_size_fail_threshold`), so restricting by one matched nothing,
and one over 64 KiB failed the query after a minute.  A longer equality is checked on the
rows instead, as `$ne` is."""

T = TypeVar("T")


@dataclass(frozen=True)
class RangeColumn:
    """The two columns of one (key, type): `<base>_lo` and `<base>_hi`."""

    is_number: bool
    key: str

    @property
    def base(self) -> str:
        digest = hashlib.sha256(self.key.encode()).hexdigest()[:24]
        return ("n_" if self.is_number else "s_") + digest

    @property
    def cql_type(self) -> str:
        return "double" if self.is_number else "varint"

    @property
    def lo(self) -> str:
        return self.base + "_lo"

    @property
    def hi(self) -> str:
        return self.base + "_hi"


def number_code(value: float) -> float:
    """A number as its range column holds it: the nearest double (rounding keeps order)."""
    try:
        return float(value) + 0.0  # + 0.0: -0.0 sorts with 0.0
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def string_code(text: str) -> int:
    """A string as its range column holds it: order-preserving, exact up to 39 bytes."""
    data = text.encode()[:STRING_PREFIX_BYTES]
    shifted = bytes(byte + 1 for byte in data) + bytes(STRING_PREFIX_BYTES - len(data))
    return int.from_bytes(shifted, "big")


def code(value: float | str) -> float | int:
    return string_code(value) if isinstance(value, str) else number_code(value)


def range_column(compare: Compare) -> RangeColumn:
    return RangeColumn(compare.is_number, compare.key)


def _exact(compare: Compare) -> bool:
    """Whether the column comparison is exactly the condition (not just implied by it)."""
    if isinstance(compare.value, str):
        return len(compare.value.encode()) < STRING_PREFIX_BYTES
    return abs(compare.value) < EXACT_DOUBLE


@dataclass(frozen=True)
class Branch:
    """One query: CQL restrictions (bind markers only) and their values."""

    restrictions: tuple[str, ...]
    values: tuple[Any, ...]
    exact: bool
    """True when every row the restrictions return passes the whole condition's branch."""

    @property
    def cql(self) -> str:
        return " AND ".join(self.restrictions)


@dataclass(frozen=True)
class Plan:
    """How to run a condition: its branches (none: nothing passes) and the condition every
    row of an inexact branch is checked against."""

    branches: tuple[Branch, ...]
    where: Condition

    @property
    def single_exact(self) -> Branch | None:
        """The one branch when it alone answers the condition exactly (COUNT may use it)."""
        if len(self.branches) == 1 and self.branches[0].exact:
            return self.branches[0]
        return None


def range_columns(condition: Condition) -> set[RangeColumn]:
    """The range columns a condition's ranges would use."""
    if isinstance(condition, Compare):
        return {range_column(condition)}
    if isinstance(condition, Not):
        return range_columns(condition.condition)
    if isinstance(condition, (AllOf, AnyOf)):
        return set().union(*(range_columns(part) for part in condition.conditions))
    return set()


def plan(condition: Condition, columns: Collection[RangeColumn], complete: bool) -> Plan:
    """The queries for `condition`, given the range columns the store has.

    `complete`: every node with a value of a (key, type) has that column, so a range on a
    (key, type) without one matches nothing; otherwise it is checked on the rows.
    """
    if condition == EVERYTHING:
        return Plan((Branch((), (), True),), condition)
    normal = _normal_form(condition)
    if normal is None:
        top = condition.conditions if isinstance(condition, AllOf) else (condition,)
        required = [part for part in top if isinstance(part, (Equals, Compare))]
        branch = _branch(required, columns, complete)
        branches = [] if branch is None else [Branch(branch.restrictions, branch.values, False)]
    else:
        found = (_branch(conjunction, columns, complete) for conjunction in normal)
        branches = list(dict.fromkeys(branch for branch in found if branch is not None))
    return Plan(tuple(branches), condition)


Literal = Equals | Compare | Not


def _normal_form(condition: Condition) -> list[list[Literal]] | None:
    """The disjunctive normal form, or None beyond `MAX_BRANCHES` conjunctions."""
    if isinstance(condition, (Equals, Compare, Not)):
        return [[condition]]
    if isinstance(condition, AnyOf):
        result: list[list[Literal]] = []
        for part in condition.conditions:
            found = _normal_form(part)
            if found is None:
                return None
            result.extend(found)
            if len(result) > MAX_BRANCHES:
                return None
        return result
    result = [[]]
    for part in condition.conditions:
        found = _normal_form(part)
        if found is None:
            return None
        result = [left + right for left in result for right in found]
        if len(result) > MAX_BRANCHES:
            return None
    return result


def _branch(
    conjunction: Sequence[Literal], columns: Collection[RangeColumn], complete: bool
) -> Branch | None:
    """A conjunction as one query, or None when it cannot match (a range on a (key, type)
    no node has).  Cassandra takes one bound per column and direction: of several, the
    tightest (all hold, so it alone is what they require together)."""
    terms: dict[str, None] = {}
    bounds: dict[str, tuple[float | int, bool]] = {}
    exact = True
    for literal in conjunction:
        if isinstance(literal, Equals):
            if len(literal.term.encode()) <= INDEXED_TERM_BYTES:
                terms[literal.term] = None
            else:
                exact = False
        elif isinstance(literal, Compare):
            column = range_column(literal)
            if column not in columns:
                if complete:
                    return None
                exact = False
                continue
            precise = _exact(literal)
            exact = exact and precise
            upper = literal.operator in ("$lt", "$lte")
            name = column.lo if upper else column.hi
            bound = code(literal.value)
            strict = precise and literal.operator in ("$lt", "$gt")
            known = bounds.get(name)
            if known is None or _tighter((bound, strict), known, upper):
                bounds[name] = (bound, strict)
        else:
            exact = False
    restrictions = ["filter_terms CONTAINS ?"] * len(terms)
    values: list[Any] = list(terms)
    for name, (bound, strict) in sorted(bounds.items()):
        upper = name.endswith("_lo")
        restrictions.append(f'"{name}" {("<" if upper else ">") + ("" if strict else "=")} ?')
        values.append(bound)
    return Branch(tuple(restrictions), tuple(values), exact)


def _tighter(new: tuple[float | int, bool], old: tuple[float | int, bool], upper: bool) -> bool:
    """Whether bound `new` (value, strict) excludes more than `old`."""
    if new[0] != old[0]:
        return new[0] < old[0] if upper else new[0] > old[0]
    return new[1] and not old[1]


Fetch = Callable[[Branch, int | None], Awaitable[list[T]]]
"""Rows of one branch, best first: an ANN query with this LIMIT, or (None) every row."""


@dataclass(frozen=True)
class Ranking(Generic[T]):
    """How `top_k` reads a row: its id, its similarity, whether it passes the condition."""

    ident: Callable[[T], str]
    similarity: Callable[[T], float]
    passes: Callable[[T], bool]


def first_limit(k: int, overfetch: int = 1, least: int = 0) -> int | None:
    """The LIMIT of a branch's first ANN query for the nearest `k`: `overfetch` × k and at
    least `least`, within Cassandra's largest LIMIT, or None (read the rows and rank them)
    beyond it."""
    return None if k > ANN_LIMIT else min(ANN_LIMIT, max(overfetch * k, least))


async def top_k(
    planned: Plan,
    k: int,
    fetch: Fetch[T],
    ranking: Ranking[T],
    *,
    overfetch: int = 1,
    least: int = 0,
) -> list[T]:
    """The `k` rows nearest the query among those passing the plan's condition; each branch
    first asks for `overfetch` × k rows (`ANN_OVERFETCH`) and at least `least`, and for more
    only while fewer than k of them pass."""
    if not planned.branches or k <= 0:
        return []
    limit = first_limit(k, overfetch, least)
    found = await asyncio.gather(
        *(_branch_top_k(branch, k, fetch, ranking, limit) for branch in planned.branches)
    )
    if len(found) == 1:
        return found[0]
    best: dict[str, T] = {}
    for rows in found:
        for row in rows:
            known = best.get(ranking.ident(row))
            if known is None or ranking.similarity(row) > ranking.similarity(known):
                best[ranking.ident(row)] = row
    ordered = sorted(best.values(), key=lambda row: (-ranking.similarity(row), ranking.ident(row)))
    return ordered[:k]


async def _branch_top_k(
    branch: Branch, k: int, fetch: Fetch[T], ranking: Ranking[T], limit: int | None
) -> list[T]:
    while True:
        rows = await fetch(branch, limit)
        kept = rows if branch.exact else [row for row in rows if ranking.passes(row)]
        if limit is None or len(kept) >= k or len(rows) < limit:
            return kept[:k]
        limit = None if limit >= ANN_LIMIT else min(ANN_LIMIT, 4 * limit)
