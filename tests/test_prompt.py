"""Writer-prompt assembly: budget, dedup, story order, citations and provenance."""

from __future__ import annotations

import pytest

from graphstore import GraphStore, InvalidInputError, Link, Node
from graphstore.embedded import EmbeddedStorage
from graphstore.nodes import Hit
from graphstore.prompt import assemble, awriter_context, count_tokens, writer_context_runnable
from graphstore.store import run_sync
from graphstore.testing.embeddings import KeyedEmbeddings


def hit(
    node_id, text, position, *, via=None, source="西游记.txt", chapter="第二十七回 尸魔三戏唐三藏"
):
    metadata = {"source": source, "position": position, "section": [chapter]}
    return Hit(Node(node_id, text, metadata), similarity=0.5, via=via)


def test_token_count_is_cjk_aware():
    assert count_tokens("孙悟空三打白骨精") == 8
    assert count_tokens("Monkey King") == 2 + 1
    assert count_tokens("孙悟空 fights the demon.") == 3 + 2 + 1 + 2 + 1
    assert count_tokens("") == 0


@pytest.mark.parametrize("budget", [30, 60, 120, 400])
def test_budget_is_never_exceeded_and_best_first_wins(budget):
    hits = [hit(f"p{i}", "白骨精变作村姑。" * (i + 1), position=10 - i) for i in range(6)]
    context = assemble(hits, budget=budget)
    assert context.tokens <= budget
    assert context.tokens == count_tokens(context.text)
    chosen = [h.node.id for h in context.hits]
    if chosen:
        assert "p0" in chosen


def test_when_nothing_fits_the_context_names_the_budget_the_shortest_needs():
    hits = [hit("long", "长" * 300, 1), hit("short", "唐僧念咒。", 2)]
    context = assemble(hits, budget=10)
    assert (context.text, context.hits) == ("", [])
    assert context.needed is not None
    assert context.needed > 10
    assert context.first_needed is not None
    best, best_needs = context.first_needed
    assert (best, best_needs > context.needed) == ("long", True)
    with pytest.raises(InvalidInputError) as refused:  # the shortest is not what was asked
        context.check_shown()
    assert str(refused.value) == (
        f"nothing fits in 10 tokens: the best card or passage found, long, needs {best_needs}; "
        f"give a budget of at least {best_needs} (at {context.needed} only a shorter, lesser "
        "one fits)"
    )
    with pytest.raises(InvalidInputError, match="the shortest card or passage found needs 37;"):
        assemble([hit("short", "唐僧念咒。", 2)], budget=5).check_shown()
    shown = assemble(hits, budget=context.needed)
    assert [h.node.id for h in shown.hits] == ["short"]
    assert shown.needed is None
    shown.check_shown()
    assert assemble(hits, budget=context.needed - 1).hits == []
    assert assemble([], budget=10).needed is None  # nothing found: no budget to name
    with pytest.raises(InvalidInputError, match="nothing fits in 1 token: "):
        assemble(hits, budget=1).check_shown()


def test_too_long_passage_is_skipped_for_a_shorter_later_one():
    hits = [hit("short1", "唐僧。", 1), hit("long", "长" * 500, 2), hit("short2", "八戒。", 3)]
    context = assemble(hits, budget=100)
    assert [h.node.id for h in context.hits] == ["short1", "short2"]


def test_duplicates_by_id_and_by_text_are_dropped():
    hits = [
        hit("a", "悟空 打 妖精", 1),
        hit("a", "悟空 打 妖精", 1),
        hit("b", "悟空  打\n妖精", 2),
        hit("c", "唐僧 念 咒", 3),
    ]
    context = assemble(hits, budget=1000)
    assert [h.node.id for h in context.hits] == ["a", "c"]


def test_story_order_citations_and_provenance():
    hits = [
        hit("late", "三打白骨精。", 900, via=("entity:person", "孙悟空")),
        hit("early", "石猴出世。", 5, chapter="第一回 灵根育孕源流出"),
        hit("other-book", "林黛玉进贾府。", 1, source="红楼梦.txt", chapter="第三回"),
    ]
    context = assemble(hits, budget=1000)
    # The book of the best passage comes first; within a book, story order.
    assert [h.node.id for h in context.hits] == ["early", "late", "other-book"]
    assert (
        "[2] 西游记.txt · 第二十七回 尸魔三戏唐三藏 · late (via entity:person 孙悟空)"
        in context.text
    )
    assert "[1] 西游记.txt · 第一回 灵根育孕源流出 · early (similar to the scene)" in context.text


def test_chapter_files_are_shown_in_chapter_order():
    """Sources came in the order of their best passage, so chapter 2's file came before
    chapter 1's whenever its passage ranked higher; a source without chapters comes first."""
    found = [("c2.md", 0, 2), ("notes.md", 3, None), ("c1.md", 4, 1), ("c1.md", 1, 1)]
    hits = [
        Hit(
            Node(
                f"{source}#{position}",
                f"text {n}",
                {"source": source, "position": position}
                | ({} if chapter is None else {"chapter": chapter}),
            ),
            similarity=0.5,
        )
        for n, (source, position, chapter) in enumerate(found)
    ]
    context = assemble(hits, budget=1000)
    assert [h.node.id for h in context.hits] == ["notes.md#3", "c1.md#1", "c1.md#4", "c2.md#0"]


def test_passages_without_a_position_are_in_chapter_order_within_their_source():
    """An agent's passages (MCP `put_passages` asks for a chapter, not a position) all sat
    at position 0, so they came in id order: chapter 30, then 29, then 28."""
    hits = [
        Hit(Node(node_id, f"text {chapter}", {"source": "draft.md", "chapter": chapter}), 0.5)
        for node_id, chapter in [("draft-a", 30), ("draft-c", 28), ("draft-b", 29)]
    ]
    context = assemble(hits, budget=1000)
    assert [h.node.id for h in context.hits] == ["draft-c", "draft-b", "draft-a"]


def test_template_is_customizable():
    context = assemble([hit("a", "悟空", 1)], budget=100, template="<{id}> {text}")
    assert context.text == "<a> 悟空"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"budget": 0}, "budget must be between 1 and 1000000, got 0"),
        ({"template": None}, "the prompt template and separator must be strings"),
        (
            {"template": "{nope} {text}"},
            "bad prompt template: unknown field {nope}; fields: {number}",
        ),
        ({"template": "{text"}, "bad prompt template: "),
        (  # the width check read only digits: this padded lines to 16 million characters
            {"template": "{text:>{number}{number}{number}{number}}"},
            "bad prompt template: a field's format holds another field",
        ),
        ({"count": lambda text: "3"}, "the token counter must return an integer ≥ 0, not '3'"),
        # A negative count let the block grow past any budget.
        ({"count": lambda text: -len(text)}, "the token counter must return an integer ≥ 0"),
    ],
)
def test_bad_layout_is_a_one_line_error(options, message):
    """A zero budget used to be accepted, and a template of None or a counter returning a
    string raised AttributeError or TypeError from deep inside."""
    with pytest.raises(InvalidInputError) as error:
        assemble([hit("a", "悟空", 1)], **({"budget": 100} | options))
    assert message in str(error.value)
    assert "\n" not in str(error.value)


async def test_writer_context_reaches_linked_passages_and_runs_as_a_runnable(backend):
    vectors = {
        "scene": [1, 0, 0],
        "悟空大战白骨精": [1, 0.1, 0],
        "悟空的金箍棒": [0, 1, 0],
        "无关": [0.1, 0, 1],
    }
    # "noise" is the nearer of the two others, yet "staff" wins: it shares a character with
    # the best passage.
    store = GraphStore(KeyedEmbeddings(vectors), backend)
    await store.aadd_nodes(
        [
            Node(
                "fight",
                "悟空大战白骨精",
                {"source": "x.txt", "position": 2},
                frozenset({Link.bidir("entity:person", "孙悟空")}),
            ),
            Node(
                "staff",
                "悟空的金箍棒",
                {"source": "x.txt", "position": 1},
                frozenset({Link.bidir("entity:person", "孙悟空")}),
            ),
            Node("noise", "无关", {"source": "x.txt", "position": 3}),
        ]
    )
    context = await awriter_context(store, "scene", budget=200, k=2, fetch_k=1)
    assert [h.node.id for h in context.hits] == ["staff", "fight"]
    assert "via entity:person 孙悟空" in context.text
    runnable = writer_context_runnable(store, budget=200, k=2, fetch_k=1)
    assert await runnable.ainvoke("scene") == context.text
    assert runnable.invoke("scene") == context.text


def test_an_unknown_writer_option_is_refused_when_the_runnable_is_made():
    """`writer_context_runnable(store, budgett=100)` was accepted; its first scene then
    failed with a list of the search's options that left out `budget` and its siblings."""
    store = GraphStore(KeyedEmbeddings(), EmbeddedStorage(":memory:"))
    with pytest.raises(InvalidInputError, match=r"^unknown writer context option 'budgett'; "):
        writer_context_runnable(store, budget=100, budgett=100)
    with pytest.raises(InvalidInputError) as error:
        run_sync(awriter_context(store, "scene", lamda_mult=0.5))
    assert "budget, card_share" in str(error.value)
    assert "lambda_mult" in str(error.value)
    writer_context_runnable(store, budget=100, lambda_mult=0.5)  # a search setting is one
