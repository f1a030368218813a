"""How an ingest picks its options from what it was given and what its passages record."""

from __future__ import annotations

import pytest

from graphstore.errors import InvalidInputError
from graphstore.ingest_options import IngestOptions, from_record, resolved

MENTIONS = IngestOptions(links="mentions", names="/n.txt", max_chars=400)


def test_options_not_given_come_from_the_record_and_a_given_one_wins():
    assert resolved({}, [MENTIONS, MENTIONS]) == (MENTIONS, ["links", "names", "max_chars"])
    assert resolved({"names": "/m.txt"}, [MENTIONS]) == (
        IngestOptions(links="mentions", names="/m.txt", max_chars=400),
        ["links", "max_chars"],
    )
    assert resolved({"links": "keywords"}, [MENTIONS]) == (
        IngestOptions(links="keywords", max_chars=400),
        ["max_chars"],
    )
    assert resolved({}, []) == (IngestOptions(), [])
    assert resolved({}, [IngestOptions()]) == (IngestOptions(), [])  # the defaults: unsaid


def test_records_that_differ_where_nothing_is_given_are_refused():
    other = IngestOptions(links="mentions", names="/n.txt", max_chars=900)
    with pytest.raises(InvalidInputError, match=r"\(--max-chars 400 and --max-chars 900\)"):
        resolved({}, [MENTIONS, other])
    assert resolved({"max_chars": 900}, [MENTIONS, other])[0] == other


def test_a_record_round_trips_and_one_not_made_by_graphstore_is_passed_over():
    assert from_record(MENTIONS.record()) == MENTIONS
    assert IngestOptions(names="n.txt").record()["names"] != "n.txt"  # absolute
    for value in (
        None,
        "mentions",
        {"max_chars": 400},
        {"links": "none", "max_chars": True},
        {"links": "none", "max_chars": "400"},
        {"links": "none", "colour": "red"},
    ):
        assert from_record(value) is None
