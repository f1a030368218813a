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
        ("廿", 20),
        ("廿三", 23),
        ("卅一", 31),
        ("一百廿三", 123),
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
        # Words past ninety-nine were read up to the first one: One Hundred was 1.
        ("Chapter One Hundred", 100),
        ("Chapter One Hundred and Five: The End", 105),
        ("Chapter Two Thousand and Twenty-Four", 2024),
        ("Chapter One The Storm", 1),
        ("Chapter Ones", None),
        # Emphasis, a character reference and full-width forms hid the number.
        ("**Chapter 2**", 2),
        ("`Chapter 7`", 7),
        ("Chapter&nbsp;6", 6),
        ("第１２章 秘密", 12),
        ("Ｃｈａｐｔｅｒ ３", 3),
        # A volume holds chapters, a section is part of one: neither starts a chapter.
        ("第一卷 出山", None),
        ("第一节 大会", None),
        # A volume's name before the chapter's on one line: the chapter's number counts.
        ("第一卷 初入江湖 第一章 出发", 1),
        ("第二部 风云 第十二回", 12),
        ("Book Two, Chapter 3: The Storm", 3),
        ("Part II Chapter 4", 4),
        ("Part of Chapter 3", None),
        ("Chapter Eleven Hundred", 1100),
        # An ordinal was read up to its hyphen: Twenty-First was chapter 20.
        ("Chapter Twenty-First", None),
        ("Chapter Twenty-Onesie", None),
        ("Chapter 21-A", 21),
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


def test_chinese_headings_followed_by_a_bracket_quote_or_full_stop_start_chapters():
    """Web novels title chapters `第一章《开端》` or `第二章「重逢」`: these were text, so every
    passage before `第四章：终` was read as chapter 4's front matter."""
    text = (
        "第一章《开端》\n少年离开了家乡。\n\n第二章「重逢」\n少年与师父重逢。\n\n"
        "第三章。决战\n少年击败了魔王。\n\n第四章【终】\n尾声。\n\n第五章～\n完。\n"
    )
    nodes = [to_node(passage, set()) for passage in split_text("s.txt", text, 40)]
    assert [node.metadata["chapter"] for node in nodes] == [1, 2, 3, 4, 5]
    assert [node.text.split("\n")[0] for node in nodes] == [
        "第一章《开端》",
        "第二章「重逢」",
        "第三章。决战",
        "第四章【终】",
        "第五章～",
    ]


def test_markdown_passages_take_the_innermost_chapter_heading():
    text = "# Book\nintro\n\n## Chapter 1\nbody\n\n### A scene\nmore\n"
    passages = split_markdown("book.md", text, 1000)
    assert [p.chapter for p in passages] == [0, 1, 1]


def test_a_section_in_a_chapter_of_a_volume_is_in_that_chapter():
    """第一节 (a section), the innermost numbered heading, gave its number as the chapter:
    林小雨 became 掌门 in chapter 3 but was stored as chapter 1, in every prompt as of 1."""
    text = (
        "# 第一卷\n\n## 第一章 下山\n\n林小雨下山了。\n\n## 第三章 掌门\n\n"
        "### 第一节 大会\n\n林小雨被推举为掌门。\n\n# 第二卷\n\n卷首语。\n\n## 第四章\n\n归来。\n"
    )
    passages = split_markdown("book.md", text, 40)
    assert [(p.chapter, p.text) for p in passages] == [
        (1, "# 第一卷\n\n## 第一章 下山\n\n林小雨下山了。"),  # a heading alone opens the next
        (3, "## 第三章 掌门\n\n### 第一节 大会\n\n林小雨被推举为掌门。"),
        (3, "# 第二卷\n\n卷首语。"),  # a volume's introduction: after chapter 3
        (4, "## 第四章\n\n归来。"),
    ]
    text = "第一章 下山\n\n林小雨下山了。\n\n第一节 大会\n\n推举。\n"
    assert [p.chapter for p in split_text("book.txt", text, 1000)] == [1]


def test_full_width_chapter_numbers_start_a_chapter():
    """`第１２章` was no heading: its secret was merged into chapter 1 in plain text and was
    chapter 0 (a prologue, in every chapter's past) in Markdown."""
    text = "第1章 开始\n\n林小雨来到长安。\n\n第１２章 秘密\n\n苏白云其实是朝廷的密探。\n"
    assert [p.chapter for p in split_text("book.txt", text, 1000)] == [1, 12]
    text = "# 第１２章 秘密\n\n苏白云是密探。\n\n# 第13章\n\n后来。\n"
    assert [p.chapter for p in split_markdown("book.md", text, 1000)] == [12, 13]


def test_setext_and_emphasized_headings_start_chapters():
    """A setext heading (`Chapter 1` over `===`) was no heading and `# **Chapter 2**` had
    no number: their passages had no chapter, so no search as of a chapter found them."""
    text = "Chapter 1\n=========\n\nMara reached the harbor.\n"
    passages = split_markdown("c1.md", text, 1000)
    assert [(p.chapter, p.section) for p in passages] == [(1, ("Chapter 1",))]
    text = "# **Chapter 2**\n\nTobias lit the lighthouse.\n\nA scene\n---\n\nmore\n"
    passages = split_markdown("c2.md", text, 1000)
    assert [(p.chapter, p.section) for p in passages] == [
        (2, ("Chapter 2",)),  # the path reads without the marks
        (2, ("Chapter 2", "A scene")),  # level 2, under the level-1 heading
    ]
    text = "Intro.\n\n---\nChapter 1\n---\n\nThe storm.\n\n* * *\nChapter 2\n=========\n\nCalm.\n"
    passages = split_markdown("c1.md", text, 1000)  # a scene break before a title
    assert [(p.chapter, p.section) for p in passages] == [
        (0, ()),
        (1, ("Chapter 1",)),
        (2, ("Chapter 2",)),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "Intro.\n\n---\n\nAfter a break.\n",  # a thematic break
        "- a list item\n---\n",
        "> a quote\nlazily continued\n---\n",
        "    indented code\n---\n",
        "```\nfenced\n```\n---\n",
        "Intro:\n- a\n- b\n---\n",  # a list interrupts the paragraph
        "Intro:\n> a quote\n---\n",
        # A paragraph of several lines, or a line too long to be a title, then a scene break:
        # a novel converted from plain text, one paragraph a line, made a heading of each
        # whole chapter (and splitting it took time quadratic in its length).
        "她走了。\n他来了。\n---\n",
        "她走了。" * 100 + "\n---\n",
    ],
)
def test_an_underline_under_no_paragraph_makes_no_heading(text):
    assert [p.section for p in split_markdown("a.md", text, 10_000)] == [()]


def test_a_file_that_starts_with_a_rule_has_no_front_matter():
    """A first line `---` made everything up to the next `---` front matter, headings
    included: chapter 1's text was in chapter 2."""
    text = "---\n\n# Chapter 1\n\nShe left.\n\n---\n\n# Chapter 2\n\nShe came back.\n"
    passages = split_markdown("s.md", text, 1000)
    assert [(p.chapter, p.section) for p in passages] == [
        (1, ("Chapter 1",)),  # the opening rule opens chapter 1's passage
        (2, ("Chapter 2",)),
    ]
    assert "She left." in passages[0].text


def test_an_unnumbered_heading_after_a_chapter_stays_in_it():
    """`# Epilogue` after `# Chapter 3` had no chapter in Markdown (no search as of a
    chapter found it) while the same text in a `.txt` file stayed in chapter 3."""
    text = "# Chapter 3\n\nThe storm broke.\n\n# Epilogue\n\nYears later Mara returned.\n"
    assert [p.chapter for p in split_markdown("c3.md", text, 1000)] == [3, 3]
    text = "Chapter 3\n\nThe storm broke.\n\nEpilogue\n\nYears later Mara returned.\n"
    assert [p.chapter for p in split_text("c3.txt", text, 1000)] == [3]


def test_what_precedes_a_later_chapter_heading_is_in_that_chapter():
    """A chapter file's front matter or epigraph was chapter 0, a prologue in every
    chapter's past: chapter 5's summary ("Tobias betrays Mara") was in the prompt as of
    chapter 1.  Before chapter 1 it is still the book's prologue, chapter 0."""
    text = "---\nsummary: Tobias betrays Mara.\n---\n\n# Chapter 5\n\nRain fell.\n"
    passages = split_markdown("c5.md", text, 1000)
    assert [(p.chapter, p.section) for p in passages] == [(5, ("Chapter 5",))]  # one passage
    text = "*For my mother.*\n\nChapter 5\n\nRain fell.\n"
    assert [p.chapter for p in split_text("c5.txt", text, 1000)] == [5, 5]
    text = "*For my mother.*\n\n# Chapter 1\n\nRain fell.\n"
    assert [p.chapter for p in split_markdown("c1.md", text, 1000)] == [0, 1]


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
