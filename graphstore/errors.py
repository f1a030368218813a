"""The errors users see: each carries a one-line message naming the problem."""


class GraphStoreError(Exception):
    """Base class of every error the store raises on purpose."""


class InvalidInputError(GraphStoreError, ValueError):
    """The caller passed something the store will not accept; nothing was changed."""


class StoreOpenError(GraphStoreError):
    """The store could not be opened (missing, corrupt or foreign file, unreachable node)."""


class StorageError(GraphStoreError):
    """The backend failed while reading or writing."""
