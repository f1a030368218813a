"""The traversal engine: finds edges at query time through the `Storage` interface only.

Every search remembers which `(kind, tag)` pairs it has visited, so each tag is queried
once per search however many expanded nodes link out to it, and the tags of one expansion
are queried in one concurrent wave.  `depth` means the same everywhere: the largest number
of tag hops between a root and a returned node.

A filter (`where`) applies to every storage query, roots and tag steps alike, so a passage
that fails it is never a candidate and no path runs through it: a passage reachable only
over a filtered-out one is not reached.  Initial roots that fail it are not expanded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from graphstore.filters import EVERYTHING, Condition, matches
from graphstore.links import TagKey, outgoing_tags
from graphstore.mmr import MmrSelector, Selection
from graphstore.nodes import Candidate, Hit, TagHit, Vector, page_of
from graphstore.relevance import (
    best_paths,
    cites_pages,
    hop_share,
    is_citation,
    page_leads,
    path_relevance,
    tag_weight,
)
from graphstore.storage import Storage
from graphstore.strategy import MAX_K, Strategy


@dataclass
class TraversalStats:
    """What a search cost (backend queries, candidates considered) and, when
    `keep_unselected` is set, the candidates it considered and did not return."""

    vector_searches: int = 0
    tag_queries: int = 0
    tag_waves: int = 0
    """Storage calls for tags: each reads its tags concurrently (one round trip's worth)."""
    page_counts: int = 0
    """Tags whose pages the storage counted (`Storage.tag_pages`)."""
    candidates: int = 0
    keep_unselected: bool = False
    unselected: list[Candidate] = field(default_factory=list)


class _Reached(NamedTuple):
    """How a search reached a node (a named tuple: one is made per candidate)."""

    depth: int
    path: tuple[TagKey, ...]
    similarity: float
    outgoing: frozenset[TagKey]

    @property
    def via(self) -> TagKey | None:
        return self.path[-1] if self.path else None

    def step(self, tag: TagKey, hit: TagHit) -> _Reached:
        """How `hit` is reached over `tag` from the node reached this way."""
        return _Reached(self.depth + 1, (*self.path, tag), hit.similarity, hit.outgoing)


async def _read_hits(
    storage: Storage,
    order: Sequence[str],
    reached: dict[str, _Reached],
    where: Condition,
    *,
    selections: dict[str, Selection] | None = None,
    raised: Mapping[str, tuple[TagKey, ...]] | None = None,
) -> list[Hit]:
    """Read the nodes of the result once, at the end, with `get` (a hit may name a node gone
    since, `Storage.search_hits`), and attach how each was reached (and, in `raised`, which
    link raised the relevance of a node found before it).

    A node deleted since the search found it, or written since so that it fails `where`, is
    left out: the caller takes the next candidates in its place (`_read_until`).  (Rows are
    read after the ranking, so a concurrent write can come between: the embedded backend
    ranks with one version of its index, `Storage.reading`, and Cassandra's reads are no
    snapshot.)"""
    nodes = {item.node.id: item.node for item in await storage.get(order)} if order else {}
    if nodes and where != EVERYTHING:
        nodes = {node_id: node for node_id, node in nodes.items() if matches(where, node.metadata)}
    chosen, raised_by = selections or {}, raised or {}
    hits = []
    for node_id in order:
        if node_id not in nodes:
            continue
        how, selection = reached[node_id], chosen.get(node_id)
        hits.append(
            Hit(
                node=nodes[node_id],
                similarity=how.similarity,
                depth=how.depth,
                via=how.via,
                mmr_score=None if selection is None else selection.mmr_score,
                score=how.similarity if selection is None else selection.relevance,
                path=how.path,
                raised_by=raised_by.get(node_id, ()),
            )
        )
    return hits


async def _read_until(
    storage: Storage,
    candidates: Sequence[str],
    k: int,
    reached: dict[str, _Reached],
    *,
    where: Condition,
) -> list[Hit]:
    """The first `k` of `candidates` that `_read_hits` returns, in order: `k` are read, and
    more only in place of those a concurrent write deleted or made fail `where`."""
    hits: list[Hit] = []
    start = 0
    while len(hits) < k and start < len(candidates):
        batch = candidates[start : start + k - len(hits)]
        start += len(batch)
        hits += await _read_hits(storage, batch, reached, where)
    return hits


async def _new_roots(
    storage: Storage,
    query: Vector,
    count: int,
    where: Condition,
    reached: dict[str, _Reached],
    *,
    stats: TraversalStats,
) -> list[TagHit]:
    """Those of the `count` passages nearest `query` not `reached` yet, recorded there as
    roots: what a search adds when what it reached runs out."""
    stats.vector_searches += 1
    nearest = await storage.search_hits(query, min(count, MAX_K), where)
    fresh = [hit for hit in nearest if hit.id not in reached]
    for hit in fresh:
        reached[hit.id] = _Reached(0, (), hit.similarity, hit.outgoing)
    return fresh


Paths = tuple[tuple[int, float], ...]
"""The ways a candidate's relevance reached it, as (hops, relevance) pairs, fewest hops
first (`relevance.best_paths`); its relevance is the last one's (`_Search.inherited`)."""


class Traversal:
    """Runs searches against one storage with a bound on concurrent tag queries."""

    def __init__(self, storage: Storage, concurrency: int = 16) -> None:
        self.storage = storage
        self._concurrency = concurrency

    async def _search_tags(
        self,
        tags: Sequence[TagKey],
        query: Vector,
        adjacent_k: int,
        where: Condition,
        stats: TraversalStats,
    ) -> tuple[list[list[TagHit]], dict[TagKey, int], dict[TagKey, int]]:
        """Each tag's hits, and the sizes and pages the storage learned from the same reads."""
        stats.tag_queries += len(tags)
        stats.tag_waves += 1
        sizes: dict[TagKey, int] = {}
        pages: dict[TagKey, int] = {}
        found = await self.storage.search_tags(
            tags, query, adjacent_k, where, self._concurrency, sizes=sizes, pages=pages
        )
        return found, sizes, pages

    async def traversal_search(
        self,
        query: Vector,
        *,
        k: int,
        start_k: int,
        depth: int,
        adjacent_k: int,
        where: Condition,
        stats: TraversalStats | None = None,
    ) -> list[Hit]:
        """Breadth-first from the `start_k` nearest nodes, up to `depth` hops, `adjacent_k`
        per tag; the first `k` nodes by depth, then similarity to the query.

        When fewer than `k` are reached, the next-nearest nodes fill the result.
        """
        with self.storage.reading():  # one view of the store for the whole search
            stats = stats if stats is not None else TraversalStats()
            stats.vector_searches += 1
            nearest = await self.storage.search_hits(query, max(k, start_k), where)
            reached = {
                root.id: _Reached(0, (), root.similarity, root.outgoing)
                for root in nearest[:start_k]
            }
            visited: set[TagKey] = set()
            frontier = list(reached)
            for hop in range(1, depth + 1):
                carrier: dict[TagKey, str] = {}
                for node_id in frontier:
                    for tag in reached[node_id].outgoing - visited:
                        carrier.setdefault(tag, node_id)
                if not carrier:
                    break
                tags = sorted(carrier)
                visited.update(tags)
                frontier = []
                found, _, _ = await self._search_tags(tags, query, adjacent_k, where, stats)
                for tag, tag_hits in zip(tags, found, strict=True):
                    path = (*reached[carrier[tag]].path, tag)
                    for hit in tag_hits:
                        if hit.id not in reached:
                            reached[hit.id] = _Reached(hop, path, hit.similarity, hit.outgoing)
                            frontier.append(hit.id)
            ranked = sorted(
                reached,
                key=lambda node_id: (reached[node_id].depth, -reached[node_id].similarity, node_id),
            )
            for root in nearest[start_k:]:
                if root.id not in reached:
                    reached[root.id] = _Reached(0, (), root.similarity, root.outgoing)
                    ranked.append(root.id)
            stats.candidates += len(reached)
            if stats.keep_unselected:
                stats.unselected = [
                    Candidate(node_id, how.similarity, how.similarity, None, how.depth, how.path)
                    for node_id in ranked[k:]
                    for how in [reached[node_id]]
                ]
            hits = await _read_until(self.storage, ranked, k, reached, where=where)
            lost = len(hits) < min(k, len(ranked))  # to a concurrent write
            while lost:  # the nearest passages not reached yet fill in
                fresh = await _new_roots(
                    self.storage, query, len(reached) + k, where, reached, stats=stats
                )
                if not fresh:
                    break
                stats.candidates += len(fresh)
                wanted = k - len(hits)
                refill = await _read_until(
                    self.storage,
                    [hit.id for hit in fresh],
                    wanted,
                    reached,
                    where=where,
                )
                hits += refill
                lost = len(refill) < min(wanted, len(fresh))
            return hits

    async def search(
        self,
        query: Vector,
        strategy: Strategy,
        *,
        where: Condition,
        initial_roots: Sequence[str] = (),
        stats: TraversalStats | None = None,
    ) -> list[Hit]:
        """Select `strategy.k` nodes by MMR over path-aware relevance (see `Strategy`).

        A candidate found again by a shorter path takes the shorter depth, and one already
        selected at the depth limit is then expanded.  Nodes adjacent to `initial_roots`
        start at depth 1 and inherit full relevance from them; the roots are not returned.
        """
        with self.storage.reading():
            return await _Search(self, query, strategy, where, stats).run(initial_roots)


class _Search:
    """The state of one `Traversal.search`: the candidate pool, visited tags, expansions."""

    def __init__(
        self,
        traversal: Traversal,
        query: Vector,
        strategy: Strategy,
        where: Condition,
        stats: TraversalStats | None,
    ) -> None:
        self.traversal = traversal
        self.storage = traversal.storage
        self.query = query
        self.strategy = strategy
        self.where = where
        self.stats = stats if stats is not None else TraversalStats()
        self.selector = MmrSelector(query, strategy.lambda_mult, strategy.score_threshold)
        self.reached: dict[str, _Reached] = {}
        self.anchors: set[str] = set()
        """Initial roots: expanded like candidates with full relevance, never selected."""
        self.visited: set[TagKey] = set()
        self.expanded: set[str] = set()
        self.selected: dict[str, Selection] = {}
        self.tag_reads: dict[TagKey, tuple[list[TagHit], int, int, frozenset[str]]] = {}
        """Tags read (ahead or for an expansion) and not yet applied: their hits, size (in
        passages) and pages, and the hits that lead their page (`relevance.page_leads`)."""
        self.raised: dict[str, tuple[TagKey, ...]] = {}
        """Open candidates whose relevance a link found later raised: that link's path."""
        self.inherited: dict[str, Paths] = {}
        """Candidates whose relevance may have come over more hops than their depth (a root
        that a citation raised, a passage found again in fewer hops, and what they lead to):
        every way it came that may still pass on the most.  Damping counts the hops a
        relevance travelled, so a passage two hops from the one like the query never
        inherits its relevance whole, whether or not the passage between them is a root; and
        since each way is kept, a raise never lowers what a passage passes on."""

    def _relevance(self, node_id: str) -> float:
        return 1.0 if node_id in self.anchors else self.selector.relevance(node_id)

    def _passed_on(self, node_id: str) -> float:
        """How much relevance `node_id` passes on over a tag (before the tag's weight)."""
        damping, paths = self.strategy.damping, self.inherited.get(node_id)
        if paths is None:
            return hop_share(1.0, damping, self.reached[node_id].depth) * self._relevance(node_id)
        return max(hop_share(1.0, damping, hops) * relevance for hops, relevance in paths)

    def _through(
        self, paths: Paths, weight: float, similarity: float, depth: int
    ) -> tuple[float, Paths | None]:
        """The relevance of a passage with `similarity`, reached at `depth` over a tag of
        `weight` from a parent whose relevance came by `paths`; and the ways it came, unless
        that is only over its own path."""
        damping = self.strategy.damping
        found = best_paths(
            (hops + 1, path_relevance(relevance, similarity, hop_share(weight, damping, hops)))
            for hops, relevance in paths
        )
        relevance = found[-1][1]
        return relevance, None if found == ((depth, relevance),) else found

    async def run(self, initial_roots: Sequence[str]) -> list[Hit]:
        strategy = self.strategy
        if initial_roots:
            for root in await self.storage.get(list(initial_roots)):
                if not matches(self.where, root.node.metadata):
                    continue
                self.anchors.add(root.node.id)
                self.reached[root.node.id] = _Reached(0, (), 0.0, outgoing_tags(root.node.links))
            await self.expand(list(self.anchors))
        if strategy.fetch_k > 0:
            await self._add_roots(strategy.fetch_k)
        for level in range(strategy.depth if strategy.expand_k else 0):
            frontier = [
                node_id
                for node_id, how in self.reached.items()
                if how.depth == level
                and node_id not in self.expanded
                and node_id not in self.anchors
            ]
            frontier.sort(key=lambda node_id: -self._relevance(node_id))
            if not frontier[: strategy.expand_k]:
                break
            await self.expand(frontier[: strategy.expand_k])
        await self._select()
        if self.stats.keep_unselected:
            copies = self.selector.copies
            self.stats.unselected = [
                Candidate(
                    row.id,
                    row.similarity,
                    row.relevance,
                    None if row.id in copies else row.mmr_score,
                    self.reached[row.id].depth,
                    self.reached[row.id].path,
                    self.raised.get(row.id, ()),
                    copies.get(row.id),
                )
                for row in self.selector.unselected()
            ]
        found: dict[str, Hit] = {}
        while True:
            unread = [node_id for node_id in self.selected if node_id not in found]
            hits = await _read_hits(
                self.storage,
                unread,
                self.reached,
                self.where,
                selections=self.selected,
                raised=self.raised,
            )
            found.update((hit.node.id, hit) for hit in hits)
            gone = [node_id for node_id in unread if node_id not in found]
            if not gone:
                return [found[node_id] for node_id in self.selected]
            for node_id in gone:  # a concurrent write deleted it or made it fail the filter
                del self.selected[node_id]
            await self.expand(list(self.selected))  # the last choice's neighbours count now
            await self._select()

    async def _select(self) -> None:
        """Select by MMR until `k` are selected or no candidate is left, expanding each
        choice; when the candidates run out, add the next-nearest passages as roots."""
        strategy = self.strategy
        while len(self.selected) < strategy.k:
            chosen = self.selector.pop_best()
            if chosen is None:
                if self.selector.open_count or not strategy.fetch_k:
                    break  # below the score threshold, or only what initial roots lead to
                if not await self._add_roots(len(self.reached) + strategy.k - len(self.selected)):
                    break
                continue
            self.selected[chosen.id] = chosen
            # The last choice's neighbours could not count.
            if len(self.selected) < strategy.k and self._expandable(chosen.id):
                await self.expand([chosen.id])

    async def _add_roots(self, count: int) -> bool:
        """Add as roots those of the `count` passages nearest the query not reached yet;
        false when there is none.  Called again when the candidates run out before
        `k` are selected (fewer roots than k, a sparse graph), so that a search returns k
        passages whenever the store holds k that pass the filter."""
        fresh = await _new_roots(
            self.storage, self.query, count, self.where, self.reached, stats=self.stats
        )
        if not fresh:
            return False
        self.selector.add(
            [hit.id for hit in fresh],
            [hit.embedding for hit in fresh],
            similarity=[hit.similarity for hit in fresh],
        )
        self.stats.candidates += len(fresh)
        return True

    def _expandable(self, node_id: str) -> bool:
        """Not expanded yet, and under the depth limit."""
        return node_id not in self.expanded and self.reached[node_id].depth < self.strategy.depth

    async def expand(self, node_ids: Sequence[str]) -> None:
        """Query the unvisited outgoing tags of the expandable `node_ids` in one wave; then
        expand any selected node that a shorter path brought under the depth limit."""
        strategy = self.strategy
        parents = [node_id for node_id in node_ids if self._expandable(node_id)]
        self.expanded.update(parents)
        carriers: dict[TagKey, list[str]] = {}
        for parent in parents:
            for tag in self.reached[parent].outgoing - self.visited:
                carriers.setdefault(tag, []).append(parent)
        if not carriers:
            return
        tags = sorted(carriers)
        await self._read(tags)
        self.visited.update(tags)
        reads = [self.tag_reads.pop(tag) for tag in tags]
        # Per new candidate: its best relevance, its hit, the tag and the reach of the parent
        # it came from over that tag, what it inherited over more hops than its depth
        # (`inherited`), and that parent when the tag cites the candidate.
        new: dict[str, tuple[float, TagHit, TagKey, _Reached, Paths | None, str | None]] = {}
        reached, anchors, selector = self.reached, self.anchors, self.selector
        kinds = strategy.structural_kinds
        shortened = False
        for tag, (tag_hits, size, tag_pages, leads) in zip(tags, reads, strict=True):
            tag_carriers = carriers[tag]
            parent = tag_carriers[0]
            if len(tag_carriers) > 1:
                parent = max(tag_carriers, key=self._passed_on)
            parent_relevance = self._relevance(parent)
            how = reached[parent]
            structural = tag[0] in kinds
            passage_weight = page_weight = 0.0 if structural else tag_weight(size)
            passage_share = page_share = hop_share(passage_weight, strategy.damping, how.depth)
            if leads and not structural:  # a page's best passage: a share of the pages'
                page_weight = tag_weight(tag_pages)
                page_share = hop_share(page_weight, strategy.damping, how.depth)
            paths = self.inherited.get(parent)
            for hit in tag_hits:
                if hit.id == parent:  # reached from itself: nothing new
                    continue
                lead = hit.id in leads
                weight = page_weight if lead else passage_weight
                share = page_share if lead else passage_share
                relevance = path_relevance(parent_relevance, hit.similarity, share)
                carried = None
                if paths is not None:
                    relevance, carried = self._through(paths, weight, hit.similarity, how.depth + 1)
                known = reached.get(hit.id)
                if known is None:
                    best = new.get(hit.id)
                    if best is None or relevance > best[0]:
                        cites = is_citation(tag, size, hit.outgoing, kinds)
                        new[hit.id] = (relevance, hit, tag, how, carried, parent if cites else None)
                    continue
                if hit.id in anchors:
                    continue
                current, depth = selector.relevance(hit.id), how.depth + 1
                if relevance > current and is_citation(tag, size, hit.outgoing, kinds):
                    ways = carried or ((depth, relevance),)
                    self._inherit(hit.id, known.depth, min(known.depth, depth), ways)
                    if selector.raise_relevance(hit.id, relevance):
                        self.raised[hit.id] = (*how.path, tag)
                elif depth < known.depth or hit.id in self.inherited:
                    # A way in fewer hops, which raises nothing but may pass on more.
                    ways = tuple((h, min(r, current)) for h, r in carried or ((depth, relevance),))
                    self._inherit(hit.id, known.depth, min(known.depth, depth), ways)
                if depth < known.depth:
                    reached[hit.id] = how.step(tag, hit)
                    shortened |= hit.id in self.selected
        admitted = sorted(
            new.values(), key=lambda item: (-item[0], -item[1].similarity, item[1].id)
        )
        admitted = admitted[: strategy.max_candidates_per_step]
        for _, hit, via, parent_reach, carried, _ in admitted:
            self.reached[hit.id] = parent_reach.step(via, hit)
            if carried is not None:
                self.inherited[hit.id] = carried
        if admitted:
            self.selector.add(
                [hit.id for _, hit, _, _, _, _ in admitted],
                [hit.embedding for _, hit, _, _, _, _ in admitted],
                [relevance for relevance, *_ in admitted],
                [cited_by for *_, cited_by in admitted],
                [hit.similarity for _, hit, _, _, _, _ in admitted],
            )
            self.stats.candidates += len(admitted)
        if shortened:  # a selected passage may be under the depth limit now
            overdue = [node_id for node_id in self.selected if self._expandable(node_id)]
            await self.expand(overdue)

    def _inherit(self, node_id: str, depth: int, depth_after: int, paths: Paths) -> None:
        """Add `paths`, ways a parent found to `node_id` (at `depth` until then, at
        `depth_after` from now on), to those its relevance came by, keeping every way that
        may still pass on the most: a way that raises it, or one in fewer hops (a node first
        found two hops from a root and then one hop from another passes on its relevance as
        having come two hops, and what the shorter way gives it as having come one)."""
        known = self.inherited.get(node_id, ((depth, self.selector.relevance(node_id)),))
        found = best_paths((*known, *paths))
        if len(found) == 1 and found[0][0] <= depth_after:
            self.inherited.pop(node_id, None)  # one way, no longer than its own path
        else:
            self.inherited[node_id] = found

    async def _read(self, tags: Sequence[TagKey]) -> None:
        """Make sure `tags` are in `tag_reads`, reading in the same wave the unvisited tags of
        the `Storage.read_ahead` best open candidates (those still to be expanded)."""
        missing = {tag for tag in tags if tag not in self.tag_reads}
        if not missing:
            return
        still_expanded = self.strategy.k - len(self.selected) - 1  # the last one never is
        width = min(self.storage.read_ahead, still_expanded)
        for node_id in self.selector.leading(width) if width > 0 else ():
            if self._expandable(node_id):
                missing.update(
                    self.reached[node_id].outgoing - self.visited - self.tag_reads.keys()
                )
        wanted = sorted(missing)
        found, sizes_read, pages_read = await self.traversal._search_tags(
            wanted, self.query, self.strategy.adjacent_k, self.where, self.stats
        )
        sizes = await self._tag_sizes(wanted, found, sizes_read)
        pages = await self._tag_pages(wanted, found, sizes, pages_read)
        for tag, tag_hits in zip(wanted, found, strict=True):
            leads = page_leads(tag_hits, sizes[tag], pages[tag])
            self.tag_reads[tag] = (tag_hits, sizes[tag], pages[tag], leads)

    async def _tag_sizes(
        self,
        tags: Sequence[TagKey],
        found: Sequence[Sequence[TagHit]],
        sizes_read: dict[TagKey, int],
    ) -> dict[TagKey, int]:
        """How many passages the search may return link in to each tag (those that pass the
        filter, so passages filtered out never change a result).  Sizes the storage read
        with the tags come first; a page shorter than `adjacent_k` is the whole (filtered)
        tag; the storage counts the others."""
        sizes: dict[TagKey, int] = {}
        unknown = []
        for tag, tag_hits in zip(tags, found, strict=True):
            if tag in sizes_read:
                sizes[tag] = sizes_read[tag]
            elif len(tag_hits) < self.strategy.adjacent_k:
                sizes[tag] = len(tag_hits)
            else:
                unknown.append(tag)
        if unknown:
            sizes.update(await self.storage.tag_sizes(unknown, self.where))
        return sizes

    async def _tag_pages(
        self,
        tags: Sequence[TagKey],
        found: Sequence[Sequence[TagHit]],
        sizes: dict[TagKey, int],
        pages_read: dict[TagKey, int],
    ) -> dict[TagKey, int]:
        """How many pages the passages under each tag belong to, where it matters: for a
        tag that cites pages (`relevance.cites_pages`), is of no structural kind (one passes
        no relevance) and leads to more than one passage; its size elsewhere (each passage
        counts alone).  A tag read whole shows its pages, the storage's read may have
        counted them (`pages_read`), and the storage counts the others'."""
        pages: dict[TagKey, int] = {}
        counted: dict[TagKey, int] = {}
        unknown = []
        structural = self.strategy.structural_kinds
        for tag, tag_hits in zip(tags, found, strict=True):
            if sizes[tag] <= 1 or tag[0] in structural or not cites_pages(tag, tag_hits):
                pages[tag] = sizes[tag]
            elif len(tag_hits) >= sizes[tag]:
                pages[tag] = len({page_of(hit.id) for hit in tag_hits})
            elif tag in pages_read:
                counted[tag] = pages_read[tag]
            else:
                unknown.append(tag)
        if unknown:
            self.stats.page_counts += len(unknown)
            counted.update(await self.storage.tag_pages(unknown, self.where))
        pages.update((tag, max(1, min(count, sizes[tag]))) for tag, count in counted.items())
        return pages
