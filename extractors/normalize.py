"""Tag normalization shared by every text extractor, so one name is one tag.

"European\\nChampionship", "european championship." and "EUROPEAN  Championship" must meet
on the same `(kind, tag)`, or passages that mention the same thing never link.  Scripts
written without spaces (Chinese, Japanese, Korean) are kept as they are.
"""

from __future__ import annotations

import re
import unicodedata

CJK_RANGES = (
    (0x2E80, 0x2FDF),  # radicals
    (0x3040, 0x30FF),  # hiragana, katakana
    (0x3100, 0x312F),  # bopomofo
    (0x3130, 0x318F),  # hangul compatibility jamo
    (0x31F0, 0x31FF),  # katakana extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xAC00, 0xD7AF),  # hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0x20000, 0x3FFFF),  # CJK extensions B and later
)
"""Scripts whose words are not separated by spaces: no word boundaries to check there."""

CJK_CLASS = "".join(f"{chr(low)}-{chr(high)}" for low, high in CJK_RANGES)
_SPACE_BETWEEN_CJK = re.compile(f"(?<=[{CJK_CLASS}]) (?=[{CJK_CLASS}])")


def is_cjk(char: str) -> bool:
    """True for a character of a script written without spaces between words."""
    code = ord(char)
    return any(low <= code <= high for low, high in CJK_RANGES)


APOSTROPHES = str.maketrans(dict.fromkeys("\u2018\u2019\u02bc", "'"))
"""Typographic apostrophes (‘ ’ ʼ) as the typewriter's ': a manuscript's "O’Brien" is the
card "O'Brien" (NFKC keeps them apart)."""


def fold(text: str) -> str:
    """NFKC, casefolded, apostrophes made one (`APOSTROPHES`), every run of whitespace
    (newlines too) made one space, trimmed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().translate(APOSTROPHES).split())


PAIRS = dict(zip("([{「『【《〈〔〖“«‹", ")]}」』】》〉〕〗”»›", strict=True))
"""Opening → closing bracket or quote: a pair is punctuation only when it wraps the tag
(single quotes are apostrophes by then, `fold`)."""
_OPENING = {close: open_ for open_, close in PAIRS.items()}


def _is_punctuation(char: str) -> bool:
    return unicodedata.category(char).startswith("P")


def _balanced(text: str, open_: str, close: str) -> bool:
    depth = 0
    for char in text:
        depth += (char == open_) - (char == close)
        if depth < 0:
            return False
    return depth == 0


def normalize_tag(text: str) -> str:
    """`fold(text)` without surrounding punctuation: the tag form of a name or keyword.

    Inner punctuation stays ("u.s. army", "rock'n'roll"), and so does a bracket closing one
    opened inside ("the prestige (film)"); an all-punctuation text gives "".
    """
    tag = fold(text)
    while tag:
        first, last = tag[0], tag[-1]
        if first in PAIRS and last == PAIRS[first] and _balanced(tag[1:-1], first, last):
            tag = tag[1:-1]
        elif _is_punctuation(first) and not (first in PAIRS and PAIRS[first] in tag[1:]):
            tag = tag[1:]
        elif _is_punctuation(last) and not (last in _OPENING and _OPENING[last] in tag[:-1]):
            tag = tag[:-1]
        else:
            break
        tag = tag.strip()
    return tag


def join_cjk_words(phrase: str) -> str:
    """Drop the spaces a tokenizer put between CJK words: "花果 山" is written "花果山"."""
    return _SPACE_BETWEEN_CJK.sub("", phrase)
