"""How the benchmarks time searches: interleaved, in an order that favours none."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable

import numpy as np

from benchmarks import quality, traversal_time

NAMES = ("similarity", "search (default)", "mmr_traversal_search (default)", "traversal")
QUESTIONS = 200
PASSES = 3


class Recorder:
    """Counts which search ran right after which."""

    def __init__(self) -> None:
        self.follows: Counter[tuple[str, str]] = Counter()
        self.calls: list[str] = []

    def ran(self, name: str) -> None:
        if self.calls:
            self.follows[(self.calls[-1], name)] += 1
        self.calls.append(name)

    def assert_balanced(self) -> None:
        # 600 questions × 3 neighbouring pairs over 12 ordered pairs: about 150 each.
        pairs = [(before, after) for before in NAMES for after in NAMES if before != after]
        assert min(self.follows[pair] for pair in pairs) >= 100, self.follows


def test_every_search_runs_right_after_each_of_the_others():
    """A rotating order (one search further along the list per question) left every search
    but a question's first right after the same one: the default search ran after
    similarity of the same question and never the other way round."""
    recorder = Recorder()

    def recorded(name: str) -> Callable[[int], None]:
        return lambda question: recorder.ran(name)

    timed = quality.latencies({name: recorded(name) for name in NAMES}, QUESTIONS, PASSES)

    assert set(timed) == set(NAMES)
    assert len(recorder.calls) == len(NAMES) * (1 + QUESTIONS * PASSES)
    recorder.assert_balanced()


def test_traversal_time_interleaves_the_searches_of_every_store():
    """`traversal_time` timed each search over all questions in a block of its own, so a
    drift of the machine or the node landed on one search alone."""
    recorder = Recorder()

    def recorded(name: str) -> Callable[[str, np.ndarray], Awaitable[tuple[int, int]]]:
        async def search(question: str, vector: np.ndarray) -> tuple[int, int]:
            recorder.ran(name)
            return 1, 1

        return search

    questions = [f"question {i}" for i in range(QUESTIONS)]
    timed = asyncio.run(
        traversal_time.measure(
            {name: recorded(name) for name in NAMES},
            questions,
            np.zeros((QUESTIONS, 2), dtype=np.float32),
            PASSES,
            None,
        )
    )

    assert set(timed) == set(NAMES)
    assert all(summary["samples"] == QUESTIONS * PASSES for summary in timed.values())
    recorder.assert_balanced()
