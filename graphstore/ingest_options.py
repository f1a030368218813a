"""The options a `graphstore ingest` splits and links with, recorded in every passage it
stores (metadata `ingest_options`), so that ingesting the same files again without them
splits and links as before: a re-run that forgot `--links mentions --names names.txt`
silently replaced every mention link with the default kinds, and one that forgot
`--max-chars` re-split every file.

An option given on the command line wins; one not given takes the value recorded in the
passages the ingest overwrites or removes (`ingest.replaced_passages`), or for a file new
to the store in those of the files of its folder, or its default when none records one.
The link options go together: `--links` given takes none of the others from the record
(`--names` of `mentions` would not apply to `keywords`).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import NamedTuple

from graphstore.errors import InvalidInputError
from graphstore.ingest import discover, replaced_passages
from graphstore.inline import inline
from graphstore.recorded_files import recorded_within, scopes_of
from graphstore.splitting import MAX_CHARS
from graphstore.store import GraphStore

INGEST_OPTIONS = "ingest_options"
"""The metadata key of the options a passage was ingested with (`IngestOptions.record`)."""
DEFAULT_LINKS = "hierarchy,hyperlinks"
"""The link kinds of an ingest given none, as `normalized_links` writes them."""
LINK_OPTIONS = ("links", "names", "gliner_model", "entity_labels", "max_tag_df")
"""The options that say how passages are linked, taken from the record together."""
PATH_OPTIONS = ("names", "gliner_model")
"""Options naming a file or folder, recorded by absolute path (another folder may run the
next ingest)."""
FLAGS = {
    "links": "--links",
    "names": "--names",
    "gliner_model": "--gliner-model",
    "entity_labels": "--entity-labels",
    "max_tag_df": "--max-tag-df",
    "max_chars": "--max-chars",
}


@dataclass(frozen=True)
class IngestOptions:
    """How an ingest splits (`max_chars`) and links (the rest) its files."""

    links: str = DEFAULT_LINKS
    names: str | None = None
    gliner_model: str | None = None
    entity_labels: str | None = None
    max_tag_df: float | None = None
    max_chars: int = MAX_CHARS

    def record(self) -> dict[str, object]:
        """The options as stored in a passage's metadata: those set, paths absolute."""
        recorded: dict[str, object] = {}
        for name, value in asdict(self).items():
            if value is None:
                continue
            recorded[name] = os.path.abspath(value) if name in PATH_OPTIONS else value
        return recorded

    def flags(self, names: Iterable[str]) -> str:
        """The command-line flags of the options `names`, those set, as one would type them
        (a value shell-quoted when it must be)."""
        values = asdict(self)
        return " ".join(
            f"{FLAGS[name]} {_quoted(str(values[name]))}"
            for name in names
            if values[name] is not None
        )


def _quoted(value: str) -> str:
    """`value` as a shell reads it back, or JSON-quoted when it does not print on one line."""
    return shlex.quote(value) if value.isprintable() else inline(value)


DEFAULTS = asdict(IngestOptions())


def from_record(value: object) -> IngestOptions | None:
    """The options a passage's metadata records, or None for a value not made by `record`
    (a passage of an older version, or metadata changed outside graphstore)."""
    if not isinstance(value, dict):
        return None
    kinds: dict[str, type | tuple[type, ...]] = {
        "links": str,
        "names": str,
        "gliner_model": str,
        "entity_labels": str,
        "max_tag_df": (int, float),
        "max_chars": int,
    }
    if not set(value) <= set(kinds) or not isinstance(value.get("links"), str):
        return None
    for name, given in value.items():
        if isinstance(given, bool) or not isinstance(given, kinds[name]):
            return None
    return IngestOptions(**{**value, "links": normalized_links(value["links"])})


class Resolution(NamedTuple):
    """The options an ingest runs with, and what it says about them on stderr."""

    options: IngestOptions
    taken: list[str]
    """The options taken from the record whose value is not the default."""
    passed_over: str
    """The flags of options the record holds that `--links` given leaves out (its
    companions), or ''."""


def resolved(given: Mapping[str, object], recorded: Mapping[IngestOptions, str]) -> Resolution:
    """The options an ingest runs with: those `given` (by field name), the others as the
    options `recorded` (each with a file of theirs) say, or their defaults when nothing is
    recorded.  Recorded options that differ where nothing is given are a one-line error
    naming both and a file of each: which to use is the user's to say."""
    if "links" in given:
        given = {**given, "links": normalized_links(str(given["links"]))}
    chosen = IngestOptions(**given)  # type: ignore[arg-type]
    groups = [group for group in (LINK_OPTIONS, ("max_chars",)) if group[0] not in given]
    open_fields = [name for group in groups for name in group if name not in given]
    kinds = {_values(options, open_fields): (options, file) for options, file in recorded.items()}
    if len(kinds) > 1:
        (one, one_file), (other, other_file) = sorted(kinds.values(), key=repr)[:2]
        differing = [name for name in open_fields if getattr(one, name) != getattr(other, name)]
        needed = [FLAGS[group[0]] for group in groups if set(group) & set(differing)]
        raise InvalidInputError(
            "the passages of these files were ingested with different options: "
            f"{one.flags(differing) or 'none'} ({inline(one_file)}) and "
            f"{other.flags(differing) or 'none'} ({inline(other_file)}); give "
            f"{' and '.join(needed)} to say how to ingest them now"
        )
    if not kinds:
        return Resolution(chosen, [], "")
    ((recorded_options, _),) = kinds.values()
    kept = {name: getattr(recorded_options, name) for name in open_fields}
    taken = [name for name, value in kept.items() if value != DEFAULTS[name]]
    passed_over = ""
    if "links" in given:
        passed_over = recorded_options.flags(name for name in LINK_OPTIONS if name not in given)
    return Resolution(replace(chosen, **kept), taken, passed_over)


def _values(options: IngestOptions, names: Sequence[str]) -> tuple[object, ...]:
    return tuple(getattr(options, name) for name in names)


def normalized_links(links: str) -> str:
    """`--links` as recorded and compared: its extractors sorted, once each, no spaces
    (`hierarchy, hyperlinks` and `hyperlinks,hierarchy` are one set)."""
    names = {name.strip() for name in links.split(",")} - {""}
    return ",".join(sorted(names))


async def recorded_options(
    store: GraphStore, stored: Mapping[str, str], paths: Sequence[Path], root: Path | None = None
) -> tuple[dict[IngestOptions, str], bool]:
    """The options recorded by the passages an ingest of `paths` overwrites or removes
    (`ingest.replaced_passages` of `stored`, the store's `stored_files`: also a file's under
    an earlier name, and a moved file's),
    each with a file of theirs; when there are none, those recorded by the passages of the
    folders holding the files given (a file new to a folder, not a new folder: its
    neighbours may be another book), and True.  A recorded file shortens to its path
    relative to the current folder when inside it."""
    found = discover(paths, root, store.storage.local_files)
    replaced, _ = replaced_passages(stored, paths, found.files)
    beside = not replaced
    if beside:
        replaced = recorded_within(stored, scopes_of(_folders_of(paths)))
    if not replaced:
        return {}, False
    values = await store.ametadata_values(INGEST_OPTIONS)
    recorded: dict[IngestOptions, str] = {}
    for node_id, file in sorted(replaced.items()):
        options = from_record(values.get(node_id))
        if options is not None:
            recorded.setdefault(options, _shown(file))
    return recorded, beside


def _folders_of(paths: Iterable[Path]) -> set[Path]:
    """The folder holding each path that is a file."""
    return {Path(os.path.abspath(path)).parent for path in paths if os.path.isfile(path)}


def _shown(file: str) -> str:
    """A recorded file as an error names it: relative to the current folder when inside."""
    relative = os.path.relpath(file)
    return file if relative.startswith("..") else relative
