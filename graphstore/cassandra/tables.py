"""The tables of one store as the server has them: their dimension and kind, creating,
upgrading and dropping them (the DDL side of `CassandraStorage`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graphstore.cassandra.schema import (
    DDL_TIMEOUT,
    INDEXES,
    OUTGOING_PARTS,
    SELECT_COLUMN_TYPE,
    SELECT_INDEXES,
    SELECT_TABLE,
    SELECT_TABLES,
    UPGRADE,
    VECTOR_TYPE,
    run_ddl,
)
from graphstore.cassandra.session import Requests
from graphstore.errors import InvalidInputError, StoreOpenError, one_line

PARTS = ("nodes", "tags", "hot", "hot_tags", "meta")
"""Every table of a store: `<table>_<part>`."""

COLLIDING_ENDINGS = tuple(
    "_" + part[:cut]
    for part in PARTS
    for cut in range(len(part))
    if part[cut] == "_" and part[cut + 1 :] in PARTS
)
"""Endings of a table prefix whose tables another prefix's would be: `notes_hot` + `_tags`
is `notes` + `_hot_tags`."""


def check_new_prefix(table: str) -> None:
    """Refuse, for a new store, a table prefix whose tables another store's could be."""
    for ending in COLLIDING_ENDINGS:
        if table.endswith(ending):
            raise InvalidInputError(
                f"Cassandra table name {table!r} ends in {ending!r}: its tables would share "
                f"names with those of the store {table[: -len(ending)]!r}; choose another"
            )


class Tables:
    """The tables `<keyspace>.<table>_<part>` of one store, through its `Requests`."""

    def __init__(self, session: Any, requests: Requests, keyspace: str, table: str) -> None:
        self._session = session
        self._requests = requests
        self.keyspace = keyspace
        self.table = table

    def _column_type(self, part: str, column: str) -> str | None:
        """The CQL type of a column of `<table>_<part>`, or None if there is no such column."""
        rows = self._requests.execute_now(
            SELECT_COLUMN_TYPE, (self.keyspace, f"{self.table}_{part}", column)
        )
        return str(rows[0][0]) if rows else None

    def dimension(self) -> int | None:
        """D of the node table's `vector<float, D>` column, or None if there is no table."""
        found = self._column_type("nodes", "embedding")
        if found is None:
            return None
        match = VECTOR_TYPE.fullmatch(found)
        if match is None:
            raise StoreOpenError(
                f"table {self.keyspace}.{self.table}_nodes is not a graphstore table "
                f"(its embedding column is {found})"
            )
        return int(match.group(1))

    def small_as_vectors(self) -> bool:
        """Whether `<table>_tags` keeps embeddings in a vector column (made before hot tags)."""
        return self._column_type("tags", "embedding") not in (None, "blob")

    def outgoing_sets(self) -> frozenset[str]:
        """The parts (`nodes`, `tags`, `hot`) whose `outgoing` column is a set of tuples
        (made before outgoing tags were text), not text."""
        return frozenset(
            part
            for part in OUTGOING_PARTS
            if (self._column_type(part, "outgoing") or "text") != "text"
        )

    def complete(self) -> bool:
        """Whether every table and index of the store exists, so that a write needs no DDL
        (and a role that may only modify rows can write)."""
        tables = {row[0] for row in self._requests.execute_now(SELECT_TABLES, (self.keyspace,))}
        indexes = {row[0] for row in self._requests.execute_now(SELECT_INDEXES, (self.keyspace,))}
        return {f"{self.table}_{part}" for part in PARTS if part != "meta"} <= tables and {
            f"{self.table}_{index}" for index in INDEXES
        } <= indexes

    def run(self, statements: Sequence[str], dimension: int) -> None:
        """Run DDL templates (idempotent ones) with the table names and `dimension`."""
        size = int(dimension)  # an int: nothing else but validated names reaches the DDL
        for statement in statements:
            run_ddl(self._session, statement.format(**self._requests.names, dimension=size))

    def upgrade(self, dimension: int) -> None:
        """Bring a store made before hot tags to the current layout (`schema.UPGRADE`): the
        directory table, created last, marks a store as current.  A role that may not do it
        gets a one-line `StoreOpenError` saying what to do."""
        if self._requests.execute_now(SELECT_TABLE, (self.keyspace, f"{self.table}_hot_tags")):
            return
        try:
            with self._requests.lock:
                self.run(UPGRADE, dimension)
        except Exception as error:
            raise StoreOpenError(
                f"the Cassandra store {self.keyspace}.{self.table} was made by an older "
                "graphstore and could not be upgraded to hot-tag buckets "
                f"({one_line(error)}); open it once with a role that may ALTER and CREATE "
                f"tables in keyspace {self.keyspace}"
            ) from error

    def drop(self) -> None:
        """Drop every table of the store with its indexes (blocking)."""
        for part in PARTS:
            name = self._requests.names[part]
            self._session.execute(f"DROP TABLE IF EXISTS {name}", timeout=DDL_TIMEOUT)
