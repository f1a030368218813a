"""Consistency levels per kind of request, and what they let a search see.

A store sends three kinds of request:

- **writes**: each passage's logged batch, and deletes (`write`, default LOCAL_QUORUM);
- **key reads**: rows by key or whole partitions: a passage's old links read before it is
  rewritten, the passages a search returns, small tags read whole, tag counts, scans
  (`read`, default LOCAL_QUORUM);
- **ANN queries** (roots, and tags too large to read whole): Cassandra 5.0 runs a top-k query
  at ONE / LOCAL_ONE whatever is asked (it downgrades and warns on every query), so they are
  sent at that level, LOCAL_ONE when `read` is data-centre local.

With `read` + `write` replicas above the replication factor (QUORUM and QUORUM), a key read
overlaps every acknowledged write: a passage's old links are never missed when it is
rewritten, and the passages a search returns are read fresh, so a deleted passage that a
stale replica still offers to an ANN query is dropped and a changed one is returned as it
is now.  An ANN query reads one replica, which may lack a write the others acknowledged
(for milliseconds normally; after a replica was down, until hints or repair reach it), so a
just-written passage can be missed as a candidate.  `write="ALL"` puts every acknowledged
write on every replica, so ANN queries see it too (read-your-writes for every search), at
the price of writes failing while any replica is down.  On one node (replication factor 1)
every level is the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from graphstore.errors import InvalidInputError

LEVELS = (
    "ONE",
    "TWO",
    "THREE",
    "QUORUM",
    "ALL",
    "LOCAL_QUORUM",
    "EACH_QUORUM",
    "LOCAL_ONE",
    "ANY",
)
"""Level names accepted (the driver's names); ANY is for writes only."""
DEFAULT_LEVEL = "LOCAL_QUORUM"
FIXED_REPLICAS = {"TWO": 2, "THREE": 3}
"""The levels that ask for a number of replicas, whatever the replication factor."""


def level_name(what: str, name: object, *, write: bool) -> str:
    """`name` upper-cased if it is a level allowed for `what`, else InvalidInputError."""
    level = name.upper() if isinstance(name, str) else None
    if level not in LEVELS or (level == "ANY" and not write):
        allowed = [n for n in LEVELS if write or n != "ANY"]
        raise InvalidInputError(f"{what} must be one of {', '.join(allowed)}, got {name!r}")
    return level


@dataclass(frozen=True)
class Consistency:
    """The levels of a store's writes and key reads (ANN queries follow `read`)."""

    read: str = DEFAULT_LEVEL
    write: str = DEFAULT_LEVEL

    def __post_init__(self) -> None:
        object.__setattr__(self, "read", level_name("read consistency", self.read, write=False))
        object.__setattr__(self, "write", level_name("write consistency", self.write, write=True))

    @classmethod
    def of(cls, value: Consistency | str | None) -> Consistency:
        """A `Consistency`, one level name for both kinds, or None for the defaults."""
        if value is None:
            return cls()
        if isinstance(value, Consistency):
            return value
        return cls(read=value, write=value)

    def beyond(self, placements: Sequence[tuple[int, int]]) -> str | None:
        """A level of these that waits for more replicas of a row than can answer in any data
        centre; `placements` has, for each data centre the keyspace replicates to, the
        replicas it keeps there and those its nodes can hold (a factor of 3 on one node
        holds 1, and a quorum of 3 is 2; `TWO` or `THREE` above the factor never succeed).
        No request at such a level can succeed until the cluster grows."""
        for level in (self.read, self.write):
            if all(replicas_needed(level, kept) > held for kept, held in placements):
                return level
        return None

    @property
    def ann(self) -> str:
        """The level Cassandra 5.0 runs ANN queries at, given `read`."""
        return "LOCAL_ONE" if self.read.startswith("LOCAL_") else "ONE"


def replicas_needed(level: str, replicas: int) -> int:
    """How many replicas of a row a request at `level` waits for, when `replicas` are kept
    in one data centre (the quorums counted there)."""
    if level in FIXED_REPLICAS:
        return FIXED_REPLICAS[level]
    if level == "ALL":
        return replicas
    if level.endswith("QUORUM"):
        return replicas // 2 + 1
    return 1
