"""The personalized PageRank baseline of the quality benchmark, on hand-made graphs."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.pagerank import Walk, pagerank_search, personalized_pagerank, seed_weights
from graphstore.links import Link


def _unit(*rows: list[float]) -> np.ndarray:
    vectors = np.array(rows, dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_a_walk_splits_by_specificity_and_never_returns_to_its_start():
    # Passage 0 cites passage 1 alone (a mention) and shares a keyword with 2, 3 and 4.
    links = [
        frozenset({Link.outgoing("m", "one"), Link.bidir("kw", "common")}),
        frozenset({Link.incoming("m", "one")}),
        *[frozenset({Link.bidir("kw", "common")})] * 3,
    ]
    walk = Walk(links)
    start = np.array([1.0, 0, 0, 0, 0])
    moved = walk.step(start)
    assert moved[0] == 0.0
    assert moved.sum() == pytest.approx(1.0)
    # The mention (one passage in) weighs 1, the keyword (four in) 1/4: 0.8 against 0.2.
    assert moved[1] == pytest.approx(0.8)
    assert moved[2:] == pytest.approx([0.2 / 3] * 3)
    # Passage 1 links nowhere: mass that reaches it stays out of the walk.
    assert walk.step(np.array([0, 1.0, 0, 0, 0])).sum() == 0.0


def test_seed_weights_keep_the_nearest_passages_and_favour_the_first():
    seed = seed_weights(np.array([0.1, 0.9, 0.85, 0.2], dtype=np.float32), roots=2)
    assert seed[[0, 3]].tolist() == [0.0, 0.0]
    assert seed.sum() == pytest.approx(1.0)
    assert seed[1] > seed[2] > 0.0


def test_a_cited_passage_unlike_the_query_outranks_a_closer_stranger():
    # The bridge case: passage 0 answers half the question and names passage 1, which reads
    # nothing like the question; passage 2 is closer to it but linked to nothing.
    vectors = _unit([1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.6, 0.8, 0.0])
    question = _unit([1.0, 0.3, 0.0])
    links = [
        frozenset({Link.outgoing("m", "bridge")}),
        frozenset({Link.incoming("m", "bridge")}),
        frozenset(),
    ]
    search = pagerank_search(["root", "bridge", "stranger"], vectors, question, links)
    assert search(0, 2) == ["root", "bridge"]
    ranked = personalized_pagerank(Walk(links), seed_weights(vectors @ question[0], roots=1))
    assert ranked[2] == 0.0


def test_without_links_the_ranking_is_similarity():
    vectors = _unit([1.0, 0.0], [0.8, 0.6], [0.0, 1.0])
    question = _unit([1.0, 0.1])
    search = pagerank_search(["a", "b", "c"], vectors, question, [frozenset()] * 3)
    assert search(0, 3) == ["a", "b", "c"]
