"""The embedded backend to 100,000 (or 1,000,000) passages with hub tags: ingest and search.

The synthetic hub-tag case of issue 13: 384-d unit vectors around `CLUSTERS` random centres
(cosine ~0.7 to their centre), and six distinct keyword tags per passage drawn from a Zipf
law (exponent `ZIPF`) over `VOCABULARY` words, as bidirectional `kw` links: the top tag is
on ~70 % of passages, the next few on a quarter to a half (the article's worst case, a few
keywords on most passages), the tail on a handful each.  One `EmbeddedStorage` file, vectors
given (no model), written through `GraphStore.aadd_nodes` in chunks of `CHUNK`.

The ingest is timed chunk by chunk and reported per tenth of the run; at each checkpoint
(10k and 100k, and 1M with `--million`) it pauses for the searches, on the same store:
similarity k=10, a bare NumPy scan of the same vectors (`matrix @ q` + `argpartition`, the
floor any exact search pays), the default search k=10, `mmr_traversal_search` k=10 and
`traversal_search` k=4 depth 2.  Latencies are medians over `QUERIES` query vectors (new
points of the same clusters) × `PASSES` passes, the searches interleaved query by query so
every one meets the same machine, after one warm-up call each.  RSS is the process's
resident memory at the checkpoint (the bare scan's own copy of the matrix is made after it
is read) and its peak so far.  At the end, `graphstore stats` runs on the store in a process
of its own: what every CLI command pays to open a store of that size (interpreter start,
imports, loading the index), in wall seconds and peak RSS.
"""

from __future__ import annotations

import asyncio
import resource
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from benchmarks.common import (
    Stopwatch,
    argument_parser,
    figure,
    median,
    open_backend,
    p95,
    peak_rss,
    print_table,
    write_json,
)
from graphstore.embedded import EmbeddedStorage
from graphstore.links import Link
from graphstore.nodes import Node
from graphstore.store import GraphStore
from graphstore.traversal import TraversalStats

NAME = "embedded_scale"
DIMENSION = 384
CLUSTERS = 1000
SPREAD = 1.0
"""Noise norm relative to the unit centre: cosine 1/√2 to the centre, ~0.5 within a cluster."""
VOCABULARY = 50_000
ZIPF = 1.2
TAGS_PER_PASSAGE = 6
CHUNK = 1000
"""Passages per `aadd_nodes` call (written in transactions of the store's batch size, 64)."""
QUERIES = 50
PASSES = 3
K = 10
SEED = 13

GRAPH_SEARCHES = ("search (default) k=10", "mmr_traversal_search k=10", "traversal_search k=4 d2")

Search = Callable[[NDArray[np.float32]], Awaitable[int]]
"""A query vector -> backend queries issued (1 for a plain scan)."""


@dataclass(frozen=True)
class Sizes:
    """How far to load and where to measure: `--quick`, the default, and `--million`."""

    total: int
    checkpoints: tuple[int, ...]
    queries: int
    passes: int


FULL = Sizes(total=100_000, checkpoints=(10_000, 100_000), queries=QUERIES, passes=PASSES)
MILLION = Sizes(
    total=1_000_000, checkpoints=(10_000, 100_000, 1_000_000), queries=QUERIES, passes=PASSES
)
QUICK = Sizes(total=2_000, checkpoints=(200, 2_000), queries=5, passes=1)


class Corpus:
    """The synthetic passages, generated chunk by chunk from fixed seeds (the same chunk is
    the same every time it is asked for, so nothing is kept between chunks)."""

    def __init__(self) -> None:
        rng = np.random.default_rng(SEED)
        self.centres = unit_rows(rng.standard_normal((CLUSTERS, DIMENSION), dtype=np.float32))
        weights = 1.0 / np.arange(1, VOCABULARY + 1) ** ZIPF
        self.tag_cdf = np.cumsum(weights / weights.sum())

    def points(self, rng: np.random.Generator, count: int) -> NDArray[np.float32]:
        """`count` unit vectors, each near a random centre."""
        centres = self.centres[rng.integers(0, CLUSTERS, count)]
        noise = rng.standard_normal((count, DIMENSION), dtype=np.float32)
        return unit_rows(centres + SPREAD * noise / np.sqrt(DIMENSION, dtype=np.float32))

    def tags(self, rng: np.random.Generator) -> frozenset[Link]:
        """Six distinct Zipf-distributed keywords as bidirectional links."""
        ranks: dict[int, None] = {}
        while len(ranks) < TAGS_PER_PASSAGE:
            for rank in np.searchsorted(self.tag_cdf, rng.random(2 * TAGS_PER_PASSAGE)):
                ranks.setdefault(int(rank), None)
        return frozenset(Link.bidir("kw", f"w{rank}") for rank in list(ranks)[:TAGS_PER_PASSAGE])

    def chunk(self, number: int, size: int) -> tuple[list[Node], NDArray[np.float32]]:
        """Chunk `number`: passages `number * size` onward, with their vectors."""
        rng = np.random.default_rng([SEED, number, 1])
        first = number * size
        nodes = [
            Node(f"p{first + i}", f"passage {first + i}", {}, self.tags(rng)) for i in range(size)
        ]
        return nodes, self.vectors(number, size)

    def vectors(self, number: int, size: int) -> NDArray[np.float32]:
        """The vectors of chunk `number` alone (for the bare scan's copy of the matrix)."""
        return self.points(np.random.default_rng([SEED, number, 0]), size)

    def queries(self, count: int) -> NDArray[np.float32]:
        """Query vectors: new points of the same clusters."""
        return self.points(np.random.default_rng([SEED, 2**31]), count)


def unit_rows(matrix: NDArray[np.float32]) -> NDArray[np.float32]:
    """Each row scaled to unit length."""
    scaled: NDArray[np.float32] = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    return scaled


def rss_mib() -> tuple[float, float]:
    """(current, peak) resident memory of this process in MiB."""
    status = Path("/proc/self/status").read_text().split("\n")
    current = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return current / 1024, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def numpy_scan(matrix: NDArray[np.float32]) -> Search:
    """The floor: score every row, keep the k best, sorted."""

    async def search(query: NDArray[np.float32]) -> int:
        scores = matrix @ query
        best = np.argpartition(-scores, K - 1)[:K]
        return len(best[np.argsort(-scores[best])]) // K

    return search


def searches(store: GraphStore, matrix: NDArray[np.float32]) -> dict[str, Search]:
    """Every search measured at a checkpoint, by name."""

    def counted(run: Callable[[NDArray[np.float32], TraversalStats], Awaitable[Any]]) -> Search:
        async def search(query: NDArray[np.float32]) -> int:
            stats = TraversalStats()
            await run(query, stats)
            return stats.vector_searches + stats.tag_queries

        return search

    async def similarity(query: NDArray[np.float32]) -> int:
        await store.asimilarity_search_by_vector(query, k=K)
        return 1

    return {
        "numpy scan k=10": numpy_scan(matrix),
        "similarity k=10": similarity,
        "search (default) k=10": counted(lambda q, s: store.asearch(q, k=K, stats=s)),
        "mmr_traversal_search k=10": counted(
            lambda q, s: store.ammr_traversal_search(q, k=K, stats=s)
        ),
        "traversal_search k=4 d2": counted(
            lambda q, s: store.atraversal_search(q, k=4, depth=2, stats=s)
        ),
    }


async def latencies(
    named: dict[str, Search], queries: NDArray[np.float32], passes: int
) -> dict[str, dict[str, float]]:
    """Median and p95 ms, and backend queries per search, for each search."""
    for search in named.values():
        await search(queries[0])
    times: dict[str, list[float]] = {name: [] for name in named}
    issued: dict[str, list[float]] = {name: [] for name in named}
    for _ in range(passes):
        for query in queries:
            for name, search in named.items():
                with Stopwatch() as watch:
                    count = await search(query)
                times[name].append(1e3 * watch.seconds)
                issued[name].append(count)
    return {
        name: {
            "median_ms": median(times[name]),
            "p95_ms": p95(times[name]),
            "queries_median": median(issued[name]),
            "samples": len(times[name]),
        }
        for name in named
    }


async def checkpoint(
    store: GraphStore, corpus: Corpus, chunks: int, chunk: int, sizes: Sizes
) -> dict[str, Any]:
    """Memory and search latencies with the first `chunks` chunks in the store."""
    rss, peak = rss_mib()
    stored = chunks * chunk
    matrix = np.empty((stored, DIMENSION), dtype=np.float32)
    for i in range(chunks):
        matrix[i * chunk : (i + 1) * chunk] = corpus.vectors(i, chunk)
    measured = await latencies(searches(store, matrix), corpus.queries(sizes.queries), sizes.passes)
    scan = measured["numpy scan k=10"]["median_ms"]
    similarity = measured["similarity k=10"]["median_ms"]
    return {
        "passages": stored,
        "rss_mib": rss,
        "peak_rss_mib": peak,
        "searches": measured,
        "similarity_over_numpy_scan": similarity / scan,
        "graph_searches_beyond_similarity_ms": {
            name: measured[name]["median_ms"] - similarity for name in GRAPH_SEARCHES
        },
    }


async def run(args: Any) -> dict[str, Any]:
    sizes = QUICK if args.quick else MILLION if args.million else FULL
    chunk = min(CHUNK, sizes.checkpoints[0])
    corpus = Corpus()
    seconds: list[float] = []
    points: list[dict[str, Any]] = []
    with open_backend("embedded") as backend:
        path = backend.sqlite_path("scale")
        store = GraphStore(None, EmbeddedStorage(path))
        for number in range(sizes.total // chunk):
            nodes, vectors = corpus.chunk(number, chunk)
            with Stopwatch() as watch:
                await store.aadd_nodes(nodes, vectors=vectors)
            seconds.append(watch.seconds)
            stored = (number + 1) * chunk
            if stored in sizes.checkpoints:
                points.append(await checkpoint(store, corpus, number + 1, chunk, sizes))
                print_point(points[-1])
        opening = peak_rss([sys.executable, "-m", "graphstore.cli", "--store", str(path), "stats"])
        await store.aclose()
    tenths = np.array_split(np.array(seconds), 10)
    ms_per_passage = [1e3 * part.sum() / (len(part) * chunk) for part in tenths]
    first = points[0]["searches"]
    return {
        "sizes": sizes.__dict__,
        "data": {
            "dimension": DIMENSION,
            "clusters": CLUSTERS,
            "vocabulary": VOCABULARY,
            "zipf": ZIPF,
            "tags_per_passage": TAGS_PER_PASSAGE,
            "chunk": chunk,
        },
        "ingest": {
            "ms_per_passage_by_tenth": ms_per_passage,
            "passages_per_second_by_tenth": [1e3 / ms for ms in ms_per_passage],
            "passages_per_second": sizes.total / sum(seconds),
            "last_over_first": ms_per_passage[-1] / ms_per_passage[0],
        },
        "checkpoints": points,
        "cli_stats": opening,
        "growth_over_first_checkpoint": {
            name: [p["searches"][name]["median_ms"] / first[name]["median_ms"] for p in points]
            for name in first
        },
    }


def print_point(point: dict[str, Any]) -> None:
    """One checkpoint's table."""
    print_table(
        f"{point['passages']:,} passages: RSS {point['rss_mib']:.0f} MiB "
        f"(peak {point['peak_rss_mib']:.0f}); similarity / bare scan "
        f"{point['similarity_over_numpy_scan']:.2f}",
        ["search", "median ms", "p95 ms", "queries (median)"],
        [
            [name, r["median_ms"], r["p95_ms"], r["queries_median"]]
            for name, r in point["searches"].items()
        ],
    )


def report(result: dict[str, Any]) -> None:
    """The ingest curve and the summary on stdout."""
    ingest = result["ingest"]
    print_table(
        f"Ingest, {result['sizes']['total']:,} passages in tenths",
        ["tenth", "ms/passage", "passages/s"],
        [
            [i + 1, ms, rate]
            for i, (ms, rate) in enumerate(
                zip(
                    ingest["ms_per_passage_by_tenth"],
                    ingest["passages_per_second_by_tenth"],
                    strict=True,
                )
            )
        ]
        + [["last/first", ingest["last_over_first"], ingest["passages_per_second"]]],
    )
    points = result["checkpoints"]
    opening = result["cli_stats"]
    print(
        f"\n`graphstore stats` on the {result['sizes']['total']:,}-passage store: "
        f"{opening['seconds']:.2f} s, peak RSS {opening['peak_rss_mib']:.0f} MiB"
    )
    sizes = [f"{p['passages']:,}" for p in points]
    growth = result["growth_over_first_checkpoint"]
    print_table(
        f"Median ms by store size, and × the {sizes[0]} value",
        ["search", *sizes, *(f"× at {size}" for size in sizes[1:])],
        [
            [name, *(p["searches"][name]["median_ms"] for p in points), *ratios[1:]]
            for name, ratios in growth.items()
        ]
        + [
            [
                f"{name} − similarity",
                *(p["graph_searches_beyond_similarity_ms"][name] for p in points),
                *(
                    p["graph_searches_beyond_similarity_ms"][name]
                    / points[0]["graph_searches_beyond_similarity_ms"][name]
                    for p in points[1:]
                ),
            ]
            for name in GRAPH_SEARCHES
        ],
    )


def plot(args: Any, result: dict[str, Any]) -> None:
    """Two panels: ms per passage by tenth of the load, median latency by store size."""
    with figure(NAME + ("-1m" if args.million else ""), args, panels=2) as (load, search):
        tenths = result["ingest"]["ms_per_passage_by_tenth"]
        total = result["sizes"]["total"]
        load.plot([(i + 1) * total // 10 for i in range(10)], tenths, marker="o")
        load.set(
            title="ingest, vectors given",
            xlabel="passages stored",
            ylabel="ms per passage",
            ylim=(0, None),
        )
        points = result["checkpoints"]
        sizes = [p["passages"] for p in points]
        for name in points[0]["searches"]:
            search.plot(
                sizes, [p["searches"][name]["median_ms"] for p in points], marker="o", label=name
            )
        search.set(
            title="search latency (median)",
            xlabel="passages stored",
            ylabel="ms",
            xscale="log",
            yscale="log",
        )
        search.legend(fontsize="small")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argument_parser(__doc__.splitlines()[0], ("embedded",))
    parser.add_argument("--million", action="store_true", help="load to 1,000,000 passages")
    args = parser.parse_args(argv)
    result = asyncio.run(run(args))
    report(result)
    write_json(NAME + ("-1m" if args.million else ""), args, result)
    plot(args, result)


if __name__ == "__main__":
    main()
