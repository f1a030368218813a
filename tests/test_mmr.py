"""MMR math against a brute-force reference (and against LangChain's helper, which differs)."""

from __future__ import annotations

import numpy as np
import pytest

from graphstore.mmr import MmrSelector


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    return (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).astype(np.float32)


def reference_mmr(query, embeddings, lambda_mult, k):
    """Textbook MMR: argmax λ·sim(q, d) − (1−λ)·max_{s∈S} sim(d, s), redundancy 0 for S = ∅."""
    chosen: list[int] = []
    scores: list[float] = []
    for _ in range(k):
        best, best_score = None, -np.inf
        for i, vector in enumerate(embeddings):
            if i in chosen:
                continue
            redundancy = max((float(vector @ embeddings[j]) for j in chosen), default=0.0)
            score = lambda_mult * float(vector @ query) - (1 - lambda_mult) * redundancy
            if score > best_score:
                best, best_score = i, score
        chosen.append(best)
        scores.append(best_score)
    return chosen, scores


@pytest.fixture
def pool():
    rng = np.random.default_rng(7)
    embeddings = unit_rows(rng.normal(size=(40, 16)))
    query = unit_rows(rng.normal(size=(1, 16)))[0]
    return query, embeddings


@pytest.mark.parametrize("lambda_mult", [0.0, 0.25, 0.5, 0.9, 1.0])
def test_selection_matches_textbook_mmr(pool, lambda_mult):
    query, embeddings = pool
    selector = MmrSelector(query, lambda_mult)
    selector.add([f"d{i}" for i in range(len(embeddings))], embeddings)
    picks = [selector.pop_best() for _ in range(10)]
    expected, expected_scores = reference_mmr(query, embeddings, lambda_mult, 10)
    assert [p.id for p in picks] == [f"d{i}" for i in expected]
    np.testing.assert_allclose([p.mmr_score for p in picks], expected_scores, atol=1e-5)
    np.testing.assert_allclose(
        [p.similarity for p in picks], [embeddings[i] @ query for i in expected], atol=1e-5
    )


def test_candidates_added_after_selection_are_scored_like_the_rest(pool):
    query, embeddings = pool
    selector = MmrSelector(query, 0.6)
    selector.add([f"d{i}" for i in range(20)], embeddings[:20])
    first = [selector.pop_best() for _ in range(3)]
    selector.add([f"d{i}" for i in range(20, 40)], embeddings[20:])
    rest = [selector.pop_best() for _ in range(7)]
    # Same result as if the late candidates had been there from the start, minus the
    # three already chosen: recompute the reference with those fixed first.
    chosen = [int(p.id[1:]) for p in first]
    for pick in rest:
        best = max(
            (i for i in range(40) if i not in chosen),
            key=lambda i: (
                0.6 * embeddings[i] @ query
                - 0.4 * max(embeddings[i] @ embeddings[j] for j in chosen)
            ),
        )
        assert pick.id == f"d{best}"
        chosen.append(best)


def test_a_pool_grown_in_many_small_adds_selects_as_textbook_mmr():
    """Past the selector's initial capacities (`_reserve` copies the pool into larger arrays;
    the selected embeddings grow too) each pick is still the textbook choice among the
    candidates added so far."""
    rng = np.random.default_rng(11)
    embeddings = unit_rows(rng.normal(size=(200, 16)))
    query = unit_rows(rng.normal(size=(1, 16)))[0]
    selector = MmrSelector(query, 0.7)
    chosen: list[int] = []
    for start in [*range(0, 200, 13), *[200] * 30]:
        added = range(min(start + 13, 200))
        selector.add([f"d{i}" for i in added[start:]], embeddings[start : added.stop])
        pick = selector.pop_best()
        assert pick is not None
        best = max(
            (i for i in added if i not in chosen),
            key=lambda i: (
                0.7 * embeddings[i] @ query
                - 0.3 * max((embeddings[i] @ embeddings[j] for j in chosen), default=0.0)
            ),
        )
        assert pick.id == f"d{best}"
        chosen.append(best)
    assert selector.open_count == 200 - len(chosen)


def test_known_ids_are_not_added_twice(pool):
    query, embeddings = pool
    selector = MmrSelector(query, 0.5)
    selector.add(["a", "b"], embeddings[:2])
    selector.add(["a", "c"], embeddings[2:4])
    assert selector.open_count == 3
    selector.pop_best()
    selector.pop_best()
    selector.pop_best()
    assert selector.pop_best() is None


def test_threshold_stops_selection(pool):
    query, embeddings = pool
    selector = MmrSelector(query, 1.0, score_threshold=0.2)
    selector.add([f"d{i}" for i in range(40)], embeddings)
    picked = []
    while (pick := selector.pop_best()) is not None:
        picked.append(pick)
    assert picked
    assert all(p.mmr_score >= 0.2 for p in picked)
    assert len(picked) == int((embeddings @ query >= 0.2).sum())


def test_langchain_helper_drops_the_redundancy_weight(pool):
    """Pins the upstream defect this module fixes: its scores differ from the textbook."""
    helper_module = pytest.importorskip("langchain_community.graph_vectorstores.mmr_helper")
    query, embeddings = pool
    helper = helper_module.MmrHelper(k=10, query_embedding=query.tolist(), lambda_mult=0.9)
    helper.add_candidates({f"d{i}": embeddings[i].tolist() for i in range(40)})
    upstream = [helper.pop_best() for _ in range(10)]
    expected, _ = reference_mmr(query, embeddings, 0.9, 10)
    assert upstream != [f"d{i}" for i in expected]


def test_given_relevance_replaces_similarity_and_can_only_rise(pool):
    query, embeddings = pool
    relevance = np.linspace(1.0, 0.0, 10, dtype=np.float32)
    selector = MmrSelector(query, 1.0)
    selector.add([f"d{i}" for i in range(10)], embeddings[:10], relevance)
    selector.raise_relevance("d9", 2.0)
    selector.raise_relevance("d0", 0.5)  # lower than it has: kept at 1.0
    first, second = selector.pop_best(), selector.pop_best()
    assert (first.id, first.relevance, first.mmr_score) == ("d9", 2.0, 2.0)
    assert (second.id, second.relevance) == ("d0", 1.0)
    assert second.similarity == pytest.approx(float(embeddings[0] @ query), abs=1e-6)
    rest = selector.unselected()
    assert [row.id for row in rest] == [f"d{i}" for i in range(1, 9)]
    assert all(row.mmr_score == pytest.approx(row.relevance) for row in rest)


def test_a_candidate_is_not_redundant_with_the_selection_that_cites_it():
    """A passage brought in because a selected passage names it resembles that passage
    because it is about what the passage mentions: only its resemblance to the other
    selections counts as redundancy."""
    query = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    singer, other = unit_rows(np.array([[0.8, 0.6, 0.0], [0.0, 0.6, 0.8]]))
    song, rival = unit_rows(np.array([[0.35, 0.937, 0.0], [0.79, 0.0, 0.613]]))
    selector = MmrSelector(query, 0.9)
    selector.add(["singer"], singer[None, :])
    assert selector.pop_best().id == "singer"
    relevance = np.array([0.8, 0.79], dtype=np.float32)
    selector.add(["song", "rival"], np.stack([song, rival]), relevance, ["singer", None])
    scores = dict(zip(["song", "rival"], selector.scores()[1:].tolist(), strict=True))
    assert scores["song"] == pytest.approx(0.9 * 0.8, abs=1e-6)  # the singer is not counted
    assert scores["rival"] == pytest.approx(0.9 * 0.79 - 0.1 * float(rival @ singer), abs=1e-6)
    # Without the citation the song's likeness to the singer would have cost it the place.
    assert 0.9 * 0.8 - 0.1 * float(song @ singer) < scores["rival"] < scores["song"]
    assert selector.pop_best().id == "song"
    # Every later selection counts in full, the citing one still does not.
    selector.add(["other"], other[None, :], np.array([0.5], dtype=np.float32), ["singer"])
    assert selector.scores()[3] == pytest.approx(0.45 - 0.1 * float(other @ song), abs=1e-6)


def test_similarities_a_caller_knows_are_kept_aligned_when_some_ids_are_known(pool):
    """The traversal passes the similarities its storage computed with the hits; an add that
    repeats known ids keeps each new candidate's own value."""
    query, embeddings = pool
    selector = MmrSelector(query, 1.0)
    selector.add(["a"], embeddings[:1], similarity=[0.5])
    selector.add(["a", "b"], [embeddings[0], embeddings[1]], similarity=[0.9, 0.25])
    picks = [selector.pop_best(), selector.pop_best()]
    assert [(pick.id, pick.similarity, pick.relevance) for pick in picks] == [
        ("a", 0.5, 0.5),
        ("b", 0.25, 0.25),
    ]


def test_a_copy_of_a_selected_candidate_is_never_selected():
    """Two passages of one text (a footer on every page, an included paragraph) took two
    places: λ 0.9 weighs their redundancy by 0.1 only.  A copy is closed once its text is
    selected, whether it was in the pool already or comes later; a near copy is not."""
    query = unit(np.array([1.0, 0.0, 0.0]))
    same = unit(np.array([0.9, 0.3, 0.0]))
    near = unit(np.array([0.9, 0.3, 0.01]))
    other = unit(np.array([0.5, 0.0, 0.8]))
    selector = MmrSelector(query, 0.9)
    selector.add(["a", "b", "c"], np.array([same, same, other]))
    assert [selector.pop_best().id for _ in range(2)] == ["a", "c"]
    assert selector.copies == {"b": "a"}
    assert selector.open_count == 0
    assert selector.pop_best() is None
    selector.add(["d", "e"], np.array([same, near]))
    assert selector.copies == {"b": "a", "d": "a"}
    assert selector.pop_best().id == "e"
    assert [row.id for row in selector.unselected()] == ["b", "d"]


def unit(vector: np.ndarray) -> np.ndarray:
    return (vector / np.linalg.norm(vector)).astype(np.float32)
