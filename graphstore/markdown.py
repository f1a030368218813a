"""The Markdown syntax the splitter and the hyperlink extractor share: code fences, link
reference definitions and their labels (CommonMark's rules, as far as links need them).

A file is split into passages, but a code fence or a link definition belongs to the file:
`passage_markups` gives each passage as it reads in its file, so its links can be read
without the rest of the file.  Every scan here is linear in the text (files are user
input).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

FENCE = re.compile(r" {0,3}(`{3,}+|~{3,}+)")
MAX_LABEL = 999
"""The longest link label CommonMark allows, in characters."""
MAX_TARGET = 2048
"""The longest link target read, in characters: a longer one is no link."""
DEFINITION = re.compile(
    r"(?:[ \t]*+>)*+[ \t]*+(?:[-*+][ \t]++|\d{1,9}[.)][ \t]++)?"
    rf"\[([^\[\]]{{1,{MAX_LABEL}}})\]:[ \t]*+(<[^<>\n]{{0,{MAX_TARGET}}}>|\S{{1,{MAX_TARGET}}}+)"
    r"(?:[ \t]++(?:\"[^\"\n]*+\"|'[^'\n]*+'|\([^()\n]*+\)))?+[ \t]*+$"
)
"""A link reference definition line `[label]: target "title"` (in a block quote or a list
item too); the target may be `<in angle brackets>`, which allows spaces, and nothing but a
title may follow it."""
MAX_PLAIN_HEADING = 500
"""The longest heading whose inline marks `heading_text` takes out, in characters: its
emphasis pattern backtracks, so a longer one (no real heading) is kept as written."""
INLINE_LINK = re.compile(r"!?\[([^\[\]\n]*)\](?:\([^()\n]*\)|\[[^\[\]\n]*\])")
"""An inline or reference link (or image), `[text](target)` or `[text][label]`."""
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
EMPHASIS = re.compile(
    r"(?<![*\\])(\*{1,3})(?=\S)(.+?)(?<=\S)\1(?!\*)"
    r"|(?<![\w\\])(_{1,3})(?=\S)(.+?)(?<=\S)\3(?!\w)"
)
"""Text between matching runs of `*` or `_` that touch it; `_` not inside a word (as in
CommonMark, `snake_case` stays as it is, and `第*一*章` is emphasis)."""


def heading_text(title: str) -> str:
    """A heading's title as it reads: the text of its links, code spans and emphasis without
    their marks (`**Chapter 2** The *storm*` is `Chapter 2 The storm`), as a section path
    and a prompt's citation show it; a title that would read as nothing stays as written."""
    if len(title) > MAX_PLAIN_HEADING:
        return title
    pieces, start = [], 0
    for code in CODE_SPAN.finditer(title):  # a code span's text is kept as it is
        pieces += [_unmarked(title[start : code.start()]), code.group(2).strip()]
        start = code.end()
    text = "".join([*pieces, _unmarked(title[start:])]).strip()
    return text or title


def _unmarked(text: str) -> str:
    text = INLINE_LINK.sub(r"\1", text)
    for _ in range(3):  # `***a***` at once; `**a *b* c**` takes two
        text = EMPHASIS.sub(lambda found: found.group(2) or found.group(4), text)
    return text


def fence_after(line: str, fence: str) -> str:
    """The code fence open after `line` ("" for none), given the one open before it: a run
    of three or more backticks or tildes opens one (a backtick fence's info string holds no
    backtick); only a run of the same character at least as long, alone on its line, closes
    it."""
    found = FENCE.match(line)
    if not found:
        return fence
    run, rest = found.group(1), line[found.end() :]
    if not fence:
        return run if run[0] == "~" or "`" not in rest else ""
    closes = run[0] == fence[0] and len(run) >= len(fence) and not rest.strip()
    return "" if closes else fence


def prose_lines(text: str) -> Iterator[tuple[str, bool]]:
    """Each line of `text` and whether it is prose: not a fence line, not inside a fence."""
    fence = ""
    for line in text.split("\n"):
        before, fence = fence, fence_after(line, fence)
        yield line, not (before or fence)


def link_label(text: str) -> str:
    """A link label as definitions and references match it: case-folded, runs of white
    space as one space."""
    return " ".join(text.split()).casefold()


def definition(line: str) -> tuple[str, str] | None:
    """`(label, target)` of a link reference definition line, else None (a footnote,
    `[^1]: …`, is not one)."""
    found = DEFINITION.match(line)
    if not found or found.group(1).startswith("^"):
        return None
    target = found.group(2)
    if target.startswith("<"):
        target = target[1:-1]
    return link_label(found.group(1)), target


def definitions(text: str) -> dict[str, str]:
    """The target of each label defined in `text` outside code (the first definition of a
    label wins, as in CommonMark)."""
    found: dict[str, str] = {}
    for line, prose in prose_lines(text):
        pair = definition(line) if prose else None
        if pair:
            found.setdefault(*pair)
    return found


@dataclass(frozen=True)
class MarkdownMarkup:
    """A Markdown passage as it reads in its file: its text, with the code fence it starts
    inside opened before it and the one it ends inside closed after it, and its file's link
    definitions (one mapping, shared by every passage of the file)."""

    text: str
    definitions: Mapping[str, str]


def passage_markups(file_text: str, texts: Sequence[str]) -> list[MarkdownMarkup]:
    """The passages of one Markdown file (`file_text`; the passages' texts, in order) as
    they read in the file.  Definitions come from the file as written, since a passage may
    end inside a definition's line."""
    defined = definitions(file_text)
    markups = []
    fence = ""
    for text in texts:
        opened = fence
        for line in text.split("\n"):
            fence = fence_after(line, fence)
        lines = [*([opened] if opened else []), text, *([fence] if fence else [])]
        markups.append(MarkdownMarkup("\n".join(lines), defined))
    return markups
