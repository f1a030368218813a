"""Which stored passages and cards came from which files: the record an ingest keeps (the
absolute path of each node's file, metadata `file`) and the rules that use it.

An ingest overwrites or removes only what it finds recorded from files within the paths it
was given (a path's scopes, `file_scopes`), whatever the root or the current folder; and
`graphstore delete` removes what was ingested from a path by the same record.  A node
without the record (stored from Python, or by an older version) is never matched.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from graphstore.errors import InvalidInputError
from graphstore.file_identity import file_identity
from graphstore.nodes import passage_source
from graphstore.splitting import FILE, recorded_file, text_path
from graphstore.store import GraphStore


def covers(covered: str, file: str) -> bool:
    """Whether the recorded file `file` lies within the scope `covered` (`file_scopes`)."""
    if covered.endswith("/"):
        return file.startswith(covered)
    return file == covered


def recorded_within(recorded: Mapping[str, str], scopes: Sequence[str]) -> dict[str, str]:
    """The entries of `recorded` (id -> recorded file) whose file lies within `scopes`."""
    return {
        node_id: file
        for node_id, file in recorded.items()
        if any(covers(covered, file) for covered in scopes)
    }


def file_scopes(path: Path) -> list[str]:
    """What `path` covers among the recorded files (see `covers`): a file's absolute path;
    for a folder, or a path that no longer exists, also the folder's and `/` (a file that
    became a folder, or a path gone that may have been either).  Unlike a source name, the
    same whatever the root or the current folder; `os.path` never raises, so a path it may
    not look at is a scope too."""
    file = recorded_file(path)
    if os.path.lexists(path) and not os.path.isdir(path):
        return [file]
    return [file, file.rstrip("/") + "/"]


def scopes_of(paths: Iterable[Path]) -> list[str]:
    """The scopes of every path (`file_scopes`)."""
    return [scope for path in paths for scope in file_scopes(path)]


async def recorded_files(store: GraphStore) -> dict[str, str]:
    """The recorded file of every stored passage and card that has one, by id (one scan of
    the stored metadata; a row changed outside graphstore records no file to trust)."""
    recorded = await store.ametadata_values(FILE)
    return {node_id: file for node_id, file in recorded.items() if isinstance(file, str) and file}


async def stored_files(store: GraphStore) -> dict[str, str]:
    """`recorded_files` of the passages an ingest splits from files (not cards)."""
    recorded = await recorded_files(store)
    return {node_id: file for node_id, file in recorded.items() if passage_source(node_id)}


def ingested_from(recorded: Mapping[str, str], paths: Sequence[Path]) -> list[str]:
    """The ids in `recorded` (id -> recorded file) ingested from files within `paths`, named
    as they were ingested or through a link to them (`delete dl`, where `dl` links to the
    folder `docs` ingested), or a one-line error naming a path nothing was ingested from (a
    typo deletes nothing).  A recorded name is never resolved through the links there are
    now: a link since pointed elsewhere would make it another file's."""
    found: set[str] = set()
    for path in paths:
        scopes = {*file_scopes(path), *file_scopes(Path(os.path.realpath(path)))}
        within = recorded_within(recorded, list(scopes))
        if not within:
            raise InvalidInputError(f"nothing in the store was ingested from {path}")
        found.update(within)
    return sorted(found)


def is_gone(recorded: str) -> bool:
    """Whether the recorded file is no longer a file here: missing, or now something else.
    One this process may not look at (in a folder it may not read) is not gone, so its
    passages are kept; a name with bytes that are not UTF-8, recorded as `\\xNN`
    (`path_text`), is looked up by those bytes too."""
    for path in dict.fromkeys((recorded, text_path(recorded))):
        try:
            if stat.S_ISREG(os.stat(path).st_mode):
                return False
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as error:  # a loop of links is no file; no permission cannot tell
            if error.errno in (errno.ELOOP, errno.ENAMETOOLONG):
                continue
            return False
    return True


def gone_files(recorded: Iterable[str]) -> set[str]:
    """The recorded files that are no longer a file here (`is_gone`)."""
    return {file for file in set(recorded) if is_gone(file)}


def check_ids_free(planned: Mapping[str, str], stored: Mapping[str, str]) -> None:
    """Refuse to overwrite a stored passage recorded from another file that still exists:
    the same relative name under two roots gives the same ids, and the first file's
    passages would be lost in silence.  A recorded file that is gone (its folder was moved)
    is replaced."""
    for passage_id, file in planned.items():
        other = stored.get(passage_id)
        if other and owned_elsewhere(other, file):
            raise InvalidInputError(
                f"{file} would overwrite passage {passage_id} of {other}; ingest one of them "
                "with another --root so that their ids differ"
            )


def owned_elsewhere(recorded: str, file: str) -> bool:
    """Whether what was stored from the file `recorded` belongs to another file than `file`
    that still exists, and so may not be replaced from `file`."""
    return recorded != file and not is_gone(recorded) and not same_file(recorded, file)


def same_file(one: str, other: str) -> bool:
    """Whether two recorded paths reach one file (through a symbolic link, say); False when
    either cannot be reached."""
    try:
        return os.path.samefile(text_path(one), text_path(other))
    except OSError:
        return False


def other_names(recorded: Iterable[str], files: Iterable[Path]) -> dict[str, str]:
    """The `recorded` files that are one of `files` under another name (a link to it or to
    a folder above it, a hard link), each with the name `files` give it now.  Ingesting a
    file by a new name makes its passages under the old one stale, so that the store holds
    each file once (`ingest docs`, then `ingest dl` where `dl` links to `docs`, used to
    store every file twice)."""
    names = {recorded_file(path): path for path in files}
    identities = {file_identity(path): name for name, path in names.items()}
    identities.pop(None, None)
    if not identities:  # nothing read (no card files, say): no file to look at
        return {}
    found = {}
    for file in set(recorded) - names.keys():
        name = identities.get(file_identity(text_path(file)))
        if name is not None:
            found[file] = name
    return found


def stale(before: Mapping[str, str], written: set[str], read: set[str]) -> list[str]:
    """The passages an ingest found recorded from files within its paths when it began
    (`before`) and did not write, whose file it read (the tail past its new end, or its
    passages under an earlier root or another name, `other_names`) or is no longer a file.
    Only those: what another process stored meanwhile is not this ingest's to remove, nor
    the passages of a file it passed over that still exists (one in a hidden folder,
    ingested by name before)."""
    return sorted(
        passage_id
        for passage_id, file in before.items()
        if passage_id not in written and (file in read or is_gone(file))
    )
