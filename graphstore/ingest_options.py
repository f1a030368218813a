"""The options a `graphstore ingest` splits and links with, recorded in every passage it
stores (metadata `ingest_options`), so that ingesting the same files again without them
splits and links as before: a re-run that forgot `--links mentions --names names.txt`
silently replaced every mention link with the default kinds, and one that forgot
`--max-chars` re-split every file.

An option given on the command line wins; one not given takes the value recorded in the
passages stored from files within the paths ingested, or its default when none records
one.  The link options go together: `--links` given takes none of the others from the
record (`--names` of `mentions` would not apply to `keywords`).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from graphstore.errors import InvalidInputError
from graphstore.inline import inline
from graphstore.recorded_files import recorded_within, scopes_of, stored_files
from graphstore.splitting import MAX_CHARS
from graphstore.store import GraphStore

INGEST_OPTIONS = "ingest_options"
"""The metadata key of the options a passage was ingested with (`IngestOptions.record`)."""
DEFAULT_LINKS = "hyperlinks,hierarchy"
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
        """The command-line flags of the options `names`, those set, as one would type them."""
        values = asdict(self)
        return " ".join(
            f"{FLAGS[name]} {inline(str(values[name]))}"
            for name in names
            if values[name] is not None
        )


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
    return IngestOptions(**value)


def resolved(
    given: Mapping[str, object], recorded: Collection[IngestOptions]
) -> tuple[IngestOptions, list[str]]:
    """The options an ingest runs with: those `given` (by field name), the others as every
    option in `recorded` says, or their defaults when nothing is recorded; with the names of
    the options taken from the record.  Recorded options that differ where nothing is given
    are a one-line error: which to use is the user's to say."""
    chosen = IngestOptions(**given)  # type: ignore[arg-type]
    taken: list[str] = []
    groups = [group for group in (LINK_OPTIONS, ("max_chars",)) if group[0] not in given]
    for group in groups:
        values = sorted(
            {tuple(getattr(options, name) for name in group) for options in recorded}, key=repr
        )
        if len(values) > 1:
            shown = [IngestOptions(**dict(zip(group, value, strict=True))) for value in values]
            flags = " and ".join(options.flags(group) for options in shown[:2])
            raise InvalidInputError(
                f"the passages of these files were ingested with different options ({flags}): "
                f"give {FLAGS[group[0]]} to say how to ingest them now"
            )
        if values:
            kept = {
                name: value
                for name, value in zip(group, values[0], strict=True)
                if name not in given
            }
            chosen = replace(chosen, **kept)
            taken.extend(name for name, value in kept.items() if value != DEFAULTS[name])
    return chosen, taken


async def recorded_options(store: GraphStore, paths: Sequence[Path]) -> list[IngestOptions]:
    """The options recorded by the passages stored from files within `paths`."""
    within = recorded_within(await stored_files(store), scopes_of(paths))
    if not within:
        return []
    values = await store.ametadata_values(INGEST_OPTIONS)
    found = (from_record(values.get(node_id)) for node_id in within)
    return [options for options in found if options is not None]
