"""The server's warning that a batch of a store's own tables passed
`batch_size_warn_threshold`, dropped from the driver's log: every node is written in one
batch with its tag rows (`writes`), so its 5 KiB default is passed by design.  An
application that logs warnings (`graphstore mcp`: the MCP SDK does) printed one per card
written; warnings about other tables still pass.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

DRIVER_LOGGER = "cassandra.protocol"
"""Where the driver logs the warnings a server sends back with a response."""
BATCH_WARNING = re.compile(r"Batch for \[([^\]]*)\] is of size")


class OwnBatchWarnings(logging.Filter):
    """Drops batch-size warnings whose tables are all in `tables` (`keyspace.table`)."""

    def __init__(self, tables: Iterable[str]) -> None:
        super().__init__()
        self.tables = frozenset(tables)

    def filter(self, record: logging.LogRecord) -> bool:
        found = BATCH_WARNING.search(record.getMessage())
        if found is None:
            return True
        named = {table.strip() for table in found.group(1).split(",")}
        return not named <= self.tables
