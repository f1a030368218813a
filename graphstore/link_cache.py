"""Links a model found in a passage's text, kept on this machine between ingests.

KeyBERT and GLiNER run a model over every passage, so ingesting a folder again after
editing one file ran them over all of it: 40 s for the 211-passage demo with keyword links,
where everything else takes 1 s.  An extractor's links depend only on the text and the
extractor's `setting` (model fingerprint and options), so they are kept in a SQLite file
keyed by a digest of both, and an ingest runs the model only on texts it has not seen under
the same setting.  The file is a cache: one that cannot be opened, read or written is left
alone and every text is extracted, as without it; a row that cannot be decoded is a miss.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from extractors.base import LinkExtractor
from graphstore.links import Link, as_links, decode_links, encode_links
from graphstore.sqlite_file import rows_where_in

CACHE_DIR_VARIABLE = "GRAPHSTORE_CACHE_DIR"
"""Where the cache lives (default `$XDG_CACHE_HOME/graphstore`, else `~/.cache/graphstore`);
set to an empty value, no cache is kept."""
FORMAT = "graphstore link cache 2"
"""Part of every key: a change to how extractors turn what a model finds into links
changes it, so no link found the old way is reused (2: tags fold typographic
apostrophes, `extractors.normalize.APOSTROPHES`)."""
MAX_ENTRIES = 200_000
"""Texts kept (a few hundred bytes each); beyond it the oldest written go first."""
TIMEOUT = 5.0
"""Seconds to wait for another ingest writing the cache before going on without it."""

logger = logging.getLogger(__name__)


def cache_path() -> Path | None:
    """The cache file this machine's ingests share, or None when `GRAPHSTORE_CACHE_DIR` is
    set empty or there is no home folder to keep it in (no `HOME`, a user id without a
    passwd entry: a container)."""
    folder = os.environ.get(CACHE_DIR_VARIABLE)
    if folder is None:
        base = os.environ.get("XDG_CACHE_HOME")
        if not base:
            try:
                base = os.path.join(Path.home(), ".cache")
            except (RuntimeError, KeyError):
                return None
        folder = os.path.join(base, "graphstore")
    return Path(folder, "links.sqlite") if folder else None


def _key(setting: str, text: str) -> bytes:
    digest = hashlib.sha256()
    for part in (FORMAT, setting, text):
        encoded = part.encode("utf-8", "surrogatepass")
        digest.update(len(encoded).to_bytes(8, "big") + encoded)
    return digest.digest()


def _make_folder(folder: Path) -> None:
    """Make `folder` (and its parents), saying so in one line when a file stands in the way
    (`GRAPHSTORE_CACHE_DIR` naming a file was reported as "[Errno 17] File exists")."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        if folder.is_file():
            raise OSError(f"{folder} is a file, not a folder") from None
        raise OSError(f"{folder} cannot be a folder: a part of its path is a file") from None


class LinkCache:
    """Extracted links by (setting, text), in one SQLite file; never an error of its own."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._failed = False

    def _connection(self) -> sqlite3.Connection | None:
        if self._db is None and not self._failed:
            try:
                _make_folder(self.path.parent)
                db = sqlite3.connect(self.path, timeout=TIMEOUT, isolation_level=None)
                db.execute("PRAGMA journal_mode = WAL")
                db.execute("CREATE TABLE IF NOT EXISTS links (key BLOB PRIMARY KEY, links TEXT)")
                self._db = db
            except (sqlite3.Error, OSError) as error:
                self._give_up(error)
        return self._db

    def _give_up(self, error: BaseException) -> None:
        """Extract everything from now on, saying once why."""
        logger.warning("graphstore: not using the link cache %s: %s", self.path, error)
        self._failed = True
        if self._db is not None:
            self._db.close()
            self._db = None

    def get(self, setting: str, texts: Sequence[str]) -> list[frozenset[Link] | None]:
        """The links kept for each text under `setting`, None for those not kept."""
        found: list[frozenset[Link] | None] = [None] * len(texts)
        db = self._connection()
        if db is None or not texts:
            return found
        keys = [_key(setting, text) for text in texts]
        try:
            rows: dict[bytes, str] = dict(
                rows_where_in(db, "SELECT key, links FROM links", "key", keys)
            )
        except sqlite3.Error as error:
            self._give_up(error)
            return found
        for position, key in enumerate(keys):
            if key in rows:
                try:
                    found[position] = as_links(decode_links(rows[key]))
                except (ValueError, TypeError, RecursionError):  # InvalidInputError too
                    continue  # not a row this module wrote: extract again
        return found

    def put(self, setting: str, texts: Sequence[str], links: Sequence[set[Link]]) -> None:
        """Keep `links[i]` as the links of `texts[i]` under `setting`."""
        db = self._connection()
        if db is None or not texts:
            return
        rows = [
            (_key(setting, text), encode_links(found))
            for text, found in zip(texts, links, strict=True)
        ]
        try:
            with db:
                db.execute("BEGIN IMMEDIATE")
                db.executemany("INSERT OR REPLACE INTO links (key, links) VALUES (?, ?)", rows)
                db.execute(
                    "DELETE FROM links WHERE rowid <= (SELECT MAX(rowid) FROM links) - ?",
                    (MAX_ENTRIES,),
                )
        except sqlite3.Error as error:
            self._give_up(error)


def extract_with_cache(
    extractor: LinkExtractor[str], texts: Sequence[str], cache: LinkCache | None
) -> list[set[Link]]:
    """`extractor`'s links of each text, running it only on those `cache` does not hold
    under its setting (all of them without a cache or a setting)."""
    setting = extractor.setting() if cache is not None else None
    if cache is None or setting is None:
        return [set(links) for links in extractor.extract_many(texts)]
    kept = cache.get(setting, texts)
    missing = [position for position, links in enumerate(kept) if links is None]
    fresh = [set(links) for links in extractor.extract_many([texts[i] for i in missing])]
    cache.put(setting, [texts[i] for i in missing], fresh)
    found = [set(links) if links is not None else set() for links in kept]
    for position, links in zip(missing, fresh, strict=True):
        found[position] = links
    return found
