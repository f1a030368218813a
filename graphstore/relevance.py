"""Path-aware relevance: pure functions that score a passage by how it was reached.

A passage reached over a link is relevant for two reasons: its own similarity to the query,
and the relevance of the passage it was reached from.  The second supporting passage of a
multi-hop question is exactly the one that is *not* similar to the question, so scoring it
by its own cosine alone (as plain MMR traversal does) ranks it below near-copies of the
first.  Here a linked passage inherits its parent's relevance in proportion to how specific
the tag is: a tag carried by one passage (a title mention) passes all of it, a tag on
a large share of the store (a common keyword) passes little.  Its own similarity fills the
rest, and relevance never drops below that similarity, so a link can only raise a passage.
"""

from __future__ import annotations


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


def path_relevance(parent: float, similarity: float, weight: float, damping: float) -> float:
    """The relevance of a passage with `similarity` reached from a parent with relevance
    `parent` over a tag of `weight`: a blend that leans on the parent by `damping · weight`,
    never below the passage's own similarity."""
    share = damping * weight
    return max(similarity, share * parent + (1.0 - share) * similarity)
