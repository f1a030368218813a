"""Keyword links: passages whose KeyBERT keywords coincide link to each other.

A batch is one `KeyBERT.extract_keywords` call, which embeds every passage and every
candidate phrase of the batch together (candidates shared by passages are embedded once).
Chinese has no spaces, so with `language="zh"` candidates are jieba words, not whitespace
runs (which would be whole clauses).  The ranking needs a model that reads the language:
all-MiniLM-L6-v2 (the default) maps most Chinese characters to `[UNK]`, so pass a
multilingual model (a sentence-transformers directory or any LangChain `Embeddings`).
keybert, sklearn, torch and jieba are imported on first use.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from importlib import import_module
from pathlib import Path
from typing import Any

from extractors.base import TextLinkExtractor
from extractors.jieba_quiet import quiet_jieba
from extractors.normalize import join_cjk_words, normalize_tag
from graphstore.errors import InvalidInputError
from graphstore.links import Direction, Link
from graphstore.models import minilm_dir, model_fingerprint, offline_quietly, quiet_transformers
from graphstore.optional import optional_import, package_versions

Tokenizer = Callable[[str], list[str]]

CHINESE_STOP_WORDS = frozenset(
    "的了是在和也就都而及与着或这那之其为以于把被让向从对但又很啊吗呢吧"
) | {
    "一个",
    "没有",
    "我们",
    "你们",
    "他们",
}
"""Function words that jieba keeps as words but that never describe a passage."""


def _is_word(token: str) -> bool:
    return any(unicodedata.category(char)[0] in "LN" for char in token)


def chinese_words(text: str) -> list[str]:
    """jieba words of `text` fit to be keywords: no punctuation, no stop words, and single
    characters only when jieba tags them as nouns (猴, 水), not as particles or verbs."""
    return [
        pair.word
        for pair in quiet_jieba().posseg.lcut(text)
        if _is_word(pair.word)
        and pair.word not in CHINESE_STOP_WORDS
        and (len(pair.word) > 1 or pair.flag.startswith("n"))
    ]


def _embeddings_backend(embeddings: Any) -> Any:
    """A KeyBERT backend embedding through a model with `embed_documents` (LangChain's)."""
    import numpy as np
    from keybert.backend import BaseEmbedder

    class EmbeddingsBackend(BaseEmbedder):  # type: ignore[misc]
        def embed(self, documents: Sequence[str], verbose: bool = False) -> Any:
            return np.asarray(embeddings.embed_documents(list(documents)), dtype=np.float32)

    return EmbeddingsBackend()


class KeybertLinkExtractor(TextLinkExtractor):
    """Links to each passage's `top_n` KeyBERT keywords, normalized with `normalize_tag`.

    `model` is a local sentence-transformers directory (default: the bundled MiniLM), a
    loaded `SentenceTransformer`, a LangChain `Embeddings` or `graphstore.models` model, or a
    KeyBERT backend; a hub name is refused, since it would stall without a hub.
    `language="zh"` (or any `tokenizer`) replaces sklearn's whitespace-and-`\\w` tokens with
    words from jieba (or `tokenizer`).
    """

    def __init__(
        self,
        *,
        kind: str = "kw",
        direction: Direction = "bidir",
        model: str | Path | Any | None = None,
        top_n: int = 5,
        keyphrase_ngram_range: tuple[int, int] = (1, 2),
        stop_words: str | Sequence[str] | None = "english",
        use_mmr: bool = False,
        use_maxsum: bool = False,
        diversity: float = 0.5,
        language: str | None = None,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        if language not in (None, "en", "zh"):
            raise InvalidInputError(f"language must be en or zh, not {language!r}")
        if isinstance(model, (str, Path)) and not Path(model).is_dir():
            raise InvalidInputError(
                f"keyword model {str(model)!r} is not a local directory: pass a directory or a "
                "loaded model (hub names would stall on a machine without a hub)"
            )
        self.kind = kind
        self.direction: Direction = direction
        self.model = model
        self.top_n = top_n
        self.keyphrase_ngram_range = keyphrase_ngram_range
        self.stop_words = stop_words
        self.use_mmr = use_mmr
        self.use_maxsum = use_maxsum
        self.diversity = diversity
        self.language = language
        self.tokenizer = tokenizer
        self._keybert: Any = None

    def _loaded(self) -> Any:
        if self._keybert is None:
            quiet_transformers()  # before keybert imports it
            keybert = optional_import("keybert", "keyword links")
            self._keybert = keybert.KeyBERT(model=self._backend())
        return self._keybert

    def _backend(self) -> Any:
        model = self.model
        if model is None:
            model = minilm_dir()
        if isinstance(model, (str, Path)):
            offline_quietly()
            library = optional_import("sentence_transformers", "keyword links")
            return library.SentenceTransformer(str(model), device="cpu")
        if hasattr(model, "embed_documents"):
            return _embeddings_backend(model)
        return model

    def setting(self) -> str | None:
        """The model's fingerprint and every option; None for a model or tokenizer that
        cannot be told apart from another (a loaded object of unknown kind)."""
        model = model_fingerprint(minilm_dir() if self.model is None else self.model)
        if model is None or self.tokenizer is not None:
            return None
        stop_words = self.stop_words
        options = (
            self.kind,
            self.direction,
            self.top_n,
            list(self.keyphrase_ngram_range),
            stop_words if stop_words is None or isinstance(stop_words, str) else list(stop_words),
            self.use_mmr,
            self.use_maxsum,
            self.diversity,
            self.language,
        )
        libraries = package_versions("keybert", "scikit-learn", "sentence-transformers", "jieba")
        return json.dumps(["keybert", libraries, model, options])

    def _word_tokenizer(self) -> Tokenizer | None:
        if self.tokenizer is not None:
            return self.tokenizer
        return chinese_words if self.language == "zh" else None

    def _vectorizer(self) -> Any:
        """The candidate phrases: sklearn's `CountVectorizer`, as KeyBERT builds it."""
        CountVectorizer = import_module("sklearn.feature_extraction.text").CountVectorizer

        stop_words: Any = self.stop_words
        if isinstance(stop_words, Sequence) and not isinstance(stop_words, str):
            stop_words = list(stop_words)
        tokenizer = self._word_tokenizer()
        if tokenizer is None:
            return CountVectorizer(ngram_range=self.keyphrase_ngram_range, stop_words=stop_words)
        return CountVectorizer(
            ngram_range=self.keyphrase_ngram_range,
            stop_words=stop_words,
            tokenizer=tokenizer,
            token_pattern=None,
        )

    def keywords(self, texts: Sequence[str]) -> list[list[tuple[str, float]]]:
        """KeyBERT's `(keyphrase, score)` lists for `texts`, in one batch."""
        results: list[list[tuple[str, float]]] = [[] for _ in texts]
        wanted = [i for i, text in enumerate(texts) if text.strip()]
        if not wanted:
            return results
        try:
            found = self._loaded().extract_keywords(
                docs=[texts[i] for i in wanted],
                vectorizer=self._vectorizer(),
                top_n=self.top_n,
                use_mmr=self.use_mmr,
                use_maxsum=self.use_maxsum,
                diversity=self.diversity,
            )
        except ValueError as error:  # every passage was stop words only
            if "empty vocabulary" in str(error):
                return results
            raise
        if len(wanted) == 1:  # KeyBERT unwraps the list of a single document
            found = [found]
        for i, pairs in zip(wanted, found, strict=True):
            results[i] = [(str(phrase), float(score)) for phrase, score in pairs]
        return results

    def _links(self, pairs: Iterable[tuple[str, float]]) -> set[Link]:
        tags = (normalize_tag(join_cjk_words(phrase)) for phrase, _ in pairs)
        return {Link(self.kind, self.direction, tag) for tag in tags if tag}

    def extract_one(self, input: str) -> set[Link]:
        """The keyword links of one passage."""
        return self._links(self.keywords([input])[0])

    def extract_many(self, inputs: Iterable[str]) -> list[set[Link]]:
        """The keyword links of each passage, from one KeyBERT call."""
        return [self._links(pairs) for pairs in self.keywords(list(inputs))]
