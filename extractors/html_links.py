"""Hyperlinks: a passage links out to the pages it cites and in from its own page's URL.

Same tags as LangChain's `HtmlLinkExtractor`: relative hrefs are resolved against the page
URL, fragments dropped (by default), non-web schemes and self-links skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urldefrag, urljoin, urlparse

from bs4 import BeautifulSoup

from extractors.base import LinkExtractor
from graphstore.links import Link

WEB_SCHEMES = ("http", "https", "")


@dataclass(frozen=True)
class HtmlInput:
    """An HTML fragment (or parsed soup) and the URL of the page it comes from."""

    content: str | BeautifulSoup
    base_url: str


def resolve_href(href: str, page_url: str, drop_fragments: bool = True) -> str | None:
    """The absolute URL `href` points at from `page_url`, or None for non-web schemes."""
    if urlparse(href).scheme not in WEB_SCHEMES:
        return None
    url = urljoin(page_url, href)
    return urldefrag(url).url if drop_fragments else url


class HtmlLinkExtractor(LinkExtractor[HtmlInput]):
    """`out` links to every page an HTML passage cites, an `in` link for its own page."""

    def __init__(self, *, kind: str = "hyperlink", drop_fragments: bool = True) -> None:
        self.kind = kind
        self.drop_fragments = drop_fragments

    def extract_one(self, input: HtmlInput) -> set[Link]:
        """The hyperlink tags of one passage."""
        soup = input.content
        if isinstance(soup, str):
            soup = BeautifulSoup(soup, "html.parser")
        page = urldefrag(input.base_url).url if self.drop_fragments else input.base_url
        links = {Link.incoming(self.kind, page)}
        for anchor in soup.find_all("a", href=True):
            url = resolve_href(str(anchor["href"]), page, self.drop_fragments)
            if url and url != page:
                links.add(Link.outgoing(self.kind, url))
        return links
