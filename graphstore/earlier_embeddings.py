"""The embeddings a file's passages had before an ingest, found by text.

A passage's id is its file and its position there (`splitting.Passage.id`), so a paragraph
inserted near the start of a novel's file moves every later passage to another id: matched
by id, each counted as changed and was embedded again (87 s of 330 for one paragraph added
to 15 chapters with e5 on two cores).  Their texts did not change, and the store's model
made their stored embeddings from those texts, so each keeps its own.  So do the passages
of a file renamed (its old name gone): a chapter file renamed moves every passage too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from graphstore.errors import StorageError
from graphstore.nodes import Node, Vector
from graphstore.splitting import FILE
from graphstore.storage import Storage


class EarlierEmbeddings:
    """`GraphStore.aadd_nodes`'s `earlier_embeddings` for an ingest.

    `earlier` maps each recorded file to the ids stored from it when the ingest began, and
    `gone` lists the ids of files no longer there.  A file's passages are read, by text,
    once, when a passage of that file finds none under its own id; only the files of the
    batch at hand are kept, since an ingest writes one file after another.  The gone files'
    passages are read once, for the passages that still found none.  Counts the passages
    asked about (`asked`) and those it found (`matched`)."""

    def __init__(
        self, storage: Storage, earlier: Mapping[str, Sequence[str]], gone: Sequence[str] = ()
    ) -> None:
        self._storage = storage
        self._earlier = earlier
        self._gone = gone
        self._by_file: dict[str, dict[str, Vector]] = {}
        self._gone_texts: dict[str, Vector] | None = None
        self.asked = 0
        self.matched = 0

    async def __call__(self, nodes: list[Node]) -> dict[str, Vector]:
        files = {_file(node) for node in nodes}
        self._by_file = {file: texts for file, texts in self._by_file.items() if file in files}
        for file in files - self._by_file.keys():
            self._by_file[file] = await self._texts(self._earlier.get(file, ()))
        found = {
            node.id: vector
            for node in nodes
            if (vector := self._by_file[_file(node)].get(node.text)) is not None
        }
        if self._gone and len(found) < len(nodes):
            if self._gone_texts is None:
                self._gone_texts = await self._texts(self._gone)
            gone_texts = self._gone_texts
            found |= {
                node.id: gone_texts[node.text]
                for node in nodes
                if node.id not in found and node.text in gone_texts
            }
        self.asked += len(nodes)
        self.matched += len(found)
        return found

    async def _texts(self, ids: Sequence[str]) -> dict[str, Vector]:
        """The stored embeddings of `ids` by text; none when the rows cannot be read (a
        corrupt row: its passage is embedded again, as it would be without this)."""
        if not ids:
            return {}
        try:
            stored = await self._storage.get(list(ids))
        except StorageError:
            return {}
        return {item.node.text: item.embedding for item in stored}


def _file(node: Node) -> str:
    """The recorded file a passage was split from ("" for a node of no file)."""
    return str(node.metadata.get(FILE, ""))
