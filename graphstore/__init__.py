"""graphstore: a graph vector store that links passages by tags instead of stored edges."""

from graphstore.errors import (
    GraphStoreError,
    InvalidArgumentError,
    InvalidInputError,
    StorageError,
    StoreOpenError,
)
from graphstore.links import Link
from graphstore.nodes import Candidate, Hit, Node
from graphstore.store import GraphStore
from graphstore.strategy import Strategy
from graphstore.traversal import TraversalStats

__all__ = [
    "Candidate",
    "GraphStore",
    "GraphStoreError",
    "Hit",
    "InvalidArgumentError",
    "InvalidInputError",
    "Link",
    "Node",
    "StorageError",
    "StoreOpenError",
    "Strategy",
    "TraversalStats",
]
