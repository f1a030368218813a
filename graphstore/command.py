"""The `graphstore` command's entry point.

Loading the command line takes about half a second (NumPy, the store, the models): a
Ctrl-C in that time ended it with a traceback through whatever was being imported.  This
module imports nothing of graphstore's before it can catch that interrupt.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

INTERRUPTED = 130
"""The status of a command stopped by Ctrl-C (128 + SIGINT), as `graphstore.cli` returns."""


def main(argv: Sequence[str] | None = None) -> int:
    """Load the command line and run it (`graphstore.cli.main`)."""
    try:
        from graphstore.cli import main as run
    except KeyboardInterrupt:
        print("graphstore: interrupted", file=sys.stderr)
        return INTERRUPTED
    return run(argv)
