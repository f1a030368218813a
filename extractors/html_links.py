"""Hyperlinks: a passage links out to the pages it cites and in from its own page's URL.

The tags of LangChain's `HtmlLinkExtractor` (relative hrefs resolved against the page URL,
fragments dropped by default, non-web schemes and self-links skipped), except that the path
is percent-decoded on both sides (`page_tag`): `f%20g.html` and `%E4%B8%AD.html` cite the
pages `f g.html` and `中.html`, whose in-tags upstream never meet; and the path of a local
page (a file) is composed in Unicode (`local_page_path`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote, urldefrag, urljoin, urlparse, urlsplit, urlunsplit

from extractors.base import LinkExtractor, document_source
from graphstore.links import Link

if TYPE_CHECKING:
    from bs4 import BeautifulSoup
    from langchain_core.documents import Document

WEB_SCHEMES = ("http", "https", "")


@dataclass(frozen=True)
class HtmlInput:
    """An HTML fragment (or parsed soup) and the URL of the page it comes from."""

    content: str | BeautifulSoup
    base_url: str


LOCAL_SCHEMES = ("", "file")
"""The schemes of pages that are files: a relative URL (an ingested page's) or `file:`."""


def local_page_path(path: str) -> str:
    """A file's path as the tags of its page name it: composed (Unicode NFC), since a file
    system may store a name decomposed (`cafe\\u0301.md`, as older macOS wrote names) that a
    link spells composed (`café.md`).  A web server may serve the two spellings as two
    pages, so the paths of `http(s)` URLs are kept as written."""
    return unicodedata.normalize("NFC", path)


def page_tag(url: str, drop_fragments: bool = True) -> str:
    """The tag of the page at `url`, for its in-link and every out-link to it alike: the
    path percent-decoded, since a link may spell a file name either way (a byte that is not
    UTF-8 becomes `\\xNN`, as in the source names of `graphstore.ingest`), and a file's
    path composed (`local_page_path`) and without a query, which a file does not read."""
    if drop_fragments:
        url = urldefrag(url).url
    parts = urlsplit(url)
    path = unquote(parts.path, errors="backslashreplace")
    if parts.scheme in LOCAL_SCHEMES:  # a file: a query (`z.md?x=1`) names no other page
        parts, path = parts._replace(query=""), local_page_path(path)
    return urlunsplit(parts._replace(path=path))


def page_url(source: str) -> str:
    """The URL of an ingested file's page from its source name: percent-encoded, so that
    a `#` or `?` in a file name is part of the path, not a fragment or a query."""
    return quote(source, safe="/")


def resolve_href(href: str, page_url: str, drop_fragments: bool = True) -> str | None:
    """The tag of the page `href` points at from `page_url`, or None for non-web schemes."""
    if urlparse(href).scheme not in WEB_SCHEMES:
        return None
    return page_tag(urljoin(page_url, href), drop_fragments)


def page_links(
    kind: str, base_url: str, hrefs: Iterable[str], drop_fragments: bool = True
) -> set[Link]:
    """An `in` link for the page at `base_url` and an `out` link to every other web page
    one of `hrefs` points at from it: the tags of any passage of that page."""
    page = page_tag(base_url, drop_fragments)
    links = {Link.incoming(kind, page)}
    for href in hrefs:
        url = resolve_href(href, base_url, drop_fragments)
        if url and url != page:
            links.add(Link.outgoing(kind, url))
    return links


class HtmlLinkExtractor(LinkExtractor[HtmlInput]):
    """`out` links to every page an HTML passage cites, an `in` link for its own page."""

    def __init__(self, *, kind: str = "hyperlink", drop_fragments: bool = True) -> None:
        self.kind = kind
        self.drop_fragments = drop_fragments

    def document_input(self, document: Document) -> HtmlInput:
        """A `Document`'s HTML, read as the page in its `source` metadata."""
        return HtmlInput(document.page_content, document_source(document, self))

    def extract_one(self, input: HtmlInput) -> set[Link]:
        """The hyperlink tags of one passage (BeautifulSoup is imported here, when a page is
        first read: a search, which reads none, does not wait for its import)."""
        from bs4 import BeautifulSoup

        soup = input.content
        if isinstance(soup, str):
            soup = BeautifulSoup(soup, "html.parser")
        hrefs = [str(anchor["href"]) for anchor in soup.find_all("a", href=True)]
        return page_links(self.kind, input.base_url, hrefs, self.drop_fragments)
