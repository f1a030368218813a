"""The benchmark corpora, their embeddings and their links, cached in `benchmarks/cache/`.

Embeddings (all-MiniLM-L6-v2) and KeyBERT keywords are the slow parts, so both are cached
per text (keyed by SHA-1) and only texts not seen before are computed: a quick run fills
part of the cache, a full run reuses it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from benchmarks.common import CACHE
from graphstore.links import Link
from graphstore.nodes import Node

DATA = Path(
    os.environ.get("GRAPHSTORE_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data"
)
"""The public data sets: `../shared/data` beside the repository, or `GRAPHSTORE_DATA`."""
HOTPOT = DATA / "hotpotqa"
WIKI_DEV = DATA / "2wikimultihopqa"
WIKI = DATA / "graph-rag" / "para_with_hyperlink_short.jsonl"
KEYWORDS_TOP_N = 5


@dataclass(frozen=True)
class Passage:
    """A passage of a corpus: its title (the id in quality runs), text and tag names."""

    title: str
    text: str
    mentions: tuple[str, ...] = ()
    """Titles the passage links to by a hyperlink in the source (2WikiMultiHopQA only)."""


def read_data(path: Path) -> str:
    """The text of a data file, or a one-line exit saying where the data sets were looked
    for (a clone elsewhere than beside `shared/` met a FileNotFoundError traceback)."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SystemExit(
            f"benchmarks: no {path}: the data sets are read from {DATA} "
            "(../shared/data beside the repository; GRAPHSTORE_DATA names another folder)"
        ) from None


def _key(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def hotpot_passages() -> list[Passage]:
    """The 994 HotpotQA passages (sentences joined), in file order."""
    corpus = json.loads(read_data(HOTPOT / "hotpotqa_train_corpus.json"))
    return [Passage(title, "".join(sentences).strip()) for title, sentences in corpus.items()]


def _questions(path: Path) -> list[dict[str, Any]]:
    """Questions with `question`, `type`, `gold` (the supporting titles) and `context` (the
    titles of the passages the question came with)."""
    return [
        {
            "question": q["question"],
            "type": q["type"],
            "gold": sorted({title for title, _ in q["supporting_facts"]}),
            "context": [title for title, _ in q["context"]],
        }
        for q in json.loads(read_data(path))
    ]


def hotpot_questions() -> list[dict[str, Any]]:
    """The 100 HotpotQA train questions (2 gold titles each)."""
    return _questions(HOTPOT / "hotpotqa_train.json")


def wiki_dev_passages() -> list[Passage]:
    """The 7,005 passages of the 2WikiMultihopQA dev corpus, in file order."""
    corpus = json.loads(read_data(WIKI_DEV / "2wikimultihopqa_dev_corpus.json"))
    return [Passage(row["title"], row["text"].strip()) for row in corpus]


def wiki_dev_questions() -> list[dict[str, Any]]:
    """The 721 2WikiMultihopQA dev questions (2 or 4 gold titles each)."""
    return _questions(WIKI_DEV / "2wikimultihopqa_dev.json")


def wiki_passages() -> list[Passage]:
    """The non-empty 2WikiMultiHopQA paragraphs with the titles their hyperlinks point at."""
    passages = []
    for line in read_data(WIKI).splitlines():
        row = json.loads(line)
        targets = tuple(sorted({m["ref_url"].replace("_", " ") for m in row["mentions"]}))
        text = " ".join(row["sentences"]).strip()
        if text:  # a few paragraphs are empty
            passages.append(Passage(row["title"], text, targets))
    return passages


@cache
def model() -> Embeddings:
    """The offline all-MiniLM-L6-v2, loaded once per process."""
    from graphstore.embeddings import load_embeddings

    return load_embeddings("minilm")


def _merge_json(name: str, new: dict[str, Any]) -> dict[str, Any]:
    """The cache file's table with `new` added, written atomically (runs may overlap)."""
    path = CACHE / name
    table = json.loads(path.read_text()) if path.exists() else {}
    if new:
        table.update(new)
        CACHE.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(table, ensure_ascii=False))
        partial.replace(path)
    return table


def _merge_vectors(name: str, new: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Like `_merge_json`, for an `.npz` of vectors."""
    path = CACHE / name
    table: dict[str, np.ndarray] = dict(np.load(path)) if path.exists() else {}
    if new:
        table.update(new)
        CACHE.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(partial, allow_pickle=False, **table)
        partial.replace(path)
    return table


def embed(texts: Sequence[str]) -> np.ndarray:
    """Unit embeddings of `texts` (float32 rows), computing only the uncached ones."""
    table = _merge_vectors("minilm.npz", {})
    missing = list(dict.fromkeys(t for t in texts if _key(t) not in table))
    if missing:
        vectors = model().embed_documents(missing)
        table = _merge_vectors(
            "minilm.npz",
            {_key(t): np.asarray(v, np.float32) for t, v in zip(missing, vectors, strict=True)},
        )
    return np.stack([table[_key(t)] for t in texts])


def keywords(texts: Sequence[str]) -> list[list[str]]:
    """KeyBERT's top-5 keyword tags of each text (normalized), computing only uncached ones."""
    name = f"keywords-top{KEYWORDS_TOP_N}.json"
    table = _merge_json(name, {})
    missing = list(dict.fromkeys(t for t in texts if _key(t) not in table))
    if missing:
        from extractors.keywords import KeybertLinkExtractor

        extractor = KeybertLinkExtractor(top_n=KEYWORDS_TOP_N)
        found = {}
        for start in range(0, len(missing), 256):
            chunk = missing[start : start + 256]
            for text, links in zip(chunk, extractor.extract_many(chunk), strict=True):
                found[_key(text)] = sorted(link.tag for link in links)
        table = _merge_json(name, found)
    return [table[_key(t)] for t in texts]


def keyword_links(texts: Sequence[str]) -> list[frozenset[Link]]:
    """Bidirectional `kw` links: passages sharing a keyword reach each other."""
    return [frozenset(Link.bidir("kw", tag) for tag in tags) for tags in keywords(texts)]


def mention_links(passages: Sequence[Passage], *, aliases: bool = True) -> list[frozenset[Link]]:
    """Title mentions: a passage links out to the titles it names, each title's passage in.

    Uses the gazetteer extractor over every title of the corpus, with the unambiguous
    qualifier-free form of a title as its alias (`title_aliases`; `aliases=False`: exact
    titles only); 2Wiki passages also keep their source hyperlinks (`Passage.mentions`).
    """
    from extractors.mentions import MentionLinkExtractor, title_aliases

    titles = [p.title for p in passages]
    extractor = MentionLinkExtractor(title_aliases(titles) if aliases else titles)
    return [
        frozenset(
            extractor.extract_titled(p.text, p.title)
            | {Link.outgoing(extractor.kind, extractor.defines(t).tag) for t in p.mentions}
        )
        for p in passages
    ]


class PrecomputedEmbeddings(Embeddings):
    """Embeddings looked up by text, so stores that embed internally (upstream LangChain,
    graph-retriever) get exactly the vectors graphstore was given, at no model cost."""

    def __init__(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        self._vectors = {text: vector for text, vector in zip(texts, vectors, strict=True)}

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """The stored vectors of `texts`; the model embeds any other text (upstream's
        dimension probe)."""
        unknown = [text for text in texts if text not in self._vectors]
        if unknown:
            self._vectors |= dict(zip(unknown, embed(unknown), strict=True))
        return [self._vectors[text].tolist() for text in texts]

    def embed_query(self, text: str) -> list[float]:
        """The stored vector of one query."""
        return self.embed_documents([text])[0]


def scaled_corpus(size: int) -> tuple[list[Node], np.ndarray]:
    """`size` passages for runs at scale: the 8,992 distinct passages (HotpotQA's 994 first,
    then the 2Wiki paragraphs and the 2Wiki dev corpus) with keyword and title-mention links,
    repeated with new ids (`<copy>:<n>`), same texts, links and embeddings, as often as
    needed."""
    base = hotpot_passages() + wiki_passages() + wiki_dev_passages()
    texts = [p.text for p in base]
    links = [kw | m for kw, m in zip(keyword_links(texts), mention_links(base), strict=True)]
    vectors = embed(texts)
    nodes = [
        Node(f"{i // len(base)}:{i % len(base)}", texts[i % len(base)], {}, links[i % len(base)])
        for i in range(size)
    ]
    return nodes, vectors[np.arange(size) % len(base)]
