"""Launch real Apache Cassandra 5.0 nodes (one, or a local cluster) for tests, CI and benchmarks.

Cassandra is not installed system-wide: the first start resolves ``cassandra-all``
and its runtime jars from Maven Central with ``mvn`` (see ``cassandra/pom.xml``,
which pins the version) into ``~/.cache/graphstore/cassandra-<version>/lib``;
later starts reuse them without running Maven. The cache root can be moved with
``GRAPHSTORE_CACHE_DIR``.

A node lives in one directory holding its ``cassandra.yaml``, data, commit log,
``system.log``, ``stdout.log`` (JVM stdout/stderr) and ``cassandra.pid``. Stopping
and starting the same directory keeps the data. The CLI defaults to
``~/.cache/graphstore/node``; :func:`running_cassandra` defaults to a fresh
temporary directory that it deletes afterwards.

Library use::

    with running_cassandra(port=9042) as node:
        cluster = Cluster([node.host], port=node.port)

Command line (``start`` returns once CQL answers and leaves the node running)::

    python -m graphstore.testing.local_cassandra start|stop|kill|status [--dir D] [--port 9042]
    python -m graphstore.testing.local_cassandra start --fresh   # delete the data first

A cluster of N nodes on 127.0.0.2, .3, ... (``graphstore.testing.local_cluster``), and one
of its nodes stopped, killed (SIGKILL) or started again::

    python -m graphstore.testing.local_cassandra start|stop|kill|status --nodes 3 [--node I]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from pathlib import Path

HOST = "127.0.0.1"
DEFAULT_PORT = 9042
DEFAULT_HEAP = "1G"
START_TIMEOUT = 180.0
STOP_GRACE = 60.0

RESOURCES = Path(__file__).resolve().parent / "cassandra"
POM = RESOURCES / "pom.xml"
LOGBACK = RESOURCES / "logback.xml"
CACHE_DIR = Path(os.environ.get("GRAPHSTORE_CACHE_DIR", "~/.cache/graphstore")).expanduser()
DEFAULT_NODE_DIR = CACHE_DIR / "node"
NODE_SUBDIRS = ("data", "commitlog", "saved_caches", "hints", "cdc_raw", "triggers")
"""What a node keeps under its directory besides its config and logs."""

SUPPORTED_JAVA = (11, 17)
MAIN_CLASS = "org.apache.cassandra.service.CassandraDaemon"

# Flags of Cassandra 5.0's conf/jvm-server.options and conf/jvm17-server.options, less
# those for production hosts (-XX:+AlwaysPreTouch, heap dumps, NUMA).
JVM_OPTIONS = [
    "-ea",
    "-da:net.openhft...",
    "-Xss256k",
    "-XX:+UseThreadPriorities",
    "-XX:+PerfDisableSharedMem",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.net.preferIPv4Stack=true",
    "-XX:+UseG1GC",
    "-XX:+ParallelRefProcEnabled",
    "-XX:MaxTenuringThreshold=1",
    "-XX:G1HeapRegionSize=16m",
    "-XX:G1RSetUpdatingPauseTimePercent=5",
    "-XX:MaxGCPauseMillis=300",
    "-XX:InitiatingHeapOccupancyPercent=70",
    "-Djdk.attach.allowAttachSelf=true",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dio.netty.allocator.useCacheForAllThreads=true",
    "-Dio.netty.allocator.maxOrder=11",
    "-Dcassandra-foreground=yes",
    "-Dcassandra.skip_wait_for_gossip_to_settle=0",
]
FAST_SCHEMA_OPTION = "-Dcassandra.unsafesystem=true"
"""Schema changes skip flushing the system tables (`CassandraNode(fast_schema=True)`, the
`--fast-schema` of `start`): creating and dropping a store's tables is most of a Cassandra
test's time, and the LangChain tests on Cassandra took 98 s with it against 148 s without.
A killed node loses the tables created since its last flush (a killed cluster node came back
with an older schema than its peers), so it is for a throwaway node no test kills: the one
`make test` starts, never a cluster's."""
ADD_EXPORTS = [
    "java.base/jdk.internal.misc",
    "java.management.rmi/com.sun.jmx.remote.internal.rmi",
    "java.rmi/sun.rmi.registry",
    "java.rmi/sun.rmi.server",
    "java.sql/java.sql",
    "java.base/java.lang.ref",
    "jdk.unsupported/sun.misc",
    "jdk.compiler/com.sun.tools.javac.file",
    "jdk.attach/sun.tools.attach",
]
ADD_OPENS = [
    "java.base/java.lang.module",
    "java.base/jdk.internal.loader",
    "java.base/jdk.internal.ref",
    "java.base/jdk.internal.reflect",
    "java.base/jdk.internal.math",
    "java.base/jdk.internal.module",
    "java.base/jdk.internal.util.jar",
    "jdk.management/com.sun.management.internal",
    "java.base/sun.nio.ch",
    "java.base/java.io",
    "java.base/java.lang.reflect",
    "jdk.compiler/com.sun.tools.javac",
    "java.base/java.lang",
    "java.base/java.util",
    "java.base/java.nio",
]
JPMS_OPTIONS = [f"--add-exports={p}=ALL-UNNAMED" for p in ADD_EXPORTS] + [
    f"--add-opens={p}=ALL-UNNAMED" for p in ADD_OPENS
]

CASSANDRA_YAML = """\
# Written by graphstore.testing.local_cassandra on every start; edits are lost.
cluster_name: {cluster_name}
num_tokens: 16
allocate_tokens_for_local_replication_factor: 3
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
dynamic_snitch: {dynamic_snitch}
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "{seeds}"
listen_address: {host}
rpc_address: {host}
storage_port: {storage_port}
native_transport_port: {port}
start_native_transport: true
authenticator: {authenticator}
authorizer: {authorizer}
# Grants and roles apply at once (the default caches them for seconds).
roles_validity: 0ms
permissions_validity: 0ms
credentials_validity: 0ms
# A fresh node has no 4.x sstables to stay readable by: use the 5.0 formats.
storage_compatibility_mode: NONE
default_secondary_index: sai
default_secondary_index_enabled: true
auto_snapshot: false
data_file_directories:
  - {node_dir}/data
commitlog_directory: {node_dir}/commitlog
saved_caches_directory: {node_dir}/saved_caches
hints_directory: {node_dir}/hints
cdc_raw_directory: {node_dir}/cdc_raw
commitlog_sync: periodic
commitlog_sync_period: 10000ms
hinted_handoff_enabled: {hinted_handoff}
# An eighth of the heap each (128 MiB for 1 GB), for a small heap on a small machine.
memtable_heap_space: {buffer_mib}MiB
key_cache_size: 16MiB
concurrent_compactors: 1
# jvector (SAI vector indexes) in Cassandra 5.0.9 lets at most availableProcessors + 1
# threads write one memtable vector index at once; more concurrent writes fail with
# "Number of outstanding pooled objects has gone beyond the limit of N", and so does
# commit log replay after a crash (CASSANDRA-21644, fixed after 5.0.9). The JVM's
# processor count is pinned (-XX:ActiveProcessorCount) so this bound holds exactly.
concurrent_writes: {concurrent_writes}
# graphstore writes each node as one logged batch carrying a tag row (with the embedding)
# per incoming tag: 20 tags of 1536-d vectors are ~120 KiB, over the 50 KiB default.
batch_size_fail_threshold: 1024KiB
sai_options:
  segment_write_buffer_size: {buffer_mib}MiB
"""


class CassandraError(RuntimeError):
    """Cassandra could not be provisioned, started or stopped."""


def cassandra_version() -> str:
    """The Cassandra version pinned in ``cassandra/pom.xml``."""
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    version = ET.parse(POM).getroot().findtext("m:properties/m:cassandra.version", namespaces=ns)
    if not version:
        raise CassandraError(f"{POM} has no <cassandra.version> property")
    return version


def ensure_jars(java: Path | None = None) -> Path:
    """Return the directory holding Cassandra's jars, downloading them with Maven once."""
    version = cassandra_version()
    lib = CACHE_DIR / f"cassandra-{version}" / "lib"
    marker = lib.parent / "complete"
    if marker.exists():
        return lib
    lib.parent.mkdir(parents=True, exist_ok=True)
    with open(lib.parent / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be resolving right now
        if marker.exists():
            return lib
        mvn = shutil.which("mvn")
        if mvn is None:
            raise CassandraError(
                "Maven (mvn) is needed once to download Cassandra's jars from Maven Central "
                "(e.g. `apt-get install maven`)"
            )
        shutil.rmtree(lib, ignore_errors=True)
        env = dict(os.environ, JAVA_HOME=str(_java_home(java or find_java())))
        result = subprocess.run(
            [
                mvn,
                "-q",
                "-B",
                "-Dstyle.color=never",
                "-f",
                str(POM),
                f"-Dmaven.repo.local={CACHE_DIR / 'm2'}",
                f"-Dcassandra.lib.dir={lib}",
                "dependency:copy-dependencies",
            ],
            env=env,
            check=False,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            output = (result.stdout + result.stderr).strip().splitlines()
            raise CassandraError(
                f"mvn failed to fetch cassandra-all {version} (exit {result.returncode}):\n"
                + "\n".join(output[-40:])
            )
        marker.write_text(version + "\n")
    return lib


def java_major_version(java: Path) -> int:
    """Major version of a ``java`` executable (8 for 1.8, 17 for 17.0.x)."""
    version = subprocess.run([str(java), "-version"], check=False, capture_output=True, text=True)
    out = version.stderr
    match = re.search(r'version "(?:1\.)?(\d+)', out)
    if match is None:
        raise CassandraError(f"cannot tell the version of {java}: {out.strip()}")
    return int(match.group(1))


def find_java() -> Path:
    """Find a Java that Cassandra 5.0 runs on: ``$JAVA17_HOME``, /usr/lib/jvm/*17*, or PATH."""
    if "JAVA17_HOME" in os.environ:
        candidates = [Path(os.environ["JAVA17_HOME"]) / "bin" / "java"]
    else:
        candidates = sorted(Path("/usr/lib/jvm").glob("*17*/bin/java"))
        on_path = shutil.which("java")
        if on_path:
            candidates.append(Path(on_path))
    for java in candidates:
        if java.exists() and java_major_version(java) in SUPPORTED_JAVA:
            return java
    found = ", ".join(f"{j} (Java {java_major_version(j)})" for j in candidates if j.exists())
    raise CassandraError(
        "Cassandra 5.0 needs Java 11 or 17; found "
        + (found or "no java")
        + ". Install openjdk-17-jdk-headless or point JAVA17_HOME at a Java 17 home."
    )


def _java_home(java: Path) -> Path:
    return java.resolve().parent.parent


def _processors() -> int:
    """CPUs this process may run on; the JVM is told to see exactly this many."""
    return len(os.sched_getaffinity(0))


def free_port() -> int:
    """A TCP port free on the loopback address now (for a node's CQL, gossip or JMX)."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def _port_in_use(port: int, host: str = HOST) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def _mebibytes(size: str) -> int:
    """A JVM size (``512M``, ``1G``) in MiB."""
    match = re.fullmatch(r"(\d+)([mMgG])", size)
    if match is None:
        raise CassandraError(f"heap must look like 512M or 1G, got {size!r}")
    return int(match.group(1)) * (1024 if match.group(2) in "gG" else 1)


def ensure_loopback_address(address: str) -> None:
    """Make sure a loopback address can be bound, adding it to ``lo`` only when missing.

    Linux routes all of 127.0.0.0/8 to ``lo``, so 127.0.0.2 usually binds as it is; where
    it does not (a host with only 127.0.0.1/32, macOS), ``ip addr add`` needs root.
    """
    if _bindable(address):
        return
    ip = shutil.which("ip")
    command = ["ip", "addr", "add", f"{address}/32", "dev", "lo"]
    if ip is not None and os.geteuid() == 0:
        subprocess.run([ip, *command[1:]], check=False, capture_output=True)
        if _bindable(address):
            return
    raise CassandraError(f"cannot bind {address}; add it to the loopback: {' '.join(command)}")


def _bindable(address: str) -> bool:
    with socket.socket() as s:
        try:
            s.bind((address, 0))
        except OSError:
            return False
    return True


def cql_ready(port: int = DEFAULT_PORT, host: str = HOST, timeout: float = 2.0) -> bool:
    """True if a CQL server answers a native-protocol v4 OPTIONS request with SUPPORTED."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(bytes([0x04, 0, 0, 0, 0x05, 0, 0, 0, 0]))  # v4 request, stream 0, OPTIONS
            header = b""
            while len(header) < 9:
                chunk = s.recv(9 - len(header))
                if not chunk:
                    return False
                header += chunk
    except OSError:
        return False
    return header[0] == 0x84 and header[4] == 0x06  # v4 response, SUPPORTED


def _tail(path: Path, lines: int = 40, width: int = 300) -> str:
    """The last ``lines`` lines of a log, each cut to ``width`` characters."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return f"--- {path}: missing"
    last = (line if len(line) <= width else line[:width] + " [...]" for line in text[-lines:])
    return f"--- last {lines} lines of {path}:\n" + "\n".join(last)


def _alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


class CassandraNode:
    """One Cassandra node living in ``node_dir``, serving CQL on ``host:port``.

    Alone (``seeds`` None) it is a single-node cluster gossiping on a free port; as part of
    a :class:`~graphstore.testing.local_cluster.CassandraCluster` it gets a fixed
    ``storage_port`` and the seed's address.
    """

    def __init__(
        self,
        node_dir: Path | str = DEFAULT_NODE_DIR,
        port: int = DEFAULT_PORT,
        heap: str = DEFAULT_HEAP,
        authenticator: str = "AllowAllAuthenticator",
        *,
        authorizer: str = "AllowAllAuthorizer",
        host: str = HOST,
        storage_port: int | None = None,
        seeds: str | None = None,
        cluster_name: str = "graphstore-test",
        hinted_handoff: bool = True,
        dynamic_snitch: bool = True,
        jvm_options: Sequence[str] = (),
        fast_schema: bool = False,
    ) -> None:
        self.node_dir = Path(node_dir).expanduser().resolve()
        self.host = host
        self.port = port
        self.heap = heap
        self.authenticator = authenticator
        self.authorizer = authorizer
        self.storage_port = storage_port
        self.seeds = seeds
        self.cluster_name = cluster_name
        self.hinted_handoff = hinted_handoff
        self.dynamic_snitch = dynamic_snitch
        self.jvm_options = [*jvm_options, *([FAST_SCHEMA_OPTION] if fast_schema else [])]
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid_file(self) -> Path:
        return self.node_dir / "cassandra.pid"

    @property
    def system_log(self) -> Path:
        return self.node_dir / "system.log"

    @property
    def stdout_log(self) -> Path:
        return self.node_dir / "stdout.log"

    @property
    def pid(self) -> int | None:
        """PID of this node's JVM if it is running, checked against /proc."""
        try:
            pid = int(self.pid_file.read_text())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (FileNotFoundError, ValueError):
            return None
        ours = (
            MAIN_CLASS.encode() in cmdline
            and f"-Dcassandra.storagedir={self.node_dir}".encode() in cmdline
        )
        return pid if ours and _alive(pid) else None

    def is_running(self) -> bool:
        """True if the JVM is alive (it may still be starting)."""
        return self.pid is not None

    def is_ready(self) -> bool:
        """True if CQL answers on this node's port."""
        return cql_ready(self.port, self.host)

    def write_config(self, storage_port: int) -> Path:
        """Write ``cassandra.yaml`` into the node directory and return its path."""
        heap_mib = _mebibytes(self.heap)
        for sub in NODE_SUBDIRS:
            (self.node_dir / sub).mkdir(parents=True, exist_ok=True)
        path = self.node_dir / "cassandra.yaml"
        path.write_text(
            CASSANDRA_YAML.format(
                host=self.host,
                port=self.port,
                storage_port=storage_port,
                seeds=self.seeds or f"{self.host}:{storage_port}",
                cluster_name=self.cluster_name,
                hinted_handoff=str(self.hinted_handoff).lower(),
                dynamic_snitch=str(self.dynamic_snitch).lower(),
                buffer_mib=max(32, heap_mib // 8),
                node_dir=self.node_dir,
                authenticator=self.authenticator,
                authorizer=self.authorizer,
                concurrent_writes=_processors() + 1,
            )
        )
        return path

    def command(self, java: Path, lib: Path, config: Path) -> list[str]:
        """The JVM command line that runs CassandraDaemon for this node."""
        jamm = next(lib.glob("jamm-*.jar"), None)
        if jamm is None:
            raise CassandraError(f"no jamm jar in {lib}; delete {lib.parent} and retry")
        return [
            str(java),
            f"-Xms{self.heap}",
            f"-Xmx{self.heap}",
            f"-XX:ActiveProcessorCount={_processors()}",  # see concurrent_writes in the yaml
            *JVM_OPTIONS,
            *self.jvm_options,
            *JPMS_OPTIONS,
            f"-javaagent:{jamm}",  # jamm measures on-heap memtable sizes
            f"-Dcassandra.config={config.as_uri()}",
            f"-Dcassandra.storagedir={self.node_dir}",
            f"-Dcassandra.logdir={self.node_dir}",
            f"-Dcassandra.triggers_dir={self.node_dir / 'triggers'}",
            f"-Dlogback.configurationFile={LOGBACK}",
            f"-Dcassandra.jmx.local.port={free_port()}",
            "-cp",
            os.pathsep.join(str(jar) for jar in sorted(lib.glob("*.jar"))),
            MAIN_CLASS,
        ]

    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Start the JVM in its own session and wait until CQL answers.

        The JVM outlives this Python process unless :meth:`stop` is called. On JVM
        death or timeout it is killed and :class:`CassandraError` carries the log tails.
        """
        if self.is_running():
            raise CassandraError(f"Cassandra already runs in {self.node_dir} (pid {self.pid})")
        ensure_loopback_address(self.host)
        for port in (self.port, self.storage_port):
            if port is not None and _port_in_use(port, self.host):
                raise CassandraError(f"port {self.host}:{port} is already in use")
        java = find_java()
        lib = ensure_jars(java)
        config = self.write_config(storage_port=self.storage_port or free_port())
        with open(self.stdout_log, "wb") as out:
            self._proc = subprocess.Popen(
                self.command(java, lib, config),
                cwd=self.node_dir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.pid_file.write_text(f"{self._proc.pid}\n")
        deadline = time.monotonic() + timeout
        while not self.is_ready():
            if self._proc.poll() is not None:
                self.pid_file.unlink(missing_ok=True)
                raise CassandraError(
                    f"Cassandra exited with code {self._proc.returncode}" + self._logs()
                )
            if time.monotonic() > deadline:
                self.stop(grace=0)
                raise CassandraError(
                    f"CQL did not answer on port {self.port} within {timeout:.0f}s" + self._logs()
                )
            time.sleep(0.5)

    def wipe(self) -> None:
        """Delete the node's data, commit log, caches and logs, so it starts empty.

        A test node wants this: every dropped table leaves tombstones in ``system_schema``
        for seven days, and each later CREATE or DROP scans them (a node that served many
        test runs took 6.5 s to make and drop a store, a fresh one 1.5 s).
        """
        if self.is_running():
            raise CassandraError(f"Cassandra runs in {self.node_dir} (pid {self.pid}): stop it")
        for sub in NODE_SUBDIRS:
            shutil.rmtree(self.node_dir / sub, ignore_errors=True)
        for log in (self.system_log, self.stdout_log):
            log.unlink(missing_ok=True)

    def stop(self, grace: float = STOP_GRACE) -> None:
        """Stop the JVM: SIGTERM (Cassandra drains and flushes), SIGKILL after ``grace`` seconds.

        ``grace=0`` kills at once, like a crash: the next start replays the commit log,
        which may miss the last writes acknowledged before the kill (periodic sync).
        """
        pid = self.pid
        if pid is not None:
            os.kill(pid, signal.SIGKILL if grace <= 0 else signal.SIGTERM)
            deadline = time.monotonic() + grace
            while self._running(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            if self._running(pid):
                os.kill(pid, signal.SIGKILL)
                while self._running(pid):
                    time.sleep(0.1)
        self.pid_file.unlink(missing_ok=True)
        self._proc = None

    def _running(self, pid: int) -> bool:
        if self._proc is not None and self._proc.pid == pid:
            return self._proc.poll() is None  # our child: poll() also reaps it
        return _alive(pid)

    def _logs(self) -> str:
        return "\n" + _tail(self.system_log) + "\n" + _tail(self.stdout_log)


@contextlib.contextmanager
def running_cassandra(
    node_dir: Path | str | None = None,
    port: int = DEFAULT_PORT,
    heap: str = DEFAULT_HEAP,
    timeout: float = START_TIMEOUT,
) -> Iterator[CassandraNode]:
    """Run a node for the duration of the block; ``node_dir=None`` uses a temporary one."""
    with contextlib.ExitStack() as stack:
        if node_dir is None:
            node_dir = stack.enter_context(
                tempfile.TemporaryDirectory(prefix="graphstore-cassandra-")
            )
        node = CassandraNode(node_dir, port=port, heap=heap)
        stack.callback(node.stop)  # registered first: an interrupted start is cleaned up too
        node.start(timeout=timeout)
        yield node


def main(argv: list[str] | None = None) -> int:
    """CLI: ``start`` (detached, waits for CQL), ``stop``, ``kill`` and ``status`` (exit 1
    when down), of the single node or, with ``--nodes N``, of an N-node cluster."""
    parser = argparse.ArgumentParser(
        prog="python -m graphstore.testing.local_cassandra", description=__doc__.split("\n")[0]
    )
    parser.add_argument("action", choices=["start", "stop", "kill", "status"])
    parser.add_argument(
        "--nodes",
        type=int,
        default=1,
        help="above 1: a cluster of that many nodes (default dir ~/.cache/graphstore/cluster)",
    )
    parser.add_argument("--node", type=int, help="one node of the cluster (1 = the seed)")
    parser.add_argument(
        "--dir", type=Path, help=f"node or cluster directory (default {DEFAULT_NODE_DIR})"
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"CQL port (default {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--address",
        help=f"the node's address (default {HOST}), or a cluster's first (default 127.0.0.2, "
        "then .3, .4, ...)",
    )
    parser.add_argument(
        "--heap", help=f"JVM heap, -Xms/-Xmx (default {DEFAULT_HEAP}; 512M per cluster node)"
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="start: delete the node's data first (one node only; `make test` does it)",
    )
    parser.add_argument(
        "--fast-schema",
        action="store_true",
        help="start: schema changes skip flushing (faster; a killed node loses new tables; "
        "one node only; `make test` does it)",
    )
    parser.add_argument(
        "--timeout", type=float, default=START_TIMEOUT, help="seconds to wait for CQL on start"
    )
    args = parser.parse_args(argv)
    try:
        if args.nodes > 1 or args.node is not None:
            if args.fresh:
                parser.error("--fresh is for one node; a cluster directory can be deleted")
            if args.fast_schema:
                parser.error("--fast-schema is for one node: a cluster's nodes are killed")
            from graphstore.testing.local_cluster import cluster_command

            return cluster_command(args)
        return _node_command(args)
    except CassandraError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


def _node_command(args: argparse.Namespace) -> int:
    """One action on the single node, on `--address`, else `HOST`; but `stop`, `kill` and
    `status` go to the address the node's config names (a node started on 127.0.0.2 is
    asked there), while `start` never takes an earlier start's address (`make test` starts
    its node on `HOST` whatever a user once chose for that folder)."""
    node_dir = Path(args.dir or DEFAULT_NODE_DIR).expanduser()
    configured = None if args.action == "start" else _configured_address(node_dir)
    node = CassandraNode(
        node_dir,
        port=args.port,
        heap=args.heap or DEFAULT_HEAP,
        host=args.address or configured or HOST,
        fast_schema=args.fast_schema,
    )
    if args.action == "start":
        began = time.monotonic()
        if args.fresh:
            node.wipe()
        node.start(timeout=args.timeout)
        print(
            f"Cassandra {cassandra_version()} up on {node.host}:{node.port} "
            f"(pid {node.pid}, dir {node.node_dir}) in {time.monotonic() - began:.1f}s"
        )
    elif args.action in ("stop", "kill"):
        pid = node.pid
        node.stop(grace=0 if args.action == "kill" else STOP_GRACE)
        done = "stopped" if args.action == "stop" else "killed"
        print(f"{done} pid {pid}" if pid else f"not running in {node.node_dir}")
    else:
        pid, ready = node.pid, node.is_ready()
        answer = "answering" if ready else "not answering"
        print(f"pid: {pid or 'none'}; CQL on {node.host}:{node.port}: {answer}")
        return 0 if pid and ready else 1
    return 0


def _configured_address(node_dir: Path) -> str | None:
    """The `rpc_address` of the node's `cassandra.yaml`, if it has one."""
    try:
        config = (node_dir / "cassandra.yaml").read_text()
    except OSError:
        return None
    found = re.search(r"^rpc_address:\s*(\S+)\s*$", config, re.MULTILINE)
    return found.group(1) if found else None


if __name__ == "__main__":
    # Run the imported module's main: `local_cluster` imports this module by name, and its
    # errors must be the CassandraError that `main` catches, not this script's copy.
    from graphstore.testing import local_cassandra  # noqa: PLW0406

    sys.exit(local_cassandra.main())
