"""Traversal semantics on every backend, with hand-made vectors so every score is known."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import threading

import numpy as np
import pytest

from extractors.hierarchy import HierarchyLinkExtractor
from graphstore import GraphStore, InvalidInputError, Link, Node
from graphstore.cassandra import CassandraStorage
from graphstore.storage import Storage
from graphstore.store import run_sync
from graphstore.strategy import DEFAULT, ROOTS, search_strategy
from graphstore.testing.embeddings import KeyedEmbeddings
from graphstore.traversal import TraversalStats

Q = [1.0, 0.0, 0.0]


def norm(vector):
    array = np.asarray(vector, dtype=float)
    return (array / np.linalg.norm(array)).tolist()


async def build(backend: Storage, nodes: dict[str, tuple[list[float], list[Link]]], metadata=None):
    """A store over `backend` holding `nodes` (id -> vector, links); the query text is 'q'."""
    vectors = {"q": Q} | {f"text {node_id}": vector for node_id, (vector, _) in nodes.items()}
    store = GraphStore(KeyedEmbeddings(vectors), backend)
    await store.aadd_nodes(
        Node(node_id, f"text {node_id}", (metadata or {}).get(node_id, {}), frozenset(links))
        for node_id, (_, links) in nodes.items()
    )
    return store


DIRECTION_TABLE = [
    ("out", "in", True),
    ("in", "in", False),
    ("bidir", "in", True),
    ("bidir", "out", False),
    ("out", "bidir", True),
    ("in", "bidir", False),
    ("bidir", "bidir", True),
    ("out", "out", False),
]


@pytest.mark.parametrize(("source", "target", "edge"), DIRECTION_TABLE)
async def test_edges_follow_link_directions(backend, source, target, edge):
    store = await build(
        backend,
        {"A": (Q, [Link("kw", source, "t")]), "B": ([0, 1, 0], [Link("kw", target, "t")])},
    )
    hits = await store.atraversal_search("q", k=2, start_k=1, depth=1)
    # Without an edge, B only pads the result as the next-nearest root.
    assert [(hit.node.id, hit.depth) for hit in hits] == [("A", 0), ("B", 1 if edge else 0)]
    # The graph searches too: when the graph runs out before k, the next-nearest root fills.
    mmr = await store.ammr_traversal_search("q", k=5, fetch_k=1, depth=1, lambda_mult=1.0)
    assert [(hit.node.id, hit.depth) for hit in mmr] == [("A", 0), ("B", 1 if edge else 0)]
    default = await store.asearch("q", k=5, fetch_k=1, depth=1, lambda_mult=1.0)
    assert [(hit.node.id, hit.depth) for hit in default] == [("A", 0), ("B", 1 if edge else 0)]


def chain():
    """A -> B -> C -> D through tags t1, t2, t3; only A is near the query."""
    return {
        "A": (Q, [Link.outgoing("kw", "t1")]),
        "B": (norm([0.3, 1, 0]), [Link.incoming("kw", "t1"), Link.outgoing("kw", "t2")]),
        "C": (norm([0.2, 0, 1]), [Link.incoming("kw", "t2"), Link.outgoing("kw", "t3")]),
        "D": (norm([0.1, 1, 1]), [Link.incoming("kw", "t3")]),
    }


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
async def test_depth_is_the_largest_hop_count_in_both_searches(backend, depth):
    store = await build(backend, chain())
    expected = ["A", "B", "C", "D"][: depth + 1]
    hits = (await store.atraversal_search("q", k=4, start_k=1, depth=depth))[: depth + 1]
    assert [h.node.id for h in hits] == expected
    assert [h.depth for h in hits] == list(range(depth + 1))
    mmr_hits = await store.ammr_traversal_search("q", k=10, depth=depth, fetch_k=1, lambda_mult=1.0)
    reached = [(h.node.id, h.depth) for h in mmr_hits][: depth + 1]
    assert reached == [(h.node.id, h.depth) for h in hits]
    # What the depth limit leaves out comes back only as next-nearest roots, filling k.
    assert [(h.node.id, h.depth) for h in mmr_hits[depth + 1 :]] == [
        (node_id, 0) for node_id in ["A", "B", "C", "D"][depth + 1 :]
    ]


async def test_hits_say_how_they_were_reached(backend):
    store = await build(backend, chain())
    hits = await store.ammr_traversal_search("q", k=3, depth=3, fetch_k=1, lambda_mult=1.0)
    assert [(h.node.id, h.via, h.path) for h in hits] == [
        ("A", None, ()),
        ("B", ("kw", "t1"), (("kw", "t1"),)),
        ("C", ("kw", "t2"), (("kw", "t1"), ("kw", "t2"))),
    ]
    for hit, vector in zip(hits, [Q, chain()["B"][0], chain()["C"][0]], strict=True):
        assert hit.similarity == pytest.approx(float(np.dot(norm(vector), Q)), abs=1e-5)
        # Each tag leads to one passage, so the relevance of A (1.0) passes down whole over
        # the first hop, and the second hop leans on it by the damping (0.8).
        damping = DEFAULT.damping ** (hit.depth - 1) if hit.depth else 1.0
        expected = damping + (1 - damping) * hit.similarity
        assert hit.score == pytest.approx(expected, abs=1e-5)
        assert hit.mmr_score == pytest.approx(hit.score, abs=1e-5)
    assert hits[2].score < hits[1].score
    assert [h.node.text for h in hits] == ["text A", "text B", "text C"]


async def test_a_second_hop_passes_on_less_than_the_first(backend):
    """A film names its director (the bridge), whose page names a town unlike the question:
    the bridge inherits the film's relevance whole, but the town two hops away no longer
    does, so the other film of the question (a root, less similar than the first) is not
    displaced by it (2WikiMultihopQA: *Los*, similarity 0.0, used to take that place)."""
    nodes = {
        "film": (norm([0.62, 0.785, 0]), [Link.outgoing("mention", "director")]),
        "other film": (norm([0.55, 0, 0.835]), []),
        "director": (
            norm([0.25, -0.5, -0.83]),
            [Link.incoming("mention", "director"), Link.outgoing("mention", "town")],
        ),
        "town": ([0.0, 0.0, 1.0], [Link.incoming("mention", "town")]),
    }
    store = await build(backend, nodes)
    hits = await store.asearch("q", k=3, fetch_k=2)
    assert [(h.node.id, h.depth) for h in hits] == [
        ("film", 0),
        ("director", 1),
        ("other film", 0),
    ]
    undamped = await store.asearch("q", k=3, fetch_k=2, damping=1.0)
    assert [h.node.id for h in undamped] == ["film", "director", "town"]


async def test_a_second_hop_is_damped_when_the_bridge_is_also_a_root(backend):
    """The bridge inherits the first passage's relevance whole; what it passes on to the
    passage it names was damped only when the bridge was not among the roots: with the
    default roots (every passage of a small store) the town two hops away inherited the
    whole of it, tying with the passage like the query."""
    nodes = {
        "language": (Q, [Link.outgoing("mention", "author")]),
        "author": (
            norm([0.3, 1, 0]),
            [Link.incoming("mention", "author"), Link.outgoing("mention", "town")],
        ),
        "town": ([0.0, 0.0, 1.0], [Link.incoming("mention", "town")]),
    }
    store = await build(backend, nodes)
    expected = {"language": 1.0, "author": 1.0, "town": DEFAULT.damping}
    for fetch_k in (1, 3):
        hits = await store.asearch("q", k=3, fetch_k=fetch_k)
        scores = {hit.node.id: hit.score for hit in hits}
        assert scores == pytest.approx(expected, abs=1e-5), fetch_k


@pytest.mark.parametrize("fetch_k", [2, 5])
async def test_a_citation_added_never_lowers_what_a_passage_passes_on(backend, fetch_k):
    """Found in review: the bridge X, raised over one hop to 0.8, was raised again over two
    hops to 0.92 by the added citation P -> X, and only the two-hop way was kept, so X
    passed on 0.8² · 0.92 to Y (0.59, below its own 0.6) instead of 0.8 · 0.8."""
    for cited in (False, True):
        nodes = {
            "A": (Q, [Link.outgoing("mention", "x"), Link.outgoing("mention", "p")]),
            "X": (
                norm([0.6, 0.8, 0]),
                [Link.incoming("mention", "x"), Link.outgoing("mention", "y")]
                + [Link.incoming("mention", "px")] * cited,
            ),
            "Z": (norm([0.1, 0, 0.995]), [Link.incoming("mention", "x")]),
            "P": (
                [0.0, 1.0, 0.0],
                [Link.incoming("mention", "p")] + [Link.outgoing("mention", "px")] * cited,
            ),
            "Y": ([0.0, 0.0, 1.0], [Link.incoming("mention", "y")]),
        }
        store = await build(backend, nodes)
        hits = await store.asearch("q", k=5, fetch_k=fetch_k)
        x = 0.92 if cited else 0.8  # A passes X half its relevance; P, two hops, 0.8 of it
        expected = {"A": 1.0, "P": 1.0, "X": x, "Y": 0.64, "Z": 0.55}
        assert {hit.node.id: hit.score for hit in hits} == pytest.approx(expected, abs=1e-5)


async def test_a_way_in_fewer_hops_passes_on_as_fewer_hops(backend):
    """Found in review: X, found two hops from the root A (relevance 0.267) and then one hop
    from the root R (which gives it only 0.225), passed on 0.267 as if it had come one hop;
    once a citation A -> R raised R (and through it X, to 0.29 over two hops), X passed on
    less than before, 0.8² · 0.29 < 0.8 · 0.267.  Each way now keeps its own hops."""

    def axis(i: int) -> list[float]:
        return [1.0 if j == i else 0.0 for j in range(9)]

    scores = []
    for cited in (False, True):
        out, into = Link.outgoing, Link.incoming
        nodes = {
            "A": (axis(0), [out("mention", "b")] + [out("mention", "rz")] * cited),
            "R": (
                [0.45, (1 - 0.45**2) ** 0.5, 0, 0, 0, 0, 0, 0, 0],
                [out("mention", "x3")] + [into("mention", "rz")] * cited,
            ),
            "Z": (axis(8), [into("mention", "rz")] * cited),
            "B": (axis(2), [into("mention", "b"), out("mention", "x")]),
            "X": (
                axis(3),
                [
                    into("mention", "x"),
                    into("mention", "x3"),
                    out("mention", "y"),
                ],
            ),
            "X2": (axis(4), [into("mention", "x")]),
            "X4": (axis(7), [into("mention", "x")]),
            "X3": (axis(5), [into("mention", "x3")]),
            "Y": (axis(6), [into("mention", "y")]),
        }
        vectors = {"q": axis(0)} | {f"text {i}": v for i, (v, _) in nodes.items()}
        store = GraphStore(KeyedEmbeddings(vectors), backend)
        await store.aadd_nodes(
            Node(i, f"text {i}", {}, frozenset(links)) for i, (_, links) in nodes.items()
        )
        hits = await store.asearch("q", k=len(nodes), fetch_k=2, lambda_mult=1.0)
        scores.append({hit.node.id: hit.score for hit in hits})
        await store.adelete(list(nodes))
    assert scores[0]["Y"] == pytest.approx(0.8 * 0.45 / 2, abs=1e-5)  # one hop from R
    assert scores[1]["X"] == pytest.approx(0.29, abs=1e-5)
    assert scores[1]["Y"] == pytest.approx(0.8**2 * 0.29, abs=1e-5)  # X's raise, two hops


async def test_each_tag_is_queried_once_per_search(backend):
    roots = {
        f"R{i}": (norm([1, 0.01 * i, 0]), [Link.bidir("kw", "hub"), Link.outgoing("kw", f"own{i}")])
        for i in range(5)
    }
    targets = {f"T{i}": (norm([0, 1, i]), [Link.incoming("kw", f"own{i}")]) for i in range(5)}
    store = await build(backend, roots | targets)
    stats = TraversalStats()
    hits = await store.atraversal_search("q", k=10, start_k=5, depth=2, stats=stats)
    assert {h.node.id for h in hits} == set(roots) | set(targets)
    assert stats.tag_queries == 6
    mmr_stats = TraversalStats()
    await store.ammr_traversal_search(
        "q", k=10, depth=2, fetch_k=5, lambda_mult=1.0, stats=mmr_stats
    )
    assert mmr_stats.tag_queries == 6


async def test_the_last_selection_is_not_expanded(backend):
    # Its neighbours could never be returned: a k=1 search asks no tag at all, and a k=2
    # search only the first selection's tags.
    nodes = {
        "A": (norm([1, 0, 0]), [Link.outgoing("kw", "a"), Link.outgoing("kw", "shared")]),
        "B": (norm([1, 0.3, 0]), [Link.incoming("kw", "a"), Link.outgoing("kw", "b")]),
        "C": (norm([0, 1, 0]), [Link.incoming("kw", "b"), Link.incoming("kw", "shared")]),
    }
    store = await build(backend, nodes)
    stats = TraversalStats()
    assert [h.node.id for h in await store.asearch("q", k=1, stats=stats)] == ["A"]
    assert stats.tag_queries == 0
    stats = TraversalStats()
    assert [h.node.id for h in await store.asearch("q", k=2, stats=stats)] == ["A", "C"]
    assert stats.tag_queries == 2


async def test_candidate_found_again_by_a_shorter_path_takes_the_shorter_depth(backend):
    # R1 is selected, then Y (reached from it), then X, found from Y at the depth limit and
    # so not expanded.  R2 then finds X one hop from a root: X takes depth 1 and, though
    # already selected, is expanded, which finds Z.  (Without hop damping, so that X, two
    # hops from R1, inherits R1's relevance whole and is selected before R2.)
    store = await build(
        backend,
        {
            "R1": (norm([0.9, 0, 0.436]), [Link.outgoing("kw", "a")]),
            "R2": (norm([0.85, 0, 0.527]), [Link.outgoing("kw", "c")]),
            "Y": (norm([0.5, 0, -0.866]), [Link.incoming("kw", "a"), Link.outgoing("kw", "b")]),
            "X": (
                norm([0.1, 0, 0.995]),
                [Link.incoming("kw", "b"), Link.incoming("kw", "c"), Link.outgoing("kw", "d")],
            ),
            "Z": ([0, 1, 0], [Link.incoming("kw", "d")]),
        },
    )
    for search in (store.asearch, store.ammr_traversal_search):
        hits = await search("q", k=5, depth=2, fetch_k=2, lambda_mult=1.0, damping=1.0)
        reached = {h.node.id: (h.depth, h.via) for h in hits}
        assert [h.node.id for h in hits] == ["R1", "Y", "X", "R2", "Z"]
        assert reached["X"] == (1, ("kw", "c"))
        assert reached["Z"] == (2, ("kw", "d"))


async def test_step_cap_keeps_the_most_similar_new_candidates(backend):
    spokes = {
        f"N{i}": (norm([1 - 0.05 * i, 1, 0]), [Link.incoming("kw", f"t{i}")]) for i in range(8)
    }
    hub = {"H": (Q, [Link.outgoing("kw", f"t{i}") for i in range(8)])}
    store = await build(backend, hub | spokes)
    stats = TraversalStats()
    capped = {"depth": 1, "fetch_k": 1, "adjacent_k": 5, "lambda_mult": 1.0}
    capped["max_candidates_per_step"] = 3
    hits = await store.ammr_traversal_search("q", k=4, stats=stats, **capped)
    assert [h.node.id for h in hits] == ["H", "N0", "N1", "N2"]
    assert stats.candidates == 4
    # Asked for more than the step admitted, the search widens its roots to fill k.
    hits = await store.ammr_traversal_search("q", k=10, **capped)
    assert [(h.node.id, h.depth) for h in hits] == [
        ("H", 0),
        *((f"N{i}", 1) for i in range(3)),
        *((f"N{i}", 0) for i in range(3, 8)),
    ]
    uncapped = await store.ammr_traversal_search(
        "q", k=10, depth=1, fetch_k=1, adjacent_k=8, lambda_mult=1.0
    )
    assert len(uncapped) == 9  # the default cap, max(fetch_k, adjacent_k), admits a whole step


async def test_filter_applies_to_roots_and_neighbours(backend):
    nodes = {
        "A": (Q, [Link.bidir("kw", "t")]),
        "B": (norm([0.5, 1, 0]), [Link.bidir("kw", "t")]),
        "C": (norm([0.4, 1, 0]), [Link.bidir("kw", "t")]),
    }
    store = await build(
        backend, nodes, metadata={"A": {"lang": "en"}, "B": {"lang": "fr"}, "C": {"lang": "en"}}
    )
    hits = await store.atraversal_search("q", k=2, start_k=1, depth=1, filter={"lang": "en"})
    assert [h.node.id for h in hits] == ["A", "C"]
    mmr = await store.ammr_traversal_search("q", k=5, fetch_k=1, filter={"lang": "en"})
    assert {h.node.id for h in mmr} == {"A", "C"}


async def test_initial_roots_start_the_walk_without_being_returned(backend):
    store = await build(backend, chain())
    hits = await store.ammr_traversal_search(
        "q", k=5, depth=2, fetch_k=0, initial_roots=["B"], lambda_mult=1.0
    )
    assert [(h.node.id, h.depth) for h in hits] == [("C", 1), ("D", 2)]


async def test_sync_methods_work_inside_a_running_event_loop(backend):
    store = await build(backend, chain())
    assert asyncio.get_running_loop()
    assert [h.node.id for h in store.traversal_search("q", k=2, depth=1)] == ["A", "B"]
    assert [h.node.id for h in store.search("q", k=2)] == ["A", "B"]
    assert [h.node.id for h in store.mmr_traversal_search("q", k=2, fetch_k=1)] == ["A", "B"]


def test_a_failed_sync_call_leaves_the_next_one_working():
    async def fail() -> None:
        raise InvalidInputError("bad")

    with pytest.raises(InvalidInputError, match="bad"):
        run_sync(fail())
    assert run_sync(asyncio.sleep(0, result=7)) == 7


def test_a_failed_sync_call_raises_its_own_error_alone():
    """Its traceback opened with "RuntimeError: no running event loop", the probe for a
    running loop, before "During handling of the above exception…" and the real error."""

    async def fail() -> None:
        raise InvalidInputError("bad")

    with pytest.raises(InvalidInputError) as raised:
        run_sync(fail())
    assert raised.value.__context__ is None


def test_sync_calls_from_short_lived_threads_leave_no_loop_open():
    def call() -> None:
        assert run_sync(asyncio.sleep(0, result=3)) == 3

    def open_files() -> int:
        return len(os.listdir("/proc/self/fd"))

    call()  # this thread's loop, kept
    before = open_files()
    for _ in range(20):
        thread = threading.Thread(target=call)
        thread.start()
        thread.join()
        del thread
    gc.collect()
    assert open_files() <= before  # each loop held an epoll handle and a socket pair


async def test_reading_ahead_changes_no_result_and_saves_round_trips(backend):
    """Random graphs of mention-like (out/in) and keyword-like (bidir) tags: each search
    returns the same hits with and without read-ahead, in fewer tag waves overall."""
    rng = np.random.default_rng(5)
    nodes = {}
    for i in range(60):
        links = [Link.incoming("m", f"t{i}"), Link.bidir("kw", f"k{rng.integers(12)}")]
        links += [Link.outgoing("m", f"t{j}") for j in rng.choice(60, 3, replace=False)]
        nodes[f"n{i}"] = (norm(rng.standard_normal(3)), links)
    store = await build(backend, nodes)
    queries = [norm(query) for query in rng.standard_normal((8, 3))]
    waves, found = {}, {}
    for read_ahead in (0, 16):
        backend.read_ahead = read_ahead
        found[read_ahead], waves[read_ahead] = [], 0
        for query in queries:
            stats = TraversalStats()
            hits = await store.asearch(query, k=6, stats=stats)
            found[read_ahead].append([(h.node.id, round(h.score, 6), h.depth, h.via) for h in hits])
            waves[read_ahead] += stats.tag_waves
    assert found[16] == found[0]
    assert waves[16] < waves[0]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"k": 0}, "k must be between"),
        ({"k": -1}, "k must be between"),
        ({"k": 10**9}, "k must be between"),
        ({"depth": -1}, "depth must be between"),
        ({"depth": 1000}, "depth must be between"),
        ({"fetch_k": 0}, "fetch_k must be between"),
        ({"adjacent_k": 0}, "adjacent_k must be between"),
        ({"lambda_mult": 1.5}, "lambda_mult must be between 0 and 1"),
        ({"lambda_mult": -0.1}, "lambda_mult must be between 0 and 1"),
        ({"filter": {"a": [1]}}, "filter value for 'a'"),
        ({"filter": "a=1"}, "filter must be a dict"),
        ({"structural_kinds": "hierarchy"}, "structural_kinds must be a collection"),
        ({"structural_kinds": [""]}, "structural_kinds must hold non-empty strings"),
        ({"structural_kinds": [["hierarchy"]]}, "structural_kinds must hold non-empty strings"),
    ],
)
async def test_bad_search_parameters_are_refused(backend, options, message):
    store = await build(backend, chain())
    for search in (store.ammr_traversal_search, store.asearch):
        with pytest.raises(InvalidInputError, match=message):
            await search("q", **options)


def test_default_search_strategy_is_kept_per_k_and_options_apply_on_top():
    assert search_strategy(5) is search_strategy(5)
    assert [search_strategy(k).fetch_k for k in (2, 5, 20)] == [ROOTS, 5, 20]
    assert search_strategy(5, lambda_mult=1.0).lambda_mult == 1.0
    assert search_strategy(5).lambda_mult == DEFAULT.lambda_mult
    assert search_strategy(5, fetch_k=3).fetch_k == 3
    # The step cap follows the options it derives from, not the kept strategy's.
    assert search_strategy(5, adjacent_k=30).max_candidates_per_step == 30
    for bad in (0, True, "5"):
        with pytest.raises(InvalidInputError, match="k must be"):
            search_strategy(bad)


async def test_animals_connect_through_shared_habitat(backend, shared_data):
    """Real data: 99 animals with their full metadata, linked by habitat; hashed vectors."""
    rows = [json.loads(line) for line in (shared_data / "graph-rag" / "animals.jsonl").open()]
    habitat = {row["id"]: row["metadata"].get("habitat") for row in rows}
    store = GraphStore(KeyedEmbeddings(dimension=16), backend)
    await store.aadd_nodes(
        Node(
            row["id"],
            row["text"],
            row["metadata"],
            frozenset([Link.bidir("habitat", habitat[row["id"]])] if habitat[row["id"]] else []),
        )
        for row in rows
    )
    root = next(row for row in rows if habitat[row["id"]])
    mates = {node_id for node_id, h in habitat.items() if h == habitat[root["id"]]}
    hits = await store.atraversal_search(
        root["text"], k=len(mates), start_k=1, depth=1, adjacent_k=200
    )
    assert hits[0].node.id == root["id"]
    assert hits[0].node.metadata == root["metadata"]
    assert {h.node.id for h in hits} == mates
    assert all(h.via == ("habitat", habitat[root["id"]]) for h in hits[1:])


async def test_bridge_passage_dissimilar_to_the_query_is_returned(backend):
    # A names B; B shares nothing with the query.  Near copies of A crowd plain similarity.
    nodes = {
        "A": (Q, [Link.outgoing("mention", "b")]),
        "B": ([0, 0, 1], [Link.incoming("mention", "b")]),
    } | {f"D{i:02d}": (norm([0.9 - 0.03 * i, 0.45, 0]), []) for i in range(12)}
    store = await build(backend, nodes)
    assert [h.node.id for h in await store.asimilarity_search("q", k=2)] == ["A", "D00"]
    hits = await store.asearch("q", k=2)
    assert [(h.node.id, h.depth, h.via) for h in hits] == [
        ("A", 0, None),
        ("B", 1, ("mention", "b")),
    ]
    assert hits[1].similarity == pytest.approx(0.0, abs=1e-6)
    assert hits[1].score == pytest.approx(1.0, abs=1e-5)  # a one-passage tag passes it whole
    mmr = await store.ammr_traversal_search("q", k=2)
    assert [h.node.id for h in mmr] == ["A", "B"]


async def test_a_page_cited_is_cited_whole_however_many_passages_it_was_split_into(backend):
    """A cites page B, split into three passages, and C, a page of one passage: each
    passage of B took a third of A's relevance where C took it whole.  B's best passage
    now takes it whole, and B's others do not crowd out the next nearest passage."""
    nodes = {
        "A.txt#0": (Q, [Link.outgoing("mention", "b"), Link.outgoing("mention", "c")]),
        "B.txt#0": (norm([0.1, 0, 1]), [Link.incoming("mention", "b")]),
        "B.txt#1": (norm([0.05, 0, 1]), [Link.incoming("mention", "b")]),
        "B.txt#2": (norm([0.0, 0, 1]), [Link.incoming("mention", "b")]),
        "C.txt#0": (norm([0.1, 1, 0]), [Link.incoming("mention", "c")]),
    } | {f"D{i:02d}": (norm([0.9 - 0.03 * i, 0.45, 0]), []) for i in range(12)}
    store = await build(backend, nodes)
    hits = {h.node.id: h for h in await store.asearch("q", k=3)}
    assert set(hits) == {"A.txt#0", "B.txt#0", "C.txt#0"}
    assert hits["B.txt#0"].score == pytest.approx(hits["C.txt#0"].score, abs=1e-5)
    assert hits["B.txt#0"].score == pytest.approx(1.0, abs=1e-5)
    fourth = [h.node.id for h in await store.asearch("q", k=4)][3]
    assert fourth == "D00"


async def test_a_page_longer_than_a_tag_read_is_still_cited_whole(backend):
    """A cites page B, split into eight passages: more than a search reads of a tag
    (`adjacent_k`, 5), so B's pages were not counted and its best passage took an eighth of
    A's relevance, below the next nearest passages (a Git manual's hyperlinks to pages of
    20-300 passages passed almost nothing).  Its pages are counted now, read or not."""
    nodes = {"A.txt#0": (Q, [Link.outgoing("mention", "b")])}
    nodes |= {
        f"B.txt#{i}": (norm([0.1 - 0.01 * i, 0, 1]), [Link.incoming("mention", "b")])
        for i in range(8)
    }
    nodes |= {f"D{i:02d}": (norm([0.9 - 0.03 * i, 0.45, 0]), []) for i in range(12)}
    store = await build(backend, nodes)
    stats = TraversalStats()
    hits = {h.node.id: h for h in await store.asearch("q", k=2, stats=stats)}
    assert set(hits) == {"A.txt#0", "B.txt#0"}
    assert hits["B.txt#0"].score == pytest.approx(1.0, abs=1e-5)
    # Cassandra reads a small tag whole, and counts its pages with the read.
    assert stats.page_counts == (0 if isinstance(backend, CassandraStorage) else 1)
    third = [h.node.id for h in await store.asearch("q", k=3)][2]
    assert third == "D00"  # B's other passages take a passage's share


async def test_a_section_path_is_not_counted_in_pages(backend):
    """A section's passages link in on its path and none links out on it, so a hierarchy
    tag looked like a citation of pages: the storage counted its pages (on Cassandra every
    key of a chapter's tag, on every search), though a structural hop passes nothing."""
    section = Link.incoming("hierarchy", "p:book.txt/Chapter 1")
    nodes = {
        f"book.txt#{i}": (norm([1.0, 0.1 * i, 0.2]), [section, Link.outgoing("hierarchy", "c")])
        for i in range(8)
    }
    nodes |= {"c": (norm([0.5, 0.5, 0.5]), [Link.incoming("hierarchy", "c")])}
    nodes["book.txt#0"] = (
        norm([1.0, 0.0, 0.2]),
        [Link.outgoing("hierarchy", "p:book.txt/Chapter 1")],
    )
    store = await build(backend, nodes)
    stats = TraversalStats()
    assert len(await store.asearch("q", k=5, stats=stats)) == 5
    assert stats.tag_queries > 0
    assert stats.page_counts == 0


async def test_copies_of_one_text_take_one_place(backend):
    """A page's footer or an included paragraph, the same text on every page, took a place
    per copy (a Git manual's `--textconv` paragraph, in two pages, came second and fifth).
    One copy is returned; `debug` shows the others as copies of it."""
    footer = norm([0.9, 0.4, 0.0])
    nodes = {f"F{i}": (footer, [Link.incoming("kw", "page")]) for i in range(3)}
    nodes |= {f"P{i}": (norm([1.0, 0.1 * i, 0.5]), [Link.outgoing("kw", "page")]) for i in range(5)}
    store = await build(backend, nodes)
    stats = TraversalStats(keep_unselected=True)
    hits = [h.node.id for h in await store.asearch("q", k=4, stats=stats)]
    assert hits.count("F0") + hits.count("F1") + hits.count("F2") == 1
    assert len(hits) == 4
    copies = {c.id: c.copy_of for c in stats.unselected if c.copy_of is not None}
    kept = next(node_id for node_id in hits if node_id.startswith("F"))
    assert copies == {f"F{i}": kept for i in range(3) if f"F{i}" != kept}
    assert all(c.mmr_score is None for c in stats.unselected if c.copy_of is not None)
    mmr = [h.node.id for h in await store.ammr_traversal_search("q", k=4)]
    assert len([node_id for node_id in mmr if node_id.startswith("F")]) == 1


@pytest.mark.parametrize("k", [ROOTS, ROOTS + 2])
async def test_without_links_the_default_searches_return_the_nearest_passages(backend, k):
    """Five near copies of one answer lead; D, less similar and unlike them, comes sixth.
    With ten roots MMR traded the fifth copy for D at k = 5, below plain similarity; from
    k = `ROOTS` up the roots are the k nearest and only a link could replace one."""
    nodes = {f"A{i}": (norm([1.0, 0.484 + 0.027 * i, 0]), []) for i in range(5)}
    nodes |= {"D": (norm([1.0, -0.62, 0]), [])}
    nodes |= {f"F{i}": (norm([0.3, 0.2 * i, 1.0]), []) for i in range(6)}
    store = await build(backend, nodes)
    nearest = {h.node.id for h in await store.asimilarity_search("q", k=k)}
    assert len(nearest) == k
    assert {h.node.id for h in await store.asearch("q", k=k)} == nearest
    assert {h.node.id for h in await store.ammr_traversal_search("q", k=k)} == nearest
    wider = {h.node.id for h in await store.asearch("q", k=ROOTS, fetch_k=10)}
    assert "D" in wider  # what ten roots returned: MMR's diversity at work among the roots


async def test_a_search_with_fewer_roots_than_k_still_returns_k(backend):
    """`fetch_k` below k (a user's option) used to return only what those roots led to:
    now, when the candidates run out, the next-nearest passages join as roots; fewer than
    k come back only when fewer pass the filter."""
    nodes = {f"P{i}": (norm([1.0, 0.2 * i, 0]), []) for i in range(7)}
    metadata = {f"P{i}": {"half": i % 2} for i in range(7)}
    store = await build(backend, nodes, metadata)
    nearest = [h.node.id for h in await store.asimilarity_search("q", k=5)]
    for search in (store.asearch, store.ammr_traversal_search):
        hits = await search("q", k=5, fetch_k=2, lambda_mult=1.0)
        assert [h.node.id for h in hits] == nearest
        odd = await search("q", k=5, fetch_k=1, filter={"half": 1})
        assert sorted(h.node.id for h in odd) == ["P1", "P3", "P5"]


async def test_a_root_raised_by_a_link_says_which_link_raised_it(backend):
    """A root another root names inherits that root's relevance; its hit used to report
    depth 0 and no path, so its score (above its similarity) had no explanation."""
    nodes = {
        "A": (Q, [Link.outgoing("mention", "b")]),
        "B": (norm([0.5, 0.0, 1.0]), [Link.incoming("mention", "b")]),
        "C": (norm([0.8, 1.0, 0.0]), []),
    }
    store = await build(backend, nodes)
    hits = {hit.node.id: hit for hit in await store.asearch("q", k=3)}
    assert (hits["B"].depth, hits["B"].path, hits["B"].raised_by) == (0, (), (("mention", "b"),))
    assert hits["B"].score == pytest.approx(1.0, abs=1e-5)
    assert hits["B"].similarity == pytest.approx(0.447, abs=1e-3)
    assert hits["A"].raised_by == hits["C"].raised_by == ()


async def test_a_raised_root_that_lost_says_which_link_raised_it(backend):
    """Listed as not returned, it said `[root]` with a score above its similarity."""
    nodes = {
        "C": (norm([0.9, 0.436, 0.0]), []),
        "A": (norm([0.85, 0.0, 0.527]), [Link.outgoing("mention", "b")]),
        "B": (norm([0.8, 0.6, 0.0]), [Link.incoming("mention", "b")]),  # much like C
        "D": (norm([0.7, 0.0, -0.714]), []),
    }
    store = await build(backend, nodes)
    stats = TraversalStats(keep_unselected=True)
    hits = await store.asearch("q", k=3, lambda_mult=0.5, stats=stats)
    assert [hit.node.id for hit in hits] == ["C", "A", "D"]
    [lost] = stats.unselected
    assert (lost.id, lost.depth, lost.raised_by) == ("B", 0, (("mention", "b"),))
    assert lost.score == pytest.approx(0.85, abs=1e-3)
    assert lost.similarity == pytest.approx(0.8, abs=1e-3)


async def test_a_hub_tag_does_not_flood_the_results(backend):
    # A links to a specific passage B and to a tag twenty other passages share.
    hub = {f"H{i:02d}": (norm([0.3, 0.95, 0.01 * i]), [Link.bidir("kw", "hub")]) for i in range(20)}
    nodes = hub | {
        "A": (Q, [Link.bidir("kw", "hub"), Link.outgoing("mention", "b")]),
        "B": ([0, 0, 1], [Link.incoming("mention", "b")]),
        "D1": (norm([0.6, 0, 0.8]), []),
        "D2": (norm([0.55, 0, 0.835]), []),
    }
    store = await build(backend, nodes)
    stats = TraversalStats(keep_unselected=True)
    hits = await store.asearch("q", k=4, stats=stats)
    assert [h.node.id for h in hits] == ["A", "B", "D1", "D2"]
    hub_scores = [c.score for c in stats.unselected if c.id.startswith("H")]
    assert hub_scores  # considered, and lost: 1/21 of A's relevance is little
    assert max(hub_scores) < 0.35


async def test_a_cited_passage_is_not_redundant_with_the_passage_citing_it(backend):
    # A singer's page names her song; the song's page reads like the singer's (and not like
    # the query), while an unrelated passage is nearly as relevant and unlike the singer.
    nodes = {
        "singer": (norm([0.8, 0.6, 0]), [Link.outgoing("mention", "song")]),
        "song": (norm([0.35, 0.937, 0]), [Link.incoming("mention", "song")]),
        "rival": (norm([0.79, 0, 0.613]), []),
    }
    store = await build(backend, nodes)
    hits = await store.asearch("q", k=2, fetch_k=2)
    assert [(h.node.id, h.via) for h in hits] == [
        ("singer", None),
        ("song", ("mention", "song")),
    ]
    assert hits[1].mmr_score == pytest.approx(0.9 * hits[0].score, abs=1e-5)  # no redundancy
    mmr = await store.ammr_traversal_search("q", k=2, fetch_k=2)
    assert [h.node.id for h in mmr] == ["singer", "song"]


@pytest.mark.parametrize("shared", [True, False])
async def test_a_shared_tag_brings_passages_in_but_does_not_reorder_the_nearest(backend, shared):
    # A and B both carry keyword x (shared), or A names B (a citation).  C is nearer the
    # query than B; E, far from it, carries x too and is no root.
    link_a = Link.bidir("kw", "x") if shared else Link.outgoing("kw", "x")
    link_b = Link.bidir("kw", "x") if shared else Link.incoming("kw", "x")
    nodes = {
        "A": (norm([0.9, 0.436, 0]), [link_a]),
        "B": (norm([0.6, 0, 0.8]), [link_b]),
        "C": (norm([0.7, 0, -0.714]), []),
        "E": (norm([0.2, -0.98, 0]), [Link.bidir("kw", "x")] if shared else []),
    }
    store = await build(backend, nodes)
    stats = TraversalStats(keep_unselected=True)
    hits = await store.asearch("q", k=2, fetch_k=3, stats=stats)
    if shared:  # B keeps its own similarity: the shared keyword says what its vector does
        assert [h.node.id for h in hits] == ["A", "C"]
        lost = {c.id: c for c in stats.unselected}
        assert lost["B"].score == pytest.approx(0.6, abs=1e-5)
        # E was brought in over x with a third of A's relevance (x leads to 3 passages).
        assert (lost["E"].depth, lost["E"].path) == (1, (("kw", "x"),))
        assert lost["E"].score == pytest.approx(0.9 / 3 + 0.2 * 2 / 3, abs=1e-3)
    else:  # A names B: B inherits A's relevance
        assert [h.node.id for h in hits] == ["A", "B"]
        assert hits[1].score == pytest.approx(hits[0].score, abs=1e-5)


async def test_a_parent_section_ranks_by_its_own_similarity(backend):
    """Every passage of a section links up to the section's introduction: that parent link
    is the same for all of them, whatever the query.  It used to pass the introduction the
    whole relevance of the child found, so the introduction took second place from passages
    nearer the query (on the README's demo sample, second place for seven questions of ten)."""
    sections = HierarchyLinkExtractor(parent_links=True, child_links=True)
    paths = {"intro": ["doc", "ch"], "S1": ["doc", "ch", "s1"], "S2": ["doc", "ch", "s2"]}
    links = {node_id: list(sections.extract_one(path)) for node_id, path in paths.items()}
    nodes = {
        "S1": (Q, links["S1"]),
        "N": (norm([0.8, 0.6, 0]), []),
        "S2": (norm([0.6, -0.8, 0]), links["S2"]),
        "intro": (norm([0.3, 0, 0.954]), links["intro"]),
    } | {f"F{i}": (norm([0.5 - 0.05 * i, 0, -0.87]), []) for i in range(2)}  # roots 4 and 5
    store = await build(backend, nodes)
    nearest = [h.node.id for h in await store.asimilarity_search("q", k=2)]
    stats = TraversalStats(keep_unselected=True)
    hits = await store.asearch("q", k=2, stats=stats)
    assert [h.node.id for h in hits] == nearest == ["S1", "N"]
    assert all(h.raised_by == () for h in hits)
    intro = next(c for c in stats.unselected if c.id == "intro")
    assert (intro.depth, intro.path) == (1, (("hierarchy", "p:doc/ch"),))
    assert intro.score == pytest.approx(0.3, abs=1e-3)  # its own similarity: nothing inherited
    # Nor is it cited by S1: its likeness to S1 (0.3), not only to N (0.24), is redundancy.
    assert intro.mmr_score == pytest.approx(0.9 * 0.3 - 0.1 * 0.3, abs=1e-3)
    # As a citation (the rule before), the introduction inherits S1's relevance and wins.
    cited = await store.asearch("q", k=2, structural_kinds=[])
    assert [(h.node.id, h.depth) for h in cited] == [("S1", 0), ("intro", 1)]


async def test_traversal_search_lists_the_passages_it_reached_and_did_not_return(backend):
    """`keep_unselected` used to leave `unselected` empty for `traversal_search`."""
    nodes = {
        "A": (Q, [Link.outgoing("kw", "x")]),
        "B": (norm([0.5, 0.866, 0]), [Link.incoming("kw", "x")]),
        "C": (norm([0.2, 0.98, 0]), [Link.incoming("kw", "x")]),
        "D": (norm([0.9, 0, 0.436]), []),
    }
    store = await build(backend, nodes)
    stats = TraversalStats(keep_unselected=True)
    hits = await store.atraversal_search("q", k=2, start_k=1, stats=stats)
    assert [h.node.id for h in hits] == ["A", "B"]
    lost = [(c.id, c.depth, c.path, c.mmr_score) for c in stats.unselected]
    assert lost == [("C", 1, (("kw", "x"),), None), ("D", 0, (), None)]  # D: a nearest passage
    assert stats.unselected[0].score == stats.unselected[0].similarity == pytest.approx(0.2, 1e-3)


@pytest.mark.parametrize("search", ["search", "mmr_traversal_search", "traversal_search"])
async def test_every_search_counts_what_it_returns_among_its_candidates(backend, search):
    """The nearest passages that fill a traversal search's result were left out of its
    `candidates` (6 unlinked passages, k = 4: 4 returned of 2 candidates)."""
    nodes = {name: (norm([1, 0.1 * n, 0]), []) for n, name in enumerate("ABCDEF")}
    store = await build(backend, nodes)
    stats = TraversalStats(keep_unselected=True)
    hits = await getattr(store, f"a{search}")("q", k=4, stats=stats)
    assert [h.node.id for h in hits] == ["A", "B", "C", "D"]
    assert stats.candidates == len(hits) + len(stats.unselected)
    assert {c.id for c in stats.unselected} <= {"E", "F"}


@pytest.mark.parametrize("search", ["search", "mmr_traversal_search", "traversal_search"])
async def test_a_passage_written_away_mid_search_is_replaced_not_returned(backend, search):
    """A graph search reads the passages it returns at its end.  One that another writer
    deleted, or rewrote to fail the filter, after the search found it came back anyway
    (failing the filter) or left the result short of k; the next candidate takes its place."""
    mention = Link("mention", "in", "A")
    nodes = {
        "R": (Q, [Link("mention", "out", "A")]),
        "A": ([0.0, 1.0, 0.0], [mention]),  # dissimilar, reached only over R's mention
        **{f"F{i}": (norm([1.0, 0.5 + 0.1 * i, 0.0]), []) for i in range(6)},
    }
    store = await build(backend, nodes, metadata={node_id: {"status": "a"} for node_id in nodes})
    read = backend.get
    before = await getattr(store, f"a{search}")("q", k=2, filter={"status": "a"})
    assert [hit.node.id for hit in before] == ["R", "A"]

    async def read_after_a_write(ids):
        backend.get = read  # type: ignore[method-assign]
        await store.aadd_nodes([Node("A", "text A", {"status": "b"}, frozenset([mention]))])
        return await read(ids)

    backend.get = read_after_a_write  # type: ignore[method-assign]
    hits = await getattr(store, f"a{search}")("q", k=2, filter={"status": "a"})
    assert [hit.node.id for hit in hits] == ["R", "F0"]
    await store.aadd_nodes([Node("A", "text A", {"status": "a"}, frozenset([mention]))])
    assert backend.get == read

    async def read_after_a_delete(ids):
        backend.get = read  # type: ignore[method-assign]
        await store.adelete(["A"])
        return await read(ids)

    backend.get = read_after_a_delete  # type: ignore[method-assign]
    hits = await getattr(store, f"a{search}")("q", k=2, filter={"status": "a"})
    assert [hit.node.id for hit in hits] == ["R", "F0"]


@pytest.mark.parametrize("search", ["search", "mmr_traversal_search", "traversal_search"])
async def test_k_passages_come_back_when_a_concurrent_delete_took_one_of_the_nearest(search):
    """`traversal_search` replaced such a passage only from what it had reached, so with no
    link leading further it came back one short.  (Embedded: Cassandra reads the roots'
    rows with the roots, so a root is returned as it was then.)"""
    from graphstore.embedded import EmbeddedStorage

    backend = EmbeddedStorage(":memory:")
    store = await build(backend, {f"n{i}": (norm([1.0, 0.1 * i, 0.0]), []) for i in range(6)})
    read = backend.get

    async def read_after_a_delete(ids):
        backend.get = read  # type: ignore[method-assign]
        await store.adelete(["n0"])
        return await read(ids)

    backend.get = read_after_a_delete  # type: ignore[method-assign]
    hits = await getattr(store, f"a{search}")("q", k=5)
    assert [hit.node.id for hit in hits] == ["n1", "n2", "n3", "n4", "n5"]
