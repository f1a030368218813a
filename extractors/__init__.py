"""Link extractors: turn passages into link tags, one module per kind of link.

Each follows LangChain's `LinkExtractor` protocol (`extract_one`, `extract_many`), so it also
plugs into `LinkExtractorTransformer`.
"""

from extractors.base import LinkExtractor
from extractors.hierarchy import HierarchyLinkExtractor
from extractors.html_links import HtmlInput, HtmlLinkExtractor

__all__ = ["HierarchyLinkExtractor", "HtmlInput", "HtmlLinkExtractor", "LinkExtractor"]
