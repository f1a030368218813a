"""Card files: Markdown with YAML front matter, or YAML, one card a file (a YAML file may
hold a list of cards, or several documents separated by `---`).

```markdown
---
name: 孙悟空
kind: character
aliases: [行者, 悟空, 大圣]
attributes:
  称号:
    - {value: 美猴王, chapter: 1}
    - {value: 齐天大圣, chapter: 4}
  兵器: {value: 如意金箍棒, chapter: 3}
  出身: 花果山仙石      # no chapter: true from the start
---
The body is the card's description.
```

Every file of a folder is read and checked before any card is stored; a bad one stops the
ingest with one line naming the file and the problem.  Each card records its file's absolute
path (`Card.file`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from graphstore.cards import Card, card_from_mapping, check_names
from graphstore.errors import InvalidInputError
from graphstore.file_identity import FileVersion, file_version
from graphstore.splitting import FolderFiles, read_text, recorded_file, scan_folder

MARKDOWN = (".md", ".markdown")
YAML = (".yaml", ".yml")
MERGE = "tag:yaml.org,2002:merge"


@cache
def _loader() -> type[Any]:
    """PyYAML's safe loader refusing a key given twice in one mapping: it keeps the last
    silently, so a second `home:` line written for a later chapter erased the first value.
    (PyYAML is imported when the first card file is read: a search, which reads none, does
    not wait for it.)"""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):  # type: ignore[misc]
        def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == MERGE:  # `<<: *anchor` keys may be overridden
                    continue
                key = self.construct_object(key_node, deep=deep)
                if not isinstance(key, Hashable):
                    continue  # the base class refuses it in its own words
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"the key {key!r} is given twice", key_node.start_mark
                    )
                seen.add(key)
            mapping: dict[Any, Any] = super().construct_mapping(node, deep)
            return mapping

    return UniqueKeyLoader


@contextmanager
def _yaml_errors(source: str, first_line: int) -> Iterator[None]:
    """YAML's errors as one line with the file's line number, the text read starting on
    `first_line` (a Markdown card's front matter on the second)."""
    import yaml

    try:
        yield
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + first_line}" if mark is not None else ""
        problem = getattr(error, "problem", None) or "cannot be parsed"
        raise InvalidInputError(f"{source}: not valid YAML{where}: {problem}") from error


def _yaml(text: str, source: str, first_line: int = 1) -> Any:
    """The one YAML document in `text`, read by `_loader` (a SafeLoader)."""
    import yaml

    with _yaml_errors(source, first_line):
        return yaml.load(text, Loader=_loader())


def _yaml_documents(text: str, source: str) -> list[Any]:
    """The YAML documents in `text` that are not empty (a file may end with `---`), read
    by `_loader`; [None] when none is."""
    import yaml

    with _yaml_errors(source, 1):
        documents = [doc for doc in yaml.load_all(text, Loader=_loader()) if doc is not None]
    return documents or [None]


def parse_markdown_card(text: str, source: str) -> Card:
    """A card from Markdown: front matter between `---` lines, the body as description."""
    lines = text.split("\n")
    if lines[0].strip() != "---":
        raise InvalidInputError(f"{source}: a Markdown card starts with a front matter line ---")
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
    if end is None:
        raise InvalidInputError(f"{source}: the front matter has no closing --- line")
    fields = _yaml("\n".join(lines[1:end]), source, first_line=2)
    body = "\n".join(lines[end + 1 :]).strip()
    if isinstance(fields, dict) and body:
        if fields.get("description"):
            raise InvalidInputError(f"{source}: a description in the front matter and a body")
        fields = {**fields, "description": body}
    return card_from_mapping(fields, source)


def parse_yaml_cards(text: str, source: str) -> list[Card]:
    """The card, or list of cards, of each YAML document in a file (documents separated by
    `---`, as many writers separate them, or end a file with it)."""
    listed = [
        card
        for data in _yaml_documents(text, source)
        for card in (data if isinstance(data, list) else [data])
    ]
    if len(listed) == 1:
        return [card_from_mapping(listed[0], source)]
    return [
        replace(card_from_mapping(item, f"{source}[{n}]"), source=source)
        for n, item in enumerate(listed)
    ]


class CardFolder(NamedTuple):
    """The cards of a folder, and its entries with a card suffix that are neither a file nor
    a folder (`splitting.FolderFiles.skipped`), named as passage sources are."""

    cards: list[Card]
    skipped: list[str]
    files: list[str]
    """The recorded path (`recorded_file`) of every card file read, those declaring no card
    (`[]`) too: a card ingest removes the cards such a file no longer declares."""
    versions: dict[Path, FileVersion | None]
    """Each file's version (`file_version`) taken before it was read: a card ingest removes
    only the stale cards of files still as read (`CardPlan.as_read`)."""


def card_files(folder: Path, store_files: Collection[str] = ()) -> FolderFiles:
    """The card files under `folder` (`.md`, `.markdown`, `.yaml`, `.yml`; not hidden, not
    the store's own `store_files`): none when it does not exist (whether that is an error
    depends on the cards stored from it), a one-line error when it is not a folder."""
    if not os.path.lexists(folder):
        return FolderFiles([], [], [])
    if not folder.is_dir():
        raise InvalidInputError(f"{folder} is not a folder of cards")
    return scan_folder(folder, MARKDOWN + YAML, store_files)


def read_cards(
    folder: Path, source_name: Callable[[Path], str], store_files: Collection[str] = ()
) -> CardFolder:
    """Every card under `folder` (`card_files`, without `store_files`), checked, with no two
    sharing a name or alias; `source_name` names a file as passage ids do, and each card
    records its file's absolute path."""
    found = card_files(folder, store_files)
    cards: list[Card] = []
    files: list[str] = []
    versions: dict[Path, FileVersion | None] = {}
    for path in found.files:
        source = source_name(path)
        versions[path] = file_version(path)
        text = read_text(path)
        if path.suffix.lower() in MARKDOWN:
            declared = [parse_markdown_card(text, source)]
        else:
            declared = parse_yaml_cards(text, source)
        file = recorded_file(path)
        files.append(file)
        cards.extend(replace(card, file=file) for card in declared)
    skipped = [source_name(path) for path in found.skipped]
    return CardFolder(check_names(cards), skipped, files, versions)
