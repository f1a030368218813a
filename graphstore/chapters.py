"""Chapters: the number of a chapter heading, and retrieval scoped to the story so far.

A novel's facts change as it goes on; a writer drafting chapter 28 wants nothing from
chapter 29 on.  The splitters record the chapter number of each passage (metadata
`chapter`, an integer), so a search can ask for `{"chapter": {"$lte": 27}}`.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from graphstore.errors import InvalidArgumentError

DIGITS = {"〇": 0, "零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4}
DIGITS |= {"五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
UNITS = {"十": 10, "百": 100, "千": 1000}
CHINESE_TENS = str.maketrans({"廿": "二十", "卅": "三十", "卌": "四十"})
"""Numerals for twenty, thirty and forty that old novels use (第廿回)."""
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
UNIT_WORDS = "one|two|three|four|five|six|seven|eight|nine"
BELOW_HUNDRED = (
    rf"(?:(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)(?:[- ](?:{UNIT_WORDS}))?"
    rf"|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen"
    rf"|{UNIT_WORDS})"
)
BELOW_THOUSAND = (
    rf"(?:{BELOW_HUNDRED}[- ]hundred(?:[- ](?:and[- ])?{BELOW_HUNDRED})?|{BELOW_HUNDRED})"
)
NUMBER_WORDS = rf"{BELOW_THOUSAND}(?:[- ]thousand(?:[- ](?:and[- ])?{BELOW_THOUSAND})?)?"
"""A number written in English words below a million (`Twenty-One`, `One Hundred and
Five`, `Eleven Hundred`): the longest such phrase, so that `Chapter One Hundred` is 100,
not 1."""
CHINESE_NUMBER = r"[〇零一二三四五六七八九十百千两廿卅卌\d]+"
VOLUME = (
    rf"(?:第\s*{CHINESE_NUMBER}\s*[卷部集][^第\n]{{0,40}}"
    rf"|(?:book|part|volume)\s+(?:\d+|[ivxlc]+|{NUMBER_WORDS})\b[,:.]?\s*)"
)
"""A volume's number and title before a chapter's on one heading (`第一卷 初入江湖 第一章
出发`, `Book Two, Chapter 3`): the chapter's number counts."""
WORDS_NUMBER = re.compile(NUMBER_WORDS)
NUMBER = re.compile(
    rf"^\s*[*_`~]*\s*{VOLUME}?(?:第\s*({CHINESE_NUMBER})\s*[回章]"
    rf"|chapter\s+(\d+|(?:{NUMBER_WORDS}|[a-z]+)(?!-[a-z]))\b)",
    re.IGNORECASE,
)
"""The number of a chapter heading: 第二十七回 (also 章) or `Chapter 12` (also `Chapter
XII`, `Chapter Twelve`), after any emphasis or code marks (`**Chapter 2**`); matched in
NFKC form with character references resolved (`第１２章`, `Chapter&nbsp;6`).  A number
word joined to another by a hyphen is the whole number or none (`Chapter Twenty-First` is
no chapter 20).  A volume (卷) holds chapters and a section (节) is part of one: neither
starts a chapter, so in 第一卷 › 第三章 › 第一节 the passage is in chapter 3."""
HEADING_END = re.compile(r"[\s:：.．。、,，;；!！?？—–\-·~～(（\[【〔《〈「『\"“'‘]|$")
"""What follows a chapter's number on a plain-text heading line: a space, a punctuation
mark, an opening bracket or quote, or the line's end (`第二章：重逢`, `第一章《开端》`,
`第三章「重逢」`, `Chapter 2: The Storm`), so that a line of prose that starts like one
(`第一回合，…`) is no heading."""
ROMAN = re.compile(r"m{0,3}(cm|cd|d?c{0,3})(xc|xl|l?x{0,3})(ix|iv|v?i{0,3})")
ROMAN_VALUES = {"m": 1000, "d": 500, "c": 100, "l": 50, "x": 10, "v": 5, "i": 1}


def chinese_number(text: str) -> int | None:
    """The value of a number in Chinese numerals (二十七 → 27, 一百零三 → 103, 一〇三 →
    103, 廿三 → 23) or Arabic digits, or None when `text` is not one."""
    if text.isdecimal():  # also full-width digits: 第１２章
        return int(text)
    text = text.translate(CHINESE_TENS)
    if not text or any(char not in DIGITS and char not in UNITS for char in text):
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
    (`XII`: in lower case too many words read as one, `mix`, `did`) or words below a
    million (`Twelve`, `Twenty-One`, `One Hundred and Five`), else None."""
    if text.isdecimal():
        return int(text)
    lower = text.lower()
    if text.isupper() and ROMAN.fullmatch(lower):
        values = [ROMAN_VALUES[char] for char in lower]
        after = [*values[1:], 0]
        return sum(-v if v < next_value else v for v, next_value in zip(values, after, strict=True))
    if not WORDS_NUMBER.fullmatch(lower):
        return None
    total, current = 0, 0
    for word in re.split(r"[- ]", lower):
        if word == "thousand":
            total, current = total + current * 1000, 0
        elif word == "hundred":
            current *= 100
        elif word != "and":
            current += WORDS.get(word) or TENS[word]
    return total + current


def _number_match(heading: str) -> tuple[str, re.Match[str] | None]:
    """`heading` as chapter numbers are read in it (NFKC, character references resolved)
    and the `NUMBER` match at its start."""
    normalized = unicodedata.normalize("NFKC", html.unescape(heading))
    return normalized, NUMBER.match(normalized)


def chapter_number(heading: str) -> int | None:
    """The chapter a heading starts (`第二十七回 尸魔三戏唐三藏` → 27), else None."""
    _, match = _number_match(heading)
    return None if match is None else _value(match)


def _value(match: re.Match[str]) -> int | None:
    """The value of the number a `NUMBER` match found."""
    if match.group(1) is not None:
        return chinese_number(match.group(1))
    return english_number(match.group(2))


def is_chapter_heading(line: str) -> bool:
    """Whether a line of plain text is a chapter heading: it starts with a chapter's number
    (`chapter_number`) followed by a space, a punctuation mark or nothing (`HEADING_END`)."""
    normalized, match = _number_match(line)
    return (
        match is not None
        and HEADING_END.match(normalized, match.end()) is not None
        and _value(match) is not None
    )


def section_chapter(section: Sequence[str]) -> int | None:
    """The number of the innermost chapter heading of a section path, else None."""
    for heading in reversed(section):
        number = chapter_number(heading)
        if number is not None:
            return number
    return None


def passage_chapters(sections: Sequence[Sequence[str]]) -> list[int | None]:
    """The chapter of each passage of a document, from their section paths in order.

    A passage is in the chapter of the innermost chapter heading of its path, else in the
    last chapter before it: an unnumbered heading after a chapter (`# Epilogue`, a volume's
    introduction) stays in it, as a line of plain text does.  Before the first chapter
    heading it is in chapter 0, a prologue in every chapter's past, when that chapter is the
    first (0 or 1); otherwise in that chapter, since a file that starts at chapter 5 is part
    of a book, and what comes before its heading (front matter, an epigraph) is chapter 5's.
    A document without chapter headings has no chapters."""
    known: dict[tuple[str, ...], int | None] = {}  # a section's passages share its chapter
    own = []
    for section in sections:
        key = tuple(section)
        if key not in known:
            known[key] = section_chapter(key)
        own.append(known[key])
    first = next((chapter for chapter in own if chapter is not None), None)
    if first is None:
        return own
    current = first if first > 1 else 0
    chapters: list[int | None] = []
    for chapter in own:
        current = current if chapter is None else chapter
        chapters.append(current)
    return chapters


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
