"""Splitting files into passages that know their section path."""

from __future__ import annotations

import pytest

from graphstore.errors import InvalidInputError
from graphstore.markdown import MarkdownMarkup
from graphstore.splitting import pack, split_file, split_html, split_markdown, split_text


def test_markdown_sections_ignore_headings_in_code_fences():
    text = "# Book\nintro\n\n## Chapter 1\nbody one\n```\n# not a heading\n```\n## Chapter 2\nbody two\n"
    passages = split_markdown("book.md", text, 1000)
    assert [p.section for p in passages] == [
        ("Book",),
        ("Book", "Chapter 1"),
        ("Book", "Chapter 2"),
    ]
    assert "# not a heading" in passages[1].text
    assert [p.id for p in passages] == ["book.md#0", "book.md#1", "book.md#2"]


def test_a_heading_indented_up_to_three_spaces_is_a_heading_four_are_code():
    """CommonMark allows three spaces before `#`: such a heading was body text of the
    section before it, so its passages had the wrong section path."""
    text = "# Book\nintro\n\n   ## Chapter 1\nbody one\n\n    # code, not a heading\n"
    passages = split_markdown("book.md", text, 1000)
    assert [p.section for p in passages] == [("Book",), ("Book", "Chapter 1")]
    assert "    # code, not a heading" in passages[1].text


def test_html_passages_keep_their_markup_and_heading_path():
    html = "<main><h1>Title¶</h1><p>one <a href='b.html'>b</a></p><h2>Sub</h2><ul><li><p>two</p></li></ul></main>"
    passages = split_html("a.html", html, 1000)
    assert [(p.section, p.text) for p in passages] == [
        (("Title",), "Title\n\none b"),
        (("Title", "Sub"), "Sub\n\ntwo"),
    ]
    assert "b.html" in (passages[0].markup or "")


def test_long_text_is_packed_under_the_limit_at_sentence_ends_including_chinese():
    text = "孙悟空大闹天宫。" * 40 + " Then he left. " * 10
    chunks = pack([text], 100)
    assert all(len(chunk) <= 100 for chunk in chunks)
    assert chunks[0].endswith("。")
    assert "".join(chunks).replace(" ", "") == text.replace(" ", "").strip()


@pytest.mark.parametrize(
    ("content", "name", "message"),
    [
        (b"\x00\x01binary", "x.txt", "looks binary"),
        ("café".encode("latin-1"), "x.txt", "is not UTF-8"),
        (b"text", "x.pdf", "unsupported file type"),
    ],
)
def test_unreadable_files_give_one_line_errors(tmp_path, content, name, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(InvalidInputError, match=message) as error:
        split_file(path, name)
    assert "\n" not in str(error.value)


def test_missing_file_is_reported(tmp_path):
    with pytest.raises(InvalidInputError, match="cannot read"):
        split_file(tmp_path / "missing.txt", "missing.txt")


def test_plain_text_chapters_become_sections(shared_data):
    path = shared_data / "chinese_novels" / "西游记.txt"
    text = path.read_text(encoding="utf-8").replace("\r\n", "\n")[:60_000]
    from graphstore.splitting import split_text

    passages = split_text("西游记.txt", text, 500)
    chapters = {p.section for p in passages if p.section}
    assert ("第一回 灵根育孕源流出 心性修持大道生",) in chapters
    assert ("第二回 悟彻菩提真妙理 断魔归本合元神",) in chapters
    assert passages[0].section == ()
    assert all(len(p.text) <= 500 for p in passages)
    assert [p.position for p in passages] == list(range(len(passages)))


def test_long_paragraphs_are_cut_at_sentences_as_written():
    """Cut Chinese sentences used to be joined with a space ('有心人。 ”悟空'), and a closing
    quotation mark after 。 began the next sentence, even the next passage."""
    chinese = "祖师道：“世上无难事，只怕有心人。”悟空闻言，满心欢喜。却难！却难！”他说。" * 4
    chunks = pack([chinese], 40)
    assert len(chunks) == 4
    assert "".join(chunks) == chinese
    assert all(chunk.endswith("他说。") for chunk in chunks)
    english = "First sentence here. Second one!  Third?\nFourth line."
    assert pack([english], 25) == ["First sentence here.", "Second one!  Third?", "Fourth line."]


def test_a_dot_inside_a_word_ends_no_sentence():
    """A long paragraph was cut at every `.`, in `3.14`, `example.com` and `plan.md` too,
    and the pieces joined with a space: the stored text read `Python 3. 14`, and the link
    target `plan.md` became `plan.`.  A `.`, `!` or `?` ends a sentence before a space."""
    text = "We use Python 3.14 on example.com daily, see [the plan](plan.md) soon. Done!"
    assert pack([text], 70) == [
        "We use Python 3.14 on example.com daily, see [the plan](plan.md) soon.",
        "Done!",
    ]
    assert pack(["v1.2.3 of x.md... then? more"], 12) == ["v1.2.3 of", "x.md...", "then? more"]


def test_a_cut_paragraph_keeps_its_line_breaks():
    """Cut pieces were joined by a space: a fenced code block longer than a passage lost its
    line breaks, its closing fence ran on after code, and every later passage of the file
    read as code (its links lost)."""
    code = "\n".join(["```sh", *(f"echo step {i} is done." for i in range(30)), "```"])
    chunks = pack([f"Run:\n{code}\nThen [the guide](guide.md)."], 300)
    assert "\n".join(chunks) == f"Run:\n{code}\nThen [the guide](guide.md)."
    assert chunks[-1].endswith("is done.\n```\nThen [the guide](guide.md).")


@pytest.mark.parametrize(
    ("html", "text"),
    [
        ("<div>hello div text</div>", "hello div text"),
        ("plain text with no tags", "plain text with no tags"),
        ("<html><body>body text</body></html>", "body text"),
        ("<article><section>s</section></article>", "s"),
        (
            "<ul><li>Outer kangaroos<ul><li>inner koalas</li></ul></li></ul><p>a</p> loose "
            "wombats <p>b</p><blockquote>Intro emus<p>q</p></blockquote>",
            "Outer kangaroos\n\ninner koalas\n\na\n\nloose wombats\n\nb\n\nIntro emus\n\nq",
        ),
    ],
)
def test_html_text_outside_the_known_blocks_is_kept_in_document_order(html, text):
    """Only headings and innermost p, li, td… blocks used to be read: a div's text, a page
    without tags, a list item's words before its sublist were dropped without a word."""
    assert [p.text for p in split_html("a.html", html, 1000)] == [text]


def test_html_loose_text_keeps_its_links_and_hidden_content_stays_out():
    html = (
        "<html><head><title>Tab title</title><style>p {}</style></head><body><!-- note -->"
        "<script>var x;</script><div>See <a href='b.html'>b</a> and <b>more</b>"
        "<template>unused</template></div><ul><li><h3>Heading</h3>under it</li></ul>"
        "</body></html>"
    )
    passages = split_html("a.html", html, 1000)
    assert [(p.text, p.section) for p in passages] == [
        ("See b and more", ()),
        ("Heading\n\nunder it", ("Heading",)),
    ]
    assert "href='b.html'" in (passages[0].markup or "").replace('"', "'")


def test_html_elements_a_browser_does_not_render_stay_out():
    """`hidden` and an inline `display: none` were ingested as text; `aria-hidden` text is
    on the page (hidden from screen readers only) and stays."""
    html = (
        "<main><h1>T</h1><p>shown</p><p hidden>SECRET one</p>"
        "<div style='color: red; display : none !important'>SECRET <b>two</b></div>"
        "<section hidden><h2>SECRET three</h2><p>under it</p></section>"
        "<p aria-hidden='true'>decorative</p><p style='display: nonesuch'>kept</p></main>"
    )
    passages = split_html("p.html", html, 1000)
    assert [(p.text, p.section) for p in passages] == [("T\n\nshown\n\ndecorative\n\nkept", ("T",))]
    assert "SECRET" not in "".join(p.markup or "" for p in passages)


def test_a_long_line_is_cut_between_words(tmp_path):
    """A line longer than max_chars with no sentence end used to be cut every max_chars
    characters, in the middle of words ('…longline l' | 'ongline …')."""
    path = tmp_path / "long.txt"
    path.write_text("longline " * 20_000)
    passages = split_file(path, "long.txt")
    assert all(len(p.text) <= 1000 for p in passages)
    assert all(set(p.text.split(" ")) == {"longline"} for p in passages)
    assert " ".join(p.text for p in passages) == path.read_text().strip()
    assert pack(["a" * 30 + " " + "b" * 100], 40) == ["a" * 30, "b" * 40, "b" * 40, "b" * 20]
    # Text without spaces is still cut at the limit, and a no-break space is no place to cut.
    chinese = pack(["孙悟空" * 40], 50)
    assert ([len(chunk) for chunk in chinese], "".join(chinese)) == ([50, 50, 20], "孙悟空" * 40)
    assert pack(["10\u00a0km " * 10], 21) == ["10\u00a0km 10\u00a0km 10\u00a0km"] * 3 + [
        "10\u00a0km"
    ]


def test_html_text_is_kept_as_the_page_shows_it():
    """Each string of a block was joined with a space ("See this . Also bold , and f ()"), and
    a `<pre>` block's indentation was collapsed to one space, so code lost its structure."""
    html = (
        '<p>See <a href="x.html">this</a>. Also <b>bold</b>, and <code>f</code>()<br>next</p>'
        "<pre>\ndef f(x):\n    if x:\n        return 1\n</pre><div>loose <i>it</i>, text</div>"
    )
    [passage] = split_html("a.html", html, 1000)
    assert passage.text == (
        "See this. Also bold, and f()\nnext\n\n"
        "def f(x):\n    if x:\n        return 1\n\n"
        "loose it, text"
    )


def test_a_non_breaking_space_reads_as_a_space():
    """Git's user manual heads its chapters `Chapter&nbsp;3.`: the section path kept the
    non-breaking space, so it printed quoted and a filter on it needed one typed."""
    html = "<h2>Chapter&nbsp;3.&nbsp;Developing</h2><p>Commit&nbsp;often,\u2009please.</p>"
    [passage] = split_html("manual.html", html, 1000)
    assert passage.section == ("Chapter 3. Developing",)
    assert passage.text == "Chapter 3. Developing\n\nCommit often, please."
    assert passage.chapter == 3


def test_a_heading_with_no_text_opens_the_next_sections_first_passage():
    """`# Chapter 3` right above `## At the harbour` was a passage of its own: one line that
    a search or a writer prompt spent a place on, and a prompt cited by its heading alone."""
    text = (
        "# Chapter 3\n\n## At the harbour\n\nThe boat came in [early](notes.md).\n\n"
        "## The storm\n\nRain.\n\n# Chapter 4\n"
    )
    passages = split_markdown("book.md", text, 1000)
    assert [(p.section, p.text, p.chapter) for p in passages] == [
        (
            ("Chapter 3", "At the harbour"),
            "# Chapter 3\n\n## At the harbour\n\nThe boat came in [early](notes.md).",
            3,
        ),
        (("Chapter 3", "The storm"), "## The storm\n\nRain.", 3),
        (("Chapter 4",), "# Chapter 4", 4),  # the last heading: nothing follows to open
    ]
    markup = passages[0].markup
    assert isinstance(markup, MarkdownMarkup)
    assert "notes.md" in markup.text
    setext = "Part One\n========\nChapter 1\n---------\nIt began.\n"
    assert [p.text for p in split_markdown("book.md", setext, 1000)] == [setext.rstrip("\n")]


def test_a_scene_break_with_no_text_opens_the_next_sections_first_passage():
    """A file opening with a `---` rule before its first heading stored the rule as a
    passage of its own, and a chapter heading above a `* * *` break kept the break alone."""
    opened = "---\n\n# Chapter 1\n\nIt was dark.\n"
    assert [(p.section, p.text) for p in split_markdown("a.md", opened, 1000)] == [
        (("Chapter 1",), "---\n\n# Chapter 1\n\nIt was dark.")
    ]
    broken = "# Chapter 3\n\n* * *\n\n## Harbour\n\nShips came.\n"
    assert [(p.section, p.text) for p in split_markdown("a.md", broken, 1000)] == [
        (("Chapter 3", "Harbour"), broken.rstrip("\n"))
    ]
    plain = "* * *\n\nChapter 1\n\nIt was dark.\n"
    assert [p.text for p in split_text("a.txt", plain, 1000)] == [plain.rstrip("\n")]
    assert [p.text for p in split_markdown("a.md", "Intro.\n\n---\n", 1000)] == ["Intro.\n\n---"]


def test_a_page_heading_with_no_text_opens_the_next_sections_first_passage():
    html = (
        "<h1>Book</h1><h2>One</h2><p>x <a href='b.html'>b</a></p><h2>Two</h2><p>y</p><h2>End</h2>"
    )
    passages = split_html("a.html", html, 1000)
    assert [(p.section, p.text) for p in passages] == [
        (("Book", "One"), "Book\n\nOne\n\nx b"),
        (("Book", "Two"), "Two\n\ny"),
        (("Book", "End"), "End"),
    ]
    assert "b.html" in (passages[0].markup or "")


def test_a_heading_stays_with_a_first_paragraph_too_long_to_join_whole():
    """A chapter heading above a paragraph of nearly `max_chars` was a passage of its own:
    19 of the 886 passages of the README's 西游记 walkthrough were a bare heading."""
    paragraph = "    却说美猴王荣归故里，" + "自剿了混世魔王。" * 40
    text = f"第三回 四海千山皆拱伏 九幽十类尽除名\n\n{paragraph}\n\n次日。\n"
    passages = split_text("a.txt", text, 300)
    assert passages[0].text.startswith("第三回 四海千山皆拱伏 九幽十类尽除名\n\n    却说美猴王")
    assert all(len(p.text) <= 300 for p in passages)
    assert "".join(p.text for p in passages).replace("\n", "") == text.replace("\n", "")
    markdown = split_markdown("a.md", "# Chapter 3\n\n## Harbour\n\n" + "Word one. " * 40, 100)
    assert markdown[0].text.startswith("# Chapter 3\n\n## Harbour\n\nWord one.")
    html = "<h1>A</h1><h2>B</h2><p>" + "Word one. " * 40 + "<a href='b.html'>b</a></p>"
    page = split_html("a.html", html, 100)
    assert page[0].text.startswith("A\n\nB\n\nWord one.")
    assert "b.html" in (page[0].markup or "")  # the paragraph's markup goes where it starts
    assert all(len(p.text) <= 100 for p in [*markdown, *page])


def test_a_heading_takes_the_first_sentences_that_fit_beside_it():
    """A heading ending like a sentence (`## Who Is She?`) above a first sentence too long
    to join it, or above a long Chinese sentence with no clause mark, was a passage of its
    own: the cut fell after its `?`, or at its line break, the only space."""
    sentence = "The rain came down hard on the roofs of the town and nobody went out that day."
    asked = split_markdown("a.md", f"## Who Is She?\n\n{sentence} Then more.\n", 100)
    assert [p.text for p in asked] == [f"## Who Is She?\n\n{sentence}", "Then more."]
    chinese = "孙悟空驾着筋斗云又惦记着花果山的猴子们" * 8 + "。"
    passages = split_text("a.txt", f"第二回 悟彻菩提真妙理\n\n{chinese}\n", 120)
    assert passages[0].text.startswith("第二回 悟彻菩提真妙理\n\n孙悟空")
    assert all(len(p.text) <= 120 for p in passages)
    assert "".join(p.text for p in passages).replace("\n", "") == (
        "第二回 悟彻菩提真妙理" + chinese
    )


def test_a_scene_break_joins_the_text_after_it_or_before_it_where_it_fits():
    """A break after a full paragraph, a break right under a heading, and `* * *` or
    `- - -` under front matter (cut there as if a list item) each left a passage that was
    only a rule, a heading and a rule, or the front matter alone."""
    full = "We walked down to the harbour in the grey morning and waited for the ferry."
    text = f"# Chapter 1\n\n{full}\n\n---\n\n# Chapter 2\n\nB.\n"
    assert [p.text for p in split_markdown("a.md", text, len(full) + 16)] == [
        f"# Chapter 1\n\n{full}",
        "---\n\n# Chapter 2\n\nB.",  # a closing break opens the next heading's passage
    ]
    assert pack([full, "* * *", full], len(full) + 16) == [full, f"* * *\n\n{full}"]
    assert pack([full, "* * *"], len(full) + 16) == [f"{full}\n\n* * *"]
    under = split_markdown("a.md", f"# Chapter 1\n\n---\n\n{full}\n", len(full) + 16)
    assert under[0].text.startswith(f"# Chapter 1\n\n---\n\n{full[:20]}")
    rain = "The rain came down hard on the roofs of the town and nobody went out. " * 3
    fronted = split_markdown("a.md", f"---\ntitle: x\n---\n\n- - -\n\n# Two\n\n{rain}", 120)
    assert fronted[0].text.startswith("---\ntitle: x\n---\n\n- - -\n\n# Two\n\nThe rain")


def test_a_long_chinese_sentence_is_cut_after_a_clause_mark_not_at_its_heading():
    """A Chinese first sentence longer than the limit has no space but the heading's line
    break: the cut fell there, and the heading was a passage of its own again; a sentence
    without a heading was cut at the limit, in the middle of a name."""
    sentence = "孙悟空" * 30 + "，" + "猪八戒" * 30 + "，" + "沙和尚" * 40 + "。"
    passages = split_text("a.txt", f"第三回 四海千山皆拱伏\n\n{sentence}\n", 300)
    assert [p.text for p in passages] == [
        "第三回 四海千山皆拱伏\n\n" + sentence[:182],
        sentence[182:],
    ]
    assert pack([sentence], 200) == [sentence[:182], sentence[182:]]


def test_a_long_paragraph_cut_between_sentences_keeps_its_first_lines_indent():
    """A paragraph short enough to keep whole kept its indent, a longer one lost it."""
    chunks = pack(["    indented " + "word " * 30], 50)
    assert chunks[0].startswith("    indented word")
    assert all(len(chunk) <= 50 for chunk in chunks)


@pytest.mark.parametrize("key", ["title", "标题", '"pov"'])
def test_front_matter_opens_the_first_passage_and_holds_no_heading(key):
    """Front matter was a passage of its own (search returned `--- type: place ---` first),
    and a first key not in ASCII letters (`标题:`) was not taken for front matter at all:
    its closing `---` underlined the key line into a heading, the section of every passage."""
    text = f"---\n{key}: 重逢\ntags: [draft]\n---\n\n# 第四章 重逢\n\n米拉在灯塔下找到了托马斯。\n"
    passages = split_markdown("a.md", text, 1000)
    assert [(p.section, p.chapter) for p in passages] == [(("第四章 重逢",), 4)]
    assert passages[0].text == text.strip()
    assert [p.section for p in split_markdown("b.md", f"---\n{key}: x\n---\nText.\n", 1000)] == [()]


def test_a_long_table_or_list_is_cut_between_rows_and_items():
    """Cut between sentences only, a table lost a row to two passages (`…| Guard 11 |` and
    `post 11 | cudgel |`), and a list without full stops an item (`- item` and `5: lamp
    oil`), each half read whole by neither passage."""
    table = "| name | post | weapon |\n|---|---|---|\n" + "".join(
        f"| Guard {n} | post {n} | cudgel |\n" for n in range(12)
    )
    items = "".join(f"- item {n}: lamp oil barrel number {n}\n" for n in range(10))
    for text, starts in ((table, "|"), (items, "- item")):
        chunks = pack([text], 200)
        assert len(chunks) > 1
        assert all(len(chunk) <= 200 for chunk in chunks)
        assert all(line.startswith(starts) for chunk in chunks for line in chunk.split("\n"))
        assert "\n".join(chunks) == text.rstrip("\n")


def test_a_markdown_headings_section_path_reads_without_its_inline_marks():
    """`# **Chapter 2** The *storm*` kept its marks in the section path, which every prompt
    cites; a code span keeps its text (`__init__`), a word its underscores."""
    text = (
        "# **Chapter 2** The *storm*\n\n## [Harbour](h.md) and `__init__`\n\nShips.\n\n"
        "## snake_case_name\n\nRain.\n"
    )
    passages = split_markdown("a.md", text, 1000)
    assert [(p.section, p.chapter) for p in passages] == [
        (("Chapter 2 The storm", "Harbour and __init__"), 2),
        (("Chapter 2 The storm", "snake_case_name"), 2),
    ]
    assert passages[0].text.startswith("# **Chapter 2** The *storm*")  # the text as written
    linked = split_markdown("b.md", "# [Chapter 3](c3.md)\n\nText.\n", 1000)
    assert [(p.section, p.chapter) for p in linked] == [(("Chapter 3",), 3)]


def test_a_full_width_full_stop_ends_a_chinese_sentence_but_not_a_number():
    """This edition of 红楼梦 ends most sentences with `．` (U+FF0E), which was no sentence
    end: passages were cut at the last clause mark, mid-sentence (`…则又追踪蹑迹，`)."""
    sentence = "天地玄黄宇宙洪荒，日月盈昃辰宿列张，寒来暑往秋收冬藏．"
    passages = split_text("a.txt", sentence * 6 + "圆周率约为３．１４，不是３．" + "\n", 60)
    assert [p.text for p in passages][:3] == [sentence * 2] * 3
    assert passages[-1].text == "圆周率约为３．１４，不是３．"
