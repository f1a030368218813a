"""The extractor protocol shared by every module here, and its face for LangChain documents."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Generic, TypeVar

from graphstore.errors import InvalidInputError
from graphstore.links import Link

if TYPE_CHECKING:  # langchain_core is imported only by those who hand documents over
    from langchain_core.documents import Document

InputT = TypeVar("InputT")


class LinkExtractor(ABC, Generic[InputT]):
    """LangChain's `LinkExtractor` protocol: links for one input, or for many at once.

    Extractors backed by a model override `extract_many` to batch; the default loops.
    """

    @abstractmethod
    def extract_one(self, input: InputT) -> set[Link]:
        """The links of one input."""

    def extract_many(self, inputs: Iterable[InputT]) -> Iterable[set[Link]]:
        """The links of each input, in order."""
        return [self.extract_one(item) for item in inputs]

    def setting(self) -> str | None:
        """Everything besides the input that decides this extractor's links, as one string,
        for an extractor worth not running twice on the same text (a model's): an ingest
        reuses the links it found for a text under the same setting (`graphstore.link_cache`).
        None, the default: always run."""
        return None

    def document_input(self, document: Document) -> InputT:
        """What this extractor reads of a LangChain `Document` when `as_document_extractor`
        is given no `to_input`; an extractor with no such default says so."""
        raise InvalidInputError(
            f"{type(self).__name__} reads no Document by default: "
            "pass as_document_extractor(to_input), a function from a Document to its input"
        )

    def as_document_extractor(
        self, to_input: Callable[[Document], InputT] | None = None
    ) -> DocumentLinkExtractor[InputT]:
        """This extractor reading LangChain `Document`s, as `LinkExtractorTransformer` hands
        them over: each becomes this extractor's input by `to_input` (by default
        `document_input`: a text extractor's is the `page_content`)."""
        return DocumentLinkExtractor(self, to_input or self.document_input)


class TextLinkExtractor(LinkExtractor[str]):
    """An extractor of a passage's text: it reads a `Document`'s `page_content`."""

    def document_input(self, document: Document) -> str:
        """The document's text."""
        return document.page_content


def document_source(document: Document, extractor: object) -> str:
    """The URL of the page a `Document` comes from, in its `source` metadata (where
    LangChain's loaders and `graphstore ingest` put it): what links resolve against."""
    source = document.metadata.get("source")
    if not isinstance(source, str) or not source:
        raise InvalidInputError(
            f"{type(extractor).__name__} needs each Document's page URL in metadata['source'], "
            "or as_document_extractor(to_input)"
        )
    return source


class DocumentLinkExtractor(LinkExtractor["Document"], Generic[InputT]):
    """An extractor of `InputT` reading `Document`s: each is turned into its input first.
    `extract_many` hands the inner extractor all inputs at once, so a model still batches."""

    def __init__(
        self, extractor: LinkExtractor[InputT], to_input: Callable[[Document], InputT]
    ) -> None:
        self.extractor = extractor
        self.to_input = to_input

    def extract_one(self, input: Document) -> set[Link]:
        """The links of one document."""
        return self.extractor.extract_one(self.to_input(input))

    def extract_many(self, inputs: Iterable[Document]) -> Iterable[set[Link]]:
        """The links of each document, in order."""
        return self.extractor.extract_many(self.to_input(document) for document in inputs)

    def setting(self) -> str | None:
        """The inner extractor's setting."""
        return self.extractor.setting()
