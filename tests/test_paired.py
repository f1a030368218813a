"""The paired comparison the quality benchmark reports (`benchmarks.paired`)."""

from __future__ import annotations

import pytest

from benchmarks.paired import all_found, paired
from benchmarks.quality import KS, comparisons


def test_identical_searches_differ_by_nothing():
    result = paired([0.5, 1.0, 0.0], [0.5, 1.0, 0.0])

    assert result == (0.0, 0.0, 0.0, 0, 0)


def test_one_lost_passage_in_a_hundred_questions_is_within_the_interval():
    """What the dev sets' misses look like: one question of a hundred loses one of its two
    gold passages.  The mean moves by 0.005, and the interval reaches zero."""
    before = [1.0] * 60 + [0.5] * 40
    after = [0.5, *before[1:]]

    result = paired(before, after)

    assert result.difference == pytest.approx(-0.005)
    assert result.low < 0.0
    assert result.high == 0.0
    assert (result.gained, result.lost) == (0, 1)


def test_a_gain_on_many_questions_excludes_zero():
    before = [0.5] * 100
    after = [1.0] * 30 + [0.5] * 70

    result = paired(before, after)

    assert result.difference == pytest.approx(0.15)
    assert 0.0 < result.low < 0.15 < result.high
    assert (result.gained, result.lost) == (30, 0)


def test_the_interval_repeats_between_runs():
    before = [0.0, 0.5, 1.0, 0.5, 1.0] * 20
    after = [0.5, 0.5, 1.0, 0.0, 1.0] * 20

    assert paired(before, after) == paired(before, after)


def test_scores_of_different_questions_are_refused():
    with pytest.raises(ValueError, match="same questions"):
        paired([1.0, 0.5], [1.0])
    with pytest.raises(ValueError, match="same questions"):
        paired([], [])


def test_all_found_is_one_only_for_full_recall():
    assert all_found([1.0, 0.5, 0.0, 1.0]) == [1.0, 0.0, 0.0, 1.0]


def _method(per_question: list[float]) -> dict:
    return {"scores": {k: {"per_question": per_question} for k in KS}}


def test_comparisons_pair_the_default_with_similarity_and_both_with_mentions():
    by_links = {
        "mentions": {
            "similarity": _method([0.5, 0.5]),
            "search (default)": _method([1.0, 0.5]),
        },
        "both": {
            "similarity": _method([0.5, 0.5]),
            "search (default)": _method([1.0, 0.0]),
        },
    }

    rows = comparisons(by_links)

    assert [(row["comparison"], row["k"]) for row in rows] == [
        (name, k)
        for name in (
            "mentions: search (default) − similarity",
            "both: search (default) − similarity",
            "search (default): both − mentions",
        )
        for k in KS
    ]
    both_against_mentions = rows[-1]
    assert both_against_mentions["recall"]["difference"] == pytest.approx(-0.25)
    assert both_against_mentions["recall"]["lost"] == 1
    assert both_against_mentions["all"]["difference"] == 0.0
