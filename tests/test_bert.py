"""The NumPy BERT encoder behind the default model: the vectors sentence-transformers gives,
without importing torch."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from graphstore.bert import BertEncoder, gelu
from graphstore.errors import InvalidInputError
from graphstore.models import BertModel, load_model, minilm_dir
from graphstore.testing.imports import imported_by

TEXTS = [
    "What government position was held by the woman who portrayed Corliss Archer?",
    "",
    "Ünïcödé, accents — and punctuation!?",
    "孙悟空保护唐僧西天取经，一路降妖除魔。",
    "The Oberoi family is an Indian family that is famous for its involvement in hotels. " * 40,
    "a",
]
"""Short and long (over the model's 256 tokens), empty, accented and Chinese text."""


def test_gelu_is_exact_gelu_across_the_range_in_place():
    values = np.linspace(-30, 30, 20_001, dtype=np.float32)
    exact = np.array([x * 0.5 * (1 + math.erf(x / math.sqrt(2))) for x in values.tolist()])
    result = gelu(values)
    assert result is values
    assert np.abs(values - exact).max() < 2e-6


@pytest.mark.models
def test_the_default_model_gives_the_vectors_sentence_transformers_gives():
    sentence_transformers = pytest.importorskip("sentence_transformers")
    reference = sentence_transformers.SentenceTransformer(str(minilm_dir()), device="cpu")
    expected = reference.encode(TEXTS, normalize_embeddings=True)
    found = np.array(load_model("minilm").embed_documents(TEXTS))
    assert found.shape == expected.shape == (len(TEXTS), 384)
    assert np.abs(found - expected).max() < 1e-5
    assert np.allclose(np.linalg.norm(found, axis=1), 1.0, atol=1e-5)
    for batch_size in (1, 4):
        by_batch = BertEncoder(minilm_dir()).encode(TEXTS, batch_size=batch_size)
        assert np.abs(by_batch - expected).max() < 1e-5


@pytest.mark.models
def test_the_default_model_imports_no_torch():
    """Importing sentence-transformers took ~10 s, which every one-query search paid."""
    code = (
        "from graphstore.models import load_model\n"
        "load_model('minilm').embed_query('which river runs through Paris?')\n"
    )
    heavy = ("torch", "transformers", "sentence_transformers", "sklearn")
    assert imported_by(code, heavy) == []


def _model_copy(tmp_path: Path, pooling: dict[str, bool]) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(minilm_dir(), folder)
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": 384, **pooling})
    )
    return folder


@pytest.mark.models
def test_a_folder_of_another_pooling_is_refused_in_one_line(tmp_path):
    folder = _model_copy(tmp_path, {"pooling_mode_cls_token": True})
    with pytest.raises(InvalidInputError, match="not a BERT model with mean pooling") as raised:
        BertModel(folder).embed_query("anything")
    assert "\n" not in str(raised.value)


@pytest.mark.models
def test_a_folder_with_a_broken_config_is_refused_in_one_line(tmp_path):
    folder = _model_copy(tmp_path, {"pooling_mode_mean_tokens": True})
    (folder / "config.json").write_text("{not json")
    with pytest.raises(InvalidInputError, match=r"cannot read .*config\.json") as raised:
        BertEncoder(folder)
    assert "\n" not in str(raised.value)


@pytest.mark.models
def test_a_folder_with_broken_weights_is_refused_in_one_line(tmp_path):
    folder = _model_copy(tmp_path, {"pooling_mode_mean_tokens": True})
    (folder / "model.safetensors").write_bytes(b"not a tensor file")
    with pytest.raises(InvalidInputError, match="cannot load the model in") as raised:
        BertEncoder(folder)
    assert "\n" not in str(raised.value)
