"""How many threads OpenBLAS runs the default model's matrix products on: every core when
the cores are free, one when another process keeps a core busy.

OpenBLAS splits each product evenly between its threads and waits for the slowest, so a
thread sharing its core with another process holds the others back: on 2 cores, one kept
busy, the model embedded 5 passages a second on two threads against 13 on one, where an
idle machine gave 21 against 17 (a local Cassandra node taking writes is such a process).
Which case holds is measured batch by batch, not guessed: the counts give the same vectors.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

RETRY_EVERY = 16
"""Batches between two tries of a thread count that was slower when last measured."""
SMOOTHING = 0.5
"""Weight of a new measurement in a count's rate (the rest is its rate so far)."""


class ThreadChoice:
    """The thread count of each batch: every count is tried once, then the fastest by its
    rate (work per second, smoothed) is kept, and every `retry_every` batches the slower
    one is tried again, so that a load that came or went is noticed."""

    def __init__(self, counts: Sequence[int], retry_every: int = RETRY_EVERY) -> None:
        self.counts = list(dict.fromkeys(counts))
        self.retry_every = retry_every
        self.rates: dict[int, float] = {}
        self._batches = 0

    def next(self) -> int:
        """The count to run the next batch on."""
        untried = [count for count in self.counts if count not in self.rates]
        if untried:
            return untried[0]
        self._batches += 1
        ranked = sorted(self.counts, key=lambda count: -self.rates[count])
        if len(ranked) > 1 and self._batches % self.retry_every == 0:
            return ranked[1]
        return ranked[0]

    def measured(self, count: int, work: float, seconds: float) -> None:
        """Record that `count` threads did `work` (any unit, the same for every batch) in
        `seconds`."""
        rate = work / max(seconds, 1e-9)
        before = self.rates.get(count)
        self.rates[count] = rate if before is None else before + SMOOTHING * (rate - before)


class BlasThreads:
    """`ThreadChoice` applied to the OpenBLAS that NumPy loaded, through threadpoolctl; it
    changes nothing where there is no such library or it runs one thread."""

    def __init__(self) -> None:
        self._blas: Any = None
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            self.choice = ThreadChoice([1])
            return
        blas = ThreadpoolController().select(user_api="blas")
        most = max((info["num_threads"] for info in blas.info()), default=1)
        self._blas = blas if most > 1 else None
        self.choice = ThreadChoice([most, 1])

    @contextmanager
    def running(self, work: float) -> Iterator[None]:
        """Run a batch of `work` on the count `choice` picks, and measure it."""
        if self._blas is None:
            yield
            return
        count = self.choice.next()
        start = time.perf_counter()
        with self._blas.limit(limits=count):
            yield
        self.choice.measured(count, work, time.perf_counter() - start)
