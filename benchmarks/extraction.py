"""Extraction throughput: passages per second, batched (`extract_many`) vs one at a time.

KeyBERT runs the offline MiniLM.  GLiNER runs an *untrained* head on the same MiniLM
backbone, built here (no GLiNER weights can be fetched offline): its throughput is that of
the real architecture on a small encoder, its entities are noise.  `--gliner-model DIR`
measures a real local GLiNER instead.  The mention gazetteer (pure Python, 2,000 names) is
a reference row.  Passages are the first 200 of HotpotQA's corpus (50 with `--quick`).

    python -m benchmarks.extraction [--quick] [--gliner-model DIR]

Results: benchmarks/results/extraction[-quick].json (or `$BENCH_RESULTS_DIR`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from extractors import GlinerLinkExtractor, KeybertLinkExtractor, LinkExtractor
from extractors.mentions import MentionLinkExtractor
from graphstore.embeddings import minilm_dir

BENCHMARKS = Path(__file__).resolve().parent
CORPUS = BENCHMARKS.parents[1] / "shared" / "data" / "hotpotqa" / "hotpotqa_train_corpus.json"
RESULTS_ENV = "BENCH_RESULTS_DIR"
GLINER_LABELS = ["person", "organization", "location"]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50 passages instead of 200")
    parser.add_argument("--gliner-model", type=Path, help="a local GLiNER directory")
    return parser.parse_args(argv)


def load_corpus() -> dict[str, str]:
    corpus = json.loads(CORPUS.read_text(encoding="utf-8"))
    return {title: "".join(sentences) for title, sentences in corpus.items()}


def gazetteer(corpus: dict[str, str], size: int = 2000) -> list[str]:
    """The corpus titles, then its most frequent capitalized names, `size` in all."""
    names = list(corpus)
    capitalized = re.compile(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+){1,3}\b")
    counts = Counter(name for text in corpus.values() for name in capitalized.findall(text))
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


def timed(run: Callable[[], list[set[Any]]]) -> tuple[float, float, list[set[Any]]]:
    """Wall-clock and CPU seconds of `run`, and its links."""
    wall, cpu = time.perf_counter(), time.process_time()
    links = run()
    return time.perf_counter() - wall, time.process_time() - cpu, links


def measure(extractor: LinkExtractor[str], texts: list[str], rounds: int) -> dict[str, Any]:
    """Warm up, then time `extract_many` and a loop of `extract_one` over `texts`,
    alternating, `rounds` times; the fastest round of each counts (other work on the
    machine only ever slows a round down)."""
    extractor.extract_many(texts[:2])  # loads the model
    modes: dict[str, Callable[[], list[set[Any]]]] = {
        "batched": lambda: list(extractor.extract_many(texts)),
        "one_at_a_time": lambda: [extractor.extract_one(text) for text in texts],
    }
    best: dict[str, dict[str, float]] = {}
    links: dict[str, list[set[Any]]] = {}
    for _ in range(rounds):
        for mode, run in modes.items():
            wall, cpu, links[mode] = timed(run)
            if mode not in best or wall < best[mode]["seconds"]:
                best[mode] = {
                    "seconds": wall,
                    "cpu_seconds": cpu,
                    "passages_per_s": len(texts) / wall,
                }
    batched, single = links["batched"], links["one_at_a_time"]
    return {
        **best,
        "speedup": best["one_at_a_time"]["seconds"] / best["batched"]["seconds"],
        "identical_passages": sum(a == b for a, b in zip(batched, single, strict=True)),
        "links_per_passage": sum(map(len, batched)) / len(texts),
    }


def machine(load_at_start: tuple[float, float, float]) -> dict[str, Any]:
    """Where the numbers come from; a load average above the core count means the
    benchmark shared the CPUs with other work, and its numbers are low."""
    import torch

    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average_at_start": load_at_start,
        "load_average_at_end": os.getloadavg(),
    }


def print_table(passages: int, results: dict[str, dict[str, Any]]) -> None:
    print(f"\nExtraction throughput, {passages} HotpotQA passages (passages/s)")
    header = f"{'extractor':<38}{'batched':>10}{'one by one':>12}{'speedup':>9}{'same':>7}"
    print(header)
    print("-" * len(header))
    for name, result in results.items():
        print(
            f"{name:<38}{result['batched']['passages_per_s']:>10.1f}"
            f"{result['one_at_a_time']['passages_per_s']:>12.1f}"
            f"{result['speedup']:>8.2f}x{result['identical_passages']:>7}"
        )


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    load_at_start = os.getloadavg()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    corpus = load_corpus()
    texts = list(corpus.values())[: 50 if args.quick else 200]
    rounds = 1 if args.quick else 2
    results: dict[str, dict[str, Any]] = {}
    results["keybert (MiniLM, 1-2 grams)"] = measure(KeybertLinkExtractor(), texts, rounds)
    with tempfile.TemporaryDirectory() as scratch:
        model = args.gliner_model or untrained_gliner(Path(scratch) / "gliner")
        label = "gliner (local)" if args.gliner_model else "gliner (untrained, MiniLM)"
        for batch_size in (8, 32):
            gliner = GlinerLinkExtractor(GLINER_LABELS, model=model, batch_size=batch_size)
            results[f"{label}, batch {batch_size}"] = measure(gliner, texts, rounds)
    mentions = MentionLinkExtractor(gazetteer(corpus))
    results["mentions (2,000 names)"] = measure(mentions, texts, rounds)
    print_table(len(texts), results)
    payload = {
        "benchmark": "extraction",
        "passages": len(texts),
        "quick": args.quick,
        "rounds": rounds,
        "gliner_model": str(args.gliner_model) if args.gliner_model else "untrained MiniLM",
        "gliner_labels": GLINER_LABELS,
        "note": (
            "untrained GLiNER head: throughput only, its entities are noise; "
            "seconds include no model loading (one warm-up call first); "
            "each mode's fastest of `rounds` alternating rounds"
        ),
        "results": results,
        "machine": machine(load_at_start),
    }
    folder = Path(os.environ.get(RESULTS_ENV) or BENCHMARKS / "results")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ("extraction-quick.json" if args.quick else "extraction.json")
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {path}")
    return payload


if __name__ == "__main__":
    main()
