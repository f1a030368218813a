"""The embeddings a file's passages had before an ingest, found by text.

A passage's id is its file and its position there (`splitting.Passage.id`), so a paragraph
inserted near the start of a novel's file moves every later passage to another id: matched
by id, each counted as changed and was embedded again (87 s of 330 for one paragraph added
to 15 chapters with e5 on two cores).  Their texts did not change, and the store's model
made their stored embeddings from those texts, so each keeps its own.  So do the passages
of a file renamed (its old name gone): a chapter file renamed moves every passage too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence

from graphstore.errors import StorageError
from graphstore.nodes import Node, StoredNode, Vector
from graphstore.splitting import FILE
from graphstore.storage import Storage

READ_CHUNK = 512
"""Passages read by one `Storage.get` while looking for earlier texts."""


class EarlierEmbeddings:
    """`GraphStore.aadd_nodes`'s `earlier_embeddings` for an ingest.

    `earlier` maps each recorded file to the ids stored from it when the ingest began.  A
    file's earlier passages are read once, when a passage of it finds no embedding under
    its own id, and their embeddings kept by text until the ingest moves on to other files
    (it writes one file after another); they are kept, not read again by id, because the
    ingest's first batches overwrite those ids.  `gone` lists the ids of files no longer
    there: a file new to the store (renamed, perhaps) looks its texts up among them, read
    once and kept as text hashes, whose embeddings are read when a text matches (nothing
    overwrites a gone file's passages before the ingest removes them).  `embedded` holds the
    ids of the passages no earlier embedding was found for."""

    def __init__(
        self, storage: Storage, earlier: Mapping[str, Sequence[str]], gone: Sequence[str] = ()
    ) -> None:
        self._storage = storage
        self._earlier = earlier
        self._gone = gone
        self._by_file: dict[str, dict[str, Vector]] = {}
        self._gone_ids: dict[int, str] | None = None
        self.embedded: set[str] = set()

    async def __call__(self, nodes: list[Node]) -> dict[str, Vector]:
        files = {_file(node) for node in nodes}
        self._by_file = {file: texts for file, texts in self._by_file.items() if file in files}
        for file in files - self._by_file.keys():
            self._by_file[file] = {
                item.node.text: item.embedding
                async for item in self._read(self._earlier.get(file, ()))
            }
        found: dict[str, Vector] = {}
        new_files: list[Node] = []
        for node in nodes:
            vector = self._by_file[_file(node)].get(node.text)
            if vector is not None:
                found[node.id] = vector
            elif self._gone and _file(node) not in self._earlier:
                new_files.append(node)
        if new_files:
            found |= await self._from_gone_files(new_files)
        self.embedded.update(node.id for node in nodes if node.id not in found)
        return found

    async def _from_gone_files(self, nodes: Sequence[Node]) -> dict[str, Vector]:
        """The embeddings of `nodes`' texts among the gone files' passages."""
        if self._gone_ids is None:
            self._gone_ids = {
                hash(item.node.text): item.node.id async for item in self._read(self._gone)
            }
        wanted = {
            node.id: earlier_id
            for node in nodes
            if (earlier_id := self._gone_ids.get(hash(node.text))) is not None
        }
        texts = {node.id: node.text for node in nodes}
        stored = {item.node.id: item async for item in self._read(sorted(set(wanted.values())))}
        return {
            node_id: stored[earlier_id].embedding
            for node_id, earlier_id in wanted.items()
            if earlier_id in stored and stored[earlier_id].node.text == texts[node_id]
        }

    async def _read(self, ids: Sequence[str]) -> AsyncIterator[StoredNode]:
        """The stored passages of `ids`, `READ_CHUNK` at a time; a chunk that cannot be read
        (a corrupt row) is passed over: its passages are embedded again, as they would be
        without this."""
        for start in range(0, len(ids), READ_CHUNK):
            try:
                stored = await self._storage.get(list(ids[start : start + READ_CHUNK]))
            except StorageError:
                continue
            for item in stored:
                yield item


def _file(node: Node) -> str:
    """The recorded file a passage was split from ("" for a node of no file)."""
    return str(node.metadata.get(FILE, ""))
