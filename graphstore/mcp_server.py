"""`graphstore mcp`: the store as Model Context Protocol tools for a writing agent (stdio).

Tools: `search`, `scene_context` (the writer prompt: cards, then passages, within a
budget), `get_passage`, `get_card`, `put_passages`, `put_card` and `delete_card`.  Bad
input and store failures come back as tool errors carrying the one-line message the command
line would print; the server keeps serving.  Passages an agent adds link out to the cards they name;
a card an agent adds links to the cards it names (passages stored before it are linked to
it when they are written again).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError

from graphstore.card_store import afind_card, aget_card, aplan_cards, awrite_cards
from graphstore.cards import (
    CARD,
    MAX_NAME,
    Card,
    alias_entries,
    card_from_mapping,
    fact_as_of,
    render_card,
)
from graphstore.chapters import as_of_filter, check_chapter
from graphstore.errors import (
    CorruptRowError,
    GraphStoreError,
    InvalidInputError,
    StoreReplacedError,
)
from graphstore.links import Link, as_links
from graphstore.nodes import Node, hit_json
from graphstore.prompt import BUDGET, CARD_SHARE, PROMPT_K, awriter_context
from graphstore.recorded_files import is_gone
from graphstore.splitting import FILE
from graphstore.store import GraphStore
from graphstore.strategy import DEFAULT

INSTRUCTIONS = """\
A story's world memory: passages of the text (metadata `chapter` for chapter-scoped
retrieval) and entity cards (characters, places, items) with aliases and attributes that
change by chapter.  Use scene_context to get the context for a scene you are writing; pass
as_of_chapter to leave out everything from later chapters."""


class LinkInput(BaseModel):
    """A link tag: `out` reaches passages linking `in` on the same kind and tag."""

    model_config = ConfigDict(extra="forbid")

    kind: str
    direction: str = Field(description="in, out or bidir")
    tag: str


class PassageInput(BaseModel):
    """A passage to add or replace (same id: replaced).  A field it does not have is
    refused, not dropped: `chapter` beside `metadata` rather than in it was stored as no
    chapter, which no as-of search then returned."""

    model_config = ConfigDict(extra="forbid")

    id: str
    text: str
    metadata: dict[str, Any] = Field(
        default_factory=dict, description='e.g. {"source": "draft.md", "chapter": 28}'
    )
    links: list[LinkInput] = Field(default_factory=list)


StrictCount = Annotated[int, Strict()]
"""An integer argument taken as the command line takes one: `true` or `"2"` is refused, not
read as 1 or 2 (pydantic's lax mode)."""
StrictShare = Annotated[float, Strict()]
"""A number argument (an integer is one too), `true` or `"0.3"` refused."""


@contextmanager
def _tool_errors() -> Iterator[None]:
    """The store's one-line errors as tool errors (anything else is the SDK's to report)."""
    try:
        yield
    except StoreReplacedError as error:  # an agent cannot open it again: its server can
        raise ToolError(
            f"{error.path} was deleted or replaced since this server opened it: restart "
            "`graphstore mcp` to serve the store there now"
        ) from error
    except GraphStoreError as error:
        raise ToolError(str(error)) from error


class _Server(MCPServer):
    """Arguments checked as the command line checks options: an unknown one is refused
    (the SDK ignored it), and a value of the wrong type is one line naming the argument
    (the SDK sent pydantic's multi-line report with a documentation link); a tool's error
    is its one line, without the SDK's "Error executing tool …" before it."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        tool = self._tool_manager.get_tool(name)
        if tool is not None:
            known = tool.parameters.get("properties", {})
            unknown = sorted(set(arguments) - set(known))
            if unknown:
                raise ToolError(
                    f"{name}: unknown argument {unknown[0]!r}; known: {', '.join(sorted(known))}"
                )
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            if isinstance(error.__cause__, ToolError):  # ours, which the SDK prefixed
                raise ToolError(str(error.__cause__)) from error.__cause__
            if not isinstance(error.__cause__, ValidationError):
                raise
            first = error.__cause__.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise ToolError(f"{name}: {where}: {first['msg']}") from error.__cause__


def card_json(card: Card, as_of_chapter: int | None) -> dict[str, Any]:
    """A card as an agent reads it: attribute values as they stand in `as_of_chapter`,
    and the aliases held by then (a dated one as `{name, chapter}`, as `put_card` takes it,
    so a card read without a chapter and written back keeps its dates; one read as of a
    chapter lacks what comes later, and `put_card` lists what it drops)."""
    values = {
        name: fact.value
        for name, facts in card.attributes
        if (fact := fact_as_of(facts, as_of_chapter)) is not None
    }
    return {
        "id": card.id,
        "name": card.name,
        "kind": card.kind,
        "aliases": alias_entries(card, as_of_chapter),
        "attributes": values,
        "description": card.description,
        "as_of_chapter": as_of_chapter,
        "text": render_card(card, as_of_chapter),
    }


def _dropped(before: Card, after: Card) -> dict[str, list[str]]:
    """The aliases and attribute names `before` had that `after`, which replaced it, has
    not: an agent updating one attribute learns what it left out."""
    attributes = {name for name, _ in after.attributes}
    return {
        "aliases": [alias for alias in before.aliases if alias not in after.aliases],
        "attributes": [name for name, _ in before.attributes if name not in attributes],
    }


def _passage(given: PassageInput, mentions_links: set[Link]) -> Node:
    if given.metadata.get("kind") == CARD:
        raise InvalidInputError(f"{given.id}: metadata kind 'card' is for cards: use put_card")
    if given.id.startswith(f"{CARD}:"):
        raise InvalidInputError(f"{given.id}: ids starting '{CARD}:' are card ids: use put_card")
    if "chapter" in given.metadata:
        check_chapter(f"{given.id}: metadata chapter", given.metadata["chapter"])
    links = as_links([link.model_dump() for link in given.links])
    if any(link.kind == CARD and link.is_incoming for link in links):
        raise InvalidInputError(
            f"{given.id}: a link in to a '{CARD}' tag makes a passage a card's: use put_card"
        )
    return Node(given.id, given.text, given.metadata, links | mentions_links)


async def _readable(store: GraphStore, ids: list[str]) -> list[Node]:
    """The stored passages of `ids` that can be read: a corrupt row is one a write repairs."""
    try:
        return await store.aget(ids)
    except CorruptRowError:
        found = []
        for node_id in ids:
            with suppress(CorruptRowError):
                found += await store.aget([node_id])
        return found


async def _check_not_from_files(store: GraphStore, ids: list[str]) -> None:
    """Refuse to replace a passage ingested from a file that still exists, as `put_card`
    refuses a card kept in one: the next ingest of the file would undo the change, and the
    replacement lost the passage's file, source and section."""
    for node in await _readable(store, ids):
        file = node.metadata.get(FILE)
        if isinstance(file, str) and not is_gone(file):
            raise InvalidInputError(
                f"{node.id}: this passage is ingested from {file}: change it there and "
                "ingest it again (an ingest of that file would undo a change made here)"
            )


def build_server(store: GraphStore, shown: str = "") -> MCPServer:
    """An MCP server whose tools read and write `store` (`shown`: its redacted location)."""
    # Warnings up only: at INFO the SDK logs each tool error again on stderr, over lines
    # wrapped for a terminal no client shows, and each request as it comes.
    server = _Server("graphstore", instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool()
    async def search(
        query: str,
        k: StrictCount = DEFAULT.k,
        filter: dict[str, Any] | None = None,
        as_of_chapter: StrictCount | None = None,
    ) -> list[dict[str, Any]]:
        """The default graph search: k passages by relevance, each with how it was reached.
        `filter` is a metadata filter ({"book": "西游记"}); as_of_chapter keeps passages of
        that chapter and earlier."""
        with _tool_errors():
            hits = await store.asearch(query, k=k, filter=as_of_filter(filter, as_of_chapter))
            return [hit_json(hit) for hit in hits]

    @server.tool()
    async def scene_context(
        scene: str,
        *,
        budget: StrictCount = BUDGET,
        k: StrictCount = PROMPT_K,
        filter: dict[str, Any] | None = None,
        as_of_chapter: StrictCount | None = None,
        card_share: StrictShare = CARD_SHARE,
    ) -> str:
        """The context for writing a scene, within `budget` tokens: the cards of the
        entities in it (as they stand in as_of_chapter), then passages (of as_of_chapter
        and earlier), each cited with its source and how it was found."""
        with _tool_errors():
            context = await awriter_context(
                store,
                scene,
                budget=budget,
                k=k,
                filter=filter,
                as_of_chapter=as_of_chapter,
                card_share=card_share,
            )
            context.check_shown()
            return context.text

    @server.tool()
    async def get_passage(id: str) -> dict[str, Any]:
        """One stored passage (or card passage) by id: text, metadata and links."""
        with _tool_errors():
            nodes = await store.aget([id])
            if not nodes:
                raise InvalidInputError(f"no passage with id {id!r} in {shown or 'the store'}")
            node = nodes[0]
            links = [
                {"kind": link.kind, "direction": link.direction, "tag": link.tag}
                for link in sorted(node.links)
            ]
            return {"id": node.id, "text": node.text, "metadata": node.metadata, "links": links}

    @server.tool()
    async def get_card(name: str, as_of_chapter: StrictCount | None = None) -> dict[str, Any]:
        """An entity's card by name, alias or id (`card:…`, as search returns it), its
        attributes as they stand in as_of_chapter and the aliases held by then (the latest
        values and every alias when omitted)."""
        with _tool_errors():
            if as_of_chapter is not None:
                check_chapter("as_of_chapter", as_of_chapter)
            if len(name) > len(f"{CARD}:") + MAX_NAME:  # its id would be refused as too long
                raise InvalidInputError(
                    f"no card named that: a name is {len(name)} characters long, and names "
                    f"and aliases are at most {MAX_NAME}"
                )
            card = await afind_card(store, name)
            if card is None:
                raise InvalidInputError(f"no card named {name!r}")
            return card_json(card, as_of_chapter)

    @server.tool()
    async def put_passages(passages: list[PassageInput]) -> list[str]:
        """Add or replace passages; each links out to the cards of the entities it names.
        Give metadata `chapter` (an integer) for chapter-scoped retrieval."""
        with _tool_errors():
            for passage in passages:  # the key that marks a passage as a file's, never theirs
                if FILE in passage.metadata:
                    raise InvalidInputError(
                        f"{passage.id}: metadata {FILE!r} marks passages ingested from files; "
                        "name where it comes from as 'source'"
                    )
            await _check_not_from_files(store, [p.id for p in passages])
            mentions = (await aplan_cards(store, [])).mentions()
            nodes = [
                _passage(p, set() if mentions is None else mentions.extract_one(p.text))
                for p in passages
            ]
            return await store.aadd_nodes(nodes)

    @server.tool()
    async def put_card(
        name: str,
        kind: str = "",
        aliases: list[str | dict[str, Any]] | None = None,
        attributes: dict[str, Any] | None = None,
        description: str = "",
    ) -> dict[str, Any]:
        """Add or replace an entity's card, whole (one kept in a file is refused: edit the
        file).  An alias is a name, or {"name": …, "chapter": N} for a name the entity takes
        in chapter N (a prompt before it does not show it).  attributes maps a name to a
        value, or to a list of {"value": …, "chapter": N} for values that change as the story
        goes on.  Aliases and attributes the card had and this call does not give are
        dropped: the answer lists them in `dropped`."""
        with _tool_errors():
            fields = {
                "name": name,
                "kind": kind,
                "aliases": aliases or [],
                "attributes": attributes or {},
                "description": description,
            }
            card = card_from_mapping(fields)
            before = await aget_card(store, card.id)
            await awrite_cards(store, await aplan_cards(store, [card]))
            answer = card_json(card, None)
            if before is not None:
                answer["dropped"] = _dropped(before, card)
            return answer

    @server.tool()
    async def delete_card(name: str) -> dict[str, Any]:
        """Remove an entity's card, found by name, alias or id (one kept in a file is
        refused: delete it there).  Passages naming the entity keep their text."""
        with _tool_errors():
            card = await afind_card(store, name)
            if card is None:
                raise InvalidInputError(f"no card named {name!r}")
            if card.file and not is_gone(card.file):
                raise InvalidInputError(
                    f"the card {card.name!r} is kept in {card.file}: delete it there and "
                    "ingest the card folder again (an ingest would bring it back)"
                )
            await store.adelete([card.id])
            return {"deleted": card.id, "name": card.name}

    return server


async def aserve(store: GraphStore, shown: str = "") -> None:
    """Serve `store` over stdio until the client closes the connection (also while
    answers are on their way: nobody is left to answer)."""
    try:
        await build_server(store, shown).run_stdio_async()
    except* (BrokenPipeError, ConnectionResetError):
        pass
