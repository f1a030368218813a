"""Write cost as the store grows: graphstore's tag rows against materialized edges.

Headline: 136 HotpotQA passages linked by shared KeyBERT keywords, loaded six times over
(new ids, same texts, links and embeddings).  graphstore writes one row per incoming tag,
so every round costs the same; the baseline writes an edge to every earlier passage sharing
a tag, so its rounds grow with the store.  The worst case gives every passage the same five
keywords.  The curve then extends graphstore to 10k+ passages (HotpotQA + 2Wiki, repeated
with new ids) against a plain vector-store load of the same passages and embeddings.

On Cassandra the curve goes to 100,000 passages (`data.scaled_corpus`), once each, and the
graph searches of `traversal_time` are timed on the growing store after its 1st and 10th
decile (10k and 100k passages); the hot-tag run then loads 50,000 passages that all carry
one more tag and times `search_tag` on it against small tags.

Embeddings are computed once up front and timed separately; every store gets an untimed
warm-up write (schema creation, prepared statements) and each measurement is the median of
several repetitions on fresh stores.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks import data
from benchmarks.baseline import open_baseline
from benchmarks.common import (
    Backend,
    Stopwatch,
    figure,
    median,
    open_backend,
    parse_args,
    print_table,
    write_json,
)
from benchmarks.traversal_time import RequestCounter, graphstore_searches, measure
from graphstore.filters import EVERYTHING
from graphstore.links import Link, incoming_tags
from graphstore.nodes import Node
from graphstore.store import GraphStore

NAME = "load_scaling"
BATCH = 64
"""Passages per write call for every store (graphstore's default batch size)."""
WORST_CASE_TAGS = frozenset(Link.bidir("kw", f"shared keyword {i}") for i in range(5))
WARM_UP = 16
COLORS = {
    "graphstore": "C0",
    "baseline": "C1",
    "graphstore_no_links": "C2",
    "cassio_vector_table": "C3",
}

Add = Callable[[list[Node], np.ndarray], Awaitable[None]]


@dataclass(frozen=True)
class Sizes:
    """How much to load: a `--quick` run and a full run differ only here."""

    base: int
    rounds: int
    curve_total: int
    curve_chunks: int
    repetitions: int


FULL = Sizes(base=136, rounds=6, curve_total=10_000, curve_chunks=10, repetitions=5)
QUICK = Sizes(base=24, rounds=3, curve_total=300, curve_chunks=3, repetitions=1)
CASSANDRA = Sizes(base=136, rounds=6, curve_total=100_000, curve_chunks=10, repetitions=1)
HOT_TAG = Link.bidir("kw", "shared by every passage")
HOT_TAG_PASSAGES = 50_000
HOT_TAG_QUERIES = 100
WORST_CASE_BASELINE_REPETITIONS = 1
"""The worst-case baseline runs once: on Cassandra it writes 665k edge rows per run (over
three minutes on a quiet 2-core machine), and its growth (an order of magnitude) dwarfs
run-to-run noise."""


@dataclass
class Store:
    """A fresh store under test: how to write a batch of nodes, and how to release it."""

    add: Add
    close: Callable[[], Awaitable[None]]
    edge_rows: Callable[[], int] = lambda: 0
    """Edge rows written so far (the baseline's; the others store none)."""
    graph: GraphStore | None = None
    """The store itself, for graphstore (searched between chunks)."""


def copies(
    passages: Sequence[data.Passage], links: Sequence[frozenset[Link]], copy: int
) -> list[Node]:
    """Copy number `copy` of the passages: new ids, same texts and links."""
    return [
        Node(f"c{copy}:{i}", p.text, {}, tag_set)
        for i, (p, tag_set) in enumerate(zip(passages, links, strict=True))
    ]


def incoming_rows(nodes: Iterable[Node]) -> int:
    """graphstore's tag rows for these nodes: one per incoming link."""
    return sum(len(incoming_tags(node.links)) for node in nodes)


def open_store(backend: Backend, kind: str, dimension: int) -> Store:
    """A fresh store: `graphstore`, `baseline` (materialized edges) or `cassio` (plain)."""
    if kind == "graphstore":
        graph = GraphStore(None, backend.graph_storage("gs"), batch_size=BATCH)

        async def add_nodes(nodes: list[Node], vectors: np.ndarray) -> None:
            await graph.aadd_nodes(nodes, vectors=vectors)

        return Store(add_nodes, graph.aclose, graph=graph)
    if kind == "baseline":
        edges = open_baseline(backend, "edges", dimension)

        async def add_edges(nodes: list[Node], vectors: np.ndarray) -> None:
            for start in range(0, len(nodes), BATCH):
                await edges.add(nodes[start : start + BATCH], vectors[start : start + BATCH])

        return Store(add_edges, edges.close, lambda: edges.edges_written)
    from cassio.table import VectorCassandraTable

    table = VectorCassandraTable(
        table=backend.table("cassio"),
        session=backend.session,
        keyspace=backend.keyspace,
        vector_dimension=dimension,
    )
    gate = asyncio.Semaphore(32)

    async def put(node: Node, vector: np.ndarray) -> None:
        async with gate:
            await table.aput(row_id=node.id, body_blob=node.text, vector=vector.tolist())

    async def add_rows(nodes: list[Node], vectors: np.ndarray) -> None:
        await asyncio.gather(*(put(n, v) for n, v in zip(nodes, vectors, strict=True)))

    async def nothing() -> None:
        return None

    return Store(add_rows, nothing)


Probe = Callable[[Store, int], Awaitable[None]]
"""Called between chunks (untimed) with the store and the passages stored so far."""


async def timed_chunks(
    backend: Backend,
    kind: str,
    chunks: Sequence[tuple[list[Node], np.ndarray]],
    warm_up: tuple[list[Node], np.ndarray],
    probe: Probe | None = None,
) -> tuple[list[float], int]:
    """Seconds to write each chunk, in order, into one fresh store (after a warm-up), and
    the edge rows written."""
    store = open_store(backend, kind, warm_up[1].shape[1])
    try:
        await store.add(*warm_up)
        seconds = []
        stored = 0
        for nodes, vectors in chunks:
            with Stopwatch() as watch:
                await store.add(nodes, vectors)
            seconds.append(watch.seconds)
            stored += len(nodes)
            if probe is not None:
                await probe(store, stored)
        return seconds, store.edge_rows()
    finally:
        await store.close()
        backend.clear()


async def repeated(
    backend: Backend,
    kind: str,
    chunks: Sequence[tuple[list[Node], np.ndarray]],
    warm_up: tuple[list[Node], np.ndarray],
    repetitions: int,
    *,
    probe: Probe | None = None,
) -> tuple[list[float], int]:
    """Per-chunk medians over `repetitions` fresh stores, and the edge rows each wrote."""
    runs = [await timed_chunks(backend, kind, chunks, warm_up, probe) for _ in range(repetitions)]
    seconds = [median(column) for column in zip(*(run[0] for run in runs), strict=True)]
    return seconds, runs[-1][1]


def warm_up_chunk(vectors: np.ndarray) -> tuple[list[Node], np.ndarray]:
    """A few passages under their own tags: they share no tag with the measured ones."""
    nodes = [
        Node(f"warm:{i}", f"warm-up passage {i}", {}, frozenset({Link.bidir("warm", str(i))}))
        for i in range(WARM_UP)
    ]
    return nodes, vectors[:WARM_UP]


def time_embedding(texts: Sequence[str]) -> dict[str, float]:
    """Embedding throughput of the model alone (after a warm-up call), for comparison."""
    model = data.model()
    model.embed_documents(list(texts[:8]))
    with Stopwatch() as watch:
        model.embed_documents(list(texts))
    return {
        "passages": len(texts),
        "seconds": watch.seconds,
        "per_passage_ms": 1e3 * watch.seconds / len(texts),
    }


async def rounds(
    backend: Backend,
    sizes: Sizes,
    passages: Sequence[data.Passage],
    links: Sequence[frozenset[Link]],
    vectors: np.ndarray,
    *,
    baseline_repetitions: int,
) -> dict[str, Any]:
    """The same passages loaded `sizes.rounds` times into graphstore and the baseline."""
    chunks = [(copies(passages, links, r), vectors) for r in range(sizes.rounds)]
    warm = warm_up_chunk(vectors)
    result: dict[str, Any] = {"passages_per_round": len(passages)}
    repetitions = {"graphstore": sizes.repetitions, "baseline": baseline_repetitions}
    for kind, times in repetitions.items():
        seconds, edge_rows = await repeated(backend, kind, chunks, warm, times)
        result[kind] = {
            "seconds": seconds,
            "last_over_first": seconds[-1] / seconds[0],
            "repetitions": times,
        }
    result["baseline_edge_rows"] = edge_rows
    result["graphstore_tag_rows"] = incoming_rows(node for nodes, _ in chunks for node in nodes)
    return result


async def curve(
    backend: Backend,
    sizes: Sizes,
    nodes: list[Node],
    vectors: np.ndarray,
    probe: Probe | None = None,
) -> dict[str, Any]:
    """graphstore loading `nodes` in `sizes.curve_chunks` equal chunks, against plain vector
    loads of the same passages; `probe` runs between graphstore's chunks."""
    # shuffled, so every chunk has the same mix of short and richly linked passages and the
    # curve shows the store's growth, not the corpus order
    order = np.random.default_rng(0).permutation(len(nodes))
    nodes, all_vectors = [nodes[i] for i in order], vectors[order]
    size = -(-len(nodes) // sizes.curve_chunks)
    linked = [(nodes[i : i + size], all_vectors[i : i + size]) for i in range(0, len(nodes), size)]
    plain = [([Node(n.id, n.text) for n in chunk], v) for chunk, v in linked]
    warm = warm_up_chunk(all_vectors)
    result: dict[str, Any] = {
        "passages": len(nodes),
        "tag_rows": incoming_rows(nodes),
        "stored_after_chunk": list(np.cumsum([len(chunk) for chunk, _ in linked]).tolist()),
    }
    loads = {"graphstore": linked, "graphstore_no_links": plain}
    kinds = {"graphstore": "graphstore", "graphstore_no_links": "graphstore"}
    if backend.name == "cassandra":
        loads["cassio_vector_table"], kinds["cassio_vector_table"] = plain, "cassio"
    for label, chunks in loads.items():
        seconds, _ = await repeated(
            backend,
            kinds[label],
            chunks,
            warm,
            sizes.repetitions,
            probe=probe if label == "graphstore" else None,
        )
        per_passage = [1e3 * s / len(c) for s, (c, _) in zip(seconds, chunks, strict=True)]
        rows = [incoming_rows(c) for c, _ in chunks]
        result[label] = {
            "seconds": seconds,
            "ms_per_passage": per_passage,
            "us_per_tag_row": [
                1e6 * s / r if r else None for s, r in zip(seconds, rows, strict=True)
            ],
            "passages_per_second": len(nodes) / sum(seconds),
            "last_over_first_ms_per_passage": per_passage[-1] / per_passage[0],
        }
    speed = result["graphstore"]["passages_per_second"]
    result["tag_row_cost"] = {
        label: result[label]["passages_per_second"] / speed
        for label in loads
        if label != "graphstore"
    }
    return result


def corpus_copies(
    passages: Sequence[data.Passage],
    links: Sequence[frozenset[Link]],
    vectors: np.ndarray,
    total: int,
) -> tuple[list[Node], np.ndarray]:
    """The passages repeated with new ids (`copies`) until there are `total` or more."""
    count = -(-total // len(passages))
    nodes = [node for copy in range(count) for node in copies(passages, links, copy)]
    return nodes, np.concatenate([vectors] * count)


class SearchProbe:
    """Times `traversal_time`'s graph searches on graphstore after the chunks that bring the
    store to one of `at` passages (Cassandra, over the HotpotQA questions)."""

    def __init__(self, backend: Backend, at: Sequence[int]) -> None:
        self.at = set(at)
        self.counter = RequestCounter(backend.session)
        self.questions = [q["question"] for q in data.hotpot_questions()]
        self.vectors = data.embed(self.questions)
        self.results: dict[int, dict[str, Any]] = {}

    async def __call__(self, store: Store, stored: int) -> None:
        if stored not in self.at or store.graph is None:
            return
        self.results[stored] = await measure(
            graphstore_searches(store.graph), self.questions, self.vectors, 1, self.counter
        )


async def hot_tag(backend: Backend, passages: int) -> dict[str, Any]:
    """`passages` passages that all carry `HOT_TAG` besides their own links, loaded in 10
    chunks; then `search_tag` on the hot tag against small tags (k = 10), by medians."""
    nodes, vectors = data.scaled_corpus(passages)
    nodes = [Node(n.id, n.text, n.metadata, n.links | {HOT_TAG}) for n in nodes]
    chunk = -(-len(nodes) // 10)
    chunks = [(nodes[i : i + chunk], vectors[i : i + chunk]) for i in range(0, len(nodes), chunk)]
    store = open_store(backend, "graphstore", vectors.shape[1])
    assert store.graph is not None
    storage = store.graph.storage
    try:
        await store.add(*warm_up_chunk(vectors))
        seconds = []
        for part in chunks:
            with Stopwatch() as watch:
                await store.add(*part)
            seconds.append(watch.seconds)
        sizes: dict[Any, int] = {}
        for node in nodes[: len(nodes) // 10]:
            for tag in incoming_tags(node.links):
                sizes[tag] = sizes.get(tag, 0) + 1
        small = sorted(tag for tag, size in sizes.items() if 2 <= size <= 20)
        small = small[:: max(1, len(small) // HOT_TAG_QUERIES)][:HOT_TAG_QUERIES]
        queries = data.embed([q["question"] for q in data.hotpot_questions()])
        hot_ms: list[float] = []
        small_ms: list[float] = []
        for i, query in enumerate(queries[:HOT_TAG_QUERIES]):
            for tag, timings in ((HOT_TAG.key, hot_ms), (small[i % len(small)], small_ms)):
                with Stopwatch() as watch:
                    await storage.search_tag(tag, query, 10, EVERYTHING)
                timings.append(1e3 * watch.seconds)
        per_passage = [1e3 * s / len(part[0]) for s, part in zip(seconds, chunks, strict=True)]
        hot_hits = await storage.search_tag(HOT_TAG.key, queries[0], 10, EVERYTHING)
        return {
            "passages": len(nodes),
            "ms_per_passage": per_passage,
            "last_over_first_ms_per_passage": per_passage[-1] / per_passage[0],
            "hot_tag_size": (await storage.tag_sizes([HOT_TAG.key]))[HOT_TAG.key],
            "hot_tag_hits": len(hot_hits),
            "search_tag_hot_ms": median(hot_ms),
            "search_tag_small_ms": median(small_ms),
            "hot_over_small": median(hot_ms) / median(small_ms),
        }
    finally:
        await store.close()
        backend.clear()


def report(
    embedding: dict[str, float],
    headline: dict[str, Any],
    worst: dict[str, Any],
    grown: dict[str, Any],
    hot: dict[str, Any] | None,
) -> None:
    """The tables on stdout."""
    print_table(
        "Embedding (all-MiniLM-L6-v2, CPU) vs storage",
        ["passages", "embed s", "embed ms/passage", "graphstore store ms/passage (round 1)"],
        [
            [
                embedding["passages"],
                embedding["seconds"],
                embedding["per_passage_ms"],
                1e3 * headline["graphstore"]["seconds"][0] / headline["passages_per_round"],
            ]
        ],
    )
    for title, result in (
        ("Keyword links", headline),
        ("Worst case: one shared set of 5 keywords", worst),
    ):
        rows = [
            [r + 1, (r + 1) * result["passages_per_round"], g, b]
            for r, (g, b) in enumerate(
                zip(result["graphstore"]["seconds"], result["baseline"]["seconds"], strict=True)
            )
        ]
        rows.append(
            [
                "last/first",
                "",
                result["graphstore"]["last_over_first"],
                result["baseline"]["last_over_first"],
            ]
        )
        print_table(
            f"{title}: seconds per round of {result['passages_per_round']} passages "
            f"(baseline wrote {result['baseline_edge_rows']} edge rows, graphstore "
            f"{result['graphstore_tag_rows']} tag rows)",
            ["round", "stored after", "graphstore s", "baseline s"],
            rows,
        )
    labels = [
        label for label in grown if isinstance(grown[label], dict) and "seconds" in grown[label]
    ]
    print_table(
        f"graphstore to {grown['passages']} passages ({grown['tag_rows']} tag rows): "
        "ms per passage",
        ["stored after", *labels, "graphstore µs per tag row"],
        [
            [
                stored,
                *(grown[label]["ms_per_passage"][i] for label in labels),
                grown["graphstore"]["us_per_tag_row"][i],
            ]
            for i, stored in enumerate(grown["stored_after_chunk"])
        ]
        + [["passages/s", *(grown[label]["passages_per_second"] for label in labels), ""]],
    )
    print("plain-load speed / graphstore speed (the cost of tag rows):", grown["tag_row_cost"])
    searched = grown.get("searches") or {}
    if searched:
        first, last = next(iter(searched.values())), list(searched.values())[-1]
        names = list(first)
        print_table(
            "graphstore searches on the growing store (median ms / CQL requests per search)",
            ["search", *(f"{stored} passages" for stored in searched), "last / first"],
            [
                [
                    name,
                    *(
                        f"{at[name]['median_ms']:.4g} / {at[name]['requests_median']:.3g}"
                        for at in searched.values()
                    ),
                    last[name]["median_ms"] / first[name]["median_ms"],
                ]
                for name in names
            ],
        )
    if hot:
        print_table(
            f"One tag on all {hot['passages']} passages: ms per passage by decile, then "
            "search_tag (k = 10) on it and on small tags",
            ["decile", "ms per passage"],
            [[i + 1, ms] for i, ms in enumerate(hot["ms_per_passage"])]
            + [
                ["last / first", hot["last_over_first_ms_per_passage"]],
                ["search_tag hot ms", hot["search_tag_hot_ms"]],
                ["search_tag small ms", hot["search_tag_small_ms"]],
                ["hot / small", hot["hot_over_small"]],
            ],
        )


def plot(args: Any, headline: dict[str, Any], worst: dict[str, Any], grown: dict[str, Any]) -> None:
    """Three panels: keyword rounds, worst-case rounds, ms per passage up to 10k+."""
    with figure(NAME, args, panels=3) as (keyword_axes, worst_axes, curve_axes):
        for axes, result, title in (
            (keyword_axes, headline, "keyword links"),
            (worst_axes, worst, "worst case: 5 keywords shared by all"),
        ):
            stored = [
                (r + 1) * result["passages_per_round"]
                for r in range(len(result["graphstore"]["seconds"]))
            ]
            for kind in ("graphstore", "baseline"):
                axes.plot(
                    stored, result[kind]["seconds"], marker="o", label=kind, color=COLORS[kind]
                )
            axes.set(title=title, xlabel="passages stored after round", ylabel="seconds per round")
            axes.legend()
        for label in ["graphstore", *grown["tag_row_cost"]]:
            curve_axes.plot(
                grown["stored_after_chunk"],
                grown[label]["ms_per_passage"],
                marker="o",
                label=label,
                color=COLORS[label],
            )
        curve_axes.set(
            title="write cost as the store grows",
            xlabel="passages stored",
            ylabel="ms per passage",
            ylim=(0, None),
        )
        curve_axes.legend()


async def run(args: Any) -> None:
    sizes = QUICK if args.quick else FULL if args.backend == "embedded" else CASSANDRA
    hotpot = data.hotpot_passages()
    base = hotpot[: sizes.base]
    base_texts = [p.text for p in base]
    embedding = time_embedding(base_texts)
    base_vectors = data.embed(base_texts)
    base_links = data.keyword_links(base_texts)
    if args.backend == "cassandra" and not args.quick:
        nodes, vectors = data.scaled_corpus(sizes.curve_total)
    else:
        corpus = hotpot + data.wiki_passages()
        if args.quick:
            corpus = corpus[: sizes.curve_total // 2]
        texts = [p.text for p in corpus]
        corpus_links = [
            kw | mention
            for kw, mention in zip(
                data.keyword_links(texts), data.mention_links(corpus), strict=True
            )
        ]
        nodes, vectors = corpus_copies(corpus, corpus_links, data.embed(texts), sizes.curve_total)
    with open_backend(args.backend) as backend:
        headline = await rounds(
            backend, sizes, base, base_links, base_vectors, baseline_repetitions=sizes.repetitions
        )
        worst = await rounds(
            backend,
            sizes,
            base,
            [WORST_CASE_TAGS] * len(base),
            base_vectors,
            baseline_repetitions=min(sizes.repetitions, WORST_CASE_BASELINE_REPETITIONS),
        )
        probe = None
        if backend.name == "cassandra":
            decile = -(-len(nodes) // sizes.curve_chunks)
            probe = SearchProbe(backend, [decile, len(nodes)])
        grown = await curve(backend, sizes, nodes, vectors, probe)
        hot = None
        if backend.name == "cassandra":
            grown["searches"] = probe.results if probe else {}
            hot = await hot_tag(backend, HOT_TAG_PASSAGES if not args.quick else 600)
    report(embedding, headline, worst, grown, hot)
    write_json(
        NAME,
        args,
        {
            "sizes": sizes.__dict__,
            "embedding": embedding,
            "rounds": headline,
            "worst_case": worst,
            "curve": grown,
            "hot_tag": hot,
        },
    )
    plot(args, headline, worst, grown)


def main(argv: Sequence[str] | None = None) -> None:
    asyncio.run(run(parse_args(__doc__.splitlines()[0], argv)))


if __name__ == "__main__":
    main()
