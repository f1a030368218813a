"""Peak memory of a CLI ingest as the folder grows: streaming in batches keeps it flat.

Folders of one text file per passage (HotpotQA and 2Wiki passages, repeated under new file
names to reach the larger sizes) are ingested by `graphstore ingest` with mention links
(the corpus titles as the names file) into a fresh embedded store, each in its own
process.  The child's peak resident set size comes from `os.wait4`; the ingest embeds with
the offline all-MiniLM-L6-v2, so the time is mostly embedding.  A second child reads the
same folder in the same batches and only embeds them: the model's own memory, so the
difference is what linking and storing add.

    python -m benchmarks.ingest_memory [--quick]

The embedded backend only: with `--backend cassandra` the store's memory is the node's.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import data
from benchmarks.common import figure, parse_args, peak_rss, print_table, write_json

NAME = "ingest_memory"
FULL = (1_000, 3_000, 8_000)
QUICK = (100, 200)
EMBED_ONLY = """
import sys
from pathlib import Path
from graphstore.models import load_model
from graphstore.ingest import BATCH_SIZE, batches, discover, read_all
from graphstore.splitting import MAX_CHARS
model = load_model("minilm")
for batch in batches(read_all(discover([Path(sys.argv[1])]).files, MAX_CHARS), BATCH_SIZE):
    model.embed_documents([passage.text for passage in batch])
"""
"""The ingest's reading, batching and embedding, with its defaults, without links or a
store."""


def write_folder(folder: Path, passages: Sequence[data.Passage], size: int) -> None:
    """`size` files of one passage each, cycling through `passages`."""
    folder.mkdir(parents=True)
    for i in range(size):
        (folder / f"{i:06d}.txt").write_text(passages[i % len(passages)].text, encoding="utf-8")


def ingest(folder: Path, names: Path, store: Path) -> dict[str, float]:
    """`graphstore ingest` of `folder` with mention links into a fresh embedded store."""
    return peak_rss(
        [
            sys.executable,
            "-m",
            "graphstore.cli",
            "--store",
            str(store),
            "ingest",
            str(folder),
            "--links",
            "mentions",
            "--names",
            str(names),
        ]
    )


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(__doc__.splitlines()[0], argv, ("embedded",))
    passages = data.hotpot_passages() + data.wiki_passages()
    sizes = QUICK if args.quick else FULL
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        names = root / "names.txt"
        names.write_text("\n".join(sorted({p.title for p in passages})), encoding="utf-8")
        for size in sizes:
            folder = root / f"folder-{size}"
            write_folder(folder, passages, size)
            measured = ingest(folder, names, root / f"store-{size}.db")
            embedding = peak_rss([sys.executable, "-c", EMBED_ONLY, str(folder)])
            rows.append(
                {
                    "passages": size,
                    **measured,
                    "passages_per_s": size / measured["seconds"],
                    "embed_only_peak_rss_mib": embedding["peak_rss_mib"],
                    "added_by_links_and_store_mib": measured["peak_rss_mib"]
                    - embedding["peak_rss_mib"],
                }
            )
    print_table(
        "CLI ingest of a folder (embedded store, mention links, MiniLM): peak RSS",
        ["passages", "seconds", "passages/s", "ingest MiB", "embedding only MiB", "difference"],
        [
            [
                r["passages"],
                r["seconds"],
                r["passages_per_s"],
                r["peak_rss_mib"],
                r["embed_only_peak_rss_mib"],
                r["added_by_links_and_store_mib"],
            ]
            for r in rows
        ],
    )
    growth = rows[-1]["peak_rss_mib"] / rows[0]["peak_rss_mib"]
    print(f"peak RSS at {rows[-1]['passages']} / at {rows[0]['passages']} passages: {growth:.2f}")
    write_json(NAME, args, {"names": "corpus titles", "runs": rows, "rss_growth": growth})
    with figure(NAME, args) as (axes,):
        counts = [r["passages"] for r in rows]
        axes.plot(counts, [r["peak_rss_mib"] for r in rows], marker="o", label="ingest")
        axes.plot(
            counts,
            [r["embed_only_peak_rss_mib"] for r in rows],
            marker="o",
            label="embedding only",
        )
        axes.legend()
        axes.set(
            title="graphstore ingest: peak memory",
            xlabel="passages in the folder",
            ylabel="peak RSS (MiB)",
            ylim=(0, None),
        )
    return {"runs": rows, "rss_growth": growth}


if __name__ == "__main__":
    main()
