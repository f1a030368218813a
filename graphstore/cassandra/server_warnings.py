"""Server warnings about what a store does by design, dropped from the driver's log.

- A batch of a store's own tables passing `batch_size_warn_threshold`: every node is written
  in one batch with its tag rows (`writes`), so its 5 KiB default is passed by design.  An
  application that logs warnings (`graphstore mcp`: the MCP SDK does) printed one per card
  written; warnings about other tables still pass.
- Cassandra 5.0's notice that SAI vector indexes are experimental (`VECTOR_NOTICE`).  The
  server repeats it for every schema change of a table with a vector index, so a write
  bringing three new metadata keys (their range columns, `ranges`) logged it eighteen times;
  the README states it once.  It names no table, so it is dropped for the whole process while
  a store is open.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

DRIVER_LOGGER = "cassandra.protocol"
"""Where the driver logs the warnings a server sends back with a response."""
BATCH_WARNING = re.compile(r"Batch for \[([^\]]*)\] is of size")
VECTOR_NOTICE = "SAI ANN indexes on vector columns are experimental"


class OwnServerWarnings(logging.Filter):
    """Drops batch-size warnings whose tables are all in `tables` (`keyspace.table`), and
    the vector-index notice."""

    def __init__(self, tables: Iterable[str]) -> None:
        super().__init__()
        self.tables = frozenset(tables)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if VECTOR_NOTICE in message:
            return False
        found = BATCH_WARNING.search(message)
        if found is None:
            return True
        named = {table.strip() for table in found.group(1).split(",")}
        return not named <= self.tables
