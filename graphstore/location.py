"""Choosing a backend from one URL-like string (the CLI's `--store`, `GRAPHSTORE_STORE`).

- a file path (default `graphstore.db`): the embedded store in that SQLite file;
- `memory:`: the embedded store in memory, gone when the process ends;
- `cassandra://[user[:password]@]host[:port][,host…]/keyspace[?table=prefix]`: Cassandra.

Locations are printed through `graphstore.redaction.redact`.
"""

from __future__ import annotations

import fcntl
import os
import re
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from graphstore.embedded import EmbeddedStorage
from graphstore.errors import StoreOpenError
from graphstore.redaction import URL_SCHEME, redact
from graphstore.storage import Storage

DEFAULT_STORE = "graphstore.db"
STORE_ENV = "GRAPHSTORE_STORE"
CASSANDRA_SCHEME = "cassandra://"
MISTYPED_CASSANDRA = re.compile(r"cassandra(?::/*|//+)", re.IGNORECASE)
"""`cassandra:/…`, `cassandra:…` or `cassandra//…`: a `cassandra://` URL mistyped."""


def store_location(explicit: str | None = None) -> str:
    """The store the user asked for: the explicit option, else the environment, else default
    (an empty option or variable is an error: falling back would open another store)."""
    for given, name in ((explicit, "--store"), (os.environ.get(STORE_ENV), f"${STORE_ENV}")):
        if given is not None:
            if not given.strip():
                raise StoreOpenError(f"{name} is empty: give a file path, memory: or a URL")
            return given
    return DEFAULT_STORE


def is_cassandra(location: str) -> bool:
    """Whether `location` is a `cassandra://` URL (the scheme in any case, as URLs allow)."""
    return location[: len(CASSANDRA_SCHEME)].lower() == CASSANDRA_SCHEME


def _meant_url(location: str) -> str | None:
    """The `cassandra://` URL a mistyped one (`MISTYPED_CASSANDRA`) meant, redacted, or None."""
    typo = MISTYPED_CASSANDRA.match(location)
    return None if typo is None else redact(CASSANDRA_SCHEME + location[typo.end() :])


SQLITE_COMPANIONS = ("-wal", "-shm")
"""The files SQLite keeps beside a store while a connection has it open."""


@dataclass(frozen=True)
class NewStoreFile:
    """A store file a writing command is about to create, or to fill (an empty file, as
    `touch` makes), and how to put it back if the command fails before storing anything."""

    path: Path
    was_empty: bool
    """It existed, empty: put back by emptying it, not by removing it (it is the user's)."""
    companions: tuple[Path, ...]
    """Its `-wal` and `-shm` files that did not exist before."""

    def put_back(self) -> None:
        """Remove the file, or empty it again; only while no `-wal` or `-shm` file beside
        it says another connection still has it open."""
        if any(Path(f"{self.path}{suffix}").exists() for suffix in SQLITE_COMPANIONS):
            return
        if self.was_empty:
            self.path.write_bytes(b"")
        else:
            self.path.unlink(missing_ok=True)

    def put_back_after_failed_open(self) -> None:
        """Put the file back after opening it failed (a full disk): the `-wal` and `-shm`
        files the failed open left are its own, unless another process has the store open
        (one that created it meanwhile: `held_open`), and then nothing is touched."""
        if held_open(self.path):
            return
        for companion in self.companions:
            companion.unlink(missing_ok=True)
        self.put_back()


SHM_DMS_BYTE = 128
"""The byte of a store's `-shm` file that every SQLite connection holding the store open in
WAL mode keeps a shared lock on (SQLite's "dead man switch", `UNIX_SHM_DMS`)."""


def held_open(store_file: Path) -> bool:
    """Whether a connection of another process has the store open: it holds a lock on the
    `-shm` file's `SHM_DMS_BYTE`, so an exclusive lock on it is refused.  (This process holds
    no connection to the file when asked, and taking and dropping the lock here changes
    nothing for SQLite.)"""
    try:
        descriptor = os.open(f"{store_file}-shm", os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.lockf(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, SHM_DMS_BYTE)
    except OSError:
        return True
    else:
        fcntl.lockf(descriptor, fcntl.LOCK_UN, 1, SHM_DMS_BYTE)
        return False
    finally:
        os.close(descriptor)


def new_store_file(location: str) -> NewStoreFile | None:
    """The file opening `location` would create or fill: None for memory, a URL or a file
    with content; for a link to a missing file, the link's target (the link itself is the
    user's)."""
    if location == "memory:" or URL_SCHEME.match(location) or _names_a_folder(location):
        return None  # a folder name is refused, and `Path` would drop its final slash
    if os.path.exists(location):
        if not os.path.isfile(location) or os.path.getsize(location) != 0:
            return None
        return _new_store_file(Path(os.path.realpath(location)), was_empty=True)
    if not os.path.lexists(location):
        return _new_store_file(Path(location), was_empty=False)
    target = Path(os.path.realpath(location))
    return None if os.path.islink(target) else _new_store_file(target, was_empty=False)


def _new_store_file(path: Path, *, was_empty: bool) -> NewStoreFile:
    companions = (Path(f"{path}{suffix}") for suffix in SQLITE_COMPANIONS)
    return NewStoreFile(path, was_empty, tuple(c for c in companions if not c.exists()))


async def close_unused(storage: Storage, new_file: NewStoreFile | None) -> None:
    """Close the store of a command that failed, first putting back what opening it created
    if nothing was stored since: a new file (`new_store_file`; an empty one emptied again),
    or a new Cassandra keyspace that has no table yet.

    The command's own error is the one the user sees: a clean-up step that fails (the
    store cannot be counted, the node is down) is skipped, a file that cannot be counted
    is kept, and the store is closed whatever happened before.  A new file is put back only
    when closing left no `-wal` or `-shm` file beside it: SQLite removes them when its last
    connection closes, so while they remain another process has the store open (an ingest
    started beside this one) and may be writing to it."""
    empty = False
    try:
        with suppress(Exception):
            empty = new_file is not None and (await storage.stats(0)).nodes == 0
        if not isinstance(storage, EmbeddedStorage):
            from graphstore.cassandra import CassandraStorage

            if isinstance(storage, CassandraStorage):
                with suppress(Exception):
                    await storage.drop_created_keyspace()
    finally:
        with suppress(Exception):
            await storage.close()
    if new_file is not None and empty:
        new_file.put_back()


def _check_reachable(location: str, shown: str) -> None:
    """A one-line error when this user may not look into a folder on the way to `location`:
    `os.path.exists` is false then, and the store was called missing ("no store at")."""
    try:
        os.stat(location)  # through a link too
    except PermissionError:
        raise StoreOpenError(
            f"cannot reach {shown}: permission denied on a folder on its way"
        ) from None
    except OSError:
        return


def _reads_empty(path: str) -> bool:
    """Whether the file at `path` holds nothing: read, since a kernel file (`/proc/version`)
    has a size of 0 and text all the same (it was called "an empty file", and SQLite takes
    it for an empty database)."""
    try:
        with open(path, "rb") as file:
            return not file.read(1)
    except OSError:  # unreadable: SQLite says why
        return False


def _names_a_folder(path: str) -> bool:
    """Whether `path` ends in a separator, `.` or `..` (`e9.db/`, `e9.db/.`): `Path()` and
    SQLite drop such an ending and open `e9.db`, while `exists()` calls it missing, so a
    failed ingest once removed an existing store as new."""
    separators = "/" + os.sep
    return path.endswith(tuple(separators)) or os.path.basename(path) in ("", ".", "..")


def open_storage(location: str, *, create: bool = True) -> Storage:
    """Open the backend named by `location`; a missing file, keyspace or table is created
    only if `create`."""
    if location == "memory:":
        return EmbeddedStorage(":memory:")
    if is_cassandra(location):
        from graphstore.cassandra import CassandraStorage

        return CassandraStorage.from_url(location, create=create)
    meant = _meant_url(location)
    scheme = URL_SCHEME.match(location)
    if scheme is not None:
        if meant is not None:
            raise StoreOpenError(
                f"{redact(location)} is not a cassandra:// URL: did you mean {meant}?"
            )
        raise StoreOpenError(
            f"unknown kind of store {scheme.group(1)!r}: give a file path (a name with a "
            "colon as ./name), memory: or cassandra://host/keyspace"
        )
    shown = redact(location)
    if _names_a_folder(location):
        raise StoreOpenError(f"{shown} names a folder, not a store file")
    _check_reachable(location, shown)
    missing = not os.path.lexists(location)
    hint = f" (did you mean {meant}?)" if meant is not None and missing else ""
    if not create and not os.path.exists(location):
        target = None if missing else redact(os.readlink(location))
        told = "" if target is None else f" (it is a link to {target}, which does not exist)"
        raise StoreOpenError(f"no store at {shown}{told}{hint}")
    if os.path.isfile(location) and os.path.getsize(location) == 0:
        if not _reads_empty(location):  # SQLite takes a file of size 0 for an empty database
            raise StoreOpenError(f"{shown} is not a graphstore file")
        if not create:
            raise StoreOpenError(f"{shown} is an empty file, not a store")  # SQLite makes one
    try:
        return EmbeddedStorage(location, create=create)
    except StoreOpenError as error:
        if hint:
            raise StoreOpenError(f"{error}{hint}") from error
        raise
