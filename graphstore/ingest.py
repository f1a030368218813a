"""The ingest pipeline: files → passages → link tags → nodes → the store (embedded in batches).

Every file is read, split and its passages validated once up front, so an unreadable file or
an unstorable passage stops the run before the store changes; passages are then linked and
written in batches, keeping memory bounded.

Passage ids are `source#position`, the source being the file's path relative to a root (the
current directory unless told otherwise), or its absolute path when the file lies outside the
root: within one root two files never share a source, and running the same ingest again from
the same root overwrites in place.  Each passage records the absolute path of its file
(metadata `file`), since a relative source does not say which root it was named from: an
ingest refuses to overwrite a passage of another file that still exists (the same relative
name under two roots), and after a successful run it removes the passages recorded from files
within the paths ingested that it did not write (files since deleted, the tail of a file that
shrank), all of them for a path given that no longer exists (`graphstore.recorded_files`).
A passage without the record (stored from Python, or by an older version) is never removed
as stale.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from extractors.base import LinkExtractor
from extractors.frequency import TagFrequencyFilter
from extractors.hierarchy import HierarchyLinkExtractor
from extractors.html_links import (
    HtmlInput,
    HtmlLinkExtractor,
    local_page_path,
    page_links,
    page_url,
)
from extractors.markdown_links import MarkdownInput, MarkdownLinkExtractor
from graphstore.earlier_embeddings import EarlierEmbeddings
from graphstore.errors import InvalidInputError
from graphstore.file_identity import FileVersion, file_identities, file_identity, file_version
from graphstore.link_cache import LinkCache, extract_with_cache
from graphstore.links import Link, bounded
from graphstore.markdown import MarkdownMarkup
from graphstore.nodes import SUFFIXES, Node, passage_source
from graphstore.recorded_files import (
    check_ids_free,
    file_scopes,
    gone_files,
    is_gone,
    other_names,
    recorded_within,
    scopes_of,
    stale,
    stored_files,
)
from graphstore.splitting import (
    FILE,
    MAX_CHARS,
    Passage,
    path_text,
    recorded_file,
    scan_folder,
    split_file,
)
from graphstore.store import GraphStore, check_node

PassageLinker = Callable[[Sequence[Passage]], list[set[Link]]]
"""Links for a batch of passages, one set per passage."""
PageLinker = Callable[[Collection[str]], PassageLinker]
"""A linker made once an ingest knows the titles of the store's pages (`page_title` of
each file it reads and of each source stored before)."""

BATCH_SIZE = 256
"""Passages linked, embedded and written together: the unit of an ingest's memory."""


def source_name(path: Path, root: Path) -> str:
    """A file's (or folder's) name in passage ids: relative to `root` when inside it, else
    absolute; `/` separators; bytes of a file name that are not UTF-8 written as `\\xNN`."""
    absolute = Path(os.path.abspath(path))
    try:
        name = absolute.relative_to(os.path.abspath(root)).as_posix()
    except ValueError:
        name = absolute.as_posix()
    return path_text(name)


def ingest_root(root: Path | None) -> Path:
    """The folder source names are relative to: `root`, which must be one, or the current
    folder (a mistyped root would name every passage by its absolute path, beside the ones
    stored under relative names)."""
    if root is None:
        return Path.cwd()
    if not root.is_dir():
        raise InvalidInputError(f"the root {root} is not a folder")
    return root


class Discovered(NamedTuple):
    """The files an ingest reads, with their source names, and the source names of the
    entries under its folders that it skips and of the hidden files it leaves out
    (`splitting.FolderFiles`)."""

    files: list[tuple[Path, str]]
    skipped: list[str]
    hidden: list[tuple[Path, str]]
    """Hidden files left out (none read by another name, none beside card files)."""


def discover(
    paths: Iterable[Path],
    root: Path | None = None,
    store_files: Collection[str] = (),
    card_files: Collection[str] = (),
) -> Discovered:
    """Every ingestible file under `paths` once, with its source name (see `source_name`),
    but the store's own files (`Storage.local_files`) and, in folders, the card files the
    same ingest reads as cards.  A path that does not exist is passed over: whether that is
    an error depends on what the store holds from it (`check_found`)."""
    base = ingest_root(root)
    own = file_identities(store_files)
    found: dict[object, tuple[Path, str]] = {}
    skipped: list[str] = []
    hidden: list[Path] = []
    for path in paths:
        if path.is_dir():
            listed = scan_folder(path, SUFFIXES, [*store_files, *card_files])
            files = listed.files
            skipped.extend(source_name(entry, base) for entry in listed.skipped)
            hidden.extend(listed.hidden)
        elif path.is_file():
            files = [path]
        elif os.path.exists(path):  # a pipe, a device
            raise InvalidInputError(f"{path} is neither a regular file nor a folder")
        else:  # gone, or a link to nothing or to itself: `check_found` decides
            files = []
        if files == [path] and file_identity(path) in own:
            raise InvalidInputError(f"{path} is the store itself, not a document")
        for file in files:  # a file reached by two names is read once, not by a link if it can
            key = file_identity(file) or os.path.abspath(file)
            kept = found.get(key)
            if kept is None or (kept[0].is_symlink() and not file.is_symlink()):
                found[key] = (file, source_name(file, base))
    check_sources_differ(found.values())
    card_folders = {os.path.dirname(os.path.abspath(file)) for file in card_files}
    left_out = {
        (file, source_name(file, base))
        for file in hidden
        if (file_identity(file) or os.path.abspath(file)) not in found  # given by name too
        and os.path.dirname(os.path.abspath(file)) not in card_folders  # a card's draft
    }
    return Discovered(list(found.values()), sorted(set(skipped)), sorted(left_out))


def check_sources_differ(files: Iterable[tuple[Path, str]]) -> None:
    """Refuse two files that one source name would stand for: a name with the byte 0xff
    and another spelling `\\xff` out (`path_text`), whose passages would share ids."""
    named: dict[str, Path] = {}
    for file, source in files:
        first = named.setdefault(source, file)
        if first != file:
            raise InvalidInputError(
                f"{source} names two files in passage ids: one whose name holds bytes that "
                "are not UTF-8, written \\xNN, and one whose name spells them out; rename one"
            )


def replaced_passages(
    stored: Mapping[str, str],
    paths: Sequence[Path],
    files: Sequence[tuple[Path, str]],
    cards: Sequence[Path] = (),
) -> tuple[dict[str, str], dict[str, str]]:
    """The stored passages (id -> recorded file) an ingest of `files` (path, source name)
    and card files `cards` from `paths` overwrites or finds stale, with the recorded files
    it reads under another name (old name -> new): the passages recorded within the paths;
    those of a file it reads under another name (a link to it or to a folder above it, an
    earlier root), a card file's only within the paths, as under its own name; and those
    of a source name it writes whose file is gone (its folder moved, ingested again with a
    `--root` that names it alike: the tail past the new end was left behind)."""
    before = recorded_within(stored, scopes_of(paths))
    renamed = other_names(stored.values(), [path for path, _ in files])
    renamed |= other_names(before.values(), cards)
    sources = {source for _, source in files}
    before.update(
        (node_id, file)
        for node_id, file in stored.items()
        if file in renamed or (passage_source(node_id) in sources and is_gone(file))
    )
    return before, renamed


def gone_beside(stored: Mapping[str, str], paths: Sequence[Path]) -> dict[str, str]:
    """The stored passages (id -> recorded file) of files gone from the folder of a file in
    `paths`: stale, as the ingest of a file renamed there finds them (`mv a.txt b.txt`, then
    `ingest b.txt`, kept both copies and embedded the text again), though outside the paths.
    Not among the passages whose options an ingest takes (`replaced_passages`): a file
    deleted there long ago says nothing of how to ingest the ones given."""
    folders = {os.path.dirname(recorded_file(path)) for path in paths if path.is_file()}
    if not folders:
        return {}
    gone = gone_files(file for file in stored.values() if os.path.dirname(file) in folders)
    return {node_id: file for node_id, file in stored.items() if file in gone}


def check_found(
    paths: Sequence[Path],
    found: Discovered,
    before: Mapping[str, str],
    card_files: Collection[str] = (),
) -> None:
    """Refuse a path that does not exist (or a link to nothing), unless passages were
    ingested from it (`before`: id -> recorded file, of the passages within `paths`): then
    the ingest removes them, as `git add` of a deleted file stages its removal.  Refuse too
    an ingest that finds no file to read and no stored passage to remove (a mistyped or
    wrong folder), but one of paths that hold only the `card_files` it reads as cards."""
    for path in paths:
        if not os.path.exists(path) and not recorded_within(before, file_scopes(path)):
            linked = os.path.lexists(path)  # a link to nothing or to itself
            what = "is neither a regular file nor a folder" if linked else "does not exist"
            raise InvalidInputError(f"{path} {what}")
    cards_within = recorded_within({file: file for file in card_files}, scopes_of(paths))
    if not found.files and not stale(before, set(), set()) and not cards_within:
        named = f" (skipped: {', '.join(found.skipped)})" if found.skipped else ""
        raise InvalidInputError(f"no .txt, .md or .html files found in the given paths{named}")


def hierarchy_linker(extractor: HierarchyLinkExtractor | None = None) -> PassageLinker:
    """Section-path links, with the source file as the path's first element."""
    chosen = extractor or HierarchyLinkExtractor(parent_links=True, child_links=True)

    def link(passages: Sequence[Passage]) -> list[set[Link]]:
        return [set(chosen.extract_one([p.source, *p.section])) for p in passages]

    return link


LOCAL_PAGE = "file:///"
OTHER_HOST = "file://"


def hyperlink_linker(kind: str = "hyperlink", *, drop_fragments: bool = True) -> PassageLinker:
    """Hyperlinks between ingested files: the links an HTML or Markdown passage cites, and
    an in-link for every passage's own page, so that a link to a text file reaches it too.

    Links are resolved against the passage's file (its `file:` URL), not its source name,
    so a `../` that leaves the root reaches the file it names, and each local page's tag is
    then named as its passages' sources are (`local_tag`)."""
    html_links = HtmlLinkExtractor(kind=kind, drop_fragments=drop_fragments)
    markdown_links = MarkdownLinkExtractor(kind=kind, drop_fragments=drop_fragments)

    def link(passage: Passage) -> set[Link]:
        local = os.path.isabs(passage.file)
        url = Path(passage.file).as_uri() if local else page_url(passage.source)
        markup = passage.markup
        if markup is None:
            found = page_links(kind, url, (), drop_fragments)
        elif isinstance(markup, MarkdownMarkup):
            found = markdown_links.extract_one(MarkdownInput(markup.text, url, markup.definitions))
        else:
            found = html_links.extract_one(HtmlInput(markup, url))
        named = (local_tag(each, passage) for each in found) if local else iter(found)
        return {each for each in named if each is not None}

    return lambda passages: [link(passage) for passage in passages]


def local_tag(link: Link, passage: Passage) -> Link | None:
    """`link` with a `file:` page named as `source_name` names files in the ingest that
    read `passage` (composed, as `html_links.local_page_path` names every file's page):
    relative to its root (which the passage's file and source give) when inside it, else
    absolute.  None for a folder (a link to `../`), which is no page; a link to another
    host (`//example.org/x`) is named as upstream names it."""
    tag = link.tag
    if tag.startswith(LOCAL_PAGE):
        path = tag.removeprefix(OTHER_HOST)
        root = local_page_path(passage.file.removesuffix(passage.source))
        if passage.file.endswith(f"/{passage.source}") and path.startswith(root):
            path = path.removeprefix(root)
        tag = "" if not path or path.endswith("/") else path
    elif tag.startswith(OTHER_HOST):
        tag = tag.removeprefix("file:")
    return Link(link.kind, link.direction, tag) if tag else None


def text_linker(extractor: LinkExtractor[str], cache: LinkCache | None = None) -> PassageLinker:
    """Any text extractor (keywords, entities, mentions), batched through `extract_many`;
    with a `cache`, a model extractor runs only on texts it has not linked before."""

    def link(passages: Sequence[Passage]) -> list[set[Link]]:
        return extract_with_cache(extractor, [p.text for p in passages], cache)

    return link


def page_title(source: str) -> str:
    """The title of the page a passage comes from: its file's name without the suffix
    (`wiki/Jamie Foxx.txt` is the page *Jamie Foxx*)."""
    return Path(source).stem


def page_titles(files: Iterable[tuple[Path, str]], stored: Mapping[str, str]) -> set[str]:
    """The titles of the pages an ingest reads (`files`, as (path, source)) and of those
    stored before (`stored`, id -> file) whose file is still there."""
    present = {file for file in set(stored.values()) if os.path.exists(file)}  # once a file
    kept = (passage_source(node_id) for node_id, file in stored.items() if file in present)
    sources = [*(source for _, source in files), *kept]
    return {page_title(source) for source in sources if source}


def title_linker(titles: Collection[str]) -> PassageLinker:
    """Title mentions, as in the benchmarks' dev sets: a passage links out to each page
    whose title it names (or the unambiguous name a qualified title carries,
    `title_aliases`: "Billy Murray" for *Billy Murray (singer)*), and every passage of a
    page links in on its title, so the page alone is cited (a whole share of relevance),
    where `mentions` links all passages naming a name to each other."""
    from extractors.mentions import MentionLinkExtractor, title_aliases
    from extractors.normalize import normalize_tag

    names = title_aliases(sorted(titles))
    usable = {alias: title for alias, title in names.items() if normalize_tag(title)}
    if not usable:  # no title has a letter to match (`!!!.txt`)
        return lambda passages: [set() for _ in passages]
    extractor = MentionLinkExtractor(usable)

    def link(passages: Sequence[Passage]) -> list[set[Link]]:
        found = []
        for passage in passages:
            own = page_title(passage.source)
            titled = normalize_tag(own) != ""
            found.append(
                extractor.extract_titled(passage.text, own)
                if titled
                else extractor.extract_one(passage.text)
            )
        return found

    return link


PASSAGE_KEYS = frozenset({"source", "position", FILE, "section", "chapter"})
"""The metadata keys a passage's node takes from the passage (`to_node`)."""


def to_node(passage: Passage, links: set[Link], extra: Mapping[str, object] = {}) -> Node:
    """A passage as a node: source, section path, chapter number and position become
    metadata, beside `extra` (keys other than `PASSAGE_KEYS`)."""
    metadata: dict[str, object] = {"source": passage.source, "position": passage.position}
    if passage.file:
        metadata[FILE] = passage.file
    if passage.section:
        metadata["section"] = list(passage.section)
    if passage.chapter is not None:
        metadata["chapter"] = passage.chapter
    return Node(passage.id, passage.text, {**metadata, **extra}, frozenset(links))


def merged_links(passages: Sequence[Passage], linkers: Sequence[PassageLinker]) -> list[set[Link]]:
    """Run every linker over a batch and merge their links per passage."""
    merged: list[set[Link]] = [set() for _ in passages]
    for linker in linkers:
        for passage_links, found in zip(merged, linker(passages), strict=True):
            passage_links.update(bounded(link) for link in found)
    return merged


def linked_passages(
    passages: Sequence[Passage],
    linkers: Sequence[PassageLinker],
    extra: Mapping[str, object] = {},
) -> list[Node]:
    """Passages as nodes carrying the links of every linker (and `extra` metadata)."""
    links = merged_links(passages, linkers)
    return [to_node(passage, found, extra) for passage, found in zip(passages, links, strict=True)]


def batches(passages: Iterable[Passage], size: int) -> Iterator[list[Passage]]:
    """Consecutive lists of at most `size` passages."""
    batch: list[Passage] = []
    for passage in passages:
        batch.append(passage)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


@dataclass
class IngestReport:
    """What an ingest did."""

    files: int
    passages: int
    removed: int = 0
    """Stale passages deleted: of files gone from the paths ingested, past a file's end, or
    of a file read under another root or another name (a link to it) before."""
    cards: int = 0
    """Entity cards written."""
    removed_cards: int = 0
    """Stale cards deleted: gone from a card folder ingested again."""
    skipped: list[str] = field(default_factory=list)
    """Entries under the folders ingested that are neither a file nor a folder (a link to
    nothing, a pipe), by source name: not read, so passages stored from them before are
    removed as stale."""
    hidden: list[str] = field(default_factory=list)
    """Hidden files under the folders ingested (a name starting with a dot), by source name:
    left out, as a project's dot files are; but not one this ingest reads by name, nor one
    whose passages are stored (ingested by name before: they are kept), nor a card's draft
    beside the card files."""
    changed: list[str] = field(default_factory=list)
    """Files written again or removed while the ingest ran, by source name: their passages
    from then on were not written (another process may have ingested or deleted them
    meanwhile, and an older text must not undo that); a file of more passages than a batch
    (256) may have had its first batches written before; the next ingest of the file
    stores it as it is then."""
    embedded: int = 0
    """Passages embedded: the others written kept the embedding stored for their text, under
    their id or, moved within their file, under another (`earlier_embeddings`)."""
    unchaptered: list[str] = field(default_factory=list)
    """Files without a chapter heading, by source name, when at least as many files of the
    ingest have one (a novel's chapter file whose heading was forgotten, not a manual whose
    one long page is in chapters): their passages have no chapter, so a prompt as of a
    chapter leaves them out."""


def unchanged_since(versions: Mapping[Path, FileVersion | None]) -> set[str]:
    """The recorded files of the paths in `versions` (taken before they were read) that are
    as they were: only their passages that this ingest did not write are stale.  A file
    written again meanwhile may have been ingested again by another process, from its new
    text, and what that process stored is not this ingest's to remove (the next ingest of
    the file removes what is stale then)."""
    return {recorded_file(path) for path, version in versions.items() if as_read(path, version)}


def as_read(path: Path, version: FileVersion | None) -> bool:
    """Whether the file at `path` is still as `version` (taken before it was read) says."""
    return version is not None and file_version(path) == version


def read_all(files: Sequence[tuple[Path, str]], max_chars: int) -> Iterator[Passage]:
    """Passages of every file; each file is read when its turn comes."""
    for path, source in files:
        yield from split_file(path, source, max_chars)


async def ingest(
    store: GraphStore,
    paths: Sequence[Path],
    *,
    linkers: Sequence[PassageLinker],
    tag_filter: TagFrequencyFilter | None = None,
    max_chars: int = MAX_CHARS,
    batch_size: int = BATCH_SIZE,
    root: Path | None = None,
    on_plan: Callable[[int], None] | None = None,
    on_batch: Callable[[int], None] | None = None,
    card_files: Collection[str] = (),
    page_linkers: Sequence[PageLinker] = (),
    metadata: Mapping[str, object] = {},
    stored: Mapping[str, str] | None = None,
) -> IngestReport:
    """Split, link, embed and store the files under `paths` (but `card_files`, read as
    cards by `graphstore.card_store`: a card folder inside a story folder is not story, and
    a passage stored from one of them is stale).

    With a `tag_filter` (dense-tag control), every passage is linked first so tag
    frequencies are known, and tags above its threshold are dropped before writing; only the
    link sets are kept in memory meanwhile.  `on_plan` hears the number of passages before
    anything is written, `on_batch` the size of each batch once it is stored.  A passage
    stored before with the same text keeps its embedding (`reuse_embeddings`): ingesting a
    folder again embeds only what changed.  Sources are named relative to `root` (default:
    the current directory); a passage id already stored from another file that still exists
    is refused before anything is written (`check_ids_free`).  `page_linkers` are made
    into linkers with the titles of the pages this ingest reads and of those stored before.
    `metadata` is stored in every passage beside what it takes from its file (`to_node`):
    the command records its options there (`graphstore.ingest_options`).  `stored` is
    `stored_files(store)` when the caller read it already (a scan of every passage's
    metadata: the command reads it to find the options recorded).
    """
    clash = sorted(PASSAGE_KEYS & set(metadata))
    if clash:
        raise InvalidInputError(f"metadata {clash[0]!r} is a passage's own: use another key")
    found = discover(paths, root, store.storage.local_files, card_files)
    if stored is None:
        stored = await stored_files(store)
    before = recorded_within(stored, scopes_of(paths))
    check_found(paths, found, before, [recorded_file(Path(file)) for file in card_files])
    files, skipped, _ = found
    recorded = set(stored.values())
    hidden = [source for path, source in found.hidden if recorded_file(path) not in recorded]
    if page_linkers:
        titles = page_titles(files, stored)
        linkers = [*linkers, *(make(titles) for make in page_linkers)]
    cards = [Path(file) for file in card_files]
    read = [*(path for path, _ in files), *cards]  # a card file is no text: its text is stale
    versions = {path: file_version(path) for path in read}
    before, renamed = replaced_passages(stored, paths, files, cards)
    before.update(gone_beside(stored, paths))
    planned: dict[str, str] = {}
    chaptered: dict[str, bool] = {}
    for passage in read_all(files, max_chars):
        chaptered[passage.source] = chaptered.get(passage.source, False) or (
            passage.chapter is not None
        )
        try:
            node = check_node(to_node(passage, set(), metadata))
            store.storage.check_write_size(node, store.storage.dimension)
        except InvalidInputError as error:  # "node id is 722 characters long" named no file
            raise InvalidInputError(f"{passage.source}: {error}") from error
        planned[passage.id] = passage.file
    check_ids_free(planned, stored)
    if on_plan:
        on_plan(len(planned))
    filtered: list[set[Link]] | None = None
    if tag_filter is not None:
        every = [
            links
            for batch in batches(read_all(files, max_chars), batch_size)
            for links in merged_links(batch, linkers)
        ]
        filtered = tag_filter.fit_apply(every)
    total = 0
    written: set[str] = set()
    read_as = {recorded_file(path): (path, version) for path, version in versions.items()}
    changed: set[str] = set()
    earlier_ids: dict[str, list[str]] = {}
    for node_id, file in before.items():
        earlier_ids.setdefault(renamed.get(file, file), []).append(node_id)
    moved_away = gone_files(before.values())
    gone_ids = [node_id for node_id, file in before.items() if file in moved_away]
    earlier = EarlierEmbeddings(store.storage, earlier_ids, gone_ids)

    def current(nodes: list[Node]) -> list[Node]:
        """The nodes of files still as they were when this ingest began, checked just
        before their batch is written: one written again meanwhile (or removed) may have
        been ingested or deleted by another process, whose write this one must not undo."""
        files_now = {str(node.metadata[FILE]) for node in nodes}
        moved = {file for file in files_now if file not in read_as or not as_read(*read_as[file])}
        changed.update(
            str(node.metadata["source"]) for node in nodes if node.metadata[FILE] in moved
        )
        return [node for node in nodes if node.metadata[FILE] not in moved]

    for batch in batches(read_all(files, max_chars), batch_size):
        if filtered is None:
            nodes = linked_passages(batch, linkers, metadata)
        else:
            links = filtered[total : total + len(batch)]
            nodes = [
                to_node(passage, found, metadata)
                for passage, found in zip(batch, links, strict=True)
            ]
        written.update(
            await store.aadd_nodes(
                nodes, reuse_embeddings=True, earlier_embeddings=earlier, before_write=current
            )
        )
        total += len(batch)
        if on_batch:
            on_batch(len(batch))
    unchanged = unchanged_since(versions)
    unchanged.update(old for old, name in renamed.items() if name in unchanged)
    gone = stale(before, written, unchanged)
    removed = await store.adelete(gone) if gone else 0
    unchaptered = sorted(source for source, has in chaptered.items() if not has)
    if len(unchaptered) > len(chaptered) - len(unchaptered):  # a folder of other documents
        unchaptered = []
    return IngestReport(
        files=len(files),
        passages=len(written),
        removed=removed,
        skipped=skipped,
        hidden=hidden,
        embedded=len(earlier.embedded & written),
        unchaptered=unchaptered,
        changed=sorted(changed),
    )
