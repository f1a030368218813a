"""Section-path links: a passage under `Book / Chapter / Scene` links to its parent section.

Tags and directions are those of LangChain's `HierarchyLinkExtractor`, so stores built with
either extractor traverse alike: parent links go from a section to its parent, child links
from a section to its children, sibling links join sections with the same parent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from extractors.base import LinkExtractor, document_source
from graphstore.errors import InvalidInputError
from graphstore.links import Link

if TYPE_CHECKING:
    from langchain_core.documents import Document

PARENT = "p:"
CHILD = "c:"
SIBLING = "s:"


class HierarchyLinkExtractor(LinkExtractor[Sequence[str]]):
    """Links from a section path (the list of headings above a passage)."""

    def __init__(
        self,
        *,
        kind: str = "hierarchy",
        parent_links: bool = True,
        child_links: bool = False,
        sibling_links: bool = False,
    ) -> None:
        self.kind = kind
        self.parent_links = parent_links
        self.child_links = child_links
        self.sibling_links = sibling_links

    def document_input(self, document: Document) -> list[str]:
        """A `Document`'s section path as `graphstore ingest` writes it: its `source`, then
        the headings in its `section` metadata."""
        section = document.metadata.get("section", [])
        if not isinstance(section, list) or not all(isinstance(name, str) for name in section):
            raise InvalidInputError(
                "HierarchyLinkExtractor reads a Document's headings from metadata['section'], "
                "a list of strings, or as_document_extractor(to_input)"
            )
        return [document_source(document, self), *section]

    def extract_one(self, input: Sequence[str]) -> set[Link]:
        """The links of the section at path `input`."""
        path = "/".join(input)
        parent = "/".join(input[:-1])
        links: set[Link] = set()
        if self.parent_links:
            links.add(Link.incoming(self.kind, PARENT + path))
            if len(input) > 1:
                links.add(Link.outgoing(self.kind, PARENT + parent))
        if self.child_links:
            links.add(Link.outgoing(self.kind, CHILD + path))
            if len(input) > 1:
                links.add(Link.incoming(self.kind, CHILD + parent))
        if self.sibling_links and input:
            links.add(Link.bidir(self.kind, SIBLING + parent))
        return links
