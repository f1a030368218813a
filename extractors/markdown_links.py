"""Hyperlinks of Markdown: a passage links out to the pages it cites and in from its own
page, with the tags `HtmlLinkExtractor` gives (`html_links.page_links`), so a Markdown file
and an HTML page that cite each other meet.

Found: inline links `[text](target)`, reference definitions `[label]: target` and autolinks
`<https://…>`; not images (`![alt](src)`), nor anything in a fenced code block or a code
span.  The scan is linear in the text (passages come from user files): each character is
read once, and a target for at most `MAX_TARGET` characters.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from extractors.base import LinkExtractor
from extractors.html_links import page_links
from graphstore.links import Link

MAX_TARGET = 2048
"""The longest link target read, in characters: longer ones are cut there (no page is
named by one)."""
FENCES = ("```", "~~~")
REFERENCE = re.compile(r" {0,3}\[[^\]]{1,999}\]:[ \t]*(\S{1,2048})")
AUTOLINK = re.compile(r"<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]{0,2048})>")


@dataclass(frozen=True)
class MarkdownInput:
    """A Markdown text and the URL of the page (file) it comes from."""

    text: str
    base_url: str


def _outside_code_spans(line: str) -> str:
    """`line` with its code spans (between backticks) blanked out."""
    pieces = line.split("`")
    return " ".join(piece for index, piece in enumerate(pieces) if index % 2 == 0)


def _target(line: str, start: int) -> tuple[str, int]:
    """The link target that starts at `start` in `line` (after `](`) and where it ends:
    `<…>`, or up to a space (a line's end too) or the `)` that closes the link (balanced
    parentheses are part of it)."""
    while start < len(line) and line[start] in " \t":
        start += 1
    if line.startswith("<", start):
        end = line.find(">", start + 1, start + 1 + MAX_TARGET)
        target = line[start + 1 : end] if end > 0 else "\n"
        return ("", start + 1) if "\n" in target else (target, end + 1)
    depth = 0
    end = start
    while end < len(line) and end - start < MAX_TARGET:
        char = line[end]
        if char.isspace() or (char == ")" and depth == 0):
            break
        depth += {"(": 1, ")": -1}.get(char, 0)
        end += 1
    return line[start:end], end


def _inline_targets(prose: str) -> Iterator[str]:
    """The targets of the inline links in `prose`, not of images: each `]` followed by `(`
    closes the innermost open `[` (on this line or an earlier one: link text may wrap),
    which opens an image when `!` precedes it.  The scan goes on after the target, so no
    character is read twice."""
    opened: list[bool] = []
    index = 0
    while index < len(prose):
        char = prose[index]
        index += 1
        if char == "[":
            opened.append(prose[index - 2 : index - 1] == "!")
        elif char == "]" and opened and prose.startswith("(", index):
            target, index = _target(prose, index + 1)
            if not opened.pop():
                yield target
        elif char == "]" and opened:
            opened.pop()


def markdown_targets(text: str) -> set[str]:
    """Every link target in a Markdown text (see the module docstring)."""
    targets: set[str] = set()
    prose: list[str] = []
    in_fence = False
    for raw in text.split("\n"):
        if raw.lstrip().startswith(FENCES):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        line = _outside_code_spans(raw)
        prose.append(line)
        reference = REFERENCE.match(line)
        if reference:
            targets.add(reference.group(1).removeprefix("<").removesuffix(">"))
        targets.update(match.group(1) for match in AUTOLINK.finditer(line))
    targets.update(_inline_targets("\n".join(prose)))
    return targets - {""}


class MarkdownLinkExtractor(LinkExtractor[MarkdownInput]):
    """`out` links to every page a Markdown passage cites, an `in` link for its own page."""

    def __init__(self, *, kind: str = "hyperlink", drop_fragments: bool = True) -> None:
        self.kind = kind
        self.drop_fragments = drop_fragments

    def extract_one(self, input: MarkdownInput) -> set[Link]:
        """The hyperlink tags of one passage."""
        return page_links(
            self.kind, input.base_url, markdown_targets(input.text), self.drop_fragments
        )
