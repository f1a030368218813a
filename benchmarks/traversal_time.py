"""Search latency and backend queries per search, on the HotpotQA passages and questions.

Stores: graphstore, the materialized-edges baseline, LangChain's `CassandraGraphVectorStore`
(Cassandra only: same node, documents, links and embeddings, through cassio), and plain
similarity search.  Searches: `traversal_search` at depth 1, 2, 3 (k=4 roots, adjacent_k=10)
and `mmr_traversal_search` (k=10, fetch_k=20, adjacent_k=10, depth 2).  Queries counted:
graphstore's `TraversalStats` (vector searches + tags looked up), the baseline's own count,
calls into the upstream store's inner vector store; on Cassandra also the CQL requests each
search sent (`requests`, counted on the session).  Query embeddings are precomputed, so
latency is storage + traversal.

`--passages N` runs at scale: `data.scaled_corpus(N)` (8,992 distinct passages repeated with
new ids), the same 100 HotpotQA questions.  The baseline is skipped when it would write more
than `EDGE_BUDGET` edge rows, and the upstream store past `UPSTREAM_PASSAGES` passages.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import numpy as np

from benchmarks import data
from benchmarks.baseline import MaterializedEdgeStore, open_baseline
from benchmarks.common import (
    Backend,
    Stopwatch,
    argument_parser,
    figure,
    interleaved,
    latency_bars,
    median,
    open_backend,
    p95,
    print_table,
    write_json,
)
from graphstore.links import incoming_tags, outgoing_tags
from graphstore.nodes import Node
from graphstore.store import GraphStore
from graphstore.traversal import TraversalStats

NAME = "traversal_time"
SEARCHES: dict[str, dict[str, Any]] = {
    "traversal d1": {"k": 4, "depth": 1, "adjacent_k": 10},
    "traversal d2": {"k": 4, "depth": 2, "adjacent_k": 10},
    "traversal d3": {"k": 4, "depth": 3, "adjacent_k": 10},
    "mmr d2": {"k": 10, "depth": 2, "fetch_k": 20, "adjacent_k": 10, "lambda_mult": 0.5},
    "similarity": {"k": 10},
    "search (default)": {"k": 10},
}
GRAPHSTORE_ONLY = ("similarity", "search (default)")
TRAVERSAL_K = 10
"""graphstore's traversal_search returns k passages (padded with the next-nearest roots);
the baseline and upstream return every node reached from their k roots (6-8 here)."""
WARM_UP_QUERIES = 3
EDGE_BUDGET = 3_000_000
"""Most edge rows the baseline may write in one run (at 100k passages it would need ~150M)."""
UPSTREAM_PASSAGES = 10_000
"""Most passages the upstream store is loaded with: past 10k its load takes over 15 minutes
and its depth-3 traversal seconds (p95 6.2 s at 10k), hours for one run."""

K = TypeVar("K")
Search = Callable[[str, np.ndarray], Awaitable[tuple[int, int]]]
"""(question, its vector) -> (documents returned, backend queries issued)."""


@dataclass(frozen=True)
class Sizes:
    passages: int
    questions: int
    repetitions: int


FULL = Sizes(passages=994, questions=100, repetitions=5)
QUICK = Sizes(passages=150, questions=10, repetitions=1)
CASSANDRA = Sizes(passages=994, questions=100, repetitions=3)
"""Cassandra searches take tens of milliseconds: three passes over the questions."""


def graphstore_searches(store: GraphStore) -> dict[str, Search]:
    """graphstore's searches, counted with `TraversalStats`."""

    def traversal(name: str, options: dict[str, Any]) -> Search:
        async def search(_: str, vector: np.ndarray) -> tuple[int, int]:
            stats = TraversalStats()
            if name == "search (default)":
                hits = await store.asearch(vector, stats=stats, **options)
            elif "fetch_k" in options:
                hits = await store.ammr_traversal_search(vector, stats=stats, **options)
            else:
                roots = {"start_k": options["k"], "k": TRAVERSAL_K}
                hits = await store.atraversal_search(vector, stats=stats, **(options | roots))
            return len(hits), stats.vector_searches + stats.tag_queries

        return search

    async def similarity(_: str, vector: np.ndarray) -> tuple[int, int]:
        return len(await store.asimilarity_search_by_vector(vector, **SEARCHES["similarity"])), 1

    searches = {name: traversal(name, o) for name, o in SEARCHES.items() if name != "similarity"}
    return searches | {"similarity": similarity}


def baseline_searches(store: MaterializedEdgeStore) -> dict[str, Search]:
    """The baseline's traversals, counting its vector searches and edge-row reads."""

    def traversal(options: dict[str, Any]) -> Search:
        async def search(_: str, vector: np.ndarray) -> tuple[int, int]:
            stats = TraversalStats()
            if "fetch_k" in options:
                ids = await store.mmr_traversal_search(vector, stats=stats, **options)
            else:
                ids = await store.traversal_search(vector, stats=stats, **options)
            return len(ids), stats.vector_searches + stats.tag_queries

        return search

    return {name: traversal(o) for name, o in SEARCHES.items() if name not in GRAPHSTORE_ONLY}


class CountingProxy:
    """Forwards to a vector store, counting calls of its search and get methods."""

    def __init__(self, target: Any) -> None:
        self._target = target
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value) or not ("search" in name or name.endswith("by_document_id")):
            return value

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return value(*args, **kwargs)

        return counted


def upstream_searches(
    backend: Backend, passages: Sequence[Node], embeddings: data.PrecomputedEmbeddings
) -> dict[str, Search]:
    """LangChain's `CassandraGraphVectorStore` on the same node, loaded with the same data."""
    import cassio
    from langchain_community.graph_vectorstores import CassandraGraphVectorStore
    from langchain_community.graph_vectorstores.base import Node as UpstreamNode
    from langchain_community.graph_vectorstores.links import Link as UpstreamLink

    cassio.init(session=backend.session, keyspace=backend.keyspace)
    store = CassandraGraphVectorStore(
        embeddings, backend.session, backend.keyspace, backend.table("upstream")
    )
    store.add_nodes(
        UpstreamNode(
            id=n.id,
            text=n.text,
            links=[UpstreamLink(x.kind, x.direction, x.tag) for x in sorted(n.links)],
        )
        for n in passages
    )
    proxy = CountingProxy(store.vector_store)
    store.vector_store = cast(Any, proxy)  # duck-typed: it forwards every call

    def traversal(options: dict[str, Any]) -> Search:
        method = store.ammr_traversal_search if "fetch_k" in options else store.atraversal_search
        # Upstream's traversal_search takes no adjacent_k: it reads every node of a tag.
        upstream = {k: v for k, v in options.items() if "fetch_k" in options or k != "adjacent_k"}

        async def search(question: str, _: np.ndarray) -> tuple[int, int]:
            before = proxy.calls
            docs = [doc async for doc in method(question, **upstream)]
            return len(docs), proxy.calls - before

        return search

    return {name: traversal(o) for name, o in SEARCHES.items() if name not in GRAPHSTORE_ONLY}


class RequestCounter:
    """Counts the requests a driver session starts (every store of a run shares it)."""

    def __init__(self, session: Any) -> None:
        self.sent = 0
        session.add_request_init_listener(self._count)

    def _count(self, _: Any) -> None:
        self.sent += 1


async def measure(
    searches: Mapping[K, Search],
    questions: Sequence[str],
    vectors: np.ndarray,
    repetitions: int,
    counter: RequestCounter | None,
) -> dict[K, dict[str, float | None]]:
    """Each search's latency (ms) median and p95 over every question and repetition, after a
    warm-up.  The searches run interleaved question by question, in a seeded order shuffled
    for each question (`common.interleaved`), so a drift of the machine (or of the node:
    compaction, a flush) lands on all of them alike rather than on whichever ran in its
    block."""
    pairs = list(zip(questions, vectors, strict=True))
    for search in searches.values():
        for question, vector in pairs[:WARM_UP_QUERIES]:
            await search(question, vector)
    samples: dict[K, dict[str, list[float]]] = {
        key: {"latencies": [], "returned": [], "queries": [], "requests": []} for key in searches
    }
    rounds = interleaved(list(searches.items()))
    for _ in range(repetitions):
        for question, vector in pairs:
            for key, search in next(rounds):
                before = counter.sent if counter else 0
                with Stopwatch() as watch:
                    count, issued = await search(question, vector)
                taken = samples[key]
                taken["latencies"].append(1e3 * watch.seconds)
                taken["returned"].append(count)
                taken["queries"].append(issued)
                taken["requests"].append((counter.sent if counter else 0) - before)
    return {key: _summary(taken, counter is not None) for key, taken in samples.items()}


def _summary(samples: dict[str, list[float]], counted: bool) -> dict[str, float | None]:
    latencies, queries = samples["latencies"], samples["queries"]
    return {
        "median_ms": median(latencies),
        "p95_ms": p95(latencies),
        "queries_median": median(queries),
        "queries_max": float(max(queries)),
        "requests_median": median(samples["requests"]) if counted else None,
        "docs_median": median(samples["returned"]),
        "samples": len(latencies),
    }


def edge_rows(nodes: Sequence[Node]) -> int:
    """The edge rows the baseline would write for these nodes: for every tag, the nodes
    linking out to it times the nodes linking in to it."""
    into: dict[Any, int] = {}
    out: dict[Any, int] = {}
    for node in nodes:
        for tag in incoming_tags(node.links):
            into[tag] = into.get(tag, 0) + 1
        for tag in outgoing_tags(node.links):
            out[tag] = out.get(tag, 0) + 1
    return sum(count * out.get(tag, 0) for tag, count in into.items())


def corpus(passages: int | None, first: int) -> tuple[list[Node], np.ndarray]:
    """The stored passages: the `first` HotpotQA passages with their keyword and title-mention
    links (mentions of any of the 994 titles), or `data.scaled_corpus(passages)`.  Only the
    passages stored are embedded and given keywords (a fresh clone has none cached)."""
    if passages:
        return data.scaled_corpus(passages)
    hotpot = data.hotpot_passages()
    texts = [p.text for p in hotpot[:first]]
    mentions = data.mention_links(hotpot)[:first]
    links = [kw | mention for kw, mention in zip(data.keyword_links(texts), mentions, strict=True)]
    nodes = [
        Node(p.title, p.text, {}, frozenset(tag_set))
        for p, tag_set in zip(hotpot[:first], links, strict=True)
    ]
    return nodes, data.embed(texts)


async def run(args: Any) -> None:
    sizes = QUICK if args.quick else FULL if args.backend == "embedded" else CASSANDRA
    nodes, vectors = corpus(args.passages, sizes.passages)
    questions = [q["question"] for q in data.hotpot_questions()[: sizes.questions]]
    question_vectors = data.embed(questions)
    edges_needed = edge_rows(nodes)
    results: dict[str, dict[str, Any]] = {}
    with open_backend(args.backend) as backend:
        counter = RequestCounter(backend.session) if backend.name == "cassandra" else None
        graph = GraphStore(None, backend.graph_storage("gs"))
        await graph.aadd_nodes(nodes, vectors=vectors)
        stores = {"graphstore": graphstore_searches(graph)}
        edges = None
        if edges_needed <= EDGE_BUDGET:
            edges = open_baseline(backend, "edges", vectors.shape[1])
            for start in range(0, len(nodes), 64):
                await edges.add(nodes[start : start + 64], vectors[start : start + 64])
            stores["baseline"] = baseline_searches(edges)
        else:
            print(f"baseline skipped: it would write {edges_needed:,} edge rows")
        if backend.name == "cassandra" and len(nodes) > UPSTREAM_PASSAGES:
            print(f"upstream store skipped past {UPSTREAM_PASSAGES:,} passages")
        elif backend.name == "cassandra":
            embeddings = data.PrecomputedEmbeddings(
                [*(n.text for n in nodes), *questions], np.concatenate([vectors, question_vectors])
            )
            stores["upstream CassandraGraphVectorStore"] = upstream_searches(
                backend, nodes, embeddings
            )
        every = {
            (search_name, "plain similarity" if search_name == "similarity" else store_name): search
            for store_name, searches in stores.items()
            for search_name, search in searches.items()
        }
        measured = await measure(every, questions, question_vectors, sizes.repetitions, counter)
        for (search_name, label), summary in measured.items():
            results.setdefault(search_name, {})[label] = summary
        await graph.aclose()
        if edges is not None:
            await edges.close()
    rows = [
        [
            search,
            store,
            r["median_ms"],
            r["p95_ms"],
            r["queries_median"],
            r["queries_max"],
            r["requests_median"],
            r["docs_median"],
        ]
        for search, by_store in results.items()
        for store, r in by_store.items()
    ]
    links = sum(len(node.links) for node in nodes)
    print_table(
        f"Search latency over {len(questions)} questions x {sizes.repetitions} "
        f"({len(nodes)} passages, {links} links, {args.backend})",
        [
            "search",
            "store",
            "median ms",
            "p95 ms",
            "queries (median)",
            "queries (max)",
            "requests (median)",
            "docs",
        ],
        rows,
    )
    name = f"{NAME}-{args.passages}" if args.passages else NAME
    write_json(
        name,
        args,
        {
            "sizes": sizes.__dict__,
            "passages": len(nodes),
            "searches": SEARCHES,
            "links": links,
            "baseline_edge_rows": edges_needed,
            "results": results,
        },
    )
    plot(name, args, results)


def plot(name: str, args: Any, results: dict[str, dict[str, Any]]) -> None:
    """Median latency (whiskers to p95) and queries per search, grouped by search."""
    stores = sorted({store for by_store in results.values() for store in by_store})
    with figure(name, args, panels=2) as (latency, queries):
        width = 0.8 / len(stores)
        for i, store in enumerate(stores):
            names = [s for s in results if store in results[s]]
            xs = [list(results).index(s) + i * width for s in names]
            latency_bars(latency, xs, [results[s][store] for s in names], width, store)
            queries.bar(
                xs, [results[s][store]["queries_median"] for s in names], width, label=store
            )
        for axes, label in (
            (latency, "ms (bar: median, whisker: p95)"),
            (queries, "backend queries per search (median)"),
        ):
            axes.set_xticks([i + 0.4 - width / 2 for i in range(len(results))], list(results))
            axes.set_ylabel(label)
            axes.set_yscale("log")
            axes.legend(fontsize="small")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argument_parser(__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, help="run at scale with this many passages")
    asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
