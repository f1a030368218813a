"""Links a model extractor found are reused for the same text under the same setting, so
an ingest of a folder again runs the model only on what changed (real stores and files;
an extractor of capitalized words stands in for KeyBERT where the test is about reuse)."""

from __future__ import annotations

import logging
import sqlite3
from importlib.metadata import version
from pathlib import Path

import pytest

from extractors import KeybertLinkExtractor
from extractors.base import LinkExtractor
from extractors.entities import GlinerLinkExtractor
from graphstore import GraphStore, Link
from graphstore.cli import main
from graphstore.embedded import EmbeddedStorage
from graphstore.ingest import ingest, text_linker
from graphstore.link_cache import CACHE_DIR_VARIABLE, LinkCache, cache_path, extract_with_cache
from graphstore.models import E5Model, folder_fingerprint, minilm_dir
from graphstore.optional import package_versions
from graphstore.storage import Storage
from graphstore.testing.embeddings import KeyedEmbeddings


class CapitalWords(LinkExtractor[str]):
    """Links to each capitalized word; notes every text it reads, as a model would cost."""

    def __init__(self, setting: str | None = "capital words") -> None:
        self.read: list[str] = []
        self._setting = setting

    def extract_one(self, input: str) -> set[Link]:
        self.read.append(input)
        words = (word.strip(".,") for word in input.split())
        return {Link.bidir("word", word) for word in words if word[:1].isupper()}

    def setting(self) -> str | None:
        return self._setting


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


async def stored_links(store: GraphStore) -> dict[str, frozenset[Link]]:
    nodes = await store.aget(sorted(await store.anode_ids()))
    return {node.id: node.links for node in nodes}


async def test_an_ingest_again_runs_a_model_extractor_only_on_texts_it_has_not_linked(
    backend: Storage, tmp_path: Path
) -> None:
    """Every ingest ran KeyBERT over every passage again: re-ingesting the demo folder with
    keyword links took 40 s after editing nothing, against 1 s without keywords."""
    write(tmp_path / "W" / "a.md", "Alpha met Beta.\n\nRivers run.\n")
    chapter = write(tmp_path / "W" / "b.md", "Gamma saw Alpha.\n")
    extractor, cache = CapitalWords(), LinkCache(tmp_path / "cache" / "links.sqlite")
    store = GraphStore(KeyedEmbeddings(), backend)

    async def run() -> None:
        linker = text_linker(extractor, cache)
        await ingest(store, [tmp_path / "W"], linkers=[linker], root=tmp_path, max_chars=20)

    await run()
    assert sorted(extractor.read) == ["Alpha met Beta.", "Gamma saw Alpha.", "Rivers run."]
    first = await stored_links(store)
    assert first["W/b.md#0"] == {Link.bidir("word", "Gamma"), Link.bidir("word", "Alpha")}
    extractor.read.clear()
    await run()
    assert (extractor.read, await stored_links(store)) == ([], first)
    chapter.write_text("Gamma saw Delta.\n", encoding="utf-8")
    await run()
    assert extractor.read == ["Gamma saw Delta."]
    assert (await stored_links(store))["W/b.md#0"] == {
        Link.bidir("word", "Gamma"),
        Link.bidir("word", "Delta"),
    }


def test_links_are_reused_only_under_the_same_setting(tmp_path: Path) -> None:
    cache = LinkCache(tmp_path / "links.sqlite")
    texts = ["Alpha met Beta.", "Rivers run.", "Alpha met Beta."]
    plain = CapitalWords()
    assert extract_with_cache(plain, texts, cache) == [plain.extract_one(t) for t in texts]
    plain.read.clear()
    assert extract_with_cache(plain, texts[:2], cache)[0] == {
        Link.bidir("word", "Alpha"),
        Link.bidir("word", "Beta"),
    }
    assert plain.read == []
    other = CapitalWords("capital words, other options")
    extract_with_cache(other, texts[:1], cache)
    assert other.read == ["Alpha met Beta."]
    unnamed = CapitalWords(setting=None)  # no setting: nothing says two runs agree
    extract_with_cache(unnamed, texts[:1], cache)
    extract_with_cache(unnamed, texts[:1], cache)
    assert unnamed.read == ["Alpha met Beta."] * 2


def test_an_unusable_cache_costs_only_the_extraction(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A cache is never a reason for an ingest to fail: a file that is no database, a
    folder in its place, a file in place of its folder (named in one line: it said "File
    exists"), a row that cannot be decoded: the texts are extracted again."""
    texts = ["Alpha met Beta.", "Rivers run."]
    expected = [CapitalWords().extract_one(text) for text in texts]
    garbage = write(tmp_path / "garbage.sqlite", "not a database " * 100)
    folder = tmp_path / "folder.sqlite"
    folder.mkdir()
    for path in (garbage, folder):
        extractor = CapitalWords()
        with caplog.at_level(logging.WARNING, logger="graphstore.link_cache"):
            assert extract_with_cache(extractor, texts, LinkCache(path)) == expected
        assert extractor.read == texts
        assert f"not using the link cache {path}" in caplog.text
        caplog.clear()
    assert garbage.read_text() == "not a database " * 100

    for path, reason in (
        (garbage / "links.sqlite", f"{garbage} is a file, not a folder"),
        (garbage / "sub" / "links.sqlite", "a part of its path is a file"),
    ):
        with caplog.at_level(logging.WARNING, logger="graphstore.link_cache"):
            assert extract_with_cache(CapitalWords(), texts, LinkCache(path)) == expected
        assert f"not using the link cache {path}: " in caplog.text
        assert reason in caplog.text
        caplog.clear()

    good = tmp_path / "links.sqlite"
    extract_with_cache(CapitalWords(), texts, LinkCache(good))
    nested = "[" * 100_000 + "]" * 100_000
    for row in ("not json", '[["kw", "sideways", "tea"]]', '[["kw", "bidir"]]', "[1]", nested):
        with sqlite3.connect(good) as db:
            db.execute("UPDATE links SET links = ?", (row,))
        extractor = CapitalWords()
        assert extract_with_cache(extractor, texts, LinkCache(good)) == expected
        assert extractor.read == texts


def test_the_cache_lives_in_the_user_cache_folder_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(CACHE_DIR_VARIABLE)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_path() == tmp_path / "xdg" / "graphstore" / "links.sqlite"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_path() == tmp_path / "home" / ".cache" / "graphstore" / "links.sqlite"
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(tmp_path / "mine"))
    assert cache_path() == tmp_path / "mine" / "links.sqlite"
    monkeypatch.setenv(CACHE_DIR_VARIABLE, "")
    assert cache_path() is None

    def homeless() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.delenv(CACHE_DIR_VARIABLE)
    monkeypatch.setattr(Path, "home", homeless)  # no HOME, a user id without a passwd entry
    assert cache_path() is None


def test_a_model_extractors_setting_changes_with_its_model_and_options(tmp_path: Path) -> None:
    """A cached link may be reused only where the extractor would find it again: another
    option, another model, or a model folder whose files changed give another setting; an
    extractor whose model or tokenizer nothing identifies has none."""
    default = KeybertLinkExtractor().setting()
    assert default is not None
    assert default == KeybertLinkExtractor(model=minilm_dir()).setting()
    assert default != KeybertLinkExtractor(top_n=3).setting()
    assert default != KeybertLinkExtractor(language="zh").setting()
    assert default != KeybertLinkExtractor(model=E5Model()).setting()
    assert KeybertLinkExtractor(model=object()).setting() is None
    assert KeybertLinkExtractor(tokenizer=str.split).setting() is None

    model = write(tmp_path / "model" / "weights.bin", "first weights")
    before = folder_fingerprint(model.parent)
    write(tmp_path / "model" / ".git" / "index", "what `git status` rewrites")
    assert folder_fingerprint(model.parent) == before
    labels = ["person"]
    gliner = GlinerLinkExtractor(labels, model=model.parent).setting()
    assert gliner is not None
    model.write_text("other weights, longer")
    assert folder_fingerprint(model.parent) != before
    assert GlinerLinkExtractor(labels, model=model.parent).setting() != gliner
    assert GlinerLinkExtractor(["place"], model=model.parent).setting() != gliner
    assert GlinerLinkExtractor(labels).setting() is None  # a hub name: no files to check


def test_a_setting_names_a_missing_library_rather_than_failing() -> None:
    """The settings read the versions of the libraries that decide the links; one that is
    not installed made `setting()` raise, a traceback where the extractor's own import gives
    one line naming the package to install."""
    assert package_versions("keybert", "no-such-package-here") == (
        f"keybert {version('keybert')}, no-such-package-here absent"
    )


def test_a_cli_ingest_reuses_the_keyword_links_kept_for_a_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command line keeps KeyBERT's links in the cache: a second ingest takes a text's
    links from it (here planted, so that only a reuse can bring them into the store)."""
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(tmp_path / "cache"))
    text = "Green tea grows on steep hills in Darjeeling."
    write(tmp_path / "notes" / "tea.md", text + "\n")
    ingest_into = [
        "ingest",
        str(tmp_path / "notes"),
        "--root",
        str(tmp_path),
        "--links",
        "keywords",
    ]
    assert main(["--store", str(tmp_path / "first.db"), *ingest_into]) == 0
    setting = KeybertLinkExtractor().setting()
    assert setting is not None
    cache = LinkCache(tmp_path / "cache" / "links.sqlite")
    [kept] = cache.get(setting, [text])
    assert kept is not None
    assert Link.bidir("kw", "darjeeling") in kept
    planted = {Link.bidir("kw", "planted")}
    cache.put(setting, [text], [planted])
    second = str(tmp_path / "second.db")
    assert main(["--store", second, *ingest_into]) == 0
    capsys.readouterr()
    [node] = GraphStore(None, EmbeddedStorage(second)).get(["notes/tea.md#0"])
    assert node.links == planted
