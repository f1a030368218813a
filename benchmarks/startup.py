"""What a command line search and prompt cost a fresh process, and where the time goes.

Every `graphstore search` and `prompt` is a new Python process: it imports graphstore, loads
the model, embeds the question and searches.  Each step is timed in a fresh process of its
own (an empty interpreter, the import of the command line, the import and the model with
one query, then the whole `search` and `prompt` commands on a store of the README's demo
pages), the steps alternating each round; medians over the rounds.

    python -m benchmarks.startup [--quick]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import Stopwatch, argument_parser, figure, median, print_table, write_json

PAGES = Path(__file__).resolve().parent.parent / "samples" / "python-tutorial" / "pages"
QUICK_PAGES = ("errors.html",)
QUESTION = "how do I clean up resources when an exception happens"
COMMAND = [sys.executable, "-m", "graphstore.cli"]


def steps(store: Path) -> dict[str, list[str]]:
    """Each step's command, cheapest first: each adds to what the one before does."""
    return {
        "python, nothing imported": [sys.executable, "-c", "pass"],
        "import the command line": [sys.executable, "-c", "import graphstore.cli"],
        "and load the model, embed one query": [
            sys.executable,
            "-c",
            "import graphstore.cli\n"
            "from graphstore.models import load_model\n"
            f"load_model('minilm').embed_query({QUESTION!r})\n",
        ],
        "graphstore search": [*COMMAND, "--store", str(store), "search", QUESTION],
        "graphstore prompt": [*COMMAND, "--store", str(store), "prompt", QUESTION],
    }


def run(command: list[str]) -> None:
    """Run `command` to its end, offline as the command line runs (no model hub)."""
    offline = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    subprocess.run(command, check=True, capture_output=True, env=offline)


def timed(command: list[str]) -> float:
    """Seconds for `command` to run to its end in a new process."""
    with Stopwatch() as watch:
        run(command)
    return watch.seconds


def ingest(store: Path, quick: bool) -> None:
    """The demo pages (one page with `--quick`) in a new store, with the default links."""
    pages = [str(PAGES / name) for name in QUICK_PAGES] if quick else [str(PAGES)]
    run([*COMMAND, "--store", str(store), "ingest", *pages, "--root", str(PAGES)])


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = argument_parser(__doc__.splitlines()[0], ("embedded",)).parse_args(argv)
    rounds = 2 if args.quick else 7
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "demo.db"
        ingest(store, args.quick)
        commands = steps(store)
        seconds: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(rounds):
            for name, command in commands.items():
                seconds[name].append(timed(command))
    medians = {name: median(samples) for name, samples in seconds.items()}
    print_table(
        f"A fresh process, {rounds} rounds alternating (median seconds)",
        ["step", "seconds"],
        [[name, value] for name, value in medians.items()],
    )
    with figure("startup", args) as (axes,):
        axes.barh(list(medians), list(medians.values()))
        axes.set_xlabel("fresh process (s, median)")
        axes.invert_yaxis()
    write_json("startup", args, {"rounds": rounds, "seconds": seconds, "median_s": medians})
    return {"seconds": seconds, "median_s": medians}


if __name__ == "__main__":
    main()
