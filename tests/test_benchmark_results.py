"""What the benchmarks write and accept: strict JSON, and only the options they use."""

from __future__ import annotations

import argparse
import json

import pytest

from benchmarks import embedding, extraction, startup
from benchmarks.common import RESULTS_ENV, print_table, write_json


def test_results_are_strict_json_with_unmeasured_values_as_null(tmp_path, monkeypatch, capsys):
    """traversal_time wrote `NaN` for the requests of the embedded backend, which it cannot
    count: Python reads that back, strict JSON readers (jq, browsers) refuse the file."""
    monkeypatch.setenv(RESULTS_ENV, str(tmp_path))
    args = argparse.Namespace(backend="embedded", quick=True)
    path = write_json("example", args, {"requests_median": float("nan"), "p95": [1.0, None]})

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in {path.name}")

    written = json.loads(path.read_text(), parse_constant=refuse)
    assert written["requests_median"] is None
    assert written["p95"] == [1.0, None]

    print_table("t", ["requests"], [[float("nan")], [None], [2.0]])
    assert capsys.readouterr().out.split("\n")[-4:-1] == [
        "| -        |",
        "| -        |",
        "| 2        |",
    ]


@pytest.mark.parametrize("module", [startup, embedding, extraction])
def test_a_benchmark_of_one_backend_offers_no_backend_choice(module, capsys):
    """`--backend cassandra` was accepted by startup, extraction and embedding, which
    measure no store, and named their result files `-cassandra`."""
    with pytest.raises(SystemExit) as stopped:
        module.main(["--backend", "cassandra"])
    assert stopped.value.code == 2
    assert "unrecognized arguments: --backend cassandra" in capsys.readouterr().err
