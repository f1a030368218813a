"""Extractors produce exactly the tags, kinds and directions of LangChain's own extractors."""

from __future__ import annotations

import pytest

from extractors import HierarchyLinkExtractor, HtmlInput, HtmlLinkExtractor
from extractors.batching import padded_batches
from graphstore.errors import InvalidInputError
from graphstore.links import Link

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
