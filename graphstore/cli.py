"""The `graphstore` command: ingest, search, prompt, show, delete, stats, check, mcp.

The store is chosen with `--store` or `GRAPHSTORE_STORE` (see `graphstore.location`); it is
printed only through `redact`, so a password in a URL never is.  Every failure the user can
fix prints one line, `graphstore: error: …`, and exits with status 2; only `ingest` creates a
store file, and removes it again if the ingest fails before storing anything.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from extractors.frequency import TagFrequencyFilter, check_share
from graphstore.blank import is_blank
from graphstore.card_store import acard_ids, afind_card, aingest_with_cards
from graphstore.cards import CARD, card_id
from graphstore.chapters import as_of_filter
from graphstore.command import INTERRUPTED, TERMINATED
from graphstore.errors import (
    CorruptRowError,
    GraphStoreError,
    InvalidArgumentError,
    InvalidInputError,
    one_line,
)
from graphstore.filter_expressions import filter_of
from graphstore.ingest import (
    PassageLinker,
    hierarchy_linker,
    hyperlink_linker,
    text_linker,
    title_linker,
)
from graphstore.ingest_options import (
    DEFAULT_LINKS,
    FLAGS,
    INGEST_OPTIONS,
    IngestOptions,
    recorded_options,
    resolved,
)
from graphstore.inline import escaped, inline, printed_whole, snippet
from graphstore.link_cache import LinkCache, cache_path
from graphstore.links import TagKey
from graphstore.location import (
    STORE_ENV,
    close_unused,
    new_store_file,
    open_storage,
    store_location,
)
from graphstore.models import E5Model, load_model, load_recorded
from graphstore.nodes import Hit, Node, candidate_json, hit_json
from graphstore.prompt import BUDGET, CARD_SHARE, DEFAULT_TEMPLATE, PROMPT_K, awriter_context
from graphstore.recorded_files import gone_files, ingested_from, recorded_files, stored_files
from graphstore.redaction import redact
from graphstore.splitting import MAX_CHARS, check_max_chars, read_text
from graphstore.storage import StoreStats
from graphstore.store import GraphStore
from graphstore.strategy import DEFAULT, ROOTS, TRAVERSAL_ADJACENT_K, TRAVERSAL_DEPTH
from graphstore.traversal import TraversalStats

LINK_CHOICES = (
    "hyperlinks",
    "hierarchy",
    "keywords",
    "entities",
    "mentions",
    "titles",
    "zh-keywords",
    "zh-entities",
)
ENTITY_LABELS = "person,location,organization"
"""What `--links entities` looks for unless `--entity-labels` says otherwise."""
OPTIONS = {
    "k": "-k",
    "fetch_k": "--fetch-k",
    "adjacent_k": "--adjacent-k",
    "depth": "--depth",
    "lambda_mult": "--lambda",
    "budget": "--budget",
    "card_share": "--card-share",
    "max_chars": "--max-chars",
    "top_tags": "--top",
    "as_of_chapter": "--as-of-chapter",
}
"""The option of each library argument the commands pass on as given, for its errors."""
GLOBAL_OPTIONS = {
    "store": f"store location (default: ${STORE_ENV} or graphstore.db)",
    "model": "embedding model (minilm, e5) or local directory; default: the one the store was "
    "ingested with, or minilm for a new store",
}
"""Options of every command, taken before the command's name or after it."""
SKIPPED_SHOWN = 5
"""Skipped entries an ingest names; it counts the rest."""


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors in one line, as every other error: the stock parser
    printed the whole usage block before its message."""

    commands: Any = None
    """Its commands (what `add_subparsers` returned), when it has some."""

    def error(self, message: str) -> NoReturn:
        program = self.prog.split()[0]  # `graphstore: error:` from a command's parser too
        self.exit(2, f"{program}: error: {message} (see {self.prog} --help)\n")

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: None = None
    ) -> argparse.Namespace:
        """argparse's, but an argument a command does not take is reported by that command's
        parser, so the error points to its help (`graphstore search --help`), not the top
        (one given before the command, by the top); and `--store` and `--model` given after
        the command count as given before it."""
        given = list(sys.argv[1:] if args is None else args)
        parsed, extras = self.parse_known_args(given, namespace)
        if extras:
            command = self.commands.choices.get(parsed.command) if self.commands else None
            before = given.index(parsed.command) if parsed.command in given else len(given)
            if command is None or given.index(extras[0]) < before:
                command = self
            command.error(f"unrecognized arguments: {' '.join(extras)}")
        for name in GLOBAL_OPTIONS:
            after = vars(parsed).pop(f"{name}_after_command", None)
            if after is None:
                continue
            if getattr(parsed, name) not in (None, after):
                self.error(f"--{name} given twice, before and after the command")
            setattr(parsed, name, after)
        return parsed


class _Once(argparse.Action):
    """An option that names one folder or file, refused when given twice: `--cards a
    --cards b` silently ingested the cards of b alone."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if getattr(namespace, self.dest) is not None:
            parser.error(f"{option_string} given twice: it takes one {self.metavar or 'value'}")
        setattr(namespace, self.dest, values)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="graphstore", description="A graph vector store linked by tags, not stored edges."
    )
    for name, help_text in GLOBAL_OPTIONS.items():
        parser.add_argument(f"--{name}", help=help_text)
    commands = parser.commands = parser.add_subparsers(dest="command", required=True)

    add = commands.add_parser(
        "ingest", help="split, link, embed and store files or folders, and entity cards"
    )
    add.add_argument("paths", nargs="*")
    add.add_argument(
        "--cards",
        action=_Once,
        metavar="DIR",
        help="a folder of entity cards (.md with front matter, .yaml); passages naming an "
        "entity or an alias link to its card",
    )
    add.add_argument(
        "--links",
        help=f"comma-separated extractors: {', '.join(LINK_CHOICES)}; or none (default: as "
        f"the files were ingested before, or {DEFAULT_LINKS})",
    )
    add.add_argument(
        "--names",
        action=_Once,
        metavar="FILE",
        help="names for mentions (and zh-entities): one per line, or alias<TAB>canonical name",
    )
    add.add_argument("--gliner-model", help="GLiNER model directory (for entities)")
    add.add_argument(
        "--entity-labels", help=f"for entities, comma-separated (default: {ENTITY_LABELS})"
    )
    add.add_argument(
        "--max-tag-df",
        type=float,
        help="drop tags carried by more than this share of passages (0 to 1)",
    )
    add.add_argument(
        "--max-chars",
        type=int,
        help=f"largest passage, in characters (default: as the files were ingested before, "
        f"or {MAX_CHARS})",
    )
    add.add_argument(
        "--root",
        action=_Once,
        metavar="DIR",
        help="passage ids are file paths relative to this folder (default: the current one)",
    )

    search = commands.add_parser(
        "search", help="the default graph search (or similarity, traversal, MMR traversal)"
    )
    search.add_argument("query")
    search.add_argument(
        "--mode",
        choices=["graph", "similarity", "traversal", "mmr"],
        default="graph",
        help="graph: path-aware MMR traversal, the default; mmr: the same with classic options",
    )
    search.add_argument(
        "-k", type=int, default=DEFAULT.k, help=f"passages returned (default {DEFAULT.k})"
    )
    _strategy_options(search, with_traversal=True)
    _as_of_option(
        search,
        "only passages of chapter N or earlier; no cards, whose text spans every chapter "
        "(graphstore prompt shows them as they stand in chapter N)",
    )
    search.add_argument("--json", action="store_true", help="one JSON object per hit")
    search.add_argument(
        "--debug", action="store_true", help="also list candidates considered and not returned"
    )
    _filter_option(search)

    prompt = commands.add_parser("prompt", help="passages for a writer's prompt about a scene")
    prompt.add_argument("scene")
    prompt.add_argument(
        "--budget", type=int, default=BUDGET, help=f"token budget of the block (default {BUDGET})"
    )
    prompt.add_argument(
        "-k", type=int, default=PROMPT_K, help=f"passages searched for (default {PROMPT_K})"
    )
    _strategy_options(prompt)
    _as_of_option(prompt, "only passages of chapter N or earlier; cards as they stand in N")
    _filter_option(prompt)
    prompt.add_argument(
        "--card-share",
        type=float,
        default=CARD_SHARE,
        help=f"share of the budget for entity cards (0: none; default {CARD_SHARE}); what "
        "they leave goes to passages, and what passages leave to cards that did not fit",
    )
    prompt.add_argument(
        "--template",
        default=DEFAULT_TEMPLATE,
        help="fields: {number} {citation} {provenance} {text} {id} (default: "
        f"{DEFAULT_TEMPLATE.replace(chr(10), chr(92) + 'n')})",
    )

    show = commands.add_parser("show", help="print one passage with its metadata and links")
    show.add_argument("id")

    delete = commands.add_parser(
        "delete", help="remove what was ingested from files or folders, or passages by id"
    )
    delete.add_argument(
        "paths",
        nargs="*",
        help="files or folders, gone or not: the passages and cards ingested from them",
    )
    delete.add_argument(
        "--id",
        dest="ids",
        action="append",
        default=[],
        metavar="ID",
        help="a passage or card id, repeatable",
    )

    stats = commands.add_parser("stats", help="counts and the most frequent tags")
    stats.add_argument("--top", type=int, default=10, help="how many frequent tags to list")

    check = commands.add_parser("check", help="verify that node rows and tag rows agree")
    check.add_argument(
        "--repair",
        action="store_true",
        help="mend tag rows and counts that disagree with the node rows, then check again "
        "(run it while nothing else writes to the store)",
    )
    commands.add_parser("mcp", help="serve the store to agents over MCP (stdio)")
    for command in commands.choices.values():
        for name, help_text in GLOBAL_OPTIONS.items():
            command.add_argument(f"--{name}", dest=f"{name}_after_command", help=help_text)
    return parser


def _as_of_option(command: argparse.ArgumentParser, description: str) -> None:
    command.add_argument("--as-of-chapter", type=int, metavar="N", help=description)


def _strategy_options(command: argparse.ArgumentParser, *, with_traversal: bool = False) -> None:
    """Options that override the default search's settings (`graphstore.strategy`), and
    with `with_traversal` the defaults of `--mode traversal` too."""
    depth, adjacent_k = f"default {DEFAULT.depth}", f"default {DEFAULT.adjacent_k}"
    if with_traversal:
        depth += f"; {TRAVERSAL_DEPTH} with --mode traversal"
        adjacent_k += f"; {TRAVERSAL_ADJACENT_K} with --mode traversal"
    command.add_argument("--depth", type=int, help=f"tag hops ({depth})")
    command.add_argument(
        "--fetch-k", type=int, help=f"nearest passages as roots (default: k, at least {ROOTS})"
    )
    command.add_argument("--adjacent-k", type=int, help=f"passages per tag ({adjacent_k})")
    command.add_argument(
        "--lambda",
        dest="lambda_mult",
        type=float,
        help=f"MMR: 1 relevance only, 0 diversity only (default {DEFAULT.lambda_mult})",
    )


def _filter_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="EXPR",
        help="metadata filter, repeatable (all must hold): KEY=VALUE, KEY!=VALUE, KEY<VALUE "
        "(<=, >, >=), 'KEY in V1,V2' or 'KEY not in …'; VALUE is a JSON number, true/false "
        "or quoted string when it parses as one, else the text as given",
    )


def _given_options(args: argparse.Namespace) -> dict[str, Any]:
    """The strategy options the user set."""
    names = ("depth", "fetch_k", "adjacent_k", "lambda_mult")
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def _path_arguments(args: argparse.Namespace) -> None:
    """The path arguments as paths, an empty one refused: `Path("")` is the current folder,
    so `ingest ""` (a variable that was not set) would ingest everything under it; and for
    the same reason `delete` of a filesystem root (`"$DIR/"`)."""
    if any(not path.strip() for path in args.paths):
        current = " (. for the current one)" if args.command == "ingest" else ""
        raise InvalidInputError(
            f"a path to {args.command} is empty: give a file or a folder{current}"
        )
    args.paths = [Path(path) for path in args.paths]
    if args.command == "delete":
        for path in args.paths:
            absolute = os.path.abspath(path)
            if os.path.dirname(absolute) == absolute:  # `delete "$DIR/"` with DIR not set
                raise InvalidInputError(
                    f"will not delete everything ingested under {path}: give the folders themselves"
                )
        return
    for option, wanted in (
        ("root", "a folder (. for the current one)"),
        ("cards", "a folder of cards (. for the current one)"),
        ("names", "a names file"),
    ):
        value = getattr(args, option)
        if value is not None:
            if not value.strip():
                raise InvalidInputError(f"--{option} is empty: give {wanted}")
            setattr(args, option, Path(value))


def _names(path: str | None) -> dict[str, str]:
    """alias -> canonical name, from a file of `name` or `alias<TAB>canonical` lines."""
    if path is None:
        raise InvalidInputError("mentions need --names FILE")
    names: dict[str, str] = {}
    lines: dict[str, int] = {}
    for number, line in enumerate(read_text(Path(path)).splitlines(), 1):
        alias, _, canonical = line.strip().partition("\t")
        if not alias:
            continue
        if "\t" in canonical:  # a third field was folded into the name
            raise InvalidInputError(
                f"{inline(str(path))} line {number}: more than two tab-separated fields; "
                "give a name, or an alias, a tab and the name"
            )
        canonical = canonical.strip() or alias
        if names.setdefault(alias, canonical) != canonical:  # the last line silently won
            raise InvalidInputError(
                f"{inline(str(path))} line {number}: {inline(alias)} already names "
                f"{inline(names[alias])} (line {lines[alias]}); an alias names one entity"
            )
        lines.setdefault(alias, number)
    return names


def _link_names(options: IngestOptions) -> list[str]:
    """The extractors `--links` names, checked with the options that go with them: a
    one-line error for a combination that cannot run ([] for `none`)."""
    items = [name.strip() for name in options.links.split(",")]
    names = [name for name in items if name]
    for option, users in (
        ("entity_labels", {"entities"}),
        ("gliner_model", {"entities"}),
        ("names", {"mentions", "zh-entities"}),
    ):
        if getattr(options, option) is not None and not users & set(names):
            flag = "--" + option.replace("_", "-")
            raise InvalidInputError(f"{flag} applies to --links {' or '.join(sorted(users))} only")
    if names == ["none"]:
        if options.max_tag_df is not None:  # it drops frequent tags: with no links, none
            raise InvalidInputError("--max-tag-df applies to ingests with links, not --links none")
        return []
    if not names:  # an empty --links would strip the links of passages ingested again
        raise InvalidInputError(
            f"--links names no extractor: give some of {', '.join(LINK_CHOICES)}, or none"
        )
    if len(names) < len(items):  # `hyperlinks,,hierarchy`: as `book in a,` for --filter
        raise InvalidInputError(
            f"--links {inline(options.links)} has an empty item: remove the extra comma"
        )
    if "none" in names:
        raise InvalidInputError("--links none means no links: give it alone")
    unknown = [name for name in names if name not in LINK_CHOICES]
    if unknown:
        raise InvalidInputError(
            f"unknown link extractor {unknown[0]!r}; choose from {', '.join(LINK_CHOICES)}"
        )
    if "entities" in names and not options.gliner_model:
        raise InvalidInputError("entities need --gliner-model DIR (a local GLiNER model)")
    if "entities" in names and not os.path.isdir(options.gliner_model or ""):
        raise InvalidInputError(  # checked before torch loads
            f"--gliner-model {inline(str(options.gliner_model))} is no folder: give the folder "
            "of a local GLiNER model"
        )
    return names


def _linkers(options: IngestOptions) -> list[PassageLinker]:
    """The linkers named by `--links`, configured from the other ingest options (but
    `titles`, which the ingest makes once it knows the pages: `ingest.title_linker`)."""
    names = _link_names(options)
    if not names:
        return []
    import extractors

    where = cache_path()
    cache = LinkCache(where) if where else None
    linkers: list[PassageLinker] = []
    for name in names:
        if name == "hyperlinks":
            linkers.append(hyperlink_linker())
        elif name == "hierarchy":
            linkers.append(hierarchy_linker())
        elif name == "keywords":
            linkers.append(text_linker(extractors.KeybertLinkExtractor(), cache))
        elif name == "zh-keywords":
            # MiniLM's vocabulary turns most Chinese characters into [UNK]: rank with e5.
            keywords = extractors.KeybertLinkExtractor(language="zh", model=E5Model())
            linkers.append(text_linker(keywords, cache))
        elif name == "entities":
            given = options.entity_labels or ENTITY_LABELS
            labels = [label.strip() for label in given.split(",") if label.strip()]
            extractor = extractors.GlinerLinkExtractor(labels, model=options.gliner_model)
            linkers.append(text_linker(extractor, cache))
        elif name == "titles":  # made by the ingest once it knows the pages' titles
            continue
        elif name == "mentions":
            # A names file lists things no passage defines (characters, places): passages
            # that mention the same name link to each other.
            mentions = extractors.MentionLinkExtractor(_names(options.names), direction="bidir")
            linkers.append(text_linker(mentions))
        else:
            user_dict = _names(options.names) if options.names else None
            linkers.append(text_linker(extractors.JiebaEntityLinkExtractor(user_dict=user_dict)))
    return linkers


async def _search(
    args: argparse.Namespace, store: GraphStore, metadata_filter: dict[str, Any] | None
) -> None:
    """`graphstore search`: hits as text or JSON lines, and with --debug the losers."""
    if is_blank(args.query):  # the library's message offers a vector, which no CLI user has
        raise InvalidInputError("the query is empty: give words to search for")
    scoped = as_of_filter(metadata_filter, args.as_of_chapter)
    options = _given_options(args)
    stats = TraversalStats(keep_unselected=args.debug)
    given = set(options) | ({"debug"} if args.debug else set())
    unused = {"similarity": given, "traversal": {"fetch_k", "lambda_mult"} & given}
    ignored = sorted(unused.get(args.mode, ()))
    if ignored:
        flag = "--" + ignored[0].replace("_mult", "").replace("_", "-")
        raise InvalidInputError(f"{flag} does not apply to --mode {args.mode}")
    if args.mode == "similarity":
        hits = await store.asimilarity_search(args.query, k=args.k, filter=scoped)
    elif args.mode == "traversal":
        hits = await store.atraversal_search(
            args.query, k=args.k, filter=scoped, stats=stats, **options
        )
    elif args.mode == "mmr":
        hits = await store.ammr_traversal_search(
            args.query, k=args.k, filter=scoped, stats=stats, **options
        )
    else:
        hits = await store.asearch(args.query, k=args.k, filter=scoped, stats=stats, **options)
    for rank, hit in enumerate(hits, 1):
        if args.json:
            print(json.dumps(hit_json(hit), ensure_ascii=False))
        else:
            _print_hit(rank, hit)
    if not hits and not args.json:
        print("no results")
    if not hits:
        await _hint_if_no_chapters(store, args.query, args.as_of_chapter)
    for candidate in stats.unselected:
        if args.json:
            print(json.dumps(candidate_json(candidate), ensure_ascii=False))
        else:
            mmr = "" if candidate.mmr_score is None else f"  mmr {candidate.mmr_score:.3f}"
            if candidate.copy_of is not None:
                mmr = f"  a copy of {inline(candidate.copy_of)}"
            print(
                f"  not returned: {inline(candidate.id)}  "
                f"[{_how(candidate.depth, candidate.path, candidate.raised_by)}]  "
                f"score {candidate.score:.3f}  sim {candidate.similarity:.3f}{mmr}"
            )


async def _hint_if_no_chapters(store: GraphStore, query: str, as_of_chapter: int | None) -> None:
    """After an empty result as of a chapter: say so when no passage has a chapter at all
    (the store's files have no chapter headings), which left nothing to find."""
    if as_of_chapter is None:
        return
    if not await store.asimilarity_search(query, k=1, filter={"chapter": {"$gte": 0}}):
        print(
            "graphstore: no passage in this store has a chapter, so --as-of-chapter keeps "
            "none: a chapter is read from a heading such as 第一回 or 'Chapter 1'",
            file=sys.stderr,
        )


def _how(depth: int, path: Sequence[TagKey], raised_by: Sequence[TagKey] = ()) -> str:
    if not path:
        return f"root, raised via {_tags(raised_by[-1:])}" if raised_by else "root"
    return f"depth {depth} via {_tags(path)}"


def _tags(path: Sequence[TagKey]) -> str:
    return " → ".join(f"{inline(kind)}: {inline(tag)}" for kind, tag in path)


def _print_hit(rank: int, hit: Hit) -> None:
    scores = "" if hit.score is None else f"score {hit.score:.3f}  "
    scores += f"sim {hit.similarity:.3f}"
    if hit.mmr_score is not None:
        scores += f"  mmr {hit.mmr_score:.3f}"
    print(
        f"{rank:2d}. {inline(hit.node.id)}  [{_how(hit.depth, hit.path, hit.raised_by)}]  {scores}"
    )
    section = hit.node.metadata.get("section")
    if section:
        headings = section if isinstance(section, list) else [section]
        print(f"    § {inline(' / '.join(map(str, headings)))}")
    print(f"    {snippet(hit.node.text)}")


def _stop_on_terminate() -> None:
    """On SIGTERM (`kill`), stop an ingest or a delete as Ctrl-C stops it: cancelled at its
    next await, it cleans up as after any failure (a new store file nothing was written to
    is removed) and ends with one line, not with the file left behind.  A second SIGTERM
    kills at once, as before.  Only where SIGTERM has its default action (a program calling
    `main` keeps its own handler) and in the main thread (where signals arrive)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        return
    task, loop = asyncio.current_task(), asyncio.get_running_loop()
    if task is None:
        return

    def stop() -> None:
        loop.remove_signal_handler(signal.SIGTERM)
        task.cancel()

    loop.add_signal_handler(signal.SIGTERM, stop)


async def _run(args: argparse.Namespace) -> int:
    if args.command in ("ingest", "delete"):  # a server or a search has nothing to clean up
        _stop_on_terminate()
    location = store_location(args.store)
    creating = args.command in ("ingest", "mcp")  # the commands that write
    if args.command in ("ingest", "delete"):
        _path_arguments(args)
    if args.command == "ingest":  # what was given, checked before the store opens
        given = _given_ingest_options(args)
        if "max_chars" in given:
            check_max_chars(args.max_chars)
        if "links" in given:  # else from the record, checked once it is read
            _link_names(IngestOptions(**given))
            if "names" in given:
                _names(given["names"])
    metadata_filter = filter_of(getattr(args, "filter", []))  # checked before anything runs
    if args.model is not None and not args.model.strip():
        raise InvalidInputError("--model is empty: give minilm, e5 or a model folder")
    model = load_model(args.model) if args.model else None  # checked before opening
    new_file = new_store_file(location) if creating else None
    try:
        storage = open_storage(location, create=creating)
    except BaseException:
        if new_file is not None:  # a full disk fails the open after the file was made
            new_file.put_back_after_failed_open()
        raise
    try:
        if model is None and args.command in ("ingest", "search", "prompt", "mcp"):
            model = load_recorded(await storage.recorded_model())
        status = await _command(
            args, GraphStore(model, storage), escaped(redact(location)), metadata_filter
        )
    except BaseException:
        await close_unused(storage, new_file)
        raise
    await storage.close()
    return status


async def _command(
    args: argparse.Namespace,
    store: GraphStore,
    shown: str,
    metadata_filter: dict[str, Any] | None,
) -> int:
    """Run one command; `shown` is the store location as printed (`redact`, and `escaped`
    as error lines print it: a byte of the name that is not UTF-8 reads `\\xNN`)."""
    if args.command == "ingest":
        await _ingest(args, store, shown)
    elif args.command == "search":
        await _search(args, store, metadata_filter)
    elif args.command == "prompt":
        context = await awriter_context(
            store,
            args.scene,
            budget=args.budget,
            k=args.k,
            filter=metadata_filter,
            template=args.template.replace("\\n", "\n"),
            as_of_chapter=args.as_of_chapter,
            card_share=args.card_share,
            **_given_options(args),
        )
        context.check_shown()
        print(printed_whole(context.text))
        print(
            f"\n({_count(len(context.cards), 'card')}, {_count(len(context.hits), 'passage')}, "
            f"{context.tokens} of {context.budget} tokens)",
            file=sys.stderr,
        )
        if context.card_left_out:
            card, tokens = context.card_left_out
            print(
                f"graphstore: the best card, {inline(card)}, needs a budget of {tokens}; "
                "no lesser card is shown in its place",
                file=sys.stderr,
            )
        if not context.hits:
            await _hint_if_no_chapters(store, args.scene, args.as_of_chapter)
    elif args.command == "show":
        node = await _stored_node(store, args.id, shown)
        print(f"id: {inline(node.id)}")
        print(f"metadata: {json.dumps(node.metadata, ensure_ascii=False)}")
        for link in sorted(node.links):
            print(f"link: {link.direction:5s} {inline(link.kind)}: {inline(link.tag)}")
        print(f"\n{printed_whole(node.text)}")
    elif args.command == "delete":
        await _delete(args, store, shown)
    elif args.command == "stats":
        stats = await store.astats(args.top)
        cards = len(await acard_ids(store))
        print(f"store: {shown}\npassages: {_passages(stats, cards)}\ncards: {cards}")
        print(f"tags: {stats.tags}")
        print(f"tag rows: {stats.tag_rows}\nembedding dimension: {stats.dimension or 'none yet'}")
        print(f"embedding model: {await store.storage.recorded_model() or 'not recorded'}")
        if stats.corrupt_rows:
            print(
                f"corrupt rows: {stats.corrupt_rows}, left out of searches "
                "(`graphstore check` lists them; ingest them again to repair)"
            )
        if stats.tag_frequencies:
            print("most frequent tags (passages linking in):")
            for (kind, tag), count in stats.tag_frequencies.items():
                print(f"  {count:6d}  {inline(kind)}: {inline(tag)}")
    elif args.command == "check":
        problems = await store.acheck()
        if problems and args.repair:
            for change in await store.arepair():
                print(f"repaired: {change}")
            problems = await store.acheck()
        for problem in problems:
            print(problem)
        print(f"{_count(len(problems), 'problem')} found in {shown}")
        note = store.storage.check_note_for(problems)
        if note:
            print(f"note: {note}")
        await _note_gone_files(store)
        return 1 if problems else 0
    elif args.command == "mcp":
        from graphstore.mcp_server import aserve

        await store.acheck_model()  # before serving: a wrong model would fail every call
        with _interrupt_kills():
            await aserve(store, shown)
    return 0


@contextlib.contextmanager
def _interrupt_kills() -> Iterator[None]:
    """Ctrl-C ends the process at once, as SIGTERM does (each write is committed whole or
    not at all).  A server waits for its next line of stdin in a worker thread that no
    cancel can stop, so Ctrl-C used to leave it running until its client closed stdin.
    In the main thread only (where signals arrive); the previous handler comes back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


async def _stored_id(store: GraphStore, node_id: str, shown: str) -> str:
    """The id of the stored node `node_id` names, or a one-line error; `card:Hero` names the
    card stored as `card:hero`.  A row that cannot be read is still there: `delete --id`
    removes it."""
    names = [node_id, *_unquoted(node_id)]
    if node_id.startswith(f"{CARD}:"):
        names.append(card_id(node_id.removeprefix(f"{CARD}:")))
    for name in names:
        try:
            if await store.aget([name]):
                return name
        except CorruptRowError:
            return name
    card = await afind_card(store, node_id, by_alias=False)  # an alias: a scan of every id
    hint = f"; {inline(node_id)} names the card {inline(card_id(card.name))}" if card else ""
    raise InvalidInputError(f"no passage with id {_quoted_id(node_id)} in {shown}{hint}")


def _quoted_id(node_id: str) -> str:
    """An id as an error names it: in quotes, JSON's when it does not print on one line (a
    repr doubled the backslash of `a\\u001bb#0`, which then read as another id)."""
    return f"'{node_id}'" if node_id.isprintable() else inline(node_id)


def _unquoted(node_id: str) -> list[str]:
    """The id `node_id` spells as a search prints an id that does not print on one line:
    JSON-quoted, `"a\\u001bb.txt#0"`, or pasted without its quotes (it was not found)."""
    quoted = len(node_id) > 1 and node_id[0] == node_id[-1] == '"'
    if not quoted and "\\" not in node_id:
        return []
    try:
        value = json.loads(node_id if quoted else f'"{node_id}"')
    except ValueError:  # `\xNN` is no JSON escape: such an id is stored as spelt
        return []
    return [value] if isinstance(value, str) and value != node_id else []


async def _stored_node(store: GraphStore, node_id: str, shown: str) -> Node:
    """The stored node `node_id` names (`_stored_id`), or a one-line error."""
    nodes = await store.aget([await _stored_id(store, node_id, shown)])
    if not nodes:  # removed since
        raise InvalidInputError(f"no passage with id {_quoted_id(node_id)} in {shown}")
    return nodes[0]


async def _note_gone_files(store: GraphStore) -> None:
    """A note, not a problem (the rows agree), on passages whose recorded file is not here:
    deleted since its last ingest, or ingested on another machine."""
    recorded = await recorded_files(store)
    gone = gone_files(recorded.values())
    if gone:
        ids = [node_id for node_id, file in recorded.items() if file in gone]
        cards = sum(node_id.startswith(f"{CARD}:") for node_id in ids)
        print(
            f"note: {_passages_and_cards(len(ids) - cards, cards)} of "
            f"{_count(len(gone), 'file')} not found here "
            f"(first: {inline(min(gone))}); ingest their folder again, or `graphstore delete` "
            "them, to remove them"
        )


async def _delete(args: argparse.Namespace, store: GraphStore, shown: str) -> None:
    """`graphstore delete`: every path and id is checked before anything is removed, so a
    typo removes nothing."""
    if not args.paths and not args.ids:
        raise InvalidInputError("give files or folders whose passages to delete, or --id ID")
    if any(not node_id.strip() for node_id in args.ids):
        raise InvalidInputError("an --id is empty: give a passage or card id")
    ids = set(ingested_from(await recorded_files(store), args.paths) if args.paths else ())
    for node_id in args.ids:
        ids.add(await _stored_id(store, node_id, shown))
    every_card = await acard_ids(store)
    cards = len(ids & every_card)
    removed = await store.adelete(sorted(ids))
    stats = await store.astats()
    print(
        f"removed {_passages_and_cards(max(removed - cards, 0), cards)} from {shown}; store has "
        f"{_held(stats, len(every_card - ids))}, {_count(stats.tags, 'tag')}"
    )


def _given_ingest_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ingest options given on the command line, by `IngestOptions` field."""
    given = {name: getattr(args, name) for name in FLAGS if getattr(args, name) is not None}
    if "names" in given:
        given["names"] = str(given["names"])
    return given


async def _ingest(args: argparse.Namespace, store: GraphStore, shown: str) -> None:
    """`graphstore ingest`: files and cards, then one summary line."""
    from tqdm import tqdm

    stored = await stored_files(store)  # read once: the ingest needs it too
    recorded, beside = await recorded_options(store, stored, args.paths, args.root)
    options, taken, passed_over = resolved(_given_ingest_options(args), recorded)
    whose = "the files beside them were" if beside else "these files were"
    if taken:
        print(f"graphstore: as {whose} ingested before: {options.flags(taken)}", file=sys.stderr)
    if passed_over:
        print(
            f"graphstore: --links given: not taking {passed_over} from the earlier ingest of "
            f"{whose.removesuffix(' were')} (give it again to keep it)",
            file=sys.stderr,
        )
    try:
        linkers = _linkers(options)
    except InvalidInputError as error:  # a names file moved since: the user never typed it
        if "names" not in taken:
            raise
        raise InvalidInputError(
            f"{error} (--names as {whose} ingested before: give --names, or --links)"
        ) from error
    bar = tqdm(unit="passage", desc="ingest", disable=not sys.stderr.isatty())
    report = await aingest_with_cards(
        store,
        args.paths,
        args.cards,
        linkers=linkers,
        page_linkers=[title_linker] if "titles" in _link_names(options) else [],
        tag_filter=_tag_filter(options.max_tag_df),
        max_chars=options.max_chars,
        root=args.root,
        on_plan=lambda total: setattr(bar, "total", total),
        on_batch=bar.update,
        metadata={INGEST_OPTIONS: options.record()},
        stored=stored,
    )
    bar.close()
    if report.skipped:
        print(f"graphstore: {_skipped(report.skipped)}", file=sys.stderr)
    if report.hidden:
        print(f"graphstore: {_hidden(report.hidden)}", file=sys.stderr)
    if report.unchaptered:
        print(f"graphstore: {_unchaptered(report.unchaptered)}", file=sys.stderr)
    if report.changed:
        print(f"graphstore: {_changed(report.changed)}", file=sys.stderr)
    stats = await store.astats()
    print(
        f"ingested {_count(report.passages, 'passage')} ({report.embedded} embedded) "
        f"from {_count(report.files, 'file')} "
        f"and {_count(report.cards, 'card')} into {shown}; "
        f"removed {_passages_and_cards(report.removed, report.removed_cards, 'stale ')}; "
        f"store has {_held(stats, len(await acard_ids(store)))}, {_count(stats.tags, 'tag')}, "
        f"{_count(stats.tag_rows, 'tag row')}"
    )


def _tag_filter(max_tag_df: float | None) -> TagFrequencyFilter | None:
    """The `--max-tag-df` filter, with a range error that names the option."""
    if max_tag_df is None:
        return None
    return TagFrequencyFilter(check_share("--max-tag-df", max_tag_df))


def _first_names(names: Sequence[str]) -> str:
    """The first `SKIPPED_SHOWN` of `names`, quoted where needed, and how many more."""
    shown = ", ".join(inline(name) for name in names[:SKIPPED_SHOWN])
    more = f" and {len(names) - SKIPPED_SHOWN} more" if len(names) > SKIPPED_SHOWN else ""
    return shown + more


def _skipped(names: Sequence[str]) -> str:
    """One line naming the entries an ingest skipped (the first `SKIPPED_SHOWN`)."""
    one = len(names) == 1
    return (
        f"skipped {len(names)} {'entry' if one else 'entries'} not read as a file (a link "
        f"to nothing or to a folder, a pipe, a folder it may not read): {_first_names(names)}"
    )


def _hidden(names: Sequence[str]) -> str:
    """One line naming the hidden files an ingest left out."""
    one = len(names) == 1
    return (
        f"left out {len(names)} hidden {'file' if one else 'files'} (a name starting with a "
        f"dot; give {'it' if one else 'them'} by name to ingest {'it' if one else 'them'}): "
        f"{_first_names(names)}"
    )


def _unchaptered(names: Sequence[str]) -> str:
    """One line naming the files with no chapter heading among files that have one."""
    return (
        f"no chapter heading in {_first_names(names)}, unlike the other files: "
        f"{'its' if len(names) == 1 else 'their'} passages have no chapter, and "
        "--as-of-chapter leaves them out"
    )


def _changed(names: Sequence[str]) -> str:
    """One line naming the files an ingest left out because they changed while it ran."""
    one = len(names) == 1
    return (
        f"{_first_names(names)} {'was' if one else 'were'} written again or removed while this "
        f"ingest ran, so {'its' if one else 'their'} passages from then on were not stored from "
        "the text read before (another ingest or delete may have come since): ingest again to "
        f"store {'it' if one else 'them'} as {'it is' if one else 'they are'} now"
    )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _passages_and_cards(passages: int, cards: int, adjective: str = "") -> str:
    """A count of passages, with cards counted apart: `3 passages and 1 card`."""
    counted = _count(passages, f"{adjective}passage")
    return f"{counted} and {_count(cards, f'{adjective}card')}" if cards else counted


def _passages(stats: StoreStats, cards: int) -> int:
    """How many of the store's readable rows are passages: all but its readable `cards`
    (`acard_ids`; never below 0 when another process removed some in between)."""
    return max(stats.nodes - cards, 0)


def _held(stats: StoreStats, cards: int) -> str:
    """What the store holds: `3 passages`, or with cards `3 passages, 1 card`."""
    held = _count(_passages(stats, cards), "passage")
    return f"{held}, {_count(cards, 'card')}" if cards else held


def _failed(args: argparse.Namespace, message: str) -> int:
    """Print the one-line error `message`, the store's password redacted and characters
    that do not print escaped (a file name with a newline), and return the status 2."""
    for location in (args.store, os.environ.get(STORE_ENV)):
        if location:
            message = message.replace(location, redact(location))
    print(f"graphstore: error: {escaped(message)}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `graphstore` command."""
    args = _parser().parse_args(argv)
    if sys.stdout is None:  # started with standard output closed (`>&-`)
        print("graphstore: error: standard output is closed", file=sys.stderr)
        return 2
    for stream in (sys.stdout, sys.stderr):
        # A terminal or pipe that cannot show some characters (PYTHONIOENCODING=ascii, a
        # C locale) gets them escaped rather than a traceback half way through the output.
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    try:
        status = asyncio.run(_run(args))
        sys.stdout.flush()  # here, so a closed pipe is caught below, not at exit
        return status
    except GraphStoreError as error:
        if isinstance(error, InvalidArgumentError) and error.argument in OPTIONS:
            return _failed(args, f"{OPTIONS[error.argument]} {error.problem}")
        return _failed(args, str(error))
    except BrokenPipeError:
        # The reader left (`graphstore search … | head -1`): stop quietly, as `cat` does.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except OSError as error:  # a path the system refuses: a name too long, no permission
        named = f"{os.fsdecode(error.filename)}: " if error.filename is not None else ""
        return _failed(args, f"{named}{error.strerror or one_line(error)}")
    except KeyboardInterrupt:
        print("graphstore: interrupted", file=sys.stderr)
        return INTERRUPTED
    except asyncio.CancelledError:  # SIGTERM (`_stop_on_terminate`)
        print("graphstore: terminated", file=sys.stderr)
        return TERMINATED


if __name__ == "__main__":
    from graphstore.command import exit_stopped

    sys.exit(exit_stopped(main()))
