"""One token budget shared by several sections of a prompt (cards, then passages).

Each section has a share of the budget; what a section leaves unused rolls over to the
next, so the limit of section i is the budget times the shares of sections 0..i together
(the last section's limit is the whole budget), and what the last section leaves goes back
to the entries the earlier ones had no room for (a section of share 0 takes nothing).
Within a section, entries are taken best first while the whole block so far still fits
that limit (an entry too long is skipped so a shorter later one can fit; but a section's
limit stretches, within the budget, to hold its best entry alone, so that a share too small
for the card a scene names does not hand that share to a lesser, shorter card; and when the
best entry of a section before the last is longer alone than the whole budget, that section
takes only its peers, the entries of the same provenance (the other cards the scene names),
for the same reason, and names it in `Filled.left_out`), then shown in
story order: grouped by source, by position within a source; sources by their first
chapter (a book's chapter files in the book's order), else in the order of their best
entries.  Counting the whole rendered block at every step, citations, titles and separators
included, keeps the total within the budget for any token counter.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from graphstore.errors import InvalidInputError
from graphstore.strategy import check_count

TokenCounter = Callable[[str], int]


@dataclass(frozen=True)
class Entry:
    """One cited item of a prompt: a card or a passage."""

    id: str
    text: str
    citation: str
    """Where it comes from (source, chapter, id)."""
    provenance: str
    """Why it is in the prompt (similar to the scene, reached via a tag, named in …)."""
    group: str = ""
    """Its source, for story order."""
    position: int = 0
    """Its place within the source."""
    chapter: int | None = None
    """Its chapter, when its source has chapters: sources are shown in chapter order."""


@dataclass(frozen=True)
class Section:
    """Entries competing for one share of the budget, best first."""

    title: str
    share: float
    entries: Sequence[Entry]


@dataclass(frozen=True)
class Filled:
    """The rendered block and the entries each section kept, in the order shown."""

    text: str
    chosen: list[list[Entry]]
    needed: int | None = None
    """When entries were offered and none fit: the budget the shortest needs alone."""
    first: tuple[str, int] | None = None
    """Then too: the id of the first entry offered (the best) and the budget it needs."""
    left_out: tuple[str, int] | None = None
    """The best entry of a section before the last that is longer alone than the budget,
    and the budget it needs: its section took only its peers (`fill`)."""


def limits(shares: Sequence[float], budget: int) -> list[int]:
    """Each section's cumulative limit: unused share rolls over to the sections after it."""
    if any(not 0 <= share <= 1 for share in shares) or sum(shares) > 1 + 1e-9:
        raise InvalidInputError("section shares must be between 0 and 1 and add up to at most 1")
    running = 0.0
    cumulative = []
    for share in shares:
        running += share
        cumulative.append(math.floor(budget * running + 1e-9))
    return [*cumulative[:-1], budget] if cumulative else []


def story_order(entries: Sequence[Entry]) -> list[Entry]:
    """Entries grouped by source, by position within one, then by chapter (passages an agent
    wrote with a chapter and no position sorted by id, chapter 30 before 28).  Sources
    without chapters come first, then those with, by their first chapter (`c1.md` before
    `c2.md`, whichever passage ranked best); ties in the order of their first entries (the
    best first)."""
    groups: dict[str, int] = {}
    first_chapter: dict[str, int] = {}
    for entry in entries:
        groups.setdefault(entry.group, len(groups))
        if entry.chapter is not None:
            first_chapter[entry.group] = min(
                first_chapter.get(entry.group, entry.chapter), entry.chapter
            )
    return sorted(
        entries,
        key=lambda e: (
            first_chapter.get(e.group, -1),
            groups[e.group],
            e.position,
            -1 if e.chapter is None else e.chapter,
            e.id,
        ),
    )


TEMPLATE_FIELDS = ("number", "citation", "provenance", "text", "id")
MAX_BUDGET = 1_000_000
MAX_FIELD_WIDTH = 1000
"""Widest padding or precision a template field may ask for (`{text:>100000000}` would
build a string of that many spaces, which a token counter may not even count)."""


def check_layout(budget: Any, template: Any, separator: Any) -> None:
    """A budget, an entry template and a separator, or a one-line error naming what is wrong
    (before anything is searched or rendered)."""
    check_count("budget", budget, 1, MAX_BUDGET)
    if not isinstance(template, str) or not isinstance(separator, str):
        raise InvalidInputError("the prompt template and separator must be strings")
    if not template.strip():  # every entry would render as nothing, and fit
        raise InvalidInputError("the prompt template is empty: give at least {text}")
    try:
        parsed = [(name, spec) for _, name, spec, _ in string.Formatter().parse(template)]
    except ValueError as error:
        raise InvalidInputError(f"bad prompt template: {error}") from None
    fields = {name for name, _ in parsed if name is not None}
    if not fields:  # `--template static`: every passage would print as the same words
        raise InvalidInputError(
            "the prompt template has no field, so it would show no passage: give at least {text}"
        )
    specs = [spec for name, spec in parsed if name is not None and spec]
    if any("{" in spec for spec in specs):  # filled in per entry: no width check can see it
        raise InvalidInputError(
            "bad prompt template: a field's format holds another field; give widths as numbers"
        )
    widths = [int(digits) for spec in specs for digits in re.findall(r"\d+", spec)]
    if max(widths, default=0) > MAX_FIELD_WIDTH:
        raise InvalidInputError(
            f"bad prompt template: a field padded or cut to {max(widths)} characters; "
            f"at most {MAX_FIELD_WIDTH}"
        )
    unknown = sorted(fields - set(TEMPLATE_FIELDS))
    if unknown:
        raise InvalidInputError(
            f"bad prompt template: unknown field {{{unknown[0]}}}; "
            f"fields: {', '.join('{' + name + '}' for name in TEMPLATE_FIELDS)}"
        )


def _tokens(count: TokenCounter, text: str) -> int:
    """`count(text)`, checked: a negative count would let the block grow past any budget."""
    tokens = count(text)
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise InvalidInputError(f"the token counter must return an integer ≥ 0, not {tokens!r}")
    return tokens


def render(sections: Sequence[tuple[str, Sequence[Entry]]], template: str, separator: str) -> str:
    """Fill `template` (fields: number, citation, provenance, text, id) for every entry,
    numbered through the whole block; section titles only when two or more sections have
    entries."""
    shown = [(title, entries) for title, entries in sections if entries]
    titled = len(shown) > 1
    blocks: list[str] = []
    number = 0
    try:
        for title, entries in shown:
            if titled:
                blocks.append(f"## {title}")
            for entry in entries:
                number += 1
                blocks.append(
                    template.format(
                        number=number,
                        citation=entry.citation,
                        provenance=entry.provenance,
                        text=entry.text.strip(),
                        id=entry.id,
                    )
                )
    except (KeyError, IndexError, ValueError) as error:
        raise InvalidInputError(f"bad prompt template: {error!r}") from error
    return separator.join(blocks)


def _keys(entry: Entry) -> set[str]:
    """What makes an entry a duplicate of one in the block: its id, or its text up to white
    space."""
    return {f"id:{entry.id}", "text:" + " ".join(entry.text.split())}


def fill(
    sections: Sequence[Section],
    *,
    budget: int,
    count: TokenCounter,
    template: str,
    separator: str,
) -> Filled:
    """Fill `sections` in order within `budget` (see the module docstring); an entry whose
    id or whitespace-normalized text is already in the block is dropped."""
    caps = limits([section.share for section in sections], budget)
    kept: list[list[Entry]] = [[] for _ in sections]
    seen: set[str] = set()

    def tokens(index: int, trial: list[Entry]) -> int:
        shown = [
            (section.title, story_order(trial if i == index else kept[i]))
            for i, section in enumerate(sections)
        ]
        return _tokens(count, render(shown, template, separator))

    def fits(index: int, trial: list[Entry], cap: int) -> bool:
        return tokens(index, trial) <= cap

    def take(index: int, entries: Sequence[Entry], cap: int) -> None:
        """Take `entries`, best first, into section `index` while the whole block fits
        `cap`; one that does not fit is skipped, so that a shorter one after it can.  They
        are tried in runs that double while they fit and halve when they do not, since each
        try renders and counts the whole block (one at a time, a prompt of k = 1000 took 15
        s); for a counter that never counts a block below a part of it, that takes what one
        at a time takes, and for any counter the block fits."""
        position, run = 0, 1
        while position < len(entries):
            batch: list[Entry] = []
            batch_keys: set[str] = set()
            end = position
            while end < len(entries) and len(batch) < run:
                keys = _keys(entries[end])
                if keys & batch_keys:  # tried after this run, against what it added
                    break
                if not keys & seen:
                    batch.append(entries[end])
                    batch_keys |= keys
                end += 1
            if batch and fits(index, [*kept[index], *batch], cap):
                kept[index] += batch
                seen.update(batch_keys)
                position, run = end, run * 2
            elif len(batch) > 1:
                run = len(batch) // 2
            else:  # one entry that does not fit, or none left that is new
                position, run = end, 1

    left_out: tuple[str, int] | None = None
    offered = [list(section.entries) for section in sections]
    """Each section's entries, but for one whose best entry is longer alone than the budget
    (before the last section): its peers only."""
    for index, section in enumerate(sections):
        best = next((entry for entry in section.entries if not _keys(entry) & seen), None)
        if section.share and best is not None:
            best_tokens = tokens(index, [best])
            if caps[index] < best_tokens <= budget:  # the best entry stretches the limit
                caps[index:] = [max(cap, best_tokens) for cap in caps[index:]]
            elif best_tokens > budget and index < len(sections) - 1:
                offered[index] = [e for e in section.entries if e.provenance == best.provenance]
                left_out = left_out or (best.id, best_tokens)
        take(index, offered[index], caps[index])
    for index, section in enumerate(sections[:-1]):  # what the last section left over
        if section.share:
            take(index, offered[index], budget)
    chosen = [story_order(entries) for entries in kept]
    titled = [(section.title, entries) for section, entries in zip(sections, chosen, strict=True)]
    needed = None
    first = None
    if not any(chosen):  # every entry offered was longer alone than the whole budget
        last = len(sections) - 1
        candidates = [
            entry
            for index, section in enumerate(sections)
            if section.share or index == last
            for entry in offered[index]
        ]
        alone = [
            _tokens(count, render([("", [entry])], template, separator)) for entry in candidates
        ]
        needed = min(alone, default=None)
        first = (candidates[0].id, alone[0]) if candidates else None
    return Filled(render(titled, template, separator), chosen, needed, first, left_out)
