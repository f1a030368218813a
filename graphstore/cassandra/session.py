"""The thin layer over the driver session: prepared statements, retries, an in-flight bound.

Every query of a store goes through one `Requests`: statements are prepared once, marked
idempotent and given the consistency level of their kind (`consistency.Consistency`), run
with one execution profile (tuple rows, a timeout, the retry policy below), and at most
`max_in_flight` are outstanding across all event loops and threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from cassandra import (
    ConsistencyLevel,
    OperationTimedOut,
    ReadFailure,
    ReadTimeout,
    Unavailable,
    WriteFailure,
    WriteTimeout,
)
from cassandra.cluster import EXEC_PROFILE_DEFAULT, NoHostAvailable
from cassandra.connection import ConnectionBusy, ProtocolError
from cassandra.policies import RetryPolicy
from cassandra.query import BatchStatement, BatchType, tuple_factory

from graphstore.cassandra.consistency import Consistency
from graphstore.cassandra.schema import schema_host
from graphstore.errors import InvalidInputError, StorageError, one_line

DEFAULT_MAX_IN_FLIGHT = 32
DEFAULT_TIMEOUT = 10.0
SCHEMA_TABLES = "system_schema."
"""Queries naming it read the cluster's schema, which every node holds whole."""
DEFAULT_RETRIES = 2
DEFAULT_RETRY_WINDOW = 60.0
FIRST_PAUSE = 0.25
LONGEST_PAUSE = 4.0
CAS_WRITE_UNKNOWN = 0x1700
"""The server's code for a lightweight transaction whose proposal too few replicas accepted
(two processes recording the model of a new store at once): its outcome is unknown, and
sending it again settles it, since Paxos completes an accepted proposal before the next.
The driver knows no class for it."""
REPLICA_ERRORS = (WriteTimeout, ReadTimeout, OperationTimedOut, WriteFailure)
"""Replicas (or the coordinator) that did not answer in time: transient while the cluster
notices that a node died.  Too few replicas alive (Unavailable) fails at once.  A replica
that failed a write: Cassandra 5.0.9 fails a write into a vector index's memtable when more
than `concurrent_writes` writes insert into it at once (CASSANDRA-21644, fixed later), which
a load of many passages at a time meets; the write succeeds when sent again."""


def nodes_by_data_centre(session: Any) -> dict[str, int]:
    """How many nodes the cluster's metadata knows in each data centre, up or down: a node
    that is down still holds its replicas, and comes back."""
    counts: dict[str, int] = {}
    for host in session.cluster.metadata.all_hosts():
        centre = host.datacenter or ""
        counts[centre] = counts.get(centre, 0) + 1
    return counts


def said(error: BaseException) -> str:
    """What a driver error says, on one line.  The driver's "no host" quotes a tuple with a
    dict of each host's error (`('Unable to connect to any servers', {'127.0.0.1:9049':
    ConnectionRefusedError(111, "Tried connecting to …")})`): said here as each cause once
    with the hosts it came from; with no host tried (every node it knew is down: stopped,
    or killed mid-ingest), that no node is up."""
    if not isinstance(error, NoHostAvailable):
        return _cause(error)
    if not error.errors:
        return "no Cassandra node is up (all it knew stopped answering: is the node running?)"
    hosts: dict[str, list[str]] = {}
    for host, cause in error.errors.items():
        hosts.setdefault(_cause(cause), []).append(str(getattr(host, "endpoint", host)))
    return "; ".join(f"{cause} ({', '.join(sorted(at))})" for cause, at in hosts.items())


def _cause(error: BaseException) -> str:
    """One host's error, said plainly where the driver's text is a repr."""
    if isinstance(error, Unavailable):
        level = ConsistencyLevel.value_to_name.get(error.consistency, error.consistency)
        return (
            f"too few replicas alive: consistency {level} needs {error.required_replicas}, "
            f"{error.alive_replicas} alive"
        )
    if isinstance(error, ReadFailure):  # its text ends in a dict of its fields
        level = ConsistencyLevel.value_to_name.get(error.consistency, error.consistency)
        failed = ", ".join(sorted(map(str, error.error_code_map or {}))) or "a replica"
        return (
            f"the read failed on {failed} ({error.received_responses} of "
            f"{error.required_responses} replicas answered for {level}); a node that has just "
            "started may not be ready: try again"
        )
    if isinstance(error, OperationTimedOut):  # its text is a dict of the hosts tried
        # No host yet when the connection itself timed out (a node paused, a port that
        # takes connections and never answers); the host is named with the cause then.
        return (
            f"no answer in time from {error.last_host}" if error.last_host else "no answer in time"
        )
    if isinstance(error, ConnectionRefusedError) or "Connection refused" in str(error):
        return "connection refused: is a Cassandra node listening there?"
    if isinstance(error, ProtocolError) and "does not support protocol version" in str(error):
        # The first byte of another server's answer read as a protocol version: "HTTP/1.1"
        # is version 72.
        return "the server there does not speak Cassandra's protocol: is it a Cassandra node?"
    return one_line(error)


def retry_pauses(window: float) -> Iterator[float]:
    """The pauses before each re-send of a failed request, doubling from `FIRST_PAUSE` up to
    `LONGEST_PAUSE`, while a re-send after the pause is still within `window` seconds of
    this call (the first attempt); the sync and async requests share them."""
    deadline = time.monotonic() + window
    return _pauses_until(deadline)


def _pauses_until(deadline: float) -> Iterator[float]:
    pause = FIRST_PAUSE
    while time.monotonic() + pause <= deadline:
        yield pause
        pause = min(2 * pause, LONGEST_PAUSE)


def transient(cause: BaseException | None) -> bool:
    """Whether a failed request may succeed when sent again: replicas that did not answer
    (`REPLICA_ERRORS`), a lightweight transaction whose outcome is unknown
    (`CAS_WRITE_UNKNOWN`), or a connection of this client too busy to take it (the driver's
    `ConnectionBusy` for every host tried: large batches, passages of hundreds of KB, still
    queued on the socket; they drain).  ConnectionBusy ended an ingest of 40 passages of
    330 KB on one node, and hid the server's own error for a batch over its size limit."""
    if isinstance(cause, REPLICA_ERRORS) or getattr(cause, "code", None) == CAS_WRITE_UNKNOWN:
        return True
    if not isinstance(cause, NoHostAvailable) or not cause.errors:
        return False
    return all(isinstance(error, ConnectionBusy) for error in cause.errors.values())


Decision = tuple[int, Any]
"""A retry policy's answer: RETRY, RETRY_NEXT_HOST or RETHROW, and a consistency level."""


class IdempotentRetryPolicy(RetryPolicy):  # type: ignore[misc]
    """Retry timeouts and request errors, but only of statements marked idempotent.

    Every statement this backend sends is idempotent (reads, and upserts and deletes with
    client timestamps), so a retry can neither duplicate a row nor resurrect a deleted one.
    """

    def __init__(self, max_retries: int = DEFAULT_RETRIES) -> None:
        self.max_retries = max_retries

    def _decide(self, query: Any, retry_num: int, decision: int) -> Decision:
        if retry_num < self.max_retries and getattr(query, "is_idempotent", False):
            return decision, None  # None: keep the consistency level
        return self.RETHROW, None

    # The driver passes `retry_num` and the error's details by keyword.
    def on_read_timeout(self, query: Any, *args: Any, retry_num: int, **info: Any) -> Decision:
        return self._decide(query, retry_num, self.RETRY)

    def on_write_timeout(self, query: Any, *args: Any, retry_num: int, **info: Any) -> Decision:
        return self._decide(query, retry_num, self.RETRY)

    def on_unavailable(self, query: Any, *args: Any, retry_num: int, **info: Any) -> Decision:
        return self._decide(query, retry_num, self.RETRY_NEXT_HOST)

    def on_request_error(self, query: Any, *args: Any, retry_num: int, **info: Any) -> Decision:
        return self._decide(query, retry_num, self.RETRY_NEXT_HOST)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class InFlightGate:
    """A bound on driver requests in flight, shared by every event loop and thread.

    The sync API of `GraphStore` runs coroutines on fresh event loops, possibly in worker
    threads, so the bound cannot be an asyncio.Semaphore made at construction.  It is a
    lock-protected counter; a waiter is a future of its own loop, woken thread-safely by
    whichever thread (usually a driver thread, when a response arrives) frees a slot.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise InvalidInputError(f"max_in_flight must be at least 1, got {limit}")
        self.limit = limit
        self.peak = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    @property
    def in_flight(self) -> int:
        """Requests holding a slot now."""
        return self._in_flight

    async def acquire(self) -> None:
        """Wait for a slot, first come first served."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._in_flight < self.limit and not self._waiters:
                self._in_flight += 1
                self.peak = max(self.peak, self._in_flight)
                return
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append((loop, waiter))
        try:
            await waiter
        except asyncio.CancelledError:
            with self._lock:
                handed_over = (loop, waiter) not in self._waiters
                if not handed_over:
                    self._waiters.remove((loop, waiter))
            if handed_over:  # a slot was passed to us as we were cancelled: pass it on
                self.release()
            raise

    def release(self) -> None:
        """Free a slot, handing it straight to the oldest waiter whose loop still runs."""
        with self._lock:
            while self._waiters:
                loop, waiter = self._waiters.popleft()
                try:
                    loop.call_soon_threadsafe(_wake, waiter)
                except RuntimeError:  # that loop is closed: nobody waits there any more
                    continue
                return
            self._in_flight -= 1


class _Page:
    """Delivers each page of one driver request to the event loop that awaits it.

    The driver calls back from its own threads; the slot is freed there, when the response
    arrives, so the gate counts exactly the requests the driver has outstanding.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, gate: InFlightGate) -> None:
        self.loop = loop
        self.gate = gate
        self.waiter: asyncio.Future[list[Any]] = loop.create_future()

    def rows(self, rows: list[Any] | None) -> None:
        self.gate.release()
        self._settle(self.waiter, rows or [], None)

    def error(self, error: BaseException) -> None:
        self.gate.release()
        self._settle(self.waiter, [], error)

    def _settle(
        self, waiter: asyncio.Future[list[Any]], rows: list[Any], error: BaseException | None
    ) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            self.loop.call_soon_threadsafe(_resolve, waiter, rows, error)


def _resolve(
    waiter: asyncio.Future[list[Any]], rows: list[Any], error: BaseException | None
) -> None:
    if waiter.done():
        return
    if error is None:
        waiter.set_result(rows)
    else:
        waiter.set_exception(error)


def query_level(query: str, consistency: Consistency) -> int:
    """The driver's consistency level for a query: ANN, other reads, or writes."""
    if "ANN OF" in query:
        name = consistency.ann
    elif query.lstrip().upper().startswith("SELECT"):
        name = consistency.read
    else:
        name = consistency.write
    level: int = ConsistencyLevel.name_to_value[name]
    return level


class Requests:
    """Runs a store's statements on a driver session (see the module docstring).

    `names` are the quoted, validated table names formatted into query templates.
    """

    def __init__(
        self,
        session: Any,
        names: Mapping[str, str],
        *,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_RETRIES,
        retry_window: float = DEFAULT_RETRY_WINDOW,
        consistency: Consistency | None = None,
    ) -> None:
        self.session = session
        self.retry_window = retry_window
        self.names = dict(names)
        self.consistency = consistency or Consistency()
        self.gate = InFlightGate(max_in_flight)
        self.lock = threading.RLock()  # schema creation prepares while holding it
        self._statements: dict[str, Any] = {}
        self.profile = session.execution_profile_clone_update(
            EXEC_PROFILE_DEFAULT,
            row_factory=tuple_factory,
            request_timeout=timeout,
            retry_policy=IdempotentRetryPolicy(max_retries),
        )

    @property
    def prepared_queries(self) -> list[str]:
        """The CQL text of every statement prepared so far (for audits: no values in it)."""
        with self.lock:
            return list(self._statements)

    def forget(self) -> None:
        """Drop every prepared statement (after the tables they refer to were dropped)."""
        with self.lock:
            self._statements.clear()

    def cql(self, template: str, where: str = "", prefix: str = " AND ") -> str:
        """Fill a template with the table names and `where`, filter conditions made by
        `graphstore.cassandra.filters` (bind markers and validated column names only)."""
        return template.format(**self.names, where=prefix + where if where else "")

    def prepare(self, query: str) -> Any:
        """The prepared statement for `query`, preparing it on first use (blocking)."""
        with self.lock:
            prepared = self._statements.get(query)
            if prepared is None:
                prepared = self.session.prepare(query)
                prepared.is_idempotent = True
                prepared.consistency_level = query_level(query, self.consistency)
                self._statements[query] = prepared
            return prepared

    def execute_now(self, query: str, values: Sequence[Any]) -> list[Any]:
        """Run one statement and wait (for opening a store, outside any event loop), sent
        again after a timeout as `execute` does (a store opened just after a node died
        failed).  The schema tables are read at ONE: every node holds them whole (they are
        local), so a read level of TWO or THREE could never be met there, and opening a
        store at `consistency=THREE` failed on a healthy cluster of three.  They are read on
        `schema_host`, where every schema statement goes: a node that has not heard of a
        keyspace another process made there a moment ago said it did not exist."""
        statement = self.prepare(query)
        host = None
        if SCHEMA_TABLES in query:
            statement = statement.bind(values)
            statement.consistency_level = ConsistencyLevel.ONE
            values = ()
            host = schema_host(self.session)
        pauses = retry_pauses(self.retry_window)
        while True:
            try:
                return list(
                    self.session.execute(
                        statement, values or None, execution_profile=self.profile, host=host
                    )
                )
            except Exception as error:
                pause = next(pauses, None) if transient(error) else None
                if pause is None:
                    raise
            time.sleep(pause)

    async def prepared(self, template: str, where: str = "", prefix: str = " AND ") -> Any:
        """The prepared statement for a filled template, preparing it in a thread if new."""
        query = self.cql(template, where, prefix)
        prepared = self._statements.get(query)
        if prepared is not None:
            return prepared
        try:
            return await asyncio.to_thread(self.prepare, query)
        except Exception as error:
            unreached = isinstance(error, (NoHostAvailable, OperationTimedOut))
            what = "request failed" if unreached else "refused a statement"
            raise StorageError(f"Cassandra {what}: {said(error)}") from error

    def batch(self) -> BatchStatement:
        """An empty logged batch at the write level (idempotent: its rows carry timestamps)."""
        level = ConsistencyLevel.name_to_value[self.consistency.write]
        batch = BatchStatement(batch_type=BatchType.LOGGED, consistency_level=level)
        batch.is_idempotent = True
        return batch

    async def execute(self, statement: Any, values: Sequence[Any] | None = None) -> list[Any]:
        """Run one statement under the in-flight bound; return the rows of every page.

        A statement the cluster could not complete because replicas timed out, or that this
        client's connections were too busy to send (`transient`), is sent again if it is
        idempotent (all are but counter increments), after a growing pause, until
        `retry_window` seconds have passed: the other nodes notice a node that died only after
        10-30 s, and until then every logged batch whose batchlog they send to it times out.
        A re-sent statement gets a new client timestamp (the driver's own retries keep
        theirs); it can only matter against another writer of the same passage at the same
        moment, which is not isolated anyway.  When no node answers, or too few replicas are
        alive, the error comes at once.
        """
        pauses = retry_pauses(self.retry_window)
        while True:
            try:
                return await self._execute_once(statement, values)
            except StorageError as error:
                again = transient(error.__cause__) and getattr(statement, "is_idempotent", False)
                pause = next(pauses, None) if again else None
                if pause is None:
                    raise
            await asyncio.sleep(pause)

    async def _execute_once(self, statement: Any, values: Sequence[Any] | None) -> list[Any]:
        loop = asyncio.get_running_loop()
        await self.gate.acquire()
        page = _Page(loop, self.gate)
        try:
            future = self.session.execute_async(statement, values, execution_profile=self.profile)
        except Exception as error:
            self.gate.release()
            raise StorageError(f"Cassandra request failed: {said(error)}") from error
        future.add_callbacks(page.rows, page.error)
        rows: list[Any] = []
        try:
            while True:
                rows.extend(await page.waiter)
                if not future.has_more_pages:
                    return rows
                await self.gate.acquire()
                page.waiter = loop.create_future()
                future.start_fetching_next_page()
        except Exception as error:
            raise StorageError(f"Cassandra request failed: {said(error)}") from error

    async def run(
        self, template: str, values: Sequence[Any], where: str = "", prefix: str = " AND "
    ) -> list[Any]:
        """Fill, prepare and run a template."""
        return await self.execute(await self.prepared(template, where, prefix), values)

    @property
    def one_node(self) -> bool:
        """Whether the cluster is one node, where one `IN` read beats a request per key."""
        return len(self.session.cluster.metadata.all_hosts()) <= 1

    async def run_keys(
        self, templates: tuple[str, str], keys: Sequence[Sequence[Any]], per_request: int = 100
    ) -> list[Any]:
        """Rows for each of `keys` (each a tuple of a partition key's values, which each row
        starts with) by a pair of templates, `IN` and `=` (`queries`): on one node, one `IN`
        request per chunk of `key_chunks` (a request costs the client more than a row); on a
        cluster, one request per key, each routed to a replica of its row.  The rows of
        all, concurrently, each partition's once."""
        many, one = templates
        as_tuples = [tuple(key) for key in keys]
        if self.one_node:
            requests = [
                self.run(many, (*chunk[0][:-1], [key[-1] for key in chunk]))
                for chunk in key_chunks(as_tuples, per_request)
            ]
        else:
            requests = [self.run(one, key) for key in dict.fromkeys(as_tuples)]
        pages = await asyncio.gather(*requests)
        return [row for rows in pages for row in rows]


def key_chunks(keys: Sequence[tuple[Any, ...]], per_request: int) -> list[list[tuple[Any, ...]]]:
    """Distinct partition keys in chunks of at most `per_request` that agree on every column
    but the last, for `first = ? AND … AND last IN ?`: an `IN` on two columns would ask the
    node for every combination of their values, a lookup each whether or not the partition
    exists (`kw`/`x` and `mention`/`y` in one chunk cost four)."""
    groups: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    for key in dict.fromkeys(keys):
        groups.setdefault(key[:-1], []).append(key)
    return [
        group[start : start + per_request]
        for group in groups.values()
        for start in range(0, len(group), per_request)
    ]
