"""Files to passages: text, Markdown and HTML, each passage knowing its section path.

The splitter is where a passage's place in its document is known, so it records the heading
path (for hierarchy links) and, for HTML, the passage's own markup (for its hyperlinks).
Every step is linear in the input (files are user-supplied: no backtracking regex over a
line, no re-copying the rest of a long piece), and no passage is blank.

BeautifulSoup is imported when the first page is split, not with the module: its import
took longer than the rest of a command line search, which splits nothing.
"""

from __future__ import annotations

import codecs
import os
import re
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from graphstore.chapters import is_chapter_heading, passage_chapters
from graphstore.errors import InvalidArgumentError, InvalidInputError
from graphstore.file_identity import file_identities, file_identity
from graphstore.markdown import MarkdownMarkup, heading_text, passage_markups, prose_lines
from graphstore.nodes import SUFFIXES

if TYPE_CHECKING:
    from bs4 import Tag
    from bs4.element import NavigableString, PageElement

MAX_CHARS = 1000
"""The longest passage the splitters make, in characters, unless told otherwise."""

HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
BLOCKS = ("p", "pre", "li", "dt", "dd", "blockquote", "td", "th", "figcaption")
INLINE = frozenset(
    (
        "a",
        "abbr",
        "acronym",
        "b",
        "bdi",
        "bdo",
        "big",
        "br",
        "cite",
        "code",
        "data",
        "del",
        "dfn",
        "em",
        "font",
        "i",
        "img",
        "ins",
        "kbd",
        "label",
        "mark",
        "nobr",
        "q",
        "ruby",
        "s",
        "samp",
        "small",
        "span",
        "strike",
        "strong",
        "sub",
        "sup",
        "time",
        "tt",
        "u",
        "var",
        "wbr",
    )
)
"""Phrasing elements: text in them runs on with the text around them; any other element
(a div, a section, a list) ends a run of loose text, as a browser starts a new line."""
HIDDEN = ("head", "title", "script", "style", "template")
"""Elements whose content a browser does not show as page text."""
NOT_DISPLAYED = re.compile(r"(?:^|;)\s*display\s*:\s*none\s*(?:!important\s*)?(?:;|$)", re.I)
"""An inline style that hides its element (`style="display: none"`)."""
SENTENCE = re.compile(
    r".*?(?:(?<![.!?])[.!?]++[”’\"'」』）)\]]*+(?:\s+|\Z)"
    r"|(?:[。！？；｡]|．(?![0-9０-９]))+[”’\"'」』）)\]]*\s*|\Z)",
    re.DOTALL,
)
"""A sentence with what follows its end up to the next one: closing quotes and brackets (a
Chinese quotation closes after its 。, so its ” stays with it), then spaces.  A `.`, `!` or
`?` ends one only before a space or the end, never inside `3.14`, `example.com` or
`notes.md`; a run of them is tried once, from its start (linear on `.....`).  The full-width
`．` ends a Chinese sentence as `。` does (editions of 红楼梦 end most sentences with it),
except before a digit (`３．１４`; a numbered item's `２．` ends one, as its line would)."""
LAST_SPACE = re.compile(r"[^\S\u00a0\u2007\u202f][\S\u00a0\u2007\u202f]*\Z")
"""The last breaking space of a string (not a no-break space): where a long sentence is cut."""
CLAUSE_MARK = re.compile(r"[，、；：][^，、；：]*\Z")
"""The last Chinese clause mark of a string (，、；：): where a long sentence without spaces
is cut, right after it, rather than at the limit in the middle of a word."""
NOT_SPACE = re.compile(r"\S")
LEADING_BLANK_LINES = re.compile(r"\A(?:[^\S\n]*\n)+")


@dataclass(frozen=True)
class Passage:
    """A piece of a document small enough to embed, with where it came from."""

    source: str
    position: int
    text: str
    section: tuple[str, ...] = ()
    markup: str | MarkdownMarkup | None = None
    """The passage's own markup, for its hyperlinks: its HTML for an HTML page, its Markdown
    as it reads in its file (`markdown.passage_markups`), None for text."""
    chapter: int | None = None
    """The number of the chapter it is in (`chapters.passage_chapters`), None in a document
    without chapter headings."""
    file: str = ""
    """The absolute path of the file it was split from (`recorded_file`), "" when unknown."""

    @property
    def id(self) -> str:
        """Stable across runs, so re-ingesting a file overwrites rather than duplicates."""
        return f"{self.source}#{self.position}"


class FolderFiles(NamedTuple):
    """The entries under a folder, not hidden: the regular files with an ingestible suffix
    to read, and those `skipped`, which an ingest names instead of passing over in silence:
    an entry with such a suffix that is neither a file nor a folder (a link to nothing or
    to itself, a pipe, a device), a link to a folder, and a folder it may not read.  Also
    `hidden`: the files with such a suffix whose name starts with a dot, left out but named
    (2Wiki's `...Baby One More Time (song).txt` was missing from the count in silence); a
    hidden folder (`.git`) is not looked into."""

    files: list[Path]
    skipped: list[Path]
    hidden: list[Path]


def scan_folder(
    folder: Path, suffixes: Collection[str], leave_out: Collection[str] = ()
) -> FolderFiles:
    """The files under `folder` whose suffix (in any case) is one of `suffixes`, sorted,
    leaving out hidden files and folders below it (a project's `.git` or `.venv` is not
    ingested) and the files `leave_out` names (the store's own, `Storage.local_files`), and
    the entries not read: those with such a suffix that cannot be read as a file, links to
    folders (not followed, as `find` and `git` do not follow them: a link may lead back up
    or out of the tree; give the folder itself to ingest it), and folders that may not be
    read (which `Path.rglob` passes over in silence).  A stack, not recursion, so a deep
    tree is no limit."""
    left_out = file_identities(leave_out)
    files: list[Path] = []
    skipped: list[Path] = []
    hidden: list[Path] = []
    stack = [folder]
    while stack:
        top = stack.pop()
        try:
            with os.scandir(top) as listing:
                entries = [Path(entry.path) for entry in listing]
        except OSError:
            skipped.append(top)
            continue
        for path in entries:
            if path.name.startswith("."):
                identity = file_identity(path) if path.suffix.lower() in suffixes else None
                if identity is not None and identity not in left_out:
                    hidden.append(path)
                continue
            if os.path.isdir(path):  # never raises: a folder it may not look at is no folder
                (skipped if path.is_symlink() else stack).append(path)
            elif path.suffix.lower() not in suffixes:
                continue
            elif (identity := file_identity(path)) is None:
                skipped.append(path)
            elif identity not in left_out:
                files.append(path)
    return FolderFiles(sorted(files), sorted(skipped), sorted(hidden))


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
        raise InvalidArgumentError("max_chars", f"must be a positive integer, got {max_chars!r}")
    return max_chars


def pack(pieces: list[str], max_chars: int) -> list[str]:
    """Join pieces greedily into chunks of at most `max_chars`; long pieces split at sentences.
    A piece keeps its first line's indent (in Markdown four spaces make a line code, and
    the code block's first line lost them while the others kept theirs)."""
    check_max_chars(max_chars)
    parts: list[str] = []
    for raw in pieces:
        piece = LEADING_BLANK_LINES.sub("", raw).rstrip()
        if len(piece) <= max_chars:
            parts.append(piece)
        else:
            parts.extend(_items(piece, max_chars))
    return _join(_breaks_attached(parts, max_chars), "\n\n", max_chars)


def _breaks_attached(parts: list[str], max_chars: int) -> list[str]:
    """`parts` with each scene break (`---`, `* * *`) joined to the text after it, or else
    before it, where together they fit: a break is no passage of its own, as a heading is
    not (only one between two passages each too full to take it stays alone)."""
    attached: list[str] = []
    waiting: list[str] = []
    for part in parts:
        if THEMATIC_BREAK.fullmatch(part):
            waiting.append(part)
            continue
        opened = "\n\n".join([*waiting, part])
        if waiting and len(opened) > max_chars:
            attached = _after(attached, waiting, max_chars)
            opened = part
        attached.append(opened)
        waiting = []
    return _after(attached, waiting, max_chars)


def _after(parts: list[str], breaks: list[str], max_chars: int) -> list[str]:
    """`parts` with `breaks` joined to the last one where they fit, else after it."""
    if not breaks:
        return parts
    closed = "\n\n".join(parts[-1:] + breaks)
    if parts and len(closed) <= max_chars:
        return [*parts[:-1], closed]
    return [*parts, *breaks]


BREAK_MARKS = r"(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})"
"""The marks of a scene break line (`---`, `* * *`, `___`)."""
THEMATIC_BREAK = re.compile(rf" {{0,3}}{BREAK_MARKS}")
"""A scene break (`---`, `* * *`): it ends a paragraph, and is no heading's text."""
ITEM_START = re.compile(
    r"\n(?=[ \t]{0,3}(?:[-*+][ \t]|\d{1,9}[.)][ \t]|\|))"
    rf"(?![ \t]{{0,3}}{BREAK_MARKS}(?:\n|\Z))"
)
"""A line break before a list item or a table row (not a `* * *` or `- - -` scene break):
where a paragraph too long for one passage is cut first, since a row or an item cut in two
is read whole by neither passage (a list's items rarely end in a full stop, a table's rows
never do)."""


def _items(text: str, max_chars: int) -> list[str]:
    """A paragraph longer than `max_chars` in chunks: its list items or table rows (one per
    line) joined up to `max_chars`, each longer one cut between sentences; other text cut
    between sentences."""
    items = ITEM_START.split(text)
    if len(items) == 1:
        return _sentences(text, max_chars)
    parts = [
        part
        for item in items
        for part in ([item] if len(item) <= max_chars else _sentences(item, max_chars))
    ]
    return _join(parts, "\n", max_chars)


def _sentences(text: str, max_chars: int) -> list[str]:
    """Sentences joined up to `max_chars`; a longer sentence is cut at its last space within
    `max_chars` (`_cuts`).  A chunk is the text as written from its first piece to its last
    (line breaks, code and fences, Chinese without spaces, all as they were), but where it
    was cut, and for a run of white space that would not fit, which is kept as one line
    break or space."""
    spans: list[tuple[int, int]] = []
    for found in SENTENCE.finditer(text):
        for start, end in _cuts(found.group(), max_chars):
            piece = found.group()[start:end]
            kept = piece if not spans else piece.lstrip()  # the first keeps its indent
            if kept.strip():
                begin = found.start() + start + len(piece) - len(kept)
                spans.append((begin, begin + len(kept.rstrip())))
    chunks: list[str] = []
    current = ""
    for index, (start, end) in enumerate(spans):
        piece = text[start:end]
        gap = text[spans[index - 1][1] : start] if current else ""
        if len(current) + len(gap) + len(piece) > max_chars:
            gap = "\n" if "\n" in gap else gap[:1]
        if current and len(current) + len(gap) + len(piece) > max_chars:
            chunks.append(current)
            current, gap = "", ""
        current += gap + piece
    return [*chunks, current] if current else chunks


def _cuts(sentence: str, max_chars: int) -> Iterator[tuple[int, int]]:
    """`(start, end)` of pieces of at most `max_chars` covering `sentence`, each ending at the
    last space or Chinese clause mark (`CLAUSE_MARK`) that keeps it within the limit, so no
    word is cut in two (and a heading above a long Chinese sentence is not cut off at its
    line break); a piece with neither (a long URL) ends at the limit.  Linear: a piece that
    ends early leaves no cut between its end and the limit, so every two pieces advance
    past `max_chars`."""
    start = 0
    while start < len(sentence):
        end = start + max_chars
        if end < len(sentence):
            space = LAST_SPACE.search(sentence, start + 1, end + 1)
            mark = CLAUSE_MARK.search(sentence, start + 1, end)
            cuts = [found.start() for found in (space,) if found]
            cuts += [found.start() + 1 for found in (mark,) if found]
            end = max(cuts, default=end)
        else:
            end = len(sentence)
        yield start, end
        following = NOT_SPACE.search(sentence, end)  # the next piece starts at a word
        start = following.start() if following else len(sentence)


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
    sections = [_Section((), [], 0)]
    for line in text.split("\n"):
        if is_chapter_heading(line):
            sections.append(_Section((line.strip(),), [line], 1))
        else:
            sections[-1].lines.append(line)
    return _pack_sections(source, sections, max_chars)


class _Section(NamedTuple):
    """The lines of one section of a text or Markdown file, its heading's first."""

    path: tuple[str, ...]
    lines: list[str]
    heading: int
    """How many of `lines` the heading takes; before the first heading, how many the
    front matter takes (metadata, not a passage of its own either)."""

    @property
    def heading_only(self) -> bool:
        """Whether the section holds no text but its heading and scene breaks (`# Chapter 3`
        right before `## At the harbour`, or a file's opening `---` rule before its first
        heading)."""
        return any(line.strip() for line in self.lines) and not any(
            map(_holds_text, self.lines[self.heading :])
        )


def _holds_text(line: str) -> bool:
    """Whether a line holds text: it is neither blank nor a scene break."""
    return bool(line.strip()) and not THEMATIC_BREAK.fullmatch(line)


def _pack_sections(source: str, sections: list[_Section], max_chars: int) -> list[Passage]:
    """Each section's paragraphs packed into passages.  A section holding only its heading
    opens the next section's first passage instead of being a passage of one line, which
    no question is about and which a search or a prompt would spend a place on; the last
    section of a file stays whatever it holds.  Scene breaks at a section's end open the
    next one's first passage too."""
    passages: list[Passage] = []
    opening: list[str] = []
    for number, section in enumerate(sections):
        last = number + 1 == len(sections)
        if section.heading_only and not last:
            opening += section.lines
            continue
        body = section.lines[section.heading :]
        closing = [] if last else _closing_breaks(body)
        heading = [*opening, *section.lines[: section.heading]]
        paragraphs = _headed(heading, body[: len(body) - len(closing)], max_chars)
        for chunk in pack(paragraphs, max_chars):
            passages.append(Passage(source, len(passages), chunk, section.path))
        opening = closing
    return with_chapters(passages)


def _closing_breaks(lines: list[str]) -> list[str]:
    """The lines after a section's last text, when a scene break is among them."""
    start = len(lines)
    while start and not _holds_text(lines[start - 1]):
        start -= 1
    closing = lines[start:]
    return closing if any(line.strip() for line in closing) else []  # a line not blank: a break


def _headed(heading: list[str], body: list[str], max_chars: int) -> list[str]:
    """The paragraphs of a section, its `heading` lines and its first paragraph of `body` as
    one, so a heading never ends a passage alone (`第三回 …` above a first paragraph of
    nearly `max_chars` was a passage of one line); when together they are too long, the
    heading takes the first sentences that fit beside it (`_opened`)."""
    paragraphs = _paragraphs("\n".join([*heading, *body]))
    if not heading:
        return paragraphs
    head = _paragraphs("\n".join(heading))
    opening = len(head) + (1 if body and not body[0].strip() else 0)
    while opening < len(paragraphs) and THEMATIC_BREAK.fullmatch(paragraphs[opening - 1]):
        opening += 1  # a scene break under the heading: the text after it joins too
    joined = "\n\n".join(paragraphs[:opening])
    return [*_opened(joined, len("\n\n".join(head)), max_chars), *paragraphs[opening:]]


def _opened(joined: str, heading_length: int, max_chars: int) -> list[str]:
    """A heading and the text under it (`joined`, its first `heading_length` characters the
    heading) as pieces `pack` keeps apart: the heading with the first sentences of the text
    that fit beside it, cut as `pack` cuts (a text whose first sentence ends in `?`, or has
    no space but the heading's line break, left the heading alone), then the rest."""
    text = joined[heading_length:].lstrip("\n")
    between = joined[heading_length : len(joined) - len(text)]
    room = max_chars - heading_length - len(between)
    if len(joined) <= max_chars or not text.strip() or room < 1:
        return [joined]
    first = _items(text, room)[0]
    if not text.startswith(first):  # white space cut out of it: pack's own cut then
        return [joined]
    rest = text[len(first) :]
    return [joined[: len(joined) - len(rest)], rest.lstrip(" \t")]


def markdown_heading(line: str) -> tuple[int, str] | None:
    """`(level, title)` of an ATX heading line (`## Title ##`, indented at most three
    spaces: four make it code), else None; linear time."""
    unindented = line.lstrip(" ")
    if len(line) - len(unindented) > 3:
        return None
    marks = len(unindented) - len(unindented.lstrip("#"))
    rest = unindented[marks:]
    if not 1 <= marks <= 6 or not rest[:1].isspace():
        return None
    title = rest.strip()
    unclosed = title.rstrip("#")
    if not unclosed or unclosed[-1].isspace():  # a closing run of #s follows a space
        title = unclosed.rstrip()
    return (marks, title) if title else None


SETEXT_UNDERLINE = re.compile(r" {0,3}(?:=+|-+)[ \t]*")
"""A setext heading's underline: `===` (level 1) or `---` (level 2) under a line of text."""
OTHER_BLOCK = re.compile(r" {4}| {0,3}(?:[>#<|]|[-*+][ \t]|\d{1,9}[.)][ \t])")
"""The start of a block that is not a paragraph (indented code, a quote, HTML, a table row,
a list item): no underline below it makes a heading."""
MAX_SETEXT = 200
"""The longest line an underline makes a heading of, in characters: a novel's paragraph
followed by a `---` scene break is text, whatever CommonMark says."""
FRONT_MATTER_KEY = re.compile(r"""(["']?)[^\W\d][\w -]*\1:(?:[ \t]|$)""")
"""How a YAML front matter block's first line starts: a key and a colon (`title: …`,
`标题: …`, `"pov": …`)."""


def front_matter_length(text: str) -> int:
    """How many lines a YAML front matter block takes at the start of `text` (`---`, a line
    `key: …`, …, then `---` or `...`), else 0: metadata, in which no line is a heading.  A
    file that merely starts with a `---` rule has none."""
    lines = text.split("\n", 1)
    if lines[0].rstrip() != "---" or len(lines) < 2 or not FRONT_MATTER_KEY.match(lines[1]):
        return 0
    for number, line in enumerate(text.split("\n")[1:], 1):
        if line.rstrip() in ("---", "..."):
            return number + 1
    return 0


def markdown_headings(text: str) -> Iterator[tuple[str, tuple[int, str] | None, int]]:
    """Each line of a Markdown text with the heading it ends, if any, as `(level, title)`,
    and how many lines before it the heading takes: 1 for a setext heading (a line of text
    that starts a paragraph, at most `MAX_SETEXT` long, underlined), 0 for an ATX heading.
    No heading is looked for in a code fence or the front matter.  (CommonMark also makes a
    paragraph of several lines a heading; a novel converted from plain text, one paragraph
    a line and no blank line, would then be one heading of a whole chapter.)"""
    front = front_matter_length(text)
    title: str | None = None  # the line before, when an underline would make it a heading
    after_block = True  # the line before ends a block: a blank line, a heading, a fence
    for number, (line, prose) in enumerate(prose_lines(text)):
        body = prose and number >= front
        if body and title is not None and SETEXT_UNDERLINE.fullmatch(line):
            yield line, (1 if "=" in line else 2, title.strip()), 1
            title, after_block = None, True
            continue
        atx = markdown_heading(line) if body else None
        ends = bool(atx) or not body or not line.strip() or bool(THEMATIC_BREAK.fullmatch(line))
        starts = after_block and not ends and len(line) <= MAX_SETEXT
        title = line if starts and not OTHER_BLOCK.match(line) else None
        after_block = ends
        yield line, atx, 0


def split_markdown(source: str, text: str, max_chars: int) -> list[Passage]:
    """Markdown: one run of passages per section, headings (outside code fences) as the path."""
    check_max_chars(max_chars)
    sections = [_Section((), [], front_matter_length(text))]  # front matter opens as a heading
    path: list[str] = []
    for line, heading, taken in markdown_headings(text):
        if heading is None:
            sections[-1].lines.append(line)
            continue
        level, title = heading
        lines = sections[-1].lines
        title_lines = lines[len(lines) - taken :]
        del lines[len(lines) - taken :]
        path = [*path[: level - 1], heading_text(title)]
        sections.append(_Section(tuple(path), [*title_lines, line], taken + 1))
    passages = _pack_sections(source, sections, max_chars)
    markups = passage_markups(text, [passage.text for passage in passages])
    return [replace(p, markup=markup) for p, markup in zip(passages, markups, strict=True)]


class _HtmlBlock(NamedTuple):
    """A piece of a page's text that a passage may start with: a heading, a text block, or a
    run of loose text between them."""

    text: str
    markup: str
    """The block's own HTML, for its hyperlinks (none for a heading)."""
    level: int = 0
    """The heading level, 0 for text."""
    preformatted: bool = False
    """A `<pre>` block: its text keeps its spaces and line breaks (code keeps its indent)."""


def _holders(root: Tag) -> set[int]:
    """The `id`s of the elements under `root` holding a heading or a text block (in linear
    time: each element is marked once, from its first such descendant)."""
    marked: set[int] = set()
    for element in root.find_all([*HEADINGS, *BLOCKS]):
        parent = element.parent
        while parent is not None and parent is not root and id(parent) not in marked:
            marked.add(id(parent))
            parent = parent.parent
    return marked


def _html_blocks(root: Tag) -> Iterator[_HtmlBlock]:
    """The visible text under `root`, in document order: headings, innermost text blocks
    (`BLOCKS` holding no heading or block), and the runs of loose text between them (a
    div's text, a list item's words before its sublist), so no text is lost to the element
    it sits in.  Iterative, so no nesting depth overflows the stack."""
    from bs4 import Tag
    from bs4.element import CData, NavigableString

    holders = _holders(root)
    run: list[Tag | NavigableString] = []

    def end_run() -> Iterator[_HtmlBlock]:
        text = "".join(_shown_text(p) if isinstance(p, Tag) else str(p) for p in run)
        markup = "".join(str(p) if isinstance(p, Tag) else p.output_ready() for p in run)
        run.clear()
        if cleaned := _clean(text):
            yield _HtmlBlock(cleaned, markup)

    stack: list[tuple[Iterator[PageElement], bool]] = [(iter(root.children), True)]
    while stack:
        children, breaks = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            if breaks:
                yield from end_run()
        elif isinstance(child, NavigableString):
            if type(child) in (NavigableString, CData):  # not a comment, not a doctype
                run.append(child)
        elif not isinstance(child, Tag) or child.name in HIDDEN:
            continue
        elif child.name in HEADINGS or (child.name in BLOCKS and id(child) not in holders):
            yield from end_run()
            preformatted = child.name == "pre"
            content = _code(child.get_text()) if preformatted else _clean(_shown_text(child))
            if content:
                level = int(child.name[1]) if child.name in HEADINGS else 0
                yield _HtmlBlock(content, "" if level else str(child), level, preformatted)
        elif child.name in INLINE and id(child) not in holders:
            run.append(child)
        else:
            inline = child.name in INLINE
            if not inline:
                yield from end_run()
            stack.append((iter(child.children), not inline))


def _shown_text(element: Tag) -> str:
    """An element's text as a browser lays it out in one block: its strings as they are
    (the spaces between words are in them; a separator put "See this . Also bold ," where
    the page says "See this. Also bold,"), a `<br>` a line break."""
    from bs4 import Tag
    from bs4.element import CData, NavigableString

    shown = []
    for piece in element.descendants:
        if isinstance(piece, Tag) and piece.name == "br":
            shown.append("\n")
        elif type(piece) in (NavigableString, CData):  # not a comment, a script or a style
            shown.append(str(piece))
    return "".join(shown)


def _clean(text: str) -> str:
    """A block's text with every run of spaces but line breaks as one space: a non-breaking
    space (`&nbsp;`, as in a DocBook heading `Chapter&nbsp;3.`) too, so that section paths
    read and filter as typed."""
    return re.sub(r"[^\S\n]+", " ", text.replace("¶", "")).strip()


def _code(text: str) -> str:
    """A `<pre>` block's text: its lines as they are, without the blank lines around it."""
    return text.replace("¶", "").strip("\r\n").rstrip()


def _not_shown(element: Tag) -> bool:
    """An element a browser does not render: `hidden`, or an inline `display: none`.
    (`aria-hidden` hides from screen readers only; such text is on the page.)"""
    style = element.get("style")
    return element.has_attr("hidden") or (
        isinstance(style, str) and NOT_DISPLAYED.search(style) is not None
    )


def split_html(source: str, text: str, max_chars: int) -> list[Passage]:
    """HTML: the main content's blocks grouped by heading, each passage keeping its markup."""
    from bs4 import BeautifulSoup, Tag

    check_max_chars(max_chars)
    soup = BeautifulSoup(text, "html.parser")
    for hidden in soup.find_all(_not_shown):  # `hidden`: a browser does not render it
        hidden.decompose()
    root = soup.find(role="main") or soup.find("main") or soup.body or soup
    assert isinstance(root, Tag)
    path: list[str] = []
    passages: list[Passage] = []
    blocks: list[tuple[str, str, bool]] = []
    """The next passage's blocks: text, markup, and whether the block is a heading."""

    def flush() -> None:
        current_text, current_html = "", ""
        for block_text, block_html, _ in blocks:
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

    for block in _html_blocks(root):
        if block.level:
            if not all(heading for *_, heading in blocks):  # headings alone open the next
                flush()
            path = [*path[: block.level - 1], block.text]
            blocks.append((block.text, "", True))
        else:
            # A block cut into pieces: its markup (for hyperlinks) goes with the first piece
            # only, so a long paragraph's markup is kept once, not once per piece.
            pieces: list[str] | None = None
            if blocks and all(heading for *_, heading in blocks) and not block.preformatted:
                # Its headings open it, however long, so none ends a passage alone; unless
                # they fill the first piece, which must hold the start of the block (its
                # markup goes there).
                headings = "\n\n".join(heading for heading, *_ in blocks)
                headed = pack([f"{headings}\n\n{block.text}"], max_chars)
                if len(headed[0]) > len(headings):
                    pieces = headed
                    blocks.clear()
            if pieces is None:
                whole = block.preformatted and len(block.text) <= max_chars
                pieces = [block.text] if whole else pack([block.text], max_chars)
            for number, piece in enumerate(pieces):
                blocks.append((piece, "" if number else block.markup, False))
    flush()
    return with_chapters(passages)


SPLITTERS = {"text": split_text, "markdown": split_markdown, "html": split_html}


def path_text(path: str) -> str:
    """A path as text any store keeps: bytes of a file name that are not UTF-8 as `\\xNN`."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


ESCAPED_BYTE = re.compile(rb"\\x([89a-f][0-9a-f])")
"""How `path_text` writes a byte that is not UTF-8 (always 0x80 or above)."""


def text_path(text: str) -> str:
    """The path `path_text` wrote as `text`, each `\\xNN` back to its byte (a name that spells
    `\\xff` out reads as the byte: try `text` itself first)."""
    return os.fsdecode(
        ESCAPED_BYTE.sub(lambda found: bytes.fromhex(found[1].decode()), os.fsencode(text))
    )


FILE = "file"
"""The metadata key of the absolute path of a passage's or a card's file (`recorded_file`)."""


def recorded_file(path: Path) -> str:
    """The absolute path of a file as its passages record it (`Passage.file`)."""
    return path_text(os.path.abspath(path))


def split_file(path: Path, source: str, max_chars: int = MAX_CHARS) -> list[Passage]:
    """The passages of one file, by its suffix, each recording the file's absolute path."""
    check_max_chars(max_chars)
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise InvalidInputError(f"{path}: unsupported file type {path.suffix or '(none)'}")
    file = recorded_file(path)
    return [replace(p, file=file) for p in SPLITTERS[kind](source, read_text(path), max_chars)]


def with_chapters(passages: list[Passage]) -> list[Passage]:
    """`passages` (one document's, in order) with their chapters."""
    chapters = passage_chapters([passage.section for passage in passages])
    return [replace(p, chapter=chapter) for p, chapter in zip(passages, chapters, strict=True)]
