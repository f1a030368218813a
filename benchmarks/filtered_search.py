"""Filtered search latency, and what filterable metadata costs at write.

The 994 HotpotQA passages with keyword + title-mention links, given metadata that does not
follow their content: `chapter` 1-100 and `book` "a"/"b" by position, `date` one of the
days of 2024.  Plain similarity (k=10) and the default graph search (k=5) over the 100
questions (embeddings precomputed), each question asked with every filter in turn, three
passes: no filter, a selective range (`chapter <= 5`, 5 % of the passages), a broad one
(`chapter <= 50`), a date range (a month), the writer's as-of-chapter filter (`$and` of a
book and a chapter bound), `$in` of two chapters (two queries on Cassandra), and
`book != "a"` (no index answers a negation: Cassandra checks rows).  The write cost is the
load time of the same passages with that metadata against none (on Cassandra the range
columns of three keys: six columns, twelve SAI indexes; their creation, by a first write,
is not timed).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks import data
from benchmarks.common import (
    Stopwatch,
    figure,
    latency_bars,
    open_backend,
    parse_args,
    print_table,
    write_json,
)
from benchmarks.traversal_time import Search, measure
from graphstore.nodes import Node
from graphstore.store import GraphStore
from graphstore.traversal import TraversalStats

NAME = "filtered_search"
FILTERS: dict[str, dict[str, Any] | None] = {
    "none": None,
    "chapter <= 5 (5 %)": {"chapter": {"$lte": 5}},
    "chapter <= 50 (50 %)": {"chapter": {"$lte": 50}},
    "date in March (8 %)": {"date": {"$gte": "2024-03-01", "$lt": "2024-04-01"}},
    "as of chapter 10, book a (5 %)": {"$and": [{"book": "a"}, {"chapter": {"$lte": 10}}]},
    "chapter in [7, 70] (2 %)": {"chapter": {"$in": [7, 70]}},
    "book != a (50 %)": {"book": {"$ne": "a"}},
}
SEARCHES = {"similarity": {"k": 10}, "search (default)": {"k": 5}}


@dataclass(frozen=True)
class Sizes:
    passages: int
    questions: int
    repetitions: int


FULL = Sizes(passages=994, questions=100, repetitions=3)
QUICK = Sizes(passages=150, questions=10, repetitions=1)


def metadata(position: int) -> dict[str, Any]:
    """Metadata by position: chapter 1-100, book a/b, a day of 2024 (28 a month)."""
    day = position % 336
    return {
        "chapter": position % 100 + 1,
        "book": "a" if position % 2 == 0 else "b",
        "date": f"2024-{day // 28 + 1:02d}-{day % 28 + 1:02d}",
    }


def searches(store: GraphStore, metadata_filter: dict[str, Any] | None) -> dict[str, Search]:
    async def similarity(_: str, vector: np.ndarray) -> tuple[int, int]:
        hits = await store.asimilarity_search(vector, filter=metadata_filter, k=10)
        return len(hits), 1

    async def graph(_: str, vector: np.ndarray) -> tuple[int, int]:
        stats = TraversalStats()
        hits = await store.asearch(vector, filter=metadata_filter, stats=stats, k=5)
        return len(hits), stats.vector_searches + stats.tag_queries

    return {"similarity": similarity, "search (default)": graph}


KEPT = ("median_ms", "p95_ms", "queries_median", "docs_median", "samples")
"""What the table and JSON keep of each search's `traversal_time.measure` summary."""


async def measure_interleaved(
    runs: dict[str, dict[str, Search]],
    questions: Sequence[str],
    vectors: np.ndarray,
    repetitions: int,
) -> dict[str, dict[str, Any]]:
    """Latency (ms) median and p95 of every (filter, search), each question asked of all of
    them in turn (`traversal_time.measure`: in a shuffled order), so a busy moment of the
    machine weighs on every filter alike."""
    every = {
        (filter_name, search_name): search
        for filter_name, by_search in runs.items()
        for search_name, search in by_search.items()
    }
    measured = await measure(every, questions, vectors, repetitions, None)
    results: dict[str, dict[str, Any]] = {}
    for (filter_name, search_name), summary in measured.items():
        results.setdefault(filter_name, {})[search_name] = {key: summary[key] for key in KEPT}
    return results


async def load_seconds(store: GraphStore, nodes: Sequence[Node], vectors: np.ndarray) -> float:
    """Seconds to write `nodes` after an untimed first one (which creates the tables)."""
    await store.aadd_nodes(nodes[:1], vectors=vectors[:1])
    with Stopwatch() as watch:
        await store.aadd_nodes(nodes[1:], vectors=vectors[1:])
    return watch.seconds


async def run(args: Any) -> None:
    sizes = QUICK if args.quick else FULL
    passages = data.hotpot_passages()[: sizes.passages]
    questions = [q["question"] for q in data.hotpot_questions()[: sizes.questions]]
    texts = [p.text for p in passages]
    vectors = data.embed(texts)
    question_vectors = data.embed(questions)
    links = [
        kw | mention
        for kw, mention in zip(data.keyword_links(texts), data.mention_links(passages), strict=True)
    ]
    plain = [Node(p.title, p.text, {}, tags) for p, tags in zip(passages, links, strict=True)]
    nodes = [Node(n.id, n.text, metadata(i), n.links) for i, n in enumerate(plain)]
    with open_backend(args.backend) as backend:
        bare = GraphStore(None, backend.graph_storage("plain"))
        store = GraphStore(None, backend.graph_storage("filtered"))
        write = {
            "no metadata": await load_seconds(bare, plain, vectors),
            "chapter, book, date": await load_seconds(store, nodes, vectors),
        }
        await bare.aclose()
        runs = {name: searches(store, metadata_filter) for name, metadata_filter in FILTERS.items()}
        results = await measure_interleaved(runs, questions, question_vectors, sizes.repetitions)
        await store.aclose()
    unfiltered = results["none"]
    rows = [
        [
            name,
            search,
            r["median_ms"],
            r["median_ms"] / unfiltered[search]["median_ms"],
            r["p95_ms"],
            r["queries_median"],
            r["docs_median"],
        ]
        for name, by_search in results.items()
        for search, r in by_search.items()
    ]
    print_table(
        f"Filtered search latency over {len(questions)} questions x {sizes.repetitions} "
        f"({len(nodes)} passages, {args.backend})",
        [
            "filter",
            "search",
            "median ms",
            "x unfiltered",
            "p95 ms",
            "queries (median)",
            "docs (median)",
        ],
        rows,
    )
    per_passage = {name: 1e3 * seconds / (len(nodes) - 1) for name, seconds in write.items()}
    print_table(
        f"Load of {len(nodes) - 1} passages ({args.backend})",
        ["metadata", "ms per passage"],
        list(per_passage.items()),
    )
    write_json(
        NAME,
        args,
        {
            "sizes": sizes.__dict__,
            "filters": FILTERS,
            "results": results,
            "write_ms_per_passage": per_passage,
        },
    )
    plot(args, results)


def plot(args: Any, results: dict[str, dict[str, Any]]) -> None:
    """Median latency (whiskers to p95) per filter, one bar per search."""
    with figure(NAME, args) as (axes,):
        width = 0.8 / len(SEARCHES)
        for i, search in enumerate(SEARCHES):
            xs = [n + i * width for n in range(len(results))]
            rows = [by_search[search] for by_search in results.values()]
            latency_bars(axes, xs, rows, width, search)
        axes.set_xticks([n + 0.4 - width / 2 for n in range(len(results))], list(results))
        axes.tick_params(axis="x", labelrotation=30, labelsize="small")
        axes.set_ylabel("ms (bar: median, whisker: p95)")
        axes.legend(fontsize="small")


def main(argv: Sequence[str] | None = None) -> None:
    asyncio.run(run(parse_args(__doc__.splitlines()[0], argv)))


if __name__ == "__main__":
    main()
