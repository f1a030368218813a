"""Choosing a backend from one URL-like string (the CLI's `--store`, `GRAPHSTORE_STORE`).

- a file path (default `graphstore.db`): the embedded store in that SQLite file;
- `memory:`: the embedded store in memory, gone when the process ends;
- `cassandra://[user[:password]@]host[:port][,host…]/keyspace[?table=prefix]`: Cassandra.
"""

from __future__ import annotations

import os
from pathlib import Path

from graphstore.embedded import EmbeddedStorage
from graphstore.errors import StoreOpenError
from graphstore.storage import Storage

DEFAULT_STORE = "graphstore.db"
STORE_ENV = "GRAPHSTORE_STORE"


def store_location(explicit: str | None = None) -> str:
    """The store the user asked for: the explicit option, else the environment, else default."""
    return explicit or os.environ.get(STORE_ENV) or DEFAULT_STORE


def redact(location: str) -> str:
    """`location` fit to print: a `cassandra://` URL's password replaced by `***`.

    Every message that shows a store location shows this, never the location itself.
    """
    scheme = "cassandra://"
    if not location.startswith(scheme):
        return location
    # Split at the last "@" anywhere, not by URL rules: a password with an unescaped "/" or
    # "?" is hidden too (over-redacting is the safe mistake).
    userinfo, at, hosts = location[len(scheme) :].rpartition("@")
    if not at or ":" not in userinfo:
        return location
    return f"{scheme}{userinfo.partition(':')[0]}:***@{hosts}"


def new_store_file(location: str) -> Path | None:
    """The file opening `location` would create: None for memory, Cassandra or an existing path."""
    if location == "memory:" or location.startswith("cassandra://") or os.path.lexists(location):
        return None
    return Path(location)


def remove_store_file(file: Path) -> None:
    """Delete an embedded store's file with its WAL and shared-memory files."""
    for path in (file, Path(f"{file}-wal"), Path(f"{file}-shm")):
        path.unlink(missing_ok=True)


def open_storage(location: str, *, create: bool = True) -> Storage:
    """Open the backend named by `location`; a missing file is created only if `create`."""
    if location == "memory:":
        return EmbeddedStorage(":memory:")
    if location.startswith("cassandra://"):
        from graphstore.cassandra import CassandraStorage

        return CassandraStorage.from_url(location)
    if not create and not os.path.lexists(location):
        raise StoreOpenError(f"no store at {location}")
    return EmbeddedStorage(location)
