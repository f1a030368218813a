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
NUMBER = re.compile(
    r"^\s*(?:第\s*([〇零一二三四五六七八九十百千两\d]+)\s*[回章卷节]|chapter\s+(\d+)\b)",
    re.IGNORECASE,
)
"""The number of a chapter heading: 第二十七回 (also 章, 卷, 节) or `Chapter 12`."""


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


def chapter_number(heading: str) -> int | None:
    """The chapter a heading starts (`第二十七回 尸魔三戏唐三藏` → 27), else None."""
    match = NUMBER.match(heading)
    if match is None:
        return None
    return chinese_number(match.group(1) or match.group(2))


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
