"""A local Cassandra cluster: N nodes on consecutive loopback addresses, for fault tests.

Node i (from 1) listens on the i-th address from ``first_address`` (127.0.0.2, .3, .4 by
default, so the single test node keeps 127.0.0.1), every node on the same CQL and storage
ports, each in ``cluster_dir/node<i>``; node 1 is the seed.  ``cluster.json`` in the
cluster directory records the layout, so later commands (stop, status, one node killed or
restarted) need only the directory.  Nodes start one at a time, each once the previous one
answers CQL: Cassandra lets one node join the ring at a time.

Command line: ``python -m graphstore.testing.local_cassandra start --nodes 3`` (see there).
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import re
import socket
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from graphstore.testing.local_cassandra import (
    CACHE_DIR,
    DEFAULT_PORT,
    START_TIMEOUT,
    STOP_GRACE,
    CassandraError,
    CassandraNode,
)

DEFAULT_CLUSTER_DIR = CACHE_DIR / "cluster"
DEFAULT_FIRST_ADDRESS = "127.0.0.2"
DEFAULT_STORAGE_PORT = 7000
CLUSTER_HEAP = "512M"
"""Per node: three nodes of a 2-core, 24 GB machine next to a 1 GB single node."""
LAYOUT_FILE = "cluster.json"
GOSSIP_STATE = re.compile(r"/[0-9.]+:\d+ (?:is now|has restarted, now) (UP|DOWN)")
RING_DELAY_MS = 5000
"""How long a joining node waits for ring changes to spread (Cassandra's default is 30 s,
sized for real networks; gossip between loopback addresses settles in milliseconds)."""


@dataclass(frozen=True)
class ClusterLayout:
    """What ``cluster.json`` records: enough to reach and restart every node."""

    nodes: int
    first_address: str = DEFAULT_FIRST_ADDRESS
    port: int = DEFAULT_PORT
    storage_port: int = DEFAULT_STORAGE_PORT
    heap: str = CLUSTER_HEAP
    hinted_handoff: bool = True
    """False: a replica that missed writes while down stays stale until read repair."""
    dynamic_snitch: bool = True
    """False: a read at ONE asks the first replica in ring order, whatever its latency."""

    @property
    def hosts(self) -> list[str]:
        """The nodes' addresses, node 1 first."""
        first = ipaddress.IPv4Address(self.first_address)
        return [str(first + i) for i in range(self.nodes)]


class CassandraCluster:
    """N local nodes forming one cluster (see the module docstring); nodes count from 1."""

    def __init__(self, cluster_dir: Path | str, layout: ClusterLayout) -> None:
        if layout.nodes < 1:
            raise CassandraError(f"a cluster needs at least one node, got {layout.nodes}")
        self.cluster_dir = Path(cluster_dir).expanduser().resolve()
        self.layout = layout
        seed = f"{layout.hosts[0]}:{layout.storage_port}"
        self.nodes = [
            CassandraNode(
                self.cluster_dir / f"node{i + 1}",
                port=layout.port,
                heap=layout.heap,
                host=host,
                storage_port=layout.storage_port,
                seeds=seed,
                cluster_name="graphstore-cluster",
                hinted_handoff=layout.hinted_handoff,
                dynamic_snitch=layout.dynamic_snitch,
                jvm_options=[f"-Dcassandra.ring_delay_ms={RING_DELAY_MS}"],
            )
            for i, host in enumerate(layout.hosts)
        ]

    @classmethod
    def open(cls, cluster_dir: Path | str) -> CassandraCluster:
        """The cluster whose layout ``cluster_dir/cluster.json`` records."""
        path = Path(cluster_dir).expanduser() / LAYOUT_FILE
        try:
            recorded = json.loads(path.read_text())
        except FileNotFoundError:
            raise CassandraError(f"no cluster in {path.parent}: {LAYOUT_FILE} is missing") from None
        return cls(cluster_dir, ClusterLayout(**recorded))

    @property
    def hosts(self) -> list[str]:
        return self.layout.hosts

    @property
    def port(self) -> int:
        return self.layout.port

    def node(self, index: int) -> CassandraNode:
        """Node ``index``, counting from 1 as the CLI and the logs do."""
        if not 1 <= index <= len(self.nodes):
            raise CassandraError(f"node must be 1 to {len(self.nodes)}, got {index}")
        return self.nodes[index - 1]

    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Start every node that is not running, the seed first, one after another."""
        self.cluster_dir.mkdir(parents=True, exist_ok=True)
        (self.cluster_dir / LAYOUT_FILE).write_text(json.dumps(asdict(self.layout)) + "\n")
        for node in self.nodes:
            if not node.is_running():
                node.start(timeout=timeout)

    def start_node(self, index: int, timeout: float = START_TIMEOUT) -> None:
        """Start one stopped node (it rejoins with its data: no bootstrap)."""
        self.node(index).start(timeout=timeout)

    def stop_node(self, index: int, grace: float = STOP_GRACE) -> None:
        """Stop one node: SIGTERM, or SIGKILL at once with ``grace=0`` (a crash)."""
        self.node(index).stop(grace=grace)

    def kill_node(self, index: int) -> None:
        """SIGKILL one node: no drain, no flush; its next start replays the commit log."""
        self.stop_node(index, grace=0)

    def stop(self, grace: float = STOP_GRACE) -> None:
        """Stop every node, the seed last."""
        for node in reversed(self.nodes):
            node.stop(grace=grace)

    def status(self) -> list[str]:
        """One line per node: address, pid, whether CQL answers."""
        lines = []
        for i, node in enumerate(self.nodes, start=1):
            pid, ready = node.pid, node.is_ready()
            answer = "answering" if ready else "not answering"
            lines.append(f"node {i}: pid {pid or 'none'}; CQL on {node.host}:{node.port}: {answer}")
        return lines

    def is_ready(self) -> bool:
        """True if every node runs and answers CQL."""
        return all(node.is_running() and node.is_ready() for node in self.nodes)

    def seen_as(self, index: int, state: str) -> bool:
        """True if every other running node's gossip last saw node ``index`` as ``state``
        (``UP`` or ``DOWN``), as their ``system.log`` says."""
        target = self.node(index)
        address = f"/{target.host}:{self.layout.storage_port} "
        for node in self.nodes:
            if node is target or not node.is_running():
                continue
            try:
                log = node.system_log.read_text(errors="replace")
            except FileNotFoundError:
                return False
            states = [m.group(1) for m in GOSSIP_STATE.finditer(log) if address in m.group(0)]
            if not states or states[-1] != state:
                return False
        return True

    def wait_until_seen_as(self, index: int, state: str, timeout: float = START_TIMEOUT) -> None:
        """Wait until the other nodes see node ``index`` as ``state``: a killed node is
        noticed only after 10-30 s, and until then requests still go to it."""
        deadline = time.monotonic() + timeout
        while not self.seen_as(index, state):
            if time.monotonic() > deadline:
                raise CassandraError(f"node {index} not seen {state} within {timeout:.0f}s")
            time.sleep(0.5)


def free_ports(hosts: list[str], count: int) -> list[int]:
    """``count`` distinct ports free on every one of ``hosts`` (for a cluster of a test)."""
    found: list[int] = []
    while len(found) < count:
        with socket.socket() as probe:
            probe.bind((hosts[0], 0))
            port = int(probe.getsockname()[1])
        if port not in found and all(_free(host, port) for host in hosts[1:]):
            found.append(port)
    return found


def _free(host: str, port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


@contextlib.contextmanager
def running_cluster(
    nodes: int = 3,
    cluster_dir: Path | str | None = None,
    *,
    first_address: str = DEFAULT_FIRST_ADDRESS,
    heap: str = CLUSTER_HEAP,
    hinted_handoff: bool = True,
    dynamic_snitch: bool = True,
    timeout: float = START_TIMEOUT,
) -> Iterator[CassandraCluster]:
    """A cluster on free ports for the duration of the block (in a temporary directory if
    ``cluster_dir`` is None), stopped afterwards."""
    with contextlib.ExitStack() as stack:
        if cluster_dir is None:
            cluster_dir = stack.enter_context(
                tempfile.TemporaryDirectory(prefix="graphstore-cluster-")
            )
        port, storage_port = free_ports(ClusterLayout(nodes, first_address).hosts, 2)
        layout = ClusterLayout(
            nodes, first_address, port, storage_port, heap, hinted_handoff, dynamic_snitch
        )
        cluster = CassandraCluster(cluster_dir, layout)
        stack.callback(cluster.stop)  # registered first: an interrupted start is cleaned up
        cluster.start(timeout=timeout)
        yield cluster


def cluster_command(args: argparse.Namespace) -> int:
    """One CLI action (``local_cassandra.main``) on the cluster, or on one node with ``--node``."""
    cluster_dir = Path(args.dir or DEFAULT_CLUSTER_DIR).expanduser()
    if (cluster_dir / LAYOUT_FILE).exists():
        cluster = CassandraCluster.open(cluster_dir)
        if args.nodes > 1 and args.nodes != cluster.layout.nodes:
            raise CassandraError(f"the cluster in {cluster_dir} has {cluster.layout.nodes} nodes")
    elif args.action == "start" and args.node is None:
        layout = ClusterLayout(
            args.nodes,
            args.address or DEFAULT_FIRST_ADDRESS,
            args.port,
            heap=args.heap or CLUSTER_HEAP,
        )
        cluster = CassandraCluster(cluster_dir, layout)
    else:
        raise CassandraError(f"no cluster in {cluster_dir}: start one with --nodes N")
    began = time.monotonic()
    if args.action == "status":
        print("\n".join(cluster.status()))
        return 0 if cluster.is_ready() else 1
    if args.node is not None:
        index = args.node
        {"start": cluster.start_node, "stop": cluster.stop_node, "kill": cluster.kill_node}[
            args.action
        ](index)
    elif args.action == "start":
        cluster.start(timeout=args.timeout)
    else:
        cluster.stop(grace=0 if args.action == "kill" else STOP_GRACE)
    print("\n".join(cluster.status()) + f"\n({args.action}: {time.monotonic() - began:.1f}s)")
    return 0
