"""Extractors produce exactly the tags, kinds and directions of LangChain's own extractors."""

from __future__ import annotations

import os
import re

import pytest

from extractors import HierarchyLinkExtractor, HtmlInput, HtmlLinkExtractor
from extractors.batching import padded_batches
from extractors.html_links import resolve_href
from extractors.markdown_links import (
    MAX_TARGET,
    MarkdownInput,
    MarkdownLinkExtractor,
    _inline_targets,
    _target,
    markdown_targets,
)
from graphstore.embedded import EmbeddedStorage
from graphstore.errors import InvalidInputError
from graphstore.ingest import hyperlink_linker, ingest
from graphstore.links import Link
from graphstore.markdown import MarkdownMarkup, passage_markups
from graphstore.splitting import split_markdown
from graphstore.store import GraphStore
from graphstore.testing.embeddings import KeyedEmbeddings

upstream = pytest.importorskip("langchain_community.graph_vectorstores.extractors")


def as_tuples(links) -> set[tuple[str, str, str]]:
    return {(link.kind, link.direction, link.tag) for link in links}


def test_a_link_to_a_file_with_a_query_reaches_the_file_and_a_web_page_keeps_its_query():
    """`[q](z.md?x=1)` became the tag `docs/z.md?x=1`, which no file's passages link in to."""
    text = "[q](z.md?x=1) [w](https://example.org/p?id=3) [r](../r.md?v=2#top)"
    links = MarkdownLinkExtractor().extract_one(MarkdownInput(text, "docs/page.md"))
    assert {link.tag for link in links if link.direction == "out"} == {
        "docs/z.md",
        "https://example.org/p?id=3",
        "r.md",
    }


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"child_links": True},
        {"sibling_links": True},
        {"parent_links": False, "child_links": True, "sibling_links": True},
    ],
)
@pytest.mark.parametrize("path", [[], ["Root"], ["Root", "H1"], ["Root", "H1", "a"]])
def test_hierarchy_links_match_upstream(options, path):
    ours = HierarchyLinkExtractor(**options).extract_one(path)
    theirs = upstream.HierarchyLinkExtractor(**options).extract_one(path)
    assert as_tuples(ours) == as_tuples(theirs)


PAGE = """
<p>See <a href="other.html#part">the other page</a>, <a href="/abs/path">an absolute one</a>,
<a href="https://example.org/x?q=1#frag">elsewhere</a>, <a href="#top">this page</a>,
<a href="mailto:someone@example.org">mail</a> and <a>nothing</a>.</p>
"""


@pytest.mark.parametrize("drop_fragments", [True, False])
@pytest.mark.parametrize(
    "base_url", ["https://site.org/docs/page.html", "https://site.org/docs/page.html#sec"]
)
def test_hyperlinks_match_upstream(drop_fragments, base_url):
    ours = HtmlLinkExtractor(drop_fragments=drop_fragments).extract_one(HtmlInput(PAGE, base_url))
    theirs = upstream.HtmlLinkExtractor(drop_fragments=drop_fragments).extract_one(
        upstream.HtmlInput(PAGE, base_url)
    )
    assert as_tuples(ours) == as_tuples(theirs)


def test_hyperlinks_resolve_relative_urls_and_drop_self_links():
    links = HtmlLinkExtractor().extract_one(HtmlInput(PAGE, "https://site.org/docs/page.html"))
    assert links == {
        Link.incoming("hyperlink", "https://site.org/docs/page.html"),
        Link.outgoing("hyperlink", "https://site.org/docs/other.html"),
        Link.outgoing("hyperlink", "https://site.org/abs/path"),
        Link.outgoing("hyperlink", "https://example.org/x?q=1"),
    }


def test_extractors_plug_into_langchain_link_extractor_transformer():
    from langchain_community.graph_vectorstores.extractors import LinkExtractorTransformer
    from langchain_core.documents import Document

    html = HtmlLinkExtractor()
    transformer = LinkExtractorTransformer(
        [
            upstream.LinkExtractorAdapter(
                html, lambda doc: HtmlInput(doc.page_content, doc.metadata["url"])
            )
        ]
    )
    [doc] = transformer.transform_documents(
        [Document(PAGE, metadata={"url": "https://site.org/docs/page.html"})]
    )
    assert Link.outgoing("hyperlink", "https://site.org/docs/other.html") in doc.metadata["links"]


def test_padded_batches_group_similar_lengths_within_the_budget():
    lengths = [5, 100, 1, 30, 30, 7, 600]
    # shortest first; a batch closes at 3 items or when size x longest would pass 64;
    # inputs longer than the budget go alone
    assert padded_batches(lengths, budget=64, max_size=3) == [[2, 0, 5], [3, 4], [1], [6]]
    assert padded_batches([], budget=64, max_size=3) == []
    with pytest.raises(InvalidInputError):
        padded_batches(lengths, budget=0, max_size=3)


def test_a_percent_encoded_href_and_its_page_get_the_same_tag():
    """Upstream keeps `%20` in the cited tag but not in the page's own URL decoded from it,
    so `f%20g.html` never met `f g.html`; both sides now decode the path alike."""
    page = '<a href="f%20g.html">a</a> <a href="a%20b.html#x">self</a> <a href="q?s=a%20b">q</a>'
    links = HtmlLinkExtractor().extract_one(HtmlInput(page, "https://site.org/d/a%20b.html"))
    assert links == {
        Link.incoming("hyperlink", "https://site.org/d/a b.html"),
        Link.outgoing("hyperlink", "https://site.org/d/f g.html"),
        Link.outgoing("hyperlink", "https://site.org/d/q?s=a%20b"),
    }
    assert resolve_href("caf%E9.html", "d/a.html") == "d/caf\\xe9.html"  # as source_name says


async def test_ingested_pages_linked_by_encoded_or_non_ascii_names_are_neighbours(tmp_path):
    sub = tmp_path / "hl" / "sub"
    sub.mkdir(parents=True)
    (sub / "f g.html").write_text("<p>A page with a space in its name.</p>")
    (sub / "中文.html").write_text("<p>一个中文名字的页面。</p>", encoding="utf-8")
    (sub / os.fsdecode(b"caf\xe9.html")).write_text("<p>A name that is not UTF-8.</p>")
    hrefs = [
        "sub/f%20g.html",
        "sub/%E4%B8%AD%E6%96%87.html#top",
        "sub/中文.html",
        "sub/caf%E9.html",
    ]
    anchors = " ".join(f'<a href="{href}">{n}</a>' for n, href in enumerate(hrefs))
    (tmp_path / "hl" / "index.html").write_text(f"<p>See {anchors}.</p>", encoding="utf-8")
    store = GraphStore(KeyedEmbeddings(), EmbeddedStorage(":memory:"))
    await ingest(store, [tmp_path / "hl"], linkers=[hyperlink_linker()], root=tmp_path)
    pages = ["hl/sub/f g.html", "hl/sub/中文.html", "hl/sub/caf\\xe9.html"]
    [index] = await store.aget(["hl/index.html#0"])
    assert {link.tag for link in index.links if link.is_outgoing} == set(pages)
    hits = await store.atraversal_search(index.text, k=4, start_k=1, depth=1)
    assert {(hit.node.id, hit.depth, hit.via) for hit in hits} == {
        ("hl/index.html#0", 0, None),
        *((f"{page}#0", 1, ("hyperlink", page)) for page in pages),
    }
    await store.aclose()


async def test_a_page_named_decomposed_is_the_page_a_composed_link_cites(tmp_path):
    """A file name stored decomposed (NFD, as older macOS wrote names) used to be another
    page than the same name spelled composed (NFC) in a link, so the link led nowhere.  The
    root folder's own name is decomposed too: tags stay relative to it."""
    root = tmp_path / "Cafe\u0301s"
    root.mkdir()
    (root / "cafe\u0301.md").write_text("# Café\n\nThe café opens at nine.\n")
    (root / "index.md").write_text("See [the café](caf\u00e9.md) and [again](caf%C3%A9.md).\n")
    store = GraphStore(KeyedEmbeddings(), EmbeddedStorage(":memory:"))
    await ingest(store, [root], linkers=[hyperlink_linker()], root=root)
    [index] = await store.aget(["index.md#0"])
    assert {link.tag for link in index.links if link.is_outgoing} == {"caf\u00e9.md"}
    hits = await store.atraversal_search(index.text, k=2, start_k=1, depth=1)
    assert [(hit.node.id, hit.depth) for hit in hits] == [
        ("index.md#0", 0),
        ("cafe\u0301.md#0", 1),
    ]
    await store.aclose()


def test_markdown_links_inline_reference_and_autolinks_not_images_or_code():
    text = "\n".join(
        [
            "See [the guide](guide.md#setup) and [ref][r], or <https://example.org/x>.",
            '![a diagram](diagram.png) [a (paren) page](wiki/a_(b).md "title")',
            "`[not](code.md)` and [spaced](  <other page.md>  )",
            "```",
            "[fenced](fenced.md)",
            "```",
            "[r]: <refs/r.html>",
            "[self](page.md) [mail](mailto:a@b.org) [[nested](n.md)]",
            "[a link whose text",
            "wraps](wrapped.md) ![an image whose alt",
            "wraps](wrapped.png) [not a link] (spaced.md)",
        ]
    )
    assert markdown_targets(text) == {
        "guide.md#setup",
        "https://example.org/x",
        "wiki/a_(b).md",
        "other page.md",
        "refs/r.html",
        "page.md",
        "mailto:a@b.org",
        "n.md",
        "wrapped.md",
    }
    links = MarkdownLinkExtractor().extract_one(MarkdownInput(text, "docs/page.md"))
    assert links == {
        Link.incoming("hyperlink", "docs/page.md"),
        *(
            Link.outgoing("hyperlink", tag)
            for tag in [
                "docs/guide.md",
                "https://example.org/x",
                "docs/wiki/a_(b).md",
                "docs/other page.md",
                "docs/refs/r.html",
                "docs/n.md",
                "docs/wrapped.md",
            ]
        ),
    }


@pytest.mark.parametrize(
    ("markdown", "targets"),
    [
        (r"\[escaped](no.md) [a\]b](yes.md) [x](a\_b.md)", {"yes.md", "a_b.md"}),
        ("<!-- [c](comment.md)\n[d](comment2.md) --> [ok](ok.md)", {"ok.md"}),
        ("[a [b](inner.md) c](outer.md)", {"inner.md"}),
        ("![see [x](alt.md)](img.png)", set()),
        ("````\n```\n[in](in.md)\n````\n[out](out.md)", {"out.md"}),
        ("~~~\n[in](in.md)\n```\n[still](in2.md)\n~~~", set()),
        ("[^1]: tomatoes are nice\nsee [^1]", set()),
        ("Press the ` key, then read [docs](docs.md).", {"docs.md"}),
        ("`` a ` [in](code.md) `` [out](out.md)", {"out.md"}),
        ("[r]: <my plan.md>\n[r], [R][] and [text][r]", {"my plan.md"}),
        ("> [q]: quoted.md\n- [l]: listed.md\n1. [n]: numbered.md\n[q] [l] [n]", None),
        ("[undefined][nowhere] [nor this]", set()),
        ("<a href=\"one.md\">1</a> <A HREF='two.md'>2</A> <a name=x href=three.md>", None),
        ('[p](my plan.md) [t](title.md "T") [u](title2.md (T))', {"title.md", "title2.md"}),
        ("text cut from an earlier passage](cut.md) then \\](no.md) z](no2.md)", {"cut.md"}),
        ("Use `<!--` to start.\n\nSee [docs](docs.md).\n\nAnd `-->` ends it.", {"docs.md"}),
        ("`C:\\` then [x](y.md) and `z`", {"y.md"}),
        ("\\![x](y.md)", {"y.md"}),
        ("Wow ![ unclosed\n\nLater [x](y.md)", {"y.md"}),
        ("[x](foo[y](z.md)", {"z.md"}),
        ("[Note]: see [the guide](guide.md) first.", {"guide.md"}),
        ('[a]: first.md "A title"\n[a]', {"first.md"}),
        ('[x](a.md "unclosed) and [y](b.md)', {"b.md"}),
        (
            '[a](b.md "see [c](d.md)") [e](f.md \'t\'\n  ) [g](h.md "t\nu")',
            {"b.md", "f.md", "h.md"},
        ),
        ('[a](b.md "t" x) [c](d.md (t (u))) [e](f.md "t\n\nv")', set()),
        ('[a [x](b.md "t](c.md)', {"c.md"}),
        ('[")[x](a.md "](b.md)', {"b.md"}),
        ('[a](b.md "t\\\n\nu") [c](d.md\n\n) [e](\n\nf.md) [g](h.md\n\n"t")', set()),
        ('[a](b.md "' + "x" * 3000 + '") [c](d.md\n  "t") [e](\n f.md)', {"b.md", "d.md", "f.md"}),
    ],
)
def test_markdown_links_as_commonmark_reads_them(markdown, targets):
    """Escapes, HTML comments, nested links, links in image descriptions, fences of four
    backticks, footnotes, lone backticks, `<…>` and quoted or listed definitions, HTML
    anchors, a backslash in a code span, an unclosed image, a target broken by `[`, a
    line that only starts like a definition, and a title that does not close (or a link in
    a title) each used to give a wrong or a missing link."""
    found = markdown_targets(markdown)
    if targets is None:  # one target per `.md` named
        targets = {word for word in re.findall(r"[a-z]+\.md", markdown)}
    assert found == targets


def test_markdown_link_scan_stays_linear_on_hostile_lines():
    """Files are user input: the scan goes on after what a target read, so brackets and
    parentheses without end cost one pass (reading each `](`'s target afresh read
    50,000 x 2,048 characters), and a link after them is still found."""
    hostile = "[" * 50_000 + "](" * 50_000
    assert _target(hostile, 50_002) == (None, 50_002 + MAX_TARGET)
    assert list(_inline_targets(hostile + " [ok](ok.md)")) == ["ok.md"]
    assert markdown_targets(hostile + "(" * 50_000 + "<a:" * 20_000 + " [ok](ok.md)") == {"ok.md"}
    titles = '[x](a "[' * 20_000 + "[y](b '" + "z" * 50_000 + " [ok](ok.md)"
    assert markdown_targets(titles) == {"ok.md"}


async def test_markdown_html_and_text_files_link_to_each_other_by_name(tmp_path):
    """Markdown links and links to .md/.txt files used to lead nowhere (only HTML passages
    had hyperlink tags), and a file name with `#` got the in-tag of a page cut at it."""
    docs = tmp_path / "docs"
    (docs / "notes").mkdir(parents=True)
    (docs / "index.md").write_text(
        "# Index\n\nRead [the notes](notes/a%23b.md), [the log](log.txt) and "
        "[the page](page.html#top).\n",
        encoding="utf-8",
    )
    (docs / "notes" / "a#b.md").write_text("Notes that point [back](../index.md).\n")
    (docs / "log.txt").write_text("A plain log.\n")
    (docs / "page.html").write_text('<p>A page citing <a href="log.txt">the log</a>.</p>')
    store = GraphStore(KeyedEmbeddings(), EmbeddedStorage(":memory:"))
    await ingest(store, [docs], linkers=[hyperlink_linker()], root=tmp_path)
    [index] = await store.aget(["docs/index.md#0"])
    pages = {"docs/notes/a#b.md", "docs/log.txt", "docs/page.html"}
    assert {link.tag for link in index.links if link.is_outgoing} == pages
    hits = await store.atraversal_search(index.text, k=4, start_k=1, depth=1)
    assert {(hit.node.id, hit.depth) for hit in hits} == {
        ("docs/index.md#0", 0),
        *((f"{page}#0", 1) for page in pages),
    }
    [note] = await store.aget(["docs/notes/a#b.md#0"])
    assert Link.outgoing("hyperlink", "docs/index.md") in note.links
    assert Link.incoming("hyperlink", "docs/notes/a#b.md") in note.links
    await store.aclose()


async def test_markdown_links_are_read_in_their_file_and_resolved_from_it(tmp_path):
    """A code fence and a link definition belong to the file, not to one passage: links in
    a fence split over passages were taken, a reference link whose definition is in
    another section was lost (the definition's passage got it instead), and a `../` above
    the root reached a file inside it."""
    root = tmp_path / "proj"
    docs = root / "docs"
    docs.mkdir(parents=True)
    (tmp_path / "README.md").write_text("Outside the root.\n")
    (root / "README.md").write_text("The project's own readme.\n")
    fence = "```\n" + "\n\n".join(f"[fake{i}](fake{i}.md) line" for i in range(30)) + "\n```"
    (docs / "guide.md").write_text(
        f"# Uses\n\nThe [target page][tp], and [up](../../README.md).\n\n{fence}\n\n"
        "After the code see [real](real.md).\n\n# Defs\n\n[tp]: target.md\n"
    )
    store = GraphStore(KeyedEmbeddings(), EmbeddedStorage(":memory:"))
    await ingest(store, [docs], linkers=[hyperlink_linker()], root=root, max_chars=300)
    nodes = await store.aget(sorted(await store.anode_ids()))
    assert {node.id: {link.tag for link in node.links if link.is_outgoing} for node in nodes} == {
        "docs/guide.md#0": {"docs/target.md", str(tmp_path / "README.md")},
        "docs/guide.md#1": set(),
        "docs/guide.md#2": {"docs/real.md"},
        "docs/guide.md#3": set(),
    }
    assert all(Link.incoming("hyperlink", "docs/guide.md") in node.links for node in nodes)
    await store.aclose()


def test_a_passage_reads_its_files_first_definition_of_a_label():
    """A file's definitions followed each passage's text, so a passage's own later
    definition of a label won over the file's first (CommonMark: the first wins)."""
    texts = ["[a]: first.md", "See [a].\n\n[a]: second.md"]
    [_, second] = passage_markups("\n\n".join(texts), texts)
    assert markdown_targets(second.text, second.definitions) == {"first.md"}
    assert markdown_targets("\n\n".join(texts)) == {"first.md"}


def test_a_definition_cut_by_the_splitter_still_defines_its_label():
    """Definitions were read from the passages' texts, and a long run of definition lines
    is cut at a space, which may be the one after `[label]:`."""
    text = "\n".join(f"[l{i}]: target{i}.md" for i in range(2000)) + "\n\n"
    text += " ".join(f"[l{i}]" for i in range(2000))
    markups = [p.markup for p in split_markdown("a.md", text, 1000)]
    read = [
        markdown_targets(m.text, m.definitions) for m in markups if isinstance(m, MarkdownMarkup)
    ]
    assert len(read) == len(markups) > 1
    assert set().union(*read) == {f"target{i}.md" for i in range(2000)}


async def test_links_to_folders_and_other_hosts_are_named_as_upstream_or_dropped(tmp_path):
    """A link to the root folder (`..`, `../`) gave an empty tag once resolved against the
    file and stopped the ingest; `//example.com/x` became `example.com/x`, a local name."""
    docs = tmp_path / "proj" / "docs"
    docs.mkdir(parents=True)
    (docs / "a.md").write_text("[back](..) [up](../) [there](//example.com/x)\n")
    (docs / "b.html").write_text('<p><a href="../">up</a> <a href="//example.com/x">x</a></p>')
    store = GraphStore(KeyedEmbeddings(), EmbeddedStorage(":memory:"))
    await ingest(store, [docs], linkers=[hyperlink_linker()], root=tmp_path / "proj")
    for node in await store.aget(["docs/a.md#0", "docs/b.html#0"]):
        assert {link.tag for link in node.links if link.is_outgoing} == {"//example.com/x"}
    await store.aclose()
