"""What every benchmark shares: arguments, timing, statistics, tables, result files, backends.

Each idea has one implementation here, so the scripts hold only their own measurements.
Results go to `benchmarks/results/<name>[-cassandra][-quick].{json,png}` (or to
`$BENCH_RESULTS_DIR`, which the smoke test uses so it never overwrites published numbers).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import re
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from graphstore.embedded import EmbeddedStorage
from graphstore.storage import Storage

BENCHMARKS = Path(__file__).resolve().parent
CACHE = BENCHMARKS / "cache"
CASSANDRA_ENV = "GRAPHSTORE_TEST_CASSANDRA"
RESULTS_ENV = "BENCH_RESULTS_DIR"
BACKENDS = ("embedded", "cassandra")
ORDER_SEED = 0
"""Seeds the order of interleaved searches (`interleaved`): runs repeat it."""

T = TypeVar("T")


def argument_parser(
    description: str, backends: Sequence[str] = BACKENDS
) -> argparse.ArgumentParser:
    """The options every benchmark takes: `--quick`, and `--backend` when it measures more
    than one of `backends` (a benchmark of one backend offers no choice it would ignore; its
    `args.backend` still names the result files)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="small sizes, for smoke runs")
    if len(backends) > 1:
        parser.add_argument("--backend", choices=backends, default=backends[0])
    else:
        parser.set_defaults(backend=backends[0])
    return parser


def parse_args(
    description: str, argv: Sequence[str] | None = None, backends: Sequence[str] = BACKENDS
) -> argparse.Namespace:
    """The common options parsed (benchmarks with options of their own extend the parser)."""
    return argument_parser(description, backends).parse_args(argv)


class Stopwatch:
    """`with Stopwatch() as watch: ...` then `watch.seconds` (wall clock, perf_counter)."""

    seconds = 0.0

    def __enter__(self) -> Stopwatch:
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._start


def peak_rss(command: list[str]) -> dict[str, float]:
    """Run `command` in a child process; its wall seconds and peak RSS."""
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    with Stopwatch() as watch:
        child = subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"failed: {' '.join(command)}")
    return {"seconds": watch.seconds, "peak_rss_mib": usage.ru_maxrss / 1024}


def interleaved(searches: Sequence[T]) -> Iterator[list[T]]:
    """The order to run `searches` in, one per round (a question of a pass), without end:
    shuffled with a fixed seed, so that every search runs right after each of the others
    about equally often.  (In a fixed or rotating order every search but a round's first
    always follows the same one, and may gain or pay for it: the same query just asked,
    caches evicted.)"""
    shuffler = random.Random(ORDER_SEED)
    order = list(searches)
    while True:
        shuffler.shuffle(order)
        yield order


def median(samples: Sequence[float]) -> float:
    """The median, NaN for no samples (a skipped measurement stays visible)."""
    return float(statistics.median(samples)) if samples else float("nan")


def p95(samples: Sequence[float]) -> float:
    """The 95th percentile (linear interpolation), NaN for no samples."""
    return float(np.percentile(samples, 95)) if samples else float("nan")


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"  # not measured here (say, requests on a backend without a driver session)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _strict(value: Any) -> Any:
    """`value` with every NaN or infinite float as None: JSON has no NaN (Python writes a bare
    `NaN` that strict readers refuse)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _strict(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(item) for item in value]
    return value


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A plain fixed-width table on stdout (also pasted into README.md)."""
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [max(len(str(h)), *(len(row[i]) for row in cells)) for i, h in enumerate(headers)]
    print(f"\n{title}")
    print("| " + " | ".join(str(h).ljust(w) for h, w in zip(headers, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in cells:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")


def machine() -> dict[str, Any]:
    """CPU, cores, RAM and the load average: whether the numbers were taken on a busy host."""
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "unknown",
    )
    memory_kb = int(Path("/proc/meminfo").read_text().split()[1])
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gib": round(memory_kb / 2**20, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def result_path(name: str, backend: str, quick: bool, suffix: str) -> Path:
    """Where a benchmark's results go, one file per (benchmark, backend, size)."""
    folder = Path(os.environ.get(RESULTS_ENV) or BENCHMARKS / "results")
    folder.mkdir(parents=True, exist_ok=True)
    stem = name + ("" if backend == "embedded" else f"-{backend}") + ("-quick" if quick else "")
    return folder / f"{stem}{suffix}"


_NUMBER_LIST = re.compile(r"\[\n\s*(-?[\d.eE+-]+(?:,\n\s*-?[\d.eE+-]+)*)\n\s*\]")
"""A list of numbers as `json.dumps(indent=…)` lays it out, one number per line (raw newlines
occur only in that layout, never inside a JSON string)."""


def _compact_lists(text: str) -> str:
    """`text` with every list of numbers on one line: per-question scores and samples would
    otherwise take a line each."""
    return _NUMBER_LIST.sub(lambda match: "[" + re.sub(r",\n\s*", ", ", match[1]) + "]", text)


def write_json(name: str, args: argparse.Namespace, data: dict[str, Any]) -> Path:
    """Write results with the run's settings and the machine's state; return the path."""
    path = result_path(name, args.backend, args.quick, ".json")
    payload = {
        "benchmark": name,
        "backend": args.backend,
        "quick": args.quick,
        "machine": machine(),
        **data,
    }
    text = json.dumps(_strict(payload), indent=2, ensure_ascii=False, allow_nan=False)
    path.write_text(_compact_lists(text) + "\n")
    print(f"\nwrote {path}")
    return path


@contextlib.contextmanager
def figure(name: str, args: argparse.Namespace, panels: int = 1) -> Iterator[list[Any]]:
    """Matplotlib axes, one per panel side by side, saved as the benchmark's PNG on exit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 4.2), squeeze=False)
    try:
        yield list(axes[0])
        fig.tight_layout()
        path = result_path(name, args.backend, args.quick, ".png")
        fig.savefig(path, dpi=110)
        print(f"wrote {path}")
    finally:
        plt.close(fig)


def latency_bars(
    axes: Any, xs: Sequence[float], rows: Sequence[dict[str, Any]], width: float, label: str
) -> None:
    """One bar per result row: its median latency, with a whisker up to its p95."""
    medians = [row["median_ms"] for row in rows]
    spread = [row["p95_ms"] - row["median_ms"] for row in rows]
    axes.bar(xs, medians, width, yerr=[[0] * len(xs), spread], label=label, capsize=2)


@contextlib.contextmanager
def cassandra_contact() -> Iterator[tuple[str, int]]:
    """`$GRAPHSTORE_TEST_CASSANDRA` (host:port) if set, else a local node for this run only."""
    given = os.environ.get(CASSANDRA_ENV)
    if given:
        host, _, port = given.partition(":")
        if not host or not (port or "9042").isdigit():
            raise SystemExit(f"{CASSANDRA_ENV} must be host or host:port, got {given!r}")
        yield host, int(port or 9042)
        return
    from graphstore.testing.local_cassandra import free_port, running_cassandra

    print("starting a local Cassandra node (set GRAPHSTORE_TEST_CASSANDRA to reuse one)")
    with running_cassandra(port=free_port()) as node:
        yield node.host, node.port


@dataclass
class Backend:
    """One backend for one run: fresh SQLite files, or a fresh Cassandra keyspace.

    `table()` hands out a new table name (Cassandra) or file (embedded) on every call, so
    no two stores of a run share state.
    """

    name: str
    folder: Path
    session: Any = None
    keyspace: str = ""
    consistency: str | None = None
    """Cassandra: the level of writes and key reads (None: the store's default)."""
    _count: int = field(default=0, init=False)

    def table(self, label: str) -> str:
        """A fresh name for a store: `label` plus a counter."""
        self._count += 1
        return f"{label}_{self._count}"

    def sqlite_path(self, label: str) -> Path:
        """A fresh SQLite file in the run's temporary folder."""
        return self.folder / f"{self.table(label)}.db"

    def clear(self) -> None:
        """Drop every store of the run so far (the worst-case baseline writes gigabytes)."""
        if self.name == "embedded":
            for path in self.folder.iterdir():
                path.unlink()
            return
        tables = self.session.execute(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s",
            (self.keyspace,),
        )
        for (table,) in tables:
            self.session.execute(f'DROP TABLE "{self.keyspace}"."{table}"', timeout=120)

    def graph_storage(self, label: str) -> Storage:
        """A fresh, empty graphstore backend."""
        if self.name == "embedded":
            return EmbeddedStorage(self.sqlite_path(label))
        from graphstore.cassandra import CassandraStorage

        return CassandraStorage(
            self.session, self.keyspace, self.table(label), consistency=self.consistency
        )


@contextlib.contextmanager
def open_backend(name: str) -> Iterator[Backend]:
    """The backend named `name` for one run; Cassandra gets its own keyspace, dropped after."""
    if name == "embedded":
        with tempfile.TemporaryDirectory(prefix="graphstore-bench-") as folder:
            yield Backend(name, Path(folder))
        return
    with cassandra_contact() as (host, port), cassandra_backend([host], port) as backend:
        yield backend


@contextlib.contextmanager
def cassandra_backend(
    hosts: Sequence[str], port: int, replication_factor: int = 1, consistency: str | None = None
) -> Iterator[Backend]:
    """A fresh keyspace on the nodes at `hosts` for one run, dropped after."""
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable

    from graphstore.cassandra.session import said

    with tempfile.TemporaryDirectory(prefix="graphstore-bench-") as folder:
        cluster = Cluster(
            list(hosts),
            port=port,
            execution_profiles={EXEC_PROFILE_DEFAULT: ExecutionProfile(request_timeout=120)},
        )
        try:
            session = cluster.connect()
        except NoHostAvailable as error:  # a 35-line traceback ending in the driver's tuple
            raise SystemExit(f"cannot reach Cassandra on port {port}: {said(error)}") from None
        keyspace = f"bench_{uuid.uuid4().hex[:10]}"
        session.execute(
            f"CREATE KEYSPACE {keyspace} WITH replication = "
            f"{{'class': 'SimpleStrategy', 'replication_factor': {int(replication_factor)}}}",
            timeout=120,
        )
        try:
            yield Backend("cassandra", Path(folder), session, keyspace, consistency)
        finally:
            session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)
            cluster.shutdown()
