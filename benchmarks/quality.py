"""Multi-hop retrieval quality on the two dev sets: does the default search beat similarity?

Data sets (`../shared/data/`): HotpotQA train (100 questions, 994 passages, 2 gold titles
each) and 2WikiMultihopQA dev (721 questions, 7,005 passages, 2 or 4 gold titles).  Passages
are indexed with id = title; gold = the supporting titles.  For k = 2, 5, 10: recall@k (share
of gold among the k returned), all@k (share of questions with every gold passage found),
recall by question type, and the mean number of passages returned.  Latency: the median
time of one search by vector (the question embeddings are precomputed) at the default k (5)
and at k = 10, over three passes with the methods interleaved question by question (in a
seeded order shuffled for each question), and its ratio to plain similarity in the same run.
Paired differences (`benchmarks.paired`): the default search against similarity with each
link set, and with both link kinds against mentions alone, question by question, with a 95 %
bootstrap interval; the JSON keeps each method's per-question recall.

Links: none, KeyBERT top-5 keywords (`kw`, bidirectional), title mentions (a passage links out to
every title of the corpus it names, by the title or its unambiguous qualifier-free form; the
titled passage links in), or both; `--links exact-mentions` adds title mentions by the exact
title only.  Methods, all at their defaults unless named: similarity; `GraphStore.search`
(the default graph search); `mmr_traversal_search`; `traversal_search`; the alternatives
the defaults were chosen against (relevance alone, lambda 1; a wave that expands the 10 best
roots before selecting; no damping of the hops after the first, damping 1, or twice as much,
damping 0.5; ten passages per tag, adjacent_k 10; keyword hops that pass no relevance and
raise nothing, as section paths, `kw structural`); personalized PageRank over the whole
passage–tag graph seeded by the nearest passages (`benchmarks.pagerank`, computed in memory
outside the store); and on HotpotQA the `langchain-graph-retriever` anchor (`Eager`, over
`InMemoryVectorStore` with the same embeddings and links as metadata).  No setting differs
between data sets.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from benchmarks import data
from benchmarks.common import (
    Stopwatch,
    argument_parser,
    figure,
    interleaved,
    median,
    open_backend,
    print_table,
    write_json,
)
from benchmarks.pagerank import pagerank_search
from benchmarks.paired import Paired, all_found, paired
from graphstore.links import Link
from graphstore.nodes import Node
from graphstore.relevance import STRUCTURAL_KINDS
from graphstore.store import GraphStore, run_sync
from graphstore.strategy import DEFAULT

NAME = "quality"
KS = (2, 5, 10)
LATENCY_KS = (DEFAULT.k, max(KS))
"""Latency is measured at the k a user gets with no options, and at the largest k scored."""
LINKS = ("none", "keywords", "mentions", "both")
"""The link sets a run measures by default (`none`: no links at all, what a store of flat
text gets); `--links exact-mentions` also measures title mentions without the
qualifier-free aliases (`extractors.mentions.title_aliases`)."""
DATASETS = ("hotpotqa", "2wiki")
REFERENCE = {
    "similarity (colleague)": {5: 0.785, 10: 0.845},
    "graph-retriever best (colleague)": {5: 0.88, 10: 0.955},
}
ALTERNATIVES: dict[str, dict[str, Any]] = {
    "search lambda=1": {"lambda_mult": 1.0},
    "search expand_k=10 (wave)": {"expand_k": 10},
    "search damping=1": {"damping": 1.0},
    "search damping=0.5": {"damping": 0.5},
    "search adjacent_k=10": {"adjacent_k": 10},
    "search kw structural": {"structural_kinds": STRUCTURAL_KINDS | {"kw"}},
}
"""Settings the default was measured against (`GraphStore.search` options)."""

PAGERANK = "personalized PageRank (whole graph)"
"""`benchmarks.pagerank`: the score propagation the default search was measured against."""

DEFAULT_SEARCH = "search (default)"
"""The default graph search's name in tables and JSON."""
CORE = ("similarity", DEFAULT_SEARCH, "mmr_traversal_search (default)")
"""What `--core` runs (the Cassandra run: every search there is a network round trip)."""

REPETITIONS = 3
"""Passes over the questions for latency; medians over all of them."""

T = TypeVar("T")
Retrieve = Callable[[int, int], list[str]]
"""(question index, k) -> ranked titles."""


def score(
    retrieve: Retrieve, questions: Sequence[dict[str, Any]], ks: Sequence[int] = KS
) -> dict[int, dict[str, Any]]:
    """recall@k, share with every gold found, recall by question type, mean docs returned,
    and each question's recall (`per_question`, in question order: what `paired` compares)."""
    result: dict[int, dict[str, Any]] = {}
    for k in ks:
        found, every, returned = [], [], []
        by_type: dict[str, list[float]] = {}
        for i, question in enumerate(questions):
            titles = retrieve(i, k)
            hits = len(set(titles[:k]) & set(question["gold"]))
            recall = hits / len(question["gold"])
            found.append(recall)
            every.append(float(hits == len(question["gold"])))
            returned.append(len(titles[:k]))
            by_type.setdefault(question["type"], []).append(recall)
        result[k] = {
            "recall": float(np.mean(found)),
            "all": float(np.mean(every)),
            "by_type": {t: float(np.mean(v)) for t, v in sorted(by_type.items())},
            "docs": float(np.mean(returned)),
            "per_question": found,
        }
    return result


def latencies(
    searches: dict[str, Callable[[int], Any]], count: int, repetitions: int
) -> dict[str, float]:
    """Median seconds of each `search(i)` over the first `count` questions, `repetitions`
    times, the searches interleaved question by question so that every one meets the same
    machine, in an order shuffled for each question (`common.interleaved`; it used to
    rotate, and the default search then always ran right after similarity of the same
    question).  After one warm-up call each."""
    times: dict[str, list[float]] = {name: [] for name in searches}
    for search in searches.values():
        search(0)
    rounds = interleaved(list(searches.items()))
    for _ in range(repetitions):
        for i in range(count):
            for name, search in next(rounds):
                with Stopwatch() as watch:
                    search(i)
                times[name].append(watch.seconds)
    return {name: median(samples) for name, samples in times.items()}


def link_sets(
    passages: Sequence[data.Passage], wanted: Sequence[str]
) -> dict[str, list[frozenset[Link]]]:
    """The link variants asked for, per passage (keywords are computed only when needed)."""
    found: dict[str, list[frozenset[Link]]] = {"none": [frozenset()] * len(passages)}
    if "keywords" in wanted or "both" in wanted:
        found["keywords"] = data.keyword_links([p.text for p in passages])
    found["mentions"] = data.mention_links(passages)
    if "exact-mentions" in wanted:
        found["exact-mentions"] = data.mention_links(passages, aliases=False)
    if "both" in wanted:
        pairs = zip(found["keywords"], found["mentions"], strict=True)
        found["both"] = [k | m for k, m in pairs]
    return found


def graphstore_methods(store: GraphStore, vectors: np.ndarray) -> dict[str, Callable[..., Any]]:
    """Each method as (question index, k) -> hits (run to the end on this thread's loop)."""

    def default(i: int, k: int) -> Any:
        return store.asearch(vectors[i], k=k)

    methods: dict[str, Callable[..., Any]] = {
        "similarity": lambda i, k: store.asimilarity_search(vectors[i], k=k),
        DEFAULT_SEARCH: default,
        "mmr_traversal_search (default)": lambda i, k: store.ammr_traversal_search(vectors[i], k=k),
        "traversal_search (default)": lambda i, k: store.atraversal_search(vectors[i], k=k),
    }
    for name, options in ALTERNATIVES.items():
        methods[name] = lambda i, k, options=options: store.asearch(vectors[i], k=k, **options)
    return {name: synced(method) for name, method in methods.items()}


def synced(method: Callable[[int, int], Awaitable[T]]) -> Callable[[int, int], T]:
    """A coroutine method run to its end on this thread's loop."""
    return lambda i, k: run_sync(method(i, k))


def at_k(search: Callable[[int, int], T], k: int) -> Callable[[int], T]:
    """`search` of question i at a fixed `k` (what `latencies` times)."""
    return lambda i: search(i, k)


def graph_retriever_eager(
    passages: Sequence[data.Passage],
    passage_vectors: np.ndarray,
    questions: Sequence[str],
    question_vectors: np.ndarray,
    mentions: Sequence[frozenset[Link]],
) -> Retrieve:
    """`GraphRetriever` with `Eager(start_k=ceil(k/2), max_depth=1)` over mention links."""
    from graph_retriever.strategies import Eager
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore
    from langchain_graph_retriever import GraphRetriever
    from langchain_graph_retriever.adapters.in_memory import InMemoryAdapter

    from extractors.normalize import normalize_tag

    embeddings = data.PrecomputedEmbeddings(
        [*(p.text for p in passages), *questions],
        np.concatenate([passage_vectors, question_vectors]),
    )
    store = InMemoryVectorStore(embeddings)
    store.add_documents(
        [
            Document(
                id=p.title,
                page_content=p.text,
                metadata={
                    "title": normalize_tag(p.title),
                    "mentions": sorted(x.tag for x in m if x.direction == "out"),
                },
            )
            for p, m in zip(passages, mentions, strict=True)
        ]
    )
    adapter = InMemoryAdapter(store)
    retrievers: dict[int, GraphRetriever] = {}

    def search(i: int, k: int) -> list[str]:
        if k not in retrievers:
            strategy = Eager(select_k=k, start_k=math.ceil(k / 2), adjacent_k=10, max_depth=1)
            retrievers[k] = GraphRetriever(
                store=adapter, edges=[("mentions", "title")], strategy=strategy
            )
        return [str(doc.id) for doc in retrievers[k].invoke(questions[i])]

    return search


def corpus(dataset: str, quick: bool) -> tuple[list[data.Passage], list[dict[str, Any]]]:
    """A data set's passages and questions; quick: 20 questions and their own passages."""
    if dataset == "hotpotqa":
        passages, questions = data.hotpot_passages(), data.hotpot_questions()
    else:
        passages, questions = data.wiki_dev_passages(), data.wiki_dev_questions()
    if not quick:
        return passages, questions
    questions = questions[:20]
    wanted = {title for q in questions for title in q["context"]}
    return [p for p in passages if p.title in wanted], questions


Results = dict[str, dict[str, dict[str, Any]]]
"""results[dataset][links][method] = {"scores": {k: …}, "latency": {k: seconds}}."""


def evaluate_dataset(dataset: str, args: Any, backend: Any) -> dict[str, dict[str, Any]]:
    """Every method on one data set, for every link variant."""
    passages, questions = corpus(dataset, args.quick)
    vectors = data.embed([p.text for p in passages])
    asked = [q["question"] for q in questions]
    question_vectors = data.embed(asked)
    variants = link_sets(passages, args.links)
    found: dict[str, dict[str, Any]] = {}
    for links in args.links:
        store = GraphStore(None, backend.graph_storage(f"q_{dataset[:3]}_{links}"))
        nodes = [
            Node(p.title, p.text, {}, tag_set)
            for p, tag_set in zip(passages, variants[links], strict=True)
        ]
        store.add_nodes(nodes, vectors=vectors)
        methods = found.setdefault(links, {})
        chosen = {
            name: method
            for name, method in graphstore_methods(store, question_vectors).items()
            if not args.core or name in CORE
        }
        for name, method in chosen.items():

            def retrieve(i: int, k: int, method: Callable[..., Any] = method) -> list[str]:
                return [hit.node.id for hit in method(i, k)]

            methods[name] = {"scores": score(retrieve, questions)}
            print(f"{dataset} {links} {name}: {methods[name]['scores'][5]['recall']:.3f}")
        for k in LATENCY_KS:
            timed = latencies(
                {name: at_k(method, k) for name, method in chosen.items()},
                len(questions),
                REPETITIONS,
            )
            for name, seconds in timed.items():
                methods[name].setdefault("latency", {})[k] = seconds
        store.close()
    if args.core:
        return found
    titles = [p.title for p in passages]
    for links in args.links:
        walk = pagerank_search(titles, vectors, question_vectors, variants[links])
        found[links][PAGERANK] = outside_store(walk, questions)
    if dataset == "hotpotqa" and "mentions" in args.links:
        eager = graph_retriever_eager(
            passages, vectors, asked, question_vectors, variants["mentions"]
        )
        found["mentions"]["graph-retriever Eager d1"] = outside_store(eager, questions)
    return found


def outside_store(search: Retrieve, questions: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Scores and latency of a search that runs outside the store (one pass over at most
    20 questions: its time is not comparable to the store's searches anyway)."""
    return {
        "scores": score(search, questions),
        "latency": {
            k: latencies({"outside": at_k(search, k)}, min(len(questions), 20), 1)["outside"]
            for k in LATENCY_KS
        },
    }


def comparisons(by_links: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The paired differences the issue's bars are about, at each k in `KS`: the default
    search against similarity with each link set, and the default search with both link
    kinds against mention links alone (do keyword links cost recall?).  Each is a
    `paired.Paired` of recall and one of all-gold share."""
    pairs = [
        (f"{links}: {DEFAULT_SEARCH} − similarity", methods["similarity"], methods[DEFAULT_SEARCH])
        for links, methods in by_links.items()
        if {"similarity", DEFAULT_SEARCH} <= methods.keys()
    ]
    if {"mentions", "both"} <= by_links.keys():
        pairs.append(
            (
                f"{DEFAULT_SEARCH}: both − mentions",
                by_links["mentions"][DEFAULT_SEARCH],
                by_links["both"][DEFAULT_SEARCH],
            )
        )
    rows = []
    for name, before, after in pairs:
        for k in KS:
            old, new = before["scores"][k]["per_question"], after["scores"][k]["per_question"]
            rows.append(
                {
                    "comparison": name,
                    "k": k,
                    "recall": paired(old, new)._asdict(),
                    "all": paired(all_found(old), all_found(new))._asdict(),
                }
            )
    return rows


def _paired_cells(difference: dict[str, Any]) -> list[str]:
    measured = Paired(**difference)
    return [
        f"{measured.difference:+.3f}",
        f"[{measured.low:+.3f}, {measured.high:+.3f}]",
        f"+{measured.gained} / -{measured.lost}",
    ]


def report_paired(dataset: str, rows: Sequence[dict[str, Any]]) -> None:
    """The paired differences (`comparisons`) of one data set, as a table."""
    print_table(
        f"{dataset}: paired differences over the same questions (95 % bootstrap interval; "
        "questions up / down)",
        ["comparison", "k", "Δ R@k", "interval", "questions", "Δ all@k", "interval", "questions"],
        [
            [row["comparison"], row["k"], *_paired_cells(row["recall"]), *_paired_cells(row["all"])]
            for row in rows
        ],
    )


def report(results: Results) -> None:
    """One table per data set: every method and link variant."""
    for dataset, by_links in results.items():
        rows = []
        for links, methods in by_links.items():
            base = methods["similarity"]["latency"]
            for name, result in methods.items():
                r = result["scores"]
                rows.append(
                    [
                        name,
                        links,
                        *(r[k]["recall"] for k in KS),
                        *(r[k]["all"] for k in KS),
                        r[10]["docs"],
                        *(
                            value
                            for k in LATENCY_KS
                            for value in (
                                result["latency"][k] * 1000,
                                result["latency"][k] / base[k],
                            )
                        ),
                    ]
                )
        print_table(
            f"{dataset}: recall and all-gold share at k = 2 / 5 / 10, latency at k = "
            + " / ".join(map(str, LATENCY_KS)),
            [
                "method",
                "links",
                "R@2",
                "R@5",
                "R@10",
                "all@2",
                "all@5",
                "all@10",
                "docs@10",
                *(column for k in LATENCY_KS for column in (f"ms @{k}", f"× similarity @{k}")),
            ],
            rows,
        )
        types = sorted(next(iter(next(iter(by_links.values())).values()))["scores"][5]["by_type"])
        print_table(
            f"{dataset}: recall@5 by question type",
            ["method", "links", *types],
            [
                [name, links, *(result["scores"][5]["by_type"][t] for t in types)]
                for links, methods in by_links.items()
                for name, result in methods.items()
                if name in CORE
            ],
        )


def plot(name: str, args: Any, results: Results) -> None:
    """recall@5 and @10 of similarity and the default search, per data set and links."""
    with figure(name, args, panels=2) as axes:
        for panel, k in zip(axes, (5, 10), strict=True):
            labels, values = [], []
            for dataset, by_links in results.items():
                for links, methods in by_links.items():
                    for method in ("similarity", DEFAULT_SEARCH):
                        labels.append(f"{dataset} {links}: {method}")
                        values.append(methods[method]["scores"][k]["recall"])
            panel.barh(labels, values)
            panel.set(title=f"recall@{k}", xlim=(0, 1))
            panel.tick_params(axis="y", labelsize=6)
            panel.invert_yaxis()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argument_parser(__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--links", default=",".join(LINKS))
    parser.add_argument("--core", action="store_true", help="only similarity and the defaults")
    args = parser.parse_args(argv)
    args.datasets = [d for d in args.datasets.split(",") if d]
    args.links = [name for name in args.links.split(",") if name]
    results: Results = {}
    with open_backend(args.backend) as backend:
        for dataset in args.datasets:
            results[dataset] = evaluate_dataset(dataset, args, backend)
    report(results)
    paired_results = {dataset: comparisons(by_links) for dataset, by_links in results.items()}
    for dataset, rows in paired_results.items():
        report_paired(dataset, rows)
    # A run of some data sets only gets files of its own (the Cassandra runs take one at a
    # time), so it never overwrites another's.
    name = "-".join([NAME, *args.datasets]) if args.datasets != list(DATASETS) else NAME
    write_json(
        name,
        args,
        {"ks": list(KS), "reference": REFERENCE, "results": results, "paired": paired_results},
    )
    plot(name, args, results)


if __name__ == "__main__":
    main()
