"""One budget over sections: shares, roll-over of what a section leaves, the total kept."""

from __future__ import annotations

from dataclasses import replace

import pytest

from graphstore.errors import InvalidInputError
from graphstore.nodes import Hit, Node
from graphstore.prompt import assemble, count_tokens
from graphstore.scene import SceneCard
from graphstore.sections import Entry, Section, fill, limits, render

TEMPLATE = "[{number}] {citation} ({provenance})\n{text}"


def entries(prefix: str, sizes: list[int], char: str = "字") -> list[Entry]:
    return [
        Entry(f"{prefix}{n}", char * size + str(n), f"{prefix}.txt", "why", prefix, n)
        for n, size in enumerate(sizes)
    ]


def run(sections, budget, count=count_tokens):
    return fill(sections, budget=budget, count=count, template=TEMPLATE, separator="\n\n")


def test_limits_are_cumulative_and_the_last_is_the_budget():
    assert limits([0.3, 0.7], 1000) == [300, 1000]
    assert limits([0.25, 0.25, 0.5], 101) == [25, 50, 101]
    assert limits([0.0, 1.0], 10) == [0, 10]
    with pytest.raises(InvalidInputError, match="shares"):
        limits([0.8, 0.8], 10)
    with pytest.raises(InvalidInputError, match="shares"):
        limits([-0.1, 1.0], 10)


def block(kept: list[Entry]) -> str:
    return render([("only", kept)], TEMPLATE, "\n\n")


def test_a_section_stays_within_its_share_when_it_has_more_than_fits():
    cards = entries("c", [40] * 10)
    passages = entries("p", [40] * 10)
    filled = run([Section("Cards", 0.3, cards), Section("Passages", 0.7, passages)], 500)
    kept_cards, kept_passages = filled.chosen
    assert 0 < count_tokens(block(kept_cards)) <= 150
    assert count_tokens(block(cards[: len(kept_cards) + 1])) > 150  # the next card did not fit
    assert count_tokens(filled.text) <= 500
    assert len(kept_passages) > len(kept_cards)
    assert filled.text.startswith("## Cards\n\n[1] c.txt (why)\n")
    assert f"## Passages\n\n[{len(kept_cards) + 1}] p.txt (why)\n" in filled.text


def test_what_the_cards_leave_rolls_over_to_the_passages():
    passages = entries("p", [40] * 20)
    alone = run([Section("Cards", 0.5, []), Section("Passages", 0.5, passages)], 400)
    card = entries("c", [5])
    few_cards = run([Section("Cards", 0.5, card), Section("Passages", 0.5, passages)], 400)
    # No card: the passages get the whole budget, not just their half.
    assert count_tokens(alone.text) > 200
    assert count_tokens(block(passages[: len(alone.chosen[1]) + 1])) > 400
    # One short card: the passages get all it leaves of its half.
    assert few_cards.chosen[0] == card
    kept = few_cards.chosen[1]
    assert count_tokens(block(kept)) > 200
    assert count_tokens(few_cards.text) <= 400
    more = [("Cards", card), ("Passages", passages[: len(kept) + 1])]
    assert count_tokens(render(more, TEMPLATE, "\n\n")) > 400


def test_a_best_entry_longer_than_its_share_stretches_the_share_rather_than_losing_its_place():
    """A scene naming 白骨精, whose card (108 tokens) is longer than the cards' 90 of a
    300-token budget, got a shorter card it never named in that place, then passages filled
    the rest; the card it named came in at --card-share 1 only."""
    named, lesser = entries("c", [100, 30])
    passages = entries("p", [40] * 10)
    filled = run([Section("Cards", 0.3, [named, lesser]), Section("Passages", 0.7, passages)], 300)
    kept_cards, kept_passages = filled.chosen
    assert kept_cards == [named]
    assert kept_passages  # the passages get what the card leaves
    assert count_tokens(filled.text) <= 300
    assert filled.left_out is None
    # A best entry longer than the whole budget is not replaced by the lesser one either (a
    # scene naming 诸葛亮 at --budget 80 got the card of 曹操, named in a passage found): it
    # is named, and the passages get the whole budget.
    huge = entries("c", [400])[0]
    lesser = replace(lesser, provenance="named in a passage found")
    filled = run([Section("Cards", 0.3, [huge, lesser]), Section("Passages", 0.7, passages)], 300)
    assert filled.chosen[0] == []
    assert filled.left_out == (huge.id, count_tokens(block([huge])))
    assert count_tokens(block(passages[: len(filled.chosen[1]) + 1])) > 300
    # A section of share 0 takes nothing, its best entry neither.
    filled = run([Section("Cards", 0.0, [named]), Section("Passages", 1.0, passages)], 300)
    assert filled.chosen[0] == []


def test_what_the_passages_leave_goes_back_to_the_cards():
    """A card share too small for the cards a scene names used to drop them while most of
    the budget went unused (few passages found)."""
    cards = entries("c", [60, 60, 60])
    passages = entries("p", [30])
    filled = run([Section("Cards", 0.3, cards), Section("Passages", 0.7, passages)], 400)
    assert count_tokens(block(cards[:2])) > 120  # only one card fits the cards' share
    assert filled.chosen == [cards, passages]
    assert count_tokens(filled.text) <= 400
    # The passages come first: a card gets only what they leave.
    many = entries("p", [30] * 12)
    crowded = run([Section("Cards", 0.3, cards), Section("Passages", 0.7, many)], 400)
    assert crowded.chosen[0] == cards[:1]
    assert count_tokens(crowded.text) <= 400


@pytest.mark.parametrize("budget", [1, 20, 77, 150, 333, 1000])
@pytest.mark.parametrize("count", [count_tokens, len])
def test_the_whole_block_never_exceeds_the_budget(budget, count):
    sections = [
        Section("Cards", 0.4, entries("c", [3, 50, 8, 30])),
        Section("Passages", 0.6, entries("p", [60, 2, 25, 10, 90, 4])),
    ]
    filled = run(sections, budget, count)
    assert count(filled.text) <= budget


def test_a_long_prompt_counts_its_block_a_few_times_not_once_per_passage():
    """Each passage was tried alone, rendering and counting the whole block each time: a
    prompt of 1,000 passages took 15 s.  Runs that double while they fit take the same
    passages (the last one, too long, is skipped and a short one after it taken) in a
    number of counts that grows with the logarithm."""
    counted: list[str] = []

    def count(text: str) -> int:
        counted.append(text)
        return count_tokens(text)

    passages = entries("p", [5] * 1000 + [5000, 5])
    filled = run([Section("Passages", 1.0, passages)], 20_000, count)
    chosen = [entry.id for entry in filled.chosen[0]]
    assert chosen == [f"p{n}" for n in range(1000)] + ["p1001"]
    assert len(counted) < 40


def test_numbers_run_through_the_sections_and_duplicates_are_dropped_across_them():
    card = Entry("card:x", "孙悟空", "card", "named in the scene")
    same_text = Entry("p0", " 孙悟空 ", "a.txt", "similar", "a.txt", 0)
    other = Entry("p1", "唐僧", "a.txt", "similar", "a.txt", 1)
    filled = run([Section("Cards", 0.5, [card]), Section("Passages", 0.5, [same_text, other])], 200)
    assert [[e.id for e in kept] for kept in filled.chosen] == [["card:x"], ["p1"]]
    assert "[2] a.txt (similar)\n唐僧" in filled.text


def test_without_cards_the_block_is_the_passages_alone_as_before():
    hits = [
        Hit(Node("b", "八戒。", {"source": "x.txt", "position": 2}), 0.5),
        Hit(Node("a", "悟空。", {"source": "x.txt", "position": 1}), 0.5),
    ]
    context = assemble(hits, budget=100)
    assert context.text == (
        "[1] x.txt · a (similar to the scene)\n悟空。\n\n[2] x.txt · b (similar to the scene)\n八戒。"
    )
    assert context.cards == []


def test_assemble_puts_cards_first_rendered_as_of_the_chapter():
    from graphstore.cards import Card, Fact

    monkey = Card(
        "孙悟空", attributes=(("处境", (Fact("取经", 14), Fact("被贬", 27))),), source="w.md"
    )
    hits = [Hit(Node("a", "悟空。", {"source": "x.txt", "position": 1}), 0.5)]
    context = assemble(
        hits, budget=200, cards=[SceneCard(monkey, "named in the scene")], as_of_chapter=26
    )
    assert context.text == (
        "## Cards\n\n[1] w.md · card:孙悟空 · as of chapter 26 (named in the scene)\n孙悟空\n处境: 取经"
        "\n\n## Passages\n\n[2] x.txt · a (similar to the scene)\n悟空。"
    )
    assert [c.card.name for c in context.cards] == ["孙悟空"]
    with pytest.raises(InvalidInputError, match="card_share"):
        assemble(hits, budget=200, card_share=1.5)


def test_the_best_card_longer_than_the_budget_is_named_and_not_replaced():
    """`prompt "诸葛亮" --budget 80` showed the card of 曹操, named in a passage found, in
    place of 诸葛亮's, and said nothing; at 90 it showed 诸葛亮's."""
    from graphstore.cards import Card, Fact

    named = Card("诸葛亮", attributes=(("身份", (Fact("军师卧龙先生" * 12, 36),)),), source="w.md")
    lesser = Card("曹操", source="w.md")
    hits = [Hit(Node("a", "孔明借箭。", {"source": "x.txt", "position": 1}), 0.5)]
    cards = [SceneCard(named, "named in the scene"), SceneCard(lesser, "named in a passage found")]
    context = assemble(hits, budget=80, cards=cards)
    assert context.cards == []
    assert [hit.node.id for hit in context.hits] == ["a"]
    assert context.card_left_out is not None
    card, needs = context.card_left_out
    assert (card, needs > 80) == ("card:诸葛亮", True)
    shown = assemble(hits, budget=needs, cards=cards)
    assert [c.card.name for c in shown.cards] == ["诸葛亮"]
    assert shown.card_left_out is None
    # A peer, another card the scene names, still comes in; and with nothing found but the
    # lesser card, the budget named is the best card's (the lesser would not be shown).
    peer = SceneCard(Card("刘备", source="w.md"), "named in the scene")
    context = assemble(hits, budget=80, cards=[cards[0], peer, cards[1]])
    assert [c.card.name for c in context.cards] == ["刘备"]
    alone = assemble([], budget=80, cards=cards)
    assert (alone.cards, alone.needed, alone.first_needed) == ([], needs, ("card:诸葛亮", needs))
