"""Range columns: a `double` (numbers) or `varint` (strings) pair per metadata key and value
type, on the node table and the hot tags' buckets, each with an SAI index
(`graphstore.cassandra.filters`).  Small tags need none: they are read whole and their rows
checked here.

A pair is added (`ALTER TABLE … ADD IF NOT EXISTS`, then its four indexes) the first time a
node with a value of that key and type is written, before that node; it is registered in
the store's meta table only once its indexes answer queries, and readers plan with the
registered pairs only.  So every node holding such a value has the pair filled in, and a
range on a (key, type) that is not registered matches nothing.  After `limit` pairs
(default `MAX_RANGE_COLUMNS`) no more are added (each costs four indexes): the store is
marked *overflowing*, and ranges on the other keys are checked on rows instead (correct,
slower).

A store written before range columns existed has no meta `format` row: when it is opened,
every node's range columns are filled in from its filter terms (one scan of the node table
and one batch of updates per node that has any), then the row is written.  Writers of an
earlier version running at the same time would write nodes without them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import threading
import time
from collections.abc import Collection, Mapping
from typing import Any

from cassandra.concurrent import execute_concurrent

from graphstore.cassandra.filters import RangeColumn, code
from graphstore.cassandra.queries import CREATE_META, INSERT_META, SCAN_NODES, SELECT_META
from graphstore.cassandra.rows import tag_map
from graphstore.cassandra.schema import DDL_TIMEOUT, run_ddl
from graphstore.cassandra.session import Requests
from graphstore.errors import StorageError, one_line
from graphstore.filters import FilterValues
from graphstore.links import TagKey

logger = logging.getLogger(__name__)

MAX_RANGE_COLUMNS = 16
"""(key, type) pairs with range columns, at most: each adds four SAI indexes."""
RELOAD_SECONDS = 1.0
"""A reader looks for pairs another process registered at most this often."""
FORMAT = "2"
"""The meta `format`: 2, range columns filled in for every node."""

ADD_COLUMNS = 'ALTER TABLE {table} ADD IF NOT EXISTS ("{lo}" {type}, "{hi}" {type})'
ADD_INDEX = (
    'CREATE CUSTOM INDEX IF NOT EXISTS {index} ON {table} ("{column}") '
    "USING 'StorageAttachedIndex'"
)
PROBE = 'SELECT node_id FROM {table} WHERE "{column}" = ? LIMIT 1'
UPDATE_NODE = "UPDATE {{nodes}} SET {assignments} WHERE node_id = ?"
UPDATE_HOT = (
    "UPDATE {{hot}} SET {assignments} WHERE kind = ? AND tag = ? AND bucket = ? AND node_id = ?"
)
INDEXED = ("nodes", "hot")
"""The tables with range columns."""

Cells = dict[str, Any]
"""Range column name → value (None clears it)."""


def wanted(values: FilterValues) -> set[RangeColumn]:
    """The range column pairs a node with these filter values fills in."""
    numbers = {RangeColumn(True, key) for key in values.numbers}
    return numbers | {RangeColumn(False, key) for key in values.strings}


def cells(values: FilterValues, columns: Collection[RangeColumn]) -> Cells:
    """The `lo`/`hi` values of these pairs for a node with `values`."""
    found: Cells = {}
    for column in columns:
        held = (values.numbers if column.is_number else values.strings).get(column.key, ())
        if held:
            found[column.lo] = code(min(held))
            found[column.hi] = code(max(held))
    return found


def updates(
    node_id: str, hot: Mapping[TagKey, int], filled: Cells
) -> list[tuple[str, tuple[Any, ...]]]:
    """UPDATE templates and values setting `filled` on a node row and its rows in hot tags'
    buckets (`hot`: tag -> bucket)."""
    if not filled:
        return []
    names = sorted(filled)
    assignments = ", ".join(f'"{name}" = ?' for name in names)  # validated names only
    values = tuple(filled[name] for name in names)
    found = [(UPDATE_NODE.format(assignments=assignments), (*values, node_id))]
    template = UPDATE_HOT.format(assignments=assignments)
    found.extend(
        (template, (*values, kind, tag, bucket, node_id))
        for (kind, tag), bucket in sorted(hot.items())
    )
    return found


class RangeColumns:
    """The registered range column pairs of one store (see the module docstring)."""

    def __init__(self, requests: Requests, session: Any, limit: int = MAX_RANGE_COLUMNS) -> None:
        self._requests = requests
        self.limit = limit
        self._session = session
        self._lock = threading.Lock()
        self.known: frozenset[RangeColumn] = frozenset()
        self.overflowing = False
        self._loaded_at = -math.inf

    @property
    def complete(self) -> bool:
        """Whether a (key, type) without a pair has no value in any node."""
        return not self.overflowing

    def reset(self) -> None:
        """Forget everything (the tables were dropped)."""
        self.known, self.overflowing = frozenset(), False

    def open_now(self) -> None:
        """Load the registry of an existing store (blocking, when the storage opens), filling
        in the range columns of a store written before them first."""
        with self._lock:
            try:
                rows = self._select_now()
            except Exception:  # no meta table: a store of an earlier version
                self._run_ddl(self._requests.cql(CREATE_META))
                rows = self._select_now()
            self._remember(rows)
        if "format" not in rows:
            self._fill_in_now()
            self._insert_now("format", FORMAT)

    async def refresh(self) -> None:
        """Look for pairs other processes registered (at most every `RELOAD_SECONDS`)."""
        if time.monotonic() - self._loaded_at >= RELOAD_SECONDS:
            await self._load()

    async def ensure(self, columns: set[RangeColumn]) -> frozenset[RangeColumn]:
        """Add the missing pairs of `columns`; return those that have columns."""
        if columns - self.known:
            await asyncio.to_thread(self._add, columns)
        return frozenset(columns) & self.known

    def mark_new(self) -> None:
        """A store just created: nothing to fill in (called with its schema, in a thread)."""
        self._run_ddl(self._requests.cql(CREATE_META))
        self._insert_now("format", FORMAT)

    def _select_now(self) -> dict[str, str]:
        return dict(self._requests.execute_now(self._requests.cql(SELECT_META), ()))

    async def _load(self) -> dict[str, str]:
        rows = dict(await self._requests.run(SELECT_META, ()))
        self._remember(rows)
        return rows

    def _remember(self, rows: dict[str, str]) -> None:
        self.known = frozenset(
            RangeColumn(*json.loads(value))
            for name, value in rows.items()
            if name.startswith("range ")
        )
        self.overflowing = "overflow" in rows
        self._loaded_at = time.monotonic()

    def _run_ddl(self, statement: str) -> None:
        try:
            run_ddl(self._session, statement)
        except Exception as error:
            raise StorageError(
                f"adding range columns failed: {str(error).splitlines()[0]}"
            ) from error

    def _add(self, columns: set[RangeColumn]) -> None:
        """Create, wait for and register the missing pairs (in a thread, one at a time)."""
        with self._lock:
            self._remember(self._select_now())
            for column in sorted(columns - self.known, key=lambda c: (c.key, c.is_number)):
                if len(self.known) >= self.limit:
                    if not self.overflowing:
                        self._insert_now("overflow", "1")
                        self.overflowing = True
                    return
                logger.info(
                    "graphstore: adding range columns for metadata key %r (%s values): "
                    "a schema change, once per key and type",
                    column.key,
                    "number" if column.is_number else "string",
                )
                self._create(column)
                entry = json.dumps([column.is_number, column.key], ensure_ascii=False)
                self._insert_now("range " + column.base, entry)
                self.known |= {column}

    def _insert_now(self, name: str, value: str) -> None:
        self._requests.execute_now(self._requests.cql(INSERT_META), (name, value))

    def _create(self, column: RangeColumn) -> None:
        names = self._requests.names
        for part in INDEXED:
            table = names[part]
            self._run_ddl(
                ADD_COLUMNS.format(table=table, lo=column.lo, hi=column.hi, type=column.cql_type)
            )
            for name in (column.lo, column.hi):
                index = f"{names['table']}_{part}_{name}"
                self._run_ddl(ADD_INDEX.format(index=index, table=table, column=name))
        probe_value: float | int = 0.0 if column.is_number else 0
        deadline = time.monotonic() + DDL_TIMEOUT
        for part in INDEXED:
            for name in (column.lo, column.hi):
                probe = self._requests.prepare(PROBE.format(table=names[part], column=name))
                while True:
                    try:
                        self._session.execute(probe, (probe_value,), timeout=DDL_TIMEOUT)
                        break
                    except Exception as error:
                        building = "INDEX_NOT_AVAILABLE" in str(error)
                        if not building or time.monotonic() > deadline:
                            raise StorageError(
                                f"the index of range column {name} is not queryable: "
                                f"{str(error).splitlines()[0]}"
                            ) from error
                        time.sleep(0.2)

    def _fill_in_now(self) -> None:
        """Range columns of every node of a store written before they existed."""
        rows = self._requests.execute_now(self._requests.cql(SCAN_NODES), ())
        nodes = [
            (node_id, tag_map(tag_buckets), FilterValues.of_terms(terms or ()))
            for node_id, _, _, terms, tag_buckets, _ in rows
        ]
        needed = set().union(*(wanted(values) for _, _, values in nodes)) if nodes else set()
        self._add(needed)
        batches = []
        for node_id, hot, values in nodes:
            statements = updates(node_id, hot, cells(values, needed & self.known))
            if statements:
                batch = self._requests.batch()  # at the store's write level
                for template, bound in statements:
                    batch.add(self._requests.prepare(self._requests.cql(template)), bound)
                batches.append((batch, ()))
        for success, result in execute_concurrent(self._session, batches, concurrency=32):
            if not success:
                raise StorageError(f"filling in range columns failed: {one_line(result)}")
