"""The embedded store's SQLite file: opening, creating, migrating, and one-line error causes.

A new file is initialised in one transaction, so a process killed while creating it leaves
either an empty SQLite file (initialised by the next open) or a complete store, never a file
refused forever; files that an earlier version left half-initialised (its schema statements
committed one by one) are finished too.

A file that this user cannot write, or whose folder it cannot write, is opened read-only.
``mode=ro`` shares SQLite's WAL index (the ``-shm`` file) with any process that writes the
store, so reads see its commits; in a writable folder SQLite creates ``-wal`` and ``-shm``
beside the file for that, and a read-only connection cannot remove them (they keep the
file's permissions: a writer that cannot write them is refused, see `cause`).  Only when
they neither exist nor can be created (read-only media, a folder this user cannot write) is
the file opened ``immutable``, writing nothing: then nothing written later is seen until
it reaches the file, when the storage connects again (`EmbeddedStorage._reopen_if_written`).
``immutable`` is not used for a file that is merely not writable: a process that can write
it (its owner, root) would change it unseen under this one, which would serve stale rows,
or torn ones while that process checkpoints.  Messages name the file through `redact`.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import struct
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from graphstore.errors import StoreOpenError
from graphstore.redaction import redact

FORMAT = "graphstore-embedded"
FORMAT_VERSION = 2
"""1: no change sequence; 2: `nodes.seq` and `deleted`, so readers refresh incrementally."""

CREATE = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE nodes (
        id TEXT PRIMARY KEY,
        text TEXT NOT NULL,
        metadata TEXT NOT NULL,
        links TEXT NOT NULL,
        embedding BLOB NOT NULL,
        seq INTEGER NOT NULL DEFAULT 0
    )""",
    """CREATE TABLE tags (
        kind TEXT NOT NULL,
        tag TEXT NOT NULL,
        node_id TEXT NOT NULL,
        PRIMARY KEY (node_id, kind, tag)
    ) WITHOUT ROWID""",
)

CHANGE_LOG = (
    "CREATE TABLE deleted (id TEXT PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE INDEX nodes_by_seq ON nodes (seq)",
    "CREATE INDEX deleted_by_seq ON deleted (seq)",
)
"""The change sequence: every write transaction stamps the nodes it writes, and a tombstone
for each node it deletes, with one number above all earlier ones."""

State = Literal["empty", "v1", "current"]
COLUMNS = {
    "meta": frozenset({"key", "value"}),
    "nodes": frozenset({"id", "text", "metadata", "links", "embedding", "seq"}),
    "tags": frozenset({"kind", "tag", "node_id"}),
    "deleted": frozenset({"id", "seq"}),
}
"""Each table of a store and its columns (`nodes.seq` since format 2)."""


@dataclass(frozen=True)
class OpenedFile:
    connection: sqlite3.Connection
    read_only: bool
    has_change_log: bool
    """False only for a read-only file written by version 1: readers then reload in full."""
    immutable: bool = False
    """Opened `immutable` (`_connect_read_only`): SQLite assumes no one changes the file."""


IN_CHUNK = 500
"""Values per `IN (…)` list, below SQLite's bound-parameter limit."""


def rows_where_in(
    db: sqlite3.Connection, select: str, column: str, values: Sequence[object]
) -> Iterator[tuple[Any, ...]]:
    """The rows of `{select} WHERE {column} IN (values)`, asked `IN_CHUNK` values at a time.
    `select` and `column` are the caller's own SQL; only "?" placeholders are formatted in,
    and the values are bound parameters."""
    for start in range(0, len(values), IN_CHUNK):
        chunk = values[start : start + IN_CHUNK]
        marks = ",".join("?" * len(chunk))
        yield from db.execute(f"{select} WHERE {column} IN ({marks})", chunk)


def cause(error: sqlite3.Error, timeout: float) -> str:
    """What went wrong, in words a user can act on, with SQLite's own message."""
    code = getattr(error, "sqlite_errorcode", 0) & 0xFF
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return f"another connection holds the write lock (waited up to {timeout:g} s: {error})"
    if code == sqlite3.SQLITE_CORRUPT:
        return f"the file is corrupt ({error})"
    if code == sqlite3.SQLITE_NOTADB:
        return f"it is not a graphstore file ({error})"
    if code == sqlite3.SQLITE_READONLY:
        return f"the file, its folder or its -wal or -shm file is not writable ({error})"
    return str(error)


def writable(file: Path) -> bool:
    """Whether SQLite can write `file` and create its WAL files beside it."""
    return os.access(file, os.W_OK) and os.access(file.parent, os.W_OK)


OPENING = threading.Lock()
"""Held while a store is opened: another thread's store, opened meanwhile, could otherwise
lose its SQLite locks when `shm_holder` closes its descriptor."""


def open_file(path: str, timeout: float, *, create: bool = True) -> OpenedFile:
    """Open (upgrading when writable) the store at `path`, or `:memory:`; an SQLite file
    without a store's tables is made a store only if `create` (a command that only reads
    never writes a file that is not yet a store)."""
    with OPENING:
        return _open_file(path, timeout, create=create)


def _open_file(path: str, timeout: float, *, create: bool) -> OpenedFile:
    read_only = False
    shown = redact(path)  # a mistyped URL taken for a path may hold a password
    if path != ":memory:":
        file = Path(path)
        if file.is_dir():
            raise StoreOpenError(f"{shown} is a directory, not a graphstore file")
        if file.exists() and not file.is_file():  # a device, a pipe: SQLite says "I/O error"
            raise StoreOpenError(f"{shown} is not a regular file, not a graphstore file")
        if not file.parent.exists():
            # The folder is named only when the path holds no password: a part of the path
            # may hold a part of it that `redact` no longer recognises.
            folder = str(file.parent) if shown == path else "its folder"
            raise StoreOpenError(f"cannot create {shown}: {folder} does not exist")
        if not create and missing(file):  # connecting would leave an empty file behind
            raise StoreOpenError(f"no store at {shown}")
        check_log_is_its_own(file, shown)
        read_only = file.exists() and not writable(file)
    try:
        immutable = False
        if read_only:
            db, immutable = _connect_read_only(Path(path), timeout, shown)
            state = _state(db, shown)
            if state == "empty":
                raise StoreOpenError(f"{shown} is read-only and not yet a graphstore file")
            has_change_log = state == "current"
        else:
            db = sqlite3.connect(path, timeout, isolation_level=None, check_same_thread=False)
            state = _state(db, shown)  # refuses a foreign file before writing it
            if state == "empty" and not create:
                db.close()
                raise StoreOpenError(f"no store at {shown}: an SQLite file without one")
            ours = state == "current"
            db.execute("PRAGMA journal_mode = WAL")
            if not ours:
                _initialise(db, shown)
            has_change_log = True
        db.execute("PRAGMA synchronous = NORMAL")
        db.text_factory = lenient_text
    except sqlite3.Error as error:
        raise StoreOpenError(f"cannot open {shown}: {cause(error, timeout)}") from error
    return OpenedFile(db, read_only, has_change_log, immutable)


def check_log_is_its_own(file: Path, shown: str) -> None:
    """Refuse to open a store whose `-wal` and `-shm` a process holds for another file: one
    deleted there, or replaced (`mv new.db live.db`), while that process had it open.
    SQLite takes them for this file's: an ingest after `rm live.db` while a server held it
    failed with "disk I/O error", left an empty file behind and emptied the holder's log,
    and a store moved over a held one read the old store's passages and was corrupt after.
    Once no process holds them nothing tells whose they are: SQLite leaves them behind when
    the file it wrote them for has moved, and reads them as the next file's.  Not asked for
    a second store of this process (`shm_holder`)."""
    holder = shm_holder(log(file, "-shm"))
    if holder is None:
        return
    logs = f"{file.name}-wal and {file.name}-shm"
    if missing(file):
        raise StoreOpenError(
            f"cannot create {shown}: a process (pid {holder}) still holds the store file deleted "
            f"there, with the {logs} beside it, which SQLite would read as the new store's: "
            f"stop that process, then remove {logs}"
        )
    if holds_another(holder, file):
        raise StoreOpenError(
            f"cannot open {shown}: a process (pid {holder}) holds the store file this one "
            f"replaced, with the {logs} beside it, which SQLite would read as this file's and "
            f"corrupt it: stop that process, then remove {logs} (SQLite keeps them when the "
            "file it wrote them for has moved)"
        )


def holds_another(holder: int, file: Path) -> bool:
    """Whether process `holder`, seen holding the `-shm` of `file`, holds it for another
    file: it has not `file` open, and still holds the `-shm` and still has not `file` open
    when asked again.  Asked twice since a process sharing the store may close its
    connection between two questions, which once looked like holding another file."""
    if holds_file(holder, file) is not False:
        return False
    return shm_holder(log(file, "-shm")) == holder and holds_file(holder, file) is False


SHM_DMS_BYTE = 128
"""The byte of a `-shm` file every SQLite connection using it holds a shared lock on (the
unix VFS's "dead man switch", after the 8 WAL locks at byte 120)."""


def shm_holder(shm: Path) -> int | None:
    """The id of another process with a connection open on the `-shm` file, if any (Linux:
    asks the kernel who locks its dead-man-switch byte; None where that cannot be asked).

    Not asked when this process has the file open itself (a second store on the same path):
    closing the descriptor the question needs would release every lock this process holds
    on the file, SQLite's own included."""
    if holds_file(os.getpid(), shm) is not False:
        return None
    try:
        descriptor = os.open(shm, os.O_RDONLY)
    except OSError:
        return None
    try:
        probe = struct.pack("@hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, SHM_DMS_BYTE, 1, 0)
        answer = fcntl.fcntl(descriptor, fcntl.F_GETLK, probe)
    except OSError:
        return None
    finally:
        os.close(descriptor)
    lock_type, _, _, _, pid = struct.unpack("@hhqqi4x", answer)
    return int(pid) if lock_type != fcntl.F_UNLCK and pid > 0 else None


def holds_file(pid: int, file: Path) -> bool | None:
    """Whether process `pid` has `file` open (Linux: its `/proc` descriptors; None when
    they cannot be read, as another user's)."""
    try:
        wanted = os.stat(file)
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for descriptor in descriptors:
        try:
            opened = os.stat(f"/proc/{pid}/fd/{descriptor}")
        except OSError:
            continue
        if (opened.st_dev, opened.st_ino) == (wanted.st_dev, wanted.st_ino):
            return True
    return False


def log(file: Path, suffix: str) -> Path:
    """SQLite's `-wal` or `-shm` file of `file`."""
    return file.with_name(f"{file.name}{suffix}")


def missing(file: Path) -> bool:
    """Whether `file` is not there: `Path.exists` is false for a file behind a folder this
    user may not enter too, which is not missing (SQLite then says why it cannot open it)."""
    try:
        file.stat()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return False


def lenient_text(data: bytes) -> str:
    """A text column as `str`, bytes that are not UTF-8 (a row changed outside graphstore,
    a damaged page) as lone surrogates: the row is then reported corrupt by itself
    (`storage.decode_node`), where SQLite's own decoding failed the whole query, and every
    command, opening the store included, with "Could not decode to UTF-8"."""
    return data.decode("utf-8", "surrogateescape")


def _connect_read_only(file: Path, timeout: float, shown: str) -> tuple[sqlite3.Connection, bool]:
    """A read-only connection: `mode=ro`, or `immutable` when SQLite cannot create the WAL
    index beside the file (see the module's docstring) and there is no write-ahead log that
    `immutable` would leave unread (a copy of a store with its `-wal`, no `-shm`); and
    whether it is `immutable`."""
    uri = file.absolute().as_uri()
    db = sqlite3.connect(
        f"{uri}?mode=ro", timeout, isolation_level=None, check_same_thread=False, uri=True
    )
    try:
        _tables(db)
        return db, False
    except sqlite3.OperationalError as error:
        if not _no_wal_index(error):
            raise
        db.close()
        wal = log(file, "-wal")
        if wal.exists() and wal.stat().st_size:
            raise StoreOpenError(
                f"cannot read {shown} here: {wal.name} beside it may hold its last commits, "
                f"which SQLite reads only with a {file.name}-shm it cannot create in this "
                "folder (open it once where it may be written, which folds them into the "
                "store file)"
            ) from error
        db = sqlite3.connect(
            f"{uri}?mode=ro&immutable=1",
            timeout,
            isolation_level=None,
            check_same_thread=False,
            uri=True,
        )
    return db, True


def _no_wal_index(error: sqlite3.Error) -> bool:
    """Whether `error` says the WAL index could not be created: CANTOPEN on read-only media,
    READONLY_DIRECTORY in a folder this user cannot write."""
    code = getattr(error, "sqlite_errorcode", 0)
    return code & 0xFF == sqlite3.SQLITE_CANTOPEN or code == sqlite3.SQLITE_READONLY_DIRECTORY


def _tables(db: sqlite3.Connection) -> set[str]:
    return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _ours(db: sqlite3.Connection, table: str) -> bool:
    """Whether `table` (one of `COLUMNS`) has a store's columns (`nodes` with or without
    `seq`): not another program's table of the same name."""
    columns = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}  # a name of ours
    return columns - {"seq"} == COLUMNS[table] - {"seq"}


def _shape(db: sqlite3.Connection, table: str) -> frozenset[tuple[str, str, int, bool]]:
    """`table`'s columns but `seq` (format 1 had none) as (name, type, not null, in the
    key): the first version keyed `tags` by (kind, tag, node_id), in another order."""
    info = db.execute(f"PRAGMA table_info({table})")  # a name of ours (`COLUMNS`)
    return frozenset(
        (name, kind.upper(), notnull, key > 0)
        for _, name, kind, notnull, _, key in info
        if name != "seq"
    )


@cache
def _created_shapes() -> dict[str, frozenset[tuple[str, str, int, bool]]]:
    """Each table's `_shape` as a store creates it.  Empty tables are dropped to make a
    store only when they have it: another program's empty `meta (key, value)` has the
    names of a store's columns, and was dropped."""
    db = sqlite3.connect(":memory:")
    for statement in (*CREATE, *CHANGE_LOG):
        db.execute(statement)
    shapes = {table: _shape(db, table) for table in COLUMNS}
    db.close()
    return shapes


def _state(db: sqlite3.Connection, shown: str) -> State:
    """`current`, `v1` (to upgrade) or `empty` (to initialise; also what an earlier version
    left when killed while creating the file, its schema committed statement by statement);
    raises for another program's file or a newer format, naming the file as `shown`."""
    tables = _tables(db)
    if not tables:
        return "empty"
    if not tables <= COLUMNS.keys() or not all(_ours(db, table) for table in tables):
        raise StoreOpenError(f"{shown} is an SQLite file of another program")
    meta = dict(db.execute("SELECT key, value FROM meta")) if "meta" in tables else {}
    if meta.get("format") != FORMAT:
        if meta or ("nodes" in tables and db.execute("SELECT 1 FROM nodes").fetchone()):
            raise StoreOpenError(f"{shown} is an SQLite file of another program")
        if any(_shape(db, table) != _created_shapes()[table] for table in tables):
            raise StoreOpenError(f"{shown} is an SQLite file of another program")
        return "empty"
    version = int(meta.get("version", "1"))
    if version > FORMAT_VERSION:
        raise StoreOpenError(f"{shown} was written by a newer graphstore (format {version})")
    return "current" if version == FORMAT_VERSION else "v1"


def _initialise(db: sqlite3.Connection, shown: str) -> None:
    """Create or upgrade the schema in one transaction, deciding again under the write lock."""
    db.execute("BEGIN IMMEDIATE")
    try:
        state = _state(db, shown)
        if state == "empty":
            for table in _tables(db):
                db.execute(f"DROP TABLE {table}")  # empty, and one of ours: checked above
            for statement in CREATE:
                db.execute(statement)
            db.execute("INSERT INTO meta VALUES ('format', ?)", (FORMAT,))
        elif state == "v1":
            db.execute("ALTER TABLE nodes ADD COLUMN seq INTEGER NOT NULL DEFAULT 0")
        if state != "current":
            for statement in CHANGE_LOG:
                db.execute(statement)
            db.execute("INSERT OR REPLACE INTO meta VALUES ('version', ?)", (str(FORMAT_VERSION),))
        db.execute("COMMIT")
    finally:
        if db.in_transaction:
            db.execute("ROLLBACK")
