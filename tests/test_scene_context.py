"""The sectioned scene context on every backend, in Chinese and English: the cards of the
entities in the scene (named in it, or reached by the search), then passages."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from graphstore import GraphStore, Node
from graphstore.card_store import aplan_cards, awrite_cards
from graphstore.cards import card_from_mapping, card_history, card_mentions, card_node
from graphstore.nodes import Hit
from graphstore.prompt import awriter_context
from graphstore.scene import citation, scene_cards
from graphstore.testing.embeddings import KeyedEmbeddings


@dataclass(frozen=True)
class World:
    scene: str
    hero: dict
    villain: dict
    mentor: dict
    place: dict
    near: str
    """A passage similar to the scene that names the mentor (whom the scene does not name)."""
    far: str
    """A passage unlike the scene, naming nobody."""

    @property
    def states(self) -> tuple[str, str]:
        """The hero's attribute line before chapter 27 and from it on."""
        [(name, facts)] = self.hero["attributes"].items()
        return tuple(f"{name}: {fact['value']}" for fact in facts)


def card(name: str, aliases: list[str], **fields) -> dict:
    return {"name": name, "aliases": aliases, **fields}


def hero(name: str, aliases: list[str], attribute: str, early: str, late: str) -> dict:
    dated = [{"value": early, "chapter": 14}, {"value": late, "chapter": 27}]
    return card(name, aliases, kind="character", attributes={attribute: dated})


ZH = World(
    "行者大战尸魔",
    hero("孙悟空", ["行者", "悟空"], "处境", "保唐僧取经", "被贬回山"),
    card("白骨精", ["尸魔"], description="白虎岭的妖精。"),
    card("唐僧", ["三藏"]),
    card("花果山", [], kind="place", description="大战之后的故乡。"),
    near="三藏在白虎岭上看着这一场恶战。",
    far="天色已晚，远处传来钟声。",
)
EN = World(
    "The Monkey King fights the Bone Demon",
    hero("Sun Wukong", ["Monkey King", "Wukong"], "state", "escorts the monk west", "banished"),
    card("White Bone Demon", ["Bone Demon"], description="A corpse fiend."),
    card("Tang Sanzang", ["Tripitaka"]),
    card("Flower Fruit Mountain", [], kind="place", description="Home after the fight."),
    near="Tripitaka watches the fight on the ridge.",
    far="Night falls and a bell rings far away.",
)


async def build(backend, world: World) -> GraphStore:
    cards = [
        card_from_mapping(data, f"cards/{data['name']}.md")
        for data in (world.hero, world.villain, world.mentor, world.place)
    ]
    place_text = card_history(cards[3])
    vectors = {
        world.scene: [1, 0, 0, 0],
        world.near: [0.9, 0.3, 0, 0],
        place_text: [0.8, 0, 0.5, 0],  # a card like the scene that nothing names
        world.far: [0, 0, 0, 1],
    }
    for n, card in enumerate(cards[:3]):
        vectors[card_history(card)] = [0, 0.2 * n, 1, 0.5]
    store = GraphStore(KeyedEmbeddings(vectors), backend)
    plan = await aplan_cards(store, cards)
    await awrite_cards(store, plan)
    mentions = plan.mentions()
    await store.aadd_nodes(
        [
            Node(
                f"book#{n}",
                text,
                {"source": "book", "position": n, "chapter": chapter},
                frozenset(mentions.extract_one(text)),
            )
            for n, (text, chapter) in enumerate([(world.near, 27), (world.far, 3)])
        ]
    )
    return store


@pytest.mark.parametrize("world", [ZH, EN], ids=["zh", "en"])
async def test_cards_named_in_the_scene_then_reached_ones_then_passages(backend, world):
    store = await build(backend, world)
    context = await awriter_context(store, world.scene, budget=2000, k=2, depth=0)
    reasons = {chosen.card.name: chosen.provenance for chosen in context.cards}
    assert reasons == {
        world.hero["name"]: "named in the scene",
        world.villain["name"]: "named in the scene",
        world.mentor["name"]: "named in book#0",
        world.place["name"]: "similar to the scene",
    }
    # Then in the order the search ranked what reached them: book#0 is nearer than the card.
    assert [c.card.name for c in context.cards][2:] == [world.mentor["name"], world.place["name"]]
    # Cards go to their own section, never among the passages.
    assert [hit.node.id for hit in context.hits] == ["book#0", "book#1"]
    text = context.text
    assert text.index("## Cards") < text.index(world.hero["name"]) < text.index("## Passages")
    assert text.index("## Passages") < text.index(world.near)
    assert f"cards/{world.hero['name']}.md · card:" in text
    assert "(named in book#0)" in text
    early, late = world.states
    assert late in text  # no chapter given: the latest values
    assert early not in text


@pytest.mark.parametrize("world", [ZH, EN], ids=["zh", "en"])
async def test_cards_are_rendered_as_of_the_chapter(backend, world):
    store = await build(backend, world)
    context = await awriter_context(store, world.scene, budget=2000, k=2, as_of_chapter=20)
    hero = next(c for c in context.cards if c.card.name == world.hero["name"])
    assert hero.provenance == "named in the scene"
    early, late = world.states
    assert early in context.text
    assert late not in context.text
    assert "as of chapter 20" in context.text


async def test_a_small_card_share_leaves_the_rest_to_passages(backend):
    store = await build(backend, ZH)
    roomy = await awriter_context(store, ZH.scene, budget=2000, k=2, depth=0)
    none = await awriter_context(store, ZH.scene, budget=2000, k=2, depth=0, card_share=0)
    assert len(roomy.cards) == 4
    assert none.cards == []
    assert [hit.node.id for hit in none.hits] == ["book#0", "book#1"]
    assert "## Cards" not in none.text
    assert none.text.startswith("[1] book · chapter 27 · book#0 (similar to the scene)")


def test_a_card_reached_over_its_own_tag_is_not_said_to_come_via_itself():
    """A card the search reached from a passage naming it was cited `(via card 花果山)`."""
    place = card_from_mapping(card("花果山", ["水帘洞"]), "cards/花果山.md")
    node = card_node(place, card_mentions([place]))
    reached = Hit(node, similarity=0.3, via=place.tag, path=(place.tag,), depth=1)
    similar = Hit(node, similarity=0.6)
    assert [c.provenance for c in scene_cards([place], "群猴", [reached])] == [
        "named in a passage found"
    ]
    assert [c.provenance for c in scene_cards([place], "群猴", [similar])] == [
        "similar to the scene"
    ]


def test_a_citation_gives_the_section_path_or_else_the_chapter():
    """A passage under `# Chapter 3` / `## At the harbour` was cited `At the harbour`, which
    does not say the chapter; one an agent stored with chapter 28 and no headings was cited
    with no chapter at all."""

    def cited(node_id: str, metadata: dict) -> str:
        return citation(Hit(Node(node_id, "text", metadata), 0.0))

    path = {"source": "book.md", "section": ["Chapter 3", "At the harbour"], "chapter": 3}
    assert cited("book.md#1", path) == "book.md · Chapter 3 › At the harbour · book.md#1"
    assert (
        cited("draft#a", {"source": "draft.md", "chapter": 28}) == "draft.md · chapter 28 · draft#a"
    )
    assert cited("x#0", {"source": "x.md", "chapter": True}) == "x.md · x#0"


async def test_a_control_character_in_a_file_name_is_quoted_in_the_prompt():
    """A file name's escape sequence (one that clears the screen) reached the terminal raw
    in `graphstore prompt`'s citation line, while `search` quoted it."""
    from graphstore.embedded import EmbeddedStorage

    store = GraphStore(KeyedEmbeddings(), EmbeddedStorage(":memory:"))
    name = "n\x1b[2Jame.md"
    await store.aadd_nodes([Node(f"{name}#0", "About oranges.", {"source": name})])
    context = (await awriter_context(store, "oranges")).text
    assert "\x1b" not in context
    assert '"n\\u001b[2Jame.md" · "n\\u001b[2Jame.md#0"' in context
    await store.aclose()
