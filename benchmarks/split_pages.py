"""Retrieval quality when each page of a dev set is split into passages, as real documents are.

The dev sets (`benchmarks.quality`) have one passage per page.  Here each page is split into
passages of at most `--max-chars` (300) characters between sentences, stored with ids
`<title>.txt#<position>` as `graphstore ingest` names a file's passages, and linked by title
mentions: each passage links out to the titles it names (2WikiMultihopQA also keeps its
source hyperlinks) and every passage of a page links in on the page's title.  Recall counts
pages: a page is found when one of its passages is among the k returned.  Methods at their
defaults: similarity, the default search, `traversal_search`; on either backend
(`--backend cassandra`: a page's title tag is read whole when small, hot above 128
passages), with each method's median latency at k = 5 and 10 as `quality` times it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks import data
from benchmarks.common import argument_parser, figure, open_backend, print_table, write_json
from benchmarks.quality import KS, LATENCY_KS, REPETITIONS, at_k, corpus, latencies, score
from extractors.mentions import MentionLinkExtractor, title_aliases
from graphstore.links import Link
from graphstore.nodes import Node, page_of
from graphstore.splitting import pack
from graphstore.store import GraphStore, run_sync

NAME = "split_pages"
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def split_pages(passages: Sequence[data.Passage], max_chars: int) -> list[Node]:
    """Each page's passages, with title-mention links, as nodes without vectors."""
    extractor = MentionLinkExtractor(title_aliases([p.title for p in passages]))
    nodes = []
    for page in passages:
        cited = {Link.outgoing(extractor.kind, extractor.defines(t).tag) for t in page.mentions}
        pieces = pack(SENTENCE_END.split(page.text), max_chars)
        for position, piece in enumerate(pieces):
            links = extractor.extract_titled(piece, page.title) | cited
            nodes.append(Node(f"{page.title}.txt#{position}", piece, {}, frozenset(links)))
    return nodes


def page_titles(hits: Sequence[Any]) -> list[str]:
    """The titles of the pages of `hits`, each once, in the order found."""
    titles = (page_of(hit.node.id).removesuffix(".txt") for hit in hits)
    return list(dict.fromkeys(titles))


def by_page(search: Callable[..., Any], asked: Any) -> Callable[[int, int], list[str]]:
    """Question i's k results as page titles (`score`'s retrieve)."""
    return lambda i, k: page_titles(run_sync(search(asked[i], k=k)))


def evaluate(dataset: str, max_chars: int, quick: bool, backend_name: str) -> dict[str, Any]:
    passages, questions = corpus(dataset, quick)
    nodes = split_pages(passages, max_chars)
    vectors = data.embed([node.text for node in nodes])
    asked = data.embed([q["question"] for q in questions])
    with open_backend(backend_name) as backend:
        store = GraphStore(None, backend.graph_storage(f"split_{dataset}"))
        store.add_nodes(nodes, vectors=vectors)
        methods: dict[str, Callable[..., Any]] = {
            "similarity": store.asimilarity_search,
            "search (default)": store.asearch,
            "traversal_search (default)": store.atraversal_search,
        }
        scores = {
            name: score(by_page(method, asked), questions) for name, method in methods.items()
        }
        timed = {
            k: latencies(
                {name: at_k(by_page(method, asked), k) for name, method in methods.items()},
                len(questions),
                REPETITIONS,
            )
            for k in LATENCY_KS
        }
        store.close()
    return {"pages": len(passages), "passages": len(nodes), "scores": scores, "latency": timed}


def timing(latency: dict[str, float], name: str) -> str:
    """A method's median latency in ms and as a ratio to similarity's at the same k."""
    return f"{latency[name] * 1000:.2f} ({latency[name] / latency['similarity']:.2f}×)"


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argument_parser(__doc__.splitlines()[0])
    parser.add_argument("--max-chars", type=int, default=300, help="longest passage")
    args = parser.parse_args(argv)
    results = {
        dataset: evaluate(dataset, args.max_chars, args.quick, args.backend)
        for dataset in ("hotpotqa", "2wiki")
    }
    for dataset, found in results.items():
        latency = found["latency"]
        rows = [
            [
                name,
                *(f"{s[k]['recall']:.3f}" for k in KS),
                *(f"{s[k]['all']:.2f}" for k in KS),
                *(timing(latency[k], name) for k in LATENCY_KS),
            ]
            for name, s in found["scores"].items()
        ]
        print_table(
            f"{dataset} ({args.backend}): {found['pages']} pages in {found['passages']} passages",
            [
                "method",
                *(f"R@{k}" for k in KS),
                *(f"all@{k}" for k in KS),
                *(f"ms @{k} (× similarity)" for k in LATENCY_KS),
            ],
            rows,
        )
    write_json(NAME, args, {"max_chars": args.max_chars, "results": results})
    with figure(NAME, args, panels=len(results)) as axes:
        for axis, (dataset, found) in zip(axes, results.items(), strict=True):
            for name, scores in found["scores"].items():
                axis.plot(KS, [scores[k]["recall"] for k in KS], marker="o", label=name)
            axis.set(title=f"{dataset}, pages split", xlabel="k", ylabel="recall@k (pages)")
            axis.legend()
    return results


if __name__ == "__main__":
    main()
