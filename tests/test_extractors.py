"""Extractors produce exactly the tags, kinds and directions of LangChain's own extractors."""

from __future__ import annotations

import os

import pytest

from extractors import HierarchyLinkExtractor, HtmlInput, HtmlLinkExtractor
from extractors.batching import padded_batches
from extractors.html_links import resolve_href
from graphstore.embedded import EmbeddedStorage
from graphstore.errors import InvalidInputError
from graphstore.ingest import hyperlink_linker, ingest
from graphstore.links import Link
from graphstore.store import GraphStore
from graphstore.testing.embeddings import KeyedEmbeddings

upstream = pytest.importorskip("langchain_community.graph_vectorstores.extractors")


def as_tuples(links) -> set[tuple[str, str, str]]:
    return {(link.kind, link.direction, link.tag) for link in links}


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
