"""Local embedding models: where their calls run."""

from __future__ import annotations

import asyncio
import threading
import time

from graphstore.embeddings import E5Embeddings, LocalEmbeddings, SentenceTransformerEmbeddings


class ThreadRecorder(LocalEmbeddings):
    """A stand-in model that notes the thread of every call (the test is about threads)."""

    def __init__(self) -> None:
        self.threads: set[int] = set()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.threads.add(threading.get_ident())
        time.sleep(0.01)  # long enough that concurrent calls would overlap on a pool
        return [[1.0, 0.0] for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


async def test_every_async_call_of_a_local_model_runs_on_one_thread_off_the_loop():
    model = ThreadRecorder()
    await asyncio.gather(
        *(model.aembed_documents(["passage"]) for _ in range(8)),
        *(model.aembed_query("query") for _ in range(4)),
    )
    assert len(model.threads) == 1
    assert threading.get_ident() not in model.threads


def test_the_shipped_models_are_local_models():
    assert issubclass(SentenceTransformerEmbeddings, LocalEmbeddings)
    assert issubclass(E5Embeddings, LocalEmbeddings)
