"""Extraction throughput: passages per second, batched (`extract_many`) vs one at a time.

KeyBERT runs the offline MiniLM.  GLiNER runs an *untrained* head on the same MiniLM
backbone, built here (no GLiNER weights can be fetched offline): its throughput is that of
the real architecture on a small encoder, its entities are noise.  `--gliner-model DIR`
measures a real local GLiNER instead.  GLiNER runs three ways: the extractor's default
batches (similar lengths, at most 512 padded words), fixed batches of 8 (what gliner's own
`inference` does), and the default on short inputs (each passage's first sentence).  The
mention gazetteer (pure Python, 2,000 names) is a reference row.  Passages are the first
200 of HotpotQA's corpus (`QUICK_PASSAGES` with `--quick`).

    python -m benchmarks.extraction [--quick] [--gliner-model DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import textwrap
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import (
    Stopwatch,
    argument_parser,
    figure,
    median,
    print_table,
    write_json,
)
from benchmarks.data import HOTPOT, read_data
from extractors import GlinerLinkExtractor, KeybertLinkExtractor, LinkExtractor
from extractors.mentions import MentionLinkExtractor
from graphstore.models import minilm_dir

CORPUS = HOTPOT / "hotpotqa_train_corpus.json"
GLINER_LABELS = ["person", "organization", "location"]
UNBOUNDED = 10**9
QUICK_PASSAGES = 20
"""Passages a `--quick` run extracts: enough to compare batched with one-by-one links."""


def load_corpus() -> dict[str, list[str]]:
    """HotpotQA's passages, title → sentences."""
    corpus: dict[str, list[str]] = json.loads(read_data(CORPUS))
    return corpus


def gazetteer(corpus: dict[str, list[str]], size: int = 2000) -> list[str]:
    """The corpus titles, then its most frequent capitalized names, `size` in all."""
    names = list(corpus)
    capitalized = re.compile(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+){1,3}\b")
    counts = Counter(
        name for sentences in corpus.values() for name in capitalized.findall("".join(sentences))
    )
    known = set(names)
    names += [name for name, _ in counts.most_common() if name not in known]
    return names[:size]


def untrained_gliner(directory: Path) -> Path:
    """A GLiNER with a random head on the MiniLM backbone, saved to `directory`."""
    import torch
    from gliner import GLiNER, GLiNERConfig

    torch.manual_seed(0)
    config = GLiNERConfig(model_name=str(minilm_dir()), span_mode="markerV0")
    model = GLiNER.from_config(config, backbone_from_pretrained=True, local_files_only=True)
    model.save_pretrained(directory)
    return directory


def measure(extractor: LinkExtractor[str], texts: list[str], rounds: int) -> dict[str, Any]:
    """Warm up, then time `extract_many` and a loop of `extract_one` over `texts`,
    alternating, `rounds` times; report each mode's median and fastest round."""
    extractor.extract_many(texts[:2])  # loads the model
    modes: dict[str, Callable[[], list[set[Any]]]] = {
        "batched": lambda: list(extractor.extract_many(texts)),
        "one_at_a_time": lambda: [extractor.extract_one(text) for text in texts],
    }
    seconds: dict[str, list[float]] = {mode: [] for mode in modes}
    links: dict[str, list[set[Any]]] = {}
    for _ in range(rounds):
        for mode, run in modes.items():
            with Stopwatch() as watch:
                links[mode] = run()
            seconds[mode].append(watch.seconds)
    summary: dict[str, Any] = {
        mode: {
            "median_s": median(samples),
            "min_s": min(samples),
            "rounds_s": samples,
            "passages_per_s": len(texts) / median(samples),
        }
        for mode, samples in seconds.items()
    }
    batched, single = links["batched"], links["one_at_a_time"]
    return {
        **summary,
        "speedup": summary["one_at_a_time"]["median_s"] / summary["batched"]["median_s"],
        "identical_passages": sum(a == b for a, b in zip(batched, single, strict=True)),
        "links_per_passage": sum(map(len, batched)) / len(texts),
        "passages": len(texts),
    }


def plot(args: argparse.Namespace, results: dict[str, dict[str, Any]]) -> None:
    """Batched and one-at-a-time throughput of the model-backed extractors, as bars."""
    rows = {name: result for name, result in results.items() if "mentions" not in name}
    with figure("extraction", args) as (axes,):
        ys = range(len(rows))
        for offset, mode in ((-0.2, "batched"), (0.2, "one_at_a_time")):
            rates = [result[mode]["passages_per_s"] for result in rows.values()]
            axes.barh([y + offset for y in ys], rates, 0.4, label=mode.replace("_", " "))
        axes.set_yticks(list(ys), [textwrap.fill(name, 24) for name in rows], fontsize=7)
        axes.invert_yaxis()
        axes.set_xlabel("passages per second (median of rounds)")
        axes.legend()


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argument_parser(__doc__.splitlines()[0], ("embedded",))
    parser.add_argument("--gliner-model", type=Path, help="a local GLiNER directory")
    args = parser.parse_args(argv)
    corpus = load_corpus()
    chosen = list(corpus.values())[: QUICK_PASSAGES if args.quick else 200]
    passages = ["".join(sentences) for sentences in chosen]
    first_sentences = [sentences[0] for sentences in chosen]
    rounds = 1 if args.quick else 5
    results: dict[str, dict[str, Any]] = {}
    results["keybert (MiniLM, 1-2 grams)"] = measure(KeybertLinkExtractor(), passages, rounds)
    with tempfile.TemporaryDirectory() as scratch:
        model = args.gliner_model or untrained_gliner(Path(scratch) / "gliner")
        name = "gliner (local)" if args.gliner_model else "gliner (untrained MiniLM)"
        default = GlinerLinkExtractor(GLINER_LABELS, model=model)
        results[f"{name}, ≤512 padded words"] = measure(default, passages, rounds)
        fixed = GlinerLinkExtractor(
            GLINER_LABELS, model=default._loaded(), batch_size=8, batch_words=UNBOUNDED
        )
        results[f"{name}, fixed batches of 8"] = measure(fixed, passages, rounds)
        results[f"{name}, ≤512 padded words, first sentences"] = measure(
            default, first_sentences, rounds
        )
    mentions = MentionLinkExtractor(gazetteer(corpus))
    results["mentions (2,000 names)"] = measure(mentions, passages, rounds)
    headers = ["extractor", "passages", "batched /s", "one by one /s", "speedup", "same links"]
    rows = [
        [
            name,
            result["passages"],
            result["batched"]["passages_per_s"],
            result["one_at_a_time"]["passages_per_s"],
            f"{result['speedup']:.2f}x",
            result["identical_passages"],
        ]
        for name, result in results.items()
    ]
    print_table("Extraction throughput (median of rounds)", headers, rows)
    plot(args, results)
    write_json(
        "extraction",
        args,
        {
            "rounds": rounds,
            "gliner_model": str(args.gliner_model or "untrained MiniLM"),
            "gliner_labels": GLINER_LABELS,
            "note": (
                "untrained GLiNER head: throughput only, its entities are noise; "
                "one untimed warm-up call loads each model; modes alternate each round"
            ),
            "results": results,
        },
    )
    return {"results": results}


if __name__ == "__main__":
    main()
