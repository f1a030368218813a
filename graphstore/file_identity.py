"""Which file a path names, however it is reached: its device and inode.

Shared by the ingest side (a file reached by two names is read once; the store's own file
is never read as a document; a file written again while an ingest runs is not undone) and by
the embedded backend (a write checks that its path still names the file it opened; a reader
that could make no WAL index connects again once the file is written)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path


def file_identity(path: str | Path) -> tuple[int, int] | None:
    """A regular file's device and inode, which tell one file from another however it is
    reached (a link, `..`); None for anything else or what cannot be looked at."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return (status.st_dev, status.st_ino) if stat.S_ISREG(status.st_mode) else None


def file_identities(paths: Iterable[str | Path]) -> set[tuple[int, int]]:
    """The `file_identity` of each of `paths` that is a regular file."""
    return {identity for path in paths if (identity := file_identity(path)) is not None}


FileVersion = tuple[int, int, int, int]
"""A file's device, inode, size and modification time in nanoseconds (`file_version`)."""


def file_version(path: str | Path) -> FileVersion | None:
    """A file's identity, size and modification time in nanoseconds: what changes when the
    file is written again or replaced (None when it cannot be looked at)."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)
