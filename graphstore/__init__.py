"""graphstore: a graph vector store that links passages by tags instead of stored edges."""

from graphstore.errors import GraphStoreError, InvalidInputError, StorageError, StoreOpenError
from graphstore.links import Link
from graphstore.nodes import Hit, Node
from graphstore.store import GraphStore

__all__ = [
    "GraphStore",
    "GraphStoreError",
    "Hit",
    "InvalidInputError",
    "Link",
    "Node",
    "StorageError",
    "StoreOpenError",
]
