"""How an ingest picks its options from what it was given and what its passages record."""

from __future__ import annotations

import pytest

from graphstore.errors import InvalidInputError
from graphstore.ingest_options import IngestOptions, from_record, normalized_links, resolved

MENTIONS = IngestOptions(links="mentions", names="/n.txt", max_chars=400)


def test_options_not_given_come_from_the_record_and_a_given_one_wins():
    assert resolved({}, {MENTIONS: "a.md"}) == (MENTIONS, ["links", "names", "max_chars"], "")
    assert resolved({"names": "/m.txt"}, {MENTIONS: "a.md"}) == (
        IngestOptions(links="mentions", names="/m.txt", max_chars=400),
        ["links", "max_chars"],
        "",
    )
    assert resolved({"links": "keywords"}, {MENTIONS: "a.md"}) == (
        IngestOptions(links="keywords", max_chars=400),
        ["max_chars"],
        "--names /n.txt",  # said on stderr: --links given takes none of its companions
    )
    assert resolved({}, {}) == (IngestOptions(), [], "")
    assert resolved({}, {IngestOptions(): "a.md"}) == (IngestOptions(), [], "")  # unsaid


def test_records_that_differ_where_nothing_is_given_are_refused_naming_all_they_differ_in():
    other = IngestOptions(links="hyperlinks", max_chars=900)
    with pytest.raises(InvalidInputError) as error:
        resolved({}, {MENTIONS: "a/x.md", other: "b/y.md"})
    assert str(error.value) == (
        "the passages of these files were ingested with different options: --links "
        "hyperlinks --max-chars 900 (b/y.md) and --links mentions --names /n.txt --max-chars "
        "400 (a/x.md); give --links and --max-chars to say how to ingest them now"
    )
    chosen = resolved({"links": "hyperlinks", "max_chars": 900}, {MENTIONS: "a", other: "b"})
    assert chosen.options == other


def test_a_difference_the_given_options_settle_is_no_difference():
    """Two folders told apart by their names file only, ingested with `--names`: it was
    refused, asking for `--links`, which both had alike."""
    other = IngestOptions(links="mentions", names="/other.txt", max_chars=400)
    chosen = resolved({"names": "/n.txt"}, {MENTIONS: "a.md", other: "b.md"})
    assert chosen.options == MENTIONS


def test_links_are_compared_as_a_set():
    assert normalized_links("hyperlinks, hierarchy,hyperlinks") == "hierarchy,hyperlinks"
    listed = IngestOptions(links="hierarchy,hyperlinks")
    assert from_record({"links": "hyperlinks, hierarchy", "max_chars": 1000}) == listed
    assert resolved({"links": "hyperlinks ,hierarchy"}, {}).options == listed


def test_a_flag_is_printed_as_a_shell_reads_it_back():
    options = IngestOptions(links="mentions", names="/my notes/names.txt")
    assert options.flags(["links", "names"]) == "--links mentions --names '/my notes/names.txt'"


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
