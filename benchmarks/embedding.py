"""The default model (all-MiniLM-L6-v2) run in NumPy against sentence-transformers: what one
query costs a fresh process (every `graphstore search` and `prompt` is one), passages per
second in bulk (an ingest), and how far apart their vectors are; and NumPy's bulk rate by
the thread count of its matrix products, on an idle machine and with one core kept busy.

Cold starts run each engine in a new Python process that imports it, loads the model and
embeds one question, alternating engines each round.  Bulk embeds the first 200 HotpotQA
passages (`QUICK_PASSAGES` with `--quick`) in one process, after a warm-up call, engines
alternating each round.  Threads: the same passages on every core, on one, and as the model
chooses batch by batch (`graphstore.blas_threads`, the default), settings alternating each
round, idle and then beside a process spinning on one core.

    python -m benchmarks.embedding [--quick]
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from benchmarks.common import Stopwatch, argument_parser, figure, median, print_table, write_json
from benchmarks.extraction import load_corpus
from graphstore.bert import BertEncoder
from graphstore.blas_threads import BlasThreads, ThreadChoice
from graphstore.models import minilm_dir, offline_quietly

QUICK_PASSAGES = 20
QUESTION = "Which river runs through the city where the Eiffel Tower stands?"
COLD = {
    "numpy (graphstore.bert)": (
        "from graphstore.models import load_model\n"
        f"load_model('minilm').embed_query({QUESTION!r})\n"
    ),
    "sentence-transformers": (
        "from graphstore.models import SentenceTransformerModel, minilm_dir\n"
        f"SentenceTransformerModel(minilm_dir()).embed_query({QUESTION!r})\n"
    ),
}
"""What each engine's fresh process runs: the import, the model load and one query."""


def cold_start(code: str) -> float:
    """Seconds for a new interpreter to run `code` (offline, as the CLI runs)."""
    prelude = "from graphstore.models import offline_quietly\noffline_quietly()\n"
    with Stopwatch() as watch:
        subprocess.run([sys.executable, "-c", prelude + code], check=True, capture_output=True)
    return watch.seconds


def bulk_engines() -> dict[str, Callable[[list[str]], np.ndarray]]:
    """Each engine's batch call, model loaded."""
    offline_quietly()
    from sentence_transformers import SentenceTransformer

    numpy_model = BertEncoder(minilm_dir())
    torch_model = SentenceTransformer(str(minilm_dir()), device="cpu")
    return {
        "numpy (graphstore.bert)": numpy_model.encode,
        "sentence-transformers": lambda texts: torch_model.encode(
            texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False
        ),
    }


def thread_settings(model: BertEncoder) -> dict[str, Callable[[], None]]:
    """What each thread setting does to the model before a run: a fresh choice each time,
    so the measured one starts as an ingest's does."""
    most = BlasThreads().choice.counts[0]

    def fixed(count: int) -> Callable[[], None]:
        def apply() -> None:
            model.threads = BlasThreads()
            model.threads.choice = ThreadChoice([count])

        return apply

    def chosen() -> None:
        model.threads = BlasThreads()

    return {f"{most} threads": fixed(most), "1 thread": fixed(1), "chosen (default)": chosen}


def thread_rates(passages: list[str], rounds: int) -> dict[str, dict[str, list[float]]]:
    """Passages per second of each thread setting (`thread_settings`), idle and busy."""
    model = BertEncoder(minilm_dir())
    model.encode(passages[:2])
    settings = thread_settings(model)
    rates: dict[str, dict[str, list[float]]] = {}
    for load in ("idle", "one core busy"):
        spinner = None
        if load != "idle":
            spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            rates[load] = {name: [] for name in settings}
            for _ in range(rounds):
                for name, apply in settings.items():
                    apply()
                    with Stopwatch() as watch:
                        model.encode(passages)
                    rates[load][name].append(len(passages) / watch.seconds)
        finally:
            if spinner is not None:
                spinner.kill()
                spinner.wait()
    return rates


def plot(args: Any, cold: dict[str, list[float]], bulk: dict[str, float]) -> None:
    """Cold start (s) and bulk passages per second, one bar per engine."""
    with figure("embedding", args, panels=2) as (left, right):
        names = list(cold)
        left.barh(names, [median(cold[name]) for name in names])
        left.set_xlabel("fresh process, one query (s, median)")
        right.barh(names, [bulk[name] for name in names])
        right.set_xlabel("bulk passages per second (median)")
        for axes in (left, right):
            axes.invert_yaxis()


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = argument_parser(__doc__.splitlines()[0], ("embedded",)).parse_args(argv)
    rounds = 1 if args.quick else 5
    cold: dict[str, list[float]] = {name: [] for name in COLD}
    for _ in range(rounds):
        for name, code in COLD.items():
            cold[name].append(cold_start(code))
    passages = ["".join(sentences) for sentences in load_corpus().values()]
    passages = passages[: QUICK_PASSAGES if args.quick else 200]
    engines = bulk_engines()
    seconds: dict[str, list[float]] = {name: [] for name in engines}
    vectors: dict[str, np.ndarray] = {}
    for embed in engines.values():
        embed(passages[:2])
    for _ in range(rounds):
        for name, embed in engines.items():
            with Stopwatch() as watch:
                vectors[name] = np.asarray(embed(passages))
            seconds[name].append(watch.seconds)
    per_second = {name: len(passages) / median(samples) for name, samples in seconds.items()}
    difference = float(np.abs(np.subtract(*vectors.values())).max())
    print_table(
        f"The default model: NumPy against sentence-transformers ({len(passages)} passages)",
        ["engine", "fresh process, one query (s)", "bulk passages/s"],
        [[name, median(cold[name]), per_second[name]] for name in engines],
    )
    print(f"largest difference between their vectors: {difference:.2e}")
    threads = thread_rates(passages, rounds)
    print_table(
        "NumPy passages/s by thread count (median)",
        ["threads", *threads],
        [[name, *(median(rates[name]) for rates in threads.values())] for name in threads["idle"]],
    )
    plot(args, cold, per_second)
    write_json(
        "embedding",
        args,
        {
            "rounds": rounds,
            "passages": len(passages),
            "cold_start_s": cold,
            "bulk_s": seconds,
            "bulk_passages_per_s": per_second,
            "max_abs_difference": difference,
            "thread_passages_per_s": threads,
        },
    )
    return {"cold_start_s": cold, "bulk_passages_per_s": per_second, "threads": threads}


if __name__ == "__main__":
    main()
