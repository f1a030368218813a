"""Multi-hop retrieval quality on HotpotQA: do links find both supporting passages?

The 994 passages are indexed with id = title; a question's gold is its two supporting
titles.  recall@k (k = 2, 5, 10) is the share of gold passages among exactly k returned,
"both" the share of questions with both found.  Methods: similarity search, graphstore's
traversal (ceil(k/2) roots, then the nearest neighbours) and MMR traversal, each with
keyword links (KeyBERT top 5, bidirectional), title-mention links (a passage links out to
the titles it names; the titled passage links in) and both; a traversal that reaches fewer
than k passages is padded with the nearest ones not yet returned.  The anchor is
`langchain_graph_retriever.GraphRetriever` (`Eager`, `Mmr`) over LangChain's
`InMemoryVectorStore` with the same passages, embeddings and links as metadata fields; it
may return fewer than k documents, so its mean count is reported.  A small sweep around the
default MMR settings is run for graphstore (and, for lambda_mult on the combined links, for
graph-retriever, whose in-memory search is slow) and reported; its best is chosen on the
same 100 questions (there is no held-out split), as were the reference numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from benchmarks import data
from benchmarks.common import figure, open_backend, parse_args, print_table, write_json
from graphstore.links import Link
from graphstore.nodes import Node
from graphstore.store import GraphStore, run_sync

NAME = "quality"
KS = (2, 5, 10)
LINKS = ("keywords", "mentions", "both")
REFERENCE = {
    "similarity (colleague)": {5: 0.785, 10: 0.845},
    "graph-retriever best (colleague)": {5: 0.88, 10: 0.955},
}
DEFAULT_MMR = {"lambda_mult": 0.5, "fetch_k": 20, "adjacent_k": 10, "depth": 2}
MMR_SWEEP = [
    DEFAULT_MMR,
    *({**DEFAULT_MMR, "lambda_mult": x} for x in (0.3, 0.7, 0.9)),
    *({**DEFAULT_MMR, "fetch_k": x} for x in (10, 50)),
    *({**DEFAULT_MMR, "adjacent_k": x} for x in (5, 20)),
    *({**DEFAULT_MMR, "depth": x} for x in (1, 3)),
]
GRAPH_RETRIEVER_SWEEP = MMR_SWEEP[:4]
"""graph-retriever's in-memory traversal takes ~0.2 s a search here: it sweeps lambda_mult
only, on the combined links."""
TRAVERSAL_SWEEP = [{"depth": 1, "adjacent_k": 10}, {"depth": 2, "adjacent_k": 10}]

Retrieve = Callable[[int, int], list[str]]
"""(question index, k) -> ranked titles."""


def label(config: dict[str, Any]) -> str:
    """A short name for a parameter setting."""
    return " ".join(f"{key}={value}" for key, value in config.items())


def score(retrieve: Retrieve, questions: Sequence[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """recall@k, share with both gold found, recall by question type, mean docs returned."""
    result: dict[int, dict[str, Any]] = {}
    for k in KS:
        found, both, returned = [], [], []
        by_type: dict[str, list[float]] = {}
        for i, question in enumerate(questions):
            titles = retrieve(i, k)
            hits = len(set(titles[:k]) & set(question["gold"]))
            recall = hits / len(question["gold"])
            found.append(recall)
            both.append(float(hits == len(question["gold"])))
            returned.append(len(titles[:k]))
            by_type.setdefault(question["type"], []).append(recall)
        result[k] = {
            "recall": float(np.mean(found)),
            "both": float(np.mean(both)),
            "by_type": {t: float(np.mean(v)) for t, v in sorted(by_type.items())},
            "docs": float(np.mean(returned)),
        }
    return result


def link_sets(passages: Sequence[data.Passage]) -> dict[str, list[frozenset[Link]]]:
    """The three link variants, per passage."""
    keywords = data.keyword_links([p.text for p in passages])
    mentions = data.mention_links(passages)
    both = [k | m for k, m in zip(keywords, mentions, strict=True)]
    return {"keywords": keywords, "mentions": mentions, "both": both}


def graphstore_methods(store: GraphStore, vectors: np.ndarray, sweep: bool) -> dict[str, Retrieve]:
    """Traversal and MMR traversal over one loaded store, for each setting."""

    def run(coroutine: Any) -> list[str]:
        return [hit.node.id for hit in run_sync(coroutine)]

    nearest = similarity(store, vectors)

    def traversal(config: dict[str, Any]) -> Retrieve:
        def search(i: int, k: int) -> list[str]:
            found = run(store.atraversal_search(vectors[i], k=math.ceil(k / 2), **config))
            padding = [title for title in nearest(i, 2 * k) if title not in found]
            return (found + padding)[:k]

        return search

    def mmr(config: dict[str, Any]) -> Retrieve:
        return lambda i, k: run(store.ammr_traversal_search(vectors[i], k=k, **config))

    methods = {
        f"graphstore traversal {label(c)}": traversal(c)
        for c in (TRAVERSAL_SWEEP if sweep else TRAVERSAL_SWEEP[:1])
    }
    for config in MMR_SWEEP if sweep else MMR_SWEEP[:1]:
        methods[f"graphstore mmr {label(config)}"] = mmr(config)
    return methods


def graph_retriever_methods(
    *,
    passages: Sequence[data.Passage],
    passage_vectors: np.ndarray,
    questions: Sequence[str],
    question_vectors: np.ndarray,
    keywords: Sequence[list[str]],
    mentions: Sequence[frozenset[Link]],
    sweep: bool,
) -> dict[str, dict[str, Retrieve]]:
    """`GraphRetriever` (Eager, Mmr) over `InMemoryVectorStore`, per link variant."""
    from graph_retriever.strategies import Eager, Mmr
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
                    "keywords": kws,
                    "mentions": sorted(x.tag for x in m if x.direction == "out"),
                },
            )
            for p, kws, m in zip(passages, keywords, mentions, strict=True)
        ]
    )
    adapter = InMemoryAdapter(store)
    edges = {
        "keywords": [("keywords", "keywords")],
        "mentions": [("mentions", "title")],
        "both": [("keywords", "keywords"), ("mentions", "title")],
    }

    def retrieve(links: str, strategy_for: Callable[[int], Any]) -> Retrieve:
        retrievers: dict[int, GraphRetriever] = {}

        def search(i: int, k: int) -> list[str]:
            if k not in retrievers:
                retrievers[k] = GraphRetriever(
                    store=adapter, edges=edges[links], strategy=strategy_for(k)
                )
            return [str(doc.id) for doc in retrievers[k].invoke(questions[i])]

        return search

    def eager(config: dict[str, Any]) -> Callable[[int], Any]:
        return lambda k: Eager(
            select_k=k,
            start_k=math.ceil(k / 2),
            adjacent_k=config["adjacent_k"],
            max_depth=config["depth"],
        )

    def mmr(config: dict[str, Any]) -> Callable[[int], Any]:
        return lambda k: Mmr(
            select_k=k,
            start_k=config["fetch_k"],
            adjacent_k=config["adjacent_k"],
            max_depth=config["depth"],
            lambda_mult=config["lambda_mult"],
        )

    methods: dict[str, dict[str, Retrieve]] = {}
    for links in LINKS:
        found = methods.setdefault(links, {})
        config = TRAVERSAL_SWEEP[0]
        found[f"graph-retriever eager {label(config)}"] = retrieve(links, eager(config))
        for config in GRAPH_RETRIEVER_SWEEP if sweep and links == "both" else MMR_SWEEP[:1]:
            found[f"graph-retriever mmr {label(config)}"] = retrieve(links, mmr(config))
    return methods


def similarity(store: GraphStore, vectors: np.ndarray) -> Retrieve:
    """Plain vector search: the k nearest passages."""
    return lambda i, k: [
        hit.node.id for hit in run_sync(store.asimilarity_search_by_vector(vectors[i], k=k))
    ]


def corpus(quick: bool) -> tuple[list[data.Passage], list[dict[str, Any]]]:
    """All 994 passages and 100 questions; quick: 20 questions and their own passages."""
    passages, questions = data.hotpot_passages(), data.hotpot_questions()
    if not quick:
        return passages, questions
    questions = questions[:20]
    wanted = {title for q in questions for title in q["context"]}
    return [p for p in passages if p.title in wanted], questions


def evaluate(args: Any) -> dict[str, dict[str, dict[int, dict[str, Any]]]]:
    """Scores of every method: results[links][method][k]."""
    passages, questions = corpus(args.quick)
    texts = [p.text for p in passages]
    vectors = data.embed(texts)
    asked = [q["question"] for q in questions]
    question_vectors = data.embed(asked)
    variants = link_sets(passages)
    results: dict[str, dict[str, dict[int, dict[str, Any]]]] = {}
    with open_backend(args.backend) as backend:
        for links, link_lists in variants.items():
            store = GraphStore(None, backend.graph_storage(f"q_{links}"))
            nodes = [
                Node(p.title, p.text, {}, tag_set)
                for p, tag_set in zip(passages, link_lists, strict=True)
            ]
            store.add_nodes(nodes, vectors=vectors)
            if links == LINKS[0]:
                results["none"] = {
                    "similarity": score(similarity(store, question_vectors), questions)
                }
            methods = graphstore_methods(store, question_vectors, sweep=not args.quick)
            results[links] = {
                name: score(retrieve, questions) for name, retrieve in methods.items()
            }
            store.close()
    anchors = graph_retriever_methods(
        passages=passages,
        passage_vectors=vectors,
        questions=asked,
        question_vectors=question_vectors,
        keywords=data.keywords(texts),
        mentions=variants["mentions"],
        sweep=not args.quick,
    )
    for links, methods in anchors.items():
        for name, retrieve in methods.items():
            results[links][name] = score(retrieve, questions)
    return results


def best(methods: dict[str, dict[int, dict[str, Any]]], prefix: str) -> str:
    """The setting of a method family with the highest recall@5 + recall@10."""
    family = [name for name in methods if name.startswith(prefix)]
    return max(family, key=lambda n: methods[n][5]["recall"] + methods[n][10]["recall"])


def headline(results: dict[str, dict[str, dict[int, dict[str, Any]]]]) -> list[tuple[str, str]]:
    """(links, method) rows worth a line: defaults, and each family's best setting."""
    rows = [("none", "similarity")]
    for links in LINKS:
        methods = results[links]
        for prefix in (
            "graphstore traversal",
            "graphstore mmr",
            "graph-retriever eager",
            "graph-retriever mmr",
        ):
            default = next(name for name in methods if name.startswith(prefix))
            rows.append((links, default))
            top = best(methods, prefix)
            if top != default:
                rows.append((links, top))
    return rows


def report(results: dict[str, dict[str, dict[int, dict[str, Any]]]], questions: int) -> None:
    """The headline table and the MMR sweep table."""
    rows = []
    for links, name in headline(results):
        r = results[links][name]
        rows.append(
            [
                name,
                links,
                *(r[k]["recall"] for k in KS),
                r[5]["both"],
                r[10]["both"],
                *(
                    r[k]["by_type"].get(t, float("nan"))
                    for t in ("bridge", "comparison")
                    for k in (5, 10)
                ),
                r[10]["docs"],
            ]
        )
    print_table(
        f"Recall of supporting passages, {questions} HotpotQA questions (best = in-sample)",
        [
            "method",
            "links",
            "R@2",
            "R@5",
            "R@10",
            "both@5",
            "both@10",
            "bridge R@5",
            "bridge R@10",
            "comp. R@5",
            "comp. R@10",
            "docs@10",
        ],
        rows,
    )
    sweep = [
        [label(config), links]
        + [
            results[links].get(f"{family} {label(config)}", {}).get(k, {}).get("recall", "")
            for family in ("graphstore mmr", "graph-retriever mmr")
            for k in (5, 10)
        ]
        for links in LINKS
        for config in MMR_SWEEP
        if f"graphstore mmr {label(config)}" in results[links]
    ]
    print_table(
        "MMR sweep: recall@5 / @10",
        ["setting", "links", "graphstore R@5", "graphstore R@10", "g-r R@5", "g-r R@10"],
        sweep,
    )


def plot(args: Any, results: dict[str, dict[str, dict[int, dict[str, Any]]]]) -> None:
    """recall@5 and @10 of the headline rows, with the colleague's reference lines."""
    rows = headline(results)
    with figure(NAME, args, panels=2) as axes:
        for panel, k in zip(axes, (5, 10), strict=True):
            names = [f"{name} [{links}]" for links, name in rows]
            panel.barh(names, [results[links][name][k]["recall"] for links, name in rows])
            for (reference, values), style in zip(REFERENCE.items(), ("--", ":"), strict=True):
                panel.axvline(values[k], color="black", linestyle=style, label=reference)
            panel.set(title=f"recall@{k}", xlim=(0, 1))
            panel.tick_params(axis="y", labelsize=6)
            panel.invert_yaxis()
            panel.legend(fontsize="small", loc="lower right")


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv)
    results = evaluate(args)
    questions = len(corpus(args.quick)[1])
    report(results, questions)
    write_json(
        NAME,
        args,
        {
            "questions": questions,
            "ks": list(KS),
            "reference": REFERENCE,
            "mmr_sweep": MMR_SWEEP,
            "traversal_sweep": TRAVERSAL_SWEEP,
            "results": results,
        },
    )
    plot(args, results)


if __name__ == "__main__":
    main()
