"""Entity links: passages naming the same person, place, ... link to each other.

GLiNER finds spans for labels chosen at run time (`["person", "place"]`), so one model
covers any schema.  Passages go to the model in batches of similar length capped by padded
words (`extractors.batching`), which on a CPU beats both fixed-size batches and one at a
time.  Tags go through `normalize_tag`, kinds are `entity:<label>`, as LangChain's
`GLiNERLinkExtractor` names them.

GLiNER scores spans of *words*, and its default splitter takes a word to be a run of `\\w`:
a Chinese clause is then one word, so no name inside it can be found.  gliner 0.2.29's
"jieba" splitter checks that `jieba` is installed but then imports `jieba3`, a different
package, and fails with `No module named 'jieba3'` where only jieba is installed; here
`words_splitter="jieba"` means `JiebaWordsSplitter`, built on jieba itself.  For Chinese
use the multilingual model (`MULTILINGUAL_MODEL`) with `words_splitter="jieba"`.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from extractors.base import TextLinkExtractor
from extractors.batching import padded_batches
from extractors.jieba_quiet import quiet_jieba
from extractors.normalize import normalize_tag
from graphstore.errors import InvalidInputError
from graphstore.links import Direction, Link
from graphstore.models import model_fingerprint, quiet_transformers
from graphstore.optional import optional_import, package_versions

DEFAULT_MODEL = "urchade/gliner_mediumv2.1"
"""English GLiNER (hub name: needs the hub or its cache; a local directory works offline)."""

MULTILINGUAL_MODEL = "urchade/gliner_multi-v2.1"
"""GLiNER for other languages, Chinese included (with `words_splitter="jieba"`)."""

WordsSplitter = Callable[[str], Iterable[tuple[str, int, int]]]
"""GLiNER's splitter protocol: text in, `(word, start, end)` character spans out."""


class JiebaWordsSplitter:
    """Words from jieba's segmentation, with their offsets; spaces are not words."""

    def __call__(self, text: str) -> Iterator[tuple[str, int, int]]:
        for word, start, end in quiet_jieba().tokenize(text):
            if not word.isspace():
                yield word, start, end


def load_gliner(model: str | Path) -> Any:
    """A GLiNER model from a local directory (never touching a hub) or a hub name; one that
    cannot be loaded is a one-line error."""
    quiet_transformers()
    with warnings.catch_warnings():  # torch's FutureWarning on gliner's import: two lines
        warnings.simplefilter("ignore", FutureWarning)
        GLiNER = optional_import("gliner", "entity links").GLiNER
    local = Path(model).is_dir()
    try:
        return GLiNER.from_pretrained(str(model), local_files_only=local)
    except (OSError, ValueError) as error:  # no config in the folder, a bad name, no hub
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        where = "directory" if local else "model name (offline: give its local directory)"
        raise InvalidInputError(f"cannot load GLiNER from {model} ({where}): {reason}") from None


class GlinerLinkExtractor(TextLinkExtractor):
    """Links to the entities GLiNER finds for `labels`, kind `f"{kind_prefix}:{label}"`.

    `model` is a hub name, a local directory or a loaded `GLiNER`; it loads on first use.
    `words_splitter` replaces the model's word splitter while this extractor runs it:
    `"jieba"` for Chinese, another gliner splitter name, or a `WordsSplitter` callable.
    A batch holds at most `batch_size` passages and `batch_words` padded words (passages
    times the longest one's words).
    """

    def __init__(
        self,
        labels: Sequence[str],
        *,
        kind_prefix: str = "entity",
        direction: Direction = "bidir",
        model: str | Path | Any = DEFAULT_MODEL,
        threshold: float = 0.5,
        batch_size: int = 32,
        batch_words: int = 512,
        words_splitter: str | WordsSplitter | None = None,
    ) -> None:
        if not labels or isinstance(labels, str):
            raise InvalidInputError("GLiNER needs a list of entity labels, such as ['person']")
        if not 0.0 <= threshold <= 1.0:
            raise InvalidInputError(f"threshold must be between 0 and 1, not {threshold}")
        if batch_size < 1 or batch_words < 1:
            raise InvalidInputError(
                f"batch_size and batch_words must be at least 1, not {batch_size}, {batch_words}"
            )
        self.labels = list(labels)
        self.kind_prefix = kind_prefix
        self.direction: Direction = direction
        self.model = model
        self.threshold = threshold
        self.batch_size = batch_size
        self.batch_words = batch_words
        self.words_splitter = words_splitter
        self._model: Any = None

    def setting(self) -> str | None:
        """The model folder's fingerprint and every option that changes what is found; None
        for a hub name, a loaded model or a splitter callable (nothing tells them apart)."""
        model = model_fingerprint(self.model)
        splitter = self.words_splitter
        if model is None or not isinstance(splitter, (str, type(None))):
            return None
        options = (self.labels, self.kind_prefix, self.direction, self.threshold, splitter)
        libraries = package_versions("gliner", "transformers", "torch", "jieba")
        return json.dumps(["gliner", libraries, model, options, self.batch_words])

    def _loaded(self) -> Any:
        if self._model is None:
            is_name = isinstance(self.model, (str, Path))
            self._model = load_gliner(self.model) if is_name else self.model
        return self._model

    def _splitter(self) -> Any:
        if self.words_splitter == "jieba":
            return JiebaWordsSplitter()
        if isinstance(self.words_splitter, str):
            from gliner.data_processing.tokenizer import WordsSplitter as GlinerSplitter

            return GlinerSplitter(self.words_splitter)
        return self.words_splitter

    @contextmanager
    def _splitting(self, model: Any) -> Iterator[None]:
        """Run with our splitter, then give the (possibly shared) model its own back."""
        splitter = self._splitter()
        if splitter is None:
            yield
            return
        processor = model.data_processor
        own = processor.words_splitter
        processor.words_splitter = splitter
        try:
            yield
        finally:
            processor.words_splitter = own

    def entities(self, texts: Sequence[str]) -> list[list[dict[str, Any]]]:
        """GLiNER's entity dicts (`text`, `label`, `score`, `start`, `end`) for each text."""
        if not texts:
            return []
        model = self._loaded()
        results: list[list[dict[str, Any]]] = [[] for _ in texts]
        with self._splitting(model):
            lengths = [self._words(model, text) for text in texts]
            for batch in padded_batches(lengths, self.batch_words, self.batch_size):
                found = model.inference(
                    [texts[i] for i in batch],
                    self.labels,
                    threshold=self.threshold,
                    batch_size=len(batch),
                    flat_ner=True,
                )
                for i, entities in zip(batch, found, strict=True):
                    results[i] = list(entities)
        return results

    @staticmethod
    def _words(model: Any, text: str) -> int:
        """How many words GLiNER will see of `text` (it truncates at `max_len`)."""
        words = sum(1 for _ in model.data_processor.words_splitter(text))
        return min(words, int(model.config.max_len))

    def _links(self, entities: Iterable[dict[str, Any]]) -> set[Link]:
        links: set[Link] = set()
        for entity in entities:
            tag = normalize_tag(str(entity["text"]))
            if tag:
                links.add(Link(f"{self.kind_prefix}:{entity['label']}", self.direction, tag))
        return links

    def extract_one(self, input: str) -> set[Link]:
        """The entity links of one passage."""
        return self._links(self.entities([input])[0])

    def extract_many(self, inputs: Iterable[str]) -> list[set[Link]]:
        """The entity links of each passage, from one batched GLiNER call."""
        return [self._links(entities) for entities in self.entities(list(inputs))]
