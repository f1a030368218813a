"""Files to passages: text, Markdown and HTML, each passage knowing its section path.

The splitter is where a passage's place in its document is known, so it records the heading
path (for hierarchy links) and, for HTML, the passage's own markup (for its hyperlinks).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bs4 import BeautifulSoup, Tag

from graphstore.errors import InvalidInputError

MAX_CHARS = 1000
"""The longest passage the splitters make, in characters, unless told otherwise."""

SUFFIXES = {
    ".txt": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
}
HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
BLOCKS = ("p", "pre", "li", "dt", "dd", "blockquote", "td", "th", "figcaption")
SENTENCE_END = re.compile(r"(?<=[.!?。！？；])\s*")
MARKDOWN_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
CHAPTER = re.compile(
    r"^\s*(第[〇零一二三四五六七八九十百千两\d]+[回章卷节]|chapter\s+\w+)(\s|$)", re.IGNORECASE
)
"""A chapter heading line in plain text: 第二十七回 … (Chinese novels) or `Chapter 12`."""


@dataclass(frozen=True)
class Passage:
    """A piece of a document small enough to embed, with where it came from."""

    source: str
    position: int
    text: str
    section: tuple[str, ...] = ()
    html: str | None = None

    @property
    def id(self) -> str:
        """Stable across runs, so re-ingesting a file overwrites rather than duplicates."""
        return f"{self.source}#{self.position}"


def read_text(path: Path) -> str:
    """A file's text as UTF-8 (a BOM and CRLF tolerated), or a one-line error."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise InvalidInputError(f"cannot read {path}: {error.strerror}") from error
    if b"\x00" in data[:8192]:
        raise InvalidInputError(f"{path} looks binary; only text, Markdown and HTML are ingested")
    try:
        return data.decode("utf-8-sig").replace("\r\n", "\n")
    except UnicodeDecodeError as error:
        raise InvalidInputError(
            f"{path} is not UTF-8 (byte {error.start}); convert it first"
        ) from error


def pack(pieces: list[str], max_chars: int) -> list[str]:
    """Join pieces greedily into chunks of at most `max_chars`; long pieces split at sentences."""
    chunks: list[str] = []
    current = ""
    for raw in pieces:
        piece = raw.strip()
        if not piece:
            continue
        parts = [piece] if len(piece) <= max_chars else _sentences(piece, max_chars)
        for part in parts:
            if current and len(current) + 2 + len(part) > max_chars:
                chunks.append(current)
                current = ""
            current = f"{current}\n\n{part}" if current else part
    if current:
        chunks.append(current)
    return chunks


def _sentences(text: str, max_chars: int) -> list[str]:
    parts: list[str] = []
    current = ""
    for whole in SENTENCE_END.split(text):
        sentence = whole
        while len(sentence) > max_chars:
            parts.append(sentence[:max_chars])
            sentence = sentence[max_chars:]
        if current and len(current) + 1 + len(sentence) > max_chars:
            parts.append(current)
            current = ""
        current = f"{current} {sentence}".strip() if current else sentence
    if current:
        parts.append(current)
    return parts


def _paragraphs(text: str) -> list[str]:
    return re.split(r"\n\s*\n", text)


def split_text(source: str, text: str, max_chars: int) -> list[Passage]:
    """Plain text: paragraphs packed into passages, chapter heading lines as sections."""
    sections: list[tuple[tuple[str, ...], list[str]]] = [((), [])]
    for line in text.split("\n"):
        if CHAPTER.match(line):
            sections.append(((line.strip(),), [line]))
        else:
            sections[-1][1].append(line)
    return _pack_sections(source, sections, max_chars)


def _pack_sections(
    source: str, sections: list[tuple[tuple[str, ...], list[str]]], max_chars: int
) -> list[Passage]:
    passages: list[Passage] = []
    for section, lines in sections:
        for chunk in pack(_paragraphs("\n".join(lines)), max_chars):
            passages.append(Passage(source, len(passages), chunk, section))
    return passages


def split_markdown(source: str, text: str, max_chars: int) -> list[Passage]:
    """Markdown: one run of passages per section, headings (outside code fences) as the path."""
    sections: list[tuple[tuple[str, ...], list[str]]] = [((), [])]
    path: list[str] = []
    in_fence = False
    for line in text.split("\n"):
        if FENCE.match(line):
            in_fence = not in_fence
        heading = None if in_fence else MARKDOWN_HEADING.match(line)
        if heading:
            level = len(heading.group(1))
            path = [*path[: level - 1], heading.group(2)]
            sections.append((tuple(path), [line]))
        else:
            sections[-1][1].append(line)
    return _pack_sections(source, sections, max_chars)


def _leaf_blocks(root: Tag) -> Iterator[Tag]:
    """Headings and the innermost text blocks, in document order."""
    for element in root.find_all([*HEADINGS, *BLOCKS]):
        if element.name in HEADINGS or not element.find(BLOCKS):
            yield element


def _clean(text: str) -> str:
    return re.sub(r"[ \t\r\f\v]+", " ", text.replace("¶", "")).strip()


def split_html(source: str, text: str, max_chars: int) -> list[Passage]:
    """HTML: the main content's blocks grouped by heading, each passage keeping its markup."""
    soup = BeautifulSoup(text, "html.parser")
    root = soup.find(role="main") or soup.find("main") or soup.body or soup
    assert isinstance(root, Tag)
    path: list[str] = []
    passages: list[Passage] = []
    blocks: list[tuple[str, str]] = []

    def flush() -> None:
        current_text, current_html = "", ""
        for block_text, block_html in blocks:
            if current_text and len(current_text) + 2 + len(block_text) > max_chars:
                passages.append(
                    Passage(source, len(passages), current_text, tuple(path), current_html)
                )
                current_text, current_html = "", ""
            current_text = f"{current_text}\n\n{block_text}" if current_text else block_text
            current_html += block_html
        if current_text:
            passages.append(Passage(source, len(passages), current_text, tuple(path), current_html))
        blocks.clear()

    for element in _leaf_blocks(root):
        content = _clean(element.get_text(" " if element.name != "pre" else ""))
        if not content:
            continue
        if element.name in HEADINGS:
            flush()
            level = int(element.name[1])
            path = [*path[: level - 1], content]
            blocks.append((content, ""))
        else:
            for piece in pack([content], max_chars):
                blocks.append((piece, str(element)))
    flush()
    return passages


SPLITTERS = {"text": split_text, "markdown": split_markdown, "html": split_html}


def split_file(path: Path, source: str, max_chars: int = MAX_CHARS) -> list[Passage]:
    """The passages of one file, by its suffix."""
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise InvalidInputError(f"{path}: unsupported file type {path.suffix or '(none)'}")
    return SPLITTERS[kind](source, read_text(path), max_chars)
