"""The pure rules of path-aware relevance, apart from any store."""

from __future__ import annotations

import numpy as np
import pytest

from graphstore.nodes import TagHit
from graphstore.relevance import (
    STRUCTURAL_KINDS,
    best_paths,
    cites_pages,
    hop_share,
    is_citation,
    page_leads,
    path_relevance,
    tag_weight,
)

MENTION = ("mention", "Paris")
KEYWORD = ("kw", "river")
SECTION = ("hierarchy", "guide/errors")


def test_a_tag_naming_one_passage_cites_it() -> None:
    assert is_citation(MENTION, 1, frozenset(), STRUCTURAL_KINDS)
    assert is_citation(MENTION, 1, frozenset({MENTION}), STRUCTURAL_KINDS)  # shared with none


def test_a_tag_the_passage_shares_with_others_does_not_cite_it() -> None:
    assert not is_citation(KEYWORD, 3, frozenset({KEYWORD}), STRUCTURAL_KINDS)


def test_a_tag_of_many_passages_that_the_passage_does_not_link_out_on_cites_it() -> None:
    assert is_citation(MENTION, 4, frozenset({KEYWORD}), STRUCTURAL_KINDS)


def test_a_structural_link_cites_nothing_unless_its_kind_is_dropped() -> None:
    assert not is_citation(SECTION, 1, frozenset(), STRUCTURAL_KINDS)
    assert is_citation(SECTION, 1, frozenset(), frozenset())


@pytest.mark.parametrize("size", [1, 2, 4, 1000])
def test_a_tag_passes_less_the_more_passages_it_leads_to(size: int) -> None:
    assert tag_weight(size) == pytest.approx(1.0 / size)
    assert tag_weight(size + 1) < tag_weight(size)


def test_only_hops_after_the_first_are_damped() -> None:
    assert hop_share(0.5, 0.25, 0) == 0.5
    assert hop_share(0.5, 0.25, 2) == pytest.approx(0.5 * 0.25**2)


def test_a_link_never_lowers_a_passage_below_its_own_similarity() -> None:
    assert path_relevance(0.2, 0.6, 1.0) == 0.6
    assert path_relevance(0.9, 0.1, 0.5) == pytest.approx(0.5)


def test_best_paths_keeps_each_way_that_may_pass_on_the_most() -> None:
    """A way with more hops is kept only with more relevance: fewer hops are damped less."""
    paths = [(2, 0.92), (0, 0.6), (1, 0.8), (1, 0.7), (2, 0.75), (3, 0.9)]
    assert best_paths(paths) == ((0, 0.6), (1, 0.8), (2, 0.92))
    assert best_paths([(1, 0.5), (0, 0.5)]) == ((0, 0.5),)


def hits(*ids: str, outgoing: frozenset[tuple[str, str]] = frozenset()) -> list[TagHit]:
    return [TagHit(node_id, np.zeros(2, np.float32), outgoing, 0.5) for node_id in ids]


def test_a_page_split_into_passages_is_one_thing_a_citation_names() -> None:
    """A page of three passages took a third of its citer's relevance where a page of one
    took it whole: now its best passage takes the page's share, its others a passage's.
    A page longer than a search reads of a tag (a manual's page of fifty passages) counted
    its passages: its pages are counted now, read or not."""
    page = hits("wiki/Foxx.txt#2", "wiki/Foxx.txt#0", "wiki/Foxx.txt#1")  # best first
    assert cites_pages(MENTION, page)
    assert page_leads(page, 3, 1) == {"wiki/Foxx.txt#2"}  # the page's share: 1
    two = hits("wiki/Foxx.txt#0", "wiki/Foxx.md#0", "Foxx#1", "wiki/Foxx.md#1")
    assert page_leads(two, 4, 3) == {"wiki/Foxx.txt#0", "wiki/Foxx.md#0", "Foxx#1"}
    pages = hits("wiki/Foxx.txt#0", "wiki/Foxx.md#0")
    assert page_leads(pages, 2, 2) == frozenset()  # a page a passage: as they are
    assert page_leads(page, 50, 1) == {"wiki/Foxx.txt#2"}  # three read of a page of fifty
    assert page_leads(pages, 50, 50) == frozenset()  # fifty pages of a passage each
    shared = hits("wiki/Foxx.txt#0", "wiki/Foxx.txt#1", outgoing=frozenset({KEYWORD}))
    assert not cites_pages(KEYWORD, shared)  # a page's passages sharing a word
