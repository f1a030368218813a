"""Entity cards: parsing, validation with one-line errors, rendering as of a chapter."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from graphstore.card_files import parse_markdown_card, parse_yaml_cards, read_cards
from graphstore.card_store import aingest_with_cards
from graphstore.cards import (
    Card,
    Fact,
    card_from_mapping,
    card_from_node,
    card_mentions,
    card_node,
    check_names,
    render_card,
)
from graphstore.embedded import EmbeddedStorage
from graphstore.errors import InvalidInputError
from graphstore.links import Link
from graphstore.store import GraphStore
from graphstore.testing.embeddings import KeyedEmbeddings

SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "xiyouji" / "cards"

WUKONG = """---
name: 孙悟空
kind: character
aliases: [悟空, 行者, 大圣, 孙悟空]
attributes:
  称号:
    - {value: 美猴王, chapter: 1}
    - {value: 齐天大圣, chapter: 4}
  兵器: {value: 如意金箍棒, chapter: 3}
  出身: 花果山仙石
  处境:
    - {value: 保唐僧西天取经, chapter: 14}
    - {value: 被贬回花果山, chapter: 27}
---
石猴，性急好胜。
"""


def test_markdown_card_fields_and_body():
    card = parse_markdown_card(WUKONG, "cards/孙悟空.md")
    assert card.name == "孙悟空"
    assert card.kind == "character"
    assert card.aliases == ("悟空", "行者", "大圣")  # its own name is not an alias
    assert card.description == "石猴，性急好胜。"
    assert card.source == "cards/孙悟空.md"
    assert card.id == "card:孙悟空"
    assert dict(card.attributes)["称号"] == (Fact("美猴王", 1), Fact("齐天大圣", 4))
    assert dict(card.attributes)["出身"] == (Fact("花果山仙石"),)


@pytest.mark.parametrize(
    ("chapter", "shown", "hidden"),
    [
        (1, ["称号: 美猴王", "出身: 花果山仙石"], ["齐天大圣", "金箍棒", "处境"]),
        (3, ["称号: 美猴王", "兵器: 如意金箍棒"], ["齐天大圣", "处境"]),
        (26, ["称号: 齐天大圣", "处境: 保唐僧西天取经"], ["被贬回花果山"]),
        (27, ["处境: 被贬回花果山"], ["保唐僧西天取经", "美猴王"]),
        (None, ["称号: 齐天大圣", "处境: 被贬回花果山", "出身: 花果山仙石"], ["美猴王"]),
    ],
)
def test_rendering_as_of_a_chapter_shows_the_latest_value_that_holds(chapter, shown, hidden):
    text = render_card(parse_markdown_card(WUKONG, "w.md"), chapter)
    assert text.startswith("孙悟空 (character; also 悟空、行者、大圣)\n")
    assert text.endswith("石猴，性急好胜。")
    for part in shown:
        assert part in text
    for part in hidden:
        assert part not in text


def test_dated_values_may_come_in_any_order_and_lists_are_one_value():
    card = card_from_mapping(
        {
            "name": "Tripitaka",
            "attributes": {
                "disciples": [
                    {"value": ["Wukong", "Bajie", "Wujing"], "chapter": 22},
                    {"value": ["Wukong"], "chapter": 14},
                ]
            },
        }
    )
    assert render_card(card, 20) == "Tripitaka\ndisciples: Wukong"
    assert render_card(card, 22) == "Tripitaka\ndisciples: Wukong, Bajie, Wujing"
    assert render_card(card, 5) == "Tripitaka"


def test_true_and_false_show_as_the_card_writes_them():
    """They showed as Python's True and False."""
    card = card_from_mapping(
        {"name": "Bob", "attributes": {"alive": True, "wed": [{"value": False, "chapter": 2}]}}
    )
    assert render_card(card, 3) == "Bob\nalive: true\nwed: false"
    listed = card_from_mapping({"name": "Bob", "attributes": {"flags": [True, "x"]}})
    assert render_card(listed) == "Bob\nflags: true, x"


def test_a_name_over_two_lines_is_one_name_on_one_line():
    """`name: "Bob\\nSmith"` was kept with its line break, so a prompt printed the card's
    name over two lines (the scene "Bob Smith" named it all the same)."""
    text = 'name: "Bob\\nSmith"\naliases: ["B\\tS"]\nattributes: {"a\\n b": 1}\n'
    (card,) = parse_yaml_cards(text, "x.yaml")
    assert card.name == "Bob Smith"
    assert card.aliases == ("B S",)
    assert [name for name, _ in card.attributes] == ["a b"]


def test_yaml_file_may_hold_one_card_or_a_list():
    one = parse_yaml_cards("name: 白骨精\naliases: 尸魔\n", "白骨精.yaml")
    assert [(c.name, c.aliases) for c in one] == [("白骨精", ("尸魔",))]
    many = parse_yaml_cards("- name: 沙僧\n- name: 八戒\n  kind: character\n", "all.yaml")
    assert [(c.name, c.kind, c.source) for c in many] == [
        ("沙僧", "", "all.yaml"),
        ("八戒", "character", "all.yaml"),
    ]


def test_a_yaml_file_may_end_with_three_dashes_or_hold_documents_separated_by_them():
    """`name: 林小雨 … ---`, as many writers end YAML, was "not valid YAML at line 6: but
    found another document"."""
    (ended,) = parse_yaml_cards("---\nname: 林小雨\nkind: character\n---\n", "lin.yaml")
    assert (ended.name, ended.kind) == ("林小雨", "character")
    documents = "name: 沙僧\n---\n- name: 八戒\n- name: 唐僧\n---\n"
    assert [c.name for c in parse_yaml_cards(documents, "all.yaml")] == ["沙僧", "八戒", "唐僧"]
    with pytest.raises(InvalidInputError, match=r"^all\.yaml\[1\]: "):  # named by its place
        parse_yaml_cards("name: 沙僧\n---\nkind: character\n", "all.yaml")


def test_the_shipped_xiyouji_cards_parse():
    cards, skipped, *_ = read_cards(SAMPLES, lambda path: path.name)
    assert skipped == []
    names = {card.name: card for card in cards}
    assert set(names) == {"孙悟空", "唐僧", "猪八戒", "沙僧", "白骨精", "花果山"}
    assert {"行者", "悟空", "大圣"} <= set(names["孙悟空"].aliases)
    assert "尸魔" in names["白骨精"].aliases
    assert "被唐僧写下贬书逐回花果山" not in render_card(names["孙悟空"], 26)
    assert "被唐僧写下贬书逐回花果山" in render_card(names["孙悟空"], 27)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\nalias: [y]\n", "unknown card field 'alias'"),
        ("kind: character\n", "name must be non-empty text"),
        ("name: '  '\n", "name must be non-empty text"),
        ("name: x\naliases: {a: 1}\n", "aliases must be a list"),
        ("name: x\naliases: ['']\n", "alias must be non-empty text"),
        ("name: x\nkind: [a]\n", "kind must be text"),
        ("name: x\nattributes: [a]\n", "attributes must be a mapping"),
        ("name: x\nattributes: {w: {value: a, chapter: -1}}\n", "chapter must be an integer"),
        ("name: x\nattributes: {w: {value: a, chapter: 三}}\n", "chapter must be an integer"),
        ("name: x\nattributes: {w: {value: a, chapter: true}}\n", "chapter must be an integer"),
        (
            "name: x\nattributes: {w: [{value: a, chapter: 3}, {value: b, chapter: 3}]}\n",
            "attribute w has two values for chapter 3",
        ),
        (
            "name: x\nattributes: {w: [{value: a}, {value: b}]}\n",
            "attribute w has two values without a chapter",
        ),
        ("name: x\nattributes: {w: {value: a, since: 3}}\n", "each dated value is"),
        ("name: x\nattributes: {w: {chapter: 3}}\n", "each dated value is"),
        ("name: x\nattributes: {w: ''}\n", "attribute w must be text, a number"),
        # It said "not None" of a value that is the empty list.
        ("name: x\nattributes: {w: []}\n", "attribute w is an empty list: give a value, or"),
        ("name: x\nattributes: {w: {value: [], chapter: 5}}\n", "attribute w is an empty list"),
        (
            "name: x\nattributes: {w: 2020-01-01}\n",
            "attribute w must be text, a number, true/false or a list of them, not the date "
            "2020-01-01 (in YAML, quote it to keep it text)",
        ),
        ("name: x\naliases: [No]\n", "alias must be non-empty text, not False (in YAML, quote"),
        # A false value was taken for a missing field: `kind: no` became no kind.
        ("name: x\nkind: no\n", "kind must be text, not False (in YAML, quote"),
        ("name: x\ndescription: 0\n", "description must be text, not 0 (in YAML, quote"),
        ("name: x\naliases: off\n", "aliases must be a list"),
        ("name: x\nattributes: {w: .nan}\n", "attribute w must be text, a number"),
        ("name: [x\n", "not valid YAML at line"),
        ("- name: a\n- nom: b\n", "bad.yaml[1]: unknown card field 'nom'"),
        ("just text\n", "a card is a mapping"),
        # PyYAML kept the last of two equal keys: the chapter-1 value was lost unsaid.
        (
            "name: x\nattributes:\n  home: {value: a, chapter: 1}\n  home: {value: b, chapter: 5}\n",
            "not valid YAML at line 4: the key 'home' is given twice",
        ),
        ("name: Cy\nname: Dy\n", "not valid YAML at line 2: the key 'name' is given twice"),
        # One alias no text names, shown exactly like two.
        ("name: 孙悟空\naliases: 悟空, 行者\n", "alias '悟空, 行者' holds the list separator ','"),
        (
            "name: 孙悟空\naliases: [悟空，行者]\n",
            "alias '悟空，行者' holds the list separator '，'",
        ),
        (
            "name: 孙悟空\naliases: [悟空、行者]\n",
            "alias '悟空、行者' holds the list separator '、'",
        ),
        # A lone surrogate was refused only when the card was written, after the ingest had
        # stored the text, in a message naming no file.
        ('name: "\\ud800"\n', "name contains '\\ud800' at position 0, a lone surrogate"),
        ('name: x\naliases: ["\\ud800"]\n', "alias contains '\\ud800' at position 0"),
        ('name: x\nkind: "\\ud800"\n', "kind contains '\\ud800' at position 0"),
        ('name: x\ndescription: "a\\udcff"\n', "description contains '\\udcff' at position 1"),
        ('name: x\nattributes: {w: "\\ud800"}\n', "attribute w contains '\\ud800'"),
        ('name: x\nattributes: {"\\ud800": a}\n', "attribute name contains '\\ud800'"),
    ],
)
def test_bad_yaml_cards_get_one_line_errors_naming_the_file(text, message):
    with pytest.raises(InvalidInputError) as error:
        parse_yaml_cards(text, "bad.yaml")
    assert message in str(error.value)
    assert str(error.value).startswith("bad.yaml")
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\n", "starts with a front matter line ---"),
        ("---\nname: x\n", "the front matter has no closing --- line"),
        (
            "---\nname: x\ndescription: a\n---\nbody\n",
            "a description in the front matter and a body",
        ),
        ("---\n---\nbody\n", "a card is a mapping"),
    ],
)
def test_bad_markdown_cards_get_one_line_errors(text, message):
    with pytest.raises(InvalidInputError, match=message):
        parse_markdown_card(text, "bad.md")


def test_aliases_are_one_name_each_and_listed_once_however_spelt():
    card = card_from_mapping(
        {"name": "Smuggler King", "aliases": ["Smuggler King", "smuggler king", "Rook", "rook"]}
    )
    assert card.aliases == ("Rook",)
    assert card_from_mapping({"name": "x", "aliases": ["Smith, John"]}).aliases == ("Smith, John",)
    assert card_from_mapping({"name": "x", "aliases": "行者"}).aliases == ("行者",)


def test_an_alias_earned_in_a_later_chapter_shows_from_that_chapter_and_always_links():
    """Aliases had no chapter, so a name earned later (齐天大圣, chapter 4) headed the card
    in a chapter-1 prompt, or, kept out of the aliases, linked no passage naming it."""
    card = parse_markdown_card(
        "---\nname: 孙悟空\naliases: [悟空, {name: 齐天大圣, chapter: 4}, {name: 行者}]\n---\n",
        "w.md",
    )
    assert card.aliases == ("悟空", "齐天大圣", "行者")
    assert card.alias_chapters == (("齐天大圣", 4),)
    assert render_card(card, 3) == "孙悟空 (also 悟空、行者)"
    assert render_card(card, 4) == render_card(card) == "孙悟空 (also 悟空、齐天大圣、行者)"
    mentions = card_mentions([card])
    assert mentions is not None
    node = card_node(card, mentions)
    assert node.text == "孙悟空 (also 悟空、齐天大圣 (chapter 4)、行者)"
    assert card_from_node(node) == card
    links = mentions.extract_one("齐天大圣大闹天宫")
    assert links == {Link.outgoing("card", "孙悟空")}
    for entry, message in [
        ("{name: 大圣, when: 4}", "w.md: a dated alias is {name: …, chapter: N}"),
        ("{chapter: 4}", "w.md: a dated alias is {name: …, chapter: N}"),
        ("{name: 大圣, chapter: -1}", "w.md: alias '大圣': chapter must be"),
    ]:
        with pytest.raises(InvalidInputError, match="^" + re.escape(message)):
            parse_markdown_card(f"---\nname: 孙悟空\naliases: [{entry}]\n---\n", "w.md")


def test_a_stored_card_is_read_by_the_rules_of_its_write():
    """An alias holding a list separator, stored before such aliases were refused, made every
    scene context and `get_card` of the store fail after the upgrade."""
    card = Card("孙悟空", aliases=("行者、悟空",))
    mentions = card_mentions([card])
    assert mentions is not None
    assert card_from_node(card_node(card, mentions)) == card


def test_a_typographic_apostrophe_names_the_same_card():
    """Manuscripts write O’Brien; the card file O'Brien.  NFKC keeps the two apart, so the
    card was never linked nor found for a scene."""
    mentions = card_mentions([Card("O'Brien")])
    assert mentions is not None
    assert mentions.extract_one("O’Brien lit the lamp.") == {Link.outgoing("card", "o'brien")}
    assert Card("O’Brien").id == Card("O'Brien").id == "card:o'brien"


def test_a_markdown_card_error_gives_the_line_of_the_file():
    with pytest.raises(InvalidInputError, match="at line 4: the key 'name' is given twice"):
        parse_markdown_card("---\nname: A\nkind: x\nname: B\n---\n", "a.md")


def test_a_key_merged_into_a_mapping_may_still_be_overridden():
    (card,) = parse_yaml_cards(
        "name: x\nattributes:\n  <<: {home: a, age: 3}\n  home: b\n", "m.yaml"
    )
    assert dict(card.attributes) == {"home": (Fact("b"),), "age": (Fact(3),)}


def test_two_cards_may_not_share_a_name_or_an_alias():
    monkey = Card("孙悟空", aliases=("行者",), source="a.md")
    assert check_names([monkey, Card("唐僧", aliases=("三藏",))]) == [
        monkey,
        Card("唐僧", aliases=("三藏",)),
    ]
    with pytest.raises(
        InvalidInputError, match=re.escape("b.md: '武松' has the alias '行者', which already names")
    ):
        check_names([monkey, Card("武松", aliases=("行者",), source="b.md")])
    with pytest.raises(InvalidInputError, match="'Sun Wukong' already names"):
        check_names([Card("sun wukong"), Card("Sun Wukong", source="c.md")])
    agents = re.escape("cards/calvin.md: 'Calvin' has the alias 'Cal', which already names 'Cal'")
    with pytest.raises(InvalidInputError, match=agents):
        check_names([Card("Cal"), Card("Calvin", aliases=("Cal",), source="cards/calvin.md")])


async def test_two_card_files_declaring_the_same_name_are_named_and_nothing_is_written(tmp_path):
    """The very same name in two files used to pass `check_names` and fail at the write
    with "node id 'card:x' appears twice in one batch", naming neither file."""
    cards = tmp_path / "bc"
    cards.mkdir()
    (cards / "a.yaml").write_text("name: X\n")
    (cards / "b.yaml").write_text("name: X\n")
    (tmp_path / "story.txt").write_text("X went home.\n")
    store = GraphStore(KeyedEmbeddings(), EmbeddedStorage(tmp_path / "s.db"))
    with pytest.raises(InvalidInputError) as error:
        await aingest_with_cards(store, [tmp_path / "story.txt"], cards, linkers=[], root=tmp_path)
    assert str(error.value) == "bc/b.yaml: 'X' already names 'X' (bc/a.yaml)"
    assert await store.anode_ids() == []
    await store.aclose()
    (cards / "b.yaml").write_text("- name: Y\n- name: Y\n")  # twice in one file
    with pytest.raises(InvalidInputError, match=re.escape("b.yaml: 'Y' already names 'Y'")):
        read_cards(cards, lambda path: path.name)
    (cards / "b.yaml").write_text("- name: 李雷\n- name: 雷\n  aliases: [李雷]\n")
    with pytest.raises(InvalidInputError) as error:  # the second card was not named
        read_cards(cards, lambda path: path.name)
    assert (
        str(error.value) == "b.yaml: '雷' has the alias '李雷', which already names '李雷' (b.yaml)"
    )


def test_a_folder_with_one_bad_card_is_refused_whole(tmp_path):
    (tmp_path / "good.md").write_text("---\nname: 唐僧\n---\n", encoding="utf-8")
    (tmp_path / "bad.yaml").write_text("name: 八戒\nattributes: {w: {value: a, chapter: x}}\n")
    with pytest.raises(InvalidInputError, match=re.escape("bad.yaml: attribute w: chapter")):
        read_cards(tmp_path, lambda path: path.name)
    with pytest.raises(InvalidInputError, match=re.escape("good.md is not a folder of cards")):
        read_cards(tmp_path / "good.md", lambda path: path.name)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert read_cards(empty, lambda path: path.name).cards == []  # refused by the ingest
    assert read_cards(tmp_path / "gone", lambda path: path.name).cards == []


def test_card_passage_defines_its_tag_and_links_out_to_the_cards_it_names():
    monkey = parse_markdown_card(WUKONG, "w.md")
    monk = card_from_mapping(
        {"name": "唐僧", "attributes": {"徒弟": {"value": "悟空", "chapter": 14}}}
    )
    mentions = card_mentions([monkey, monk])
    assert mentions is not None
    node = card_node(monk, mentions)
    assert node.id == "card:唐僧"
    assert node.links == {Link.incoming("card", "唐僧"), Link.outgoing("card", "孙悟空")}
    assert node.metadata["kind"] == "card"
    assert "chapter" not in node.metadata  # a card is of every chapter
    assert "徒弟: 悟空 (chapter 14)" in node.text
    assert card_from_node(node) == monk
    assert card_from_node(card_node(monkey, mentions)) == monkey
    # A passage naming an alias links out to the card's tag.
    assert mentions.extract_one("行者与师父来到白虎岭") == {Link.outgoing("card", "孙悟空")}
    assert card_mentions([]) is None


def test_a_card_name_starting_with_card_colon_is_refused():
    """`card:Mara Vell` was stored as `card:card:mara vell`, and `get_card` by the id that
    search gives for Mara Vell's card returned it instead."""
    with pytest.raises(InvalidInputError, match=r"^a card's name may not start with 'card:'"):
        card_from_mapping({"name": "Card:Mara Vell"})


@pytest.mark.parametrize(
    ("field", "value"),
    [("name", "A\x00B"), ("aliases", ["Bell\x07"]), ("attributes", {"home\x1b": "x"})],
)
def test_a_control_character_in_a_name_is_refused(field, value):
    """`put_card {"name": "A\u0000B"}` stored `card:a\x00b`, a card no text can name and a
    prompt shows raw; a tab or a line break is folded to a space, as before."""
    fields = {"name": "x", field: value}
    with pytest.raises(InvalidInputError, match=r"holds the control character U\+00(00|07|1B)$"):
        card_from_mapping(fields)
    assert card_from_mapping({"name": "Elin\n2", "aliases": ["Lin\tV"]}).id == "card:elin 2"
