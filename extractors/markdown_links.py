"""Hyperlinks of Markdown: a passage links out to the pages it cites and in from its own
page, with the tags `HtmlLinkExtractor` gives (`html_links.page_links`), so a Markdown file
and an HTML page that cite each other meet.

Found, as CommonMark reads them: inline links `[text](target)`, reference links
`[text][label]`, `[label][]` and `[label]` with their definitions `[label]: target`,
autolinks `<https://…>` and HTML anchors `<a href="…">`.  Not found: images (`![alt](src)`)
and links in their descriptions, the outer one of nested links, escaped brackets, anything in
code (fenced blocks, code spans) or in an HTML comment.  Indented code blocks are read as
text, since a nested list is indented the same way, and so is a code span that wraps over
lines.  The scan is linear in the text (passages come from user files): it reads each
character once, a target reads at most `MAX_TARGET` more, and a title that does not close is
read again from its first bracket (`_past_title`).  A passage's reference links
reach the definitions of its whole file through `MarkdownInput.definitions`
(`graphstore.markdown.passage_markups`).
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from extractors.base import LinkExtractor, document_source
from extractors.html_links import page_links
from graphstore.links import Link
from graphstore.markdown import (
    MAX_LABEL,
    MAX_TARGET,
    definition,
    definitions,
    link_label,
    prose_lines,
)

if TYPE_CHECKING:
    from langchain_core.documents import Document

AUTOLINK = re.compile(rf"<([A-Za-z][A-Za-z0-9+.-]{{1,31}}:[^\s<>]{{0,{MAX_TARGET}}})>")
ANCHOR = re.compile(
    r"<a\s[^<>]*?\bhref\s*=\s*(?:\"([^\"<>]*)\"|'([^'<>]*)'|([^\s\"'<>]+))", re.IGNORECASE
)
BACKTICKS = re.compile(r"`+")
TITLE_OPENERS = "\"'("
ESCAPABLE = frozenset(string.punctuation)
"""What a backslash escapes in CommonMark: ASCII punctuation (before anything else it is
text, so it cannot hide a line ending)."""


@dataclass(frozen=True)
class MarkdownInput:
    """A Markdown text, the URL of the page (file) it comes from, and the link definitions
    of the whole file when the text is one passage of it (the text's own are read too; the
    file's win, as the first definition of a label does)."""

    text: str
    base_url: str
    definitions: Mapping[str, str] = field(default_factory=dict)


def _without_comments(text: str) -> str:
    """`text` with each closed HTML comment `<!-- … -->` replaced by a space."""
    pieces = []
    start = 0
    while (opened := text.find("<!--", start)) >= 0:
        closed = text.find("-->", opened + 4)
        if closed < 0:
            break
        pieces.append(text[start:opened])
        start = closed + 3
    return " ".join([*pieces, text[start:]])


def _outside_code_spans(line: str) -> str:
    """`line` with its code spans blanked out: a run of backticks not escaped by a
    backslash opens one when a run of the same length follows it (escapes do not work
    inside, so any such run closes it); a lone backtick is text."""
    runs = [(found.start(), found.end()) for found in BACKTICKS.finditer(line)]
    closing: list[int | None] = [None] * len(runs)
    last: dict[int, int] = {}  # run length -> the next run of that length seen so far
    for index in reversed(range(len(runs))):
        start, end = runs[index]
        closing[index] = last.get(end - start)
        last[end - start] = index
    pieces = []
    kept_from = 0
    index = 0
    while index < len(runs):
        start = runs[index][0]
        closed = closing[index]
        if closed is not None and not _escaped(line, start):
            pieces.append(line[kept_from:start])
            kept_from, index = runs[closed][1], closed + 1
        else:
            index += 1
    return " ".join([*pieces, line[kept_from:]])


def _escaped(text: str, index: int) -> bool:
    """Whether a backslash escapes the character at `index` (one that is not escaped
    itself; a run of backslashes is not looked into)."""
    return text[index - 1 : index] == "\\" and text[index - 2 : index - 1] != "\\"


def _target(prose: str, start: int) -> tuple[str | None, int]:
    """The inline link target that starts at `start` (after `](`) and where the scan goes
    on: `<…>`, or up to a space, a `[` or the `)` that closes the link (balanced
    parentheses are part of it; a backslash escapes the next character).  None when a `)`,
    or a title that closes and then a `)`, does not follow (`_past_title`), or a blank line
    splits the link: then it is no link, and the scan goes on after what was read."""
    start = _past_space(prose, start)
    if prose.startswith("<", start):
        end = prose.find(">", start + 1, start + 1 + MAX_TARGET)
        target = prose[start + 1 : end] if end > 0 else "\n"
        if "\n" in target:
            return None, start + 1
        end += 1
    else:
        characters: list[str] = []
        depth = 0
        end = start
        while end < len(prose) and end - start < MAX_TARGET:
            char = prose[end]
            if char.isspace() or char == "[" or (char == ")" and depth == 0):
                break
            if char == "\\" and end + 1 < len(prose):
                end += 1
                char = prose[end]
            else:
                depth += {"(": 1, ")": -1}.get(char, 0)
            characters.append(char)
            end += 1
        target = "".join(characters)
    after = _past_space(prose, end)
    if end < after < len(prose) and prose[after] in TITLE_OPENERS:
        closed, end = _past_title(prose, after)
        return (target if closed else None), end
    return (target if prose.startswith(")", after) else None), end


def _past_title(prose: str, start: int) -> tuple[bool, int]:
    """Whether the link title that opens at `start` (`"…"`, `'…'` or `(…)`, not across a
    blank line, a backslash escaping the punctuation after it) closes and the link's `)`
    follows it, and where the scan goes on: after that `)`, so a bracket in the title is no
    link; else at the first bracket the title read, where a link may start or end (else
    where it stopped).  A title ends at the first closer of its kind, so each character is
    read by at most one title of each kind, and the scan stays linear."""
    closer = ")" if prose[start] == "(" else prose[start]
    first_bracket = None
    index = start + 1
    while index < len(prose):
        char = prose[index]
        if char == "\\" and prose[index + 1 : index + 2] in ESCAPABLE:
            index += 2
            continue
        if char == closer:
            index = _past_space(prose, index + 1)
            if prose.startswith(")", index):
                return True, index + 1
            break
        if (char == "(" and closer == ")") or (char == "\n" and _paragraph_ends(prose, index + 1)):
            break
        if char in "[]" and first_bracket is None:
            first_bracket = index
        index += 1
    return False, index if first_bracket is None else first_bracket


def _past_space(prose: str, index: int) -> int:
    """Where the white space from `index` ends, or the line ending before a blank line: a
    blank line ends the paragraph, and with it any link."""
    while index < len(prose) and prose[index].isspace():
        if prose[index] == "\n" and _paragraph_ends(prose, index + 1):
            break
        index += 1
    return index


def _paragraph_ends(prose: str, index: int) -> bool:
    """Whether the line that starts at `index` is blank (or the text ends there)."""
    while index < len(prose) and prose[index] in " \t":
        index += 1
    return index == len(prose) or prose[index] == "\n"


def _inline_targets(prose: str, defined: Mapping[str, str] | None = None) -> Iterator[str]:
    """The targets of the inline and reference links in `prose` (code and definitions
    blanked), with `defined` labels.  Each `]` closes the innermost `[` open in its
    paragraph; it is a link when `(target)` follows or it names a defined label, unless it
    opens an image, lies in an image's description, or holds a link (links do not nest).
    A `](` before any `[` is a link whose text began in an earlier passage (a long
    paragraph cut in two).  The scan goes on after each target (after a title that does not
    close, from its first bracket), so it stays linear."""
    labels = defined or {}
    opened: list[tuple[int, bool, int]] = []
    """(where its text starts, whether it opens an image, links found before it)"""
    links = 0
    images = 0
    continued = True  # no bracket yet: a `](` may close a text an earlier passage began
    index = 0
    while index < len(prose):
        char = prose[index]
        index += 1
        if char == "\\":
            continued = continued and not prose.startswith("[", index)
            index += 1
        elif char == "\n" and _paragraph_ends(prose, index):
            opened.clear()
            images = 0
        elif char == "[":
            image = prose[index - 2 : index - 1] == "!" and not _escaped(prose, index - 2)
            opened.append((index, image, links))
            images += image
            continued = False
        elif char == "]" and (opened or (continued and prose.startswith("(", index))):
            continued = False
            start, image, before = opened.pop() if opened else (-1, False, links)
            images -= image
            shown = not image and not images and before == links
            if prose.startswith("(", index):
                target, index = _target(prose, index + 1)
            else:
                target, index = _reference(prose, start, index, labels)
            if target is not None:
                links += not image
                if shown:
                    yield target


def _reference(
    prose: str, start: int, index: int, labels: Mapping[str, str]
) -> tuple[str | None, int]:
    """The target of a reference link whose text runs from `start` to the `]` before
    `index` (`[text][label]`, `[label][]` or `[label]`), and where the scan goes on."""
    label = prose[start : index - 1] if start >= 0 and index - 1 - start <= MAX_LABEL else ""
    if prose.startswith("[", index):
        close = prose.find("]", index + 1, index + 2 + MAX_LABEL)
        if close > 0 and "[" not in prose[index + 1 : close]:
            label = prose[index + 1 : close] or label
            index = close + 1
    target = labels.get(link_label(label)) if label.strip() else None
    return target, index


def markdown_targets(text: str, defined: Mapping[str, str] | None = None) -> set[str]:
    """Every link target in a Markdown text (see the module docstring), with the labels of
    `defined` besides those the text defines."""
    labels = {**definitions(text), **(defined or {})}
    prose = _without_comments(
        "\n".join(
            _outside_code_spans(line) if shown and definition(line) is None else ""
            for line, shown in prose_lines(text)
        )
    )
    targets = set(_inline_targets(prose, labels))
    targets.update(found.group(1) for found in AUTOLINK.finditer(prose))
    targets.update(next(filter(None, found.groups()), "") for found in ANCHOR.finditer(prose))
    return targets - {""}


class MarkdownLinkExtractor(LinkExtractor[MarkdownInput]):
    """`out` links to every page a Markdown passage cites, an `in` link for its own page."""

    def __init__(self, *, kind: str = "hyperlink", drop_fragments: bool = True) -> None:
        self.kind = kind
        self.drop_fragments = drop_fragments

    def document_input(self, document: Document) -> MarkdownInput:
        """A `Document`'s Markdown, read as the page in its `source` metadata."""
        return MarkdownInput(document.page_content, document_source(document, self))

    def extract_one(self, input: MarkdownInput) -> set[Link]:
        """The hyperlink tags of one passage."""
        targets = markdown_targets(input.text, input.definitions)
        return page_links(self.kind, input.base_url, targets, self.drop_fragments)
