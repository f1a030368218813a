"""graphstore: a graph vector store that links passages by tags instead of stored edges.

The names below are imported on first use, so that the `graphstore` command
(`graphstore.command`) starts without NumPy and can end quietly on a Ctrl-C that comes
while the rest is still loading.
"""

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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

_HOMES = {
    "Candidate": "graphstore.nodes",
    "GraphStore": "graphstore.store",
    "GraphStoreError": "graphstore.errors",
    "Hit": "graphstore.nodes",
    "InvalidArgumentError": "graphstore.errors",
    "InvalidInputError": "graphstore.errors",
    "Link": "graphstore.links",
    "Node": "graphstore.nodes",
    "StorageError": "graphstore.errors",
    "StoreOpenError": "graphstore.errors",
    "Strategy": "graphstore.strategy",
    "TraversalStats": "graphstore.traversal",
}

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


if not TYPE_CHECKING:  # a type checker sees the imports above, and no other name

    def __getattr__(name: str) -> object:
        """A name of `__all__` from its module, or a submodule (`graphstore.errors`, which
        an eager import of the names used to load as a side effect)."""
        home = _HOMES.get(name)
        if home is not None:
            return getattr(import_module(home), name)
        missing = AttributeError(f"module {__name__!r} has no attribute {name!r}")
        if not name.isidentifier():
            raise missing
        try:
            return import_module(f"{__name__}.{name}")
        except ImportError as error:  # no such module, or one whose extra is not installed
            raise missing from error

    def __dir__() -> list[str]:
        return sorted({*globals(), *_HOMES})
