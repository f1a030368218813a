"""The local node launcher's own behaviour that needs no JVM: wiping a test node's data."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from graphstore.testing.local_cassandra import (
    FAST_SCHEMA_OPTION,
    MAIN_CLASS,
    CassandraError,
    CassandraNode,
    main,
)

DATA_DIRS = ("data", "commitlog", "saved_caches", "hints")


def a_stopped_node(node_dir: Path) -> CassandraNode:
    """A node directory as a stopped node leaves it: config, data, commit log and logs."""
    node = CassandraNode(node_dir)
    for sub in DATA_DIRS:
        (node_dir / sub).mkdir(parents=True)
        (node_dir / sub / "file").write_text("x")
    (node_dir / "cassandra.yaml").write_text("cluster_name: t\n")
    node.system_log.write_text("old log\n")
    return node


def test_wipe_deletes_data_and_logs_and_keeps_the_directory(tmp_path: Path):
    node = a_stopped_node(tmp_path / "node")
    node.wipe()
    assert not any((node.node_dir / sub).exists() for sub in DATA_DIRS)
    assert not node.system_log.exists()
    assert (node.node_dir / "cassandra.yaml").exists()


def test_wipe_refuses_a_running_node_and_deletes_nothing(tmp_path: Path):
    node = a_stopped_node(tmp_path / "node")
    # A live process whose command line is that of this node's JVM is what `pid` checks.
    # Popen can return while the kernel is still exec'ing the child, before its command
    # line is in /proc (CI once found no node here), so the test waits until it runs.
    stand_in = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; print('up', flush=True); time.sleep(60)",
            MAIN_CLASS,
            f"-Dcassandra.storagedir={node.node_dir}",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert stand_in.stdout is not None
        assert stand_in.stdout.readline() == b"up\n"
        node.pid_file.write_text(f"{stand_in.pid}\n")
        cmdline = Path(f"/proc/{stand_in.pid}/cmdline").read_bytes()
        assert node.is_running(), f"/proc shows the stand-in as {cmdline!r}"
        with pytest.raises(CassandraError, match="stop it"):
            node.wipe()
    finally:
        stand_in.kill()
        stand_in.wait()
    assert all((node.node_dir / sub / "file").exists() for sub in DATA_DIRS)


def test_fresh_is_refused_for_a_cluster(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit):
        main(["start", "--nodes", "3", "--fresh"])
    assert "--fresh is for one node" in capsys.readouterr().err


def test_fast_schema_is_refused_for_a_cluster(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit):
        main(["start", "--nodes", "3", "--fast-schema"])
    assert "--fast-schema is for one node" in capsys.readouterr().err


def test_fast_schema_is_asked_for(tmp_path: Path):
    """A node skips flushing its schema only when asked: a killed one would lose tables."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "jamm-0.4.0.jar").touch()
    config = tmp_path / "cassandra.yaml"
    safe = CassandraNode(tmp_path / "a").command(Path("java"), lib, config)
    fast = CassandraNode(tmp_path / "b", fast_schema=True).command(Path("java"), lib, config)
    assert FAST_SCHEMA_OPTION not in safe
    assert FAST_SCHEMA_OPTION in fast


def test_a_single_node_takes_the_address_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """`--address` was a cluster's only: one node started on 127.0.0.1 whatever was asked,
    on the address and port another user's node may hold."""
    assert main(["status", "--dir", str(tmp_path), "--address", "127.0.0.2", "--port", "9"]) == 1
    assert "CQL on 127.0.0.2:9: not answering" in capsys.readouterr().out
    # Without --address, the one its config names (as a start on 127.0.0.2 writes it).
    CassandraNode(tmp_path, port=9, host="127.0.0.2").write_config(7000)
    assert main(["status", "--dir", str(tmp_path), "--port", "9"]) == 1
    assert "CQL on 127.0.0.2:9: not answering" in capsys.readouterr().out


def test_a_start_takes_the_address_asked_for_not_an_earlier_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """`status` and `stop` read the address from the node's config; `start` must not, or a
    folder once started on 127.0.0.2 would start there again under `make test`, whose tests
    connect to 127.0.0.1."""
    from graphstore.testing import local_cassandra

    CassandraNode(tmp_path, port=9, host="127.0.0.2").write_config(7000)
    started: list[str] = []
    monkeypatch.setattr(CassandraNode, "start", lambda node, timeout: started.append(node.host))
    monkeypatch.setattr(local_cassandra, "cassandra_version", lambda: "5.0")
    assert main(["start", "--dir", str(tmp_path), "--port", "9"]) == 0
    assert main(["start", "--dir", str(tmp_path), "--port", "9", "--address", "127.0.0.3"]) == 0
    assert started == ["127.0.0.1", "127.0.0.3"]
