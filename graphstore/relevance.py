"""Path-aware relevance: pure functions that score a passage by how it was reached.

A passage reached over a link is relevant for two reasons: its own similarity to the query,
and the relevance of the passage it was reached from.  The second supporting passage of a
multi-hop question is exactly the one that is *not* similar to the question, so scoring it
by its own cosine alone (as plain MMR traversal does) ranks it below near-copies of the
first.  Here a linked passage inherits its parent's relevance in proportion to how specific
the tag is: a tag carried by one passage (a title mention) passes all of it, a tag on
a large share of the store (a common keyword) passes little, and a citation of a page split
into passages counts the page once (`page_leads`).  Its own similarity fills the
rest, and relevance never drops below that similarity, so a link can only raise a passage.
Each hop after the first from a root passes on less (`hop_share`; the traversal counts the
hops a passage's relevance travelled, so a root that a link raised passes on what it
inherited damped as a passage one hop from a root would).
A tag the passage shares (a keyword) rather than one that cites it (a mention) only brings
new passages in: it raises none already found (`is_citation`).  A link of a structural kind
(`STRUCTURAL_KINDS`: section paths) brings passages in at their own similarity: it passes
no relevance.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from graphstore.links import TagKey
from graphstore.nodes import TagHit, page_of

STRUCTURAL_KINDS = frozenset({"hierarchy"})
"""Link kinds that say where a passage sits, not what it says: a hop over one brings a
passage in as a candidate ranked by its own similarity, inheriting nothing.

Every passage of a section links up to the section's parent (`extractors.hierarchy`), so the
parent's tag looked like a citation (one passage links in) and the parent inherited the
whole relevance of whichever of its children was found: on the README's demo sample a parent
section came into the top five of ten questions out of ten, second in seven, and the novel's
title line came into the chapter-27 prompt.  A citation is in a passage's text; a section
path is the same for all its passages, so it says nothing about the query."""


def tag_weight(tag_size: int) -> float:
    """How much a tag leading to `tag_size` passages says about each of them: 1 / size.

    A title mention (one passage links in) passes its parent's relevance whole; a keyword
    shared by four passages a quarter; a hub tag almost nothing, so it cannot flood the
    results.  As in a random walk over the node–tag graph (personalized PageRank), the
    parent's relevance is split over the passages the tag leads to.  Chosen over 1/(1+ln n),
    normalized IDF and 1/√n on the dev sets: all tie on mention links, 1/n loses least when
    keyword links are added (benchmarks/README.md).
    """
    return 1.0 / max(tag_size, 1)


def cites_pages(tag: TagKey, hits: Sequence[TagHit]) -> bool:
    """Whether a tag, by the `hits` read of it, cites what it leads to (none of them links
    out on it: a hyperlink, a title), so that a page split into passages is one thing it
    names (`page_leads`); a tag the passages share (a keyword) counts passages."""
    return bool(hits) and not any(tag in hit.outgoing for hit in hits)


def page_leads(hits: Sequence[TagHit], tag_size: int, tag_pages: int) -> frozenset[str]:
    """The passages a tag that cites pages (`cites_pages`) leads to as pages: when its
    `tag_size` passages belong to fewer `tag_pages` pages (`nodes.page_of`), each page's
    first passage among `hits` (best first: its best passage in the whole tag); else none,
    and every passage counts alone (`tag_weight` of the tag's size).

    A hyperlink or a title names one page, however many passages the page was split into:
    counted by passages, a page of three took a third of its citer's relevance where a page
    of one took it whole, and a manual's page of fifty passages almost nothing.  The page's
    best passage takes the page's share (`tag_weight` of the tag's pages); its others keep a
    passage's, so the page does not fill the results with its passages."""
    if tag_pages >= tag_size:
        return frozenset()
    leads: dict[str, str] = {}
    for hit in hits:
        leads.setdefault(page_of(hit.id), hit.id)
    return frozenset(leads.values())


def hop_share(weight: float, damping: float, parent_depth: int) -> float:
    """How far a passage reached over a tag of `weight` from a parent at `parent_depth`
    leans on the parent's relevance: the tag's whole weight on the first hop from a root,
    `damping` times less on each hop after it.

    Evidence thins out along a path: a root is similar to the query, the passage it cites
    is the bridge a multi-hop question needs, but what that passage cites in turn is often
    off the question (2WikiMultihopQA: a director's page naming a town, *Los*, similarity
    0.0, inheriting a root's full relevance two hops away).  Damping only later hops keeps
    the first whole (damping every hop lost the bridge passages, `benchmarks/README.md`)."""
    return weight * damping**parent_depth


def best_paths(paths: Iterable[tuple[int, float]]) -> tuple[tuple[int, float], ...]:
    """Of the ways a relevance reached a passage, as (hops, relevance) pairs, those no other
    way beats with as few hops and as much relevance, fewest hops first (so relevance rises
    along them).  Which of them passes on the most depends on the passage it passes to
    (`path_relevance` of each), so all are kept: a passage raised a little over more hops
    still passes on what it held over fewer."""
    kept: list[tuple[int, float]] = []
    for hops, relevance in sorted(paths, key=lambda path: (path[0], -path[1])):
        if not kept or relevance > kept[-1][1]:
            kept.append((hops, relevance))
    return tuple(kept)


def path_relevance(parent: float, similarity: float, share: float) -> float:
    """The relevance of a passage with `similarity` reached from a parent with relevance
    `parent`: a blend that leans on the parent by `share` (`hop_share`), never below the
    passage's own similarity."""
    return max(similarity, share * parent + (1.0 - share) * similarity)


def is_citation(
    tag: TagKey, tag_size: int, outgoing: frozenset[TagKey], structural_kinds: frozenset[str]
) -> bool:
    """Whether a passage reached over `tag` is cited by it (a mention, a hyperlink: the tag
    names this passage), rather than sharing it with others (a keyword: the passage links out
    on the tag too, and the tag leads to more than it) or sitting under it (a link of one of
    `structural_kinds`, a section path).

    The kinds of hop say different things.  A citation is evidence the passage itself does
    not carry: the passage that names it is relevant, so what it names may be, however unlike
    the query it reads; only a citation raises a passage already found, and in MMR the cited
    passage's likeness to the one citing it is no redundancy.  A shared tag mostly says the
    two passages are about the same thing, which their embeddings already measure: such a hop
    brings a passage in as a candidate, but does not raise one already there (on the dev sets,
    raising them reordered the nearest passages at random, and adding keyword links to mention
    links cost recall).  A structural hop passes no relevance at all (its kind is one of
    `structural_kinds`, the search's `Strategy` setting, `STRUCTURAL_KINDS` by default), so it
    raises nothing either, not even by a rounding difference between cosines.
    Decided from the tag's kind and size and the passage's outgoing tags, so every backend
    decides alike: the embedded backend's hits leave out only tags that lead to no other
    passage, and a tag of more than one passage is never one of those.
    """
    if tag[0] in structural_kinds:
        return False
    return not (tag_size > 1 and tag in outgoing)
