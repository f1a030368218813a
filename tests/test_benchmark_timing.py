"""How `benchmarks.quality` times searches: interleaved, in an order that favours none."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from benchmarks.quality import latencies

NAMES = ("similarity", "search (default)", "mmr_traversal_search (default)", "traversal")


def test_every_search_runs_right_after_each_of_the_others():
    """A rotating order (one search further along the list per question) left every search
    but a question's first right after the same one: the default search ran after
    similarity of the same question and never the other way round."""
    follows: Counter[tuple[str, str]] = Counter()
    calls: list[str] = []

    def recorded(name: str) -> Callable[[int], None]:
        def search(question: int) -> None:
            if calls:
                follows[(calls[-1], name)] += 1
            calls.append(name)

        return search

    timed = latencies({name: recorded(name) for name in NAMES}, 200, 3)

    assert set(timed) == set(NAMES)
    assert len(calls) == len(NAMES) * (1 + 200 * 3)
    # 600 questions × 3 neighbouring pairs over 12 ordered pairs: about 150 each.
    pairs = [(before, after) for before in NAMES for after in NAMES if before != after]
    assert min(follows[pair] for pair in pairs) >= 100, follows
