"""Files to passages: text, Markdown and HTML, each passage knowing its section path.

The splitter is where a passage's place in its document is known, so it records the heading
path (for hierarchy links) and, for HTML, the passage's own markup (for its hyperlinks).
Every step is linear in the input (files are user-supplied: no backtracking regex over a
line, no re-copying the rest of a long piece), and no passage is blank.
"""

from __future__ import annotations

import codecs
import re
import unicodedata
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

from bs4 import BeautifulSoup, Tag

from graphstore.chapters import section_chapter
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
SENTENCE = re.compile(r".*?(?:[.!?。！？；]+[”’\"'」』）)\]]*\s*|$)", re.DOTALL)
"""A sentence with what follows its end up to the next one: closing quotes and brackets (a
Chinese quotation closes after its 。, so its ” stays with it), then spaces."""
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
    prologue: bool = False
    """Before the first chapter heading of a document that has chapters (front matter, a
    楔子): chapter 0, so that a search as of any chapter finds it."""

    @property
    def id(self) -> str:
        """Stable across runs, so re-ingesting a file overwrites rather than duplicates."""
        return f"{self.source}#{self.position}"

    @property
    def chapter(self) -> int | None:
        """The number of the chapter the passage is in (its innermost chapter heading), 0
        for a prologue."""
        return 0 if self.prologue else section_chapter(self.section)


def passage_source(node_id: str) -> str | None:
    """The source of a passage id made by the splitters (`source#position`), else None."""
    source, mark, position = node_id.rpartition("#")
    if (
        mark
        and position.isascii()
        and position.isdigit()
        and Path(source).suffix.lower() in SUFFIXES
    ):
        return source
    return None


class FolderFiles(NamedTuple):
    """The entries under a folder with an ingestible suffix, not hidden: the regular files
    to read, and those `skipped`, neither a file nor a folder (a link to nothing or to
    itself, a pipe, a device), which an ingest names instead of passing over in silence."""

    files: list[Path]
    skipped: list[Path]


def scan_folder(folder: Path, suffixes: Collection[str]) -> FolderFiles:
    """The files under `folder` whose suffix (in any case) is one of `suffixes`, sorted,
    leaving out hidden files and folders below it (a project's `.git` or `.venv` is not
    ingested), and the entries with such a suffix that cannot be read as a file."""
    found = FolderFiles([], [])
    for path in sorted(folder.rglob("*")):
        if path.suffix.lower() not in suffixes or any(
            part.startswith(".") for part in path.relative_to(folder).parts
        ):
            continue
        if path.is_file():
            found.files.append(path)
        elif not path.is_dir():
            found.skipped.append(path)
    return found


def read_text(path: Path) -> str:
    """A file's text as UTF-8 (a BOM and CRLF tolerated), or a one-line error."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise InvalidInputError(f"cannot read {path}: {error.strerror}") from error
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise InvalidInputError(f"{path} is UTF-16, not UTF-8; convert it first")
    if b"\x00" in data[:8192]:
        raise InvalidInputError(f"{path} looks binary, not like a text file")
    try:
        return data.decode("utf-8-sig").replace("\r\n", "\n")
    except UnicodeDecodeError as error:
        raise InvalidInputError(
            f"{path} is not UTF-8 (byte {error.start}); convert it first"
        ) from error


def check_max_chars(max_chars: object) -> int:
    """`max_chars` if it is a positive integer, else a one-line error (0 would never finish)."""
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
        raise InvalidInputError(f"max_chars must be a positive integer, got {max_chars!r}")
    return max_chars


def pack(pieces: list[str], max_chars: int) -> list[str]:
    """Join pieces greedily into chunks of at most `max_chars`; long pieces split at sentences."""
    check_max_chars(max_chars)
    parts: list[str] = []
    for raw in pieces:
        piece = raw.strip()
        if len(piece) <= max_chars:
            parts.append(piece)
        else:
            parts.extend(_sentences(piece, max_chars))
    return _join(parts, "\n\n", max_chars)


def _sentences(text: str, max_chars: int) -> list[str]:
    """Sentences joined up to `max_chars`; a longer sentence is cut every `max_chars`.  Cut
    pieces lose the whitespace at their ends and are joined by one space, or by none where
    either side is a wide (CJK) character: Chinese text comes back as written."""
    pieces = [
        piece
        for sentence in SENTENCE.findall(text)
        for start in range(0, len(sentence), max_chars)
        if (piece := sentence[start : start + max_chars].strip())
    ]
    spaced = [
        piece if not index or _wide(pieces[index - 1][-1]) or _wide(piece[0]) else " " + piece
        for index, piece in enumerate(pieces)
    ]
    return [chunk.strip() for chunk in _join(spaced, "", max_chars)]


def _wide(character: str) -> bool:
    return unicodedata.east_asian_width(character) in ("W", "F")


def _join(parts: Iterable[str], separator: str, max_chars: int) -> list[str]:
    """Consecutive non-blank parts joined by `separator` into chunks of at most `max_chars`."""
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for part in parts:
        if not part:
            continue
        if current and size + len(separator) + len(part) > max_chars:
            chunks.append(separator.join(current))
            current, size = [], 0
        size += len(part) + (len(separator) if current else 0)
        current.append(part)
    if current:
        chunks.append(separator.join(current))
    return chunks


def _paragraphs(text: str) -> list[str]:
    return re.split(r"\n\s*\n", text)


def split_text(source: str, text: str, max_chars: int) -> list[Passage]:
    """Plain text: paragraphs packed into passages, chapter heading lines as sections."""
    check_max_chars(max_chars)
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
    return with_prologue(passages)


def markdown_heading(line: str) -> tuple[int, str] | None:
    """`(level, title)` of an ATX heading line (`## Title ##`), else None; linear time."""
    marks = len(line) - len(line.lstrip("#"))
    rest = line[marks:]
    if not 1 <= marks <= 6 or not rest[:1].isspace():
        return None
    title = rest.strip()
    unclosed = title.rstrip("#")
    if not unclosed or unclosed[-1].isspace():  # a closing run of #s follows a space
        title = unclosed.rstrip()
    return (marks, title) if title else None


def split_markdown(source: str, text: str, max_chars: int) -> list[Passage]:
    """Markdown: one run of passages per section, headings (outside code fences) as the path."""
    check_max_chars(max_chars)
    sections: list[tuple[tuple[str, ...], list[str]]] = [((), [])]
    path: list[str] = []
    in_fence = False
    for line in text.split("\n"):
        if FENCE.match(line):
            in_fence = not in_fence
        heading = None if in_fence else markdown_heading(line)
        if heading:
            level, title = heading
            path = [*path[: level - 1], title]
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
    check_max_chars(max_chars)
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
            # A block cut into pieces: its markup (for hyperlinks) goes with the first piece
            # only, so a long paragraph's markup is kept once, not once per piece.
            markup = str(element)
            for number, piece in enumerate(pack([content], max_chars)):
                blocks.append((piece, "" if number else markup))
    flush()
    return with_prologue(passages)


SPLITTERS = {"text": split_text, "markdown": split_markdown, "html": split_html}


def split_file(path: Path, source: str, max_chars: int = MAX_CHARS) -> list[Passage]:
    """The passages of one file, by its suffix."""
    check_max_chars(max_chars)
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise InvalidInputError(f"{path}: unsupported file type {path.suffix or '(none)'}")
    return SPLITTERS[kind](source, read_text(path), max_chars)


def with_prologue(passages: list[Passage]) -> list[Passage]:
    """`passages` with those before the first chapter marked as its prologue (chapter 0),
    when the document has chapters at all."""
    first = next((i for i, passage in enumerate(passages) if passage.chapter is not None), 0)
    return [replace(p, prologue=True) for p in passages[:first]] + passages[first:]
