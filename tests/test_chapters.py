"""Chapter numbers of headings and passages, and the as-of-chapter filter."""

from __future__ import annotations

import pytest

from graphstore.chapters import as_of_filter, chapter_number, chinese_number
from graphstore.errors import InvalidInputError
from graphstore.ingest import to_node
from graphstore.splitting import split_html, split_markdown, split_text


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("一", 1),
        ("十", 10),
        ("十二", 12),
        ("二十", 20),
        ("二十七", 27),
        ("九十九", 99),
        ("一百", 100),
        ("一百零三", 103),
        ("一百二十", 120),
        ("两百", 200),
        ("一千零五十", 1050),
        ("一〇三", 103),
        ("27", 27),
        ("二x", None),
        ("", None),
    ],
)
def test_chinese_numbers(text, value):
    assert chinese_number(text) == value


@pytest.mark.parametrize(
    ("heading", "number"),
    [
        ("第二十七回 尸魔三戏唐三藏 圣僧恨逐美猴王", 27),
        ("第一百回 径回东土 五圣成真", 100),
        ("第三章 开端", 3),
        ("第12回", 12),
        ("Chapter 12", 12),
        ("CHAPTER 3: The Storm", 3),
        ("Chapter Twelve", 12),
        ("Chapter Twenty-One: The Return", 21),
        ("CHAPTER XIV.", 14),
        ("chapter mix", None),  # a Roman numeral only in capitals: too many words read as one
        ("Chapter Foo", None),
        ("第二章：重逢", 2),
        ("Introduction", None),
        ("他说第二十七回很精彩", None),
    ],
)
def test_chapter_number_of_a_heading(heading, number):
    assert chapter_number(heading) == number


def test_text_passages_carry_their_chapter_number_as_metadata():
    text = "序\n\n第一回 灵根育孕\n\n石猴出世。\n\n第二十七回 尸魔三戏唐三藏\n\n白骨精。\n"
    nodes = [to_node(passage, set()) for passage in split_text("西游记.txt", text, 1000)]
    assert [node.metadata.get("chapter") for node in nodes] == [0, 1, 27]  # 序: a prologue
    assert isinstance(nodes[2].metadata["chapter"], int)
    assert nodes[2].metadata["section"] == ["第二十七回 尸魔三戏唐三藏"]


def test_chapter_headings_followed_by_punctuation_or_in_words_start_chapters():
    """`第二章：重逢`, `Chapter 2: The Storm` and `Chapter 3.` were read as text of the
    chapter before (the heading had to end in a space), and `Chapter Two` as a heading with
    no number, so its passages fell out of every search as of a chapter."""
    text = (
        "第一章 开始\n\n甲出场。\n\n第二章：重逢\n\n乙来了。\n\n第一回合，悟空先出手。\n\n"
        "Chapter 3.\n\nAnna met Bo.\n\nChapter Four: The Storm\n\nThe storm came.\n\n"
        "CHAPTER V\n\nThe end.\n"
    )
    nodes = [to_node(passage, set()) for passage in split_text("s.txt", text, 40)]
    assert [(node.metadata["chapter"], node.text) for node in nodes] == [
        (1, "第一章 开始\n\n甲出场。"),
        (2, "第二章：重逢\n\n乙来了。\n\n第一回合，悟空先出手。"),  # prose, though it starts as one
        (3, "Chapter 3.\n\nAnna met Bo."),
        (4, "Chapter Four: The Storm\n\nThe storm came."),
        (5, "CHAPTER V\n\nThe end."),
    ]


def test_markdown_passages_take_the_innermost_chapter_heading():
    text = "# Book\nintro\n\n## Chapter 2\nbody\n\n### A scene\nmore\n"
    passages = split_markdown("book.md", text, 1000)
    assert [p.chapter for p in passages] == [0, 2, 2]


def test_a_prologue_is_chapter_0_and_a_text_without_chapters_has_none():
    """Passages before the first chapter heading had no chapter, so a search as of any
    chapter left the prologue (a 楔子, front matter) out."""
    text = "楔子 张天师祈禳瘟疫\n\n洪太尉误走妖魔。\n\n第一回 王教头私走延安府\n\n史进。\n"
    assert [p.chapter for p in split_text("水浒传.txt", text, 1000)] == [0, 1]
    html = "<h1>Preface</h1><p>Why.</p><h1>Chapter 1</h1><p>Start.</p>"
    assert [p.chapter for p in split_html("book.html", html, 1000)] == [0, 1]
    assert [p.chapter for p in split_text("notes.txt", "a\n\nb\n", 1)] == [None, None]


def test_as_of_filter_combines_with_the_user_filter_by_and():
    assert as_of_filter(None, None) is None
    assert as_of_filter({"book": "西游记"}, None) == {"book": "西游记"}
    assert as_of_filter(None, 27) == {"chapter": {"$lte": 27}}
    assert as_of_filter({}, 0) == {"chapter": {"$lte": 0}}
    assert as_of_filter({"book": "西游记"}, 27) == {
        "$and": [{"book": "西游记"}, {"chapter": {"$lte": 27}}]
    }


@pytest.mark.parametrize("bad", [-1, True, "27", 2.5])
def test_as_of_chapter_must_be_a_non_negative_integer(bad):
    with pytest.raises(InvalidInputError, match="as_of_chapter must be an integer"):
        as_of_filter(None, bad)
