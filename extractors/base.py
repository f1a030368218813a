"""The extractor protocol shared by every module here."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Generic, TypeVar

from graphstore.links import Link

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
