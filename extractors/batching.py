"""Batches sized by padded length, for models that pad every batch to its longest input.

On a CPU a transformer gains little from batching: one passage already fills the matrix
units, so what batching saves is per-call overhead, and what it costs is padding and
intermediate tensors that outgrow the cache.  Measured with GLiNER on 2 cores
(`benchmarks/extraction.py`): fixed batches of 8 HotpotQA passages ran slower than one at a
time, while batches capped at about 512 padded words ran faster than both.
"""

from __future__ import annotations

from collections.abc import Sequence

from graphstore.errors import InvalidInputError


def padded_batches(lengths: Sequence[int], budget: int, max_size: int) -> list[list[int]]:
    """Indices of `lengths` in batches, shortest first, each within `budget` padded units.

    A batch's padded size is its size times its longest length; an input longer than
    `budget` goes in a batch of its own.  Every index appears exactly once.
    """
    if budget < 1 or max_size < 1:
        raise InvalidInputError(f"budget and max_size must be at least 1, not {budget}, {max_size}")
    batches: list[list[int]] = []
    batch: list[int] = []
    for index in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        padded = max(1, lengths[index]) * (len(batch) + 1)  # sorted: this one is the longest
        if batch and (padded > budget or len(batch) == max_size):
            batches.append(batch)
            batch = []
        batch.append(index)
    if batch:
        batches.append(batch)
    return batches
