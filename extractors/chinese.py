"""Chinese entity links from jieba's part-of-speech tags: no model, nothing to download.

jieba tags person names `nr`, places `ns`, organizations `nt`; its dictionary is modern, so
for a novel add the cast (`user_dict`): out of the box 猪八戒, 悟空 and 行者 are common nouns
and 花果山 is tagged a person.  Each extractor keeps its own jieba tokenizer, so its words
never leak into other users of jieba.  jieba is imported on first use.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from extractors.base import TextLinkExtractor
from extractors.jieba_quiet import quiet_jieba
from extractors.normalize import normalize_tag
from graphstore.errors import InvalidInputError
from graphstore.links import Direction, Link

DEFAULT_KINDS: Mapping[str, str] = {
    "nr": "entity:person",
    "nrfg": "entity:person",
    "ns": "entity:place",
    "nt": "entity:organization",
}
"""jieba tag → link kind (`nrfg` is the dictionary's tag for full personal names)."""


class JiebaEntityLinkExtractor(TextLinkExtractor):
    """Links to the names jieba tags in a passage, one kind per tag in `kinds`.

    `user_dict` adds words: a list (tagged `nr`, person) or a mapping word → jieba tag
    (`{"花果山": "ns"}`).  A name must occur `min_count` times in the passage and have
    `min_chars` characters: single characters tagged `nr` are mostly misreadings.
    """

    def __init__(
        self,
        *,
        kinds: Mapping[str, str] = DEFAULT_KINDS,
        direction: Direction = "bidir",
        min_count: int = 1,
        min_chars: int = 2,
        user_dict: Iterable[str] | Mapping[str, str] | None = None,
    ) -> None:
        if min_count < 1 or min_chars < 1:
            raise InvalidInputError("min_count and min_chars must be at least 1")
        if isinstance(user_dict, str):
            raise InvalidInputError("user_dict must be a list or mapping of words, not a string")
        words = user_dict or {}
        self.kinds = dict(kinds)
        self.direction: Direction = direction
        self.min_count = min_count
        self.min_chars = min_chars
        self.user_dict = dict(words) if isinstance(words, Mapping) else dict.fromkeys(words, "nr")
        self._tagger: Any = None

    def _loaded(self) -> Any:
        if self._tagger is None:
            jieba = quiet_jieba()
            tokenizer = jieba.Tokenizer()
            for word, tag in self.user_dict.items():
                tokenizer.add_word(word, tag=tag)
            self._tagger = jieba.posseg.POSTokenizer(tokenizer)
        return self._tagger

    def names(self, text: str) -> Counter[tuple[str, str]]:
        """How often each `(kind, name)` occurs in `text`."""
        counts: Counter[tuple[str, str]] = Counter()
        for pair in self._loaded().cut(text):
            kind = self.kinds.get(pair.flag)
            if kind and len(pair.word) >= self.min_chars:
                tag = normalize_tag(pair.word)
                if tag:
                    counts[kind, tag] += 1
        return counts

    def extract_one(self, input: str) -> set[Link]:
        """The entity links of one passage."""
        return {
            Link(kind, self.direction, tag)
            for (kind, tag), count in self.names(input).items()
            if count >= self.min_count
        }
