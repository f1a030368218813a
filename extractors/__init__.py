"""Link extractors: turn passages into link tags, one module per kind of link.

Each follows LangChain's `LinkExtractor` protocol (`extract_one`, `extract_many`), and its
`as_document_extractor()` plugs into `LinkExtractorTransformer`.  The model-backed ones are
exported lazily and load their libraries (torch, keybert, gliner, jieba, pyahocorasick)
only when first used.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from extractors.base import LinkExtractor
from extractors.hierarchy import HierarchyLinkExtractor
from extractors.html_links import HtmlInput, HtmlLinkExtractor
from extractors.markdown_links import MarkdownInput, MarkdownLinkExtractor

if TYPE_CHECKING:
    from extractors.chinese import JiebaEntityLinkExtractor
    from extractors.entities import GlinerLinkExtractor
    from extractors.frequency import TagFrequencyFilter
    from extractors.keywords import KeybertLinkExtractor
    from extractors.mentions import MentionLinkExtractor, title_aliases
    from extractors.normalize import normalize_tag

_LAZY = {
    "GlinerLinkExtractor": "extractors.entities",
    "JiebaEntityLinkExtractor": "extractors.chinese",
    "KeybertLinkExtractor": "extractors.keywords",
    "MentionLinkExtractor": "extractors.mentions",
    "TagFrequencyFilter": "extractors.frequency",
    "normalize_tag": "extractors.normalize",
    "title_aliases": "extractors.mentions",
}

__all__ = [
    "GlinerLinkExtractor",
    "HierarchyLinkExtractor",
    "HtmlInput",
    "HtmlLinkExtractor",
    "JiebaEntityLinkExtractor",
    "KeybertLinkExtractor",
    "LinkExtractor",
    "MarkdownInput",
    "MarkdownLinkExtractor",
    "MentionLinkExtractor",
    "TagFrequencyFilter",
    "normalize_tag",
    "title_aliases",
]


def __getattr__(name: str) -> Any:
    """Import a lazily exported name's module on first access."""
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'extractors' has no attribute {name!r}")
