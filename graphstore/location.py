"""Choosing a backend from one URL-like string (the CLI's `--store`, `GRAPHSTORE_STORE`).

- a file path (default `graphstore.db`): the embedded store in that SQLite file;
- `memory:`: the embedded store in memory, gone when the process ends;
- `cassandra://[user[:password]@]host[:port][,host…]/keyspace[?table=prefix]`: Cassandra.
"""

from __future__ import annotations

import os

from graphstore.embedded import EmbeddedStorage
from graphstore.storage import Storage

DEFAULT_STORE = "graphstore.db"
STORE_ENV = "GRAPHSTORE_STORE"


def store_location(explicit: str | None = None) -> str:
    """The store the user asked for: the explicit option, else the environment, else default."""
    return explicit or os.environ.get(STORE_ENV) or DEFAULT_STORE


def open_storage(location: str) -> Storage:
    """Open the backend named by `location`."""
    if location == "memory:":
        return EmbeddedStorage(":memory:")
    if location.startswith("cassandra://"):
        from graphstore.cassandra import CassandraStorage

        return CassandraStorage.from_url(location)
    return EmbeddedStorage(location)
