"""One Cassandra node against three: load throughput and search latency, on one machine.

Setups: a 1-node cluster (replication factor 1), then a 3-node cluster on 127.0.0.2-4 with
replication factor 1 and with 3 (writes and key reads at QUORUM, the default
LOCAL_QUORUM), every node with the same heap, started by `graphstore.testing.local_cluster`
for the run and stopped after.  Load: the 994 HotpotQA passages with keyword and
title-mention links (precomputed embeddings, batches of 64), the median of several loads
into fresh tables.  Latency: the searches of `traversal_time` on the same passages, over
the 100 questions.  All nodes share this machine's cores, so a 3-node cluster here measures
the cost of replication and coordination, not the capacity of three hosts
(benchmarks/README.md says what to expect on separate hosts).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks import data
from benchmarks.common import (
    Backend,
    cassandra_backend,
    figure,
    median,
    parse_args,
    print_table,
    write_json,
)
from benchmarks.load_scaling import BATCH, timed_chunks, warm_up_chunk
from benchmarks.traversal_time import SEARCHES, RequestCounter, graphstore_searches, measure
from graphstore.nodes import Node
from graphstore.store import GraphStore

NAME = "cluster"
MEASURED = ("similarity", "traversal d2", "mmr d2", "search (default)")
HEAP = "1G"
"""Per node, in every setup: the single test node's heap."""


@dataclass(frozen=True)
class Setup:
    nodes: int
    replication_factor: int

    @property
    def label(self) -> str:
        return f"{self.nodes} node{'s' * (self.nodes > 1)}, RF {self.replication_factor}"


SETUPS = (Setup(1, 1), Setup(3, 1), Setup(3, 3))


@dataclass(frozen=True)
class Sizes:
    passages: int
    questions: int
    loads: int
    repetitions: int


FULL = Sizes(passages=994, questions=100, loads=3, repetitions=2)
QUICK = Sizes(passages=150, questions=10, loads=1, repetitions=1)


@dataclass(frozen=True)
class Corpus:
    """Passages with their links and embeddings, and the questions with theirs."""

    nodes: list[Node]
    vectors: np.ndarray
    questions: list[str]
    question_vectors: np.ndarray


def hotpot_corpus(sizes: Sizes) -> Corpus:
    """HotpotQA passages with keyword + title-mention links, as `traversal_time` has them."""
    passages = data.hotpot_passages()[: sizes.passages]
    texts = [p.text for p in passages]
    links = [
        kw | mention
        for kw, mention in zip(data.keyword_links(texts), data.mention_links(passages), strict=True)
    ]
    questions = [q["question"] for q in data.hotpot_questions()[: sizes.questions]]
    return Corpus(
        [
            Node(p.title, p.text, {}, frozenset(tags))
            for p, tags in zip(passages, links, strict=True)
        ],
        data.embed(texts),
        questions,
        data.embed(questions),
    )


async def load(backend: Backend, corpus: Corpus, loads: int) -> dict[str, Any]:
    """Passages per second of `loads` loads into fresh tables (median), in batches of 64."""
    nodes, vectors = corpus.nodes, corpus.vectors
    chunks = [
        (nodes[start : start + BATCH], vectors[start : start + BATCH])
        for start in range(0, len(nodes), BATCH)
    ]
    totals = []
    for _ in range(loads):
        seconds, _ = await timed_chunks(backend, "graphstore", chunks, warm_up_chunk(vectors))
        totals.append(sum(seconds))
    return {
        "seconds": totals,
        "passages_per_second": len(nodes) / median(totals),
        "load_average": os.getloadavg()[0],
    }


async def latency(backend: Backend, corpus: Corpus, repetitions: int) -> dict[str, Any]:
    """Each measured search over every question (`traversal_time.measure`)."""
    store = GraphStore(None, backend.graph_storage("gs"))
    try:
        await store.aadd_nodes(corpus.nodes, vectors=corpus.vectors)
        searches = graphstore_searches(store)
        counter = RequestCounter(backend.session)
        results: dict[str, Any] = await measure(
            {name: searches[name] for name in MEASURED},
            corpus.questions,
            corpus.question_vectors,
            repetitions,
            counter,
        )
    finally:
        await store.aclose()
        backend.clear()
    return results | {"load_average": os.getloadavg()[0]}


async def run(args: Any) -> None:
    from graphstore.testing.local_cluster import running_cluster

    sizes = QUICK if args.quick else FULL
    corpus = hotpot_corpus(sizes)
    results: dict[str, Any] = {}
    for nodes in sorted({setup.nodes for setup in SETUPS}):
        with running_cluster(nodes, heap=HEAP) as cluster:
            for setup in (s for s in SETUPS if s.nodes == nodes):
                print(f"measuring {setup.label}", flush=True)
                with cassandra_backend(
                    cluster.hosts, cluster.port, setup.replication_factor, "QUORUM"
                ) as backend:
                    results[setup.label] = {
                        "load": await load(backend, corpus, sizes.loads),
                        "latency": await latency(backend, corpus, sizes.repetitions),
                    }
    report(results, sizes)
    write_json(NAME, args, {"sizes": sizes.__dict__, "searches": SEARCHES, "results": results})
    plot(args, results)


def report(results: dict[str, Any], sizes: Sizes) -> None:
    """The table on stdout."""
    rows = []
    for label, result in results.items():
        timed = result["latency"]
        rows.append(
            [
                label,
                result["load"]["passages_per_second"],
                *(f"{timed[s]['median_ms']:.1f} / {timed[s]['p95_ms']:.1f}" for s in MEASURED),
                f"{result['load']['load_average']:.1f} / {timed['load_average']:.1f}",
            ]
        )
    print_table(
        f"{sizes.passages} passages; latency over {sizes.questions} questions x "
        f"{sizes.repetitions} (median / p95 ms)",
        ["setup", "load passages/s", *MEASURED, "load average (load / search)"],
        rows,
    )


def plot(args: Any, results: dict[str, Any]) -> None:
    """Load throughput per setup, and median latency (whiskers to p95) per search."""
    with figure(NAME, args, panels=2) as (throughput, latencies):
        labels = list(results)
        throughput.bar(labels, [results[s]["load"]["passages_per_second"] for s in labels])
        throughput.set(title="load", ylabel="passages / s")
        width = 0.8 / len(labels)
        for i, label in enumerate(labels):
            timed = results[label]["latency"]
            medians = [timed[s]["median_ms"] for s in MEASURED]
            spread = [timed[s]["p95_ms"] - m for s, m in zip(MEASURED, medians, strict=True)]
            xs = [j + i * width for j in range(len(MEASURED))]
            latencies.bar(xs, medians, width, yerr=[[0] * len(xs), spread], label=label, capsize=2)
        latencies.set_xticks([j + 0.4 - width / 2 for j in range(len(MEASURED))], MEASURED)
        latencies.set(title="search latency", ylabel="ms (bar: median, whisker: p95)")
        latencies.legend(fontsize="small")


def main(argv: Sequence[str] | None = None) -> None:
    asyncio.run(run(parse_args(__doc__.splitlines()[0], argv, ("cassandra",))))


if __name__ == "__main__":
    main()
