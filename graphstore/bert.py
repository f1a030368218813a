"""A BERT sentence encoder in NumPy, for the default model (all-MiniLM-L6-v2).

Why not sentence-transformers: importing it (torch, transformers, scikit-learn, SciPy, SymPy)
took ~10 s, which every `graphstore search` paid to embed one short query.  This forward
pass needs only NumPy, `tokenizers` and `safetensors`; it loads in half a second and gives
the same vectors (2e-7 apart, `benchmarks/embedding.py`; `tests/test_bert.py` pins 1e-5),
so stores embedded either way are searched alike.  In bulk, in one process, it is slower
(0.7×: torch fuses GELU and attention), though a CLI ingest measured faster.  It reads a
sentence-transformers folder of a BERT model with mean pooling and unit-length output, and
refuses any other.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from graphstore.blas_threads import BlasThreads
from graphstore.errors import InvalidInputError, one_line
from graphstore.optional import optional_import

Matrix = NDArray[np.float32]

_ERF_P = np.float32(0.3275911)
_ERF_A = tuple(
    np.float32(c) for c in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)
)
_ERF_CLIP = np.float32(4.0)
"""erf(4) is 1 in float32; clipping keeps exp(-z²) from going subnormal (slow)."""
FFN_ROWS = 256
"""Token rows per feed-forward block, so the 1,536-wide activations stay in cache."""


def gelu(x: Matrix) -> Matrix:
    """BERT's exact GELU, x·Φ(x), in place.  erf by Abramowitz–Stegun 7.1.26 (absolute error
    below 1.5e-7, float32's own precision): SciPy's erf is scalar code and slower still."""
    z = np.abs(x)
    z *= np.float32(1 / math.sqrt(2))
    np.minimum(z, _ERF_CLIP, out=z)
    t = z * _ERF_P
    t += 1
    np.reciprocal(t, out=t)
    tail = t * _ERF_A[0]
    for coefficient in _ERF_A[1:]:
        tail += coefficient
        tail *= t
    z *= z
    np.negative(z, out=z)
    np.exp(z, out=z)
    tail *= z  # 1 - erf(|x| / √2)
    np.subtract(1, tail, out=tail)
    np.copysign(tail, x, out=tail)  # erf(x / √2)
    tail += 1
    tail *= 0.5
    x *= tail
    return x


def layer_norm(x: Matrix, weight: Matrix, bias: Matrix, eps: float) -> Matrix:
    """Layer normalization over the last axis, in place."""
    x -= x.mean(axis=-1, keepdims=True)
    variance = np.einsum("ij,ij->i", x, x)[:, None] / x.shape[-1]
    x /= np.sqrt(variance + eps)
    x *= weight
    x += bias
    return x


def softmax(scores: Matrix) -> Matrix:
    """Softmax over the last axis, in place."""
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=-1, keepdims=True)
    return scores


class _Layer(NamedTuple):
    """One encoder layer's weights, transposed for `x @ w` (the query's scaled by 1/√d)."""

    qkv: Matrix
    qkv_bias: Matrix
    out: Matrix
    out_bias: Matrix
    norm: tuple[Matrix, Matrix]
    up: Matrix
    up_bias: Matrix
    down: Matrix
    down_bias: Matrix
    out_norm: tuple[Matrix, Matrix]


def _layer(weights: dict[str, Matrix], prefix: str, scale: np.float32) -> _Layer:
    """The weights of the layer named `prefix`, in `_Layer`'s layout."""

    def weight(name: str) -> Matrix:
        return weights[prefix + name]

    def transposed(name: str) -> Matrix:
        return np.ascontiguousarray(weight(name).T)

    query, key, value = (f"attention.self.{part}" for part in ("query", "key", "value"))
    return _Layer(
        qkv=np.ascontiguousarray(
            np.concatenate(
                [
                    weight(f"{query}.weight") * scale,
                    weight(f"{key}.weight"),
                    weight(f"{value}.weight"),
                ]
            ).T
        ),
        qkv_bias=np.concatenate(
            [weight(f"{query}.bias") * scale, weight(f"{key}.bias"), weight(f"{value}.bias")]
        ),
        out=transposed("attention.output.dense.weight"),
        out_bias=weight("attention.output.dense.bias"),
        norm=(
            weight("attention.output.LayerNorm.weight"),
            weight("attention.output.LayerNorm.bias"),
        ),
        up=transposed("intermediate.dense.weight"),
        up_bias=weight("intermediate.dense.bias"),
        down=transposed("output.dense.weight"),
        down_bias=weight("output.dense.bias"),
        out_norm=(weight("output.LayerNorm.weight"), weight("output.LayerNorm.bias")),
    )


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise InvalidInputError(f"cannot read {path}: {error}") from error


def _sentence_model(folder: Path) -> tuple[dict[str, Any], int]:
    """The folder's model config and `max_seq_length`, once it is known to be a BERT with
    mean pooling and a Normalize module (what `BertEncoder` computes); a one-line error
    otherwise."""
    refused = InvalidInputError(f"{folder} is not a BERT model with mean pooling, normalized")
    config = _json(folder / "config.json")
    try:
        listed = _json(folder / "modules.json")
        modules = {module["type"].rsplit(".", 1)[-1]: module["path"] for module in listed}
        pooling = _json(folder / modules.get("Pooling", "1_Pooling") / "config.json")
        modes = {name for name, on in pooling.items() if name.startswith("pooling_mode") and on}
        max_length = int(_json(folder / "sentence_bert_config.json")["max_seq_length"])
        computable = (
            config.get("model_type") == "bert"
            and config.get("hidden_act") == "gelu"
            and config.get("position_embedding_type", "absolute") == "absolute"
            and modes == {"pooling_mode_mean_tokens"}
            and "Normalize" in modules
        )
    except (KeyError, TypeError, AttributeError, ValueError) as error:
        raise refused from error
    if not computable:
        raise refused
    return config, max_length


class BertEncoder:
    """Unit-length mean-pooled BERT embeddings, as sentence-transformers computes them."""

    def __init__(self, folder: str | Path) -> None:
        tokenizers = optional_import("tokenizers", "the default model")
        safetensors = optional_import("safetensors.numpy", "the default model")
        folder = Path(folder)
        config, max_length = _sentence_model(folder)
        try:
            self._tokenizer = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
            tensors = safetensors.load_file(str(folder / "model.safetensors"))
        except Exception as error:  # both libraries raise their own kinds for a broken file
            raise InvalidInputError(
                f"cannot load the model in {folder}: {one_line(error)}"
            ) from error
        self._tokenizer.enable_truncation(max_length)
        self._tokenizer.no_padding()
        weights = {name.removeprefix("bert."): tensor for name, tensor in tensors.items()}
        self._heads = int(config["num_attention_heads"])
        self._eps = float(config["layer_norm_eps"])
        self.dimension = int(config["hidden_size"])
        self._word = weights["embeddings.word_embeddings.weight"]
        self._position = weights["embeddings.position_embeddings.weight"]
        self._token_type = weights["embeddings.token_type_embeddings.weight"][0]
        self._norm = (weights["embeddings.LayerNorm.weight"], weights["embeddings.LayerNorm.bias"])
        scale = np.float32(1 / math.sqrt(self.dimension // self._heads))
        self._layers = [
            _layer(weights, f"encoder.layer.{index}.", scale)
            for index in range(int(config["num_hidden_layers"]))
        ]
        self.threads = BlasThreads()
        """The thread count of its matrix products, chosen batch by batch (`blas_threads`)."""

    def encode(self, texts: list[str], batch_size: int = 8) -> Matrix:
        """One unit-length row per text.  Texts are batched by token length, so a batch pads
        little; each text attends over its own tokens only."""
        encodings = self._tokenizer.encode_batch(texts)
        token_ids = [encoding.ids for encoding in encodings]
        order = sorted(range(len(texts)), key=lambda i: -len(token_ids[i]))
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            with self.threads.running(work=sum(len(token_ids[i]) for i in batch)):
                vectors[batch] = self._encode_batch([token_ids[i] for i in batch])
        return vectors

    def _encode_batch(self, token_ids: list[list[int]]) -> Matrix:
        count, width = len(token_ids), max(len(ids) for ids in token_ids)
        lengths = [len(ids) for ids in token_ids]
        padded = np.zeros((count, width), dtype=np.int64)
        mask = np.zeros((count, width), dtype=np.float32)
        for row, ids in enumerate(token_ids):
            padded[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1
        x = (self._word[padded] + self._position[:width] + self._token_type).reshape(
            count * width, self.dimension
        )
        x = layer_norm(x, *self._norm, self._eps)
        for layer in self._layers:
            attended = self._attend(x @ layer.qkv + layer.qkv_bias, lengths, width)
            hidden = attended @ layer.out
            hidden += layer.out_bias
            hidden += x
            x = layer_norm(hidden, *layer.norm, self._eps)
            hidden = np.empty_like(x)
            for start in range(0, x.shape[0], FFN_ROWS):
                activation = x[start : start + FFN_ROWS] @ layer.up
                activation += layer.up_bias
                np.matmul(gelu(activation), layer.down, out=hidden[start : start + FFN_ROWS])
            hidden += layer.down_bias
            hidden += x
            x = layer_norm(hidden, *layer.out_norm, self._eps)
        pooled: Matrix = np.einsum("nld,nl->nd", x.reshape(count, width, -1), mask)
        pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled

    def _attend(self, qkv: Matrix, lengths: list[int], width: int) -> Matrix:
        """Multi-head self-attention of each text over its own tokens (no padding mask)."""
        heads, size = self._heads, self.dimension // self._heads
        by_head = np.ascontiguousarray(
            qkv.reshape(len(lengths), width, 3, heads, size).transpose(0, 2, 3, 1, 4)
        )
        attended = np.zeros((len(lengths), width, heads, size), dtype=np.float32)
        for row, length in enumerate(lengths):
            query, key, value = by_head[row, :, :, :length]
            weights = softmax(query @ key.transpose(0, 2, 1))
            attended[row, :length] = (weights @ value).transpose(1, 0, 2)
        return attended.reshape(len(lengths) * width, self.dimension)
