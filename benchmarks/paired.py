"""Paired comparison of two searches over the same questions: is a difference in recall more
than the luck of which questions were asked?

A dev set of 100 questions moves R@k by 0.005 per gold passage; the defaults are also judged
on question sets nobody here has.  So a table that says one search is 0.003 below another
says little until it also says how far that could move on other questions.  Each question is
one paired sample (both searches answered it); the interval is a percentile bootstrap over
questions (resampled with replacement, seeded so runs repeat), and the counts say how many
questions moved each way.  Pure functions over per-question scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

ROUNDS = 4000
"""Bootstrap resamples: the 2.5th and 97.5th percentiles steady to about ±0.001 R@k."""
SEED = 0
CHUNK = 500
"""Resamples drawn at a time (a 721-question set: 500 × 721 indices, about 3 MB)."""


class Paired(NamedTuple):
    """`after` − `before` over the same questions: the mean difference, its 95 % bootstrap
    interval, and how many questions scored higher (`gained`) and lower (`lost`)."""

    difference: float
    low: float
    high: float
    gained: int
    lost: int


def paired(
    before: Sequence[float], after: Sequence[float], rounds: int = ROUNDS, seed: int = SEED
) -> Paired:
    """Compare two searches' per-question scores (recall@k, or 1/0 for all gold found)."""
    if len(before) != len(after) or not before:
        raise ValueError("paired scores need the same questions, at least one")
    differences = np.asarray(after, dtype=np.float64) - np.asarray(before, dtype=np.float64)
    count = differences.size
    generator = np.random.default_rng(seed)
    means = np.concatenate(
        [
            differences[
                generator.integers(0, count, size=(min(CHUNK, rounds - start), count))
            ].mean(axis=1)
            for start in range(0, rounds, CHUNK)
        ]
    )
    low, high = np.percentile(means, [2.5, 97.5])
    return Paired(
        float(differences.mean()),
        float(low),
        float(high),
        int((differences > 0).sum()),
        int((differences < 0).sum()),
    )


def all_found(recalls: Sequence[float]) -> list[float]:
    """Per question, 1 when every gold passage was found (recall 1), else 0: all@k."""
    return [float(recall == 1.0) for recall in recalls]
