"""Chapters: the number of a chapter heading, and retrieval scoped to the story so far.

A novel's facts change as it goes on; a writer drafting chapter 28 wants nothing from
chapter 29 on.  The splitters record the chapter number of each passage (metadata
`chapter`, an integer), so a search can ask for `{"chapter": {"$lte": 27}}`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from graphstore.errors import InvalidArgumentError

DIGITS = {"〇": 0, "零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4}
DIGITS |= {"五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
UNITS = {"十": 10, "百": 100, "千": 1000}
WORDS = {
    word: value
    for value, word in enumerate(
        [
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
        ],
        start=1,
    )
}
TENS = {
    word: 10 * value
    for value, word in enumerate(
        ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"], start=2
    )
}
NUMBER = re.compile(
    r"^\s*(?:第\s*([〇零一二三四五六七八九十百千两\d]+)\s*[回章卷节]"
    r"|chapter\s+(\d+|[a-z]+(?:[- ](?:one|two|three|four|five|six|seven|eight|nine))?)\b)",
    re.IGNORECASE,
)
"""The number of a chapter heading: 第二十七回 (also 章, 卷, 节) or `Chapter 12` (also
`Chapter XII`, `Chapter Twelve`)."""
HEADING_END = re.compile(r"[\s:：.．、,，;；!！?？—–\-·(（]|$")
"""What follows a chapter's number on a plain-text heading line: a space, a punctuation
mark or the line's end (`第二章：重逢`, `Chapter 2: The Storm`), so that a line of prose
that starts like one (`第一回合，…`) is no heading."""
ROMAN = re.compile(r"m{0,3}(cm|cd|d?c{0,3})(xc|xl|l?x{0,3})(ix|iv|v?i{0,3})")
ROMAN_VALUES = {"m": 1000, "d": 500, "c": 100, "l": 50, "x": 10, "v": 5, "i": 1}


def chinese_number(text: str) -> int | None:
    """The value of a number in Chinese numerals (二十七 → 27, 一百零三 → 103, 一〇三 →
    103) or Arabic digits, or None when `text` is not one."""
    if text.isascii():
        return int(text) if text.isdigit() else None
    if any(char not in DIGITS and char not in UNITS for char in text):
        return None
    if not any(char in UNITS for char in text):  # digit by digit: 一〇三
        return int("".join(str(DIGITS[char]) for char in text))
    total, digit = 0, None
    for char in text:
        if char in DIGITS:
            digit = DIGITS[char]
        else:  # 十 alone means one ten
            total += (1 if digit is None else digit) * UNITS[char]
            digit = None
    return total + (digit or 0)


def english_number(text: str) -> int | None:
    """The value of a chapter number written in English: digits, a Roman numeral in capitals
    (`XII`: in lower case too many words read as one, `mix`, `did`) or words up to
    ninety-nine (`Twelve`, `Twenty-One`), else None."""
    if text.isascii() and text.isdigit():
        return int(text)
    lower = text.lower()
    if text.isupper() and ROMAN.fullmatch(lower):
        values = [ROMAN_VALUES[char] for char in lower]
        after = [*values[1:], 0]
        return sum(-v if v < next_value else v for v, next_value in zip(values, after, strict=True))
    tens, _, unit = lower.replace("-", " ").partition(" ")
    if unit:
        return TENS[tens] + WORDS[unit] if tens in TENS and unit in WORDS else None
    return WORDS.get(tens, TENS.get(tens))


def chapter_number(heading: str) -> int | None:
    """The chapter a heading starts (`第二十七回 尸魔三戏唐三藏` → 27), else None."""
    match = NUMBER.match(heading)
    return None if match is None else _value(match)


def _value(match: re.Match[str]) -> int | None:
    """The value of the number a `NUMBER` match found."""
    if match.group(1) is not None:
        return chinese_number(match.group(1))
    return english_number(match.group(2))


def is_chapter_heading(line: str) -> bool:
    """Whether a line of plain text is a chapter heading: it starts with a chapter's number
    (`chapter_number`) followed by a space, a punctuation mark or nothing (`HEADING_END`)."""
    match = NUMBER.match(line)
    return (
        match is not None
        and HEADING_END.match(line, match.end()) is not None
        and _value(match) is not None
    )


def section_chapter(section: Sequence[str]) -> int | None:
    """The chapter of a passage: the number of the innermost chapter heading of its path."""
    for heading in reversed(section):
        number = chapter_number(heading)
        if number is not None:
            return number
    return None


def check_chapter(name: str, chapter: Any) -> int:
    """A chapter number (an integer ≥ 0) or a one-line error."""
    if isinstance(chapter, bool) or not isinstance(chapter, int) or chapter < 0:
        raise InvalidArgumentError(name, f"must be an integer ≥ 0 (a chapter), got {chapter!r}")
    return chapter


def as_of_filter(
    metadata_filter: Mapping[str, Any] | None, as_of_chapter: int | None
) -> Mapping[str, Any] | None:
    """`metadata_filter` narrowed to passages of chapter `as_of_chapter` or earlier."""
    if as_of_chapter is None:
        return metadata_filter
    scoped = {"chapter": {"$lte": check_chapter("as_of_chapter", as_of_chapter)}}
    if not metadata_filter:
        return scoped
    return {"$and": [dict(metadata_filter), scoped]}
