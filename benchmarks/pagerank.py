"""Personalized PageRank over the passage–tag graph: the alternative the default search was
measured against as a whole search (HippoRAG ranks passages this way).

The walk leaves a passage over one of its outgoing tags, chosen in proportion to the tag's
specificity (1 / the passages linking in to it, HippoRAG's node specificity), and lands on
one of the other passages linking in to that tag.  With probability `RESET` it jumps back
to the seeds: the `ROOTS` passages nearest the question, weighted by a softmax of their
similarity (`TEMPERATURE`).  Passages are ranked by their visit probability.

It runs exactly over the whole graph in memory, with no storage and no per-tag reads: the
best case for the method, and one a store could not afford per query (every tag of every
passage is read).  Settings: HippoRAG's reset of 0.5; roots and temperature chosen on the
dev sets among 5/10/20 roots and a linear, 0.05 or 0.02 softmax (`benchmarks/README.md`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from graphstore.links import Link, TagKey

RESET = 0.5
ROOTS = 10
TEMPERATURE = 0.05
ITERATIONS = 30


class Walk:
    """The transition of one random-walk step as an edge list (source, target, probability)."""

    def __init__(self, links: Sequence[frozenset[Link]]) -> None:
        incoming: dict[TagKey, list[int]] = {}
        for node, node_links in enumerate(links):
            for link in node_links:
                if link.is_incoming:
                    incoming.setdefault(link.key, []).append(node)
        sources: list[int] = []
        targets: list[int] = []
        weights: list[float] = []
        for node, node_links in enumerate(links):
            for tag in {link.key for link in node_links if link.is_outgoing}:
                others = [target for target in incoming.get(tag, ()) if target != node]
                if others:
                    specificity = 1.0 / len(incoming[tag])
                    sources.extend([node] * len(others))
                    targets.extend(others)
                    weights.extend([specificity / len(others)] * len(others))
        self.size = len(links)
        self.sources = np.array(sources, dtype=np.intp)
        self.targets = np.array(targets, dtype=np.intp)
        weight = np.array(weights, dtype=np.float64)
        totals = np.bincount(self.sources, weights=weight, minlength=self.size)
        self.probabilities = weight / totals[self.sources] if weight.size else weight

    def step(self, mass: NDArray[np.float64]) -> NDArray[np.float64]:
        """Where `mass` is after one step (a passage with no way out keeps none)."""
        moved = mass[self.sources] * self.probabilities
        return np.bincount(self.targets, weights=moved, minlength=self.size).astype(np.float64)


def personalized_pagerank(
    walk: Walk, seed: NDArray[np.float64], reset: float = RESET, iterations: int = ITERATIONS
) -> NDArray[np.float64]:
    """Visit probabilities of a walk that returns to `seed` (a distribution) at each step
    with probability `reset` (power iteration from the seed)."""
    mass = seed
    for _ in range(iterations):
        mass = reset * seed + (1.0 - reset) * walk.step(mass)
    return mass


def seed_weights(
    similarity: NDArray[np.float32], roots: int = ROOTS, temperature: float = TEMPERATURE
) -> NDArray[np.float64]:
    """The seed distribution: the `roots` most similar passages, by a softmax of their
    similarity (the nearest weighs most; a linear weighting let the tenth root count
    almost as much as the first and lost recall at k = 2)."""
    nearest = np.argsort(-similarity, kind="stable")[:roots]
    top = similarity[nearest].astype(np.float64)
    weight = np.exp((top - top[0]) / temperature)
    seed = np.zeros(similarity.size)
    seed[nearest] = weight / weight.sum()
    return seed


def pagerank_search(
    titles: Sequence[str],
    passage_vectors: NDArray[np.float32],
    question_vectors: NDArray[np.float32],
    links: Sequence[frozenset[Link]],
) -> Callable[[int, int], list[str]]:
    """(question index, k) -> the k titles with the highest visit probability."""
    walk = Walk(links)

    def search(i: int, k: int) -> list[str]:
        similarity = passage_vectors @ question_vectors[i]
        ranked = personalized_pagerank(walk, seed_weights(similarity))
        return [titles[j] for j in np.argsort(-ranked, kind="stable")[:k]]

    return search
