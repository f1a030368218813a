"""Mention links: a passage that names X links out to the passage that *is* X.

A gazetteer of known names (page titles, characters, products), matched with one
Aho-Corasick automaton so thousands of names cost one pass over the text.  Matching is on
`fold`ed text (case, width and line breaks ignored); a Latin-script name must stand as a
whole word ("Hell" is not found in "Hello"), a Chinese one is found anywhere, since Chinese
puts no spaces between words.  A name nested in a longer matched name ("York" in
"New York") is not reported.  The defining passage gets `defines(name)`: the mentions
point at it, and nothing else does.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from extractors.base import TextLinkExtractor
from extractors.normalize import fold, is_cjk, normalize_tag
from graphstore.errors import InvalidInputError
from graphstore.links import Direction, Link
from graphstore.optional import optional_import

_QUALIFIED = re.compile(r"^(?P<base>.*\S)\s*[(（][^()（）]+[)）]$")
"""A title with a trailing qualifier: "Billy Murray (singer)", "西游记（电视剧）"."""


def _is_name(base: str) -> bool:
    """At least two words (two characters in a script written without spaces): a single
    word ("Mirage" of "Mirage (band)") is too often just a word in running text."""
    return len(base) >= 2 if any(is_cjk(char) for char in base) else len(base.split()) >= 2


def title_aliases(titles: Iterable[str]) -> dict[str, str]:
    """A gazetteer of page titles: each title names itself and, when it carries a trailing
    qualifier as encyclopedia titles do, its base name is an alias of it, since text says
    "Billy Murray", not "Billy Murray (singer)".  A base becomes an alias only when it is
    unambiguous (no other title has the same base or is the base itself) and a name, not a
    word (`_is_name`).
    """
    listed = list(titles)
    names = {title: title for title in listed}
    bases = {title: match["base"] for title in listed if (match := _QUALIFIED.match(title))}
    shared = Counter(fold(base) for base in bases.values())
    folded_titles = {fold(title) for title in listed}
    for title, base in bases.items():
        key = fold(base)
        if shared[key] == 1 and key not in folded_titles and _is_name(base):
            names[base] = title
    return names


def _continues_word(char: str) -> bool:
    """True when `char` beside a match would make it part of a longer Latin word."""
    return char.isalnum() and not is_cjk(char)


class MentionLinkExtractor(TextLinkExtractor):
    """Links to every known name a passage mentions, tagged with the canonical name.

    `names` is a list of names, or a mapping from alias to canonical name
    (`{"Monkey King": "Sun Wukong", "Sun Wukong": "Sun Wukong"}`).  By default the links go
    `out`, to the passage that *is* the name (see `defines`); with `direction="bidir"`, for
    names no passage defines (a novel's characters), passages mentioning the same name link
    to each other.
    """

    def __init__(
        self,
        names: Mapping[str, str] | Iterable[str],
        *,
        kind: str = "mention",
        direction: Direction = "out",
    ) -> None:
        if isinstance(names, str):
            raise InvalidInputError("names must be a list or mapping of names, not one string")
        aliases = names if isinstance(names, Mapping) else {name: name for name in names}
        self.kind = kind
        self.direction: Direction = direction
        self._targets: dict[str, set[str]] = {}
        for alias, canonical in aliases.items():
            key, tag = fold(alias), normalize_tag(canonical)
            if key and tag:
                self._targets.setdefault(key, set()).add(tag)
        if not self._targets:
            raise InvalidInputError("a mention extractor needs at least one non-empty name")
        self._automaton: Any = None

    def __len__(self) -> int:
        """How many distinct names (aliases included) are matched."""
        return len(self._targets)

    def _loaded(self) -> Any:
        if self._automaton is None:
            ahocorasick = optional_import("ahocorasick", "mention links")
            automaton = ahocorasick.Automaton()
            for key, tags in self._targets.items():
                automaton.add_word(key, (len(key), frozenset(tags)))
            automaton.make_automaton()
            self._automaton = automaton
        return self._automaton

    def _whole(self, text: str, start: int, end: int) -> bool:
        """The match `text[start:end]` is not the inside of a longer Latin word."""
        if start > 0 and not is_cjk(text[start]) and _continues_word(text[start - 1]):
            return False
        return not (end < len(text) and not is_cjk(text[end - 1]) and _continues_word(text[end]))

    def mentioned(self, text: str) -> set[str]:
        """The canonical tags of the names `text` mentions, nested ones left out."""
        folded = fold(text)
        spans: list[tuple[int, int, frozenset[str]]] = []
        for last, (length, tags) in self._loaded().iter(folded):
            start, end = last + 1 - length, last + 1
            if self._whole(folded, start, end):
                spans.append((start, end, tags))
        spans.sort(key=lambda span: (span[0], -span[1]))
        found: set[str] = set()
        reach = -1  # the furthest end of the spans starting earlier (or longer, same start)
        for _, end, tags in spans:
            if end > reach:
                found |= tags
                reach = end
        return found

    def defines(self, canonical: str) -> Link:
        """The `in` link for the passage that is `canonical` (its page, its entry)."""
        return Link.incoming(self.kind, normalize_tag(canonical))

    def extract_one(self, input: str) -> set[Link]:
        """Links (in `direction`) to the names mentioned in one passage."""
        return {Link(self.kind, self.direction, tag) for tag in self.mentioned(input)}

    def extract_titled(self, text: str, own_name: str) -> set[Link]:
        """The links of the passage that is `own_name`: it defines that name and links out
        to every other name it mentions (not to itself)."""
        own = self.defines(own_name)
        return {own} | {link for link in self.extract_one(text) if link.tag != own.tag}
