"""Several real processes on one embedded store: each sees the others' committed writes, a
creation killed at any moment leaves a file that opens, and read-only media can be read."""

from __future__ import annotations

import asyncio
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from graphstore import StorageError, StoreOpenError
from graphstore.cli import main
from graphstore.embedded import EmbeddedStorage
from graphstore.filters import EVERYTHING, Condition, parse_filter
from graphstore.links import Link
from graphstore.nodes import Node, StoredNode, unit
from graphstore.store import run_sync

QUERY = unit([1.0, 0.0, 0.0])

# A second process that applies the operations it reads from stdin, one JSON line each, and
# answers "done" after each has committed.
OTHER_PROCESS = textwrap.dedent(
    """
    import asyncio, json, sys
    from graphstore.embedded import EmbeddedStorage
    from graphstore.links import Link
    from graphstore.nodes import Node, StoredNode, unit

    storage = EmbeddedStorage(sys.argv[1])
    for line in sys.stdin:
        op = json.loads(line)
        if op["op"] == "upsert":
            nodes = [
                StoredNode(
                    Node(n["id"], n["id"], n["metadata"],
                         frozenset(Link.bidir("kw", tag) for tag in n["tags"])),
                    unit(n["vector"]),
                )
                for n in op["nodes"]
            ]
            asyncio.run(storage.upsert(nodes))
        else:
            asyncio.run(storage.delete(op["ids"]))
        print("done", flush=True)
    """
)


class OtherProcess:
    """A live second process holding the same file open."""

    def __init__(self, path: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", OTHER_PROCESS, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def send(self, **op: object) -> None:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(json.dumps(op) + "\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline() == "done\n"

    def upsert(self, *nodes: tuple[str, list[str], list[float]]) -> None:
        self.send(
            op="upsert",
            nodes=[
                {"id": i, "tags": tags, "vector": vector, "metadata": {"by": "other"}}
                for i, tags, vector in nodes
            ],
        )

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        assert self.process.wait(timeout=30) == 0


def stored(node_id: str, tags: list[str], vector: list[float]) -> StoredNode:
    links = frozenset(Link.bidir("kw", tag) for tag in tags)
    return StoredNode(Node(node_id, node_id, {"by": "me"}, links), unit(vector))


def hits(storage: EmbeddedStorage, k: int = 3) -> list[str]:
    return [hit.stored.node.id for hit in run_sync(storage.search(QUERY, k, EVERYTHING))]


def tag_ids(storage: EmbeddedStorage, tag: str) -> list[str]:
    return [hit.id for hit in run_sync(storage.search_tag(("kw", tag), QUERY, 10, EVERYTHING))]


def tag_rows(storage: EmbeddedStorage, tag: str) -> set[tuple[str, float, frozenset]]:
    """Every node under `tag` with its score and outgoing tags (a set: equal scores tie)."""
    found = run_sync(storage.search_tag(("kw", tag), QUERY, 100, EVERYTHING))
    return {(hit.id, round(hit.similarity, 6), hit.outgoing) for hit in found}


def test_an_open_store_sees_another_process_add_update_and_delete(tmp_path: Path):
    path = tmp_path / "store.db"
    mine = EmbeddedStorage(path)
    run_sync(
        mine.upsert(
            [
                stored("near", ["a"], [1.0, 0.1, 0.0]),
                stored("mid", ["a"], [1.0, 0.5, 0.0]),
                stored("far", ["b"], [1.0, 1.0, 0.0]),
                stored("farthest", ["b"], [0.0, 1.0, 0.0]),
            ]
        )
    )
    assert hits(mine) == ["near", "mid", "far"]
    other = OtherProcess(path)
    try:
        other.upsert(("exact", ["c"], [1.0, 0.0, 0.0]))
        assert hits(mine) == ["exact", "near", "mid"]
        assert run_sync(mine.stats()).nodes == 5
        other.send(op="delete", ids=["near"])
        assert hits(mine) == ["exact", "mid", "far"]
        assert [s.node.id for s in run_sync(mine.get(["near", "exact"]))] == ["exact"]
        other.upsert(("mid", ["c"], [1.0, 0.5, 0.0]))
        assert tag_ids(mine, "a") == []
        assert tag_ids(mine, "c") == ["exact", "mid"]
        assert run_sync(mine.get(["mid"]))[0].node.metadata == {"by": "other"}
        stats = run_sync(mine.stats())
        assert (stats.nodes, stats.tag_rows, stats.tags) == (4, 4, 2)
        # and the other way round: what this process writes, the other builds on
        run_sync(mine.delete(["exact"]))
        other.upsert(("exact", ["b"], [1.0, 0.0, 0.0]))
        assert tag_ids(mine, "b") == ["exact", "far", "farthest"]
    finally:
        other.close()
    assert run_sync(mine.check()) == []
    run_sync(mine.close())


def test_many_changes_from_another_process_leave_the_same_index_as_a_fresh_open(tmp_path: Path):
    """The incremental refresh against a full load, over random adds, updates and deletes."""
    path = tmp_path / "store.db"
    mine = EmbeddedStorage(path)
    other = OtherProcess(path)
    rng = random.Random(16)
    ids = [f"n{i}" for i in range(40)]
    try:
        for _ in range(12):
            chosen = rng.sample(ids, 8)
            other.upsert(
                *(
                    (i, rng.sample("abcdef", 2), [rng.random(), rng.random(), rng.random()])
                    for i in chosen
                )
            )
            other.send(op="delete", ids=rng.sample(ids, 3))
            if rng.random() < 0.5:
                run_sync(mine.upsert([stored(rng.choice(ids), ["a"], [0.3, 0.2, 0.1])]))
            fresh = EmbeddedStorage(path)
            try:
                assert run_sync(mine.stats()) == run_sync(fresh.stats())
                assert set(hits(mine, 100)) == set(hits(fresh, 100))
                for tag in "abcdef":
                    assert tag_rows(mine, tag) == tag_rows(fresh, tag)
            finally:
                run_sync(fresh.close())
    finally:
        other.close()
    run_sync(mine.close())


def pages(
    storage: EmbeddedStorage, keys: list[tuple[str, str]], where: Condition
) -> list[list[tuple[str, float, frozenset]]]:
    """Each tag's 5 nodes nearest to QUERY, with scores and outgoing tags."""
    found = run_sync(storage.search_tags(keys, QUERY, 5, where))
    return [[(hit.id, round(hit.similarity, 6), hit.outgoing) for hit in page] for page in found]


def test_a_hub_tag_ranks_and_counts_right_while_another_process_changes_it(tmp_path: Path):
    """A tag on most nodes, searched with one query vector again and again (its scores are
    kept between a search's queries) and counted from the posting lists, while another
    process adds, deletes and re-adds nodes under it: always what a fresh open says."""
    path = tmp_path / "store.db"
    mine = EmbeddedStorage(path)
    rng = random.Random(13)
    ids = [f"n{i}" for i in range(60)]

    def vector() -> list[float]:
        return [rng.uniform(-1, 1) for _ in range(3)]

    run_sync(mine.upsert([stored(i, ["hub", rng.choice("ab")], vector()) for i in ids]))
    keys = [("kw", "hub"), ("kw", "a"), ("kw", "b")]
    by_other = parse_filter({"by": "other"})
    other = OtherProcess(path)
    try:
        for _ in range(10):
            run_sync(mine.search_hits(QUERY, 5, EVERYTHING))
            run_sync(mine.search_tags(keys, QUERY, 5, EVERYTHING))
            gone = rng.sample(ids, 6)
            other.send(op="delete", ids=gone)
            other.upsert(
                *((i, ["hub"] if rng.random() < 0.8 else ["b"], vector()) for i in gone[:4])
            )
            fresh = EmbeddedStorage(path)
            try:
                for where in (EVERYTHING, by_other):
                    assert run_sync(mine.tag_sizes(keys, where)) == run_sync(
                        fresh.tag_sizes(keys, where)
                    )
                    assert pages(mine, keys, where) == pages(fresh, keys, where)
                assert tag_rows(mine, "hub") == tag_rows(fresh, "hub")
                assert run_sync(mine.stats()) == run_sync(fresh.stats())
            finally:
                run_sync(fresh.close())
    finally:
        other.close()
    assert run_sync(mine.check()) == []
    run_sync(mine.close())


INGEST = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from graphstore import GraphStore
    from graphstore.embedded import EmbeddedStorage
    from graphstore.ingest import ingest
    from graphstore.testing.embeddings import KeyedEmbeddings

    async def main():
        store = GraphStore(KeyedEmbeddings(dimension=16), EmbeddedStorage(sys.argv[1]))
        print("ready", flush=True)
        sys.stdin.readline()
        report = await ingest(store, [Path(sys.argv[2])], linkers=[], batch_size=20)
        stats = await store.astats()
        print(report.passages, stats.nodes, flush=True)
        await store.aclose()

    asyncio.run(main())
    """
)


def test_two_concurrent_ingests_each_report_what_the_store_holds(tmp_path: Path):
    path = tmp_path / "store.db"
    for name in ("x", "y"):
        folder = tmp_path / name
        folder.mkdir()
        for i in range(30):
            (folder / f"{name}{i}.txt").write_text(f"{name} file {i}\n\nsecond passage of {i}\n")
    EmbeddedStorage(path)  # created before either ingest opens it
    ingests = [
        subprocess.Popen(
            [sys.executable, "-c", INGEST, str(path), str(tmp_path / name)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("x", "y")
    ]
    for ingest in ingests:  # both hold the store open before either writes
        assert ingest.stdout is not None
        assert ingest.stdout.readline() == "ready\n"
    reports = []
    for ingest in ingests:
        out, _ = ingest.communicate("go\n", timeout=120)
        assert ingest.returncode == 0
        reports.append(tuple(int(n) for n in out.split()))
    written = sum(passages for passages, _ in reports)
    stored_now = run_sync(EmbeddedStorage(path).stats()).nodes
    assert stored_now == written >= 60
    assert all(seen >= passages for passages, seen in reports)
    assert max(seen for _, seen in reports) == stored_now


def test_a_creation_killed_at_any_moment_leaves_a_file_that_opens(tmp_path: Path):
    """kill -9 at random moments inside `EmbeddedStorage(new file)`, in forked processes."""
    started = time.perf_counter()
    run_sync(EmbeddedStorage(tmp_path / "timing.db").close())
    creation = time.perf_counter() - started
    rng = random.Random(10)
    for attempt in range(150):
        path = tmp_path / f"{attempt}.db"
        child = os.fork()
        if child == 0:
            try:
                EmbeddedStorage(path)
            finally:
                os._exit(0)
        time.sleep(rng.uniform(0, 1.5 * creation))
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        storage = EmbeddedStorage(path)
        try:
            run_sync(storage.upsert([stored("a", ["t"], [1.0, 0.0, 0.0])]))
            assert run_sync(storage.stats()).nodes == 1
        finally:
            run_sync(storage.close())


READ_ONLY_READER = textwrap.dedent(
    """
    import asyncio, json, sys
    from graphstore import StorageError
    from graphstore.embedded import EmbeddedStorage
    from graphstore.filters import EVERYTHING
    from graphstore.nodes import Node, StoredNode, unit

    async def main():
        storage = EmbeddedStorage(sys.argv[1])
        stats = await storage.stats()
        found = await storage.search(unit([1.0, 0.0, 0.0]), 2, EVERYTHING)
        problems = await storage.check()
        try:
            await storage.upsert([StoredNode(Node("new", "new"), unit([1.0, 0.0, 0.0]))])
            refused = None
        except StorageError as error:
            refused = str(error)
        await storage.close()
        print(json.dumps({"nodes": stats.nodes, "hits": [h.stored.node.id for h in found],
                          "problems": problems, "refused": refused}))

    asyncio.run(main())
    """
)


def read_only_mount(source: Path, target: Path, command: list[str]) -> subprocess.CompletedProcess:
    """Run `command` where `target` is `source` mounted read-only (a user and mount namespace
    of its own, so nothing outside the test sees the mount)."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1) to mount a folder read-only")
    script = (
        f'mount --bind "{source}" "{target}" && mount -o remount,ro,bind "{target}" && exec "$@"'
    )
    result = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, "sh", *command],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if "mount" in result.stderr and result.returncode != 0 and not result.stdout:
        pytest.skip(f"cannot mount read-only here: {result.stderr.strip()}")
    return result


def test_a_store_on_read_only_media_opens_for_reading(tmp_path: Path):
    source = tmp_path / "disk"
    source.mkdir()
    storage = EmbeddedStorage(source / "store.db")
    run_sync(
        storage.upsert(
            [stored("near", ["a"], [1.0, 0.1, 0.0]), stored("far", ["a"], [0.0, 1.0, 0.0])]
        )
    )
    run_sync(storage.close())
    before = {file.name: file.read_bytes() for file in source.iterdir()}
    media = tmp_path / "media"
    media.mkdir()
    result = read_only_mount(
        source, media, [sys.executable, "-c", READ_ONLY_READER, str(media / "store.db")]
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["nodes"] == 2
    assert seen["hits"] == ["near", "far"]
    assert seen["problems"] == []
    assert "read-only" in seen["refused"]
    assert "\n" not in seen["refused"]
    assert {file.name: file.read_bytes() for file in source.iterdir()} == before


# -- a store this user may read but not write (another user's file or folder) -------------

NOBODY = 65534


def read_and_try_to_write(path: Path) -> dict[str, object]:
    """What READ_ONLY_READER reports, in this process, and what `graphstore stats` and
    `graphstore check` print."""

    async def through_the_api() -> dict[str, object]:
        storage = EmbeddedStorage(path)
        stats = await storage.stats()
        found = await storage.search(QUERY, 2, EVERYTHING)
        problems = await storage.check()
        try:
            await storage.upsert([stored("new", ["a"], [1.0, 0.0, 0.0])])
            refused = None
        except StorageError as error:
            refused = str(error)
        await storage.close()
        return {
            "nodes": stats.nodes,
            "hits": [hit.stored.node.id for hit in found],
            "problems": problems,
            "refused": refused,
        }

    seen = asyncio.run(through_the_api())
    for command in ("stats", "check"):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            status = main(["--store", str(path), command])
        seen[command] = [status, out.getvalue(), err.getvalue()]
    return seen


def as_nobody(work: Callable[[], object], meanwhile: Callable[[], None] = lambda: None) -> Any:
    """`work()`, run in a forked child as uid and gid 65534 (the caller is root), while this
    process runs `meanwhile()`; the child's result through JSON.  Forked, not started: that
    user cannot reach this Python under /root, so everything the child runs is imported
    before it changes user."""
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(reading)
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            answer = {"result": work()}
        except BaseException:
            answer = {"error": traceback.format_exc()}
        with os.fdopen(writing, "w") as pipe:
            json.dump(answer, pipe)
        os._exit(0)
    os.close(writing)
    try:
        meanwhile()
    finally:
        with os.fdopen(reading) as pipe:
            answer = json.load(pipe)
        os.waitpid(child, 0)
    assert "error" not in answer, answer["error"]
    return answer["result"]


def make_store(path: Path) -> None:
    storage = EmbeddedStorage(path)
    run_sync(
        storage.upsert(
            [stored("near", ["a"], [1.0, 0.1, 0.0]), stored("far", ["a"], [0.0, 1.0, 0.0])]
        )
    )
    run_sync(storage.close())


@contextmanager
def folder_of_another_user(tmp_path: Path) -> Iterator[Path]:
    """A folder of mode 755 for `as_other_user`, removed afterwards: as root, one uid 65534
    can reach (pytest's own are root's alone)."""
    folder = Path(tempfile.mkdtemp()) if os.geteuid() == 0 else tmp_path / "theirs"
    folder.mkdir(exist_ok=True)
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder)


def as_other_user(work: Callable[[], Any], folder: Path, root_mode: int, own_mode: int) -> Any:
    """`work()` by a user to whom `folder` is another user's: as root, uid 65534 with the
    folder at `root_mode`; otherwise this user with it at `own_mode` (skipped when this
    user may still write or enter it); the result through JSON either way."""
    if os.geteuid() == 0:
        folder.chmod(root_mode)
        return as_nobody(work)
    folder.chmod(own_mode)
    if os.access(folder, os.W_OK) or (own_mode & 0o100 == 0 and os.access(folder, os.X_OK)):
        pytest.skip(f"this user can use a folder of mode {own_mode:o} of its own")
    return json.loads(json.dumps(work()))


def stats_output(path: Path) -> list[object]:
    """What `graphstore --store path stats` returns and prints."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = main(["--store", str(path), "stats"])
    return [status, out.getvalue(), err.getvalue()]


def open_error(path: Path) -> list[object]:
    """What opening the store at `path` raises, and what `graphstore stats` prints."""
    try:
        EmbeddedStorage(path)
        raised = None
    except StoreOpenError as error:
        raised = str(error)
    return [raised, *stats_output(path)]


def test_a_copy_with_its_wal_in_a_folder_this_user_cannot_write_is_refused_not_read_stale(
    tmp_path: Path,
):
    """A store copied with its `-wal` (and no `-shm`) into a folder this user cannot write
    was opened `immutable`, which reads no WAL: the commits in it were silently missing."""
    with folder_of_another_user(tmp_path) as folder:
        source = EmbeddedStorage(tmp_path / "src.db")
        run_sync(source.upsert([stored("near", ["a"], [1.0, 0.1, 0.0])]))
        for suffix in ("", "-wal"):  # while open: the commit is still in the -wal
            shutil.copy(tmp_path / f"src.db{suffix}", folder / f"ro.db{suffix}")
        run_sync(source.close())
        path = folder / "ro.db"
        assert (folder / "ro.db-wal").stat().st_size > 0
        raised, status, out, err = as_other_user(lambda: open_error(path), folder, 0o755, 0o555)
    message = "ro.db-wal beside it may hold its last commits, which SQLite reads only with a"
    assert message in str(raised)
    assert (status, out) == (2, "")
    assert message in err
    assert err.count("\n") == 1


def test_a_store_in_a_folder_this_user_may_not_enter_is_not_called_missing(tmp_path: Path):
    """`os.path.exists` is false behind a folder of mode 700 of another user: the store was
    reported as "no store at"."""
    outside = Path(tempfile.mkdtemp())  # a folder everyone may enter, for a link
    outside.chmod(0o755)
    link = outside / "link.db"
    try:
        with folder_of_another_user(tmp_path) as folder:
            path = folder / "x.db"
            make_store(path)
            link.symlink_to(path)
            seen = as_other_user(
                lambda: [stats_output(path), stats_output(link)], folder, 0o700, 0o000
            )
    finally:
        shutil.rmtree(outside)
    for (status, out, err), shown in zip(seen, (path, link), strict=True):
        assert (status, out) == (2, "")
        assert err == (
            f"graphstore: error: cannot reach {shown}: permission denied on a folder on its way\n"
        )


def test_a_read_only_store_in_a_folder_this_user_cannot_write_opens_for_reading(
    tmp_path: Path,
):
    """A store file of mode 444 in root's folder of mode 755, read by uid 65534 (or, not as
    root, in this user's folder of mode 555): SQLite cannot create the WAL index there, and
    every command, reads included, was refused with "the file is read-only"."""
    with folder_of_another_user(tmp_path) as folder:
        path = folder / "ro.db"
        make_store(path)
        path.chmod(0o444)
        before = {file.name: file.read_bytes() for file in folder.iterdir()}
        seen = as_other_user(lambda: read_and_try_to_write(path), folder, 0o755, 0o555)
        assert seen["nodes"] == 2
        assert seen["hits"] == ["near", "far"]
        assert seen["problems"] == []
        assert "it is open read-only" in seen["refused"]
        assert "\n" not in seen["refused"]
        status, out, err = seen["stats"]
        assert (status, err) == (0, "")
        assert "passages: 2\n" in out
        assert seen["check"] == [0, f"0 problems found in {path}\n", ""]
        assert {file.name: file.read_bytes() for file in folder.iterdir()} == before


def read_while_root_writes(path: Path) -> list[object]:
    """What uid 65534, holding the store at `path` open, sees before and after root adds a
    passage and closes (its commit then reaches the file): whether it opened read-only, the
    passage counts before and after, and the nearest passage after."""
    opened, written = os.pipe(), os.pipe()  # each side closes the ends it does not use,
    # so that either sees the end of a pipe, not a hang, when the other fails

    def reader() -> list[object]:
        os.close(opened[0])
        os.close(written[1])

        async def read() -> list[object]:
            storage = EmbeddedStorage(path)
            seen: list[object] = [storage.read_only, (await storage.stats()).nodes]
            os.write(opened[1], b"x")
            os.read(written[0], 1)
            seen.append((await storage.stats()).nodes)
            found = await storage.search(QUERY, 1, EVERYTHING)
            seen.append([hit.stored.node.id for hit in found])
            await storage.close()
            return seen

        return asyncio.run(read())

    def writer() -> None:
        os.close(opened[1])
        os.close(written[0])
        try:
            assert os.read(opened[0], 1) == b"x"
            storage = EmbeddedStorage(path)
            run_sync(storage.upsert([stored("exact", ["b"], [1.0, 0.0, 0.0])]))
            run_sync(storage.close())
            os.write(written[1], b"x")
        finally:
            os.close(opened[0])
            os.close(written[1])

    return as_nobody(reader, writer)


def test_a_store_this_user_cannot_write_still_sees_what_its_writer_commits(tmp_path: Path):
    """Why a file that this user cannot write, in a folder it can, is read through SQLite's
    WAL index (`mode=ro`, which leaves -wal and -shm files behind) and not `immutable`
    (which would write nothing): the process that can write it, here root, goes on writing,
    and an immutable reader would keep serving what the file held when it opened."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to read as another user")
    folder = Path(tempfile.mkdtemp())
    try:
        folder.chmod(0o777)
        path = folder / "roots.db"
        make_store(path)  # mode 644: uid 65534 may read it, not write it
        assert read_while_root_writes(path) == [True, 2, 3, ["exact"]]
    finally:
        shutil.rmtree(folder)


def test_a_reader_that_could_make_no_wal_index_reads_again_once_the_file_is_written(
    tmp_path: Path,
):
    """A reader in a folder it cannot write (root's, mode 755) opens the store `immutable`:
    SQLite then assumes no one writes the file.  Once root's writes reached it, the reader
    served what the file held when it opened, or, for a store larger than SQLite's page
    cache, failed every search with "the file is corrupt" (a new user's probe).  It now
    connects again when the file changed, and sees the commits."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to read as another user")
    with folder_of_another_user(tmp_path) as folder:
        path = folder / "roots.db"
        make_store(path)
        assert read_while_root_writes(path) == [True, 2, 3, ["exact"]]


def test_a_delete_of_unknown_ids_does_not_hide_the_next_write_of_another_process(
    tmp_path: Path,
):
    """A write that stamped nothing still advanced this process's change counter; the other
    process's next write took that same number, and this one never read it."""
    path = tmp_path / "store.db"
    mine = EmbeddedStorage(path)
    run_sync(mine.upsert([stored("a", ["a"], [1.0, 0.5, 0.0])]))
    other = OtherProcess(path)
    try:
        assert run_sync(mine.delete(["no-such-id"])) == 0
        other.upsert(("zeppelin", ["z"], [1.0, 0.0, 0.0]))
        assert hits(mine) == ["zeppelin", "a"]
        assert run_sync(mine.stats()).nodes == 2
    finally:
        other.close()
    run_sync(mine.close())


def test_a_failed_command_keeps_a_new_store_another_process_has_open(tmp_path: Path):
    """A command that created a store and failed before storing anything removed the file,
    though another process had opened it meanwhile: that process's writes then went to a
    deleted file, reported as done."""
    from graphstore.location import close_unused, new_store_file

    path = tmp_path / "new.db"
    new_file = new_store_file(str(path))
    failed = EmbeddedStorage(path)
    other = OtherProcess(path)
    try:
        other.send(op="delete", ids=["nothing"])  # answered: the other process has it open
        run_sync(close_unused(failed, new_file))
        other.upsert(("kept", ["k"], [1.0, 0.0, 0.0]))
    finally:
        other.close()
    assert path.exists()
    reopened = EmbeddedStorage(path)
    assert hits(reopened) == ["kept"]
    run_sync(reopened.close())
    alone = tmp_path / "alone.db"
    alone_file = new_store_file(str(alone))
    run_sync(close_unused(EmbeddedStorage(alone), alone_file))
    assert not list(tmp_path.glob("alone.db*"))  # nobody else had it open: removed


def test_a_failed_open_leaves_a_store_another_process_created_meanwhile(tmp_path: Path):
    """After an open that failed (a full disk) the CLI removes the new file and the `-wal`
    and `-shm` the failed open left; a store another process created at the same path in
    between, and holds open, is left whole."""
    from graphstore.location import held_open, new_store_file

    path = tmp_path / "new.db"
    new_file = new_store_file(str(path))
    assert new_file is not None
    other = OtherProcess(path)
    try:
        other.upsert(("kept", ["k"], [1.0, 0.0, 0.0]))
        assert held_open(path)
        new_file.put_back_after_failed_open()
        assert path.exists()
        other.upsert(("later", ["k"], [0.0, 1.0, 0.0]))
    finally:
        other.close()
    assert not held_open(path)
    reopened = EmbeddedStorage(path)
    assert sorted(run_sync(reopened.node_ids())) == ["kept", "later"]
    run_sync(reopened.close())


def test_a_store_is_not_created_where_a_process_holds_a_deleted_ones_log(tmp_path: Path):
    """`rm live.db` and a new ingest while a server held the old file: SQLite took the
    holder's `-wal` and `-shm` for the new file's, failed with "disk I/O error", left an
    empty file behind and emptied the holder's log."""
    path = tmp_path / "live.db"
    make_store(path)
    holder = OtherProcess(path)
    try:
        holder.upsert(("held", ["h"], [1.0, 0.0, 0.0]))
        path.unlink()
        wal = (tmp_path / "live.db-wal").stat().st_size
        with pytest.raises(StoreOpenError) as error:
            EmbeddedStorage(path)
        assert str(error.value) == (
            f"cannot create {path}: a process (pid {holder.process.pid}) still holds the store "
            "file deleted there, with the live.db-wal and live.db-shm beside it, which SQLite "
            "would read as the new store's: stop that process, then remove live.db-wal and "
            "live.db-shm"
        )
        assert not path.exists()
        assert (tmp_path / "live.db-wal").stat().st_size == wal
    finally:
        holder.close()
    for log in ("live.db-wal", "live.db-shm"):
        (tmp_path / log).unlink(missing_ok=True)
    make_store(path)
    fresh = EmbeddedStorage(path)
    assert hits(fresh) == ["near", "far"]
    run_sync(fresh.close())


def test_a_store_moved_over_one_a_process_holds_is_not_read_with_the_old_ones_log(
    tmp_path: Path,
):
    """A store built aside and moved over one a server held (`mv new.db live.db`) was read
    through the old file's `-wal` and `-shm`: the old store's passages, `check` problems,
    and "database disk image is malformed" in some runs (a new user's probe)."""
    path, aside = tmp_path / "live.db", tmp_path / "new.db"
    make_store(path)
    holder = OtherProcess(path)
    try:
        holder.upsert(*((f"old{i}", ["o"], [0.0, 1.0, 0.0]) for i in range(50)))
        built = EmbeddedStorage(aside)
        run_sync(built.upsert([stored("new", ["n"], [1.0, 0.0, 0.0])]))
        run_sync(built.close())
        aside.replace(path)
        with pytest.raises(StoreOpenError) as error:
            EmbeddedStorage(path)
        assert str(error.value) == (
            f"cannot open {path}: a process (pid {holder.process.pid}) holds the store file "
            "this one replaced, with the live.db-wal and live.db-shm beside it, which SQLite "
            "would read as this file's and corrupt it: stop that process, then remove "
            "live.db-wal and live.db-shm (SQLite keeps them when the file it wrote them for "
            "has moved)"
        )
    finally:
        holder.close()
    assert (tmp_path / "live.db-wal").exists()  # kept: its file has moved
    for log in ("live.db-wal", "live.db-shm"):
        (tmp_path / log).unlink()
    moved = EmbeddedStorage(path)
    assert hits(moved) == ["new"]
    assert run_sync(moved.check()) == []
    run_sync(moved.close())


def test_opening_a_store_twice_in_one_process_keeps_the_first_ones_locks(tmp_path: Path):
    """Asking the kernel who holds a `-shm` (`sqlite_file.shm_holder`) needs a descriptor
    of it, and closing that descriptor released every lock this process held on the file:
    a second store opened on the same path dropped the first one's SQLite locks, and other
    processes then took the log for no one's."""
    path = tmp_path / "s.db"
    first = EmbeddedStorage(path)
    run_sync(first.upsert([stored("a", ["a"], [1.0, 0.0, 0.0])]))
    second = EmbeddedStorage(path)
    probe = (
        "import sys; from pathlib import Path; from graphstore.sqlite_file import shm_holder; "
        "print(shm_holder(Path(sys.argv[1])))"
    )
    seen = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / "s.db-shm")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert seen.stdout.strip() == str(os.getpid())
    run_sync(second.close())
    run_sync(first.close())
