"""Deterministic embeddings for tests about graph semantics (no model involved)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from langchain_core.embeddings import Embeddings


class KeyedEmbeddings(Embeddings):
    """Returns the vector given for a text, or a stable pseudo-random one for unknown texts.

    Tests choose vectors to make similarities exact; every other text gets a vector seeded
    by its SHA-256, so results never depend on a model or on run order.
    """

    model_id = "keyed"

    def __init__(
        self, vectors: Mapping[str, Sequence[float]] | None = None, dimension: int = 8
    ) -> None:
        self.vectors = {text: list(map(float, vector)) for text, vector in (vectors or {}).items()}
        self.dimension = len(next(iter(self.vectors.values()))) if self.vectors else dimension

    def _embed(self, text: str) -> list[float]:
        if text in self.vectors:
            return self.vectors[text]
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        return [float(x) for x in np.random.default_rng(seed).normal(size=self.dimension)]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text."""
        return [self._embed(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        """The same vector a document with this text gets."""
        return self._embed(text)


class HookedEmbeddings(KeyedEmbeddings):
    """`KeyedEmbeddings` that run an action while the n-th batch (from 1) is being embedded:
    a node stopped, killed or restarted at a known point of an ingest."""

    def __init__(self, actions: Mapping[int, Callable[[], object]], dimension: int = 8) -> None:
        super().__init__(dimension=dimension)
        self.actions = dict(actions)
        self.calls = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Run this batch's action, if any, then embed as `KeyedEmbeddings` does."""
        self.calls += 1
        action = self.actions.get(self.calls)
        if action is not None:
            action()
        return super().embed_documents(texts)
