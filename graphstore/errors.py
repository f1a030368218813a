"""The errors users see: each carries a one-line message naming the problem."""


def one_line(error: BaseException) -> str:
    """The first line of what `error` says (its type's name when it says nothing): how a
    library's error is quoted in one of ours."""
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


class GraphStoreError(Exception):
    """Base class of every error the store raises on purpose."""


class InvalidInputError(GraphStoreError, ValueError):
    """The caller passed something the store will not accept; nothing was changed."""


class InvalidArgumentError(InvalidInputError):
    """An argument of the wrong type or out of its range, named as the Python API names it
    (`lambda_mult`), so that a front end can name it as its user wrote it (`--lambda`)."""

    def __init__(self, argument: str, problem: str) -> None:
        super().__init__(argument, problem)  # both in `args`, so the error pickles
        self.argument = argument
        self.problem = problem

    def __str__(self) -> str:
        return f"{self.argument} {self.problem}"


class StoreOpenError(GraphStoreError):
    """The store could not be opened (missing, corrupt or foreign file, unreachable node)."""


class StorageError(GraphStoreError):
    """The backend failed while reading or writing."""


class StoreReplacedError(StorageError):
    """The store's file was deleted or replaced since this process opened it (`path`)."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


class CorruptRowError(StorageError):
    """A stored row was changed outside graphstore and cannot be read; the others can."""
